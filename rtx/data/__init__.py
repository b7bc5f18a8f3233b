"""``rtx.data``: graph data objects (PyTorch Geometric's layout).

``HeteroData`` holds a heterogeneous graph: node stores per node type, edge stores
per ``(src_type, relation, dst_type)``, graph-level attributes; ``naming`` holds
the rules every node type and relation name follows.
"""

from . import naming
from .hetero_data import EdgeStore, HeteroData, NodeStore

__all__ = ["EdgeStore", "HeteroData", "NodeStore", "naming"]
