"""CPU matmul: numpy's BLAS on one BLAS thread, the work split over rtx's
threads (``rtx/backend/_matmul.py``, docs/backends.md)."""

from __future__ import annotations

import numpy as np

from ..._dtypes import result_type
from ..._kernels import storage_array
from ..._threads import get_num_threads
from .._matmul import BLAS_THREADED_MIN, SINGLE_THREADED_BLAS, matmul_2d
from ._alloc import empty, own

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


class CpuLinalg:
    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        dt = a.dtype
        if (dt is _F32 or dt is _F64) and b.dtype is dt and a.ndim == 2 and b.ndim == 2:
            # the common small case first: what the 2-D float path below runs for it
            (m, k), (k2, n) = a.shape, b.shape
            if k == k2 and m * n * k < BLAS_THREADED_MIN:
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
                if out.size * a.shape[1] < BLAS_THREADED_MIN:
                    # small: one BLAS call, minus matmul_2d's setup; np.dot's 2-D path
                    # (the same gemm, bitwise equal to np.matmul) costs 1.0 us at 16x16
                    # where np.matmul's gufunc costs 1.5
                    np.dot(a, b, out=out)
                else:
                    # BLAS on one thread, the work split over rtx's threads (_matmul.py)
                    matmul_2d(a, b, out, get_num_threads(), lambda shape: empty(shape, dt))
            elif out.size * a.shape[-1] >= BLAS_THREADED_MIN:
                with SINGLE_THREADED_BLAS:
                    np.matmul(a, b, out=out, dtype=dt)
            else:
                np.matmul(a, b, out=out, dtype=dt)
            return out
        return own(np.asarray(np.matmul(a, b, dtype=result_type(a, b))))
