"""Parameter initialisation (PyTorch's ``torch.nn.init``), in place under ``no_grad``.

Random initialisers draw from ``generator`` (an ``rtx.Generator``) or, by
default, rtx's default generator (``rtx.manual_seed``).  Samples are drawn in
float64 and cast to the tensor's dtype, a block of rows at a time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._autodiff.ops import OPS
from ..autograd.grad_mode import no_grad
from ..creation import Generator, _rng
from ..tensor import Tensor


def _check(tensor: Any, name: str) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name}: expected an rtx.Tensor, got {type(tensor).__name__}")
    if tensor.dtype.kind != "f":
        raise TypeError(f"{name}: expected a floating point tensor, got {tensor.dtype}")
    return tensor


_FILL_CHUNK = 1 << 20   # float64 samples drawn at a time


def _fill(tensor: Tensor, draw: Callable[[tuple[int, ...]], np.ndarray]) -> Tensor:
    """Copy ``draw(shape)`` into ``tensor``, a block of rows at a time: a large
    weight (an embedding table) never needs a float64 copy of itself.  The
    generator's stream is consumed in order, so the values equal one draw of
    the whole shape."""
    shape = tuple(tensor.shape)
    row = math.prod(shape[1:])
    with no_grad():
        if not shape or shape[0] * row <= _FILL_CHUNK or row == 0:
            tensor.copy_(np.ascontiguousarray(draw(shape), dtype=tensor.dtype))
            return tensor
        step = max(1, _FILL_CHUNK // row)
        for i in range(0, shape[0], step):
            j = min(shape[0], i + step)
            tensor[i:j].copy_(np.ascontiguousarray(draw((j - i, *shape[1:])),
                                                   dtype=tensor.dtype))
    return tensor


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = OPS["leaky_relu"].defaults["negative_slope"]  # the op's declared default
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
        )
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,
             generator: Generator | None = None) -> Tensor:
    """Fill with samples of U(a, b)."""
    _check(tensor, "uniform_")
    if a > b:
        raise ValueError(f"uniform_: expects a <= b, got a={a}, b={b}")
    rng = _rng(None, generator)
    return _fill(tensor, lambda shape: rng.uniform(a, b, shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: Generator | None = None) -> Tensor:
    """Fill with samples of N(mean, std^2)."""
    _check(tensor, "normal_")
    if std < 0:
        raise ValueError(f"normal_: expects std >= 0, got {std}")
    rng = _rng(None, generator)
    return _fill(tensor, lambda shape: rng.normal(mean, std, shape))


def constant_(tensor: Tensor, val: float) -> Tensor:
    _check(tensor, "constant_")
    with no_grad():
        tensor.fill_(val)
    return tensor


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0,
                    generator: Generator | None = None) -> Tensor:
    """U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))`` (Glorot & Bengio)."""
    _check(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out)) if fan_in + fan_out else 0.0
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0,
                   generator: Generator | None = None) -> Tensor:
    """N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    _check(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out)) if fan_in + fan_out else 0.0
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu",
                     generator: Generator | None = None) -> Tensor:
    """U(-bound, bound) with ``bound = gain * sqrt(3 / fan)`` (He et al.)."""
    _check(tensor, "kaiming_uniform_")
    if 0 in tensor.shape:
        return tensor
    fan = _fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu",
                    generator: Generator | None = None) -> Tensor:
    """N(0, std^2) with ``std = gain / sqrt(fan)``."""
    _check(tensor, "kaiming_normal_")
    if 0 in tensor.shape:
        return tensor
    fan = _fan(tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


__all__ = [
    "calculate_gain", "constant_", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_",
    "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_",
]
