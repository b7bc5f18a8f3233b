"""ogbn-mag-sized heterogeneous graphs: a synthetic generator and a reader for
OGB's own download.

``synthetic_mag(scale, seed)`` generates a graph with ogbn-mag's schema and, at
``scale=1``, its size (1,939,743 nodes, 21.1M edges); nothing is downloaded.
``load_ogb_mag(root)`` reads the directory OGB's downloader writes for
ogbn-mag.  Both return an ``rtx.data.HeteroData`` in the layout of PyG's
``torch_geometric.datasets.OGB_MAG``::

    paper           x [N, 128] float32, year [N] int64, y [N] int64,
                    train_mask / val_mask / test_mask [N] bool
    author, institution, field_of_study        num_nodes only (no features)
    (author, affiliated_with, institution), (author, writes, paper),
    (paper, cites, paper), (paper, has_topic, field_of_study)
                    edge_index int64 [2, E] (row 0 source, row 1 destination)
    graph-level     target = "paper", num_classes

With ``add_reverse=True`` the relations are made undirected as PyG's
``T.ToUndirected()`` does: every relation between two different node types gets
its reverse ``(dst, rev_<rel>, src)`` with ``edge_index[[1, 0]]`` (the same edge
order), and ``(paper, cites, paper)``, whose source and destination types are the
same, gets no ``rev_cites``: its ``edge_index`` becomes the symmetric,
coalesced one (each citation both ways, duplicates removed, sorted by
``(source, destination)``).
"""

from __future__ import annotations

import gzip
import math
import os
import re
import warnings
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..creation import from_numpy
from ..data import HeteroData
from ..data.naming import EdgeType, check_name

__all__ = ["MAG_EDGE_TYPES", "MAG_NODE_TYPES", "MAG_NUM_CLASSES", "MAG_NUM_EDGES",
           "MAG_NUM_FEATURES", "MAG_NUM_NODES", "MAG_SPLIT", "load_ogb_mag", "synthetic_mag"]

# ---------------------------------------------------------------- ogbn-mag's size
MAG_NODE_TYPES = ("paper", "author", "institution", "field_of_study")
MAG_EDGE_TYPES: tuple[EdgeType, ...] = (
    ("author", "affiliated_with", "institution"),
    ("author", "writes", "paper"),
    ("paper", "cites", "paper"),
    ("paper", "has_topic", "field_of_study"),
)
MAG_NUM_NODES = {"paper": 736_389, "author": 1_134_649, "institution": 8_740,
                 "field_of_study": 59_965}
MAG_NUM_EDGES: dict[EdgeType, int] = {
    ("author", "affiliated_with", "institution"): 1_043_998,
    ("author", "writes", "paper"): 7_145_660,
    ("paper", "cites", "paper"): 5_416_271,
    ("paper", "has_topic", "field_of_study"): 7_505_078,
}
MAG_SPLIT = {"train": 629_571, "valid": 64_879, "test": 41_939}  # papers < 2018, 2018, 2019
MAG_NUM_CLASSES = 349
MAG_NUM_FEATURES = 128

# ------------------------------------------------- the generator's knobs (documented)
_TRAIN_YEARS = np.arange(2010, 2018)
_TRAIN_YEAR_WEIGHTS = np.linspace(1.0, 1.7, _TRAIN_YEARS.size)  # more papers each year
_CLASS_ZIPF = 0.7        # venue sizes ~ (rank + 1) ** -0.7
_FEATURE_SIGNAL = 0.20   # x = noise + class centroid, N(0, 1) and N(0, 0.2^2) per dimension
_HOMOPHILY = {"cites": 0.2, "writes": 0.3, "has_topic": 0.3}  # P(drawn from the class)
# Pareto shapes of the node weights (an end of an edge is drawn in proportion to its
# node's weight; smaller = heavier tail)
_TAIL = {"authors_per_paper": 2.5, "papers_per_author": 2.2, "topics_per_paper": 2.2,
         "papers_per_topic": 1.3, "references": 2.8, "citations": 1.6,
         "authors_per_institution": 1.2}
_PER_PAPER_CAP = 40.0    # a paper's own weights (authors, topics, references) are truncated
                         # there: no paper lists thousands of topics
_MAX_DENSITY = 0.5       # a relation may hold at most half of its possible pairs
_UNIFORM_AFTER = 8       # refill rounds drawn by weight before falling back to uniform
_INT64_MAX = np.iinfo(np.int64).max


# =========================================================================== generator
def _counts(scale: float) -> tuple[dict[str, int], dict[EdgeType, int], dict[str, int]]:
    """Node, edge and split counts at ``scale`` (each target rounded half up)."""
    def r(n: int) -> int:
        return int(math.floor(n * scale + 0.5))
    nodes = {nt: r(n) for nt, n in MAG_NUM_NODES.items()}
    edges = {et: r(n) for et, n in MAG_NUM_EDGES.items()}
    va, te = r(MAG_SPLIT["valid"]), r(MAG_SPLIT["test"])
    split = {"train": nodes["paper"] - va - te, "valid": va, "test": te}
    return nodes, edges, split


