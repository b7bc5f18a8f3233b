"""``HetGAT``: a heterogeneous graph attention network (one GATConv per relation)."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from ...autograd.grad_mode import no_grad
from ...backend.index_plan import EdgeIndex, as_edge_index
from ...data.naming import check_edge_type, check_name, edge_module_key
from ...functional import concat, index_select
from ...tensor import Tensor
from .. import functional as F
from ..containers import ModuleDict, ModuleList
from ..conv.gat_conv import GATConv
from ..conv.hetero_conv import HeteroConv
from ..linear import Linear
from ..module import Module
from ..sparse import Embedding

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
        in_channels: node type -> input feature size, or ``None`` for a node
            type without features: it gets a learnable ``Embedding`` (one row per
            node, ``num_nodes_dict[type]`` rows of ``embedding_dim``), as OGB's
            R-GCN example does for ogbn-mag's authors, institutions and fields.
            A type missing from ``in_channels`` but in ``num_nodes_dict`` is
            featureless too.
        hidden_channels: width of every hidden layer: ``heads`` heads of
            ``hidden_channels // heads`` channels, concatenated (must divide).
        out_channels: number of classes.
        heads, num_layers: attention heads per GATConv, and layers.
        target: the node type to classify.
        num_nodes_dict: node type -> node count, for the featureless types.
        embedding_dim: width of their embeddings (default ``hidden_channels``).
        sparse: their embeddings' gradients are row-sparse (``Embedding(sparse=
            True)``: train them with ``rtx.optim.SparseAdam``, the rest with
            ``Adam``; ``embedding_parameters()`` / ``dense_parameters()`` split them).
        dropout: in training mode, the dropout rate of every layer's input features
            and of the attention weights (each GATConv's ``dropout``); 0 = none.

    Each layer is a ``HeteroConv`` with one ``GATConv`` per relation (self-loops
    only when source and destination type are the same), summed per destination
    type, then ELU.  Only relations that can reach ``target`` are built: the last
    layer has only relations into ``target``, the one before only relations into
    their sources, and so on.  A ``Linear`` head (``lin``) gives the logits.
    Parameter names are those of the same model written with PyG's
    ``HeteroConv(GATConv)`` and ``torch.nn.Linear``
    (``convs.0.convs.<author___writes___paper>.lin_src.weight``, ``lin.weight``,
    ...), so state_dicts move between the two; embeddings are ``emb.<type>.weight``.

    ``forward`` takes the features of the types that have them; a featureless
    type's input is its embedding's rows ``n_id_dict[type]`` (a sampled batch's
    global ids, ``batch.n_id_dict``) or, without ``n_id_dict``, the whole table.
    ``inference`` computes the full-graph output layer by layer over batches of
    destination nodes (the evaluation of sampled training).

    ``path``: ``"grouped"`` computes each layer's relations into one node type as
    one attention pass, ``"per-relation"`` calls each relation's ``GATConv`` and
    sums (``HeteroConv``'s ``path``; the same outputs to rounding); ``"auto"``
    (default) groups full-graph forwards and runs a sampled batch (``n_id_dict``
    or the trimming counts given) per relation: its edges are new every batch,
    and grouping them anew each batch was measured slower, with a larger peak.
    """

    def __init__(self, metadata: Any, in_channels: Mapping[str, int | None],
                 hidden_channels: int, out_channels: int, heads: int = 4, num_layers: int = 2,
                 target: str = "paper", num_nodes_dict: Mapping[str, int] | None = None,
                 embedding_dim: int | None = None, sparse: bool = False,
                 dropout: float = 0.0, path: str = "auto") -> None:
        super().__init__()
        node_types, edge_types = _check_metadata(metadata)
        if path not in ("auto", "grouped", "per-relation"):
            raise ValueError(f"HetGAT: path must be 'auto', 'grouped' or 'per-relation', got "
                             f"{path!r}")
        if not isinstance(in_channels, Mapping):
            raise ValueError("HetGAT: in_channels must be a dict node type -> feature size")
        if num_nodes_dict is not None and not isinstance(num_nodes_dict, Mapping):
            raise ValueError("HetGAT: num_nodes_dict must be a dict node type -> node count")
        nodes = dict(num_nodes_dict or {})
        featureless: list[str] = []
        for nt in node_types:
            if nt not in in_channels and nt not in nodes:
                raise ValueError(f"HetGAT: in_channels has no size for node type {nt!r} "
                                 "(None, with its count in num_nodes_dict, for a type "
                                 "without features)")
            v = in_channels.get(nt)
            if v is None:
                n = nodes.get(nt)
                if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
                    raise ValueError(f"HetGAT: node type {nt!r} has no features, so "
                                     f"num_nodes_dict[{nt!r}] must give its node count (an int "
                                     f">= 0) for its embedding, got {n!r}")
                featureless.append(nt)
            elif isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"HetGAT: in_channels[{nt!r}] must be a positive int "
                                 f"(or None: no features), got {v!r}")
        for nt in nodes:
            if nt not in node_types:
                raise ValueError(f"HetGAT: num_nodes_dict names node type {nt!r}, which is "
                                 f"not in metadata's node types {node_types}")
        if embedding_dim is None:
            embedding_dim = hidden_channels
        if isinstance(embedding_dim, bool) or not isinstance(embedding_dim, int) \
                or embedding_dim < 1:
            raise ValueError(f"HetGAT: embedding_dim must be a positive int, got "
                             f"{embedding_dim!r}")
        if not isinstance(sparse, (bool, np.bool_)):
            raise TypeError(f"HetGAT: sparse must be a bool, got {type(sparse).__name__}")
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
        self.featureless = featureless
        self.embedding_dim, self.sparse = embedding_dim, bool(sparse)
        # (a featureless type's input is its embedding: embedding_dim wide)
        self.in_channels = {nt: embedding_dim if nt in featureless
                            else int(in_channels[nt])  # type: ignore[arg-type]
                            for nt in node_types}
        self.hidden_channels, self.out_channels = hidden_channels, out_channels
        self.heads, self.num_layers, self.target = heads, num_layers, target
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not (
                0.0 <= float(dropout) < 1.0):
            raise ValueError(f"HetGAT: dropout must be in [0, 1), got {dropout!r}")
        self.dropout = float(dropout)
        self.path = path

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
                    convs[(s, r, d)] = GATConv(c_s, C, heads=heads, dropout=self.dropout)
                else:
                    convs[(s, r, d)] = GATConv((c_s, c_d), C, heads=heads, add_self_loops=False,
                                               dropout=self.dropout)
            self.convs.append(HeteroConv(convs, aggr="sum",
                                         path="grouped" if path == "auto" else path))
            self.layer_edge_types.append(rels)
            have = {d for _, _, d in rels}
        self.lin = Linear(hidden_channels, out_channels)
        if featureless:  # (drawn after the layers: a model with features only is unchanged)
            self.emb = ModuleDict({nt: Embedding(int(nodes[nt]), embedding_dim, sparse=sparse)
                                   for nt in featureless})

    def embedding_parameters(self) -> list[Any]:
        """The featureless types' embedding weights (for ``SparseAdam`` when sparse)."""
        return [self.emb[nt].weight for nt in self.featureless]

    def dense_parameters(self) -> list[Any]:
        """Every other parameter (for ``Adam``)."""
        ids = {id(p) for p in self.embedding_parameters()}
        return [p for p in self.parameters() if id(p) not in ids]

    def _inputs(self, x_dict: Mapping[str, Tensor], n_id_dict: Mapping[str, Any] | None,
                whole: bool = False) -> dict[str, Tensor]:
        """Every node type's input: its features, or its embedding's rows."""
        if not isinstance(x_dict, Mapping):
            raise TypeError(f"HetGAT: x_dict must be a dict node type -> features, got "
                            f"{type(x_dict).__name__}")
        h: dict[str, Tensor] = {}
        for nt in self.node_types:
            if nt in self.featureless:
                emb = self.emb[nt]
                ids = None if n_id_dict is None else n_id_dict.get(nt)
                if ids is None and whole:  # every row, as it is (no gather, no tape)
                    h[nt] = emb.weight.detach()
                    continue
                if ids is None:
                    ids = np.arange(emb.num_embeddings, dtype=np.int64)
                try:
                    h[nt] = emb(ids)
                except (TypeError, ValueError, IndexError) as exc:
                    raise type(exc)(f"HetGAT: n_id_dict[{nt!r}] ({emb.num_embeddings} "
                                    f"embedded nodes): {exc}") from None
                continue
            if nt not in x_dict:
                raise ValueError(f"HetGAT: x_dict has no features for node type {nt!r}")
            h[nt] = x_dict[nt]
        for nt in x_dict:
            if nt in self.featureless:
                raise ValueError(f"HetGAT: node type {nt!r} has an embedding (in_channels "
                                 f"None): pass its node ids in n_id_dict, not features")
        return h

    def forward(self, x_dict: Mapping[str, Tensor],
                edge_index_dict: Mapping[EdgeType, Any] | Sequence[Mapping[EdgeType, Any]],
                n_id_dict: Mapping[str, Any] | None = None, *,
                num_sampled_nodes_dict: Mapping[str, Sequence[int]] | None = None,
                num_sampled_edges_dict: Mapping[EdgeType, Sequence[int]] | None = None
                ) -> Tensor:
        """Logits ``[N_target, out_channels]``.  ``x_dict``: node type -> features
        ``[N_t, in_channels[t]]`` (featureless types omitted); ``edge_index_dict``:
        edge type -> int ``[2, E]`` (or ``rtx.EdgeIndex``), the same edges for every
        layer, or a list of such dicts, one per layer, each holding (at least) that
        layer's relations (``layer_edge_types[l]``): layer ``l`` then runs only its
        own edges (a graph trimmed per layer, as a partition's last layer needs only
        its owned nodes' in-edges); ``n_id_dict``: node type -> the global ids of a
        featureless type's nodes (a sampled batch's ``n_id``: its embedding's rows;
        default: every row).

        ``num_sampled_nodes_dict`` / ``num_sampled_edges_dict`` (a sampled batch's
        ``num_sampled_nodes`` per node type, ``num_sampled_edges`` per edge type,
        both given or neither): layer ``l`` of ``L`` then reads the nodes of hops
        ``0 .. L - l`` over the edges of the first ``L - l`` hops and computes
        outputs for the nodes of hops ``0 .. L - l - 1`` only (DGL's blocks; PyG's
        ``trim_to_layer`` trims the sources the same way but keeps one hop more of
        outputs), since no later layer reads the others: the targets are the
        first rows of the sources (a sampler's layout), each relation's layer
        gets the pair ``(sources, targets)`` (``HeteroConv``'s pair input; a
        same-type relation's self-loops cover the targets), and the last layer
        computes the seeds only.  The result is then the seeds' logits
        (``batch_size`` rows), those of the untrimmed forward."""
        x_dict = self._inputs(x_dict, n_id_dict)
        for nt in self.node_types:
            x = x_dict[nt]
            if not isinstance(x, Tensor):
                raise TypeError(f"HetGAT: features of node type {nt!r} must be an rtx.Tensor, "
                                f"got {type(x).__name__}")
            if x.ndim != 2 or x.shape[1] != self.in_channels[nt]:
                raise ValueError(f"HetGAT: features of node type {nt!r} must have shape "
                                 f"[num_nodes, {self.in_channels[nt]}], got {x.shape}")
        trim = num_sampled_nodes_dict is not None or num_sampled_edges_dict is not None
        path = self.path
        if path == "auto":
            path = "per-relation" if trim or n_id_dict is not None else "grouped"
        if trim and isinstance(edge_index_dict, (list, tuple)):
            raise ValueError("HetGAT: num_sampled_nodes_dict / num_sampled_edges_dict trim "
                             "one edge dict, not a list of per-layer dicts")
        if isinstance(edge_index_dict, (list, tuple)):
            if len(edge_index_dict) != len(self.convs):
                raise ValueError(f"HetGAT: a list of edge_index dicts needs one per layer "
                                 f"({len(self.convs)}), got {len(edge_index_dict)}")
            per_layer = []
            for layer, (d, rels) in enumerate(zip(edge_index_dict, self.layer_edge_types,
                                                  strict=True)):
                if not isinstance(d, Mapping):
                    raise TypeError(f"HetGAT: edge_index_dict[{layer}] must be a dict edge "
                                    f"type -> edges, got {type(d).__name__}")
                per_layer.append({et: self._edges(et, d, x_dict) for et in rels})
        else:
            one = cast(Mapping[EdgeType, Any], edge_index_dict)
            edges = {et: self._edges(et, one, x_dict) for et in self.edge_types}
            per_layer = [edges] * len(self.convs)
        hops = None
        if trim:
            hops = self._hops(x_dict, per_layer[0], num_sampled_nodes_dict,
                              num_sampled_edges_dict)
        h: Mapping[str, Tensor] = x_dict
        for layer, (conv, layer_edges) in enumerate(zip(self.convs, per_layer, strict=True)):
            x_in: Any
            if hops is not None:
                rels = self.layer_edge_types[layer]
                used = {et: layer_edges[et] for et in rels}
                h, h_dst, layer_edges = self._trim(len(self.convs) - layer, h, used,
                                                   {d for _, _, d in rels}, *hops,
                                                   self.dropout if self.training else 0.0)
                x_in = (h, h_dst)
            else:
                if self.dropout and self.training:
                    h = {nt: F.dropout(v, self.dropout, True) for nt, v in h.items()}
                x_in = h
            h = {nt: F.elu(v) for nt, v in conv(x_in, layer_edges, path=path).items()}
        return self.lin(h[self.target])

    def _hops(self, x_dict: Mapping[str, Tensor], edges: Mapping[EdgeType, EdgeIndex],
              nodes: Mapping[str, Sequence[int]] | None,
              counts: Mapping[EdgeType, Sequence[int]] | None
              ) -> tuple[dict[str, np.ndarray], dict[EdgeType, np.ndarray]]:
        """The checked per-hop counts: per node type the rows up to each hop
        (``[L + 1]`` cumulative), per edge type the edges up to each hop (``[L]``)."""
        if nodes is None or counts is None:
            raise ValueError("HetGAT: trimming needs both num_sampled_nodes_dict and "
                             "num_sampled_edges_dict (a sampled batch's num_sampled_nodes / "
                             "num_sampled_edges)")
        if not isinstance(nodes, Mapping) or not isinstance(counts, Mapping):
            raise TypeError("HetGAT: num_sampled_nodes_dict / num_sampled_edges_dict must be "
                            "dicts")
        L = len(self.convs)

        def cumulative(v: Any, n: int, total: int, what: str) -> np.ndarray:
            try:
                a = np.asarray(v)
                ok = a.ndim == 1 and a.dtype.kind in "iu" and len(a) == n and (a >= 0).all()
            except (TypeError, ValueError):
                ok = False
            if not ok or int(a.sum()) != total:
                raise ValueError(f"HetGAT: {what} must be {n} non-negative ints summing to "
                                 f"{total}, got {v!r}")
            return np.cumsum(a.astype(np.int64))

        rows = {}
        for nt, x in x_dict.items():
            if nt not in nodes:
                raise ValueError(f"HetGAT: num_sampled_nodes_dict has no entry for node type "
                                 f"{nt!r}")
            rows[nt] = cumulative(nodes[nt], L + 1, x.shape[0],
                                  f"num_sampled_nodes_dict[{nt!r}] (nodes per hop 0 .. {L})")
        upto = {}
        for et, ei in edges.items():
            if et not in counts:
                raise ValueError(f"HetGAT: num_sampled_edges_dict has no entry for edge type "
                                 f"{et!r}")
            upto[et] = cumulative(counts[et], L, ei.num_edges,
                                  f"num_sampled_edges_dict[{et!r}] (edges per hop 1 .. {L})")
        return rows, upto

    @staticmethod
    def _trim(keep: int, h: Mapping[str, Tensor], edges: Mapping[EdgeType, EdgeIndex],
              dst_types: set[str], rows: Mapping[str, np.ndarray],
              upto: Mapping[EdgeType, np.ndarray], dropout: float
              ) -> tuple[dict[str, Tensor], dict[str, Tensor], dict[EdgeType, EdgeIndex]]:
        """A layer's sources (the nodes of hops ``0 .. keep``, after ``dropout``),
        its targets (the first rows of those: hops ``0 .. keep - 1``, for the
        types in ``dst_types``) and its edges (those of the first ``keep`` hops,
        ``EdgeIndex.trim``: no copy, no second check of what did not shrink).  A
        sampler's edges come hop by hop (PyG's layout), so they are prefixes; an
        edge reaching beyond the kept nodes means they do not, and is refused."""

        def first(v: Tensor, n: int) -> Tensor:
            return v if v.shape[0] == n else v[:n]

        src = {nt: first(v, int(rows[nt][keep])) for nt, v in h.items()}
        if dropout:
            src = {nt: F.dropout(v, dropout, True) for nt, v in src.items()}
        dst = {nt: first(src[nt], int(rows[nt][keep - 1])) for nt in dst_types}
        trimmed = {}
        for et, ei in edges.items():
            s, _, d = et
            try:
                trimmed[et] = ei.trim(int(upto[et][keep - 1]), int(rows[s][keep]),
                                      int(rows[d][keep - 1]))
            except ValueError:
                raise ValueError(f"HetGAT: the edges of {et!r} are not in hop order (an edge "
                                 f"of the first {keep} hops reaches a node beyond them): "
                                 "num_sampled_* describe a sampler's batch layout") from None
        return src, dst, trimmed

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

    @no_grad()
    def inference(self, data: Any, batch_size: int = 1024) -> Tensor:
        """The full-graph logits ``[N_target, out_channels]``, computed layer by
        layer over batches of ``batch_size`` destination nodes (PyG's and DGL's
        layer-wise inference for sampled training; no gradient).

        ``data``: the whole graph (an ``rtx.data.HeteroData`` or anything with
        ``x_dict`` and ``edge_index_dict``; featureless types use their whole
        embedding).  Each batch takes every incoming edge of its destination
        nodes (the full neighbourhood) and the rows of their sources only, so
        the memory of a step is bounded by the batch's edges, while each layer's
        output (``[N_t, hidden]`` per type) is kept for the next.  The result
        equals ``forward`` on the whole graph to rounding (call ``eval()`` first
        if the model has dropout)."""
        if isinstance(batch_size, (bool, np.bool_)):
            raise TypeError("HetGAT.inference: batch_size must be an int, got bool")
        try:
            bs = operator.index(batch_size)
        except TypeError:
            raise TypeError(f"HetGAT.inference: batch_size must be an int, got "
                            f"{type(batch_size).__name__}") from None
        if bs < 1:
            raise ValueError(f"HetGAT.inference: batch_size must be at least 1, got {bs}")
        try:
            x_dict, edge_index_dict = data.x_dict, data.edge_index_dict
        except AttributeError:
            raise TypeError("HetGAT.inference: data must have x_dict and edge_index_dict "
                            f"(an rtx.data.HeteroData), got {type(data).__name__}") from None
        h = self._inputs({nt: x for nt, x in x_dict.items() if nt not in self.featureless},
                         None, whole=True)
        for nt in self.node_types:
            x = h[nt]
            if not isinstance(x, Tensor) or x.ndim != 2 or x.shape[1] != self.in_channels[nt]:
                raise ValueError(f"HetGAT.inference: features of node type {nt!r} must be an "
                                 f"rtx.Tensor [num_nodes, {self.in_channels[nt]}]")
        edges = {et: self._edges(et, edge_index_dict, h) for et in self.edge_types}
        for conv, rels in zip(self.convs, self.layer_edge_types, strict=True):
            out: dict[str, Tensor] = {}
            for d in dict.fromkeys(dd for _, _, dd in rels):
                into = [et for et in rels if et[2] == d]
                n = h[d].shape[0]
                parts = [self._layer_batch(cast(HeteroConv, conv), into, edges, h, lo,
                                           min(lo + bs, n))
                         for lo in range(0, max(n, 1), bs)]
                out[d] = parts[0] if len(parts) == 1 else concat(parts, 0)
            h = out
        return self.lin(h[self.target])

    @staticmethod
    def _layer_batch(conv: HeteroConv, into: list[EdgeType], edges: dict[EdgeType, EdgeIndex],
                     h: Mapping[str, Tensor], lo: int, hi: int) -> Tensor:
        """One layer's output (after ELU) for destination nodes ``[lo, hi)`` of one
        type: every relation into it on the batch's incoming edges, summed."""
        xs = []
        for et in into:
            s, _, d = et
            ei = edges[et]
            ptr, perm = ei.dst.csr()
            sel = perm[ptr[lo]:ptr[hi]]
            src = ei.src._idx[sel].astype(np.int64)
            dst = ei.dst._idx[sel].astype(np.int64) - lo
            module = conv.convs[edge_module_key(et)]
            if s == d:
                # the batch's nodes first (so a local self-loop i -> i is node lo + i),
                # then their other sources; only the first hi - lo outputs are kept
                inside = (src >= lo) & (src < hi)
                others = np.unique(src[~inside])
                local = np.empty_like(src)
                local[inside] = src[inside] - lo
                local[~inside] = (hi - lo) + np.searchsorted(others, src[~inside])
                ids = np.concatenate([np.arange(lo, hi, dtype=np.int64), others])
                res = module(index_select(h[s], ids),
                             EdgeIndex(np.stack([local, dst]), len(ids), len(ids)))
                xs.append(res[:hi - lo] if len(ids) != hi - lo else res)
            else:
                uniq, inv = np.unique(src, return_inverse=True)
                x_src = index_select(h[s], uniq)
                x_dst = index_select(h[d], np.arange(lo, hi, dtype=np.int64))
                xs.append(module((x_src, x_dst),
                                 EdgeIndex(np.stack([inv.reshape(-1), dst]), len(uniq),
                                           hi - lo)))
        return F.elu(conv._group(xs))

    def extra_repr(self) -> str:
        s = (f"target={self.target!r}, in_channels={self.in_channels}, "
             f"hidden_channels={self.hidden_channels}, out_channels={self.out_channels}, "
             f"heads={self.heads}, num_layers={self.num_layers}")
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.path != "auto":
            s += f", path={self.path!r}"
        if self.featureless:
            s += f", embedded={self.featureless}, sparse={self.sparse}"
        return s
