"""``Linear``: ``y = x @ W.T + b`` with PyTorch's initialisation; ``LazyLinear``
and ``Linear(-1, out)``: the input size taken from the first input (PyG)."""

from __future__ import annotations

import math
from typing import Any

from ..autograd.grad_mode import no_grad
from ..creation import Generator, empty
from ..tensor import Tensor
from . import init
from .lazy import UninitializedParameter, check_lazy_channels, is_lazy
from .module import Module
from .parameter import Parameter

_WEIGHT_INITS = (None, "kaiming_uniform", "glorot", "uniform")
_BIAS_INITS = (None, "zeros")


class Linear(Module):
    """``y = x @ weight.T + bias``; ``weight`` is ``[out_features, in_features]``.

    Initialised like PyTorch: ``weight`` by ``kaiming_uniform_(a=sqrt(5))``, i.e.
    U(-1/sqrt(in_features), 1/sqrt(in_features)), and ``bias`` by
    U(-1/sqrt(in_features), 1/sqrt(in_features)), drawn from rtx's default
    generator (``rtx.manual_seed``) or from ``generator``.

    ``in_features=-1`` (PyG's ``Linear(-1, out)``; ``LazyLinear(out)``) leaves
    ``weight`` an ``UninitializedParameter`` until the first input (or
    ``load_state_dict``) gives the width; it is then initialised exactly as a
    ``Linear(width, out)`` built at that moment would be (``bias`` too: it
    exists from the start, zero, and is drawn again at that moment).
    ``weight_initializer`` / ``bias_initializer`` are PyG's ``Linear`` options
    (``None`` = PyTorch's scheme, ``"glorot"``, ``"kaiming_uniform"``,
    ``"uniform"``; bias ``None`` or ``"zeros"``), which layers use so a lazy
    weight is initialised by their scheme.
    """

    out_features: int
    weight: Parameter
    bias: Parameter | None

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 dtype: Any = None, generator: Generator | None = None, *,
                 weight_initializer: str | None = None,
                 bias_initializer: str | None = None) -> None:
        super().__init__()
        in_features = check_lazy_channels(in_features, "in_features", "Linear", minimum=0)
        if isinstance(out_features, bool) or not isinstance(out_features, int) \
                or out_features < 0:
            raise ValueError(f"Linear: out_features must be a non-negative int, got "
                             f"{out_features!r}")
        if weight_initializer not in _WEIGHT_INITS:
            raise ValueError(f"Linear: weight_initializer must be one of {_WEIGHT_INITS}, got "
                             f"{weight_initializer!r}")
        if bias_initializer not in _BIAS_INITS:
            raise ValueError(f"Linear: bias_initializer must be one of {_BIAS_INITS}, got "
                             f"{bias_initializer!r}")
        self.out_features = out_features
        self.weight_initializer = weight_initializer
        self.bias_initializer = bias_initializer
        self._generator = generator
        if in_features < 0:
            self.weight = UninitializedParameter((out_features, -1), dtype=dtype)
        else:
            self.weight = Parameter(empty(out_features, in_features, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype))
            if in_features < 0:
                init.zeros_(self.bias)  # drawn when the width is known
        else:
            self.register_parameter("bias", None)
        self.reset_parameters(generator)

    @property
    def in_features(self) -> int:
        """The input width (``-1`` while lazy)."""
        w = self._parameters["weight"]
        return -1 if w is None or is_lazy(w) else w.shape[1]

    def reset_parameters(self, generator: Generator | None = None) -> None:
        """Initialise ``weight`` and ``bias`` (nothing while lazy: the first input does)."""
        n = self.in_features
        if n < 0:
            return
        g = generator if generator is not None else self._generator
        w = self.weight
        if self.weight_initializer == "glorot":
            b = math.sqrt(6.0 / (w.shape[-2] + w.shape[-1])) if w.numel() else 0.0
            init.uniform_(w, -b, b, g)
        elif self.weight_initializer == "uniform":
            b = 1.0 / math.sqrt(n) if n > 0 else 0.0
            init.uniform_(w, -b, b, g)
        else:  # None / "kaiming_uniform": PyTorch's (a = sqrt(5): U(+-1/sqrt(in)))
            init.kaiming_uniform_(w, a=math.sqrt(5), generator=g)
        if self.bias is not None:
            if self.bias_initializer == "zeros":
                init.zeros_(self.bias)
            else:
                bound = 1 / math.sqrt(n) if n > 0 else 0.0
                init.uniform_(self.bias, -bound, bound, g)

    def materialize(self, in_features: int) -> None:
        """Size a lazy weight ``[out_features, in_features]`` and initialise the
        layer; nothing when it is sized already (the forward checks widths)."""
        w = self._parameters["weight"]
        if not is_lazy(w):
            return
        if isinstance(in_features, bool) or not isinstance(in_features, int) or in_features < 0:
            raise ValueError(f"Linear: cannot size a lazy weight with in_features={in_features!r}")
        assert isinstance(w, UninitializedParameter)
        with no_grad():
            w.materialize((self.out_features, in_features))
            self.reset_parameters()

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim == 0:
            raise ValueError(f"Linear: input must have at least 1 dimension, got shape "
                             f"{input.shape}")
        self.materialize(input.shape[-1])
        if input.shape[-1] != self.in_features:
            raise ValueError(
                f"Linear: input's last dimension must be in_features={self.in_features}, "
                f"got shape {input.shape}"
            )
        out = input @ self.weight.T
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class LazyLinear(Linear):
    """``Linear`` whose ``in_features`` is taken from the first input (PyTorch's
    ``LazyLinear(out_features, bias=True)``; ``Linear(-1, out_features)``).

    Before the first forward ``weight`` is an ``UninitializedParameter`` and
    ``in_features`` is ``-1`` (PyTorch shows 0); the object stays a
    ``LazyLinear`` afterwards (PyTorch turns it into a ``Linear``)."""

    def __init__(self, out_features: int, bias: bool = True, dtype: Any = None,
                 generator: Generator | None = None) -> None:
        super().__init__(-1, out_features, bias, dtype, generator)


__all__ = ["LazyLinear", "Linear"]
