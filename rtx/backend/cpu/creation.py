"""CPU creation and in-place ops: owned buffers, writes into them."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._dtypes import FLOAT_DTYPES
from ..._kernels import inplace_arith
from ..._threads import get_num_threads
from ._alloc import empty
from .elementwise import THREADED_MIN, pair_dtype


def _overlaps_itself(a: np.ndarray) -> bool:
    """Whether two elements of ``a`` are one memory location: a stride 0 along a
    dim of extent > 1 (an ``expand``) -- PyTorch's ``has_internal_overlap`` test.
    (Other self-overlapping layouts, from ``as_strided``, PyTorch lets through
    too.)  For a non-empty ``a``: an empty array is C-contiguous (the caller's
    shortcut), and has no two elements."""
    for n, s in zip(a.shape, a.strides, strict=True):
        if s == 0 and n > 1:
            return True
    return False


class CpuCreation:
    _INPLACE = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide}

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return empty(shape, dtype)

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return empty(shape, dtype, zero=True)

    def full(self, shape: tuple[int, ...], value: Any, dtype: Any) -> np.ndarray:
        out = empty(shape, dtype)
        out.fill(value)
        return out

    def inplace(self, op: str, dst: np.ndarray, src: Any) -> np.ndarray:
        # (a C-contiguous array -- every empty one is -- has no overlapping elements)
        if not dst.flags.c_contiguous and _overlaps_itself(dst):
            raise RuntimeError(
                "unsupported operation: more than one element of the written-to tensor "
                "refers to a single memory location. Please clone() the tensor before "
                "performing the operation.")
        if not dst.flags.writeable:
            return super().inplace(op, dst, src)  # type: ignore[misc]
        if op == "fill":
            dst.fill(src)
        elif op == "copy":
            np.copyto(dst, src, casting="unsafe")
        else:
            if np.broadcast_shapes(dst.shape, np.shape(src)) != dst.shape:
                raise ValueError(
                    f"in-place {op}: operand of shape {np.shape(src)} cannot update {dst.shape}"
                )
            if (type(src) is np.ndarray and dst.size >= THREADED_MIN
                    and src.shape == dst.shape and src.dtype == dst.dtype
                    and dst.dtype in FLOAT_DTYPES and dst.flags.c_contiguous
                    and src.flags.c_contiguous and not np.may_share_memory(dst, src)):
                threads = get_num_threads()
                if threads > 1:   # the same IEEE operation per element: numpy's bits
                    inplace_arith(op, dst.reshape(-1), src.reshape(-1), threads)
                    return dst
            if type(src) is np.ndarray and src.dtype != dst.dtype:
                # computed in PyTorch's result dtype, then cast into dst (numpy would
                # compute a float32 tensor times a float64 0-d array in float64)
                ct = pair_dtype(dst, src)
                if src.dtype != ct:
                    src = src.astype(ct)
            self._INPLACE[op](dst, src, out=dst, casting="unsafe")
        return dst
