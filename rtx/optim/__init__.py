"""Optimisers (PyTorch-shaped): ``SGD``, ``Adam``, ``AdamW``, ``SparseAdam``, and
``lr_scheduler``.

Updates run in place on the parameters (their in-place methods under
``rtx.no_grad()``), outside the tape.
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "SparseAdam", "lr_scheduler"]
