"""Segment ops over an index (``num_segments`` explicit): mean, max, min, softmax.

``segment_sum`` is ``index_add`` (no second kernel); ``segment_min`` mirrors
``segment_max``.  The index is a 1-D
int32/int64 array or an ``IndexPlan`` (checked once, CSR grouping cached);
``len(index)`` must equal the data's first dimension and every index must be
in ``[0, num_segments)``.  Empty segments give 0 (mean, max), as
``torch.scatter_reduce(include_self=False)`` / torch_scatter.  ``segment_max``
also returns, per segment and column, the position of the FIRST entry (lowest
position) holding the max (-1 for an empty segment): the gradient goes to that
entry only.  A NaN in a segment propagates (the first NaN wins).

``segment_softmax`` is PyG's ``softmax(src, index, num_nodes=N)``: per segment
and column, ``exp(s - max) / sum(exp(s - max))``.

The default bodies run numpy on host copies, so every backend has them;
``CpuBackend`` overrides them with the OpenMP kernels of ``rtx/_segment.pxi``.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ._host import HostRoundTrip
from .index_plan import IndexPlan, as_plan

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_segment(shape: tuple[int, ...], dtype: Any, index: Any, num_segments: Any,
                  op: str) -> IndexPlan:
    """Validate a segment op's arguments; returns the (possibly temporary) plan."""
    if np.dtype(dtype) not in FLOAT_DTYPES:
        raise TypeError(f"{op}(): data must be float32 or float64, got {np.dtype(dtype)}")
    if len(shape) < 1:
        raise ValueError(f"{op}(): data must have at least 1 dimension, got a 0-d tensor")
    plan = as_plan(index, num_segments, op, length=shape[0])
    row = 1
    for d in shape[1:]:
        row *= d
    if 2 * plan.num_rows * max(row, 1) * np.dtype(dtype).itemsize > sys.maxsize:
        raise MemoryError(f"{op}(): {plan.num_rows} segments x {row} elements are too large")
    return plan


def np_segment_softmax(s: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    m = np.full((n,) + s.shape[1:], -np.inf, dtype=s.dtype)
    np.maximum.at(m, idx, s)
    e = np.exp(s - m[idx])
    z = np.zeros_like(m)
    np.add.at(z, idx, e)
    return (e / z[idx]).astype(s.dtype, copy=False)


def np_segment_softmax_backward(y: np.ndarray, g: np.ndarray, idx: np.ndarray,
                                n: int) -> np.ndarray:
    d = np.zeros((n,) + y.shape[1:], dtype=y.dtype)
    np.add.at(d, idx, g * y)
    return (y * (g - d[idx])).astype(y.dtype, copy=False)


def np_segment_mean(s: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n,) + s.shape[1:], dtype=s.dtype)
    np.add.at(out, idx, s)
    cnt = np.bincount(idx, minlength=n).astype(s.dtype).reshape((n,) + (1,) * (s.ndim - 1))
    return (out / np.maximum(cnt, 1)).astype(s.dtype, copy=False)


