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
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._kernels import first_out_of_bounds
from ._host import HostRoundTrip, plain_ndarray

INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


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


def check_bounds(idx: np.ndarray, n: int, op: str) -> None:
    """Raise IndexError naming the first index outside ``[0, n)``."""
    # int32/int64 indices are all below 2**63 - 1: a larger n changes nothing
    bad = first_out_of_bounds(idx, min(n, sys.maxsize))
    if bad >= 0:
        raise IndexError(
            f"{op}(): indices[{bad}] = {int(idx[bad])} is out of range for a dimension "
            f"of size {n} (valid range [0, {n}); negative indices are not wrapped)"
        )


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


def check_select(shape: tuple[int, ...], indices: Any) -> np.ndarray:
    if len(shape) < 1:
        raise ValueError("index_select(): x must have at least 1 dimension, got a 0-d tensor")
    idx = as_index_array(indices, "index_select")
    check_bounds(idx, shape[0], "index_select")
    return idx


def check_add(shape: tuple[int, ...], itemsize: int, indices: Any, num_rows: Any) -> tuple[
    np.ndarray, int
]:
    if len(shape) < 1:
        raise ValueError("index_add(): src must have at least 1 dimension, got a 0-d tensor")
    idx = as_index_array(indices, "index_add")
    n = check_num_rows(num_rows)
    if idx.shape[0] != shape[0]:
        raise ValueError(
            f"index_add(): len(indices) = {idx.shape[0]} must equal src.shape[0] = {shape[0]}"
        )
    check_bounds(idx, n, "index_add")
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
