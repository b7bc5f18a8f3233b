"""Optimisers (PyTorch-shaped): ``SGD`` and ``Adam``.

Updates run in place on the parameters' buffers, outside the tape.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .autograd import no_grad
from .tensor import Tensor


class Optimizer:
    def __init__(self, params: Iterable[Tensor], lr: float) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        for p in self.params:
            if not isinstance(p, Tensor) or not p.requires_grad or not p.is_leaf:
                raise ValueError("optimizer parameters must be leaf tensors with requires_grad")
        if lr < 0:
            raise ValueError(f"invalid learning rate {lr}")
        self.lr = lr
        self.state: dict[int, dict[str, Any]] = {}

    def zero_grad(self) -> None:
        """Clear every parameter's gradient (``.grad = None``, like PyTorch's default)."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        raise NotImplementedError

    def _grads(self, weight_decay: float) -> Iterator[tuple[Tensor, Tensor]]:
        """Each parameter that has a gradient, with its L2-decayed gradient."""
        for p in self.params:
            if p.grad is None:
                continue
            g = p.grad
            if weight_decay:
                g = g + p * weight_decay
            yield p, g


class SGD(Optimizer):
    """``p -= lr * (g + weight_decay * p)``, with optional momentum."""

    def __init__(self, params: Iterable[Tensor], lr: float = 0.01, momentum: float = 0.0,
                 weight_decay: float = 0.0) -> None:
        super().__init__(params, lr)
        self.momentum, self.weight_decay = momentum, weight_decay

    @no_grad()
    def step(self) -> None:
        for p, g in self._grads(self.weight_decay):
            if self.momentum:
                st = self.state.setdefault(id(p), {})
                buf = st.get("momentum")
                buf = g.clone() if buf is None else buf.mul_(self.momentum).add_(g)
                st["momentum"] = buf
                g = buf
            p.sub_(g * self.lr)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with PyTorch's defaults and L2 ``weight_decay``."""

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        super().__init__(params, lr)
        self.betas, self.eps, self.weight_decay = betas, eps, weight_decay

    @no_grad()
    def step(self) -> None:
        b1, b2 = self.betas
        for p, g in self._grads(self.weight_decay):
            st = self.state.get(id(p))
            if st is None:
                st = self.state[id(p)] = {"t": 0, "m": g * 0.0, "v": g * 0.0}
            st["t"] += 1
            t = st["t"]
            st["m"].mul_(b1).add_(g * (1 - b1))
            st["v"].mul_(b2).add_(g * g * (1 - b2))
            step = self.lr / (1 - b1**t)
            denom = (st["v"] / (1 - b2**t)).sqrt() + self.eps
            p.sub_(st["m"] / denom * step)


__all__ = ["SGD", "Adam", "Optimizer"]
