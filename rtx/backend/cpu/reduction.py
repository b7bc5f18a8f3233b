"""CPU reductions: numpy's reduce loops writing into owned output buffers."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._dtypes import float_type
from ..reduction import Dim
from ._alloc import empty, own


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


class CpuReduction:
    def sum(self, a: np.ndarray, dim: Dim = None, keepdim: bool = False) -> np.ndarray:
        dt = a.dtype if a.dtype.kind in "fc" else np.dtype(np.int64)
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
