"""CPU matmul: numpy's BLAS on one BLAS thread, the work split over rtx's
threads (``rtx/backend/_matmul.py``, docs/backends.md)."""

from __future__ import annotations

import numpy as np

from ..._dtypes import float32 as _F32
from ..._dtypes import float64 as _F64
from ..._dtypes import result_type
from ..._kernels import storage_array
from ..._threads import get_num_threads
from .._matmul import BLAS_THREADED_MIN, SINGLE_THREADED_BLAS, matmul_2d
from ._alloc import empty, own


class CpuLinalg:
    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        dt = a.dtype
        if (a.ndim == 2 and b.ndim == 2 and (dt is _F32 or dt is _F64 or dt.kind == "f")
                and (b.dtype is dt or b.dtype == dt)):
            (m, k), (k2, n) = a.shape, b.shape
            if k == k2 and m * n * k < BLAS_THREADED_MIN:
                # small: one BLAS call into an owned buffer, before the general
                # path's shape and dtype work; np.dot's 2-D path (the same gemm,
                # bitwise equal to np.matmul) costs 1.0 us at 16x16 where np.matmul's
                # gufunc costs 1.5
                out = storage_array((m, n), dt)
                np.dot(a, b, out=out)
                return out
        if a.ndim >= 2 and b.ndim >= 2:
            if a.shape[-1] != b.shape[-2]:
                raise ValueError(
                    f"matmul: shapes {a.shape} and {b.shape} do not align "
                    f"({a.shape[-1]} != {b.shape[-2]})"
                )
            ba, bb = a.shape[:-2], b.shape[:-2]
            batch = ba if ba == bb else np.broadcast_shapes(ba, bb)
            dt = a.dtype if a.dtype == b.dtype else result_type(a, b)
            out = empty(batch + (a.shape[-2], b.shape[-1]), dt)
            if a.ndim == 2 and b.ndim == 2 and a.dtype == b.dtype == dt and dt.kind == "f":
                # (large: the small ones returned above) BLAS on one thread, the work
                # split over rtx's threads (_matmul.py)
                matmul_2d(a, b, out, get_num_threads(), lambda shape: empty(shape, dt))
            elif out.size * a.shape[-1] >= BLAS_THREADED_MIN:
                with SINGLE_THREADED_BLAS:
                    np.matmul(a, b, out=out, dtype=dt)
            else:
                np.matmul(a, b, out=out, dtype=dt)
            return out
        return own(np.asarray(np.matmul(a, b, dtype=result_type(a, b))))
