"""Reductions along a dim (or all dims with ``dim=None``), with ``keepdim``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtypes import float_type
from ._family import Family

Dim = int | tuple[int, ...] | None


class ReductionOps(Family):
    FAMILY = "reduction"  # its ops: the public methods below (``_family.py``)

    def sum(self, a: Any, dim: Dim = None, keepdim: bool = False) -> Any:
        return self._host(np.sum, a, axis=dim, keepdims=keepdim)

    def mean(self, a: Any, dim: Dim = None, keepdim: bool = False) -> Any:
        return self._host(lambda x: np.mean(x, axis=dim, keepdims=keepdim,
                                            dtype=float_type(np.asarray(x).dtype)), a)

    def max(self, a: Any, dim: Dim = None, keepdim: bool = False) -> Any:
        return self._host(np.max, a, axis=dim, keepdims=keepdim)

    def min(self, a: Any, dim: Dim = None, keepdim: bool = False) -> Any:
        return self._host(np.min, a, axis=dim, keepdims=keepdim)

    def argmax(self, a: Any, dim: int | None = None, keepdim: bool = False) -> Any:
        def _argmax(x: np.ndarray) -> np.ndarray:
            r = np.argmax(x, axis=dim, keepdims=keepdim and dim is not None)
            if dim is None and keepdim:
                r = np.reshape(r, (1,) * x.ndim)
            return np.asarray(r, dtype=np.int64)

        return self._host(_argmax, a)
