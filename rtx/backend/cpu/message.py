"""CPU message passing: the OpenMP kernels of ``rtx/_message.pxi`` over a checked
``EdgeIndex``'s cached groupings, never building the ``[E, H, C]`` messages."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._kernels import message_backward_csr, message_csr, sddmm_dot
from ..._threads import get_num_threads
from ..message import edge_plan
from ._alloc import empty, rows2d

_NO_WEIGHT: dict[str, np.ndarray] = {
    "f": np.zeros((0, 1), np.float32), "d": np.zeros((0, 1), np.float64)}


def _heads(x: np.ndarray) -> int:
    """H of an [N, H, C] x (1 for [N, F]): the weight has one column per head."""
    return x.shape[1] if x.ndim == 3 else 1


class CpuMessage:
    def message_passing(self, x: np.ndarray, edge_index: Any, num_nodes: int,
                        weight: Any = None) -> np.ndarray:
        ei = edge_plan(edge_index, x.shape[0], num_nodes, "message_passing")
        ptr, perm = ei.dst._grouping()
        out = empty((ei.num_dst,) + x.shape[1:], x.dtype)
        w = rows2d(weight) if weight is not None else _NO_WEIGHT[x.dtype.char]
        message_csr(rows2d(x), ei.src._idx, w, weight is not None, perm, ptr, rows2d(out),
                    _heads(x), get_num_threads())
        return out

    def message_passing_backward(self, grad: np.ndarray, x: np.ndarray, edge_index: Any,
                                 weight: Any, need_x: bool = True, need_weight: bool = True
                                 ) -> tuple[Any, Any]:
        ei = edge_plan(edge_index, x.shape[0], grad.shape[0], "message_passing_backward")
        H = _heads(x)
        gx = gw = None
        g2 = rows2d(grad)
        weighted = weight is not None
        w = rows2d(weight) if weighted else _NO_WEIGHT[x.dtype.char]
        if need_weight and weighted:
            gw = empty(weight.shape, weight.dtype)
        if need_x:
            # one pass over the source grouping gives grad_x and grad_weight
            ptr, perm = ei.src._grouping()
            gx = empty(x.shape, x.dtype)
            gw2 = gw.reshape(weight.shape[0], H) if gw is not None else _NO_WEIGHT[x.dtype.char]
            message_backward_csr(
                g2, rows2d(x), ei.dst._idx, w, weighted, gw is not None, perm, ptr,
                rows2d(gx), gw2, H, get_num_threads())
        elif gw is not None:
            sddmm_dot(g2, rows2d(x), ei.src._idx, ei.dst._idx,
                      gw.reshape(weight.shape[0], H), get_num_threads())
        return gx, gw
