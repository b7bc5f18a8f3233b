"""``rtx.nn``: modules, parameters, layers and losses (PyTorch-shaped)."""

from . import functional, init
from .activation import ELU, LeakyReLU, LogSoftmax, ReLU, Softmax
from .containers import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .linear import Linear
from .module import IncompatibleKeys, Module
from .parameter import Parameter

__all__ = [
    "ELU", "Dropout", "IncompatibleKeys", "LeakyReLU", "Linear", "LogSoftmax", "Module",
    "ModuleDict", "ModuleList", "Parameter", "ReLU", "Sequential", "Softmax", "functional",
    "init",
]
