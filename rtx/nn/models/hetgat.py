"""``HetGAT``: a heterogeneous graph attention network (one GATConv per relation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...backend.index_plan import EdgeIndex, as_edge_index
from ...data.naming import check_edge_type, check_name
from ...tensor import Tensor
from .. import functional as F
from ..containers import ModuleList
from ..conv.gat_conv import GATConv
from ..conv.hetero_conv import HeteroConv
from ..linear import Linear
from ..module import Module

__all__ = ["HetGAT"]

EdgeType = tuple[str, str, str]


def _check_metadata(metadata: Any) -> tuple[list[str], list[EdgeType]]:
    """``(node_types, edge_types)``, every name by ``rtx.data.naming``'s rules."""
    if not (isinstance(metadata, (tuple, list)) and len(metadata) == 2):
        raise ValueError("HetGAT: metadata must be (node_types, edge_types)")
    node_types, edge_types = metadata
    if isinstance(node_types, str) or not isinstance(node_types, Sequence) or not node_types:
        raise ValueError(f"HetGAT: metadata's node_types must be a non-empty list of str, "
                         f"got {node_types!r}")
    nts = [check_name(nt, "HetGAT: node type") for nt in node_types]
    if len(set(nts)) != len(nts):
        raise ValueError(f"HetGAT: node types repeat in metadata: {nts}")
    if isinstance(edge_types, str) or not isinstance(edge_types, Sequence) or not edge_types:
        raise ValueError(f"HetGAT: metadata's edge_types must be a non-empty list of "
                         f"(src_type, relation, dst_type), got {edge_types!r}")
    ets: list[EdgeType] = []
    for et in edge_types:
        et = check_edge_type(et, "HetGAT: edge type")
        for nt in (et[0], et[2]):
            if nt not in nts:
                raise ValueError(f"HetGAT: edge type {tuple(et)!r} uses node type {nt!r}, "
                                 f"which is not in metadata's node types {nts}")
        ets.append(et)
    if len(set(ets)) != len(ets):
        raise ValueError("HetGAT: edge types repeat in metadata")
    return nts, ets