def _check_scale(scale: Any, seed: Any) -> float:
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise TypeError(f"synthetic_mag: scale must be a number, got {type(scale).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"synthetic_mag: seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"synthetic_mag: seed must be >= 0, got {seed}")
    s = float(scale)
    if not math.isfinite(s) or s <= 0:
        raise ValueError(f"synthetic_mag: scale must be a finite number > 0, got {scale!r}")
    nodes, edges, split = _counts(s)
    smallest = (MAG_NUM_CLASSES - 0.5) / MAG_NUM_NODES["paper"]
    if nodes["paper"] < MAG_NUM_CLASSES:
        raise ValueError(f"synthetic_mag: scale={scale!r} gives {nodes['paper']} papers, fewer "
                         f"than the {MAG_NUM_CLASSES} classes (each class needs a paper); the "
                         f"smallest scale is {math.ceil(smallest * 1e6) / 1e6:g}")
    for nt, n in nodes.items():
        if n < 1:
            raise ValueError(f"synthetic_mag: scale={scale!r} leaves no {nt!r} nodes")
    for name, n in split.items():
        if n < 1:
            raise ValueError(f"synthetic_mag: scale={scale!r} leaves the {name} split empty")
    for (src, rel, dst), e in edges.items():
        pairs = (nodes[src] * (nodes[src] - 1) // 2 if src == dst
                 else nodes[src] * nodes[dst])
        if e < 1 or e > _MAX_DENSITY * pairs:
            raise ValueError(f"synthetic_mag: scale={scale!r} gives {e} {rel!r} edges for "
                             f"{pairs} possible pairs (need 1 <= edges <= {_MAX_DENSITY:g} x "
                             "pairs for a graph without duplicate edges)")
    if nodes["author"] * nodes["paper"] > _INT64_MAX // 4:
        raise ValueError(f"synthetic_mag: scale={scale!r} is too large")
    return s


def _pareto(rng: np.random.Generator, n: int, shape: float,
            cap: float | None = None) -> np.ndarray:
    """Heavy-tailed positive weights (classical Pareto, minimum 1, at most ``cap``)."""
    w = rng.pareto(shape, n) + 1.0
    return w if cap is None else np.minimum(w, cap)


def _multiset(rng: np.random.Generator, k: int, p: np.ndarray) -> np.ndarray:
    """``k`` draws (with replacement) of ``arange(len(p))`` with probabilities ``p``,
    sorted (multinomial counts, then repeat)."""
    if k <= 0:
        return np.empty(0, np.int64)
    return np.repeat(np.arange(p.size, dtype=np.int64), rng.multinomial(k, p))


def _normalised(w: np.ndarray) -> np.ndarray:
    p = w / w.sum()
    p[-1] = max(0.0, 1.0 - p[:-1].sum())  # multinomial wants sum(p[:-1]) <= 1
    return p


class _Side:
    """One end of a relation: node weights (heavy-tailed) and, optionally, classes
    with per-class pools for homophilous draws."""

    def __init__(self, w: np.ndarray, cls: np.ndarray | None, num_classes: int) -> None:
        self.n = w.size
        self.p = _normalised(w)
        self.pools: list[tuple[np.ndarray, np.ndarray]] = []
        if cls is not None:
            order = np.argsort(cls, kind="stable")
            seg = np.searchsorted(cls[order], np.arange(num_classes + 1))
            for c in range(num_classes):
                members = order[seg[c]:seg[c + 1]]
                self.pools.append((members, _normalised(w[members]) if members.size
                                   else np.empty(0)))

    def draw(self, rng: np.random.Generator, k: int) -> np.ndarray:
        """``k`` nodes by weight, in random order."""
        return rng.permutation(_multiset(rng, k, self.p))

    def draw_by_class(self, rng: np.random.Generator, cls: np.ndarray) -> np.ndarray:
        """For each entry of ``cls``, a node of that class by weight (a node of any
        class where the class has none)."""
        out = np.empty(cls.size, np.int64)
        slots = rng.permutation(cls.size)
        slots = slots[np.argsort(cls[slots], kind="stable")]   # grouped by class, random within
        seg = np.searchsorted(cls[slots], np.arange(len(self.pools) + 1))
        for c, (members, p) in enumerate(self.pools):
            lo, hi = seg[c], seg[c + 1]
            if hi > lo:
                out[slots[lo:hi]] = (members[_multiset(rng, hi - lo, p)] if members.size
                                     else _multiset(rng, hi - lo, self.p))
        return out


