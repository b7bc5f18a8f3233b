"""``rtx.nn``: modules, parameters, layers and losses (PyTorch-shaped)."""

from . import functional, init
from .activation import ELU, GELU, LeakyReLU, LogSoftmax, ReLU, Softmax
from .containers import ModuleDict, ModuleList, Sequential
from .conv import GATConv, HeteroConv, HGTConv, SimpleHGNConv
from .dropout import Dropout
from .linear import Linear
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .models import HGT, HetGAT, SimpleHGN
from .module import IncompatibleKeys, Module
from .parameter import Parameter
from .sparse import Embedding

__all__ = [
    "CrossEntropyLoss", "Dropout", "ELU", "GELU", "IncompatibleKeys", "L1Loss", "LeakyReLU",
    "Linear", "LogSoftmax", "MSELoss", "Module", "ModuleDict", "ModuleList", "NLLLoss", "Parameter",
    "ReLU", "Sequential", "Softmax", "functional", "init",
    # graph layers and models (rtx/nn/conv, rtx/nn/models)
    "GATConv", "HGTConv", "HeteroConv", "HGT", "HetGAT", "SimpleHGN", "SimpleHGNConv",
    "Embedding",  # rtx/nn/sparse.py
    "BCEWithLogitsLoss",
]
