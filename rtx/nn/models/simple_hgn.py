"""``SimpleHGN``: HGB's Simple-HGN baseline (Lv et al., KDD 2021) as a ready-made model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...backend.index_plan import EdgeIndex, IndexPlan, as_edge_index
from ...data.naming import check_edge_type, check_name
from ...functional import concat
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..containers import ModuleDict, ModuleList
from ..conv.simple_hgn_conv import SimpleHGNConv
from ..linear import Linear
from ..module import Module

__all__ = ["SimpleHGN"]

EdgeType = tuple[str, str, str]


class SimpleHGN(Module):
    """``SimpleHGN(metadata, in_channels, hidden_channels, out_channels, num_layers=2,
    heads=8, edge_dim=64, negative_slope=0.05, feat_drop=0.5, attn_drop=0.5,
    beta=0.05, target="paper")`` (HGB's DBLP settings as defaults).

    As HGB's ``myGAT``: one ``Linear`` per node type (``fc_list.<type>``) brings
    every type to ``hidden_channels``; the graph becomes one graph over all nodes
    (types in ``metadata`` order) whose edges carry their relation's id, plus a
    self-loop on every node as one more edge type; ``num_layers`` ``SimpleHGNConv``
    layers with ``heads`` heads and ELU (the first without the node residual), each
    passing its attention on as the next one's residual attention; an output
    ``SimpleHGNConv`` with one head; the target type's rows, L2-normalised
    (``logits / max(||logits||, 1e-12)``).  ``forward(x_dict, edge_index_dict)`` ->
    ``[N_target, out_channels]``.
    """

    def __init__(self, metadata: Any, in_channels: Mapping[str, int], hidden_channels: int,
                 out_channels: int, num_layers: int = 2, heads: int = 8, edge_dim: int = 64,
                 negative_slope: float = 0.05, feat_drop: float = 0.5,
                 attn_drop: float = 0.5, beta: float = 0.05, target: str = "paper") -> None:
        super().__init__()
        if not (isinstance(metadata, (tuple, list)) and len(metadata) == 2):
            raise ValueError("SimpleHGN: metadata must be (node_types, edge_types)")
        node_types = [check_name(t, "SimpleHGN: node type") for t in metadata[0]]
        edge_types = [check_edge_type(et, "SimpleHGN: edge type") for et in metadata[1]]
        if not node_types or not edge_types:
            raise ValueError("SimpleHGN: metadata needs node types and edge types")
        if target not in node_types:
            raise ValueError(f"SimpleHGN: target node type {target!r} is not in metadata's "
                             f"node types {node_types}")
        if not isinstance(in_channels, Mapping) or set(in_channels) != set(node_types):
            raise ValueError(f"SimpleHGN: in_channels must give a size for every node type "
                             f"{node_types}")
        for name, v in (("hidden_channels", hidden_channels), ("out_channels", out_channels),
                        ("num_layers", num_layers), ("heads", heads)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"SimpleHGN: {name} must be a positive int, got {v!r}")
        self.node_types, self.edge_types, self.target = node_types, edge_types, target
        self.in_channels = {t: int(in_channels[t]) for t in node_types}
        self.feat_drop = float(feat_drop)
        T = len(edge_types) + 1  # the relations and the self-loops
        self.fc_list = ModuleDict({t: Linear(self.in_channels[t], hidden_channels)
                                   for t in node_types})
        for lin in self.fc_list.values():
            init.xavier_normal_(lin.weight, gain=1.414)
        kw: dict[str, Any] = dict(num_edge_types=T, edge_dim=edge_dim,
                                  negative_slope=negative_slope,
                                  feat_drop=feat_drop, attn_drop=attn_drop, beta=beta)
        layers = [SimpleHGNConv(hidden_channels, hidden_channels, heads=heads, residual=False,
                                activation=F.elu, **kw)]
        for _ in range(1, num_layers):
            layers.append(SimpleHGNConv(hidden_channels * heads, hidden_channels, heads=heads,
                                        residual=True, activation=F.elu, **kw))
        layers.append(SimpleHGNConv(hidden_channels * heads, out_channels, heads=1,
                                    residual=True, activation=None, **kw))
        self.gat_layers = ModuleList(layers)
        # the one typed graph of the last forward, kept while its relations' checked
        # edges are the same objects (rtx's plan cache hands the same EdgeIndex back
        # for the same edge arrays): (relations' EdgeIndex es, graph, types, N)
        self._graph_cache: tuple[tuple[EdgeIndex, ...], EdgeIndex, IndexPlan, int] | None = None

    def _graph(self, x_dict: Mapping[str, Tensor],
               edge_index_dict: Mapping[EdgeType, Any]) -> tuple[EdgeIndex, IndexPlan, int]:
        """The one typed graph over all ``N`` nodes: its ``EdgeIndex`` (the relations'
        edges, offset by node type, then a self-loop on every node) and each edge's
        type (an ``IndexPlan`` over the relations + 1).  Built once for a graph: while
        every relation's checked ``EdgeIndex`` is the same object as at the last
        forward, the last graph is reused (no concatenation, check or grouping)."""
        offset, n = {}, 0
        for t in self.node_types:
            offset[t] = n
            n += x_dict[t].shape[0]
        rels = []
        for et in self.edge_types:
            if et not in edge_index_dict:
                raise ValueError(f"SimpleHGN: edge_index_dict has no edges for {et!r}")
            s, _, d = et
            rels.append(as_edge_index(edge_index_dict[et], x_dict[s].shape[0],
                                      x_dict[d].shape[0], "SimpleHGN"))
        key = tuple(rels)
        cached = self._graph_cache
        if (cached is not None and cached[3] == n and len(cached[0]) == len(key)
                and all(a is b for a, b in zip(cached[0], key, strict=True))):
            return cached[1], cached[2], n
        srcs, dsts, types = [], [], []
        for i, (et, ei) in enumerate(zip(self.edge_types, rels, strict=True)):
            s, _, d = et
            srcs.append(ei.src.indices.astype(np.int64) + offset[s])
            dsts.append(ei.dst.indices.astype(np.int64) + offset[d])
            types.append(np.full(ei.num_edges, i, np.int64))
        loops = np.arange(n, dtype=np.int64)
        src = np.concatenate(srcs + [loops])
        dst = np.concatenate(dsts + [loops])
        et_ = np.concatenate(types + [np.full(n, len(self.edge_types), np.int64)])
        graph = EdgeIndex(np.stack([src, dst]), n, n)
        plan = IndexPlan(et_, len(self.edge_types) + 1)
        self._graph_cache = (key, graph, plan, n)
        return graph, plan, n

    def forward(self, x_dict: Mapping[str, Tensor],
                edge_index_dict: Mapping[EdgeType, Any]) -> Tensor:
        for t in self.node_types:
            if t not in x_dict:
                raise ValueError(f"SimpleHGN: x_dict has no features for node type {t!r}")
            x = x_dict[t]
            if not isinstance(x, Tensor):
                raise TypeError(f"SimpleHGN: features of node type {t!r} must be an "
                                f"rtx.Tensor, got {type(x).__name__}")
            if x.ndim != 2 or x.shape[1] != self.in_channels[t]:
                raise ValueError(f"SimpleHGN: features of node type {t!r} must have shape "
                                 f"[num_nodes, {self.in_channels[t]}], got {x.shape}")
        edge_index, edge_type, n = self._graph(x_dict, edge_index_dict)
        hs = [self.fc_list[t](x_dict[t]) for t in self.node_types]
        h = concat(hs, 0) if len(hs) > 1 else hs[0]
        res_attn = None
        for conv in list(self.gat_layers)[:-1]:
            out, res_attn = conv(h, edge_index, edge_type, res_attn=res_attn)
            h = out.reshape(n, out.shape[1] * out.shape[2])
        logits, _ = self.gat_layers[-1](h, edge_index, edge_type, res_attn=None)
        logits = logits.mean(1)
        start = sum(x_dict[t].shape[0] for t in self.node_types[:self.node_types.index(
            self.target)])
        logits = logits[start:start + x_dict[self.target].shape[0]]
        norm = (logits * logits).sum(1, keepdim=True).sqrt().maximum(1e-12)
        return logits / norm

    def extra_repr(self) -> str:
        return f"target={self.target!r}, in_channels={self.in_channels}"
