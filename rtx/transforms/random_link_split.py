"""``RandomLinkSplit``: PyG's ``torch_geometric.transforms.RandomLinkSplit`` on ``HeteroData``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..creation import Generator, _rng
from ..data.naming import check_edge_type
from ..utils._negative_sampling import negative_sampling_numpy
from .base import BaseTransform, _checked, cat_dim, edge_index_of, host, is_edge_attr, like, tensor

__all__ = ["RandomLinkSplit"]


def _amount(v: Any, what: str) -> int | float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"RandomLinkSplit: {what} must be an int or a float, got {v!r}")
    if isinstance(v, (float, np.floating)):
        if not 0.0 <= float(v) <= 1.0:
            raise ValueError(f"RandomLinkSplit: {what} as a fraction must lie in [0, 1], "
                             f"got {v}")
        return float(v)
    if v < 0:
        raise ValueError(f"RandomLinkSplit: {what} must be >= 0, got {v}")
    return int(v)


def _take(value: Any, index: np.ndarray, key: str) -> np.ndarray:
    a = host(value)
    return np.take(a, index, axis=cat_dim(key) % a.ndim)


class RandomLinkSplit(BaseTransform):
    """Split the edges of ``edge_types`` into training, validation and test edges
    (PyG's ``RandomLinkSplit``): ``train_data, val_data, test_data = transform(data)``.

    For each edge type, in each of the three returned graphs:

    * ``edge_index`` holds the message-passing edges: the training edges (less
      the ``disjoint_train_ratio`` share kept for supervision only) in
      ``train_data``, all training edges in ``val_data``, training and validation
      edges in ``test_data``; edge attributes with one row per edge follow them;
    * ``edge_label_index`` (``[2, L]``) and ``edge_label`` (``[L]``) hold the
      supervision pairs: the split's positive edges first, then its negatives
      (pairs that are no edge of the input graph, sampled once for all three
      splits, ``neg_sampling_ratio`` per positive; none for training with
      ``add_negative_train_samples=False``).  Labels are 1 / 0 (float32), or,
      when the edge store has ``key`` (int64 classes), the class + 1 / 0.  With
      ``split_labels=True`` they are ``pos_edge_label(_index)`` and
      ``neg_edge_label(_index)`` instead.

    ``num_val`` / ``num_test``: a count or a fraction of the edges.
    ``is_undirected=True`` (for an edge type between one node type that holds both
    directions): each pair is split once (from its ``src <= dst`` direction) and
    its message-passing edges are returned both ways.  ``rev_edge_types[i]`` is
    the reverse relation of ``edge_types[i]`` (from ``ToUndirected``): its
    ``edge_index`` becomes the flipped message-passing edges, so no supervision
    edge leaks through it.

    Randomness: ``seed=`` (each call gives the same split) or ``generator=``
    (an ``rtx.Generator``), else rtx's default generator (``rtx.manual_seed``).
    """

    def __init__(self, num_val: int | float = 0.1, num_test: int | float = 0.2,
                 is_undirected: bool = False, key: str = "edge_label",
                 split_labels: bool = False, add_negative_train_samples: bool = True,
                 neg_sampling_ratio: float = 1.0, disjoint_train_ratio: int | float = 0.0,
                 edge_types: Any = None, rev_edge_types: Any = None, *,
                 seed: int | None = None, generator: Generator | None = None) -> None:
        if isinstance(edge_types, list):
            if rev_edge_types is None:
                rev_edge_types = [None] * len(edge_types)
            if not isinstance(rev_edge_types, list) or len(rev_edge_types) != len(edge_types):
                raise ValueError("RandomLinkSplit: rev_edge_types must be a list as long as "
                                 "edge_types")
        elif isinstance(rev_edge_types, list):
            raise ValueError("RandomLinkSplit: rev_edge_types is a list but edge_types is not")
        if not isinstance(key, str) or not key:
            raise TypeError(f"RandomLinkSplit: key must be a non-empty str, got {key!r}")
        if isinstance(neg_sampling_ratio, bool) or not isinstance(
                neg_sampling_ratio, (int, float, np.integer, np.floating)) \
                or not np.isfinite(neg_sampling_ratio) or neg_sampling_ratio < 0:
            raise ValueError(f"RandomLinkSplit: neg_sampling_ratio must be a number >= 0, got "
                             f"{neg_sampling_ratio!r}")
        if seed is not None and generator is not None:
            raise ValueError("RandomLinkSplit: pass seed= or generator=, not both")
        _rng(seed, generator)  # type-checks the generator now
        self.num_val = _amount(num_val, "num_val")
        self.num_test = _amount(num_test, "num_test")
        self.is_undirected = bool(is_undirected)
        self.key = key
        self.split_labels = bool(split_labels)
        self.add_negative_train_samples = bool(add_negative_train_samples)
        self.neg_sampling_ratio = float(neg_sampling_ratio)
        self.disjoint_train_ratio = _amount(disjoint_train_ratio, "disjoint_train_ratio")
        self.edge_types = edge_types
        self.rev_edge_types = rev_edge_types
        self.seed = seed
        self.generator = generator

    def __call__(self, data: Any) -> Any:
        return self.forward(data)

    def forward(self, data: Any) -> tuple[Any, Any, Any]:
        data = _checked(data, "RandomLinkSplit")
        edge_types, rev_edge_types = self.edge_types, self.rev_edge_types
        if edge_types is None:
            raise ValueError("The 'RandomLinkSplit' transform expects 'edge_types' to be "
                             "specified when operating on 'HeteroData' objects")
        if not isinstance(edge_types, list):
            edge_types, rev_edge_types = [edge_types], [rev_edge_types]
        ets = [self._resolve(data, et) for et in edge_types]
        revs = [None if r is None else self._resolve(data, r) for r in rev_edge_types]
        rng = _rng(self.seed, self.generator)
        train_data, val_data, test_data = data.copy(), data.copy(), data.copy()
        for et in ets:
            if "edge_index" not in data[et]:
                raise ValueError(f"RandomLinkSplit: edge type {et!r} has no edge_index")
        for et, rev in zip(ets, revs, strict=True):
            store = data[et]
            # PyG: only a relation within one node type, and only when its reverse is itself
            is_undirected = self.is_undirected and et[0] == et[2] and rev in (None, et)
            ei = edge_index_of(store, et)
            if is_undirected:
                perm = np.flatnonzero(ei[0] <= ei[1])
                perm = perm[rng.permutation(perm.size)]
            else:
                perm = rng.permutation(ei.shape[1])
            num_val = int(self.num_val * perm.size) if isinstance(self.num_val, float) \
                else self.num_val
            num_test = int(self.num_test * perm.size) if isinstance(self.num_test, float) \
                else self.num_test
            num_train = perm.size - num_val - num_test
            if num_train <= 0:
                raise ValueError(f"RandomLinkSplit: insufficient number of edges for training "
                                 f"in {et!r} ({perm.size} edges, {num_val} for validation, "
                                 f"{num_test} for testing)")
            train_edges = perm[:num_train]
            val_edges = perm[num_train:num_train + num_val]
            test_edges = perm[num_train + num_val:]
            train_val_edges = perm[:num_train + num_val]
            num_disjoint = self.disjoint_train_ratio
            if isinstance(num_disjoint, float):
                num_disjoint = int(num_disjoint * train_edges.size)
            if num_train - num_disjoint <= 0:
                raise ValueError(f"RandomLinkSplit: insufficient number of edges for training "
                                 f"in {et!r} ({num_train} training edges, {num_disjoint} of "
                                 "them disjoint supervision edges)")
            if self.key in store and self._negatives_wanted(num_train, num_disjoint, num_val,
                                                             num_test):
                lab = host(store[self.key])
                if lab.dtype != np.int64:
                    raise TypeError(f"RandomLinkSplit: {self.key} of {et!r} must be int64 "
                                    f"class labels to be shifted by one next to negatives, "
                                    f"got {lab.dtype}")
                if lab.ndim == 0 or lab.shape[0] != ei.shape[1]:
                    raise ValueError(f"RandomLinkSplit: {self.key} of {et!r} has shape "
                                     f"{lab.shape}; it needs one entry per edge")

            self._split(train_data, et, train_edges[num_disjoint:], is_undirected, rev)
            self._split(val_data, et, train_edges, is_undirected, rev)
            self._split(test_data, et, train_val_edges, is_undirected, rev)

            num_neg_train = 0
            if self.add_negative_train_samples:
                base = num_disjoint if num_disjoint > 0 else num_train
                num_neg_train = int(base * self.neg_sampling_ratio)
            num_neg_val = int(num_val * self.neg_sampling_ratio)
            num_neg_test = int(num_test * self.neg_sampling_ratio)
            num_neg = num_neg_train + num_neg_val + num_neg_test
            sizes = store.size()
            if sizes[0] is None or sizes[1] is None:
                raise ValueError(f"RandomLinkSplit: the node types of {et!r} need num_nodes "
                                 "(or x) to sample negatives")
            size: Any = sizes[0] if et[0] == et[2] else (sizes[0], sizes[1])
            neg = negative_sampling_numpy(ei, size, num_neg, method="sparse", rng=rng)
            if neg.shape[1] < num_neg:
                found = neg.shape[1]
                warnings.warn("There are not enough negative edges to satisfy the provided "
                              f"sampling ratio. The ratio will be adjusted to "
                              f"{found / num_neg:.2f}.", stacklevel=2)
                num_neg_train = int((num_neg_train / num_neg) * found)
                num_neg_val = int((num_neg_val / num_neg) * found)
                num_neg_test = found - num_neg_train - num_neg_val
            if num_disjoint > 0:
                train_edges = train_edges[:num_disjoint]
            self._create_label(store, ei, train_edges,
                               neg[:, num_neg_val + num_neg_test:], train_data[et])
            self._create_label(store, ei, val_edges, neg[:, :num_neg_val], val_data[et])
            self._create_label(store, ei, test_edges,
                               neg[:, num_neg_val:num_neg_val + num_neg_test], test_data[et])
        return train_data, val_data, test_data

    def _negatives_wanted(self, num_train: int, num_disjoint: int, num_val: int,
                          num_test: int) -> bool:
        r = self.neg_sampling_ratio
        tr = int((num_disjoint if num_disjoint > 0 else num_train) * r) \
            if self.add_negative_train_samples else 0
        return tr + int(num_val * r) + int(num_test * r) > 0

    @staticmethod
    def _resolve(data: Any, et: Any) -> tuple[str, str, str]:
        if isinstance(et, (tuple, list)) and len(et) == 3:
            et = check_edge_type(tuple(et))
            if et not in data.edge_types:
                raise KeyError(f"RandomLinkSplit: {et!r} is not an edge type of the graph "
                               f"(edge types: {data.edge_types})")
            return et
        try:
            store = data[et]
        except (KeyError, TypeError):
            store = None
        if store is None or not hasattr(store, "edge_type") or store.edge_type not in \
                data.edge_types:
            raise KeyError(f"RandomLinkSplit: {et!r} names no edge type of the graph "
                           f"(edge types: {data.edge_types})")
        return store.edge_type

    def _split(self, out: Any, et: Any, index: np.ndarray, is_undirected: bool,
               rev: Any) -> None:
        store = out[et]
        ei_old = store["edge_index"]
        ei = edge_index_of(store, et)
        nnz = ei.shape[1]
        for key, value in store.items():
            if key == "edge_index" or not is_edge_attr(key, value, nnz):
                continue
            v = _take(value, index, key)
            if is_undirected:
                v = np.concatenate([v, v], axis=cat_dim(key) % v.ndim)
            store[key] = like(np.ascontiguousarray(v), value)
        new = ei[:, index]
        if is_undirected:
            new = np.concatenate([new, new[::-1]], axis=1)
        store["edge_index"] = like(np.ascontiguousarray(new), ei_old)
        if rev is not None:
            rev_store = out[rev]
            for key in list(rev_store.keys()):
                if key not in store:
                    del rev_store[key]            # PyG: outdated attributes go
                elif key == "edge_index":
                    rev_store["edge_index"] = like(np.ascontiguousarray(new[::-1]), ei_old)
                else:
                    rev_store[key] = store[key]

    def _create_label(self, store: Any, ei: np.ndarray, index: np.ndarray, neg: np.ndarray,
                      out: Any) -> None:
        pos = ei[:, index]
        if self.key in store:
            label = np.take(host(store[self.key]), index, axis=0)
            if neg.shape[1] > 0:
                label = label + 1
            if self.key in out:
                del out[self.key]
        else:
            label = np.ones(index.size, dtype=np.float32)
        neg_label = np.zeros((neg.shape[1],) + label.shape[1:], dtype=label.dtype)
        if self.split_labels:
            out[f"pos_{self.key}"] = tensor(label)
            out[f"pos_{self.key}_index"] = tensor(pos)
            if neg.shape[1] > 0:
                out[f"neg_{self.key}"] = tensor(neg_label)
                out[f"neg_{self.key}_index"] = tensor(np.ascontiguousarray(neg))
        else:
            if neg.shape[1] > 0:
                label = np.concatenate([label, neg_label], axis=0)
                pos = np.concatenate([pos, neg], axis=1)
            out[self.key] = tensor(label)
            out[f"{self.key}_index"] = tensor(np.ascontiguousarray(pos))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_val={self.num_val}, "
                f"num_test={self.num_test})")
