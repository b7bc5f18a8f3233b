"""Graph convolution layers."""

from .gat_conv import GATConv
from .gatv2_conv import GATv2Conv
from .hetero_conv import HeteroConv
from .sage_conv import SAGEConv

__all__ = ["GATConv", "GATv2Conv", "HeteroConv", "SAGEConv"]
