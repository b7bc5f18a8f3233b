"""``Adam`` (L2 weight decay) and ``AdamW`` (decoupled weight decay), PyTorch's rules."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autograd.grad_mode import no_grad
from ..tensor import Tensor, as_tensor, bump_version, prepare_write
from .optimizer import Optimizer, ParamsT


def _zeros(p: Tensor) -> Tensor:
    """A zero tensor like ``p`` on ``p``'s own backend."""
    return as_tensor(np.zeros(p.shape, p.dtype), p._ad)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with PyTorch's defaults.

    Per step ``t``: ``g = grad + weight_decay * p``; ``m = b1 m + (1 - b1) g``;
    ``v = b2 v + (1 - b2) g^2`` (``amsgrad``: the running max of ``v`` is used);
    ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``.
    """

    _decoupled = False

    def __init__(self, params: ParamsT, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False) -> None:
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps,
                                  "weight_decay": weight_decay, "amsgrad": amsgrad})

    def _check_hyper(self, group: dict[str, Any]) -> None:
        super()._check_hyper(group)
        b1, b2 = group["betas"]
        if not 0.0 <= b1 < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {b1}")
        if not 0.0 <= b2 < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {b2}")
        if group["eps"] < 0:
            raise ValueError(f"Invalid epsilon value: {group['eps']}")
        if group["weight_decay"] < 0:
            raise ValueError(f"Invalid weight_decay value: {group['weight_decay']}")

    @no_grad()
    def step(self) -> None:
        self._check_dense()
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                st = self.state.get(id(p))
                if st is None:
                    st = self.state[id(p)] = {"step": 0, "exp_avg": _zeros(p),
                                              "exp_avg_sq": _zeros(p)}
                    if group["amsgrad"]:
                        st["max_exp_avg_sq"] = _zeros(p)
                st["step"] += 1
                m, v = st["exp_avg"], st["exp_avg_sq"]
                vmax = st["max_exp_avg_sq"] if group["amsgrad"] else None
                # one fused pass (Backend.adam_step): the L2 (or decoupled) decay,
                # both moments, amsgrad's max and the parameter, in place
                B = p._ad.inner
                grad = g.detach().contiguous()
                if grad.dtype != p.dtype:
                    grad = grad.to(p.dtype)
                prepare_write(p)   # (m, v and p live on one backend)
                p._value, m._value, v._value, vm = B.adam_step(
                    p._value, m._value, v._value, None if vmax is None else vmax._value,
                    grad._value, b1, b2, eps, lr, st["step"], wd, self._decoupled)
                if vmax is not None:
                    vmax._value = vm
                for a in (p, m, v) if vmax is None else (p, m, v, vmax):
                    bump_version(a)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), PyTorch's rule:
    ``p *= 1 - lr * weight_decay`` before the Adam step on the raw gradient.
    Default ``weight_decay=1e-2``."""

    _decoupled = True

    def __init__(self, params: ParamsT, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad)


__all__ = ["Adam", "AdamW"]