def _relation_draw(rng: np.random.Generator, a: _Side, b: _Side, a_cls: np.ndarray | None,
                   homophily: float, min_one: bool) -> Callable[[int, bool], tuple[
                       np.ndarray, np.ndarray]]:
    """A candidate-pair drawer: ``draw(k, first)`` gives ``k`` pairs ``(i, j)``,
    ``i`` by ``a``'s weights (with ``min_one``, the first round starts with every
    ``a`` node once), ``j`` of ``i``'s class with probability ``homophily`` (by
    ``b``'s class pools), else any ``b`` node, both by weight."""
    def draw(k: int, first: bool) -> tuple[np.ndarray, np.ndarray]:
        if first and min_one:
            i = np.concatenate([np.arange(a.n, dtype=np.int64), _multiset(rng, k - a.n, a.p)])
        else:
            i = _multiset(rng, k, a.p)
        j = np.empty(i.size, np.int64)
        same = (rng.random(i.size) < homophily) if a_cls is not None else np.zeros(i.size, bool)
        g = np.flatnonzero(~same)
        j[g] = b.draw(rng, g.size)
        s = np.flatnonzero(same)
        if s.size:
            assert a_cls is not None
            j[s] = b.draw_by_class(rng, a_cls[i[s]])
        return i, j
    return draw


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    keys = np.sort(keys)
    if keys.size:
        keep = np.empty(keys.size, bool)
        keep[0] = True
        np.not_equal(keys[1:], keys[:-1], out=keep[1:])
        keys = keys[keep]
    return keys


def _fill(rng: np.random.Generator, E: int, draw: Callable[[int, bool], np.ndarray],
          uniform: Callable[[int], np.ndarray]) -> np.ndarray:
    """Exactly ``E`` distinct keys, sorted: the distinct keys of a first draw of ``E``
    candidates, topped up from further draws (new keys only, a random subset of
    them when there are more than needed), so nothing of a first draw of at most
    ``E`` keys (which may hold guaranteed edges) is ever dropped.  After
    ``_UNIFORM_AFTER`` rounds the top-ups are drawn uniformly (dense small graphs
    converge fast that way)."""
    keys = _sorted_unique(draw(E, True))
    if keys.size > E:  # only a drawer without guaranteed edges draws more than asked
        keys = np.sort(keys[rng.permutation(keys.size)[:E]])
    rounds = 0
    while keys.size < E:
        need = E - keys.size
        k = need + need // 4 + 16
        cand = _sorted_unique(draw(k, False) if rounds < _UNIFORM_AFTER else uniform(k))
        pos = np.minimum(np.searchsorted(keys, cand), keys.size - 1)
        fresh = cand[keys[pos] != cand] if keys.size else cand
        if fresh.size > need:
            fresh = np.sort(fresh[rng.permutation(fresh.size)[:need]])
        keys = np.insert(keys, np.searchsorted(keys, fresh), fresh)
        rounds += 1
        if rounds > 10_000:  # pragma: no cover - the density check makes this unreachable
            raise RuntimeError("synthetic_mag: could not draw enough distinct edges")
    return keys


def _edge_index(keys: np.ndarray, n_dst: int) -> np.ndarray:
    ei = np.empty((2, keys.size), np.int64)
    np.floor_divide(keys, n_dst, out=ei[0])
    np.subtract(keys, ei[0] * n_dst, out=ei[1])
    return ei


def _years(rng: np.random.Generator, split: dict[str, int]) -> np.ndarray:
    """Exactly ``split`` papers in train (2010-2017, more each year), 2018 and 2019,
    in random order."""
    w = _TRAIN_YEAR_WEIGHTS / _TRAIN_YEAR_WEIGHTS.sum() * split["train"]
    per_year = np.floor(w).astype(np.int64)
    rest = split["train"] - int(per_year.sum())
    per_year[np.argsort(-(w - per_year), kind="stable")[:rest]] += 1  # largest remainder
    years = np.repeat(np.concatenate([_TRAIN_YEARS, [2018, 2019]]),
                      np.concatenate([per_year, [split["valid"], split["test"]]]))
    return rng.permutation(years).astype(np.int64)


