"""Row gather / scatter-add along dim 0.

``index_select(x, idx)``: ``out[i] = x[idx[i]]``.
``index_add(src, idx, num_rows)``: ``out = zeros(num_rows, ...)``; ``out[idx[i]] += src[i]``.

They are each other's adjoint.  The backends take the indices as a checked
``IndexPlan`` (``select_plan`` / ``add_plan``: the O(1) facts the kernels' memory
safety needs; no index is checked again).  The validation of raw user indices
(``IndexPlan``, ``snapshot``, ``freeze_indices``) runs before
anything is written: indices must be a 1-D int32/int64 array (``TypeError``),
every index in ``[0, n)`` (``IndexError`` naming the first bad position),
``len(idx) == src.shape[0]`` for ``index_add`` (``ValueError``), ``num_rows`` a
non-negative int (``TypeError`` / ``ValueError``).  Negative indices are
rejected, never wrapped.  A backend body given raw indices raises ``TypeError``:
the faces make the plan.

``index_select`` and ``index_add`` have one body each (``host_body``): the OpenMP
kernels of ``rtx/_index.pxi`` over the plan's private indices or its cached CSR
grouping, run as is on the CPU backend's arrays and through a host round-trip
on any other backend.
"""

from __future__ import annotations

import math
import operator
import sys
from typing import Any

import numpy as np

from .._dtypes import FLOAT_DTYPES as _KERNEL_DTYPES
from .._dtypes import check_rows
from .._kernels import (
    gather_rows,
    get_parallel_thresholds,
    scatter_add_csr,
    scatter_add_rows,
    snapshot_indices,
)
from .._kernels import (
    is_index_snapshot as _is_index_snapshot,
)
from .._threads import get_num_threads
from ._family import Family, host_body
from ._host import check_output
from ._index_check import INDEX_DTYPES as INDEX_DTYPES  # re-exported: the index contract
from ._index_check import _index_error, as_index_array, check_bounds, snapshot_threads
from .index_plan import IndexPlan


def is_index_snapshot(arr: Any) -> bool:
    """True for an immutable, rtx-owned index array made by :func:`snapshot`."""
    return bool(_is_index_snapshot(arr))


def snapshot(idx: np.ndarray, n: int, op: str) -> np.ndarray:
    """``idx`` (from :func:`as_index_array`) as a private, immutable copy whose
    every index is in ``[0, n)``; an existing snapshot is only re-checked.

    The kernels run without the GIL: the bounds check must hold for the memory
    they read, so it runs on the copy, which no other thread can reach or
    change (docs/memory-safety.md, "Threads").
    """
    if is_index_snapshot(idx):
        check_bounds(idx, n, op)
        return idx
    snap, bad = snapshot_indices(idx, min(n, sys.maxsize), snapshot_threads(idx.shape[0]))
    if bad >= 0:
        raise _index_error(op, bad, int(snap[bad]), n)
    return snap


def freeze_indices(indices: Any, op: str) -> np.ndarray:
    """``indices`` as an immutable snapshot (not yet bounds-checked).

    The public ops call this first: the tape then keeps the very indices the
    forward used, whatever the caller does to its array afterwards.
    """
    arr = as_index_array(indices, op)
    if is_index_snapshot(arr):
        return arr
    return snapshot_indices(arr, -1, snapshot_threads(arr.shape[0]))[0]


def check_num_rows(num_rows: Any) -> int:
    """``index_add``'s ``num_rows``: ``rtx._dtypes.check_rows`` (the one row-count check)."""
    return check_rows(num_rows, "index_add")


def _require_plan(plan: Any, op: str) -> None:
    if type(plan) is not IndexPlan:
        raise TypeError(f"{op}(): a backend takes a checked rtx.IndexPlan, got "
                        f"{type(plan).__name__} (rtx.{op} and Tensor.{op} make one from "
                        "raw indices)")


def select_plan(shape: tuple[int, ...], plan: IndexPlan) -> IndexPlan:
    """The O(1) facts an ``index_select`` over a checked plan needs (its memory
    safety: every index is below ``plan.num_rows``, which must be ``x``'s rows)."""
    _require_plan(plan, "index_select")
    if len(shape) < 1:
        raise ValueError("index_select(): x must have at least 1 dimension, got a 0-d tensor")
    if plan.num_rows != shape[0]:
        raise ValueError(f"index_select(): the IndexPlan was checked against {plan.num_rows} "
                         f"rows, but this call has {shape[0]}")
    return plan


