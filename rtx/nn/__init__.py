"""``rtx.nn``: modules, parameters, layers and losses (PyTorch-shaped)."""

from . import functional, init
from .activation import ELU, LeakyReLU, LogSoftmax, ReLU, Softmax
from .containers import ModuleDict, ModuleList, Sequential
from .conv import GATConv, GATv2Conv, HeteroConv, RGCNConv, SAGEConv
from .dropout import Dropout
from .hetero_linear import HeteroDictLinear, HeteroLinear
from .lazy import UninitializedParameter
from .linear import LazyLinear, Linear
from .loss import CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .models import HetGAT
from .module import IncompatibleKeys, Module
from .norm import BatchNorm1d, GraphLayerNorm, LayerNorm
from .parameter import Parameter

__all__ = [
    "CrossEntropyLoss", "Dropout", "ELU", "IncompatibleKeys", "L1Loss", "LeakyReLU", "Linear",
    "LogSoftmax", "MSELoss", "Module", "ModuleDict", "ModuleList", "NLLLoss", "Parameter",
    "ReLU", "Sequential", "Softmax", "functional", "init",
    # lazy sizes and normalisation (rtx/nn/lazy.py, linear.py, norm.py)
    "BatchNorm1d", "GraphLayerNorm", "LayerNorm", "LazyLinear", "UninitializedParameter",
    # graph layers and models (rtx/nn/conv, rtx/nn/models)
    "GATConv", "GATv2Conv", "HeteroConv", "HetGAT", "SAGEConv",
    # one linear map per type, as one grouped matmul (rtx/nn/hetero_linear.py)
    "HeteroDictLinear", "HeteroLinear",
    # relational GCN on the grouped matmul (rtx/nn/conv/rgcn_conv.py)
    "RGCNConv",
]