def synthetic_mag(scale: float = 1.0, seed: int = 0, add_reverse: bool = True) -> HeteroData:
    """A synthetic graph with ogbn-mag's schema and, at ``scale=1``, its size.

    Node types ``paper`` (736,389; 128-d float32 ``x``, int64 ``year``, ``y`` over
    349 classes, year-split ``train_mask`` / ``val_mask`` / ``test_mask``),
    ``author`` (1,134,649), ``institution`` (8,740) and ``field_of_study``
    (59,965), the last three without features (``num_nodes`` only).  Relations
    ``writes`` (author -> paper, 7,145,660), ``affiliated_with`` (author ->
    institution, 1,043,998), ``cites`` (paper -> paper, 5,416,271) and
    ``has_topic`` (paper -> field_of_study, 7,505,078); with ``add_reverse``
    (default) also ``rev_writes``, ``rev_affiliated_with``, ``rev_has_topic`` and
    a symmetric ``cites`` (2 x 5,416,271 edges), as ``T.ToUndirected()`` makes
    them (see the module docstring).

    ``scale`` multiplies every node, edge and split count (each rounded half up);
    the counts are exact.  The split is by year as OGB's: train = papers before
    2018 (2010-2017), valid = 2018, test = 2019, with OGB's 629,571 / 64,879 /
    41,939 papers at scale 1.  Degrees are heavy-tailed (Pareto node weights:
    authors per paper, papers per author, citations, topics per paper, papers per
    topic, institution sizes); every paper has at least one author and one topic.
    Citations point back in time (a paper cites only papers of an earlier or the
    same year), so none is reciprocated.  Classes need the graph: the features
    carry a weak class signal (a class centroid of 0.2 x the noise per
    dimension), while citations, authors and topics prefer the paper's class
    (authors and topics have classes; an edge end is drawn from the paper's class
    with probability 0.2 for citations, 0.3 for authors and topics, else from
    all).  Every relation holds distinct edges, sorted by ``(source, destination)``.

    Deterministic for ``(scale, seed)``.  Vectorised numpy; scale 1 takes 10-25 s
    on two shared cores and peaks at about 1.4 GB of RSS, 1.0 GB of it the result
    (docs/data.md).  ``ValueError``
    for a scale that is not > 0 or so small that the graph would be degenerate
    (fewer papers than classes: the smallest scale is about 0.000474).
    """
    s = _check_scale(scale, seed)
    nodes, edges, split = _counts(s)
    C = MAG_NUM_CLASSES
    n_p, n_a = nodes["paper"], nodes["author"]
    n_i, n_f = nodes["institution"], nodes["field_of_study"]
    # one independent stream per component: changing one never shifts the others
    (r_y, r_year, r_x, r_w, r_c, r_t, r_aff, r_cls) = (
        np.random.default_rng(ss) for ss in np.random.SeedSequence([int(seed), 19]).spawn(8))

    # classes: venue sizes Zipf-like, every class has a paper
    pc = _normalised((np.arange(C) + 1.0) ** -_CLASS_ZIPF)[r_y.permutation(C)]
    y = r_y.permutation(np.concatenate([np.arange(C), _multiset(r_y, n_p - C, pc)]))
    year = _years(r_year, split)

    # features: N(0, 1) noise + a weak class centroid
    x = r_x.standard_normal((n_p, MAG_NUM_FEATURES), dtype=np.float32)
    mu = (_FEATURE_SIGNAL * r_x.standard_normal((C, MAG_NUM_FEATURES))).astype(np.float32)
    step = 1 << 15
    for lo in range(0, n_p, step):
        x[lo:lo + step] += mu[y[lo:lo + step]]

    author_cls = _multiset(r_cls, n_a, pc)
    r_cls.shuffle(author_cls)
    field_cls = _multiset(r_cls, n_f, pc)
    r_cls.shuffle(field_cls)

    # writes: papers (>= 1 author each, heavy-tailed) x authors (productivity, class)
    authors = _Side(_pareto(r_w, n_a, _TAIL["papers_per_author"]), author_cls, C)
    papers_w = _Side(_pareto(r_w, n_p, _TAIL["authors_per_paper"], _PER_PAPER_CAP), None, C)
    draw_w = _relation_draw(r_w, papers_w, authors, y, _HOMOPHILY["writes"], True)

    def writes(k: int, first: bool) -> np.ndarray:
        p, a = draw_w(k, first)
        return a * n_p + p

    def uniform_writes(k: int) -> np.ndarray:
        return r_w.integers(0, n_a, k) * n_p + r_w.integers(0, n_p, k)

    E = edges[("author", "writes", "paper")]
    ei_writes = _edge_index(_fill(r_w, E, writes, uniform_writes), n_p)
    del authors, papers_w

    # has_topic: papers (>= 1 topic each) x fields (very heavy-tailed, class)
    fields = _Side(_pareto(r_t, n_f, _TAIL["papers_per_topic"]), field_cls, C)
    papers_t = _Side(_pareto(r_t, n_p, _TAIL["topics_per_paper"], _PER_PAPER_CAP), None, C)
    draw_t = _relation_draw(r_t, papers_t, fields, y, _HOMOPHILY["has_topic"], True)

    def topics(k: int, first: bool) -> np.ndarray:
        p, f = draw_t(k, first)
        return p * n_f + f

    def uniform_topics(k: int) -> np.ndarray:
        return r_t.integers(0, n_p, k) * n_f + r_t.integers(0, n_f, k)

    E = edges[("paper", "has_topic", "field_of_study")]
    ei_topic = _edge_index(_fill(r_t, E, topics, uniform_topics), n_f)
    del fields, papers_t

    # cites: a citing paper (by its reference-list weight) cites an earlier paper (by
    # year, ties at random; by its citation weight, often of its own class); pairs
    # pointing forward in time are redrawn, so out- and in-degrees keep their tails
    rank = np.empty(n_p, np.int64)
    rank[np.lexsort((r_c.random(n_p), year))] = np.arange(n_p)
    citing = _Side(_pareto(r_c, n_p, _TAIL["references"], _PER_PAPER_CAP), None, C)
    cited = _Side(_pareto(r_c, n_p, _TAIL["citations"]), y, C)
    draw_c = _relation_draw(r_c, citing, cited, y, _HOMOPHILY["cites"], False)

    def cites(k: int, first: bool) -> np.ndarray:
        p, q = draw_c(2 * k + 16, first)   # about half point back in time
        return (p * n_p + q)[rank[q] < rank[p]]

    def uniform_cites(k: int) -> np.ndarray:
        p, q = r_c.integers(0, n_p, k), r_c.integers(0, n_p, k)
        later = rank[p] > rank[q]
        return (np.where(later, p, q) * n_p + np.where(later, q, p))[p != q]

    E = edges[("paper", "cites", "paper")]
    ei_cites = _edge_index(_fill(r_c, E, cites, uniform_cites), n_p)
    del citing, cited

    # affiliated_with: authors (productive ones more often) x institutions (sizes)
    aff_a = _Side(np.sqrt(_pareto(r_aff, n_a, _TAIL["papers_per_author"])), None, C)
    insts = _Side(_pareto(r_aff, n_i, _TAIL["authors_per_institution"]), None, C)
    draw_aff = _relation_draw(r_aff, aff_a, insts, None, 0.0, False)

    def affiliations(k: int, first: bool) -> np.ndarray:
        a, i = draw_aff(k, first)
        return a * n_i + i

    def uniform_aff(k: int) -> np.ndarray:
        return r_aff.integers(0, n_a, k) * n_i + r_aff.integers(0, n_i, k)

    E = edges[("author", "affiliated_with", "institution")]
    ei_aff = _edge_index(_fill(r_aff, E, affiliations, uniform_aff), n_i)

    data = HeteroData()
    paper = data["paper"]
    paper.x = from_numpy(x)
    paper.year = from_numpy(year)
    paper.y = from_numpy(y)
    paper.train_mask = from_numpy(year < 2018)
    paper.val_mask = from_numpy(year == 2018)
    paper.test_mask = from_numpy(year == 2019)
    data["author"].num_nodes = n_a
    data["institution"].num_nodes = n_i
    data["field_of_study"].num_nodes = n_f
    for et, ei in zip(MAG_EDGE_TYPES, (ei_aff, ei_writes, ei_cites, ei_topic), strict=True):
        data[et].edge_index = from_numpy(ei)
    del ei_aff, ei_writes, ei_cites, ei_topic
    if add_reverse:
        _add_reverse(data)
    data.target = "paper"
    data.num_classes = C
    return data


