"""CPU segment ops: the OpenMP kernels of ``rtx/_segment.pxi`` over a checked
``IndexPlan``'s cached CSR grouping (or, for narrow softmax rows, its indices in
entry order: the same bits)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._kernels import (
    segment_max_backward_csr,
    segment_max_csr,
    segment_mean_backward_csr,
    segment_mean_csr,
    segment_min_backward_csr,
    segment_min_csr,
    segment_softmax_backward_csr,
    segment_softmax_backward_entries,
    segment_softmax_csr,
    segment_softmax_entries,
    softmax_entry_mode,
)
from ..._threads import get_num_threads
from ..segment import segment_plan
from ._alloc import empty, rows2d


class CpuSegment:
    def segment_softmax(self, scores: np.ndarray, index: Any, num_segments: int) -> np.ndarray:
        plan = segment_plan(index, num_segments, "segment_softmax", scores.shape[0])
        out = empty(scores.shape, scores.dtype)
        s2, o2, T = rows2d(scores), rows2d(out), get_num_threads()
        # two kernels with equal bits: by entry order (narrow rows, no grouping
        # needed) or over the CSR grouping
        if softmax_entry_mode(s2.shape[1], s2.itemsize, T, False):
            segment_softmax_entries(s2, plan._idx, plan.num_rows, o2, T)
        else:
            ptr, perm = plan._grouping()
            segment_softmax_csr(s2, perm, ptr, o2, T)
        return out

    def segment_softmax_backward(self, y: np.ndarray, grad: np.ndarray, index: Any,
                                 num_segments: int) -> np.ndarray:
        plan = segment_plan(index, num_segments, "segment_softmax_backward", y.shape[0])
        out = empty(y.shape, y.dtype)
        y2, g2, o2, T = rows2d(y), rows2d(grad), rows2d(out), get_num_threads()
        if softmax_entry_mode(y2.shape[1], y2.itemsize, T, True):
            segment_softmax_backward_entries(y2, g2, plan._idx, plan.num_rows, o2, T)
        else:
            ptr, perm = plan._grouping()
            segment_softmax_backward_csr(y2, g2, perm, ptr, o2, T)
        return out

    def segment_mean(self, src: np.ndarray, index: Any, num_segments: int) -> np.ndarray:
        plan = segment_plan(index, num_segments, "segment_mean", src.shape[0])
        ptr, perm = plan._grouping()
        out = empty((plan.num_rows,) + src.shape[1:], src.dtype)
        segment_mean_csr(rows2d(src), perm, ptr, rows2d(out), get_num_threads())
        return out

    def segment_mean_backward(self, grad: np.ndarray, index: Any, num_segments: int) -> np.ndarray:
        plan = segment_plan(index, num_segments, "segment_mean_backward")
        ptr, perm = plan._grouping()
        out = empty((len(plan),) + grad.shape[1:], grad.dtype)
        segment_mean_backward_csr(rows2d(grad), perm, ptr, rows2d(out), get_num_threads())
        return out

    def segment_max(self, src: np.ndarray, index: Any, num_segments: int) -> tuple[Any, Any]:
        return _extreme(segment_max_csr, "segment_max", src, index, num_segments)

    def segment_max_backward(self, grad: np.ndarray, argmax: np.ndarray, index: Any,
                             num_entries: int) -> np.ndarray:
        return _arg_backward(segment_max_backward_csr, "segment_max_backward", grad, argmax,
                             index, num_entries)

    def segment_min(self, src: np.ndarray, index: Any, num_segments: int) -> tuple[Any, Any]:
        return _extreme(segment_min_csr, "segment_min", src, index, num_segments)

    def segment_min_backward(self, grad: np.ndarray, argmin: np.ndarray, index: Any,
                             num_entries: int) -> np.ndarray:
        return _arg_backward(segment_min_backward_csr, "segment_min_backward", grad, argmin,
                             index, num_entries)


def _extreme(kernel: Any, op: str, src: np.ndarray, index: Any,
             num_segments: int) -> tuple[np.ndarray, np.ndarray]:
    plan = segment_plan(index, num_segments, op, src.shape[0])
    ptr, perm = plan._grouping()
    n = plan.num_rows
    out = empty((n,) + src.shape[1:], src.dtype)
    arg = empty((n,) + src.shape[1:], np.int64)
    kernel(rows2d(src), perm, ptr, rows2d(out), rows2d(arg), get_num_threads())
    return out, arg


def _arg_backward(kernel: Any, op: str, grad: np.ndarray, arg: np.ndarray, index: Any,
                  num_entries: int) -> np.ndarray:
    # (the kernel checks every argument it indexes by, ``arg`` included)
    plan = segment_plan(index, grad.shape[0], op, num_entries)
    ptr, perm = plan._grouping()
    out = empty((num_entries,) + grad.shape[1:], grad.dtype)
    kernel(rows2d(grad), rows2d(arg), perm, ptr, rows2d(out), get_num_threads())
    return out
