"""``RGCN``: a relational GCN for heterogeneous node classification (RGCNConv
layers on the graph's homogeneous view)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...backend.index_plan import EdgeIndex, IndexPlan, as_edge_index
from ...functional import concat
from ...tensor import Tensor
from .. import functional as F
from ..containers import ModuleList
from ..conv.rgcn_conv import RGCNConv
from ..hetero_linear import HeteroDictLinear
from ..linear import Linear
from ..module import Module
from .hetgat import EdgeType, _check_metadata

__all__ = ["RGCN"]


def _pos_int(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"RGCN: {name} must be a positive int, got {v!r}")
    return v


class RGCN(Module):
    """Relational GCN (Schlichtkrull et al.) for node classification on one
    ``target`` node type, ready-made like ``HetGAT``.

    Args:
        metadata: ``(node_types, edge_types)`` (``HeteroData.metadata()``).
        in_channels: node type -> input feature size (``-1``: lazy).
        hidden_channels: width of every layer.  ``out_channels``: classes.
        num_layers: RGCNConv layers (ReLU between them, and dropout when
            ``dropout > 0`` in training).
        num_bases / num_blocks / aggr: RGCNConv's (PyG's defaults).
        target: the node type to classify.

    Each node type's features are projected to ``hidden_channels`` by one
    ``HeteroDictLinear`` (``lin_in``); the graph is then one homogeneous graph
    (node types stacked in metadata order, one relation per edge type) and
    every ``RGCNConv`` (``convs.<i>``) runs all relations in one grouped pass.
    ``lin`` gives the logits of the target nodes.  The homogeneous graph (and
    each layer's (target, relation) grouping) is built once and reused while
    the same checked edges come back (raw edges: ``as_edge_index``'s cache).
    """

    def __init__(self, metadata: Any, in_channels: Mapping[str, int], hidden_channels: int,
                 out_channels: int, num_layers: int = 2, num_bases: int | None = None,
                 num_blocks: int | None = None, aggr: str = "mean", dropout: float = 0.0,
                 target: str = "paper") -> None:
        super().__init__()
        node_types, edge_types = _check_metadata(metadata)
        if not isinstance(in_channels, Mapping) or set(in_channels) != set(node_types):
            raise ValueError(f"RGCN: in_channels must give a size for every node type "
                             f"{node_types}, got {in_channels!r}")
        _pos_int(hidden_channels, "hidden_channels")
        _pos_int(out_channels, "out_channels")
        _pos_int(num_layers, "num_layers")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) \
                or not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"RGCN: dropout must be in [0, 1), got {dropout!r}")
        if target not in node_types:
            raise ValueError(f"RGCN: target node type {target!r} is not in metadata's node "
                             f"types {node_types}")
        if not any(et[2] == target for et in edge_types):
            raise ValueError(f"RGCN: no edge type ends at the target node type {target!r}")
        self.node_types, self.edge_types = node_types, edge_types
        self.hidden_channels, self.out_channels = hidden_channels, out_channels
        self.num_layers, self.target, self.dropout = num_layers, target, float(dropout)
        self.lin_in = HeteroDictLinear({nt: in_channels[nt] for nt in node_types},
                                       hidden_channels)
        R = len(edge_types)
        self.convs = ModuleList([RGCNConv(hidden_channels, hidden_channels, R,
                                          num_bases=num_bases, num_blocks=num_blocks,
                                          aggr=aggr) for _ in range(num_layers)])
        self.lin = Linear(hidden_channels, out_channels)
        self._graph: tuple[tuple[Any, ...], EdgeIndex, IndexPlan] | None = None

    def forward(self, x_dict: Mapping[str, Tensor],
                edge_index_dict: Mapping[EdgeType, Any]) -> Tensor:
        """Logits ``[N_target, out_channels]``."""
        for nt in self.node_types:
            if nt not in x_dict or not isinstance(x_dict[nt], Tensor):
                raise ValueError(f"RGCN: x_dict needs an rtx.Tensor for node type {nt!r}")
        sizes = [x_dict[nt].shape[0] for nt in self.node_types]
        ei, types = self._homogeneous(x_dict, edge_index_dict, sizes)
        h_dict = self.lin_in({nt: x_dict[nt] for nt in self.node_types})
        h = concat([h_dict[nt] for nt in self.node_types], 0)
        for i, conv in enumerate(self.convs):
            h = conv(h, ei, types)
            if i + 1 < len(self.convs):
                h = F.relu(h)
                if self.dropout > 0.0:
                    h = F.dropout(h, p=self.dropout, training=self.training)
        start = sum(sizes[: self.node_types.index(self.target)])
        out = h[start:start + x_dict[self.target].shape[0]]
        return self.lin(out)

    def _homogeneous(self, x_dict: Mapping[str, Tensor], edge_index_dict: Mapping[EdgeType, Any],
                     sizes: list[int]) -> tuple[EdgeIndex, IndexPlan]:
        """One graph over all nodes (types stacked in metadata order) and each
        edge's relation, cached while the same checked per-relation edges (and
        node counts) come back."""
        plans = []
        for et in self.edge_types:
            if et not in edge_index_dict:
                raise ValueError(f"RGCN: edge_index_dict has no edges for edge type {et!r}")
            n_src, n_dst = x_dict[et[0]].shape[0], x_dict[et[2]].shape[0]
            try:
                plans.append(as_edge_index(edge_index_dict[et], n_src, n_dst, "RGCN"))
            except (TypeError, ValueError, IndexError) as exc:
                raise type(exc)(f"RGCN: edges of {et!r}: {exc}") from None
        key = (*plans, *sizes)
        g = self._graph
        if g is not None and len(g[0]) == len(key) and all(a is b for a, b in zip(g[0], key,
                                                                                  strict=True)):
            return g[1], g[2]
        off = dict(zip(self.node_types, np.cumsum([0, *sizes[:-1]]).tolist(), strict=True))
        src = [p.src.indices.astype(np.int64) + off[et[0]]
               for p, et in zip(plans, self.edge_types, strict=True)]
        dst = [p.dst.indices.astype(np.int64) + off[et[2]]
               for p, et in zip(plans, self.edge_types, strict=True)]
        rel = [np.full(p.num_edges, r, np.int64) for r, p in enumerate(plans)]
        n = int(sum(sizes))
        ei = EdgeIndex(np.stack([np.concatenate(src), np.concatenate(dst)]), n, n)
        types = IndexPlan(np.concatenate(rel), len(self.edge_types))
        self._graph = (key, ei, types)
        return ei, types

    def extra_repr(self) -> str:
        return (f"target={self.target!r}, hidden_channels={self.hidden_channels}, "
                f"out_channels={self.out_channels}, num_layers={self.num_layers}, "
                f"num_relations={len(self.edge_types)}")
