"""CPU grouped matmul: the kernels of ``rtx/_grouped.pxi``, one pass over the
rows in a checked ``IndexPlan``'s cached type grouping (consecutive rows share
a weight block); no per-type loop, gather or scatter in Python."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._kernels import segment_matmul_rows, segment_matmul_weight_grad
from ..._threads import get_num_threads
from ..grouped import grouped_plan
from ._alloc import empty


def _blocks(w: np.ndarray) -> np.ndarray:
    """``[T, K, M]`` as a C-contiguous ``(T*K, M)`` view (a copy only if needed)."""
    w = np.ascontiguousarray(w)
    return w.reshape(w.shape[0] * w.shape[1], w.shape[2])


class CpuGrouped:
    def segment_matmul(self, x: np.ndarray, index: Any, weight: np.ndarray) -> np.ndarray:
        plan = grouped_plan(self, x, index, weight, "segment_matmul")
        _, perm = plan._grouping()
        out = empty((x.shape[0], weight.shape[2]), x.dtype)
        segment_matmul_rows(np.ascontiguousarray(x), plan._idx, perm, _blocks(weight), out,
                            get_num_threads())
        return out

    def segment_matmul_backward(self, grad: np.ndarray, x: np.ndarray, index: Any,
                                weight: np.ndarray, need_x: bool = True,
                                need_weight: bool = True) -> tuple[Any, Any]:
        plan = grouped_plan(self, x, index, weight, "segment_matmul_backward")
        if grad.shape != (x.shape[0], weight.shape[2]) or grad.dtype != x.dtype:
            raise ValueError(f"segment_matmul_backward(): grad must be "
                             f"{(x.shape[0], weight.shape[2])} {x.dtype}, got {grad.shape} "
                             f"{grad.dtype}")
        ptr, perm = plan._grouping()
        g = np.ascontiguousarray(grad)
        a = np.ascontiguousarray(x)
        T = get_num_threads()
        gx = gw = None
        if need_x:
            gx = empty(x.shape, x.dtype)
            # g @ W[t].T through the transposed blocks ([T, M, K]: T*K*M copied, so the
            # kernel's inner loop runs along contiguous rows)
            wt = np.ascontiguousarray(weight.transpose(0, 2, 1))
            segment_matmul_rows(g, plan._idx, perm, _blocks(wt), gx, T)
        if need_weight:
            gw = empty(weight.shape, weight.dtype)
            segment_matmul_weight_grad(a, g, perm, ptr, _blocks(gw), T)
        return gx, gw
