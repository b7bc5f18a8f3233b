"""Fused message passing: ``out[dst[e]] += weight[e] * x[src[e]]``.

``edge_index`` is an ``EdgeIndex`` (row 0 source, row 1 target; checked once
by the public face, groupings cached).  ``x`` is ``[N_src, F]`` with
``weight`` ``[E]``, or ``[N_src, H, C]`` with ``weight`` ``[E, H]``; no weight
is a plain sum.  The output has ``num_nodes`` rows.  The backward pass:
``grad_x`` is the transpose message pass (grouped by source) and
``grad_weight[e, h] = <grad_out[dst[e], h], x[src[e], h]>``.

Each op has one body (``host_body``): the kernels of ``rtx/_message.pxi`` over
the ``EdgeIndex``'s cached groupings, which never build the ``[E, H, C]``
message tensor; run as is on the CPU backend's arrays and through a host
round-trip on any other backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._kernels import message_backward_csr, message_csr, sddmm_dot
from .._threads import get_num_threads
from ._family import Family, host_body
from ._host import rows2d
from .index_plan import EdgeIndex, IndexPlan, _check_rows, as_edge_index
from .segment import FLOAT_DTYPES


def check_message(x_shape: tuple[int, ...], x_dtype: Any, edge_index: Any, num_nodes: Any,
                  w_shape: tuple[int, ...] | None, w_dtype: Any,
                  op: str = "message_passing") -> tuple[EdgeIndex, int]:
    """Validate the user arguments; returns the EdgeIndex and the head count H (1
    when unweighted or 1-D weight).  (A validator for the public faces: no
    backend body calls it.)"""
    if np.dtype(x_dtype) not in FLOAT_DTYPES:
        raise TypeError(f"{op}(): x must be float32 or float64, got {np.dtype(x_dtype)}")
    if len(x_shape) not in (2, 3):
        raise ValueError(f"{op}(): x must be [N, F] or [N, H, C], got shape {x_shape}")
    H = 1
    if w_shape is not None:
        if np.dtype(w_dtype) != np.dtype(x_dtype):
            raise TypeError(f"{op}(): weight dtype {np.dtype(w_dtype)} != x dtype "
                            f"{np.dtype(x_dtype)}")
        if len(x_shape) == 2 and len(w_shape) != 1:
            raise ValueError(f"{op}(): with x [N, F] the weight must be [E], got {w_shape}")
        if len(x_shape) == 3:
            if len(w_shape) != 2 or w_shape[1] != x_shape[1]:
                raise ValueError(
                    f"{op}(): with x [N, H, C] = {x_shape} the weight must be [E, {x_shape[1]}], "
                    f"got {w_shape}")
            H = x_shape[1]
    n = _check_rows(num_nodes, op, "num_nodes")
    ei = as_edge_index(edge_index, x_shape[0], n, op)
    if w_shape is not None and w_shape[0] != ei.num_edges:
        raise ValueError(f"{op}(): weight has {w_shape[0]} rows but there are "
                         f"{ei.num_edges} edges")
    return ei, H


def edge_plan(edge_index: Any, num_src: int, num_dst: Any, op: str) -> EdgeIndex:
    """The backend's contract for message passing's edges: a checked ``EdgeIndex``
    over ``num_src`` sources (``x``'s rows) and ``num_dst`` targets (the output's
    rows), made by the faces.  O(1), and all the kernels' memory safety needs:
    they index ``x`` by the source plan and the output (or the gradient) by the
    target plan without checking an index again."""
    if (type(edge_index) is not EdgeIndex or type(edge_index.src) is not IndexPlan
            or type(edge_index.dst) is not IndexPlan):
        raise TypeError(f"{op}(): the backend takes the edges as a checked EdgeIndex "
                        f"(rtx.EdgeIndex), got {type(edge_index).__name__}")
    if len(edge_index.src) != len(edge_index.dst):
        raise ValueError(f"{op}(): the EdgeIndex's source and target plans differ in length")
    if edge_index.num_src != num_src or edge_index.num_dst != num_dst:
        raise ValueError(
            f"{op}(): the EdgeIndex was built for {edge_index.num_src} source and "
            f"{edge_index.num_dst} target nodes, but this call has {num_src} and {num_dst}")
    return edge_index


_NO_WEIGHT: dict[str, np.ndarray] = {
    "f": np.zeros((0, 1), np.float32), "d": np.zeros((0, 1), np.float64)}


def _heads(x: np.ndarray) -> int:
    """H of an [N, H, C] x (1 for [N, F]): the weight has one column per head."""
    return x.shape[1] if x.ndim == 3 else 1


class MessageOps(Family):
    """Fused message passing and its backward pass, over a checked ``EdgeIndex``
    (``edge_plan``: the faces make it; no index is checked again)."""

    FAMILY = "message"  # its ops: the public methods below (``_family.py``)

    @host_body("x", "weight")
    def message_passing(self, x: np.ndarray, edge_index: Any, num_nodes: int,
                        weight: Any = None) -> Any:
        ei = edge_plan(edge_index, x.shape[0], num_nodes, "message_passing")
        ptr, perm = ei.dst._grouping()
        out = self._host_empty((ei.num_dst,) + x.shape[1:], x.dtype)
        w = rows2d(weight) if weight is not None else _NO_WEIGHT[x.dtype.char]
        src, in_order = ei._other_indices("dst")    # the sources, over the target grouping
        message_csr(rows2d(x), src, w, weight is not None, perm, ptr, rows2d(out), _heads(x),
                    get_num_threads(), in_order)
        return out

    @host_body("grad", "x", "weight")
    def message_passing_backward(self, grad: np.ndarray, x: np.ndarray, edge_index: Any,
                                 weight: Any, need_x: bool = True, need_weight: bool = True
                                 ) -> tuple[Any, Any]:
        """``(grad_x, grad_weight)`` (``None`` for what is not needed)."""
        ei = edge_plan(edge_index, x.shape[0], grad.shape[0], "message_passing_backward")
        H = _heads(x)
        gx = gw = None
        g2 = rows2d(grad)
        weighted = weight is not None
        w = rows2d(weight) if weighted else _NO_WEIGHT[x.dtype.char]
        if need_weight and weighted:
            gw = self._host_empty(weight.shape, weight.dtype)
        if need_x:
            # one pass over the source grouping gives grad_x and grad_weight
            ptr, perm = ei.src._grouping()
            gx = self._host_empty(x.shape, x.dtype)
            gw2 = gw.reshape(weight.shape[0], H) if gw is not None else _NO_WEIGHT[x.dtype.char]
            dst, in_order = ei._other_indices("src")    # the targets, over the source grouping
            message_backward_csr(
                g2, rows2d(x), dst, w, weighted, gw is not None, perm, ptr, rows2d(gx), gw2, H,
                get_num_threads(), in_order)
        elif gw is not None:
            sddmm_dot(g2, rows2d(x), ei.src._idx, ei.dst._idx,
                      gw.reshape(weight.shape[0], H), get_num_threads())
        return gx, gw
