"""The CPU backend's memory: C-contiguous numpy arrays over an rtx ``Storage``
(one owned, 64-byte aligned allocation from rtx's caching allocator,
``rtx/_storage.pxi``; counted by ``rtx.memory_stats()``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._kernels import Storage, storage_array

_ndarray = np.ndarray


def empty(shape: tuple[int, ...], dtype: Any, zero: bool = False) -> np.ndarray:
    """An uninitialised (or zeroed) C-contiguous array owned by an rtx Storage."""
    try:
        # the Storage and the array made in C: numbers and bools, an np.dtype, a
        # tuple shape
        return storage_array(shape, dtype, zero)
    except TypeError:
        # another dtype or shape type (np.ndarray's message if it is wrong); a
        # dtype given as a type or a name: once more as an np.dtype
        as_dtype = not isinstance(dtype, np.dtype)
    except OverflowError:  # a dimension past a Py_ssize_t
        raise MemoryError(f"rtx: an array of shape {shape} is too large") from None
    if as_dtype:
        return empty(shape, np.dtype(dtype), zero)
    try:
        storage = Storage(math.prod(shape) * dtype.itemsize, zero)
    except OverflowError:  # more bytes than a Py_ssize_t holds
        raise MemoryError(f"rtx: an array of shape {shape} is too large") from None
    # np.ndarray(buffer=) keeps the Storage itself as the array's base (no
    # memoryview in between): half the cost of frombuffer + reshape.
    # (numpy's stubs type buffers as collections.abc.Buffer only from Python 3.12)
    return _ndarray(shape, dtype, storage)  # type: ignore[arg-type]


def own(a: np.ndarray) -> np.ndarray:
    """``a``'s values in an rtx-owned, C-contiguous buffer."""
    out = empty(a.shape, a.dtype)
    np.copyto(out, a)
    return out
