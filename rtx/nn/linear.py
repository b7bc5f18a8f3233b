"""``Linear``: ``y = x @ W.T + b`` with PyTorch's initialisation."""

from __future__ import annotations

import math
from typing import Any

from ..creation import Generator, empty
from ..tensor import Tensor
from . import init
from .module import Module
from .parameter import Parameter


class Linear(Module):
    """``y = x @ weight.T + bias``; ``weight`` is ``[out_features, in_features]``.

    Initialised like PyTorch: ``weight`` by ``kaiming_uniform_(a=sqrt(5))``, i.e.
    U(-1/sqrt(in_features), 1/sqrt(in_features)), and ``bias`` by
    U(-1/sqrt(in_features), 1/sqrt(in_features)), drawn from rtx's default
    generator (``rtx.manual_seed``) or from ``generator``.
    """

    in_features: int
    out_features: int
    weight: Parameter
    bias: Parameter | None

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 dtype: Any = None, generator: Generator | None = None) -> None:
        super().__init__()
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"Linear: {name} must be a non-negative int, got {v!r}")
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in_features, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters(generator)

    def reset_parameters(self, generator: Generator | None = None) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), generator=generator)
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound, generator)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim == 0 or input.shape[-1] != self.in_features:
            raise ValueError(
                f"Linear: input's last dimension must be in_features={self.in_features}, "
                f"got shape {input.shape}"
            )
        out = input @ self.weight.T
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


__all__ = ["Linear"]
