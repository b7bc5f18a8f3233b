"""Activation modules: thin wrappers over ``rtx.nn.functional``; their defaults are
the ops' declared ones (``rtx/_autodiff/ops/activation.py``), written once."""

from __future__ import annotations

from .._autodiff.ops import OPS
from ..tensor import Tensor
from . import functional as F
from .module import Module

_SLOPE = OPS["leaky_relu"].defaults["negative_slope"]
_ALPHA = OPS["elu"].defaults["alpha"]
_DIM = OPS["softmax"].defaults["dim"]
_APPROXIMATE = OPS["gelu"].defaults["approximate"]


class ReLU(Module):
    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = _SLOPE) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    def __init__(self, alpha: float = _ALPHA) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class GELU(Module):
    """``torch.nn.GELU(approximate="none")``: ``rtx.nn.functional.gelu``."""

    def __init__(self, approximate: str = _APPROXIMATE) -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    def __init__(self, dim: int = _DIM) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)


__all__ = ["ELU", "LeakyReLU", "LogSoftmax", "ReLU", "Softmax"]
