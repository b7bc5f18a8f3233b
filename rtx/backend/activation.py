"""Activations and (log-)softmax.  Defaults are numerically stable host round-trips."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._host import HostRoundTrip


def _float_dtype(x: np.ndarray) -> np.dtype:
    """Floats keep their dtype; int/bool inputs give float64 (like exp, tanh)."""
    return x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)


def np_sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(_float_dtype(x), copy=False)


def np_elu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))).astype(_float_dtype(x),
                                                                          copy=False)


def np_leaky_relu(x: np.ndarray, slope: float) -> np.ndarray:
    return np.where(x > 0, x, x * slope).astype(_float_dtype(x), copy=False)


def np_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    if x.size == 0:
        return np.array(x, copy=True)
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def np_log_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    if x.size == 0:
        return np.array(x, copy=True)
    z = x - np.max(x, axis=dim, keepdims=True)
    return z - np.log(np.sum(np.exp(z), axis=dim, keepdims=True))


class ActivationOps(HostRoundTrip):
    FAMILY = "activation"  # the op names below: what a decorator backend forwards as a family
    OPS: tuple[str, ...] = (
        "relu", "leaky_relu", "elu", "sigmoid", "tanh", "softmax", "log_softmax",
    )

    def relu(self, a: Any) -> Any:
        return self.maximum(a, 0)  # type: ignore[attr-defined]

    def leaky_relu(self, a: Any, negative_slope: float = 0.01) -> Any:
        return self._host(np_leaky_relu, a, negative_slope)

    def elu(self, a: Any, alpha: float = 1.0) -> Any:
        return self._host(np_elu, a, alpha)

    def sigmoid(self, a: Any) -> Any:
        return self._host(np_sigmoid, a)

    def tanh(self, a: Any) -> Any:
        return self._host(np.tanh, a)

    def softmax(self, a: Any, dim: int) -> Any:
        return self._host(np_softmax, a, dim)

    def log_softmax(self, a: Any, dim: int) -> Any:
        return self._host(np_log_softmax, a, dim)
