"""``HGT``: a ready-made Heterogeneous Graph Transformer (PyG's ``hgt_dblp.py`` example)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...data.naming import check_edge_type, check_name
from ...tensor import Tensor
from .. import functional as F
from ..containers import ModuleDict, ModuleList
from ..conv.hgt_conv import HGTConv
from ..linear import Linear
from ..module import Module

__all__ = ["HGT"]

EdgeType = tuple[str, str, str]


class HGT(Module):
    """``HGT(metadata, in_channels, hidden_channels, out_channels, heads=2,
    num_layers=2, target="paper")``, as PyG's ``examples/hetero/hgt_dblp.py``:
    per node type ``relu(lin_dict[type](x))`` to ``hidden_channels``, ``num_layers``
    ``HGTConv(hidden_channels, hidden_channels, metadata, heads)`` layers (a node
    type that receives no messages keeps its last representation), and a
    ``Linear`` head (``lin``) on the target type.  ``dropout``: in training mode,
    on every HGTConv's input (0 = none, PyG's example).  ``forward(x_dict,
    edge_index_dict)`` -> logits ``[N_target, out_channels]``.
    """

    def __init__(self, metadata: Any, in_channels: Mapping[str, int], hidden_channels: int,
                 out_channels: int, heads: int = 2, num_layers: int = 2,
                 target: str = "paper", dropout: float = 0.0) -> None:
        super().__init__()
        if not (isinstance(metadata, (tuple, list)) and len(metadata) == 2):
            raise ValueError("HGT: metadata must be (node_types, edge_types)")
        node_types = [check_name(t, "HGT: node type") for t in metadata[0]]
        edge_types = [check_edge_type(et, "HGT: edge type") for et in metadata[1]]
        if target not in node_types:
            raise ValueError(f"HGT: target node type {target!r} is not in metadata's node "
                             f"types {node_types}")
        if not any(et[2] == target for et in edge_types):
            raise ValueError(f"HGT: no edge type ends at the target node type {target!r}")
        if not isinstance(in_channels, Mapping) or set(in_channels) != set(node_types):
            raise ValueError(f"HGT: in_channels must give a size for every node type "
                             f"{node_types}")
        for name, v in (("hidden_channels", hidden_channels), ("out_channels", out_channels),
                        ("heads", heads), ("num_layers", num_layers)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"HGT: {name} must be a positive int, got {v!r}")
        self.node_types, self.edge_types, self.target = node_types, edge_types, target
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not (
                0.0 <= float(dropout) < 1.0):
            raise ValueError(f"HGT: dropout must be in [0, 1), got {dropout!r}")
        self.dropout = float(dropout)
        self.in_channels = {t: int(in_channels[t]) for t in node_types}
        self.lin_dict = ModuleDict({t: Linear(self.in_channels[t], hidden_channels)
                                    for t in node_types})
        self.convs = ModuleList([HGTConv(hidden_channels, hidden_channels,
                                         (node_types, edge_types), heads)
                                 for _ in range(num_layers)])
        self.lin = Linear(hidden_channels, out_channels)

    def forward(self, x_dict: Mapping[str, Tensor],
                edge_index_dict: Mapping[EdgeType, Any]) -> Tensor:
        for t in self.node_types:
            if t not in x_dict:
                raise ValueError(f"HGT: x_dict has no features for node type {t!r}")
            x = x_dict[t]
            if not isinstance(x, Tensor):
                raise TypeError(f"HGT: features of node type {t!r} must be an rtx.Tensor, "
                                f"got {type(x).__name__}")
            if x.ndim != 2 or x.shape[1] != self.in_channels[t]:
                raise ValueError(f"HGT: features of node type {t!r} must have shape "
                                 f"[num_nodes, {self.in_channels[t]}], got {x.shape}")
        h = {t: F.relu(self.lin_dict[t](x_dict[t])) for t in self.node_types}
        for conv in self.convs:
            if self.dropout and self.training:
                h = {t: F.dropout(v, self.dropout, True) for t, v in h.items()}
            h = {**h, **conv(h, edge_index_dict)}
        return self.lin(h[self.target])

    def extra_repr(self) -> str:
        return f"target={self.target!r}, in_channels={self.in_channels}"
