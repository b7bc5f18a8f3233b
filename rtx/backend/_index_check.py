"""Index arrays at the backend boundary: conversion (``as_index_array``) and bounds
(``check_bounds``), shared by the index ops (``index.py``) and index plans
(``index_plan.py``) -- a module of its own so that neither imports the other late."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._dtypes import INDEX_DTYPES as INDEX_DTYPES  # re-exported
from .._dtypes import plain_ndarray
from .._kernels import first_out_of_bounds
from .._threads import get_num_threads

# An index snapshot (``snapshot_indices``: copy, then range check of the copy) of
# at least this many indices runs on rtx's threads, one part each: the copy and
# the first touch of the fresh pages are both spread.  Measured (2 threads,
# median of 30, one thread -> two): 2^17 int64 0.095 -> 0.041 ms, 10^6 int64
# 0.97 -> 0.50 ms, 10^6 int32 0.73 -> 0.36 ms; at 2^16 both 0.039 ms.
SNAPSHOT_PARALLEL_MIN = 1 << 17


def snapshot_threads(m: int) -> int:
    """The threads ``snapshot_indices`` of ``m`` indices shares the work over."""
    return get_num_threads() if m >= SNAPSHOT_PARALLEL_MIN else 1


def as_index_array(indices: Any, op: str) -> np.ndarray:
    """Indices as a C-contiguous, native-endian int32/int64 numpy array.

    Never modifies ``indices``; copies only when it must.
    """
    if isinstance(indices, np.ndarray):
        arr = plain_ndarray(indices, f"{op}(): indices")
    elif isinstance(indices, (Sequence, range)) and not isinstance(indices, (str, bytes)):
        if len(indices) == 0:
            arr = np.zeros(0, dtype=np.int64)
        else:
            if any(isinstance(v, (bool, np.bool_)) for v in indices):
                raise TypeError(f"{op}(): indices must be integers, got a sequence with bools")
            try:
                arr = np.asarray(indices)
            except (ValueError, TypeError, OverflowError) as exc:
                raise TypeError(f"{op}(): indices must be a 1-D integer sequence ({exc})") from None
    elif np.isscalar(indices) or indices is None:
        raise TypeError(
            f"{op}(): indices must be a 1-D integer tensor, array or sequence, "
            f"got {type(indices).__name__}"
        )
    else:
        try:
            arr = np.asarray(indices)
        except Exception as exc:  # noqa: BLE001
            raise TypeError(
            f"{op}(): cannot read indices of type {type(indices).__name__}"
        ) from exc
    if arr.dtype.kind not in "iu" or arr.dtype.kind == "u" or arr.dtype.itemsize not in (4, 8):
        if arr.dtype == object and arr.ndim == 1 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in arr.tolist()
        ):
            # Python ints too large for int64: out of range by definition.
            vals = arr.tolist()
            bad = next((i for i, v in enumerate(vals) if not (-(2**63) <= v < 2**63)), None)
            if bad is not None:
                raise IndexError(f"{op}(): indices[{bad}] = {vals[bad]} is out of range")
        raise TypeError(
            f"{op}(): indices must have dtype int32 or int64, got {arr.dtype}"
        )
    if arr.ndim != 1:
        raise TypeError(f"{op}(): indices must be 1-D, got shape {tuple(arr.shape)}")
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if not arr.flags.c_contiguous or not arr.flags.aligned:
        arr = np.array(arr, order="C")  # a fresh copy: ascontiguousarray keeps misalignment
    return arr


def _index_error(op: str, pos: int, value: int, n: int) -> IndexError:
    return IndexError(
        f"{op}(): indices[{pos}] = {value} is out of range for a dimension "
        f"of size {n} (valid range [0, {n}); negative indices are not wrapped)"
    )


def check_bounds(idx: np.ndarray, n: int, op: str) -> None:
    """Raise IndexError naming the first index outside ``[0, n)``."""
    # int32/int64 indices are all below 2**63 - 1: a larger n changes nothing
    bad = first_out_of_bounds(idx, min(n, sys.maxsize))
    if bad >= 0:
        raise _index_error(op, bad, int(idx[bad]), n)
