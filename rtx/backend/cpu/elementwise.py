"""CPU elementwise ops: numpy ufuncs writing into owned output buffers."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._alloc import empty, own

_ndarray = np.ndarray
_py_numbers = (int, float)


def binary(ufunc: Any, a: Any, b: Any, out_dtype: Any = None) -> np.ndarray:
    """``ufunc(a, b)`` into a new owned array (numpy's broadcasting and promotion;
    true division of ints gives float64)."""
    if type(a) is _ndarray:
        if type(b) is _ndarray:
            shape = a.shape if a.shape == b.shape else np.broadcast_shapes(a.shape, b.shape)
            dt = a.dtype if a.dtype == b.dtype else np.result_type(a, b)
        else:
            shape = a.shape
            # a Python number does not change a float array's dtype (NEP 50)
            dt = a.dtype if type(b) in _py_numbers and a.dtype.kind == "f" else (
                np.result_type(a, b))
    else:
        shape = b.shape
        dt = b.dtype if type(a) in _py_numbers and b.dtype.kind == "f" else (
            np.result_type(a, b))
    if out_dtype is not None:
        dt = out_dtype
    elif ufunc is np.true_divide and dt.kind in "biu":
        dt = np.dtype(np.float64)
    out = empty(shape, dt)
    ufunc(a, b, out=out)
    return out


def unary(ufunc: Any, a: np.ndarray) -> np.ndarray:
    """``ufunc(a)`` into a new owned array (ints give float64 except neg/abs/sign)."""
    dt = a.dtype if a.dtype.kind == "f" or ufunc in (np.negative, np.abs, np.sign) else (
        np.dtype(np.float64)
    )
    out = empty(a.shape, dt)
    ufunc(a, out=out)
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

    def where(self, cond: Any, a: Any, b: Any) -> np.ndarray:
        return own(np.where(cond, a, b))

    def cast(self, a: np.ndarray, dtype: Any) -> np.ndarray:
        out = empty(a.shape, dtype)
        np.copyto(out, a, casting="unsafe")
        return out

    def copy(self, a: np.ndarray) -> np.ndarray:
        return own(a)
