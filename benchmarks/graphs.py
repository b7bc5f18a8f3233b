"""Generated graphs of the HetGAT benchmarks (issue 22), deterministic, vectorised numpy.

- :func:`wide_hetgraph`: the issue's wide-feature graph: papers (128-d), authors (64-d)
  and subjects (32-d); six relations, ``writes``, ``cites``, ``has`` and their reverses;
  about 2.5 authors, 1.5 citations and 1.5 subjects per paper.
- :func:`dblp_like`: a graph of HGB-DBLP's shape (4,057 authors with 334-d and 14,328
  papers with 4,231-d sparse bag-of-words features, 7,723 terms with 50-d dense
  features, 20 venues one-hot; author-paper, paper-term, paper-venue and their
  reverses; the authors are labelled, 4 classes), scalable by the paper count.
  :func:`load_dblp` reads HGB's files instead when you have them.
- :func:`relations_hetgraph`: ``R`` relations splitting a fixed edge budget (the
  relation-count scaling benchmark): the same nodes and features for every ``R``.

Every function returns an ``rtx.datasets.HeteroGraph`` (features float32, labels on
one target type, seeded 60/20/20 masks) and gives the same arrays for the same
arguments.  Class signal: every node has a class, edges prefer nodes of the same
class (homophily), features carry a weak class signal, so the graph matters.
"""

from __future__ import annotations

import numpy as np

from rtx.datasets import HeteroGraph, random_split

__all__ = ["DBLP_SHAPE", "dblp_like", "load_dblp", "relations_hetgraph", "wide_hetgraph"]

EdgeType = tuple[str, str, str]

# HGB's DBLP (Lv et al. 2021; PyG's HGBDataset("DBLP")): node counts and feature widths
DBLP_SHAPE = {"author": (4057, 334), "paper": (14328, 4231), "term": (7723, 50),
              "venue": (20, 20)}
DBLP_EDGES = {"author_paper": 19645, "paper_term": 85810, "paper_venue": 14328}


