"""Ready-made graph network models."""

from .hetgat import HetGAT

__all__ = ["HetGAT"]
