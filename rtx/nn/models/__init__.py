"""Ready-made graph network models."""

from .hetgat import HetGAT
from .rgcn import RGCN

__all__ = ["HetGAT", "RGCN"]
