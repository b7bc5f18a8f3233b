"""CPU matmul: numpy's BLAS on one BLAS thread, the work split over rtx's
threads (``rtx/backend/_matmul.py``, docs/backends.md)."""

from __future__ import annotations

import numpy as np

from ..._dtypes import result_type
from ..._kernels import owned_matmul
from ..._threads import get_num_threads
from .._matmul import BLAS_THREADED_MIN, SINGLE_THREADED_BLAS, matmul_2d
from ._alloc import empty, own


class CpuLinalg:
    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # small 2-D float32 / float64: one BLAS call into an owned buffer, asked in C
        # before the general path's shape and dtype work (np.dot's 2-D path: the same
        # gemm, bitwise equal to np.matmul, whose gufunc cost 1.5 us at 16x16 against
        # np.dot's 1.0, and np.dot's Python dispatcher skipped)
        out = owned_matmul(a, b, BLAS_THREADED_MIN)
        if out is not None:
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
