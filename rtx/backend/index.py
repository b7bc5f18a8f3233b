"""Row gather / scatter-add along dim 0, and the validation both paths share.

``index_select(x, idx)``: ``out[i] = x[idx[i]]``.
``index_add(src, idx, num_rows)``: ``out = zeros(num_rows, ...)``; ``out[idx[i]] += src[i]``.

They are each other's adjoint.  Validation runs before anything is written:
indices must be a 1-D int32/int64 array (``TypeError``), every index in
``[0, n)`` (``IndexError`` naming the first bad position), ``len(idx) ==
src.shape[0]`` for ``index_add`` (``ValueError``), ``num_rows`` a non-negative
int (``TypeError`` / ``ValueError``).  Negative indices are rejected, never
wrapped.
"""

from __future__ import annotations

import operator
import sys
from typing import Any

import numpy as np

from .._kernels import (
    is_index_snapshot as _is_index_snapshot,
)
from .._kernels import (
    snapshot_indices,
)
from ._host import HostRoundTrip
from ._index_check import INDEX_DTYPES as INDEX_DTYPES  # re-exported: the index contract
from ._index_check import _index_error, as_index_array, check_bounds
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
    snap, bad = snapshot_indices(idx, min(n, sys.maxsize))
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
    return snapshot_indices(arr, -1)[0]


def check_num_rows(num_rows: Any) -> int:
    if isinstance(num_rows, (bool, np.bool_)):
        raise TypeError("index_add(): num_rows must be an int, got bool")
    try:
        n = operator.index(num_rows)
    except TypeError:
        raise TypeError(
            f"index_add(): num_rows must be an int, got {type(num_rows).__name__}"
        ) from None
    if n < 0:
        raise ValueError(f"index_add(): num_rows must be >= 0, got {n}")
    if n > sys.maxsize:
        raise MemoryError(f"index_add(): num_rows = {n} is too large for this platform")
    return n


def _plan_indices(plan: Any, rows: int, length: int | None, op: str) -> np.ndarray:
    """A checked IndexPlan's indices, after checking it fits this call."""
    if plan.num_rows != rows:
        raise ValueError(f"{op}(): the IndexPlan was checked against {plan.num_rows} rows, "
                         f"but this call has {rows}")
    if length is not None and len(plan) != length:
        raise ValueError(f"{op}(): len(indices) = {len(plan)} must equal src.shape[0] = {length}")
    return plan._idx


def check_select(shape: tuple[int, ...], indices: Any) -> np.ndarray:
    if len(shape) < 1:
        raise ValueError("index_select(): x must have at least 1 dimension, got a 0-d tensor")
    if isinstance(indices, IndexPlan):
        return _plan_indices(indices, shape[0], None, "index_select")
    idx = as_index_array(indices, "index_select")
    return snapshot(idx, shape[0], "index_select")


def check_add(shape: tuple[int, ...], itemsize: int, indices: Any, num_rows: Any) -> tuple[
    np.ndarray, int
]:
    if len(shape) < 1:
        raise ValueError("index_add(): src must have at least 1 dimension, got a 0-d tensor")
    if isinstance(indices, IndexPlan):
        n = check_num_rows(num_rows)
        idx = _plan_indices(indices, n, shape[0], "index_add")
    else:
        idx = as_index_array(indices, "index_add")
        n = check_num_rows(num_rows)
        if idx.shape[0] != shape[0]:
            raise ValueError(
                f"index_add(): len(indices) = {idx.shape[0]} must equal src.shape[0] = {shape[0]}"
            )
        idx = snapshot(idx, n, "index_add")
    # an allocation check (plans too): numpy would raise ValueError for such an output
    row = 1
    for d in shape[1:]:
        row *= d
    if n * row * itemsize > sys.maxsize:
        raise MemoryError(f"index_add(): an output of {n} rows x {row} elements is too large")
    return idx, n


def np_index_add(src: np.ndarray, idx: np.ndarray, num_rows: int) -> np.ndarray:
    out = np.zeros((num_rows,) + src.shape[1:], dtype=src.dtype)
    np.add.at(out, idx, src)
    return out


class IndexOps(HostRoundTrip):
    FAMILY = "index"  # the op names below: what a decorator backend forwards as a family
    OPS: tuple[str, ...] = (
        "index_select", "index_add",
    )

    def index_select(self, x: Any, indices: Any) -> Any:
        idx = check_select(tuple(self.shape(x)), indices)  # type: ignore[attr-defined]
        return self._host(lambda a: np.take(a, idx, axis=0), x)

    def index_add(self, src: Any, indices: Any, num_rows: int) -> Any:
        dt = np.dtype(self.dtype(src))  # type: ignore[attr-defined]
        idx, n = check_add(tuple(self.shape(src)), dt.itemsize, indices, num_rows)  # type: ignore[attr-defined]
        return self._host(lambda a: np_index_add(a, idx, n), src)
