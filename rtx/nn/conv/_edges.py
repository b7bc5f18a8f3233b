"""Shared by the conv layers: checking ``edge_index`` once and reusing the
checked ``EdgeIndex`` (self-loops added when asked) while the same edges come
back, and the node-feature checks."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph_ops import EdgeIndex
from ...tensor import Tensor

__all__ = ["EdgeCache", "check_x", "raw_edge_index"]


def raw_edge_index(edge_index: Any, layer: str) -> np.ndarray:
    """``edge_index`` as an int ``[2, E]`` numpy array (not yet range-checked)."""
    a = edge_index.numpy() if isinstance(edge_index, Tensor) else edge_index
    try:
        a = np.asarray(a)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{layer}: edge_index must be an int [2, E] array ({exc})") from None
    if a.ndim != 2 or a.shape[0] != 2:
        raise ValueError(f"{layer}: edge_index must have shape [2, E], got {a.shape}")
    if a.shape[1] == 0:
        return np.zeros((2, 0), dtype=np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{layer}: edge_index must be integer, got {a.dtype}")
    return a


def check_x(x: Any, width: int, what: str, layer: str) -> Tensor:
    """A ``[num_nodes, width]`` float tensor (``width=-1``: any width)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{layer}: {what} must be an rtx.Tensor, got {type(x).__name__}")
    if x.ndim != 2 or (width >= 0 and x.shape[1] != width):
        want = "F" if width < 0 else str(width)
        raise ValueError(f"{layer}: {what} must have shape [num_nodes, {want}], got {x.shape}")
    if x.dtype.kind != "f":
        raise TypeError(f"{layer}: {what} must be float32 or float64, got {x.dtype}")
    return x


class EdgeCache:
    """The checked ``EdgeIndex`` of the last ``edge_index`` seen.

    With ``loops``, PyG's ``remove_self_loops`` + ``add_self_loops``: edges
    ``i -> i`` are dropped and one loop per node ``i < min(n_src, n_dst)`` is
    appended after the kept edges; ``keep`` is then the mask of kept input
    edges (for their ``edge_attr``).  A raw array is reused while it comes back
    with equal values (compared with a private copy, so an array changed in
    place is noticed); an ``EdgeIndex`` while it is the same object.
    """

    __slots__ = ("layer", "key", "raw", "shape", "ei", "keep", "num_loops")

    def __init__(self, layer: str) -> None:
        self.layer = layer
        self.key: Any = None
        self.raw: np.ndarray | None = None
        self.shape: tuple[int, int, bool] = (-1, -1, False)
        self.ei: EdgeIndex | None = None
        self.keep: np.ndarray | None = None
        self.num_loops = 0

    def get(self, edge_index: Any, n_src: int, n_dst: int,
            loops: bool = False) -> tuple[EdgeIndex, np.ndarray | None, int]:
        shape = (n_src, n_dst, loops)
        if isinstance(edge_index, EdgeIndex):
            if edge_index is self.key and shape == self.shape:
                assert self.ei is not None
                return self.ei, self.keep, self.num_loops
            if not loops:
                if edge_index.num_src != n_src or edge_index.num_dst != n_dst:
                    raise ValueError(
                        f"{self.layer}: the EdgeIndex was built for {edge_index.num_src} "
                        f"source and {edge_index.num_dst} target nodes, but the input has "
                        f"{n_src} and {n_dst}")
                return edge_index, None, 0
            raw = np.stack([edge_index.src.indices, edge_index.dst.indices]).astype(np.int64)
            key: Any = edge_index
        else:
            raw = raw_edge_index(edge_index, self.layer)
            if (self.raw is not None and shape == self.shape and self.key is None
                    and raw.shape == self.raw.shape and np.array_equal(raw, self.raw)):
                assert self.ei is not None
                return self.ei, self.keep, self.num_loops
            key = None
        keep = None
        num_loops = 0
        ei_arr = raw
        if loops:
            num_loops = min(n_src, n_dst)
            keep = raw[0] != raw[1]
            ar = np.arange(num_loops, dtype=np.int64)
            ei_arr = np.concatenate([raw[:, keep].astype(np.int64, copy=False),
                                     np.stack([ar, ar])], axis=1)
        try:
            ei = EdgeIndex(ei_arr, n_src, n_dst)
        except (TypeError, ValueError, IndexError) as exc:
            raise type(exc)(f"{self.layer}: {exc} (graph with {n_src} source and {n_dst} "
                            "target nodes)") from None
        self.key, self.shape, self.ei, self.keep, self.num_loops = key, shape, ei, keep, num_loops
        self.raw = None if key is not None else np.array(raw, copy=True)
        return ei, keep, num_loops
