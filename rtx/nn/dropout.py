"""``Dropout``: zeroes elements with probability ``p`` in training mode."""

from __future__ import annotations

from ..creation import Generator
from ..tensor import Tensor
from . import functional as F
from .module import Module


class Dropout(Module):
    """In training mode each element is zeroed with probability ``p`` and the
    rest are scaled by ``1 / (1 - p)``; in eval mode it is the identity.  The
    mask is drawn from ``generator`` or rtx's default generator (``rtx.manual_seed``).
    """

    def __init__(self, p: float = 0.5, generator: Generator | None = None) -> None:
        super().__init__()
        F._check_p(p)
        self.p = float(p)
        self.generator = generator

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, generator=self.generator)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace=False"


__all__ = ["Dropout"]