def _classes(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    return rng.integers(0, k, size=n)


def _pick(rng: np.random.Generator, cls: np.ndarray, pool_cls: np.ndarray,
          p_same: float) -> np.ndarray:
    """For each entry of ``cls``: a member of the pool (``pool_cls``: the class of each
    pool member) of the same class with probability ``p_same``, else a uniformly random
    member.  Vectorised: one sort of the pool, one draw per entry."""
    n_pool = pool_cls.shape[0]
    out: np.ndarray = np.asarray(rng.integers(0, n_pool, size=cls.shape[0]))
    order = np.argsort(pool_cls, kind="stable")
    k = int(max(int(pool_cls.max()), int(cls.max()))) + 1
    counts = np.bincount(pool_cls, minlength=k)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    same = (rng.random(cls.shape[0]) < p_same) & (counts[cls] > 0)
    c = cls[same]
    off = (rng.random(c.shape[0]) * counts[c]).astype(np.int64)
    out[same] = order[starts[c] + np.minimum(off, counts[c] - 1)]
    return out


def _dedup(src: np.ndarray, dst: np.ndarray, n_dst: int) -> np.ndarray:
    """``[2, E]`` int64 of the distinct (src, dst) pairs, sorted by (src, dst)."""
    key = np.unique(src.astype(np.int64) * n_dst + dst)
    return np.stack([key // n_dst, key % n_dst])


def _dense(rng: np.random.Generator, cls: np.ndarray, dim: int, k: int,
           strength: float) -> np.ndarray:
    """Unit noise plus ``strength`` times a unit class centroid."""
    cent = rng.standard_normal((k, dim))
    cent /= np.linalg.norm(cent, axis=1, keepdims=True)
    x = rng.standard_normal((cls.shape[0], dim), dtype=np.float32)
    x += (strength * cent[cls]).astype(np.float32)
    return x


def _bag_of_words(rng: np.random.Generator, cls: np.ndarray, dim: int, k: int,
                  words: float, p_class: float) -> np.ndarray:
    """Binary bag-of-words rows (float32): about ``words`` distinct words per row
    (1 + Poisson(words - 1)), each from the row's class's slice of the vocabulary with
    probability ``p_class``, else from anywhere."""
    n = cls.shape[0]
    per = 1 + rng.poisson(words - 1, size=n)
    row = np.repeat(np.arange(n), per)
    m = row.shape[0]
    col = rng.integers(0, dim, size=m)
    own = rng.random(m) < p_class
    width = max(1, dim // k)
    c = cls[row[own]]
    col[own] = c * width + rng.integers(0, width, size=c.shape[0])
    x = np.zeros((n, dim), dtype=np.float32)
    x[row, np.minimum(col, dim - 1)] = 1.0
    return x


def wide_hetgraph(num_papers: int = 30_000, seed: int = 0, num_classes: int = 8) -> HeteroGraph:
    """The wide-feature graph of issue 22.

    ``num_papers`` papers (128-d features), as many authors (64-d) and
    ``min(1000, max(num_classes, num_papers // 30))`` subjects (32-d).  Per paper:
    1-4 authors (2.5 on average, 75 % of its class), 0-3 citations (1.5, 60 % same
    class, no self-citations) and 1-2 subjects (1.5, 70 % of its class); duplicates
    removed.  Relations::

        ('author', 'writes', 'paper'),   ('paper', 'rev_writes', 'author'),
        ('paper', 'cites', 'paper'),     ('paper', 'rev_cites', 'paper'),
        ('paper', 'has', 'subject'),     ('subject', 'rev_has', 'paper')

    Labels on ``paper``; paper features carry a weak class signal (strength 1.0),
    author 1.5, subject 3.0.  30,000 papers: about 0.33M edges; 100,000: 1.1M.
    """
    if num_papers < max(10, num_classes):
        raise ValueError(f"num_papers must be at least max(10, num_classes), got {num_papers}")
    rng = np.random.default_rng(seed)
    k = num_classes
    n_p, n_a = int(num_papers), int(num_papers)
    n_s = min(1000, max(k, n_p // 30))
    y = _classes(rng, n_p, k)
    y_a = _classes(rng, n_a, k)
    y_s = np.arange(n_s) % k
    x = {"paper": _dense(rng, y, 128, k, 1.0), "author": _dense(rng, y_a, 64, k, 1.5),
         "subject": _dense(rng, y_s, 32, k, 3.0)}

    n_auth = rng.integers(1, 5, size=n_p)                # 1..4: 2.5 per paper
    p_of = np.repeat(np.arange(n_p), n_auth)
    writes = _dedup(_pick(rng, y[p_of], y_a, 0.75), p_of, n_p)

    n_cit = rng.integers(0, 4, size=n_p)                 # 0..3: 1.5 per paper
    citing = np.repeat(np.arange(n_p), n_cit)
    cited = _pick(rng, y[citing], y, 0.6)
    keep = citing != cited
    cites = _dedup(citing[keep], cited[keep], n_p)

    n_sub = rng.integers(1, 3, size=n_p)                 # 1..2: 1.5 per paper
    p_of = np.repeat(np.arange(n_p), n_sub)
    has = _dedup(p_of, _pick(rng, y[p_of], y_s, 0.7), n_s)

    def rev(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a[::-1])

    edges: dict[EdgeType, np.ndarray] = {
        ("author", "writes", "paper"): writes, ("paper", "rev_writes", "author"): rev(writes),
        ("paper", "cites", "paper"): cites, ("paper", "rev_cites", "paper"): rev(cites),
        ("paper", "has", "subject"): has, ("subject", "rev_has", "paper"): rev(has),
    }
    tr, va, te = random_split(n_p, seed=seed + 1)
    return HeteroGraph(x, edges, y.astype(np.int64), tr, va, te, target="paper")


def dblp_like(num_papers: int = DBLP_SHAPE["paper"][0], seed: int = 0) -> HeteroGraph:
    """A generated graph of HGB-DBLP's shape, scaled by ``num_papers`` (DBLP: 14,328).

    Authors (334-d bag of words, 4 classes: the target), papers (4,231-d bag of words,
    about 9 words each), terms (50-d dense) and 20 venues (one-hot, as
    ``load_hgb(featureless="one_hot")`` gives DBLP's featureless venues).  Node and edge
    counts scale with ``num_papers / 14,328`` (venues stay 20): about 1.37 authors,
    6 terms and 1 venue per paper.  Relations, named as PyG's ``HGBDataset`` names
    DBLP's::

        ('author', 'to', 'paper'), ('paper', 'to', 'author'), ('paper', 'to', 'term'),
        ('term', 'to', 'paper'),   ('paper', 'to', 'venue'),  ('venue', 'to', 'paper')

    No relation joins a type to itself, so no layer adds self-loops.
    """
    if num_papers < 100:
        raise ValueError(f"num_papers must be at least 100, got {num_papers}")
    rng = np.random.default_rng(seed)
    k = 4
    scale = num_papers / DBLP_SHAPE["paper"][0]
    n_p = int(num_papers)
    n_a = max(k, int(round(DBLP_SHAPE["author"][0] * scale)))
    n_t = max(k, int(round(DBLP_SHAPE["term"][0] * scale)))
    n_v = DBLP_SHAPE["venue"][0]
    y_a = _classes(rng, n_a, k)
    y_p = _classes(rng, n_p, k)
    y_t = _classes(rng, n_t, k)
    y_v = np.arange(n_v) % k
    x = {"author": _bag_of_words(rng, y_a, DBLP_SHAPE["author"][1], k, 12.0, 0.3),
         "paper": _bag_of_words(rng, y_p, DBLP_SHAPE["paper"][1], k, 9.0, 0.3),
         "term": _dense(rng, y_t, DBLP_SHAPE["term"][1], k, 1.0),
         "venue": np.eye(n_v, dtype=np.float32)}

    e_ap = int(round(DBLP_EDGES["author_paper"] * scale))
    p_of = np.concatenate([np.arange(n_p), rng.integers(0, n_p, size=max(0, e_ap - n_p))])
    ap = _dedup(_pick(rng, y_p[p_of], y_a, 0.8), p_of, n_p)
    e_pt = int(round(DBLP_EDGES["paper_term"] * scale))
    p_of = rng.integers(0, n_p, size=e_pt)
    pt = _dedup(p_of, _pick(rng, y_p[p_of], y_t, 0.5), n_t)
    pv = np.stack([np.arange(n_p), _pick(rng, y_p, y_v, 0.8)])

    def rev(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a[::-1])

    edges: dict[EdgeType, np.ndarray] = {
        ("author", "to", "paper"): ap, ("paper", "to", "author"): rev(ap),
        ("paper", "to", "term"): pt, ("term", "to", "paper"): rev(pt),
        ("paper", "to", "venue"): pv, ("venue", "to", "paper"): rev(pv),
    }
    tr, va, te = random_split(n_a, seed=seed + 1)
    return HeteroGraph(x, edges, y_a.astype(np.int64), tr, va, te, target="author")


def load_dblp(path: str) -> HeteroGraph:
    """HGB's DBLP from its files (``rtx.datasets.load_hgb(path, featureless="one_hot")``;
    ``path``: the directory holding ``node.dat``, or one holding ``DBLP/``) as a
    ``HeteroGraph``: edge weights dropped, the labels of unlabelled nodes (``-1``, in no
    mask) set to 0.  HGB's ``label.dat.test`` holds placeholder labels, so its test
    accuracy means nothing: compare the validation accuracy (carved out of
    ``label.dat``)."""
    import os

    from rtx.datasets import load_hgb

    # the dataset's own directory, or one holding DBLP/ (or PyG's DBLP/raw/DBLP/)
    name = None if os.path.isfile(os.path.join(path, "node.dat")) else "DBLP"
    d = load_hgb(path, name, featureless="one_hot")

    def host(v: object) -> np.ndarray:
        return np.asarray(v.numpy() if hasattr(v, "numpy") else v)

    target = str(d.target)
    x = {nt: host(d[nt].x).astype(np.float32, copy=False) for nt in d.node_types}
    edges = {et: host(d[et].edge_index).astype(np.int64) for et in d.edge_types}
    store = d[target]
    y = host(store.y)
    if y.ndim != 1:
        raise ValueError("load_dblp: multi-label y; DBLP is single-label")
    y = np.where(y < 0, 0, y).astype(np.int64)
    return HeteroGraph(x, edges, y, host(store.train_mask).astype(bool),
                       host(store.val_mask).astype(bool), host(store.test_mask).astype(bool),
                       target=target)


# the relation scaling graph: (src, dst) pairs, cycled; no pair joins a type to itself,
# so no layer adds self-loops and the edge count is exactly the budget
_PAIRS = [("author", "paper"), ("paper", "author"), ("subject", "paper"),
          ("paper", "subject"), ("author", "subject"), ("subject", "author")]


def relations_hetgraph(num_relations: int, num_edges: int = 400_000,
                       num_papers: int = 30_000, seed: int = 0,
                       num_classes: int = 8) -> HeteroGraph:
    """``num_relations`` relations that split a fixed budget of ``num_edges`` edges.

    The nodes and features are those of :func:`wide_hetgraph` (papers 128-d, as many
    authors 64-d, subjects 32-d) for every ``num_relations``; relation ``i`` is
    ``(src, f"r{i}", dst)`` with ``(src, dst)`` cycling over the six ordered pairs of
    distinct node types, and holds ``num_edges // num_relations`` edges (the first
    ``num_edges % num_relations`` one more), drawn with homophily 0.7 (multi-edges
    kept: every library handles them the same).  So the edge count, and all per-edge
    work, is the same for every relation count; what grows is the number of relations.
    """
    if num_relations < 1:
        raise ValueError(f"num_relations must be at least 1, got {num_relations}")
    if num_edges < num_relations:
        raise ValueError(f"num_edges ({num_edges}) must be at least num_relations "
                         f"({num_relations})")
    rng = np.random.default_rng(seed)
    k = num_classes
    n = {"paper": int(num_papers), "author": int(num_papers),
         "subject": min(1000, max(k, num_papers // 30))}
    cls = {"paper": _classes(rng, n["paper"], k), "author": _classes(rng, n["author"], k),
           "subject": np.arange(n["subject"]) % k}
    x = {"paper": _dense(rng, cls["paper"], 128, k, 1.0),
         "author": _dense(rng, cls["author"], 64, k, 1.5),
         "subject": _dense(rng, cls["subject"], 32, k, 3.0)}
    erng = np.random.default_rng([seed, num_relations])
    base, extra = divmod(num_edges, num_relations)
    edges: dict[EdgeType, np.ndarray] = {}
    for i in range(num_relations):
        s, d = _PAIRS[i % len(_PAIRS)]
        m = base + (1 if i < extra else 0)
        src = erng.integers(0, n[s], size=m)
        dst = _pick(erng, cls[s][src], cls[d], 0.7)
        order = np.lexsort((src, dst))                       # grouped by destination
        edges[(s, f"r{i}", d)] = np.stack([src[order], dst[order]]).astype(np.int64)
    tr, va, te = random_split(n["paper"], seed=seed + 1)
    return HeteroGraph(x, edges, cls["paper"].astype(np.int64), tr, va, te, target="paper")
