"""``rtx.nn``: modules, parameters, layers and losses (PyTorch-shaped)."""

from . import functional, init
from .activation import ELU, GELU, LeakyReLU, LogSoftmax, ReLU, Softmax
from .containers import ModuleDict, ModuleList, Sequential
from .conv import GATConv, GATv2Conv, HeteroConv, HGTConv, RGCNConv, SAGEConv, SimpleHGNConv
from .dropout import Dropout
from .hetero_linear import HeteroDictLinear, HeteroLinear
from .lazy import UninitializedParameter
from .linear import LazyLinear, Linear
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .models import HGT, RGCN, HetGAT, SimpleHGN
from .module import IncompatibleKeys, Module
from .norm import BatchNorm1d, GraphLayerNorm, LayerNorm
from .parameter import Parameter
from .sparse import Embedding

__all__ = [
    "CrossEntropyLoss", "Dropout", "ELU", "GELU", "IncompatibleKeys", "L1Loss", "LeakyReLU",
    "Linear", "LogSoftmax", "MSELoss", "Module", "ModuleDict", "ModuleList", "NLLLoss", "Parameter",
    "ReLU", "Sequential", "Softmax", "functional", "init",
    # lazy sizes and normalisation (rtx/nn/lazy.py, linear.py, norm.py)
    "BatchNorm1d", "GraphLayerNorm", "LayerNorm", "LazyLinear", "UninitializedParameter",
    # graph layers and models (rtx/nn/conv, rtx/nn/models)
    "GATConv", "GATv2Conv", "HGTConv", "HeteroConv", "RGCNConv", "SAGEConv", "SimpleHGNConv",
    "HGT", "HetGAT", "RGCN", "SimpleHGN",
    # one linear map per type, as one grouped matmul (rtx/nn/hetero_linear.py)
    "HeteroDictLinear", "HeteroLinear",
    "Embedding",  # rtx/nn/sparse.py
    "BCEWithLogitsLoss",
]
