"""Optimisers (PyTorch-shaped): ``SGD``, ``Adam``, ``AdamW``, and ``lr_scheduler``.

Updates run in place on the parameters (their in-place methods under
``rtx.no_grad()``), outside the tape.
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "lr_scheduler"]
