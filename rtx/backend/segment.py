"""Segment ops over an index (``num_segments`` explicit): mean, max, min, softmax.

``segment_sum`` is ``index_add`` (no second kernel); ``segment_min`` mirrors
``segment_max``.  The backends take the index as an ``IndexPlan`` (checked once
by the public face, CSR grouping cached; ``segment_plan``: the O(1) facts they
need): ``len(index)`` is the data's first dimension and every index is in
``[0, num_segments)``.  Empty segments give 0 (mean, max, min), as
``torch.scatter_reduce(include_self=False)`` / torch_scatter.  ``segment_max``
also returns, per segment and column, the position of the FIRST entry (lowest
position) holding the max (-1 for an empty segment): the gradient goes to that
entry only.  A NaN in a segment propagates (the first NaN wins).

``segment_softmax`` is PyG's ``softmax(src, index, num_nodes=N)``: per segment
and column, ``exp(s - max) / sum(exp(s - max))``.

Each op has one body (``host_body``): the OpenMP kernels of ``rtx/_segment.pxi``
over the plan's cached CSR grouping (or, for narrow softmax rows, its indices in
entry order: the same bits), run as is on the CPU backend's arrays and through a
host round-trip on any other backend.  (``check_segment`` validates raw user
arguments for the public faces.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtypes import FLOAT_DTYPES as _FLOAT_DTYPES
from .._kernels import (
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
from .._threads import get_num_threads
from ._family import Family, host_body
from ._host import check_output, rows2d
from .index_plan import IndexPlan, as_plan

FLOAT_DTYPES = _FLOAT_DTYPES  # (re-exported; rtx._dtypes defines it)


def check_segment(shape: tuple[int, ...], dtype: Any, index: Any, num_segments: Any,
                  op: str) -> IndexPlan:
    """Validate a segment op's user arguments; returns the (possibly temporary)
    plan.  (A validator for the public faces: no backend body calls it.)"""
    if np.dtype(dtype) not in FLOAT_DTYPES:
        raise TypeError(f"{op}(): data must be float32 or float64, got {np.dtype(dtype)}")
    if len(shape) < 1:
        raise ValueError(f"{op}(): data must have at least 1 dimension, got a 0-d tensor")
    plan = as_plan(index, num_segments, op, length=shape[0])
    check_output(2 * plan.num_rows, shape, np.dtype(dtype).itemsize, op)
    return plan


def segment_plan(index: Any, num_segments: Any, op: str, length: int | None = None) -> IndexPlan:
    """The backend's contract for a segment op's index: a checked ``IndexPlan``
    over ``num_segments`` rows (the faces make it), with ``length`` entries when
    given.  O(1): the indices are never checked again."""
    if type(index) is not IndexPlan:
        raise TypeError(f"{op}(): the backend takes the index as a checked IndexPlan "
                        f"(rtx.IndexPlan), got {type(index).__name__}")
    if num_segments != index.num_rows:
        raise ValueError(f"{op}(): the IndexPlan was checked against {index.num_rows} rows, "
                         f"but this call needs {num_segments}")
    if length is not None and len(index) != length:
        raise ValueError(f"{op}(): len(index) = {len(index)} must equal {length}")
    return index


def _softmax_kernel(plan: Any, rows: np.ndarray, threads: int, backward: bool) -> str:
    """Which of segment softmax's kernels (equal bits) runs:

    - ``"sorted"``: indices that never descend (a plan's cached count): the
      entry-order passes, each thread on its own chunk of positions cut between
      segments (no grouping, no buckets; vectorised exponentials across
      segments; one score per entry: four interleaved parts per chunk).  Short
      segments gain most (E = 899,141 over 400,000 segments, H = 4, 2 threads:
      forward 12.5 -> 5.4 ms, backward 5.4 -> 2.9 ms); with the interleaved parts
      the H = 1 forward is also as fast as the grouped kernel's contiguous runs
      when the plan has its grouping (E = 10^6 sorted, 2 threads, alternating:
      3.4 against 5.3 ms over 100,000 segments, 2.8 against 2.8 over 1,000);
    - ``"entries"``: narrow rows in random order (no grouping needed, entries
      bucketed by the thread owning their segment);
    - ``"csr"``: over the CSR grouping (wide rows in random order, nearly ordered
      indices: each segment's entries walked while in cache)."""
    if plan._is_sorted():
        return "sorted"
    if softmax_entry_mode(rows.shape[1], rows.itemsize, threads, backward) and \
            not plan.is_ordered():
        return "entries"
    return "csr"


# The entry-order backward's one-head state (N values) up to which one thread runs
# it: its T > 1 team first copies every entry into its owner's bucket, which costs
# more than the one multiply-add per entry it then splits.  Measured 2026-12-07 on
# 2 threads, E = 10^6 random, in-process alternating, ms for 1 / 2 threads:
# float32 over N = 30,000: 2.0 / 3.4; 100,000: 1.9-2.3 / 2.6-4.3; 400,000: 2.8-3.4 /
# 4.1-4.7; 1,000,000 (4 MB): 3.3-3.9 / 4.5-5.8; float64 over 100,000: 2.9-3.3 /
# 4.1-4.8; 1,000,000 (8 MB): 6.8-7.6 / 7.6-10.1.  Past the caches the team wins:
# E = N = 4 x 10^6 float32 (16 MB), 59 / 31 ms.  Both give the same bits.
SOFTMAX_BWD_SERIAL_STATE_BYTES = 8 << 20


def _softmax_backward_threads(kernel: str, rows: np.ndarray, num_segments: int,
                              threads: int) -> int:
    """The team of the backward kernel ``kernel`` (_softmax_kernel) over ``rows``."""
    if kernel == "entries" and rows.shape[1] == 1 and \
            num_segments * rows.itemsize <= SOFTMAX_BWD_SERIAL_STATE_BYTES:
        return 1
    return threads


class SegmentOps(Family):
    """Segment mean / max / min / softmax and their backward passes, over a checked
    ``IndexPlan`` (``segment_plan``: the faces make it; no index is checked again)."""

    FAMILY = "segment"  # its ops: the public methods below (``_family.py``)

    @host_body("scores")
    def segment_softmax(self, scores: np.ndarray, index: Any, num_segments: int) -> Any:
        plan = segment_plan(index, num_segments, "segment_softmax", scores.shape[0])
        check_output(2 * plan.num_rows, scores.shape, scores.itemsize, "segment_softmax")
        out = self._host_empty(scores.shape, scores.dtype)
        s2, o2, T = rows2d(scores), rows2d(out), get_num_threads()
        kernel = _softmax_kernel(plan, s2, T, False)
        if kernel != "csr":
            segment_softmax_entries(s2, plan._narrow_idx(), plan.num_rows, o2, T,
                                    kernel == "sorted")
        else:
            ptr, perm = plan._grouping()
            segment_softmax_csr(s2, perm, ptr, o2, T)
        return out

    @host_body("y", "grad")
    def segment_softmax_backward(self, y: np.ndarray, grad: np.ndarray, index: Any,
                                 num_segments: int) -> Any:
        plan = segment_plan(index, num_segments, "segment_softmax_backward", y.shape[0])
        out = self._host_empty(y.shape, y.dtype)
        y2, g2, o2, T = rows2d(y), rows2d(grad), rows2d(out), get_num_threads()
        kernel = _softmax_kernel(plan, y2, T, True)
        if kernel != "csr":
            segment_softmax_backward_entries(y2, g2, plan._narrow_idx(), plan.num_rows, o2,
                                             _softmax_backward_threads(kernel, y2,
                                                                       plan.num_rows, T),
                                             kernel == "sorted")
        else:
            ptr, perm = plan._grouping()
            segment_softmax_backward_csr(y2, g2, perm, ptr, o2, T)
        return out

    @host_body("src")
    def segment_mean(self, src: np.ndarray, index: Any, num_segments: int) -> Any:
        plan = segment_plan(index, num_segments, "segment_mean", src.shape[0])
        check_output(plan.num_rows, src.shape, src.itemsize, "segment_mean")
        ptr, perm = plan._grouping()
        out = self._host_empty((plan.num_rows,) + src.shape[1:], src.dtype)
        segment_mean_csr(rows2d(src), perm, ptr, rows2d(out), get_num_threads())
        return out

    @host_body("grad")
    def segment_mean_backward(self, grad: np.ndarray, index: Any, num_segments: int) -> Any:
        plan = segment_plan(index, num_segments, "segment_mean_backward")
        ptr, perm = plan._grouping()
        out = self._host_empty((len(plan),) + grad.shape[1:], grad.dtype)
        segment_mean_backward_csr(rows2d(grad), perm, ptr, rows2d(out), get_num_threads())
        return out

    @host_body("src")
    def segment_max(self, src: np.ndarray, index: Any, num_segments: int) -> tuple[Any, Any]:
        """``(values, argmax)``; argmax is an int64 primitive of the values' shape."""
        return self._segment_extreme(segment_max_csr, "segment_max", src, index, num_segments)

    @host_body("grad", "argmax")
    def segment_max_backward(self, grad: np.ndarray, argmax: np.ndarray, index: Any,
                             num_entries: int) -> Any:
        """``grad`` to the argmax entries; ``index`` the grouping ``segment_max`` used."""
        return self._arg_backward(segment_max_backward_csr, "segment_max_backward", grad,
                                  argmax, index, num_entries)

    @host_body("src")
    def segment_min(self, src: np.ndarray, index: Any, num_segments: int) -> tuple[Any, Any]:
        """``(values, argmin)``: ``segment_max`` for the min (first entry wins ties)."""
        return self._segment_extreme(segment_min_csr, "segment_min", src, index, num_segments)

    @host_body("grad", "argmin")
    def segment_min_backward(self, grad: np.ndarray, argmin: np.ndarray, index: Any,
                             num_entries: int) -> Any:
        """``grad`` to the argmin entries; ``index`` the grouping ``segment_min`` used."""
        return self._arg_backward(segment_min_backward_csr, "segment_min_backward", grad,
                                  argmin, index, num_entries)

    def _segment_extreme(self, kernel: Any, op: str, src: np.ndarray, index: Any,
                         num_segments: int) -> tuple[np.ndarray, np.ndarray]:
        plan = segment_plan(index, num_segments, op, src.shape[0])
        check_output(2 * plan.num_rows, src.shape, src.itemsize, op)
        ptr, perm = plan._grouping()
        n = plan.num_rows
        out = self._host_empty((n,) + src.shape[1:], src.dtype)
        arg = self._host_empty((n,) + src.shape[1:], np.int64)
        kernel(rows2d(src), perm, ptr, rows2d(out), rows2d(arg), get_num_threads())
        return out, arg

    def _arg_backward(self, kernel: Any, op: str, grad: np.ndarray, arg: np.ndarray,
                      index: Any, num_entries: int) -> np.ndarray:
        # (the kernel checks every argument it indexes by, ``arg`` included)
        plan = segment_plan(index, grad.shape[0], op, num_entries)
        ptr, perm = plan._grouping()
        out = self._host_empty((num_entries,) + grad.shape[1:], grad.dtype)
        kernel(rows2d(grad), rows2d(arg), perm, ptr, rows2d(out), get_num_threads())
        return out
