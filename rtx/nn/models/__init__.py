"""Ready-made graph network models."""

from .hetgat import HetGAT
from .simple_hgn import SimpleHGN

__all__ = ["HetGAT", "SimpleHGN"]
