"""CPU row gather / scatter-add: the OpenMP kernels of ``rtx/_index.pxi`` over a
checked ``IndexPlan`` (its private indices, its cached CSR grouping)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._dtypes import FLOAT_DTYPES as _KERNEL_DTYPES
from ..._kernels import (
    gather_rows,
    get_parallel_thresholds,
    scatter_add_csr,
    scatter_add_rows,
)
from ..._threads import get_num_threads
from .._host import check_output
from ..index import add_plan, select_plan
from ._alloc import empty


def _index_threads(nbytes: int, kind: str) -> int:
    """Team size for an index kernel: 1 below its parallel threshold (where the
    kernel would run serially anyway), so small calls skip get_num_threads()."""
    if nbytes < get_parallel_thresholds()[kind]:
        return 1
    return get_num_threads()


class CpuIndex:
    def index_select(self, x: np.ndarray, indices: Any) -> np.ndarray:
        idx = select_plan(x.shape, indices)._idx
        out = empty((idx.shape[0],) + x.shape[1:], x.dtype)
        if x.dtype not in _KERNEL_DTYPES:
            np.take(x, idx, axis=0, out=out)
            return out
        row = math.prod(x.shape[1:])
        xc = np.ascontiguousarray(x).reshape(x.shape[0], row)
        gather_rows(xc, idx, out.reshape(idx.shape[0], row),
                    _index_threads(out.nbytes, "gather"))
        return out

    def index_add(self, src: np.ndarray, indices: Any, num_rows: int) -> np.ndarray:
        plan = add_plan(src.shape, indices, num_rows)
        n = plan.num_rows
        check_output(n, src.shape, src.dtype.itemsize, "index_add")
        if src.dtype in _KERNEL_DTYPES and (
                plan.is_grouped or not getattr(plan, "_transient", False)):
            # the plan's cached grouping: same bits as scatter_add_rows (a
            # transient plan a face made from raw indices, not yet grouped,
            # takes the group-free path below: no counting sort for one call)
            ptr, perm = plan._grouping()
            out = empty((n,) + src.shape[1:], src.dtype)
            row = math.prod(src.shape[1:])
            scatter_add_csr(np.ascontiguousarray(src).reshape(src.shape[0], row), perm,
                            ptr, out.reshape(n, row), get_num_threads())
            return out
        idx = plan._idx
        if src.dtype not in _KERNEL_DTYPES:
            out = empty((n,) + src.shape[1:], src.dtype, zero=True)
            np.add.at(out, idx, src)
            return out
        # Uninitialised: the kernel zero-fills it in parallel, each thread the
        # rows (or columns) it then reduces into.
        out = empty((n,) + src.shape[1:], src.dtype)
        row = math.prod(src.shape[1:])
        sc = np.ascontiguousarray(src).reshape(src.shape[0], row)
        scatter_add_rows(sc, idx, out.reshape(n, row),
                         _index_threads(sc.nbytes + out.nbytes, "scatter"))
        return out

    def index_accumulate(self, dst: np.ndarray, indices: Any, src: np.ndarray) -> np.ndarray:
        # only the indexed rows are read and written (the optimisers' row-sparse
        # updates); a read-only or non-contiguous dst takes the default path
        plan = add_plan(src.shape, indices, dst.shape[0] if dst.ndim else 0)
        if (dst.ndim == 0 or src.shape[1:] != dst.shape[1:] or src.dtype != dst.dtype
                or not dst.flags.writeable or not dst.flags.c_contiguous):
            return super().index_accumulate(dst, indices, src)  # type: ignore[misc]
        idx = plan._idx
        if len(idx) < 2 or bool((idx[1:] > idx[:-1]).all()):
            dst[idx] += src  # strictly increasing (a coalesced gradient's rows): distinct
        else:
            np.add.at(dst, idx, src)  # repeats accumulate
        return dst