def _add_reverse(data: HeteroData) -> None:
    """``T.ToUndirected()`` in place: ``(dst, rev_<rel>, src)`` for a relation between
    two node types; a relation within one type becomes symmetric and coalesced."""
    counts = data.num_nodes_dict
    for (src, rel, dst), store in list(data.edge_items()):
        ei = np.asarray(store.edge_index.numpy())
        if src != dst:
            data[dst, f"rev_{rel}", src].edge_index = from_numpy(np.ascontiguousarray(ei[::-1]))
        else:
            n = counts[src]
            keys = np.concatenate([ei[0] * n + ei[1], ei[1] * n + ei[0]])
            store.edge_index = from_numpy(_edge_index(_sorted_unique(keys), n))


# ============================================================================ reader
_CHUNK = 1 << 23  # decompressed bytes parsed at a time
_INT_RE = re.compile(rb"\s*[+-]?[0-9]+\s*")
_FLOAT_RE = re.compile(rb"\s*[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|nan|inf|"
                       rb"infinity)\s*", re.IGNORECASE)


class MissingFileError(FileNotFoundError, ValueError):
    """A file of the OGB download is missing (a ``FileNotFoundError``, and a
    ``ValueError`` as every other problem with the download)."""


def _bad(path: str, line: int | None, msg: str) -> ValueError:
    return ValueError(f"{path}: line {line}: {msg}" if line is not None else f"{path}: {msg}")


def _need(path: str) -> str:
    if not os.path.isfile(path):
        raise MissingFileError(2, "load_ogb_mag: missing file of the ogbn-mag download", path)
    return path


