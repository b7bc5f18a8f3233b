"""``ToUndirected``: PyG's ``torch_geometric.transforms.ToUndirected`` on ``HeteroData``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import BaseTransform, edge_index_of, host, is_edge_attr, like, shape_of

__all__ = ["ToUndirected", "coalesce"]

_REDUCES = ("add", "sum", "mean", "min", "max", "mul")


def coalesce(edge_index: np.ndarray, attrs: list[np.ndarray], reduce: str = "add"
             ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Sort edges by ``(row, col)``, merge duplicates and reduce their attributes
    (``"add"``/``"sum"``, ``"mean"``, ``"min"``, ``"max"``, ``"mul"``), as PyG's
    ``torch_geometric.utils.coalesce``; duplicates are reduced in input order."""
    E = edge_index.shape[1]
    if E == 0:
        return edge_index, attrs
    perm = np.lexsort((edge_index[1], edge_index[0]))   # stable: by row, then col
    srt = edge_index[:, perm]
    first = np.ones(E, dtype=bool)
    first[1:] = (srt[0, 1:] != srt[0, :-1]) | (srt[1, 1:] != srt[1, :-1])
    starts = np.flatnonzero(first)
    out_ei = edge_index[:, perm[starts]]
    out = []
    for a in attrs:
        v = a[perm]
        if starts.size == E:        # no duplicates: PyG returns the sorted values as they are
            out.append(v)
            continue
        if reduce in ("add", "sum"):
            r = np.add.reduceat(v, starts, axis=0)
        elif reduce == "mean":
            dt = v.dtype if v.dtype.kind == "f" else np.dtype(np.float32)
            counts = np.diff(np.append(starts, E)).astype(dt)
            r = np.add.reduceat(v, starts, axis=0).astype(dt, copy=False)
            r = r / counts.reshape((-1,) + (1,) * (v.ndim - 1))
        elif reduce == "min":
            r = np.minimum.reduceat(v, starts, axis=0)
        elif reduce == "max":
            r = np.maximum.reduceat(v, starts, axis=0)
        else:  # mul
            r = np.multiply.reduceat(v, starts, axis=0)
        out.append(r)
    return out_ei, out


class ToUndirected(BaseTransform):
    """Make every relation two-way (PyG's ``ToUndirected``).

    * An edge type between two different node types ``(src, rel, dst)`` (or any
      edge type with ``merge=False``) gets a reverse type ``(dst, "rev_<rel>", src)``
      holding the flipped ``edge_index`` and the edge attributes with one row per
      edge (the same values, not copies).
    * With ``merge=True`` (the default) an edge type between one node type is
      symmetrised in place: both directions of every edge, sorted by
      ``(row, col)``, duplicates merged and their edge attributes reduced with
      ``reduce`` (``"add"`` -- ``"sum"`` is the same --, ``"mean"``, ``"min"``,
      ``"max"``, ``"mul"``).

    Only the edge types present when it is called are visited.
    """

    def __init__(self, reduce: str = "add", merge: bool = True) -> None:
        if reduce not in _REDUCES:
            raise ValueError(f"ToUndirected: reduce must be one of {_REDUCES}, got {reduce!r}")
        self.reduce = reduce
        self.merge = bool(merge)

    def forward(self, data: Any) -> Any:
        for et, store in data.edge_items():
            if "edge_index" not in store:
                continue
            ei_old = store["edge_index"]
            ei = edge_index_of(store, et)
            nnz = ei.shape[1]
            src, rel, dst = et
            if src != dst or not self.merge:
                inv = data[dst, f"rev_{rel}", src]
                inv["edge_index"] = like(np.ascontiguousarray(ei[::-1]), ei_old)
                for key, value in store.items():
                    if key == "edge_index":
                        continue
                    s = shape_of(value)
                    if s and s[0] == nnz:
                        inv[key] = value
                continue
            keys = [k for k, v in store.items()
                    if k != "edge_index" and "index" not in k and is_edge_attr(k, v, nnz)]
            both = np.concatenate([ei, ei[::-1]], axis=1)
            vals = [np.concatenate([host(store[k])] * 2, axis=0) for k in keys]
            new_ei, new_vals = coalesce(both, vals, self.reduce)
            store["edge_index"] = like(np.ascontiguousarray(new_ei), ei_old)
            for k, v in zip(keys, new_vals, strict=True):
                store[k] = like(np.ascontiguousarray(v), store[k])
        return data
