"""Mini-batch loading of heterogeneous graphs: neighbour sampling (docs/sampling.md).

``NeighborSampler(data, num_neighbors, replace=False, seed=0).sample((node_type, ids),
epoch, batch)`` -> ``HeteroSamplerOutput`` (per node type the sampled global ids,
per edge type an ``EdgeIndex`` over local ids; PyG's semantics and batch layout).
"""

from .sampler import EdgeType, HeteroSamplerOutput, NeighborSampler

__all__ = ["EdgeType", "HeteroSamplerOutput", "NeighborSampler"]
