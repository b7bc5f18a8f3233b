"""``train_epoch``: one full-batch training epoch, written once.

The HetGAT example (``rtx.examples.hetgat``), the distributed trainer
(``rtx.distributed.hetgat``), the benchmark (``benchmarks/bench_hetgat.py``)
and the tests run their epochs through it, so they all do the same steps in
the same order::

    optimizer.zero_grad()
    out = forward()
    loss = loss_fn(out)
    loss.backward()                  # (DDP all-reduces the gradients here)
    pred = out.detach().argmax(-1)   # the predictions of the parameters this forward used
    state = state_of.state_dict()    # ... and those parameters (before the step)
    optimizer.step()

No dropout means the training pass *is* the evaluation pass: the predictions
and the state describe the same parameters, with no second forward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..optim.optimizer import Optimizer
from ..tensor import Tensor
from .module import Module

__all__ = ["Epoch", "train_epoch"]


class Epoch(NamedTuple):
    """What one ``train_epoch`` returns."""

    loss: Tensor
    """The loss that was backpropagated (``loss.item()`` is its value)."""
    pred: np.ndarray
    """``argmax(-1)`` of the forward pass's output (the parameters before the step)."""
    state: dict[str, Any] | None
    """``state_of.state_dict()`` before the step (``None`` without ``state_of``)."""


def train_epoch(forward: Callable[[], Tensor], loss_fn: Callable[[Tensor], Tensor],
                optimizer: Optimizer, *, state_of: Module | None = None) -> Epoch:
    """One epoch: ``zero_grad``, ``out = forward()``, ``loss_fn(out).backward()``,
    the predictions (and ``state_of``'s state_dict) of the parameters that
    forward used, then ``optimizer.step()``."""
    optimizer.zero_grad()
    out = forward()
    loss = loss_fn(out)
    loss.backward()
    pred = out.detach().argmax(-1).numpy()
    state = state_of.state_dict() if state_of is not None else None
    optimizer.step()
    return Epoch(loss, pred, state)
