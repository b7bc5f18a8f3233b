"""Activations and (log-)softmax.  Defaults are numerically stable host round-trips."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtypes import float_type
from ._family import Family, composed


def _float_dtype(x: np.ndarray) -> np.dtype:
    """Floats keep their dtype; int/bool inputs give float32 (PyTorch's rule:
    ``rtx._dtypes.float_type``), like exp and tanh."""
    return float_type(x.dtype)


def np_sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(_float_dtype(x), copy=False)


def np_elu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))).astype(_float_dtype(x),
                                                                          copy=False)


def np_leaky_relu(x: np.ndarray, slope: float) -> np.ndarray:
    return np.where(x > 0, x, x * slope).astype(_float_dtype(x), copy=False)


def np_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    x = x.astype(_float_dtype(x), copy=False)
    if x.size == 0:
        return np.array(x, copy=True)
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def np_log_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    x = x.astype(_float_dtype(x), copy=False)
    if x.size == 0:
        return np.array(x, copy=True)
    z = x - np.max(x, axis=dim, keepdims=True)
    return z - np.log(np.sum(np.exp(z), axis=dim, keepdims=True))


class ActivationOps(Family):
    FAMILY = "activation"  # its ops: the public methods below (``_family.py``)

    def relu(self, a: Any) -> Any:
        return self.maximum(a, 0)  # type: ignore[attr-defined]

    def leaky_relu(self, a: Any, negative_slope: float) -> Any:
        return self._host(np_leaky_relu, a, negative_slope)

    def elu(self, a: Any, alpha: float) -> Any:
        return self._host(np_elu, a, alpha)

    def sigmoid(self, a: Any) -> Any:
        return self._host(np_sigmoid, a)

    def tanh(self, a: Any) -> Any:
        return self._host(lambda x: np.tanh(x, dtype=_float_dtype(np.asarray(x))), a)

    def softmax(self, a: Any, dim: int) -> Any:
        return self._host(np_softmax, a, dim)

    def log_softmax(self, a: Any, dim: int) -> Any:
        return self._host(np_log_softmax, a, dim)

    # The backward rules' elementwise work, one op each, so that a backend can run
    # it as one pass (the CPU backend: one fused OpenMP kernel).  These defaults
    # compose the backend's own elementwise ops, so a decorator that records
    # those (Fusion) fuses the backward with its neighbours.
    @composed
    def relu_backward(self, out: Any, grad: Any) -> Any:
        """``grad`` where ``out > 0`` (or NaN), else 0: PyTorch's threshold rule."""
        return self.where(self.le(out, 0), 0, grad)  # type: ignore[attr-defined]

    @composed
    def leaky_relu_backward(self, a: Any, grad: Any, negative_slope: float) -> Any:
        """``grad`` where ``a > 0``, else ``grad * negative_slope``."""
        return self.where(self.gt(a, 0), grad,  # type: ignore[attr-defined]
                          self.mul(grad, negative_slope))  # type: ignore[attr-defined]

    @composed
    def sigmoid_backward(self, out: Any, grad: Any) -> Any:
        """``grad * out * (1 - out)`` (``out`` = sigmoid's result)."""
        return self.mul(self.mul(grad, out), self.sub(1, out))  # type: ignore[attr-defined]

    @composed
    def tanh_backward(self, out: Any, grad: Any) -> Any:
        """``grad * (1 - out * out)`` (``out`` = tanh's result)."""
        return self.mul(grad, self.sub(1, self.mul(out, out)))  # type: ignore[attr-defined]

    @composed
    def elu_backward(self, a: Any, out: Any, grad: Any, alpha: float) -> Any:
        """``grad * (out + alpha)`` (= alpha exp(a)) where ``a <= 0``, else ``grad``
        (so a NaN input passes ``grad``, as PyTorch's elu_backward)."""
        return self.where(self.le(a, 0),  # type: ignore[attr-defined]
                          self.mul(grad, self.add(out, alpha)), grad)  # type: ignore[attr-defined]
