"""CPU elementwise ops: numpy ufuncs writing into owned output buffers."""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from ..._dtypes import FLOAT_DTYPES as _KERNEL_DTYPES
from ..._dtypes import float_type, result_type
from ..._kernels import owned_binary, owned_unary, storage_array
from ..._threads import get_num_threads
from .._program import evaluate
from ._alloc import empty, own

_ndarray = np.ndarray
_py_numbers = (int, float)

# Float arithmetic on at least THREADED_MIN elements (1 MiB of float32) runs as
# one pass of the fused evaluator on rtx's threads, where numpy's ufunc runs on
# one: the same IEEE operation per element (broadcast as numpy does), so the
# same bits.  Smaller arrays stay in numpy (in cache, its loop is faster than
# starting the threads: 65,536 float32 adds 7.8 us against 15.4).
_THREADED = {np.add: "add", np.subtract: "sub", np.multiply: "mul", np.true_divide: "div"}
THREADED_MIN = 1 << 18


def pair_dtype(a: Any, b: Any) -> np.dtype:
    """PyTorch's result dtype of two operands (``rtx._dtypes.result_type``), with
    the common cases answered without it: equal dtypes, a float array and a
    Python number."""
    if type(a) is _ndarray:
        if type(b) is _ndarray:
            return a.dtype if a.dtype == b.dtype else result_type(a, b)
        return a.dtype if type(b) in _py_numbers and a.dtype.kind == "f" else result_type(a, b)
    if type(b) is _ndarray:
        return b.dtype if type(a) in _py_numbers and b.dtype.kind == "f" else result_type(a, b)
    return result_type(a, b)


def binary(ufunc: Any, a: Any, b: Any, out_dtype: Any = None) -> np.ndarray:
    """``ufunc(a, b)`` into a new owned array: numpy's broadcasting, PyTorch's
    result dtype (``rtx._dtypes.result_type``; true division: ``float_type`` of
    it), computed in that dtype; ``out_dtype`` (comparisons: bool) overrides it."""
    if out_dtype is None:
        # the common case first, asked in C (a float array and one of its dtype
        # and shape below THREADED_MIN elements, or a Python number): what the
        # general path below computes for it, without its dtype and shape questions
        out = owned_binary(ufunc, a, b, THREADED_MIN)
        if out is not None:
            return out
    big = False      # two arrays whose result has THREADED_MIN elements or more
    if type(a) is _ndarray:
        if type(b) is not _ndarray:
            shape = a.shape
        elif a.shape == b.shape:
            shape = a.shape
            big = a.size >= THREADED_MIN
        else:
            shape = np.broadcast_shapes(a.shape, b.shape)
            big = prod(shape) >= THREADED_MIN
    else:
        shape = b.shape
    if out_dtype is not None:
        out = empty(shape, out_dtype)
        ufunc(a, b, out=out)
        return out
    dt = pair_dtype(a, b)
    if ufunc is np.true_divide:
        dt = float_type(dt)
    if big and a.dtype == dt and b.dtype == dt and dt in _KERNEL_DTYPES and ufunc in _THREADED:
        threads = get_num_threads()
        if threads > 1:
            return evaluate(_THREADED[ufunc], (a, b), None, empty, threads)
    out = empty(shape, dt)
    if (type(a) is _ndarray and a.dtype != dt) or (type(b) is _ndarray and b.dtype != dt):
        ufunc(a, b, out=out, dtype=dt)   # promoted: computed in the result dtype
    else:
        ufunc(a, b, out=out)
    return out


def unary(ufunc: Any, a: np.ndarray) -> np.ndarray:
    """``ufunc(a)`` into a new owned array (a float-valued ufunc on ints and bools
    gives float32, computed in it; neg/abs/sign keep the dtype)."""
    out = owned_unary(ufunc, a)    # (float32 / float64 arrays, asked in C)
    if out is not None:
        return out
    dt = a.dtype
    if dt.kind == "f" or ufunc in (np.negative, np.abs, np.sign):
        out = storage_array(a.shape, dt)
        ufunc(a, out=out)
        return out
    out = empty(a.shape, float_type(a.dtype))
    ufunc(a, out=out, dtype=out.dtype)
    return out


_BOOL = np.dtype(bool)


class CpuElementwise:
    def add(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.add, a, b)

    def sub(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.subtract, a, b)

    def mul(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.multiply, a, b)

    def div(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.true_divide, a, b)

    def pow(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.power, a, b)

    def maximum(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.maximum, a, b)

    def minimum(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.minimum, a, b)

    def eq(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.equal, a, b, _BOOL)

    def ne(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.not_equal, a, b, _BOOL)

    def lt(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.less, a, b, _BOOL)

    def le(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.less_equal, a, b, _BOOL)

    def gt(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.greater, a, b, _BOOL)

    def ge(self, a: Any, b: Any) -> np.ndarray:
        return binary(np.greater_equal, a, b, _BOOL)

    def neg(self, a: np.ndarray) -> np.ndarray:
        return unary(np.negative, a)

    def exp(self, a: np.ndarray) -> np.ndarray:
        return unary(np.exp, a)

    def log(self, a: np.ndarray) -> np.ndarray:
        return unary(np.log, a)

    def sqrt(self, a: np.ndarray) -> np.ndarray:
        return unary(np.sqrt, a)

    def abs(self, a: np.ndarray) -> np.ndarray:
        return unary(np.abs, a)

    def sign(self, a: np.ndarray) -> np.ndarray:
        return unary(np.sign, a)

    def elementwise(self, name: str, *operands: Any, imm: float | None = None) -> np.ndarray:
        return evaluate(name, operands, imm, empty, get_num_threads())

    def where(self, cond: Any, a: Any, b: Any) -> np.ndarray:
        r = np.where(cond, a, b)
        dt = pair_dtype(a, b)
        if r.dtype == dt:
            return own(r)
        out = empty(r.shape, dt)
        np.copyto(out, r, casting="unsafe")
        return out

    def cast(self, a: np.ndarray, dtype: Any) -> np.ndarray:
        out = empty(a.shape, dtype)
        np.copyto(out, a, casting="unsafe")
        return out

    def copy(self, a: np.ndarray) -> np.ndarray:
        return own(a)
