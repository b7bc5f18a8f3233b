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
"""

from __future__ import annotations

import operator
import sys
from typing import Any

import numpy as np

from .._dtypes import check_rows
from .._kernels import (
    is_index_snapshot as _is_index_snapshot,
)
from .._kernels import (
    snapshot_indices,
)
from ._family import Family
from ._host import check_output
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


def np_index_add(src: np.ndarray, idx: np.ndarray, num_rows: int) -> np.ndarray:
    out = np.zeros((num_rows,) + src.shape[1:], dtype=src.dtype)
    np.add.at(out, idx, src)
    return out


class IndexOps(Family):
    """Row gather / scatter-add over a checked ``IndexPlan`` (the faces make one;
    nothing here checks an index again)."""

    FAMILY = "index"  # its ops: the public methods below (``_family.py``)

    def index_select(self, x: Any, indices: Any) -> Any:
        shape = tuple(self.shape(x))  # type: ignore[attr-defined]
        idx = select_plan(shape, indices)._idx
        return self._host(lambda a: np.take(a, idx, axis=0), x)

    def index_add(self, src: Any, indices: Any, num_rows: int) -> Any:
        shape = tuple(self.shape(src))  # type: ignore[attr-defined]
        dt = np.dtype(self.dtype(src))  # type: ignore[attr-defined]
        idx, n = add_plan(shape, indices, num_rows)._idx, indices.num_rows
        check_output(n, shape, dt.itemsize, "index_add")
        return self._host(lambda a: np_index_add(a, idx, n), src)

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
