"""CPU grouped matmul over a checked ``IndexPlan``'s cached type grouping.

Rows already in type order (the grouping is the identity: ``HeteroDictLinear``'s
stacked input, ``RGCNConv``'s relation-major pairs) are contiguous blocks, one
per type: each block is one BLAS GEMM (``matmul_2d``, the threads split its
rows), as a grouped GEMM does.  Rows in any other order take the kernels of
``rtx/_grouped.pxi``: one pass over the rows in the grouping's order
(consecutive rows share a weight block), no gather or scatter."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._kernels import segment_matmul_rows, segment_matmul_weight_grad
from ..._threads import get_num_threads
from .._matmul import matmul_2d
from ..grouped import grouped_plan
from ._alloc import empty


def _type_blocks(plan: Any) -> list[tuple[int, int, int]] | None:
    """``[(type, start, end)]`` of the non-empty types when the rows are already
    sorted by type (the grouping is the identity), else None."""
    ptr, perm = plan._grouping()
    n = perm.shape[0]
    if n == 0 or not np.array_equal(perm, np.arange(n, dtype=perm.dtype)):
        return None
    return [(t, int(ptr[t]), int(ptr[t + 1])) for t in range(plan.num_rows)
            if ptr[t + 1] > ptr[t]]


def _mm(a: np.ndarray, b: np.ndarray, out: np.ndarray, T: int) -> None:
    matmul_2d(a, b, out, T, lambda shape: empty(shape, out.dtype))


def _blocks(w: np.ndarray) -> np.ndarray:
    """``[T, K, M]`` as a C-contiguous ``(T*K, M)`` view (a copy only if needed)."""
    w = np.ascontiguousarray(w)
    return w.reshape(w.shape[0] * w.shape[1], w.shape[2])


class CpuGrouped:
    def segment_matmul(self, x: np.ndarray, index: Any, weight: np.ndarray) -> np.ndarray:
        plan = grouped_plan(self, x, index, weight, "segment_matmul")
        _, perm = plan._grouping()
        out = empty((x.shape[0], weight.shape[2]), x.dtype)
        blocks = _type_blocks(plan)
        if blocks is not None and weight.shape[1] and weight.shape[2]:
            a, w, T = np.ascontiguousarray(x), np.ascontiguousarray(weight), get_num_threads()
            for t, r0, r1 in blocks:
                _mm(a[r0:r1], w[t], out[r0:r1], T)
            return out
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
        blocks = _type_blocks(plan)
        if blocks is not None and weight.shape[1] and weight.shape[2]:
            w = np.ascontiguousarray(weight)
            if need_x:
                gx = empty(x.shape, x.dtype)
                for t, r0, r1 in blocks:
                    _mm(g[r0:r1], w[t].T, gx[r0:r1], T)
            if need_weight:
                gw = empty(weight.shape, weight.dtype, zero=True)  # types without rows: 0
                for t, r0, r1 in blocks:
                    _mm(a[r0:r1].T, g[r0:r1], gw[t], T)
            return gx, gw
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
