"""``AddSelfLoops``: PyG's ``torch_geometric.transforms.AddSelfLoops`` on ``HeteroData``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import BaseTransform, check_range, edge_index_of, host, like

__all__ = ["AddSelfLoops"]

_REDUCES = ("add", "sum", "mean", "min", "max", "mul")


def _loop_attr(attr: np.ndarray, col: np.ndarray, n: int, fill_value: Any) -> np.ndarray:
    """PyG's ``compute_loop_attr``: the attribute rows of the ``n`` new self-loops."""
    size = (n,) + attr.shape[1:]
    if fill_value is None:
        return np.ones(size, dtype=attr.dtype)
    if isinstance(fill_value, str):
        out = np.zeros(size, dtype=attr.dtype)
        if fill_value == "mul":
            out = np.ones(size, dtype=attr.dtype)
            np.multiply.at(out, col, attr)
            return out
        if fill_value in ("add", "sum", "mean"):
            np.add.at(out, col, attr)
            if fill_value == "mean":
                cnt = np.bincount(col, minlength=n).astype(np.float64)
                out = out / np.maximum(cnt, 1).reshape((-1,) + (1,) * (attr.ndim - 1))
                out = out.astype(attr.dtype if attr.dtype.kind == "f" else np.float32)
            return out
        # min / max over the incoming edges; 0 for a node without any (PyG's scatter)
        order = np.argsort(col, kind="stable")
        c = col[order]
        if c.size:
            starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
            ufunc = np.minimum if fill_value == "min" else np.maximum
            out[c[starts]] = ufunc.reduceat(attr[order], starts, axis=0)
        return out
    if isinstance(fill_value, (bool, int, float, np.integer, np.floating)):
        return np.full(size, fill_value, dtype=attr.dtype)
    v = host(fill_value).astype(attr.dtype)
    if v.ndim != attr.ndim:
        v = v[None]
    try:
        return np.ascontiguousarray(np.broadcast_to(v, size))
    except ValueError:
        raise ValueError(f"AddSelfLoops: fill_value of shape {host(fill_value).shape} does not "
                         f"broadcast to the self-loop attributes {size}") from None


class AddSelfLoops(BaseTransform):
    """Add a self-loop ``(i, i)`` for every node of every edge type whose source and
    destination node types are the same (PyG's ``AddSelfLoops``; relations
    between two node types are left alone).

    When the edge store holds ``attr`` (default ``"edge_weight"``), it is extended
    by one row per loop: ``fill_value`` (a number or an array broadcast to a row;
    ``None`` means 1), or a string ``"add"``/``"sum"``, ``"mean"``, ``"min"``,
    ``"max"``, ``"mul"`` reducing the attributes of the edges into each node (PyG's
    scatter: 0 for a node without incoming edges, 1 for ``"mul"``).  Existing
    self-loops are kept (PyG's ``add_self_loops``, not ``add_remaining_self_loops``).
    """

    def __init__(self, attr: str = "edge_weight", fill_value: Any = 1.0) -> None:
        if isinstance(fill_value, str) and fill_value not in _REDUCES:
            raise ValueError(f"AddSelfLoops: fill_value must be a number, an array or one of "
                             f"{_REDUCES}, got {fill_value!r}")
        self.attr = attr
        self.fill_value = fill_value

    def forward(self, data: Any) -> Any:
        for et, store in data.edge_items():
            src, _, dst = et
            if src != dst or "edge_index" not in store:
                continue
            ei_old = store["edge_index"]
            ei = edge_index_of(store, et)
            n = store.size(0)
            if n is None:
                n = int(ei.max()) + 1 if ei.size else 0
            check_range(ei, n, n, et)
            loops = np.arange(n, dtype=np.int64)
            store["edge_index"] = like(np.concatenate([ei, np.stack([loops, loops])], axis=1),
                                       ei_old)
            if self.attr in store:
                old = store[self.attr]
                a = host(old)
                if a.ndim == 0 or a.shape[0] != ei.shape[1]:
                    raise ValueError(f"AddSelfLoops: {self.attr} of {et!r} has shape {a.shape}; "
                                     f"it needs one row per edge ({ei.shape[1]})")
                loop = _loop_attr(a, ei[1], n, self.fill_value)
                store[self.attr] = like(np.concatenate([a, loop], axis=0), old)
        return data
