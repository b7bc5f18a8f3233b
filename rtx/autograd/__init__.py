"""rtx.autograd: the tape (``Autodiff``), grad mode and differentiable ops."""

from .autodiff import Autodiff
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .graph import Node

__all__ = [
    "Autodiff",
    "Node",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
]
