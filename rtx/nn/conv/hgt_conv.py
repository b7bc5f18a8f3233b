"""``HGTConv``: the Heterogeneous Graph Transformer layer (Hu et al., WWW 2020) with
PyTorch Geometric's current signature, math and parameter names."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...backend.index_plan import EdgeIndex, as_edge_index
from ...creation import ones
from ...data.naming import check_edge_type, check_name
from ...functional import concat, index_select, message_passing, segment_softmax
from ...tensor import Tensor
from .. import functional as F
from ..hetero_linear import HeteroDictLinear, HeteroLinear
from ..module import Module
from ..parameter import Parameter

__all__ = ["HGTConv"]

EdgeType = tuple[str, str, str]


class _ParamDict(Module):
    """Parameters under plain string keys (``skip.<type>``, ``p_rel.<s__r__d>``)."""

    def __init__(self, params: Mapping[str, Parameter]) -> None:
        super().__init__()
        for k, p in params.items():
            self.register_parameter(k, p)

    def __getitem__(self, key: str) -> Parameter:
        p = self._parameters[key]
        assert p is not None
        return p


class HGTConv(Module):
    """``HGTConv(in_channels, out_channels, metadata, heads=1)`` as PyG's.

    Per node type, keys, queries and values come from one linear layer
    (``kqv_lin``); each relation ``r`` transforms its sources' keys and values
    per head (``k_rel`` / ``v_rel``: ``[heads * num_relations, D, D]``, entry
    ``h * num_relations + r``); an edge's attention is ``q_dst . k_src * p_rel[r] /
    sqrt(D)``, softmaxed over all edges into a destination node, whatever their
    relation (one ``segment_softmax`` per destination type over the relations'
    edges together), and the messages ``alpha * v_src`` are summed (one fused
    ``message_passing``).  The output of a node type that receives messages is
    ``out_lin(gelu(aggregate))``, mixed with its input by ``sigmoid(skip[type])``
    when the sizes agree; a node type that receives none is left out of the
    result, as in PyG.  ``in_channels``: one size for every node type or a dict.
    """

    def __init__(self, in_channels: int | Mapping[str, int], out_channels: int,
                 metadata: Any, heads: int = 1) -> None:
        super().__init__()
        if not (isinstance(metadata, (tuple, list)) and len(metadata) == 2):
            raise ValueError("HGTConv: metadata must be (node_types, edge_types)")
        node_types = [check_name(t, "HGTConv: node type") for t in metadata[0]]
        edge_types = [check_edge_type(et, "HGTConv: edge type") for et in metadata[1]]
        if not node_types or not edge_types:
            raise ValueError("HGTConv: metadata needs at least one node type and one edge type")
        for s, _, d in edge_types:
            for t in (s, d):
                if t not in node_types:
                    raise ValueError(f"HGTConv: edge types name node type {t!r}, which is "
                                     f"not in metadata's node types {node_types}")
        for name, v in (("out_channels", out_channels), ("heads", heads)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"HGTConv: {name} must be a positive int, got {v!r}")
        if out_channels % heads:
            raise ValueError(f"'out_channels' (got {out_channels}) must be divisible by the "
                             f"number of heads (got {heads})")
        if not isinstance(in_channels, Mapping):
            in_channels = {t: in_channels for t in node_types}
        for t, c in in_channels.items():
            if isinstance(c, bool) or not isinstance(c, int) or not (c >= 1 or c == -1):
                raise ValueError(f"HGTConv: in_channels[{t!r}] must be a positive int or -1 "
                                 f"(lazy), got {c!r}")
        self.in_channels = dict(in_channels)
        self.out_channels, self.heads = out_channels, heads
        self.node_types, self.edge_types = node_types, edge_types
        self.edge_types_map = {et: i for i, et in enumerate(edge_types)}
        self.dst_node_types = {et[2] for et in edge_types}
        dim = out_channels // heads
        self.kqv_lin = HeteroDictLinear(self.in_channels, 3 * out_channels)
        self.out_lin = HeteroDictLinear(out_channels, out_channels, types=node_types)
        self.k_rel = HeteroLinear(dim, dim, heads * len(edge_types), is_sorted=True, bias=False)
        self.v_rel = HeteroLinear(dim, dim, heads * len(edge_types), is_sorted=True, bias=False)
        self.skip = _ParamDict({t: Parameter(ones(1)) for t in node_types})
        self.p_rel = _ParamDict({"__".join(et): Parameter(ones(1, heads))
                                 for et in edge_types})
        R = len(edge_types)
        # per relation, the rows of k_rel / v_rel its heads use: h * R + r
        self._rel_rows = {et: np.arange(heads, dtype=np.int64) * R + i
                          for et, i in self.edge_types_map.items()}
        # per target type, the joined edges of the last forward (_joined)
        self._joined_cache: dict[str, tuple[tuple[EdgeIndex, ...], EdgeIndex]] = {}

    def _relate(self, typed: HeteroLinear, x: Tensor, et: EdgeType) -> Tensor:
        """``x [N, H, D]`` with each head through its relation's ``[D, D]`` matrix."""
        w = index_select(typed.weight, self._rel_rows[et])          # [H, D, D]
        return (x.permute(1, 0, 2) @ w).permute(1, 0, 2)              # [N, H, D]

    def forward(self, x_dict: Mapping[str, Tensor],
                edge_index_dict: Mapping[EdgeType, Any]) -> dict[str, Tensor]:
        """``{node type: [N_t, out_channels]}`` for the node types that receive
        messages.  ``edge_index_dict``: edge type -> int ``[2, E]`` (or an
        ``rtx.EdgeIndex``); edge types outside ``metadata`` are refused."""
        H, C = self.heads, self.out_channels
        D = C // H
        for t, x in x_dict.items():
            if not isinstance(x, Tensor):
                raise TypeError(f"HGTConv: features of node type {t!r} must be an rtx.Tensor, "
                                f"got {type(x).__name__}")
            want = self.in_channels.get(t)
            if want is None:
                raise ValueError(f"HGTConv: x_dict has node type {t!r}, which has no "
                                 f"in_channels")
            if x.ndim != 2 or (want != -1 and x.shape[1] != want):
                raise ValueError(f"HGTConv: features of node type {t!r} must have shape "
                                 f"[num_nodes, {want}], got {x.shape}")
        k_dict, q_dict, v_dict = {}, {}, {}
        for t, kqv in self.kqv_lin(x_dict).items():
            n = kqv.shape[0]
            k_dict[t] = kqv[:, :C].reshape(n, H, D)
            q_dict[t] = kqv[:, C:2 * C].reshape(n, H, D)
            v_dict[t] = kqv[:, 2 * C:].reshape(n, H, D)

        # per destination type: the relations' keys / values side by side, their
        # edges' sources offset into that table
        parts: dict[str, list[tuple[EdgeType, EdgeIndex]]] = {}
        for et, edges in edge_index_dict.items():
            et = check_edge_type(et, "HGTConv: edge type")
            if et not in self.edge_types_map:
                raise ValueError(f"HGTConv: edge type {et!r} is not in metadata's edge types")
            s, _, d = et
            for t in (s, d):
                if t not in x_dict:
                    raise ValueError(f"HGTConv: x_dict has no features for node type {t!r} "
                                     f"(edge type {et!r})")
            ei = as_edge_index(edges, x_dict[s].shape[0], x_dict[d].shape[0], "HGTConv")
            parts.setdefault(d, []).append((et, ei))

        out_dict: dict[str, Tensor] = {}
        for d, rels in parts.items():
            n_dst = x_dict[d].shape[0]
            ks, vs, alphas = [], [], []
            offset = 0
            for et, ei in rels:
                k = self._relate(self.k_rel, k_dict[et[0]], et)
                v = self._relate(self.v_rel, v_dict[et[0]], et)
                qi = index_select(q_dict[d], ei.dst)                      # [E, H, D]
                kj = index_select(k, ei.src)
                alphas.append((qi * kj).sum(-1) * self.p_rel["__".join(et)])  # [E, H]
                ks.append(k)
                vs.append(v)
                offset += k.shape[0]
            alpha = concat(alphas, 0) if len(alphas) > 1 else alphas[0]
            graph = self._joined(d, rels, offset, n_dst)
            alpha = segment_softmax(alpha * (1.0 / math.sqrt(D)), graph.dst, n_dst)
            vtab = concat(vs, 0) if len(vs) > 1 else vs[0]
            agg = message_passing(vtab, graph, n_dst, alpha)               # [N_dst, H, D]
            out_dict[d] = agg.reshape(n_dst, C)

        a_dict = self.out_lin({t: F.gelu(v) for t, v in out_dict.items()})
        for t in list(out_dict):
            out = a_dict[t]
            if out.shape[-1] == x_dict[t].shape[-1]:
                a = self.skip[t].sigmoid()
                out = a * out + (1 - a) * x_dict[t]
            out_dict[t] = out
        return out_dict

    def _joined(self, d: str, rels: list[tuple[EdgeType, EdgeIndex]], num_src: int,
                n_dst: int) -> EdgeIndex:
        """The edges into node type ``d`` of all its relations as one ``EdgeIndex``
        over the relations' key / value tables side by side (each relation's sources
        offset by the tables before it).  Built once per graph: kept while the
        relations' checked ``EdgeIndex`` es are the same objects (rtx's plan cache
        hands the same one back for the same edge arrays)."""
        key = tuple(ei for _, ei in rels)
        cached = self._joined_cache.get(d)
        if (cached is not None and len(cached[0]) == len(key)
                and all(a is b for a, b in zip(cached[0], key, strict=True))):
            return cached[1]
        srcs, dsts, offset = [], [], 0
        for _, ei in rels:
            srcs.append(ei.src.indices.astype(np.int64) + offset)
            dsts.append(ei.dst.indices.astype(np.int64))
            offset += ei.num_src
        graph = EdgeIndex(np.stack([np.concatenate(srcs), np.concatenate(dsts)]), num_src,
                          n_dst)
        self._joined_cache[d] = (key, graph)
        return graph

    def __repr__(self) -> str:  # PyG's one line
        return f"{type(self).__name__}(-1, {self.out_channels}, heads={self.heads})"
