"""``SGD`` with momentum, dampening, Nesterov and L2 weight decay (PyTorch's rule)."""

from __future__ import annotations

from typing import Any

from ..autograd.grad_mode import no_grad
from .optimizer import Optimizer, ParamsT


class SGD(Optimizer):
    """``g = grad + weight_decay * p``; with momentum ``buf = momentum * buf +
    (1 - dampening) * g`` (``buf = g`` on the first step) and ``g = buf`` (or
    ``g + momentum * buf`` with ``nesterov``); then ``p -= lr * g``."""

    def __init__(self, params: ParamsT, lr: float = 0.01, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov})

    def _check_hyper(self, group: dict[str, Any]) -> None:
        super()._check_hyper(group)
        if group["momentum"] < 0:
            raise ValueError(f"Invalid momentum value: {group['momentum']}")
        if group["weight_decay"] < 0:
            raise ValueError(f"Invalid weight_decay value: {group['weight_decay']}")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    @no_grad()
    def step(self) -> None:
        self._check_dense()
        for group in self.param_groups:
            mom, damp = group["momentum"], group["dampening"]
            for p, g in self._grads(group):
                if mom:
                    st = self.state.setdefault(id(p), {})
                    buf = st.get("momentum_buffer")
                    if buf is None:
                        buf = st["momentum_buffer"] = g.clone()
                    else:
                        buf.mul_(mom).add_(g, alpha=1 - damp)
                    g = g + buf * mom if group["nesterov"] else buf
                p.sub_(g * group["lr"])


__all__ = ["SGD"]
