"""Elementwise ops (numpy broadcasting rules).  Defaults: host round-trip or other ops."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._family import Family


def sign_with_nan(x: np.ndarray) -> np.ndarray:
    """sign(0) = 0, sign(nan) = nan (numpy's np.sign already does both)."""
    return np.sign(x)


class ElementwiseOps(Family):
    FAMILY = "elementwise"  # its ops: the public methods below (``_family.py``)

    # arithmetic
    def add(self, a: Any, b: Any) -> Any:
        return self._host(np.add, a, b)

    def sub(self, a: Any, b: Any) -> Any:
        return self._host(np.subtract, a, b)

    def mul(self, a: Any, b: Any) -> Any:
        return self._host(np.multiply, a, b)

    def div(self, a: Any, b: Any) -> Any:
        return self._host(np.true_divide, a, b)

    def pow(self, a: Any, b: Any) -> Any:
        return self._host(np.power, a, b)

    def maximum(self, a: Any, b: Any) -> Any:
        return self._host(np.maximum, a, b)

    def minimum(self, a: Any, b: Any) -> Any:
        return self._host(np.minimum, a, b)

    # unary
    def neg(self, a: Any) -> Any:
        return self._host(np.negative, a)

    def exp(self, a: Any) -> Any:
        return self._host(np.exp, a)

    def log(self, a: Any) -> Any:
        return self._host(np.log, a)

    def sqrt(self, a: Any) -> Any:
        return self._host(np.sqrt, a)

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

    # selection, conversion
    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return self._host(np.where, cond, a, b)

    def cast(self, a: Any, dtype: np.dtype) -> Any:
        return self._host(lambda x: np.asarray(x).astype(dtype), a)

    def copy(self, a: Any) -> Any:
        return self._host(np.array, a)
