"""Learning-rate schedulers with PyTorch's semantics: ``StepLR``, ``CosineAnnealingLR``.

A scheduler sets ``group["lr"]`` of its optimiser's groups.  Construction
performs the first step (``last_epoch`` becomes 0 and each group's ``lr`` its
``initial_lr``); call ``scheduler.step()`` once per epoch after
``optimizer.step()``.  ``last_epoch=-1`` starts afresh and records each group's
``initial_lr``; another value resumes and requires ``initial_lr`` in every group
(as PyTorch does).  The update rules are PyTorch's recursive (chainable) forms.
"""

from __future__ import annotations

import math
from typing import Any

from .optimizer import Optimizer


class LRScheduler:
    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for g in optimizer.param_groups:
                g.setdefault("initial_lr", g["lr"])
        else:
            for i, g in enumerate(optimizer.param_groups):
                if "initial_lr" not in g:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming an optimizer"
                    )
        self.base_lrs: list[float] = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The learning rates set by the latest ``step()``, one per group."""
        return list(self._last_lr)

    def step(self) -> None:
        self._step_count += 1
        self.last_epoch += 1
        for g, lr in zip(self.optimizer.param_groups, self.get_lr(), strict=True):
            g["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """Every attribute except the optimiser (PyTorch's rule)."""
        return {k: (list(v) if isinstance(v, list) else v)
                for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)


class StepLR(LRScheduler):
    """Multiply each group's lr by ``gamma`` every ``step_size`` epochs:
    ``lr = initial_lr * gamma ** (last_epoch // step_size)``."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        if isinstance(step_size, bool) or not isinstance(step_size, int) or step_size <= 0:
            raise ValueError(f"StepLR: step_size must be a positive int, got {step_size!r}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from ``initial_lr`` to ``eta_min`` over ``T_max`` epochs:
    ``lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * last_epoch / T_max)) / 2``
    (SGDR without restarts; past ``T_max`` it rises again, as in PyTorch)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1) -> None:
        if isinstance(T_max, bool) or not isinstance(T_max, int) or T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be a positive int, got {T_max!r}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if e == 0:
            return [g["lr"] for g in groups]
        if self._step_count == 1 and e > 0:
            return [lo + (b - lo) * (1 + math.cos(e * math.pi / t)) / 2 for b in self.base_lrs]
        if (e - 1 - t) % (2 * t) == 0:
            return [g["lr"] + (b - lo) * (1 - math.cos(math.pi / t)) / 2
                    for b, g in zip(self.base_lrs, groups, strict=True)]
        return [(1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t))
                * (g["lr"] - lo) + lo for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [self.eta_min + (b - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for b in self.base_lrs]


__all__ = ["CosineAnnealingLR", "LRScheduler", "StepLR"]
