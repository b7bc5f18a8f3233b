"""``HeteroConv``: one layer per relation, results grouped per destination type
(PyTorch Geometric's ``HeteroConv`` calling convention)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from ...data.naming import edge_module_key
from ...functional import concat, maximum, minimum
from ...tensor import Tensor
from ..containers import ModuleDict
from ..module import Module
from .gat_conv import GATConv, gat_groupable, gat_grouped, shared_projections

__all__ = ["HeteroConv"]

EdgeType = tuple[str, str, str]
_AGGRS = ("sum", "mean", "max", "min", "cat")
_PATHS = ("grouped", "per-relation")


def _edge_key(edge_type: Any) -> str:
    """PyG's (2.4+) ModuleDict key of a tuple, names by ``rtx.data.naming``."""
    return edge_module_key(edge_type)


class HeteroConv(Module):
    """Runs ``convs[edge_type]`` on each relation and combines the results that
    reach the same destination node type with ``aggr`` (``"sum"``, ``"mean"``,
    ``"max"``, ``"min"`` or ``"cat"``).

    A relation whose source and destination type are the same gets
    ``x_dict[src]``; any other gets ``(x_dict[src], x_dict[dst])`` (``x_dict[dst]``
    may be absent: ``None``).  ``x_dict`` may also be a pair of dicts
    ``(x_src_dict, x_dst_dict)`` (DGL's ``HeteroGraphConv`` on a block): every
    relation then gets ``(x_src_dict[src], x_dst_dict[dst])``, e.g. a sampled
    layer's targets as the first rows of its sources.  Sub-layers live in ``convs`` under
    ``"<src___relation___dst>"`` keys, as in PyG's state_dict.  A bipartite relation's
    layer must not add self-loops (``ValueError``, as PyG).

    ``path="grouped"`` (default; rtx's own, not PyG's): with ``aggr="sum"``, the
    relations into one node type whose layers are alike ``GATConv`` s (same
    heads, channels, slope, dropout and bias use; concatenated heads; no edge
    features or residual) are computed together: each projects its sources, then
    one pass scores all their edges, one softmax normalises per (target,
    relation) as each layer does, one message-passing pass sums all their
    messages (``rtx.nn.conv.gat_conv.gat_grouped``).  The same outputs as
    ``path="per-relation"`` (each layer called, then summed) to rounding; those
    sub-layers' forward hooks do not run on the grouped path.  On that path the
    projections that read one wide input run as one GEMM
    (``rtx.nn.conv.gat_conv.shared_projections``).  ``forward``'s ``path=``
    overrides it for one call.
    """

    def __init__(self, convs: Mapping[EdgeType, Module], aggr: str = "sum",
                 path: str = "grouped") -> None:
        super().__init__()
        if path not in _PATHS:
            raise ValueError(f"HeteroConv: path must be one of {_PATHS}, got {path!r}")
        self.path = path
        if not isinstance(convs, Mapping) or not convs:
            raise ValueError("HeteroConv: convs must be a non-empty dict edge_type -> layer")
        if aggr not in _AGGRS:
            raise ValueError(f"HeteroConv: aggr must be one of {_AGGRS}, got {aggr!r}")
        mods: dict[str, Module] = {}
        self.edge_types: list[EdgeType] = []
        for et, conv in convs.items():
            key = _edge_key(et)
            if not isinstance(conv, Module):
                raise TypeError(f"HeteroConv: the layer for {et!r} must be an rtx.nn.Module, "
                                f"got {type(conv).__name__}")
            if et[0] != et[2] and getattr(conv, "add_self_loops", False):
                raise ValueError(
                    f"HeteroConv: 'add_self_loops' is True on {conv!r} for the bipartite edge "
                    f"type {et!r}; this gives wrong results (use add_self_loops=False)")
            mods[key] = conv
            self.edge_types.append((et[0], et[1], et[2]))
        self.convs = ModuleDict(mods)
        self.aggr = aggr
        self._edge_keys = list(mods)  # the checked keys, in edge_types' order

    def forward(self, x_dict: Mapping[str, Tensor] | tuple[Mapping[str, Tensor],
                                                             Mapping[str, Tensor]],
                edge_index_dict: Mapping[EdgeType, Any], *, path: str | None = None,
                **kwargs_dict: Mapping[EdgeType, Any]) -> dict[str, Tensor]:
        """``x_dict``: node type -> features (or a pair of such dicts: sources,
        targets); ``edge_index_dict``: edge type -> edges; ``path``: this call's
        path (default: the layer's ``path``).
        Relations absent from ``edge_index_dict`` are skipped.  Extra per-relation
        arguments come as ``<name>_dict={edge_type: value}`` (e.g.
        ``edge_attr_dict``).  Returns destination node type -> combined output."""
        if path is not None and path not in _PATHS:
            raise ValueError(f"HeteroConv: path must be one of {_PATHS}, got {path!r}")
        for k in kwargs_dict:
            if not k.endswith("_dict"):
                raise ValueError(f"HeteroConv: keyword arguments must end with '_dict' "
                                 f"(got {k!r})")
        pair = isinstance(x_dict, (tuple, list))
        if pair and not (len(x_dict) == 2 and all(isinstance(d, Mapping) for d in x_dict)):
            raise TypeError("HeteroConv: x_dict must be a dict node type -> features or a "
                            "pair of such dicts (sources, targets)")
        x_src, x_dst = (cast(tuple[Mapping[str, Tensor], Mapping[str, Tensor]], x_dict) if pair
                        else (cast(Mapping[str, Tensor], x_dict),) * 2)
        into: dict[str, list[tuple[Module, Any, Any, dict[str, Any]]]] = {}
        for et, key in zip(self.edge_types, self._edge_keys, strict=True):
            if et not in edge_index_dict:
                continue
            src, _, dst = et
            if src not in x_src:
                raise ValueError(f"HeteroConv: no features for node type {src!r} (source of "
                                 f"{et!r}); x_dict has {sorted(x_src)}")
            x: Any = (x_src[src], x_dst.get(dst)) if pair or src != dst else x_src[src]
            kwargs = {k[:-5]: v[et] for k, v in kwargs_dict.items() if et in v}
            into.setdefault(dst, []).append((self.convs[key], x, edge_index_dict[et], kwargs))
        grouped = (path or self.path) == "grouped"
        groups = {nt: rels for nt, rels in into.items() if grouped and self._groupable(rels)}
        # the projections of the grouped relations (and of lone GATConvs) that read
        # one input: one GEMM per input (shared_projections)
        sharing = [rels for nt, rels in into.items()
                   if nt in groups or (grouped and self._lone_gat(rels))]
        shared = shared_projections([(cast(list[GATConv], [r[0] for r in rels]),
                                      [r[1] for r in rels], [r[2] for r in rels])
                                     for rels in sharing]) if sharing else {}
        return {nt: self._relations_into(rels, nt in groups, shared)
                for nt, rels in into.items()}

    @staticmethod
    def _lone_gat(rels: list[tuple[Module, Any, Any, dict[str, Any]]]) -> bool:
        """One ``GATConv`` (not a subclass) into a node type, no extra arguments."""
        return len(rels) == 1 and type(rels[0][0]) is GATConv and not rels[0][3]

    def _groupable(self, rels: list[tuple[Module, Any, Any, dict[str, Any]]]) -> bool:
        """Whether the relations into one node type take the grouped path: the sum
        is asked for, no per-relation arguments, layers alike (``gat_groupable``)."""
        return (self.aggr == "sum" and not any(r[3] for r in rels)
                and gat_groupable([r[0] for r in rels]))

    def _relations_into(self, rels: list[tuple[Module, Any, Any, dict[str, Any]]],
                        grouped: bool, shared: dict[tuple[str, int], Tensor]) -> Tensor:
        """The combined output of the relations into one node type: grouped
        (``gat_grouped``: one attention pass over all of them) when ``path``
        allows it and ``_groupable``; else each layer on its own, then ``aggr``."""
        if grouped:
            return gat_grouped(cast(list[GATConv], [r[0] for r in rels]),
                               [r[1] for r in rels], [r[2] for r in rels], shared)
        if self._lone_gat(rels) and ("src", id(rels[0][0])) in shared:
            conv, x, ei, _ = rels[0]     # what GATConv.forward runs, its GEMM shared
            gat = cast(GATConv, conv)
            return cast(Tensor, gat._attend(gat._project(x, ei, None,
                                                         hs=shared[("src", id(conv))])))
        return self._group([conv(x, ei, **kw) for conv, x, ei, kw in rels])

    def _group(self, xs: list[Tensor]) -> Tensor:
        if len(xs) == 1:
            return xs[0]
        if self.aggr == "cat":
            return concat(xs, -1)
        acc = xs[0]
        for t in xs[1:]:
            if self.aggr in ("sum", "mean"):
                acc = acc + t
            elif self.aggr == "max":
                acc = maximum(acc, t)
            else:
                acc = minimum(acc, t)
        return acc * (1.0 / len(xs)) if self.aggr == "mean" else acc

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_relations={len(self.edge_types)}"
                + ("" if self.path == "grouped" else f", path={self.path!r}") + ")")
