"""Heterogeneous graphs: the data object, a built-in synthetic citation graph,
``.npz`` files and a converter from PyTorch Geometric's ``HeteroData``.

The layout is PyTorch Geometric's: node features per node type
(``x_dict[node_type]``, ``[N_t, F_t]``), edges per edge type
(``edge_index_dict[(src_type, relation, dst_type)]``, int64 ``[2, E]``, row 0
the source node's index among ``src_type`` nodes, row 1 the destination's among
``dst_type`` nodes), and labels + split masks on one *target* node type.

``.npz`` key scheme (``save_hetgraph`` writes it, ``load_hetgraph`` reads it)::

    x/<node_type>                      float [N_t, F_t]   one per node type
    edge_index/<src>__<relation>__<dst> int   [2, E]       one per edge type
    y                                  int   [N_target]   class per target node
    train_mask, val_mask, test_mask    bool  [N_target]   optional: all three, or
                                                         none (a seeded 60/20/20 split)
    target                             str   0-d          the labelled node type

Each key is one ``<key>.npy`` member (``numpy.savez``'s layout); each may appear
once.  Type names follow ``rtx.data.naming``.  Nothing is pickled, and
``load_hetgraph`` reads through ``rtx.load``'s checked reader (sizes checked
before anything is read; see ``rtx.serialization``).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import numpy as np

from ..data.hetero_data import HeteroData
from ..data.naming import EdgeType, check_edge_type, check_name
from ..serialization import _read_npz, _write_npz

Metadata = tuple[list[str], list[EdgeType]]

__all__ = [
    "EdgeType", "HeteroGraph", "Metadata", "from_pyg", "load_hetgraph", "random_split",
    "save_hetgraph", "synthetic_hetgraph",
]


class HeteroGraph(HeteroData):
    """A ``HeteroData`` with features on every node type and labels on one
    ``target`` node type: the graph of rtx's main job (``synthetic_hetgraph``,
    ``load_hetgraph``, ``from_pyg``).

    ``HeteroGraph(x_dict, edge_index_dict, y, train_mask, val_mask, test_mask,
    target="paper")`` checks everything (names by ``rtx.data.naming``, shapes,
    dtypes, finite features, index ranges, that each edge type's node types
    exist) and raises ``ValueError`` / ``TypeError`` / ``IndexError`` naming the
    offending type.  It stores numpy arrays: ``data[nt].x`` (float ``[N_t, F_t]``),
    ``data[et].edge_index`` (int64 ``[2, E]``) and, on the target type, ``y``
    (int64), ``train_mask`` / ``val_mask`` / ``test_mask`` (bool); graph-level
    ``target`` and ``num_classes``.  ``data.y`` and the masks are shortcuts for the
    target's.  Everything that takes a ``HeteroData`` takes it.
    """

    def __init__(self, x_dict: dict[str, np.ndarray],
                 edge_index_dict: dict[EdgeType, np.ndarray], y: np.ndarray,
                 train_mask: np.ndarray, val_mask: np.ndarray, test_mask: np.ndarray,
                 target: str = "paper") -> None:
        super().__init__()
        if not isinstance(x_dict, dict) or not x_dict:
            raise ValueError("x_dict must be a non-empty dict node type -> features")
        xs: dict[str, np.ndarray] = {}
        for nt, x in x_dict.items():
            check_name(nt, "node type")
            a = np.asarray(x)
            if a.dtype.kind != "f":
                raise TypeError(f"features of node type {nt!r} must be floating point, "
                                f"got {a.dtype}")
            if a.ndim != 2:
                raise ValueError(f"features of node type {nt!r} must be 2-D [num_nodes, "
                                 f"num_features], got shape {a.shape}")
            finite = np.isfinite(a)
            if not finite.all():
                raise ValueError(f"features of node type {nt!r} hold "
                                 f"{finite.size - int(np.count_nonzero(finite))} non-finite "
                                 "value(s) (NaN or inf)")
            xs[nt] = a
        if not isinstance(edge_index_dict, dict):
            raise ValueError("edge_index_dict must be a dict edge type -> [2, E] indices")
        eis: dict[EdgeType, np.ndarray] = {}
        for et, ei in edge_index_dict.items():
            s, _, d = check_edge_type(et)
            for nt in (s, d):
                if nt not in xs:
                    raise ValueError(f"edge type {et!r} refers to node type {nt!r}, which has "
                                     f"no features (node types: {sorted(xs)})")
            a = np.asarray(ei)
            if a.dtype.kind not in "iu":
                raise TypeError(f"edge_index of {et!r} must be integer, got {a.dtype}")
            if a.ndim != 2 or a.shape[0] != 2:
                raise ValueError(f"edge_index of {et!r} must have shape [2, E], got {a.shape}")
            a = a.astype(np.int64, copy=False)
            if a.size:
                for row, nt in ((0, s), (1, d)):
                    lo, hi = int(a[row].min()), int(a[row].max())
                    n = xs[nt].shape[0]
                    if lo < 0 or hi >= n:
                        raise IndexError(f"edge_index of {et!r}: row {row} holds index "
                                         f"{lo if lo < 0 else hi}, outside the {n} "
                                         f"{nt!r} nodes")
            eis[tuple(et)] = a  # type: ignore[index]
        if target not in xs:
            raise ValueError(f"target node type {target!r} is not a node type "
                             f"(node types: {sorted(xs)})")
        n = xs[target].shape[0]
        ya = np.asarray(y)
        if ya.dtype.kind not in "iu" or ya.shape != (n,):
            raise ValueError(f"y must be an integer array of shape ({n},) (one class per "
                             f"{target!r} node), got {ya.dtype} {ya.shape}")
        if n and ya.min() < 0:
            raise ValueError(f"y holds a negative class ({int(ya.min())})")
        if n and int(ya.max()) > np.iinfo(np.int64).max:  # checked before the int64 cast
            raise ValueError(f"y holds class {int(ya.max())}, beyond int64")
        masks = {}
        for name, m in (("train_mask", train_mask), ("val_mask", val_mask),
                        ("test_mask", test_mask)):
            ma = np.asarray(m)
            if ma.dtype != np.bool_ or ma.shape != (n,):
                raise ValueError(f"{name} must be a bool array of shape ({n},) (one per "
                                 f"{target!r} node), got {ma.dtype} {ma.shape}")
            masks[name] = ma
        for nt, a in xs.items():
            self[nt].x = a
        for et_, a in eis.items():
            self[et_].edge_index = a
        store = self[target]
        store.y = ya.astype(np.int64, copy=False)
        for name, ma in masks.items():
            store[name] = ma
        self.target = target
        self.num_classes = int(store.y.max()) + 1 if n else 0

    # shortcuts for the target node type's labels and masks
    @property
    def y(self) -> np.ndarray:
        return self[self.target].y

    @property
    def train_mask(self) -> np.ndarray:
        return self[self.target].train_mask

    @property
    def val_mask(self) -> np.ndarray:
        return self[self.target].val_mask

    @property
    def test_mask(self) -> np.ndarray:
        return self[self.target].test_mask

    @property
    def num_features_dict(self) -> dict[str, int]:
        return {nt: int(x.shape[1]) for nt, x in self.x_dict.items()}

    def astype(self, dtype: Any) -> HeteroGraph:
        """A copy with every feature array converted to ``dtype``."""
        return HeteroGraph({nt: x.astype(dtype) for nt, x in self.x_dict.items()},
                           dict(self.edge_index_dict), self.y, self.train_mask,
                           self.val_mask, self.test_mask, self.target)

    def copy(self) -> HeteroGraph:
        """A shallow copy (new stores, the same arrays)."""
        out = object.__new__(HeteroGraph)
        HeteroData.__init__(out)
        out.__setstate__(self.__getstate__())
        return out

    __copy__ = copy


def random_split(n: int, seed: int = 0, train: float = 0.6,
                 val: float = 0.2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint train/val/test masks over ``n`` nodes (a seeded permutation)."""
    perm = np.random.default_rng(seed).permutation(n)
    n_tr, n_va = int(round(train * n)), int(round(val * n))
    masks = []
    for idx in (perm[:n_tr], perm[n_tr:n_tr + n_va], perm[n_tr + n_va:]):
        m = np.zeros(n, dtype=bool)
        m[idx] = True
        masks.append(m)
    return masks[0], masks[1], masks[2]


