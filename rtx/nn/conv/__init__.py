"""Graph convolution layers."""

from .gat_conv import GATConv
from .hetero_conv import HeteroConv

__all__ = ["GATConv", "HeteroConv"]
