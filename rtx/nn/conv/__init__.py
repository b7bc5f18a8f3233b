"""Graph convolution layers."""

from .gat_conv import GATConv
from .gatv2_conv import GATv2Conv
from .hetero_conv import HeteroConv
from .hgt_conv import HGTConv
from .rgcn_conv import RGCNConv
from .sage_conv import SAGEConv
from .simple_hgn_conv import SimpleHGNConv

__all__ = ["GATConv", "GATv2Conv", "HGTConv", "HeteroConv", "RGCNConv", "SAGEConv",
           "SimpleHGNConv"]
