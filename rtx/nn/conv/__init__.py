"""Graph convolution layers."""

from .gat_conv import GATConv
from .hetero_conv import HeteroConv
from .hgt_conv import HGTConv
from .simple_hgn_conv import SimpleHGNConv

__all__ = ["GATConv", "HGTConv", "HeteroConv", "SimpleHGNConv"]
