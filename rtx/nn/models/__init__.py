"""Ready-made graph network models."""

from .hetgat import HetGAT
from .hgt import HGT
from .rgcn import RGCN
from .simple_hgn import SimpleHGN

__all__ = ["HGT", "HetGAT", "RGCN", "SimpleHGN"]