def _dedup(src: np.ndarray, dst: np.ndarray, n_dst: int) -> np.ndarray:
    """``[2, E]`` of the distinct (src, dst) pairs, sorted by (src, dst)."""
    key = np.unique(src.astype(np.int64) * n_dst + dst)
    return np.stack([key // n_dst, key % n_dst])


def _pick_homophilous(rng: np.random.Generator, cls: np.ndarray, pool_by_class: list,
                      pool_size: int, p_same: float) -> np.ndarray:
    """For each entry of ``cls``: a pool member of the same class with probability
    ``p_same``, else a uniformly random pool member (vectorised)."""
    out: np.ndarray = np.asarray(rng.integers(0, pool_size, size=cls.shape[0]))
    same = rng.random(cls.shape[0]) < p_same
    k = len(pool_by_class)
    for c in range(k):
        sel = np.flatnonzero(same & (cls == c))
        pool = pool_by_class[c]
        if sel.size and pool.size:
            out[sel] = pool[rng.integers(0, pool.size, size=sel.size)]
    return out


def synthetic_hetgraph(num_papers: int = 3000, seed: int = 0, num_classes: int = 8,
                       dtype: Any = np.float32) -> HeteroGraph:
    """A deterministic citation-style heterogeneous graph (no download).

    Node types ``paper`` (64 features), ``author`` (32) and ``subject`` (16);
    ``num_papers // 2`` authors and ``max(num_classes, num_papers // 50)``
    subjects (capped at 400).  Every paper, author and subject has a class;
    papers cite (~4 each), are written by (1-3 authors) and have (1-2)
    subjects mostly of their own class (homophily 0.6-0.75).  Paper features
    carry only a weak class signal, so a feature-only model does poorly and the
    graph is what makes the task solvable.  Edge types::

        ('author', 'writes', 'paper'),   ('paper', 'written_by', 'author'),
        ('paper', 'cites', 'paper'),
        ('paper', 'has_subject', 'subject'), ('subject', 'rev_has_subject', 'paper')

    Labels are on ``paper`` (``num_classes`` classes); masks are a seeded
    60/20/20 split.  Vectorised numpy: ~100,000 papers (~1.1M edges) take a
    second or two.  The same ``(num_papers, seed)`` always gives the same arrays.
    """
    if num_papers < num_classes or num_papers < 10:
        raise ValueError(f"num_papers must be at least max(10, num_classes), got {num_papers}")
    if num_classes < 2:
        raise ValueError(f"num_classes must be at least 2, got {num_classes}")
    rng = np.random.default_rng(seed)
    k = num_classes
    n_p = int(num_papers)
    n_a = max(k, n_p // 2)
    n_s = min(400, max(k, n_p // 50))
    f_p, f_a, f_s = 64, 32, 16

    y = rng.integers(0, k, size=n_p)
    y_a = rng.integers(0, k, size=n_a)
    y_s = np.arange(n_s) % k
    papers_by = [np.flatnonzero(y == c) for c in range(k)]
    authors_by = [np.flatnonzero(y_a == c) for c in range(k)]
    subjects_by = [np.flatnonzero(y_s == c) for c in range(k)]

    # Features: class centroid * strength + unit noise. Paper signal is weak.
    def feats(cls: np.ndarray, dim: int, strength: float) -> np.ndarray:
        centroids = rng.standard_normal((k, dim))
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
        x = rng.standard_normal((cls.shape[0], dim)) + strength * centroids[cls]
        return x.astype(dtype)

    x_p = feats(y, f_p, 1.0)
    x_a = feats(y_a, f_a, 1.5)
    x_s = feats(y_s, f_s, 3.0)

    # author -> paper: 1..3 authors per paper, 75% of them of the paper's class.
    n_auth = rng.integers(1, 4, size=n_p)
    p_of = np.repeat(np.arange(n_p), n_auth)
    a_of = _pick_homophilous(rng, y[p_of], authors_by, n_a, 0.75)
    writes = _dedup(a_of, p_of, n_p)

    # paper -> paper citations: ~4 per paper (1..7), 60% same class, no self-citations.
    n_cit = rng.integers(1, 8, size=n_p)
    citing = np.repeat(np.arange(n_p), n_cit)
    cited = _pick_homophilous(rng, y[citing], papers_by, n_p, 0.6)
    keep = citing != cited
    cites = _dedup(citing[keep], cited[keep], n_p)

    # paper -> subject: 1..2 subjects per paper, 70% of the paper's class.
    n_sub = rng.integers(1, 3, size=n_p)
    p_of = np.repeat(np.arange(n_p), n_sub)
    s_of = _pick_homophilous(rng, y[p_of], subjects_by, n_s, 0.7)
    has_subject = _dedup(p_of, s_of, n_s)

    tr, va, te = random_split(n_p, seed=seed + 1)
    edge_index_dict: dict[EdgeType, np.ndarray] = {
        ("author", "writes", "paper"): writes,
        ("paper", "written_by", "author"): np.ascontiguousarray(writes[::-1]),
        ("paper", "cites", "paper"): cites,
        ("paper", "has_subject", "subject"): has_subject,
        ("subject", "rev_has_subject", "paper"): np.ascontiguousarray(has_subject[::-1]),
    }
    return HeteroGraph({"paper": x_p, "author": x_a, "subject": x_s}, edge_index_dict,
                       y.astype(np.int64), tr, va, te, target="paper")


def save_hetgraph(data: HeteroGraph, path: str | os.PathLike[str], *,
                  compress: bool = False) -> None:
    """Write ``data`` to exactly ``path`` as ``.npz`` (key scheme in the module docstring).

    The graph is checked again first (a ``HeteroGraph`` changed after it was
    built is caught here, before anything is written), and the file is written
    atomically: a failure leaves any previous ``path`` as it was.
    ``compress=True`` deflates the members (as ``numpy.savez_compressed``).
    """
    if not isinstance(data, HeteroGraph):
        raise TypeError(f"save_hetgraph expects a HeteroGraph, got {type(data).__name__}")
    g = HeteroGraph(dict(data.x_dict), dict(data.edge_index_dict), data.y, data.train_mask,
                    data.val_mask, data.test_mask, data.target)
    members = [(f"x/{nt}.npy", x) for nt, x in g.x_dict.items()]
    members += [("edge_index/" + "__".join(et) + ".npy", ei)
                for et, ei in g.edge_index_dict.items()]
    members += [("y.npy", g.y), ("train_mask.npy", g.train_mask),
                ("val_mask.npy", g.val_mask), ("test_mask.npy", g.test_mask),
                ("target.npy", np.array(g.target))]
    _write_npz(path, members, compress, "save_hetgraph")


_MASKS = ("train_mask", "val_mask", "test_mask")
_ONE_HOT_LIMIT = 2**31      # bytes of one dense one-hot feature matrix [N, N] float32


def load_hetgraph(path: str | os.PathLike[str], target: str | None = None,
                  seed: int = 0) -> HeteroGraph:
    """Read a heterogeneous graph from an ``.npz`` file (key scheme in the module
    docstring).  ``target`` overrides the file's ``target`` entry; a file with
    none of the three masks gets a seeded 60/20/20 split (one with only some of
    them is an error).  Anything malformed — not a zip, a member that is not a
    plain ``.npy`` array or appears twice, a bad shape, dtype or index, NaN or
    inf in the features — is a ``ValueError`` naming the file and what is wrong;
    a missing file is ``FileNotFoundError``."""
    label = os.fspath(path)
    files = {name[:-4]: a for name, a in _read_npz(path, "load_hetgraph").items()}
    x_dict: dict[str, np.ndarray] = {}
    edge_index_dict: dict[EdgeType, np.ndarray] = {}
    for key, a in files.items():
        if key.startswith("x/"):
            x_dict[key[2:]] = a
        elif key.startswith("edge_index/"):
            parts = key[len("edge_index/"):].split("__")
            if len(parts) != 3:
                raise ValueError(f"{label}: key {key!r} must be "
                                 "'edge_index/<src>__<relation>__<dst>'")
            edge_index_dict[(parts[0], parts[1], parts[2])] = a
        elif key not in ("y", "target", *_MASKS):
            raise ValueError(f"{label}: unexpected key {key!r} (expected x/<type>, "
                             "edge_index/<src>__<rel>__<dst>, y, *_mask, target)")
    if not x_dict:
        raise ValueError(f"{label}: no node features (keys 'x/<node_type>')")
    if "y" not in files:
        raise ValueError(f"{label}: no labels (key 'y')")
    y = files["y"]
    if y.ndim != 1:
        raise ValueError(f"{label}: member 'y' must be 1-D (one class per target node), "
                         f"got shape {y.shape}")
    if target is None and "target" in files:
        t = files["target"]
        if t.dtype.kind != "U" or t.ndim != 0:
            raise ValueError(f"{label}: member 'target' must be a 0-d string (the labelled "
                             f"node type), got {t.dtype} {t.shape}")
        target = str(t)
    if target is None:
        if len(x_dict) != 1:
            raise ValueError(f"{label}: no 'target' entry; pass target= (one of "
                             f"{sorted(x_dict)})")
        target = next(iter(x_dict))
    given = [m for m in _MASKS if m in files]
    if len(given) == 3:
        tr, va, te = files["train_mask"], files["val_mask"], files["test_mask"]
    elif not given:
        tr, va, te = random_split(y.shape[0], seed=seed)
    else:
        missing = [m for m in _MASKS if m not in files]
        raise ValueError(f"{label}: gives {', '.join(given)} but not {', '.join(missing)}: "
                         "give all three masks, or none for a seeded 60/20/20 split")
    try:
        return HeteroGraph(x_dict, edge_index_dict, y, tr, va, te, target=target)
    except (TypeError, IndexError, ValueError) as exc:
        raise ValueError(f"{label}: {exc}") from exc


def from_pyg(hetero_data: Any, target: str | None = None, seed: int = 0,
             featureless: str | None = None) -> HeteroGraph:
    """Convert a ``torch_geometric.data.HeteroData`` (PyG is optional: only this
    function needs it).  ``target`` is the node type holding ``y`` (found
    automatically when exactly one has it); its ``train_mask`` / ``val_mask`` /
    ``test_mask`` are used when present, else a seeded 60/20/20 split.

    A ``HeteroGraph`` has features on every node type: a node type without ``x``
    (PyG's DBLP ``conference``) is a ValueError unless ``featureless="one_hot"``
    (``x = I``, as HGB's code does).  For node ids instead (the input of an
    ``Embedding``), convert with ``rtx.data.HeteroData.from_pyg(data,
    featureless="ids")``, which keeps any node type."""
    if featureless not in (None, "one_hot", "ids"):
        raise ValueError(f"from_pyg: featureless must be None or 'one_hot', got "
                         f"{featureless!r}")
    if featureless == "ids":
        raise ValueError("from_pyg: a HeteroGraph has features on every node type; for node "
                         "ids use rtx.data.HeteroData.from_pyg(data, featureless='ids'), or "
                         "featureless='one_hot' here")
    try:
        HeteroData = importlib.import_module("torch_geometric.data").HeteroData
    except ImportError as exc:
        raise ImportError("from_pyg needs PyTorch Geometric (pip install torch_geometric); "
                          "without it, build a HeteroGraph from numpy arrays or use "
                          "load_hetgraph") from exc
    if not isinstance(hetero_data, HeteroData):
        raise TypeError(f"from_pyg expects a torch_geometric.data.HeteroData, got "
                        f"{type(hetero_data).__name__}")

    def arr(t: Any) -> np.ndarray:
        return np.asarray(t.detach().cpu().numpy())

    x_dict = {}
    for nt in hetero_data.node_types:
        store = hetero_data[nt]
        if getattr(store, "x", None) is None:
            if featureless is None:
                raise ValueError(f"node type {nt!r} has no features 'x' (pass "
                                 "featureless='one_hot', or convert with "
                                 "rtx.data.HeteroData.from_pyg(data, featureless='ids'))")
            n = store.num_nodes
            if n is None:
                raise ValueError(f"node type {nt!r} has neither features 'x' nor num_nodes")
            if n * n * 4 > _ONE_HOT_LIMIT:
                raise MemoryError(f"from_pyg: one-hot features for the {n} nodes of {nt!r} "
                                  f"would take {n * n * 4 / 2**30:.1f} GiB; use "
                                  "rtx.data.HeteroData.from_pyg(data, featureless='ids')")
            x_dict[nt] = np.eye(n, dtype=np.float32)
            continue
        x_dict[nt] = arr(store.x)
    edge_index_dict = {tuple(et): arr(hetero_data[et].edge_index)
                       for et in hetero_data.edge_types}
    if target is None:
        have_y = [nt for nt in hetero_data.node_types
                  if getattr(hetero_data[nt], "y", None) is not None]
        if len(have_y) != 1:
            raise ValueError(f"pass target= (node types with labels 'y': {have_y})")
        target = have_y[0]
    store = hetero_data[target]
    if getattr(store, "y", None) is None:
        raise ValueError(f"target node type {target!r} has no labels 'y'")
    y = arr(store.y)
    masks = [getattr(store, m, None) for m in _MASKS]
    if all(m is not None for m in masks):
        tr, va, te = (arr(m) for m in masks)
    elif all(m is None for m in masks):
        tr, va, te = random_split(y.shape[0], seed=seed)
    else:
        has = [n for n, m in zip(_MASKS, masks, strict=True) if m is not None]
        lacks = [n for n in _MASKS if n not in has]
        raise ValueError(f"target node type {target!r} has {', '.join(has)} but not "
                         f"{', '.join(lacks)}: give all three masks, or none for a seeded "
                         "60/20/20 split")
    return HeteroGraph(x_dict, edge_index_dict, y, tr, va, te, target=target)
