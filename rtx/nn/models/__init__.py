"""Ready-made graph network models."""

from .hetgat import HetGAT
from .hgt import HGT
from .simple_hgn import SimpleHGN

__all__ = ["HGT", "HetGAT", "SimpleHGN"]
