"""``GATConv``: graph attention (Velickovic et al.; PyTorch Geometric's GATConv).

Same math, parameter names and shapes as ``torch_geometric.nn.GATConv``, so a
PyG ``state_dict`` converted to numpy arrays loads as is.  Built on
``segment_softmax`` and fused ``message_passing``: no ``[E, H, C]`` tensor is
ever formed, so a layer's working memory is O(N*H*C + E*H).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple, cast

import numpy as np

from ..._dtypes import check_rows
from ...backend.index_plan import EdgeIndex, SelfLoops, as_edge_index, typed_edges
from ...creation import full, tensor
from ...functional import (
    concat,
    gat_scores,
    head_dot,
    index_add,
    index_select,
    leaky_relu,
    message_passing,
    segment_softmax,
    stack,
)
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..lazy import check_lazy_in_channels
from ..linear import Linear
from ..module import Module
from ..parameter import Parameter

__all__ = ["GATConv", "attention_output", "gat_groupable", "gat_grouped", "shared_projections"]


def _glorot_(t: Tensor) -> None:
    """PyG's ``glorot``: U(-b, b), b = sqrt(6 / (size(-2) + size(-1)))."""
    b = math.sqrt(6.0 / (t.shape[-2] + t.shape[-1]))
    init.uniform_(t, -b, b)


class _Projected(NamedTuple):
    """One relation's inputs to the attention, from ``GATConv._project``."""

    ei: EdgeIndex            # the checked edges
    used: EdgeIndex          # the edges attended over (self-loops added when asked)
    mp: EdgeIndex            # ``used`` over the transformed source rows (``hs3``)
    hs3: Tensor              # transformed sources, [n, H, C]
    a_src: Tensor            # source logits, [n, H]
    a_dst: Tensor | None     # target logits, [N_dst, H] (None without target features)
    x_dst: Tensor | None
    n_dst: int


