"""Mini-batch loading of heterogeneous graphs: neighbour sampling and loaders
(docs/sampling.md).

``NeighborSampler(data, num_neighbors, replace=False, seed=0).sample((node_type, ids),
epoch, batch)`` -> ``HeteroSamplerOutput`` (per node type the sampled global ids,
per edge type an ``EdgeIndex`` over local ids; PyG's semantics and batch layout).
``NeighborLoader(data, num_neighbors, input_nodes=(node_type, ids_or_mask), ...)`` and
``LinkNeighborLoader(data, num_neighbors, edge_label_index=(edge_type, [2, E]), ...)``
iterate over ``rtx.data.HeteroData`` batches in PyG's layout, sampled and gathered
on a background thread ahead of training.
"""

from .loader import LinkNeighborLoader, NeighborLoader
from .sampler import EdgeType, HeteroSamplerOutput, NeighborSampler

__all__ = ["EdgeType", "HeteroSamplerOutput", "LinkNeighborLoader", "NeighborLoader",
           "NeighborSampler"]
