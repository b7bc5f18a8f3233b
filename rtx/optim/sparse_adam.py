"""``SparseAdam``: Adam for row-sparse gradients (``Embedding(sparse=True)``), PyTorch's rule."""

from __future__ import annotations

import math
from typing import Any

from ..autograd.grad_mode import no_grad
from ..backend.index_plan import IndexPlan
from ..tensor import bump_version, prepare_write
from .adam import _zeros
from .optimizer import Optimizer, ParamsT, is_sparse_grad

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    """Lazy Adam for sparse gradients (PyTorch's ``torch.optim.SparseAdam``).

    Only the rows present in a step's gradient have their moments and values
    updated; a parameter's step count ``t`` counts every step in which it had a
    gradient, and its bias corrections use it.  Per present row ``r``:
    ``m_r = b1 m_r + (1 - b1) g_r``; ``v_r = b2 v_r + (1 - b2) g_r^2``;
    ``p_r -= lr sqrt(1 - b2^t) / (1 - b1^t) * m_r / (sqrt(v_r) + eps)``.
    Every parameter's gradient must be sparse (``Embedding(sparse=True)``);
    a dense one raises RuntimeError (use ``Adam`` for it).  The moments are
    dense (the parameter's shape, allocated at the first step, as PyTorch's);
    a step updates the present rows of the parameter and both moments in one
    fused pass (``Backend.adam_rows``), in place, allocating nothing.
    """

    def __init__(self, params: ParamsT, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 maximize: bool = False) -> None:
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps,
                                  "maximize": maximize})

    def _check_hyper(self, group: dict[str, Any]) -> None:
        if not 0.0 < group["lr"]:
            raise ValueError(f"Invalid learning rate: {group['lr']}")
        b1, b2 = group["betas"]
        if not 0.0 <= b1 < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {b1}")
        if not 0.0 <= b2 < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {b2}")
        if not 0.0 < group["eps"]:
            raise ValueError(f"Invalid epsilon value: {group['eps']}")

    @no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and not is_sparse_grad(p.grad):
                    raise RuntimeError("SparseAdam does not support dense gradients, please "
                                       "consider Adam instead")
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr, eps = group["lr"], group["eps"]
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                st = self.state.get(id(p))
                if st is None:
                    st = self.state[id(p)] = {"step": 0, "exp_avg": _zeros(p),
                                              "exp_avg_sq": _zeros(p)}
                st["step"] += 1
                g = g.coalesce()
                rows = g._idx
                if len(rows) == 0:
                    continue
                t = st["step"]
                vals = g._values()
                if vals.dtype != p.dtype:
                    vals = vals.to(p.dtype)
                if group["maximize"]:
                    vals = -vals
                plan = IndexPlan(rows, p.shape[0])
                m, v = st["exp_avg"], st["exp_avg_sq"]
                step_size = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
                # one fused pass over the present rows (Backend.adam_rows): the
                # moments and the parameter in place, torch's arithmetic
                B = p._ad.inner
                prepare_write(p)
                p._value, m._value, v._value = B.adam_rows(
                    p._value, m._value, v._value, plan, vals.contiguous()._value, b1, b2, eps,
                    step_size)
                for a in (p, m, v):
                    bump_version(a)
