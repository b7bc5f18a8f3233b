"""``SimpleHGNConv``: the graph attention layer of Simple-HGN (Lv et al., "Are we
really making much progress? Revisiting, benchmarking, and refining heterogeneous
graph neural networks", KDD 2021), as the HGB code defines it (``myGATConv``)."""

from __future__ import annotations

from typing import Any

from ...autograd import no_grad
from ...backend.index_plan import as_edge_index, as_plan
from ...creation import empty, zeros
from ...functional import index_select, message_passing, segment_softmax
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..lazy import check_lazy_channels, is_lazy
from ..linear import Linear
from ..module import Module
from ..parameter import Parameter
from ..sparse import Embedding

__all__ = ["SimpleHGNConv"]


def _xavier_(p: Tensor) -> None:
    """HGB's initialisation: xavier-normal with the relu gain."""
    init.xavier_normal_(p, gain=init.calculate_gain("relu"))


def _positive(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"SimpleHGNConv: {name} must be a positive int, got {v!r}")
    return v


class SimpleHGNConv(Module):
    """``SimpleHGNConv(in_channels, out_channels, num_edge_types, edge_dim, heads=1,
    negative_slope=0.2, feat_drop=0.0, attn_drop=0.0, residual=True, activation=None,
    bias=True, beta=0.0)``.

    On a graph whose edges carry a type id (HGB turns a heterogeneous graph into
    one such graph, with self-loops as one more type): ``h = fc(x)`` per head, a
    learned embedding per edge type projected per head (``fc_e``), and the
    attention logit of an edge ``leaky_relu(a_l . h_src + a_r . h_dst + a_e .
    e_type)``, softmaxed over the edges into each node; with ``res_attn`` (the
    previous layer's attention) it is mixed in as ``(1 - beta) * a + beta *
    res_attn`` (residual attention).  The messages are summed by one fused
    ``message_passing``; ``residual`` adds ``res_fc(x)`` (the identity when
    ``in_channels == heads * out_channels``), ``bias`` a learned ``[1, heads,
    out_channels]``, then ``activation``.  ``forward(x, edge_index, edge_type,
    res_attn=None)`` returns ``(out [N, heads, out_channels], attention [E, heads])``,
    the attention detached as HGB's layer returns it.  Parameter names are HGB's
    (``fc.weight``, ``fc_e.weight``, ``edge_emb.weight``, ``attn_l``, ``attn_r``,
    ``attn_e``, ``res_fc.weight``, ``bias_param``).

    ``in_channels=-1`` is lazy (rtx/nn/lazy.py): ``fc`` and ``res_fc`` are sized and
    initialised by the first input, and ``res_fc`` is then dropped (``None``, the
    identity residual) if the width is ``heads * out_channels``, as a sized layer
    would have it.  A checkpoint therefore loads into a lazy layer after one forward
    (PyG's rule for lazy layers), or before it when it has a ``res_fc.weight``.
    """

    def __init__(self, in_channels: int, out_channels: int, num_edge_types: int,
                 edge_dim: int, heads: int = 1, negative_slope: float = 0.2,
                 feat_drop: float = 0.0, attn_drop: float = 0.0, residual: bool = True,
                 activation: Any = None, bias: bool = True, beta: float = 0.0) -> None:
        super().__init__()
        self.in_channels = check_lazy_channels(in_channels, "in_channels", "SimpleHGNConv")
        self.out_channels = _positive("out_channels", out_channels)
        self.num_edge_types = _positive("num_edge_types", num_edge_types)
        self.edge_dim = _positive("edge_dim", edge_dim)
        self.heads = _positive("heads", heads)
        for name, rate in (("feat_drop", feat_drop), ("attn_drop", attn_drop)):
            if not 0.0 <= float(rate) < 1.0:
                raise ValueError(f"SimpleHGNConv: {name} must be in [0, 1), got {rate!r}")
        if not 0.0 <= float(beta) <= 1.0:
            raise ValueError(f"SimpleHGNConv: beta must be in [0, 1], got {beta!r}")
        if activation is not None and not callable(activation):
            raise TypeError("SimpleHGNConv: activation must be callable or None")
        self.negative_slope, self.beta = float(negative_slope), float(beta)
        self.feat_drop, self.attn_drop = float(feat_drop), float(attn_drop)
        self.activation = activation
        H, C, De = heads, out_channels, edge_dim
        self.edge_emb = Embedding(num_edge_types, De)   # HGB's nn.Embedding
        self.fc = Linear(in_channels, H * C, bias=False)
        self.fc_e = Linear(De, De * H, bias=False)
        self.attn_l = Parameter(empty(1, H, C))
        self.attn_r = Parameter(empty(1, H, C))
        self.attn_e = Parameter(empty(1, H, De))
        # the residual projection: only when the widths differ (HGB); a lazy layer
        # keeps a lazy one until the first input tells (_materialize)
        self.res_fc = (Linear(in_channels, H * C, bias=False)
                       if residual and in_channels != H * C else None)
        self.residual = bool(residual)
        self.bias_param = Parameter(zeros(1, H, C)) if bias else None
        # HGB: xavier_normal_ with the relu gain on fc, fc_e and the attention vectors
        for p in (self.fc.weight, self.fc_e.weight, self.attn_l, self.attn_r, self.attn_e):
            if not is_lazy(p):
                _xavier_(p)
        if self.res_fc is not None and not is_lazy(self.res_fc.weight):
            _xavier_(self.res_fc.weight)

    def _materialize(self, width: int) -> None:
        """Size the lazy ``fc`` / ``res_fc`` from the first input's width (xavier-normal
        as at construction); an identity residual replaces ``res_fc`` when the width is
        ``heads * out_channels``."""
        if self.in_channels >= 0:
            return
        HC = self.heads * self.out_channels
        if self.res_fc is not None and is_lazy(self.res_fc.weight) and width == HC:
            del self.res_fc   # unregistered, as a sized layer never registers one
            self.res_fc = None
        for lin in (self.fc, self.res_fc):
            if lin is not None and is_lazy(lin.weight):
                lin.materialize(width)
                with no_grad():
                    _xavier_(lin.weight)
        self.in_channels = self.fc.weight.shape[1]

    def forward(self, x: Tensor, edge_index: Any, edge_type: Any,
                res_attn: Tensor | None = None) -> tuple[Tensor, Tensor]:
        if not isinstance(x, Tensor):
            raise TypeError(f"SimpleHGNConv: x must be an rtx.Tensor, got {type(x).__name__}")
        width = self.in_channels if self.in_channels >= 0 else (
            -1 if is_lazy(self.fc.weight) else self.fc.weight.shape[1])
        if x.ndim != 2 or (width >= 0 and x.shape[1] != width):
            raise ValueError(f"SimpleHGNConv: x must have shape [N, "
                             f"{width if width >= 0 else 'F'}], got {x.shape}")
        self._materialize(x.shape[1])
        N = x.shape[0]
        H, C, De = self.heads, self.out_channels, self.edge_dim
        ei = as_edge_index(edge_index, N, N, "SimpleHGNConv")
        et = as_plan(edge_type, self.num_edge_types, "SimpleHGNConv: edge_type",
                     length=ei.num_edges)
        h = F.dropout(x, self.feat_drop, self.training) if self.feat_drop else x
        feat = self.fc(h).reshape(N, H, C)
        el = (feat * self.attn_l).sum(-1)                                  # [N, H]
        er = (feat * self.attn_r).sum(-1)
        ef = self.fc_e(self.edge_emb.weight).reshape(self.num_edge_types, H, De)
        ee = (ef * self.attn_e).sum(-1)                                    # [types, H]
        e = index_select(el, ei.src) + index_select(er, ei.dst) + index_select(ee, et)
        a = segment_softmax(F.leaky_relu(e, self.negative_slope), ei.dst, N)
        if self.attn_drop:
            a = F.dropout(a, self.attn_drop, self.training)
        if res_attn is not None:
            if not isinstance(res_attn, Tensor) or res_attn.shape != a.shape:
                raise ValueError(f"SimpleHGNConv: res_attn must be a tensor of shape "
                                 f"{a.shape} (the attention of a layer on the same edges)")
            a = a * (1.0 - self.beta) + res_attn * self.beta
        out = message_passing(feat, ei, N, a)                              # [N, H, C]
        if self.residual:
            res = self.res_fc(h) if self.res_fc is not None else h
            out = out + res.reshape(N, H, C)
        if self.bias_param is not None:
            out = out + self.bias_param
        if self.activation is not None:
            out = self.activation(out)
        return out, a.detach()

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, heads={self.heads}, "
                f"num_edge_types={self.num_edge_types}, edge_dim={self.edge_dim}, "
                f"beta={self.beta}")