def np_segment_mean_backward(g: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    cnt = np.bincount(idx, minlength=n).astype(g.dtype).reshape((n,) + (1,) * (g.ndim - 1))
    return (g / np.maximum(cnt, 1))[idx].astype(g.dtype, copy=False)


def _np_segment_extreme(s: np.ndarray, idx: np.ndarray, n: int, ufunc: Any,
                        init: float) -> tuple[np.ndarray, np.ndarray]:
    """Per segment and column: ``ufunc`` (np.maximum / np.minimum) reduced, and
    the FIRST position holding it (NaN propagates); empty segments 0 and -1."""
    E = s.shape[0]
    s2 = s.reshape(E, int(np.prod(s.shape[1:])))
    F = s2.shape[1]
    m = np.full((n, F), init, dtype=s.dtype)
    ufunc.at(m, idx, s2)  # NaN propagates
    mi = m[idx]
    hit = (s2 == mi) | (np.isnan(s2) & np.isnan(mi))
    arg = np.full((n, F), E, dtype=np.int64)
    rows, cols = np.nonzero(hit)
    np.minimum.at(arg, (idx[rows], cols), rows)
    arg[arg == E] = -1
    m[arg < 0] = 0
    return m.reshape((n,) + s.shape[1:]), arg.reshape((n,) + s.shape[1:])


def np_segment_max(s: np.ndarray, idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    return _np_segment_extreme(s, idx, n, np.maximum, -np.inf)


def np_segment_min(s: np.ndarray, idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    return _np_segment_extreme(s, idx, n, np.minimum, np.inf)


def np_segment_arg_backward(g: np.ndarray, arg: np.ndarray, E: int) -> np.ndarray:
    """The backward of segment max / min: ``g`` to the ``arg`` positions, 0 elsewhere."""
    n = g.shape[0]
    g2 = g.reshape(n, int(np.prod(g.shape[1:])))
    a2 = arg.reshape(g2.shape)
    out = np.zeros((E, g2.shape[1]), dtype=g.dtype)
    r, c = np.nonzero(a2 >= 0)
    out[a2[r, c], c] = g2[r, c]
    return out.reshape((E,) + g.shape[1:])


class SegmentOps(HostRoundTrip):
    """Segment mean / max / softmax and their backward passes."""

    FAMILY = "segment"  # the op names below: what a decorator backend forwards as a family
    OPS: tuple[str, ...] = (
        "segment_mean", "segment_mean_backward", "segment_max", "segment_max_backward",
        "segment_min", "segment_min_backward", "segment_softmax", "segment_softmax_backward",
    )

    def segment_softmax(self, scores: Any, index: Any, num_segments: int) -> Any:
        shape = tuple(self.shape(scores))  # type: ignore[attr-defined]
        plan = check_segment(shape, self.dtype(scores), index, num_segments,  # type: ignore[attr-defined]
                             "segment_softmax")
        return self._host(lambda a: np_segment_softmax(a, plan._idx, plan.num_rows), scores)

    def segment_softmax_backward(self, y: Any, grad: Any, index: Any, num_segments: int) -> Any:
        plan = as_plan(index, num_segments, "segment_softmax_backward")
        return self._host(
            lambda a, g: np_segment_softmax_backward(a, g, plan._idx, plan.num_rows), y, grad)

    def segment_mean(self, src: Any, index: Any, num_segments: int) -> Any:
        shape = tuple(self.shape(src))  # type: ignore[attr-defined]
        plan = check_segment(shape, self.dtype(src), index, num_segments,  # type: ignore[attr-defined]
                             "segment_mean")
        return self._host(lambda a: np_segment_mean(a, plan._idx, plan.num_rows), src)

    def segment_mean_backward(self, grad: Any, index: Any, num_segments: int) -> Any:
        plan = as_plan(index, num_segments, "segment_mean_backward")
        return self._host(lambda g: np_segment_mean_backward(g, plan._idx, plan.num_rows),
                          grad)

    def segment_max(self, src: Any, index: Any, num_segments: int) -> tuple[Any, Any]:
        """``(values, argmax)``; argmax is an int64 primitive of the values' shape."""
        shape = tuple(self.shape(src))  # type: ignore[attr-defined]
        plan = check_segment(shape, self.dtype(src), index, num_segments,  # type: ignore[attr-defined]
                             "segment_max")
        m, arg = np_segment_max(self._h(src), plan._idx, plan.num_rows)
        return self.from_numpy(m), self.from_numpy(arg)  # type: ignore[attr-defined]

    def segment_max_backward(self, grad: Any, argmax: Any, index: Any, num_entries: int) -> Any:
        """``grad`` to the argmax entries; ``index`` the grouping ``segment_max`` used."""
        return self._host(lambda g, a: np_segment_arg_backward(g, a, num_entries), grad, argmax)

    def segment_min(self, src: Any, index: Any, num_segments: int) -> tuple[Any, Any]:
        """``(values, argmin)``: ``segment_max`` for the min (first entry wins ties)."""
        shape = tuple(self.shape(src))  # type: ignore[attr-defined]
        plan = check_segment(shape, self.dtype(src), index, num_segments,  # type: ignore[attr-defined]
                             "segment_min")
        m, arg = np_segment_min(self._h(src), plan._idx, plan.num_rows)
        return self.from_numpy(m), self.from_numpy(arg)  # type: ignore[attr-defined]

    def segment_min_backward(self, grad: Any, argmin: Any, index: Any, num_entries: int) -> Any:
        """``grad`` to the argmin entries; ``index`` the grouping ``segment_min`` used."""
        return self._host(lambda g, a: np_segment_arg_backward(g, a, num_entries), grad, argmin)
