"""``rtx.utils``: graph utilities (PyTorch Geometric's ``torch_geometric.utils`` names).

``negative_sampling(edge_index, num_nodes, num_neg_samples)``: seeded, vectorised
sampling of node pairs that are not edges (bipartite sizes, self-loops never
sampled on one node type, never an existing edge).
"""

from ._negative_sampling import negative_sampling

__all__ = ["negative_sampling"]
