"""Graph convolution layers."""

from .gat_conv import GATConv
from .gatv2_conv import GATv2Conv
from .hetero_conv import HeteroConv
from .rgcn_conv import RGCNConv
from .sage_conv import SAGEConv

__all__ = ["GATConv", "GATv2Conv", "HeteroConv", "RGCNConv", "SAGEConv"]
