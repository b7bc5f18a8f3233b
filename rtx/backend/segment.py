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

The default bodies run numpy on host copies, so every backend has them;
``CpuBackend`` overrides them with the OpenMP kernels of ``rtx/_segment.pxi``.
(``check_segment`` validates raw user arguments for the public faces.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtypes import FLOAT_DTYPES as _FLOAT_DTYPES
from ._family import Family
from ._host import check_output
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


class SegmentOps(Family):
    """Segment mean / max / min / softmax and their backward passes, over a checked
    ``IndexPlan`` (``segment_plan``: the faces make it; no index is checked again)."""

    FAMILY = "segment"  # its ops: the public methods below (``_family.py``)

    def segment_softmax(self, scores: Any, index: Any, num_segments: int) -> Any:
        shape = tuple(self.shape(scores))  # type: ignore[attr-defined]
        plan = segment_plan(index, num_segments, "segment_softmax", shape[0])
        check_output(2 * plan.num_rows, shape, np.dtype(self.dtype(scores)).itemsize,  # type: ignore[attr-defined]
                     "segment_softmax")
        return self._host(lambda a: np_segment_softmax(a, plan._idx, plan.num_rows), scores)

    def segment_softmax_backward(self, y: Any, grad: Any, index: Any, num_segments: int) -> Any:
        plan = segment_plan(index, num_segments, "segment_softmax_backward",
                            tuple(self.shape(y))[0])  # type: ignore[attr-defined]
        return self._host(
            lambda a, g: np_segment_softmax_backward(a, g, plan._idx, plan.num_rows), y, grad)

    def segment_mean(self, src: Any, index: Any, num_segments: int) -> Any:
        shape = tuple(self.shape(src))  # type: ignore[attr-defined]
        plan = segment_plan(index, num_segments, "segment_mean", shape[0])
        check_output(plan.num_rows, shape, np.dtype(self.dtype(src)).itemsize,  # type: ignore[attr-defined]
                     "segment_mean")
        return self._host(lambda a: np_segment_mean(a, plan._idx, plan.num_rows), src)

    def segment_mean_backward(self, grad: Any, index: Any, num_segments: int) -> Any:
        plan = segment_plan(index, num_segments, "segment_mean_backward")
        return self._host(lambda g: np_segment_mean_backward(g, plan._idx, plan.num_rows),
                          grad)

    def segment_max(self, src: Any, index: Any, num_segments: int) -> tuple[Any, Any]:
        """``(values, argmax)``; argmax is an int64 primitive of the values' shape."""
        return self._segment_extreme(np_segment_max, "segment_max", src, index, num_segments)

    def segment_max_backward(self, grad: Any, argmax: Any, index: Any, num_entries: int) -> Any:
        """``grad`` to the argmax entries; ``index`` the grouping ``segment_max`` used."""
        segment_plan(index, tuple(self.shape(grad))[0], "segment_max_backward", num_entries)  # type: ignore[attr-defined]
        return self._host(lambda g, a: np_segment_arg_backward(g, a, num_entries), grad, argmax)

    def segment_min(self, src: Any, index: Any, num_segments: int) -> tuple[Any, Any]:
        """``(values, argmin)``: ``segment_max`` for the min (first entry wins ties)."""
        return self._segment_extreme(np_segment_min, "segment_min", src, index, num_segments)

    def segment_min_backward(self, grad: Any, argmin: Any, index: Any, num_entries: int) -> Any:
        """``grad`` to the argmin entries; ``index`` the grouping ``segment_min`` used."""
        segment_plan(index, tuple(self.shape(grad))[0], "segment_min_backward", num_entries)  # type: ignore[attr-defined]
        return self._host(lambda g, a: np_segment_arg_backward(g, a, num_entries), grad, argmin)

    def _segment_extreme(self, fn: Any, op: str, src: Any, index: Any,
                         num_segments: int) -> tuple[Any, Any]:
        shape = tuple(self.shape(src))  # type: ignore[attr-defined]
        plan = segment_plan(index, num_segments, op, shape[0])
        check_output(2 * plan.num_rows, shape, np.dtype(self.dtype(src)).itemsize, op)  # type: ignore[attr-defined]
        m, arg = fn(self._h(src), plan._idx, plan.num_rows)
        return self.from_numpy(m), self.from_numpy(arg)  # type: ignore[attr-defined]
