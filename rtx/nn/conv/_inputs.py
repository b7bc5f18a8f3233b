"""Input checks shared by the conv layers: node features, and the edges as a
checked ``EdgeIndex`` (``as_edge_index``: an ``EdgeIndex`` as given, raw edges
checked once and then served from the plan cache while they are equal; the
self-loops GAT-style layers attend over come from the plan's cached
``with_self_loops()``, so no layer keeps an edge cache of its own)."""

from __future__ import annotations

from typing import Any

from ...backend.index_plan import EdgeIndex, as_edge_index
from ...tensor import Tensor

__all__ = ["check_x", "edges"]


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


def edges(edge_index: Any, n_src: int, n_dst: int, layer: str) -> EdgeIndex:
    """``edge_index`` (int ``[2, E]`` numpy / rtx tensor / sequence, or an
    ``EdgeIndex``, whose sizes must match) as the checked ``EdgeIndex`` over
    (``n_src``, ``n_dst``); errors (``as_edge_index``'s, named after the
    layer) add the graph's sizes."""
    try:
        return as_edge_index(edge_index, n_src, n_dst, layer)
    except (TypeError, ValueError, IndexError) as exc:
        raise type(exc)(f"{exc} (graph with {n_src} source and {n_dst} "
                        "target nodes)") from None
