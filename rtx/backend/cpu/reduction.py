"""CPU reductions: numpy's reduce loops writing into owned output buffers."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._dtypes import FLOAT_DTYPES, float_type
from ..._kernels import sum_rows
from ..._threads import get_num_threads
from ..reduction import Dim
from ._alloc import empty, own

# A float sum over dim 0 of a C-contiguous array of at least SUM_ROWS_MIN
# elements and at most SUM_ROWS_MAX_COLS columns (the product of the other dims)
# runs in ``sum_rows`` (rtx/_dense.pxi): numpy's bits (one running sum per column
# from +0, rows in order), the columns split over rtx's threads in 64-byte blocks.
# numpy's axis-0 loop pays per row: 3.2M float32 elements, 2 threads, ms rtx /
# numpy: 4 columns 1.6 / 9.0, 16 0.5 / 3.2, 32 0.7 / 1.9, 64 1.0 / 1.0, 96 1.1 /
# 0.8 (numpy keeps the wider ones); the wide 100k HetGAT epoch's bias gradients,
# (100000, 64): 3.05 -> 1.7 ms per call.
SUM_ROWS_MIN = 1 << 16
SUM_ROWS_MAX_COLS = 64


def _norm_dims(dim: Dim, ndim: int) -> tuple[int, ...]:
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"dimension {d} is out of range for a tensor of {ndim} dims")
        out.append(d % max(ndim, 1))
    return tuple(out)


def _reduced_shape(shape: tuple[int, ...], dim: Dim, keepdim: bool) -> tuple[int, ...]:
    dims = _norm_dims(dim, len(shape))
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def _reduce(fn: Any, a: np.ndarray, dim: Dim, keepdim: bool, dt: Any = None) -> Any:
    dt = a.dtype if dt is None else dt
    if dim is None and not keepdim:   # the whole tensor to a scalar (a loss): no dims to check
        out = empty((), dt)
        fn(a, axis=None, out=out)
        return out
    shape = _reduced_shape(a.shape, dim, keepdim)
    out = empty(shape, dt)
    axis = None if dim is None else _norm_dims(dim, a.ndim)
    fn(a, axis=axis, keepdims=keepdim, out=out)
    return out


def _sum_dim0(a: np.ndarray, dim: Dim, keepdim: bool) -> np.ndarray | None:
    """``a.sum(0)`` by ``sum_rows``, or None when this is not that case (another
    dim, a layout or dtype numpy keeps, more columns than SUM_ROWS_MAX_COLS)."""
    if _norm_dims(dim, a.ndim) != (0,):
        return None
    cols = a.size // a.shape[0]
    if a.dtype not in FLOAT_DTYPES or cols > SUM_ROWS_MAX_COLS or not a.flags.c_contiguous:
        return None
    out = empty(((1,) if keepdim else ()) + a.shape[1:], a.dtype)
    sum_rows(a.reshape(a.shape[0], cols), out.reshape(cols), get_num_threads())
    return out


class CpuReduction:
    def sum(self, a: np.ndarray, dim: Dim = None, keepdim: bool = False) -> np.ndarray:
        dt = a.dtype if a.dtype.kind in "fc" else np.dtype(np.int64)
        if a.size >= SUM_ROWS_MIN and a.ndim >= 2 and dim is not None:
            out = _sum_dim0(a, dim, keepdim)
            if out is not None:
                return out
        return _reduce(np.add.reduce, a, dim, keepdim, dt)  # what np.sum calls

    def mean(self, a: np.ndarray, dim: Dim = None, keepdim: bool = False) -> np.ndarray:
        return _reduce(np.mean, a, dim, keepdim, float_type(a.dtype))

    def max(self, a: np.ndarray, dim: Dim = None, keepdim: bool = False) -> np.ndarray:
        return _reduce(np.maximum.reduce, a, dim, keepdim)  # what np.max calls

    def min(self, a: np.ndarray, dim: Dim = None, keepdim: bool = False) -> np.ndarray:
        return _reduce(np.minimum.reduce, a, dim, keepdim)  # what np.min calls

    def argmax(self, a: np.ndarray, dim: int | None = None, keepdim: bool = False) -> np.ndarray:
        if dim is None:
            r = np.asarray(np.argmax(a), dtype=np.int64)
            return own(r.reshape((1,) * a.ndim) if keepdim else r)
        (d,) = _norm_dims(dim, a.ndim)
        out = empty(_reduced_shape(a.shape, d, keepdim), np.int64)
        np.argmax(a, axis=d, keepdims=keepdim, out=out)
        return out