class HetGAT(Module):
    """Heterogeneous GAT for node classification on one ``target`` node type.

    Args:
        metadata: ``(node_types, edge_types)``, edge types ``(src_type, relation,
            dst_type)`` (``HeteroGraph.metadata()``, PyG's ``HeteroData.metadata()``).
        in_channels: node type -> input feature size.
        hidden_channels: width of every hidden layer: ``heads`` heads of
            ``hidden_channels // heads`` channels, concatenated (must divide).
        out_channels: number of classes.
        heads, num_layers: attention heads per GATConv, and layers.
        target: the node type to classify.

    Each layer is a ``HeteroConv`` with one ``GATConv`` per relation (self-loops
    only when source and destination type are the same), summed per destination
    type, then ELU.  Only relations that can reach ``target`` are built: the last
    layer has only relations into ``target``, the one before only relations into
    their sources, and so on.  A ``Linear`` head (``lin``) gives the logits.
    Parameter names are those of the same model written with PyG's
    ``HeteroConv(GATConv)`` and ``torch.nn.Linear``
    (``convs.0.convs.<author___writes___paper>.lin_src.weight``, ``lin.weight``,
    ...), so state_dicts move between the two.
    """

    def __init__(self, metadata: Any, in_channels: Mapping[str, int], hidden_channels: int,
                 out_channels: int, heads: int = 4, num_layers: int = 2,
                 target: str = "paper") -> None:
        super().__init__()
        node_types, edge_types = _check_metadata(metadata)
        if not isinstance(in_channels, Mapping):
            raise ValueError("HetGAT: in_channels must be a dict node type -> feature size")
        for nt in node_types:
            if nt not in in_channels:
                raise ValueError(f"HetGAT: in_channels has no size for node type {nt!r}")
            v = in_channels[nt]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"HetGAT: in_channels[{nt!r}] must be a positive int, "
                                 f"got {v!r}")
        for nt in in_channels:
            if nt not in node_types:
                raise ValueError(f"HetGAT: in_channels names node type {nt!r}, which is not "
                                 f"in metadata's node types {node_types}")
        for name, v in (("hidden_channels", hidden_channels), ("out_channels", out_channels),
                        ("heads", heads), ("num_layers", num_layers)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"HetGAT: {name} must be a positive int, got {v!r}")
        if hidden_channels % heads:
            raise ValueError(f"HetGAT: hidden_channels ({hidden_channels}) must be divisible "
                             f"by heads ({heads})")
        if target not in node_types:
            raise ValueError(f"HetGAT: target node type {target!r} is not in metadata's node "
                             f"types {node_types}")
        if not any(et[2] == target for et in edge_types):
            raise ValueError(f"HetGAT: no edge type ends at the target node type {target!r}")

        self.node_types, self.edge_types = node_types, edge_types
        self.in_channels = {nt: int(in_channels[nt]) for nt in node_types}
        self.hidden_channels, self.out_channels = hidden_channels, out_channels
        self.heads, self.num_layers, self.target = heads, num_layers, target

        # Which node types each layer must output (backwards from target): the
        # next layer's destinations and the sources of its relations into them.
        needed: list[set[str]] = [set() for _ in range(num_layers)]
        needed[-1] = {target}
        for layer in range(num_layers - 2, -1, -1):
            nxt = needed[layer + 1]
            needed[layer] = nxt | {s for s, _, d in edge_types if d in nxt}
        have = set(node_types)  # node types with features entering the layer
        C = hidden_channels // heads
        self.convs = ModuleList()
        self.layer_edge_types: list[list[EdgeType]] = []
        for layer in range(num_layers):
            rels = [et for et in edge_types
                    if et[0] in have and et[2] in have and et[2] in needed[layer]]
            if not any(d == target for _, _, d in rels):
                raise ValueError(f"HetGAT: layer {layer} has no relation into the target "
                                 f"{target!r} (edge types: {edge_types})")
            convs: dict[EdgeType, Module] = {}
            for s, r, d in rels:
                c_s = self.in_channels[s] if layer == 0 else hidden_channels
                c_d = self.in_channels[d] if layer == 0 else hidden_channels
                if s == d:
                    convs[(s, r, d)] = GATConv(c_s, C, heads=heads)
                else:
                    convs[(s, r, d)] = GATConv((c_s, c_d), C, heads=heads, add_self_loops=False)
            self.convs.append(HeteroConv(convs, aggr="sum"))
            self.layer_edge_types.append(rels)
            have = {d for _, _, d in rels}
        self.lin = Linear(hidden_channels, out_channels)

    def forward(self, x_dict: Mapping[str, Tensor],
                edge_index_dict: Mapping[EdgeType, Any]) -> Tensor:
        """Logits ``[N_target, out_channels]``.  ``x_dict``: node type -> features
        ``[N_t, in_channels[t]]``; ``edge_index_dict``: edge type -> int ``[2, E]``
        (or ``rtx.EdgeIndex``)."""
        for nt in self.node_types:
            if nt not in x_dict:
                raise ValueError(f"HetGAT: x_dict has no features for node type {nt!r}")
            x = x_dict[nt]
            if not isinstance(x, Tensor):
                raise TypeError(f"HetGAT: features of node type {nt!r} must be an rtx.Tensor, "
                                f"got {type(x).__name__}")
            if x.ndim != 2 or x.shape[1] != self.in_channels[nt]:
                raise ValueError(f"HetGAT: features of node type {nt!r} must have shape "
                                 f"[num_nodes, {self.in_channels[nt]}], got {x.shape}")
        edges = {et: self._edges(et, edge_index_dict, x_dict) for et in self.edge_types}
        h: Mapping[str, Tensor] = x_dict
        for conv in self.convs:
            h = {nt: F.elu(v) for nt, v in conv(h, edges).items()}
        return self.lin(h[self.target])

    def _edges(self, et: EdgeType, edge_index_dict: Mapping[EdgeType, Any],
               x_dict: Mapping[str, Tensor]) -> EdgeIndex:
        """The checked ``EdgeIndex`` of one relation, shared by every layer's
        GATConv for it (each takes its self-loops from the same plan's cache).
        Raw edges are checked once and reused while they are equal (the plan
        cache of ``as_edge_index``); an ``EdgeIndex`` is taken as it is."""
        if et not in edge_index_dict:
            raise ValueError(f"HetGAT: edge_index_dict has no edges for edge type {et!r}")
        n_src, n_dst = x_dict[et[0]].shape[0], x_dict[et[2]].shape[0]
        try:
            return as_edge_index(edge_index_dict[et], n_src, n_dst, "HetGAT")
        except (TypeError, ValueError, IndexError) as exc:
            raise type(exc)(f"HetGAT: edges of {et!r} ({n_src} {et[0]!r} -> {n_dst} "
                            f"{et[2]!r} nodes): {exc}") from None

    def extra_repr(self) -> str:
        return (f"target={self.target!r}, in_channels={self.in_channels}, "
                f"hidden_channels={self.hidden_channels}, out_channels={self.out_channels}, "
                f"heads={self.heads}, num_layers={self.num_layers}")