def _int_arg(v: Any, name: str, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
        raise ValueError(f"GATConv: {name} must be an int >= {minimum}, got {v!r}")
    return int(v)


class GATConv(Module):
    r"""Graph attention layer, PyTorch Geometric's ``GATConv``.

    For each edge ``j -> i`` and head ``h`` (``x'`` = ``W x``, split into
    ``heads`` blocks of ``out_channels``)::

        e_ij   = LeakyReLU(<att_src, x'_j> + <att_dst, x'_i> [+ <att_edge, W_e edge_attr_ij>])
        a_ij   = softmax of e_ij over i's incoming edges
        out_i  = concat_h (or mean_h if not concat) sum_j a_ij x'_j  [+ W_res x_i] + bias

    Args:
        in_channels: input size, or ``(src, dst)`` sizes for bipartite input
            (then ``lin_src`` / ``lin_dst`` replace ``lin``).
        out_channels: channels per head.
        heads: attention heads; ``concat`` joins them (``heads * out_channels``
            outputs), else they are averaged.
        negative_slope: of the LeakyReLU.  ``dropout``: on the attention weights
            (training mode only; rtx's generator).
        add_self_loops: remove existing self-loops and add one per node, as PyG;
            with bipartite ``(x_src, x_dst)`` input one loop ``i -> i`` per node
            ``i < min(N_src, N_dst)`` (PyG's rule: the targets are the first
            sources, as in a sampled batch whose next-layer nodes are a prefix).
        bias: learnable ``bias``.  ``edge_dim``: size of edge features used in
            the attention (``lin_edge``, ``att_edge``); ``fill_value`` gives added
            self-loops their edge features: ``"mean"`` / ``"add"`` (``"sum"``) of
            the node's incoming edges' features, or a number.
        residual: add ``res(x_dst)`` (a bias-free linear map).

    Parameters (PyG's names and shapes): ``lin.weight`` ``[H*C, F_in]`` (or
    ``lin_src.weight`` ``[H*C, F_src]`` and ``lin_dst.weight`` ``[H*C, F_dst]``),
    ``att_src``, ``att_dst`` ``[1, H, C]``, ``bias`` ``[H*C]`` (``[C]`` when not
    ``concat``), ``lin_edge.weight`` ``[H*C, edge_dim]`` and ``att_edge``
    ``[1, H, C]``, ``res.weight`` ``[H*C or C, F_dst]``.  Initialised as PyG
    (glorot, zero bias) from rtx's default generator.
    """

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, bias: bool = True, edge_dim: int | None = None,
                 fill_value: float | str = "mean", residual: bool = False) -> None:
        super().__init__()
        self.in_channels: int | tuple[int, int]
        self.in_channels, _, _ = check_lazy_in_channels(in_channels, "GATConv")
        self.out_channels = _int_arg(out_channels, "out_channels", 1)
        self.heads = _int_arg(heads, "heads", 1)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"GATConv: dropout must be in [0, 1), got {dropout!r}")
        if isinstance(fill_value, str):
            if fill_value not in ("mean", "add", "sum"):
                raise ValueError(f"GATConv: fill_value must be 'mean', 'add', 'sum' or a "
                                 f"number, got {fill_value!r}")
        elif not isinstance(fill_value, (int, float)) or isinstance(fill_value, bool):
            raise ValueError(f"GATConv: fill_value must be 'mean', 'add', 'sum' or a number, "
                             f"got {fill_value!r}")
        self.concat = bool(concat)
        self.negative_slope = float(negative_slope)
        self.dropout = float(dropout)
        self.add_self_loops = bool(add_self_loops)
        self.edge_dim = None if edge_dim is None else _int_arg(edge_dim, "edge_dim", 1)
        self.fill_value = fill_value
        self.residual = bool(residual)
        H, C = self.heads, self.out_channels

        # Registration order gives PyG's state_dict order.
        self.att_src = Parameter(full((1, H, C), 0.0))
        self.att_dst = Parameter(full((1, H, C), 0.0))
        if self.edge_dim is not None:
            self.att_edge: Parameter | None = Parameter(full((1, H, C), 0.0))
        else:
            self.register_parameter("att_edge", None)
        total_out = H * C if self.concat else C
        if bias:
            self.bias: Parameter | None = Parameter(full((total_out,), 0.0))
        else:
            self.register_parameter("bias", None)
        self.lin: Linear | None = None
        self.lin_src: Linear | None = None
        self.lin_dst: Linear | None = None
        # -1 sizes are lazy (rtx/nn/lazy.py): the Linear is sized, and initialised
        # by its glorot scheme, at the first input
        if isinstance(self.in_channels, int):
            self.lin = Linear(self.in_channels, H * C, bias=False, weight_initializer="glorot")
            in_dst = self.in_channels
        else:
            self.lin_src = Linear(self.in_channels[0], H * C, bias=False,
                                  weight_initializer="glorot")
            self.lin_dst = Linear(self.in_channels[1], H * C, bias=False,
                                  weight_initializer="glorot")
            in_dst = self.in_channels[1]
        self.lin_edge: Linear | None = (
            Linear(self.edge_dim, H * C, bias=False, weight_initializer="glorot")
            if self.edge_dim is not None else None)
        self.res: Linear | None = (
            Linear(in_dst, total_out, bias=False, weight_initializer="glorot")
            if self.residual else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's initialisation: glorot weights and attention vectors, zero bias (a
        still-lazy ``Linear`` is initialised when sized)."""
        for lin in (self.lin, self.lin_src, self.lin_dst, self.lin_edge, self.res):
            if lin is not None:
                lin.reset_parameters()
        _glorot_(self.att_src)
        _glorot_(self.att_dst)
        if self.att_edge is not None:
            _glorot_(self.att_edge)
        if self.bias is not None:
            init.zeros_(self.bias)

    # ----------------------------------------------------------------- forward
    def _check_x(self, x: Any, width: int, what: str) -> Tensor:
        """A ``[N, width]`` tensor (``width=-1``: any width, for the lazy sizes)."""
        if not isinstance(x, Tensor):
            raise TypeError(f"GATConv: {what} must be an rtx.Tensor, got {type(x).__name__}")
        if x.ndim != 2 or (width >= 0 and x.shape[1] != width):
            raise ValueError(f"GATConv: {what} must have shape [num_nodes, {width}], got "
                             f"{x.shape}")
        return x

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index: Any,
                edge_attr: Tensor | None = None, size: tuple[int, int] | None = None,
                return_attention_weights: bool | None = None
                ) -> Tensor | tuple[Tensor, tuple[np.ndarray, Tensor]]:
        """``x``: ``[N, F_in]``, or ``(x_src, x_dst)`` (``x_dst`` may be ``None``:
        then the output has ``size[1]`` rows, or ``N_src`` as in PyG) for bipartite
        input.  ``edge_index``: int ``[2, E]`` (row 0 source, row 1 target; numpy,
        rtx tensor or sequence) or an ``rtx.EdgeIndex``.  ``edge_attr``: ``[E]`` or
        ``[E, edge_dim]`` when the layer has ``edge_dim``.

        Returns ``[N_dst, H*C]`` (``[N_dst, C]`` if not ``concat``); with
        ``return_attention_weights=True`` also ``(edge_index, alpha)``: the int64
        ``[2, E']`` edges used (self-loops included, appended after the kept
        edges, as PyG) and their attention ``[E', H]``.
        """
        return self._attend(self._project(x, edge_index, size), edge_attr,
                            return_attention_weights)

    def _attend(self, p: _Projected, edge_attr: Tensor | None = None,
                return_attention_weights: bool | None = None
                ) -> Tensor | tuple[Tensor, tuple[np.ndarray, Tensor]]:
        """``forward`` after ``_project``: the edges' scores, the softmax, the
        messages, residual and bias."""
        ei, used, loops = p.ei, p.used, p.used.self_loop_info
        edge_logits = edge_attr is not None and self.lin_edge is not None
        if edge_attr is None and self.lin_edge is not None and used.num_edges:
            raise ValueError("GATConv: this layer has edge_dim set; pass edge_attr")
        if p.a_dst is not None and not edge_logits and p.a_dst.dtype == p.a_src.dtype:
            # leaky_relu(a_src[src] + a_dst[dst]) in one pass (the same bits; mixed
            # dtypes take the composed ops, whose add promotes)
            scores = gat_scores(p.a_src, p.a_dst, p.mp.src, used.dst, self.negative_slope)
        else:
            e = index_select(p.a_src, p.mp.src)
            if p.a_dst is not None:
                e = e + index_select(p.a_dst, used.dst)
            if edge_logits:
                e = e + self._edge_logits(edge_attr, ei.num_edges, loops)
            scores = leaky_relu(e, self.negative_slope)
        return attention_output(self, scores, p.hs3, p.mp, used, p.x_dst,
                                return_attention_weights)

    def _project(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index: Any,
                 size: tuple[int, int] | None, target_logits: bool = True,
                 hs: Tensor | None = None) -> _Projected:
        """The checked inputs and edges, the transformed sources and the attention
        logits per node and head: everything of ``forward`` before the edges'
        scores (shared with the grouped path, ``gat_grouped``, which computes the
        targets' logits itself: ``target_logits=False`` leaves ``a_dst`` None).
        ``hs``: the sources' projection ``x_src @ W_src.T`` ``[N_src, H*C]``
        already computed (``shared_projections``), used when every source row
        is transformed."""
        H, C = self.heads, self.out_channels
        self._materialize(x)
        in_src, in_dst = self._in_sizes()
        bipartite = isinstance(x, (tuple, list))
        x_dst: Tensor | None
        if bipartite:
            assert isinstance(x, (tuple, list))
            if len(x) != 2:
                raise ValueError("GATConv: bipartite input must be a pair (x_src, x_dst)")
            x_src = self._check_x(x[0], in_src, "x_src")
            x_dst = None if x[1] is None else self._check_x(x[1], in_dst, "x_dst")
        else:
            if in_src != in_dst:
                raise ValueError(f"GATConv: in_channels={self.in_channels} needs bipartite "
                                 "(x_src, x_dst) input")
            x_src = x_dst = self._check_x(x, in_src, "x")

        if self.lin is not None:
            w_src = w_dst = self.lin.weight
        else:
            assert self.lin_src is not None and self.lin_dst is not None
            w_src, w_dst = self.lin_src.weight, self.lin_dst.weight
        n_src = x_src.shape[0]
        if x_dst is not None:
            n_dst = x_dst.shape[0]
        elif size is not None:
            n_dst = check_rows(size[1], "GATConv", "size[1]")
        else:
            n_dst = n_src
        if size is not None and (size[0] != n_src or size[1] != n_dst):
            raise ValueError(f"GATConv: size={tuple(size)} does not match the input "
                             f"({n_src}, {n_dst})")

        ei, used = self._used_edges(edge_index, n_src, n_dst)
        # Messages come from the transformed sources only (W_dst x_dst enters just
        # through the attention logits).  Only the source rows the edges read are
        # transformed when that spares work (_compact: a sampled layer's sources
        # are often far more than its edges); mp holds the edges over those rows.
        mp, xs = used, x_src
        if not self._reads_all_sources(x_src, x_dst, used):
            rows, mp = used.compact_sources()
            xs = index_select(x_src, rows)
        if xs is x_src and hs is not None and tuple(hs.shape) == (n_src, H * C):
            hs3 = hs.reshape(n_src, H, C)     # a column slice of shared_projections' GEMM
        else:
            hs3 = (xs @ w_src.T).reshape(xs.shape[0], H, C)
        # Attention logits per node and head, [N, H] (never per edge and channel):
        # <att, W x> from the transformed rows (head_dot: one pass over [N, H*C]) when
        # they are no wider than the input, else as x @ (att folded into W).T (one
        # pass over [N, F], and for targets no [N, H*C] projection at all).  At equal
        # widths both read as much, and head_dot spares the fold and a GEMM with H
        # output columns (BLAS's slowest shape: 6,000 x 64 @ 64 x 4 ran at 17 GFLOP/s).
        narrow = H * C <= x_src.shape[1] and self.att_src.dtype == hs3.dtype
        a_src = (head_dot(hs3, self.att_src.reshape(H, C)) if narrow
                 else self._logits(xs, w_src, self.att_src))
        a_dst = None
        if x_dst is not None and target_logits:
            a_dst = (head_dot(hs3, self.att_dst.reshape(H, C)) if narrow and x_dst is x_src
                     else self._logits(x_dst, w_dst, self.att_dst))
        return _Projected(ei, used, mp, hs3, a_src, a_dst, x_dst, n_dst)

    def _used_edges(self, edge_index: Any, n_src: int, n_dst: int
                    ) -> tuple[EdgeIndex, EdgeIndex]:
        """The checked edges and the edges attended over (self-loops added when
        asked: cached on the plan, shared by every layer)."""
        ei = self._edge_index(edge_index, n_src, n_dst)
        return ei, (ei.with_self_loops() if self.add_self_loops else ei)

    def _reads_all_sources(self, x_src: Tensor, x_dst: Tensor | None,
                           used: EdgeIndex) -> bool:
        """Whether every source row is transformed (not only those ``used`` reads:
        ``_compact``)."""
        return x_dst is x_src or not _compact(used, x_src.shape[1],
                                               self.heads * self.out_channels)

    def _src_weight(self) -> Tensor:
        """The weight that transforms sources (``lin`` or ``lin_src``)."""
        lin = self.lin if self.lin is not None else self.lin_src
        assert lin is not None
        return lin.weight

    def _dst_weight(self) -> Tensor:
        """The weight that transforms targets (``lin`` or ``lin_dst``)."""
        lin = self.lin if self.lin is not None else self.lin_dst
        assert lin is not None
        return lin.weight

    def _materialize(self, x: Any) -> None:
        """Size the lazy (``-1``) ``Linear`` s from the first input's widths (PyG);
        nothing once sized (the width checks follow)."""
        if isinstance(x, (tuple, list)):
            if len(x) != 2:
                raise ValueError("GATConv: bipartite input must be a pair (x_src, x_dst)")
            xs, xd = self._check_x(x[0], -1, "x_src"), x[1]
            xd = None if xd is None else self._check_x(xd, -1, "x_dst")
        else:
            xs = xd = self._check_x(x, -1, "x")
        if self.lin is not None:
            self.lin.materialize(xs.shape[1])
        else:
            assert self.lin_src is not None and self.lin_dst is not None
            self.lin_src.materialize(xs.shape[1])
            if xd is not None:
                self.lin_dst.materialize(xd.shape[1])
        if self.res is not None and xd is not None:
            self.res.materialize(xd.shape[1])

    def _in_sizes(self) -> tuple[int, int]:
        """(source, target) input widths: the sized ``Linear`` s' (-1 while lazy)."""
        if self.lin is not None:
            return self.lin.in_features, self.lin.in_features
        assert self.lin_src is not None and self.lin_dst is not None
        return self.lin_src.in_features, self.lin_dst.in_features

    @staticmethod
    def _edge_index(edge_index: Any, n_src: int, n_dst: int) -> EdgeIndex:
        """The checked edges: an ``EdgeIndex`` as given (its sizes must match), raw
        edges checked once and then reused while they are equal (the plan cache of
        ``as_edge_index``)."""
        try:
            return as_edge_index(edge_index, n_src, n_dst, "GATConv")
        except (TypeError, ValueError, IndexError) as exc:
            raise type(exc)(f"GATConv: {exc} (graph with {n_src} source and {n_dst} "
                            "target nodes)") from None

    def _logits(self, x: Tensor, weight: Tensor, att: Tensor) -> Tensor:
        """``<att_h, (x W.T)_h>`` for every row of ``x`` and head ``h``: ``[N, H]``."""
        H, C = self.heads, self.out_channels
        w_att = (weight.reshape(H, C, weight.shape[1]) * att.reshape(H, C, 1)).sum(1)
        return x @ w_att.T

    def _edge_logits(self, edge_attr: Any, num_edges: int, loops: SelfLoops | None) -> Tensor:
        """``<att_edge, lin_edge(edge_attr)>`` per edge and head, ``[E', H]``, with
        the attention folded into the weight (``[H, edge_dim]``) so no ``[E, H*C]``
        tensor is formed.  With self-loops: the kept edges' rows, then one row per
        loop (``fill_value``)."""
        assert self.lin_edge is not None and self.att_edge is not None
        if not isinstance(edge_attr, Tensor):
            raise TypeError(f"GATConv: edge_attr must be an rtx.Tensor, got "
                            f"{type(edge_attr).__name__}")
        D = self.lin_edge.in_features
        attr = edge_attr.reshape(-1, 1) if edge_attr.ndim == 1 else edge_attr
        if attr.ndim != 2 or attr.shape[1] != D or attr.shape[0] != num_edges:
            raise ValueError(f"GATConv: edge_attr must have shape [{num_edges}, {D}] (one row "
                             f"per edge of edge_index), got {edge_attr.shape}")
        if loops is not None:
            attr = index_select(attr, loops.kept)
            n = loops.num_loops  # min(num_src, num_dst): the first n targets get a loop
            if isinstance(self.fill_value, str):  # over the kept edges' targets
                nd = loops.kept_dst.num_rows
                fill = index_add(attr, loops.kept_dst, nd)
                if self.fill_value == "mean":
                    fill = fill * _col(1.0 / np.maximum(loops.kept_dst.counts(), 1), attr)
                if n < nd:
                    fill = fill[:n]
            else:
                fill = full((n, D), float(self.fill_value), dtype=attr.dtype)
            attr = concat([attr, fill], 0)
        return self._logits(attr, self.lin_edge.weight, self.att_edge)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"


def attention_output(layer: Any, scores: Tensor, values: Tensor, mp: EdgeIndex,
                     used: EdgeIndex, x_res: Tensor | None,
                     return_attention_weights: bool | None
                     ) -> Tensor | tuple[Tensor, tuple[np.ndarray, Tensor]]:
    """A GAT-family layer's output from its edges' scores ``[E, H]`` (``GATConv``,
    ``GATv2Conv``): the softmax over each target's edges of ``used``, attention
    dropout in training, the messages of ``values`` ``[n, H, C]`` over ``mp``
    (``used`` over ``values``' rows), heads concatenated or averaged, the residual
    of ``x_res`` (when the layer has one and ``x_res`` is given), the bias; with
    ``return_attention_weights`` also ``used``'s int64 ``[2, E]`` pairs and the
    attention."""
    n_dst = used.num_dst
    alpha = segment_softmax(scores, used.dst, n_dst)
    if layer.dropout > 0.0 and layer.training:
        alpha = F.dropout(alpha, p=layer.dropout, training=True)
    out = message_passing(values, mp, n_dst, alpha)  # [N_dst, H, C]
    out = out.reshape(n_dst, layer.heads * layer.out_channels) if layer.concat else out.mean(1)
    if layer.res is not None and x_res is not None:
        out = out + layer.res(x_res)
    if layer.bias is not None:
        out = out + layer.bias
    if return_attention_weights:
        pairs = np.stack([used.src.indices, used.dst.indices]).astype(np.int64)
        return out, (pairs, alpha)
    return out


def gat_groupable(convs: list[Module]) -> bool:
    """Whether ``gat_grouped`` computes these layers' summed outputs: plain
    ``GATConv`` s with the same heads, channels, slope, dropout and bias use,
    concatenated heads, no edge features and no residual."""
    if len(convs) < 2 or any(type(c) is not GATConv for c in convs):
        return False
    c0 = cast(GATConv, convs[0])

    def key(c: GATConv) -> tuple[Any, ...]:
        return (c.heads, c.out_channels, c.negative_slope, c.dropout, c.bias is None,
                c.training)

    k0 = key(c0)
    return all(c.concat and c.lin_edge is None and c.res is None and key(c) == k0
               for c in cast(list[GATConv], convs))


def gat_grouped(convs: list[GATConv], inputs: list[Any], edges: list[Any],
                shared: dict[tuple[str, int], Tensor] | None = None) -> Tensor:
    """``sum_r convs[r](inputs[r], edges[r])`` for relations into one target type,
    with the relations' attention computed as one (issue 22 item 1).  Each layer
    projects its sources and computes their logits as ``forward`` does; the
    targets' logits of all relations come from one GEMM of the shared target
    features with the relations' attention-folded weights side by side
    (``[N_dst, R * H]``); then one edge list over the stacked sources
    (``typed_edges``) gets one score pass, one softmax over (target, relation)
    groups -- what each layer's softmax normalises over -- and one
    message-passing pass summing every relation's messages into the targets,
    plus the summed biases.  The same result as the per-relation sum, to
    rounding (the sums run in another order).  When a relation has no target
    features or the dtypes differ, each layer finishes on its own and the
    outputs are summed (the per-relation path).  ``shared``: projections
    already computed by ``shared_projections`` (one GEMM per input tensor that
    several projections of the layer read), by ``("src", id(conv))`` and
    ``("dst", id(convs[0]))``."""
    shared = {} if shared is None else shared
    joint = _joint_targets(convs, inputs)
    ps = [c._project(x, ei, None, target_logits=not joint, hs=shared.get(("src", id(c))))
          for c, x, ei in zip(convs, inputs, edges, strict=True)]
    if len({p.hs3.dtype for p in ps}) != 1 or (not joint and any(p.a_dst is None for p in ps)):
        if joint:   # the targets' logits were left to the joint GEMM: each its own now
            ps = [p._replace(a_dst=c._logits(cast(Tensor, p.x_dst), c._dst_weight(), c.att_dst))
                  for c, p in zip(convs, ps, strict=True)]
        outs = [cast(Tensor, c._attend(p)) for c, p in zip(convs, ps, strict=True)]
        return sum(outs[1:], outs[0])
    c0 = convs[0]
    H, C, n_dst, R = c0.heads, c0.out_channels, ps[0].n_dst, len(ps)
    typed = typed_edges([p.mp for p in ps])
    hs3 = concat([p.hs3 for p in ps], 0)
    a_src = concat([p.a_src for p in ps], 0)
    if joint:
        pre = shared.get(("dst", id(c0)))
        if pre is not None and tuple(pre.shape) == (n_dst, R * H):
            a_dst = pre.reshape(n_dst * R, H)                # row target * R + r
        else:
            x_dst = cast(Tensor, ps[0].x_dst)
            a_dst = (x_dst @ _joint_att_weight(convs, x_dst.shape[1]).T).reshape(n_dst * R, H)
    else:
        a_dst = stack([cast(Tensor, p.a_dst) for p in ps], 1).reshape(n_dst * R, H)
    if a_dst.dtype == a_src.dtype:   # leaky_relu(a_src[src] + a_dst[segment]), one pass
        e = gat_scores(a_src, a_dst, typed.edges.src, typed.segments, c0.negative_slope)
    else:
        e = leaky_relu(index_select(a_src, typed.edges.src) + index_select(a_dst, typed.segments),
                       c0.negative_slope)
    alpha = segment_softmax(e, typed.segments, R * n_dst)
    if c0.dropout > 0.0 and c0.training:
        alpha = F.dropout(alpha, p=c0.dropout, training=True)
    out = message_passing(hs3, typed.edges, n_dst, alpha).reshape(n_dst, H * C)
    if c0.bias is not None:
        out = out + sum((cast(Tensor, c.bias) for c in convs[1:]), c0.bias)
    return out


def _joint_att_weight(convs: list[GATConv], F_in: int) -> Tensor:
    """The relations' target weights with their attention vectors folded in, side
    by side: ``[R * H, F_in]`` (row ``r * H + h``: relation r, head h), so that
    ``x_dst @ w.T`` gives every relation's target logits in one GEMM."""
    H, C, R = convs[0].heads, convs[0].out_channels, len(convs)
    w = concat([c._dst_weight().reshape(1, H, C, F_in) for c in convs], 0)
    att = concat([c.att_dst.reshape(1, H, C, 1) for c in convs], 0)
    return (w * att).sum(2).reshape(R * H, F_in)


# An input read by several projections of a layer gets one GEMM when it is at
# least this many times wider than all their outputs together: then reading it
# (once instead of once per projection) is the GEMMs' cost; narrower inputs are
# compute-bound and their projections run as before.
SHARED_MIN_WIDTH_RATIO = 2


def shared_projections(groups: list[tuple[list[GATConv], list[Any], list[Any]]]
                       ) -> dict[tuple[str, int], Tensor]:
    """The projections of one heterogeneous layer's grouped relations that read
    the same input tensor, each input's as one GEMM (issue 22 item 1: its
    weights side by side).  ``groups``: ``(convs, inputs, edges)`` of each
    destination type that ``gat_grouped`` will compute.  A relation's source
    projection ``x_src @ W_src.T`` is one (when every source row is
    transformed), and so are the targets' logits of a group whose relations
    share their target features (``x_dst @ _joint_att_weight(...).T``): both
    read an input features tensor, and on a graph like DBLP's the paper
    features (4,231 columns) are read by a projection of the paper-to-author
    relation and by the logits of the relations into papers.  A group of one
    ``GATConv`` (its layer then runs as ``conv._attend(conv._project(...,
    hs=...))``, what its ``forward`` runs) offers its source projection only.
    Inputs read by one projection, or narrow ones (``SHARED_MIN_WIDTH_RATIO``),
    are left to the layers.  Returns ``{("src", id(conv)): [N_src, H*C],
    ("dst", id(first conv of the group)): [N_dst, R*H]}``: column slices of
    the one product."""
    # per input: (key, output columns, the weight: built only if shared)
    reqs: dict[int, list[tuple[tuple[str, int], int, Callable[[], Tensor]]]] = {}
    xs: dict[int, Tensor] = {}

    def want(key: tuple[str, int], x: Any, cols: int, f_in: int, dtype: Any,
             weight: Callable[[], Tensor]) -> None:
        if (isinstance(x, Tensor) and x.ndim == 2 and x.dtype == dtype
                and x.shape[1] == f_in):
            reqs.setdefault(id(x), []).append((key, cols, weight))
            xs[id(x)] = x

    for convs, inputs, edges in groups:
        for c, x in zip(convs, inputs, strict=True):
            c._materialize(x)
        if len(convs) > 1 and _joint_targets(convs, inputs):
            x_dst = inputs[0][1] if isinstance(inputs[0], (tuple, list)) else inputs[0]
            w_dst = convs[0]._dst_weight()
            want(("dst", id(convs[0])), x_dst, len(convs) * convs[0].heads, w_dst.shape[1],
                 w_dst.dtype, partial(_joint_att_weight, convs, w_dst.shape[1]))
        for c, x, ei in zip(convs, inputs, edges, strict=True):
            x_src, x_dst = (x[0], x[1]) if isinstance(x, (tuple, list)) else (x, x)
            if not isinstance(x_src, Tensor) or not isinstance(x_dst, Tensor):
                continue
            if x_dst is not x_src:
                _, used = c._used_edges(ei, x_src.shape[0], x_dst.shape[0])
                if not c._reads_all_sources(x_src, x_dst, used):
                    continue
            w_src = c._src_weight()
            want(("src", id(c)), x_src, w_src.shape[0], w_src.shape[1], w_src.dtype,
                 c._src_weight)
    out: dict[tuple[str, int], Tensor] = {}
    for k, rs in reqs.items():
        x = xs[k]
        cols = sum(n for _, n, _ in rs)
        if len(rs) < 2 or x.shape[1] < SHARED_MIN_WIDTH_RATIO * cols:
            continue
        y = x @ concat([weight() for _, _, weight in rs], 0).T
        a = 0
        for key, n, _ in rs:
            out[key] = y[:, a:a + n]
            a += n
    return out


def _joint_targets(convs: list[GATConv], inputs: list[Any]) -> bool:
    """Whether every relation attends from the same target features tensor (the
    targets' logits of all of them are then one GEMM)."""
    xs = [x[1] if isinstance(x, (tuple, list)) and len(x) == 2 else x for x in inputs]
    x0 = xs[0]
    if not isinstance(x0, Tensor) or x0.ndim != 2 or any(x is not x0 for x in xs):
        return False
    return all(c._in_sizes()[1] == x0.shape[1] and c.att_dst.dtype == x0.dtype for c in convs)


def _compact(edges: EdgeIndex, width: int, out_width: int) -> bool:
    """Whether to transform only the source rows ``edges`` read: when the edges are
    fewer than 0.7x the sources (a bound on the rows spared, checked before any
    work) and each row's transform is wide enough (``width * out_width >= 4096``
    multiply-adds) to outweigh the row gather and the renumbering; then only
    when at most 0.8x the sources are read."""
    n = edges.num_src
    if width * out_width < 4096 or edges.num_edges >= 0.7 * n:
        return False
    rows, _ = edges.compact_sources()
    return len(rows) <= 0.8 * n


def _col(values: np.ndarray, like: Tensor) -> Tensor:
    return tensor(values.astype(like.dtype).reshape(-1, 1))