def add_plan(shape: tuple[int, ...], plan: IndexPlan, num_rows: Any) -> IndexPlan:
    """The O(1) facts an ``index_add`` over a checked plan needs: one index per
    row of ``src``, ``num_rows`` the plan's row count (the output's rows)."""
    _require_plan(plan, "index_add")
    if len(shape) < 1:
        raise ValueError("index_add(): src must have at least 1 dimension, got a 0-d tensor")
    try:
        same = operator.index(num_rows) == plan.num_rows and not isinstance(num_rows, bool)
    except TypeError:
        same = False
    if not same:
        raise ValueError(f"index_add(): the IndexPlan was checked against {plan.num_rows} "
                         f"rows, but this call has {num_rows!r}")
    if len(plan) != shape[0]:
        raise ValueError(f"index_add(): len(indices) = {len(plan)} must equal "
                         f"src.shape[0] = {shape[0]}")
    return plan


def _index_threads(nbytes: int, kind: str) -> int:
    """Team size for an index kernel: 1 below its parallel threshold (where the
    kernel would run serially anyway), so small calls skip get_num_threads()."""
    if nbytes < get_parallel_thresholds()[kind]:
        return 1
    return get_num_threads()


class IndexOps(Family):
    """Row gather / scatter-add over a checked ``IndexPlan`` (the faces make one;
    nothing here checks an index again)."""

    FAMILY = "index"  # its ops: the public methods below (``_family.py``)

    @host_body("x")
    def index_select(self, x: np.ndarray, indices: Any) -> Any:
        idx = select_plan(x.shape, indices)._idx
        out = self._host_empty((idx.shape[0],) + x.shape[1:], x.dtype)
        if x.dtype not in _KERNEL_DTYPES:
            np.take(x, idx, axis=0, out=out)
            return out
        row = math.prod(x.shape[1:])
        xc = np.ascontiguousarray(x).reshape(x.shape[0], row)
        gather_rows(xc, idx, out.reshape(idx.shape[0], row),
                    _index_threads(out.nbytes, "gather"))
        return out

    @host_body("src")
    def index_add(self, src: np.ndarray, indices: Any, num_rows: int) -> Any:
        plan = add_plan(src.shape, indices, num_rows)
        n = plan.num_rows
        check_output(n, src.shape, src.dtype.itemsize, "index_add")
        if src.dtype in _KERNEL_DTYPES and (
                plan.is_grouped or not getattr(plan, "_transient", False)):
            # the plan's cached grouping: same bits as scatter_add_rows (a
            # transient plan a face made from raw indices, not yet grouped,
            # takes the group-free path below: no counting sort for one call)
            ptr, perm = plan._grouping()
            out = self._host_empty((n,) + src.shape[1:], src.dtype)
            row = math.prod(src.shape[1:])
            scatter_add_csr(np.ascontiguousarray(src).reshape(src.shape[0], row), perm,
                            ptr, out.reshape(n, row), get_num_threads())
            return out
        idx = plan._idx
        if src.dtype not in _KERNEL_DTYPES:
            out = self._host_empty((n,) + src.shape[1:], src.dtype, zero=True)
            np.add.at(out, idx, src)
            return out
        # Uninitialised: the kernel zero-fills it in parallel, each thread the
        # rows (or columns) it then reduces into.
        out = self._host_empty((n,) + src.shape[1:], src.dtype)
        row = math.prod(src.shape[1:])
        sc = np.ascontiguousarray(src).reshape(src.shape[0], row)
        scatter_add_rows(sc, idx, out.reshape(n, row),
                         _index_threads(sc.nbytes + out.nbytes, "scatter"))
        return out

    def index_accumulate(self, dst: Any, indices: Any, src: Any) -> Any:
        """``dst[indices[i]] += src[i]`` (repeats accumulate), written into ``dst``'s
        buffer where the backend can (the CPU backend: only the indexed rows are
        touched); returns the primitive that holds the result (the caller rebinds
        to it, as for ``inplace``).  ``src``: ``dst``'s dtype, ``[len(indices),
        *dst.shape[1:]]``; ``indices`` a plan over ``dst``'s rows.  The default
        computes ``dst + index_add(src)`` (a new primitive)."""
        B: Any = self
        shape = tuple(B.shape(dst))
        add_plan(tuple(B.shape(src)), indices, shape[0])
        if np.dtype(B.dtype(src)) != np.dtype(B.dtype(dst)):
            raise TypeError(f"index_accumulate(): src (rtx.{np.dtype(B.dtype(src))}) and dst "
                            f"(rtx.{np.dtype(B.dtype(dst))}) must have the same dtype")
        if tuple(B.shape(src))[1:] != shape[1:]:
            raise ValueError(f"index_accumulate(): src of shape {tuple(B.shape(src))} does not "
                             f"match rows of {shape}")
        return B.add(dst, B.index_add(src, indices, shape[0]))
