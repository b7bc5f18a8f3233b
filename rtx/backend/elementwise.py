"""Elementwise ops (numpy broadcasting rules).  Defaults: host round-trip or other ops."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtypes import float_type, result_type
from ._family import Family
from ._program import evaluate


def sign_with_nan(x: np.ndarray) -> np.ndarray:
    """sign(0) = 0, sign(nan) = nan (numpy's np.sign already does both)."""
    return np.sign(x)


def np_binary(ufunc: Any, a: Any, b: Any) -> np.ndarray:
    """``ufunc(a, b)`` computed in PyTorch's result dtype (``result_type``; true
    division: ``float_type`` of it), e.g. int64 * 1.5 -> float32."""
    dt = result_type(a, b)
    if ufunc is np.true_divide:
        dt = float_type(dt)
    return ufunc(a, b, dtype=dt)


def np_float_unary(ufunc: Any, a: Any) -> np.ndarray:
    """A float-valued ``ufunc(a)`` (exp, log, ...): ints and bools give float32."""
    return ufunc(a, dtype=float_type(np.asarray(a).dtype))


def np_where(cond: Any, a: Any, b: Any) -> np.ndarray:
    """``where`` with PyTorch's result dtype of the two values."""
    return np.asarray(np.where(cond, a, b)).astype(result_type(a, b), copy=False)


class ElementwiseOps(Family):
    FAMILY = "elementwise"  # its ops: the public methods below (``_family.py``)

    # arithmetic
    def add(self, a: Any, b: Any) -> Any:
        return self._host(lambda x, y: np_binary(np.add, x, y), a, b)

    def sub(self, a: Any, b: Any) -> Any:
        return self._host(lambda x, y: np_binary(np.subtract, x, y), a, b)

    def mul(self, a: Any, b: Any) -> Any:
        return self._host(lambda x, y: np_binary(np.multiply, x, y), a, b)

    def div(self, a: Any, b: Any) -> Any:
        return self._host(lambda x, y: np_binary(np.true_divide, x, y), a, b)

    def pow(self, a: Any, b: Any) -> Any:
        return self._host(lambda x, y: np_binary(np.power, x, y), a, b)

    def maximum(self, a: Any, b: Any) -> Any:
        return self._host(lambda x, y: np_binary(np.maximum, x, y), a, b)

    def minimum(self, a: Any, b: Any) -> Any:
        return self._host(lambda x, y: np_binary(np.minimum, x, y), a, b)

    # unary
    def neg(self, a: Any) -> Any:
        return self._host(np.negative, a)

    def exp(self, a: Any) -> Any:
        return self._host(lambda x: np_float_unary(np.exp, x), a)

    def log(self, a: Any) -> Any:
        return self._host(lambda x: np_float_unary(np.log, x), a)

    def sqrt(self, a: Any) -> Any:
        return self._host(lambda x: np_float_unary(np.sqrt, x), a)

    def abs(self, a: Any) -> Any:
        return self._host(np.abs, a)

    def sign(self, a: Any) -> Any:
        return self._host(sign_with_nan, a)

    # comparisons (bool results)
    def eq(self, a: Any, b: Any) -> Any:
        return self._host(np.equal, a, b)

    def ne(self, a: Any, b: Any) -> Any:
        return self._host(np.not_equal, a, b)

    def lt(self, a: Any, b: Any) -> Any:
        return self._host(np.less, a, b)

    def le(self, a: Any, b: Any) -> Any:
        return self._host(np.less_equal, a, b)

    def gt(self, a: Any, b: Any) -> Any:
        return self._host(np.greater, a, b)

    def ge(self, a: Any, b: Any) -> Any:
        return self._host(np.greater_equal, a, b)

    # any op of the fused evaluator, by name
    def elementwise(self, name: str, *operands: Any, imm: float | None = None) -> Any:
        """The fused evaluator's op ``name`` (a key of ``rtx._kernels.FUSED_OPS``:
        its arity and whether it takes ``imm``, e.g. the slope of leaky_relu) on
        ``operands`` (primitives, broadcast, and Python numbers), as the evaluator
        computes it: float32 / float64 (ints and bools as float32), a predicate's
        result bool.  An op the evaluator has needs no backend body of its own:
        its rule calls this (the CPU backend runs the kernel directly, Fusion
        records it).  Default: one ``fused_eval`` pass over host copies."""
        return self._host(lambda *xs: evaluate(name, xs, imm), *operands)

    # selection, conversion
    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return self._host(np_where, cond, a, b)

    def cast(self, a: Any, dtype: np.dtype) -> Any:
        return self._host(lambda x: np.asarray(x).astype(dtype), a)

    def copy(self, a: Any) -> Any:
        return self._host(np.array, a)