def _read_all(path: str) -> bytes:
    try:
        with gzip.open(_need(path), "rb") as f:
            return f.read()
    except (OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _bad(path, None, f"not a readable gzip file ({exc})") from None


def _blocks(path: str) -> Iterator[tuple[int, bytes]]:
    """``(first line number, whole lines)`` of a gzip file, about ``_CHUNK``
    decompressed bytes at a time (a missing final newline is supplied)."""
    try:
        with gzip.open(_need(path), "rb") as f:
            carry, line = b"", 1
            while True:
                block = f.read(_CHUNK)
                data = carry + block if carry else block
                if not block:
                    if data:
                        yield line, data if data.endswith(b"\n") else data + b"\n"
                    return
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    carry = data
                    continue
                body, carry = data[:cut], data[cut:]
                yield line, body
                line += body.count(b"\n")
    except (OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _bad(path, None, f"not a readable gzip file ({exc})") from None


def _diagnose(body: bytes, ncols: int, is_int: bool, path: str, line0: int) -> ValueError:
    """The first bad line of ``body`` (the slow path, run only on a parse failure)."""
    pat = _INT_RE if is_int else _FLOAT_RE
    for i, ln in enumerate(body.split(b"\n")[:-1]):
        fields = ln.split(b",")
        if len(fields) != ncols:
            what = "an empty line" if not ln.strip() else f"{len(fields)} columns"
            return _bad(path, line0 + i, f"{what}, expected {ncols} comma-separated columns")
        for f in fields:
            if pat.fullmatch(f) is None:
                kind = "an integer" if is_int else "a number"
                return _bad(path, line0 + i, f"{f.strip()[:40]!r} is not {kind}")
            if is_int and not -_INT64_MAX - 1 <= int(f) <= _INT64_MAX:
                return _bad(path, line0 + i, f"{f.strip()[:40]!r} does not fit in int64")
    return _bad(path, line0, "cannot be parsed")  # pragma: no cover - defensive


def _parse(body: bytes, ncols: int, dtype: Any, path: str, line0: int) -> np.ndarray:
    """``body`` (whole lines of ``ncols`` comma-separated numbers) as ``[lines, ncols]``."""
    nlines = body.count(b"\n")
    buf = np.frombuffer(body, np.uint8)
    seps = np.flatnonzero((buf == 44) | (buf == 10))
    is_int = np.dtype(dtype).kind == "i"
    ok = seps.size == nlines * ncols
    if ok:
        nl = (buf[seps] == 10).reshape(nlines, ncols)
        ok = bool(nl[:, -1].all()) and not nl[:, :-1].any()
    del seps
    if ok:
        text = body[:-1].replace(b"\n", b",")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                vals = np.fromstring(text, dtype=dtype, sep=",")
            except (ValueError, DeprecationWarning):
                ok = False
        del text
    if ok:
        ok = vals.size == nlines * ncols
        if ok and is_int:  # strtol saturates: confirm the extreme values
            ok = not ((vals == _INT64_MAX) | (vals == -_INT64_MAX - 1)).any()
    if not ok:
        raise _diagnose(body, ncols, is_int, path, line0)
    return vals.reshape(nlines, ncols)


def _rows(path: str, ncols: int | None, dtype: Any) -> Iterator[tuple[int, np.ndarray]]:
    """``(first line number, [rows, ncols] block)`` over a numeric gzip CSV;
    ``ncols=None`` takes the first line's column count."""
    for line0, body in _blocks(path):
        if ncols is None:
            ncols = body[:body.index(b"\n")].count(b",") + 1
        yield line0, _parse(body, ncols, dtype, path, line0)


def _check_range(col: np.ndarray, n: int, path: str, line0: int, what: str) -> None:
    bad = (col < 0) | (col >= n)
    if bad.any():
        i = int(np.argmax(bad))
        raise _bad(path, line0 + i, f"{what} {int(col[i])} is out of range [0, {n})")


def _read_column(path: str, n: int, what: str, lo: int | None = None) -> np.ndarray:
    """``n`` int64 values, one per line (``lo``: the smallest value allowed;
    ``what``: the ``n`` rows expected, for messages)."""
    out = np.empty(n, np.int64)
    filled = 0
    for line0, a in _rows(path, 1, np.int64):
        k = a.shape[0]
        if filled + k > n:
            raise _bad(path, line0 + n - filled, f"more rows than {what}")
        if lo is not None and (a < lo).any():
            i = int(np.argmax(a[:, 0] < lo))
            raise _bad(path, line0 + i, f"{int(a[i, 0])} is below {lo}")
        out[filled:filled + k] = a[:, 0]
        filled += k
    if filled != n:
        raise _bad(path, None, f"holds {filled} rows, expected {what}")
    return out


def _read_features(path: str, n: int, nt: str) -> np.ndarray:
    out: np.ndarray | None = None
    filled = 0
    for line0, a in _rows(path, None, np.float32):
        if out is None:
            out = np.empty((n, a.shape[1]), np.float32)
        k = a.shape[0]
        if filled + k > n:
            raise _bad(path, line0 + n - filled, f"more than the {n} {nt!r} nodes of "
                       "num-node-dict.csv.gz")
        fin = np.isfinite(a).all(axis=1)
        if not fin.all():
            raise _bad(path, line0 + int(np.argmin(fin)), "a non-finite feature value")
        out[filled:filled + k] = a
        filled += k
    if filled != n:
        raise _bad(path, None, f"holds {filled} rows, but num-node-dict.csv.gz gives {n} "
                   f"{nt!r} nodes")
    return out if out is not None else np.empty((0, 0), np.float32)


def _read_edges(path: str, E: int, n_src: int, n_dst: int, et: EdgeType) -> np.ndarray:
    ei = np.empty((2, E), np.int64)
    filled = 0
    for line0, a in _rows(path, 2, np.int64):
        k = a.shape[0]
        if filled + k > E:
            raise _bad(path, line0 + E - filled, f"more than the {E} edges of "
                       "num-edge-list.csv.gz")
        _check_range(a[:, 0], n_src, path, line0, f"source {et[0]!r} index")
        _check_range(a[:, 1], n_dst, path, line0, f"destination {et[2]!r} index")
        ei[:, filled:filled + k] = a.T
        filled += k
    if filled != E:
        raise _bad(path, None, f"holds {filled} edges, but num-edge-list.csv.gz gives {E}")
    return ei


def _text_lines(path: str) -> list[str]:
    try:
        text = _read_all(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(path, None, f"not UTF-8 text ({exc})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.rstrip("\r") for ln in lines]


def _header_table(path: str, parse: Callable[[str], Any], kind: str) -> dict[str, Any]:
    """A header line of node types and one line of values (pandas' layout)."""
    lines = _text_lines(path)
    if len(lines) != 2:
        raise _bad(path, None, f"holds {len(lines)} lines; expected a header of node types "
                   "and one line of values (one graph)")
    names, values = lines[0].split(","), lines[1].split(",")
    for nt in names:
        try:
            check_name(nt)
        except (TypeError, ValueError) as exc:
            raise _bad(path, 1, f"bad node type: {exc}") from None
    if len(set(names)) != len(names):
        raise _bad(path, 1, "a node type appears twice")
    if len(values) != len(names):
        raise _bad(path, 2, f"{len(values)} columns, but the header names {len(names)}")
    out = {}
    for nt, v in zip(names, values, strict=True):
        try:
            out[nt] = parse(v.strip())
        except ValueError:
            raise _bad(path, 2, f"{v.strip()[:40]!r} ({nt}) is not {kind}") from None
    return out


def _count(v: str) -> int:
    if _INT_RE.fullmatch(v.encode()) is None or int(v) < 0 or int(v) > _INT64_MAX:
        raise ValueError(v)
    return int(v)


def _flag(v: str) -> bool:
    t = v.lower()
    if t in ("true", "1"):
        return True
    if t in ("false", "0"):
        return False
    raise ValueError(v)


def _resolve(root: str | os.PathLike[str]) -> str:
    r = os.fspath(root)
    if os.path.isdir(os.path.join(r, "raw")):
        return r
    sub = os.path.join(r, "ogbn_mag")
    if os.path.isdir(sub):
        return sub
    raise MissingFileError(2, "load_ogb_mag: no ogbn-mag download (expected <root>/raw or "
                           "<root>/ogbn_mag/raw)", os.path.join(r, "ogbn_mag", "raw"))


def load_ogb_mag(root: str | os.PathLike[str], add_reverse: bool = False) -> HeteroData:
    """Read ogbn-mag from the directory OGB's downloader writes.

    ``root`` is the dataset folder (``.../ogbn_mag``, holding ``raw/`` and
    ``split/``) or its parent (the ``root`` passed to OGB's
    ``NodePropPredDataset(name="ogbn-mag", root=...)``).  Read (gzip CSVs, as
    OGB's ``read_csv_heterograph_raw``, ``read_node_label_hetero`` and
    ``read_nodesplitidx_split_hetero`` read them)::

        raw/num-node-dict.csv.gz                 header of node types, one row of counts
        raw/triplet-type-list.csv.gz             head,relation,tail per line
        raw/relations/<h>___<r>___<t>/edge.csv.gz         src,dst per line
        raw/relations/<h>___<r>___<t>/num-edge-list.csv.gz  the edge count
        raw/node-feat/<type>/node-feat.csv.gz    features (types that have them)
        raw/node-feat/<type>/node_year.csv.gz    year (types that have it)
        raw/nodetype-has-label.csv.gz            header of node types, True/False
        raw/node-label/<type>/node-label.csv.gz  class per node (labelled types)
        split/time/nodetype-has-split.csv.gz     header of node types, True/False
        split/time/<type>/{train,valid,test}.csv.gz   node indices

    ``edge_reltype.csv.gz``, ``nodetype-has-feat.csv.gz``, ``mapping/`` and
    ``processed/`` are not needed.  The result has ``synthetic_mag``'s layout:
    paper ``x``, ``year``, ``y``, ``train_mask`` / ``val_mask`` / ``test_mask``,
    ``num_nodes`` for the featureless types, the four relations as written,
    ``target`` (the one labelled type) and ``num_classes`` (``y.max() + 1``, as
    PyG's ``OGB_MAG``).  Reverse relations only with ``add_reverse=True`` (PyG's
    ``OGB_MAG`` adds none either; ``T.ToUndirected()``'s rules, module docstring).

    Each file is streamed once into its preallocated result (no pandas, no
    intermediate copy of a whole file).  A malformed file is a ``ValueError``
    naming the file and, where there is one, the line: a wrong number of
    columns, a value that is not an integer (or a number, for features), an index
    out of range, a row count that disagrees with ``num-node-dict.csv.gz`` /
    ``num-edge-list.csv.gz``, overlapping splits, a file that is not gzip.  A
    missing file is a ``FileNotFoundError`` (also a ``ValueError``) naming it.
    """
    ds = _resolve(root)
    raw = os.path.join(ds, "raw")
    split_dir = os.path.join(ds, "split", "time")
    p_nodes = os.path.join(raw, "num-node-dict.csv.gz")
    counts: dict[str, int] = _header_table(p_nodes, _count, "a node count")
    p_trip = os.path.join(raw, "triplet-type-list.csv.gz")
    triplets: list[EdgeType] = []
    for i, ln in enumerate(_text_lines(p_trip), 1):
        parts = ln.split(",")
        if len(parts) != 3:
            raise _bad(p_trip, i, f"{len(parts)} columns, expected head,relation,tail")
        for part in parts:
            try:
                check_name(part, "name")
            except (TypeError, ValueError) as exc:
                raise _bad(p_trip, i, str(exc)) from None
        h, r, t = parts
        for nt in (h, t):
            if nt not in counts:
                raise _bad(p_trip, i, f"node type {nt!r} is not in num-node-dict.csv.gz")
        if (h, r, t) in triplets:
            raise _bad(p_trip, i, f"{(h, r, t)!r} appears twice")
        triplets.append((h, r, t))
    if not triplets:
        raise _bad(p_trip, None, "lists no relations")
    triplets.sort()  # OGB's order
    p_lab = os.path.join(raw, "nodetype-has-label.csv.gz")
    has_label = _header_table(p_lab, _flag, "True or False")
    p_spl = os.path.join(split_dir, "nodetype-has-split.csv.gz")
    has_split = _header_table(p_spl, _flag, "True or False")
    for p, table in ((p_lab, has_label), (p_spl, has_split)):
        for nt in table:
            if nt not in counts:
                raise _bad(p, 1, f"node type {nt!r} is not in num-node-dict.csv.gz")
    labelled = [nt for nt, v in has_label.items() if v]
    if len(labelled) != 1:
        raise _bad(p_lab, 2, f"{len(labelled)} node types have labels; ogbn-mag has one")
    target = labelled[0]
    if not has_split.get(target, False):
        raise _bad(p_spl, 2, f"the labelled node type {target!r} has no split")

    # every file needed, checked before the long reads
    def rel_dir(et: EdgeType) -> str:
        return os.path.join(raw, "relations", "___".join(et))
    split_files = {name: os.path.join(split_dir, target, f"{name}.csv.gz")
                   for name in ("train", "valid", "test")}
    p_label = os.path.join(raw, "node-label", target, "node-label.csv.gz")
    for p in (p_label, *split_files.values(),
              *(os.path.join(rel_dir(et), f) for et in triplets
                for f in ("edge.csv.gz", "num-edge-list.csv.gz"))):
        _need(p)

    order = [nt for nt in MAG_NODE_TYPES if nt in counts] + sorted(
        nt for nt in counts if nt not in MAG_NODE_TYPES)
    data = HeteroData()
    for nt in order:
        n = counts[nt]
        store = data[nt]
        feat = os.path.join(raw, "node-feat", nt, "node-feat.csv.gz")
        if os.path.isfile(feat):
            store.x = from_numpy(_read_features(feat, n, nt))
        else:
            store.num_nodes = n
        year = os.path.join(raw, "node-feat", nt, "node_year.csv.gz")
        if os.path.isfile(year):
            store.year = from_numpy(_read_column(
                year, n, f"the {n} {nt!r} nodes of num-node-dict.csv.gz"))
    y = _read_column(p_label, counts[target],
                     f"the {counts[target]} {target!r} nodes of num-node-dict.csv.gz", 0)
    data[target].y = from_numpy(y)
    taken = np.zeros(counts[target], np.int8)   # 0 = in no split yet
    for code, (name, attr) in enumerate((("train", "train_mask"), ("valid", "val_mask"),
                                         ("test", "test_mask")), 1):
        p = split_files[name]
        for line0, a in _rows(p, 1, np.int64):
            idx = a[:, 0]
            _check_range(idx, counts[target], p, line0, f"{target!r} index")
            dup = taken[idx] != 0
            srt = np.sort(idx)
            if not dup.any() and not (srt[1:] == srt[:-1]).any():
                taken[idx] = code
                continue
            first = np.zeros(idx.size, bool)
            first[np.unique(idx, return_index=True)[1]] = True
            i = int(np.argmax(dup | ~first))
            where = ("listed twice" if not dup[i] else
                     f"already in the {('train', 'valid', 'test')[taken[idx[i]] - 1]} split")
            raise _bad(p, line0 + i, f"{target!r} index {int(idx[i])} is {where}")
        data[target][attr] = from_numpy(taken == code)
    for et in triplets:
        p_cnt = os.path.join(rel_dir(et), "num-edge-list.csv.gz")
        cnt = _read_column(p_cnt, 1, "one (the edge count of ogbn-mag's one graph)", 0)
        ei = _read_edges(os.path.join(rel_dir(et), "edge.csv.gz"), int(cnt[0]),
                         counts[et[0]], counts[et[2]], et)
        data[et].edge_index = from_numpy(ei)
    if add_reverse:
        _add_reverse(data)
    data.target = target
    data.num_classes = int(y.max()) + 1 if y.size else 0
    data.validate()
    return data
