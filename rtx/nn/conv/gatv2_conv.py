"""``GATv2Conv``: dynamic graph attention (Brody et al.; PyTorch Geometric's GATv2Conv).

Same arguments, defaults, math, parameter names (``lin_l``, ``lin_r``,
``att``, ``lin_edge``, ``res``, ``bias``), shapes and initialisation as
``torch_geometric.nn.GATv2Conv``, so a PyG ``state_dict`` converted to numpy
loads as is; ``-1`` input sizes are lazy.  The per-edge scores
``sum_c att[h, c] * leaky_relu(xl[src, h, c] + xr[dst, h, c] [+ xe[e, h, c]])``
come from the fused ``rtx.gatv2_scores`` op (forward and backward never form
the ``[E, H, C]`` sum PyG materialises); the softmax is ``segment_softmax``
and the weighted sum the fused ``message_passing``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...backend.index_plan import SelfLoops
from ...creation import full, tensor
from ...functional import (
    concat,
    gatv2_scores,
    index_add,
    index_select,
    segment_max,
)
from ...tensor import Tensor
from .. import init
from ..lazy import check_lazy_in_channels
from ..linear import Linear
from ..module import Module
from ..parameter import Parameter
from ._inputs import check_x, edges
from .gat_conv import attention_output

__all__ = ["GATv2Conv"]

_LAYER = "GATv2Conv"
_FILLS = ("mean", "add", "sum", "max", "min")


def _pos_int(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{_LAYER}: {name} must be an int >= 1, got {v!r}")
    return int(v)


def _glorot_(t: Tensor) -> None:
    """PyG's ``glorot``: U(-b, b), b = sqrt(6 / (size(-2) + size(-1)))."""
    b = float(np.sqrt(6.0 / (t.shape[-2] + t.shape[-1])))
    init.uniform_(t, -b, b)


class GATv2Conv(Module):
    r"""GATv2 attention layer, PyTorch Geometric's ``GATv2Conv``.

    For each edge ``j -> i`` and head ``h`` (``xl = lin_l(x_j)``,
    ``xr = lin_r(x_i)``, both ``[H, C]`` with their biases)::

        e_ij  = att_h · LeakyReLU(xl_j + xr_i [+ lin_edge(edge_attr_ij)])
        a_ij  = softmax of e_ij over i's incoming edges (dropout on a in training)
        out_i = concat_h (or mean_h) sum_j a_ij xl_j  [+ res(x_i)] + bias

    Args:
        in_channels: input size, ``-1`` (lazy), or a ``(src, dst)`` pair.
        out_channels: channels per head.  ``heads``: attention heads;
            ``concat`` joins them (``heads * out_channels`` outputs), else
            they are averaged.
        negative_slope: of the LeakyReLU.  ``dropout``: on the attention
            weights (training mode only; rtx's generator).
        add_self_loops: drop existing self-loops and add one ``i -> i`` per
            node ``i < min(N_src, N_dst)``, appended after the edges (PyG).
        edge_dim: size of edge features in the attention (``lin_edge``);
            ``fill_value`` gives added loops their features: ``"mean"``,
            ``"add"`` / ``"sum"``, ``"max"``, ``"min"`` of the node's incoming
            edges' features (0 without any), a number, or a ``[edge_dim]``
            array.
        bias: learnable ``bias`` and ``lin_l`` / ``lin_r`` biases (PyG).
        share_weights: ``lin_r`` is ``lin_l`` (one module under both names).
        residual: add ``res(x_dst)`` (a bias-free linear map).

    Parameters (PyG's names and shapes): ``att`` ``[1, H, C]``, ``bias``
    ``[H*C]`` (``[C]`` when not ``concat``), ``lin_l.weight`` ``[H*C, F_src]``,
    ``lin_l.bias``, ``lin_r.weight`` ``[H*C, F_dst]``, ``lin_r.bias``,
    ``lin_edge.weight`` ``[H*C, edge_dim]``, ``res.weight`` ``[H*C or C,
    F_dst]``.  Initialised as PyG: glorot weights and ``att``, ``lin_l`` /
    ``lin_r`` biases U(±1/sqrt(fan_in)), zero ``bias``.
    """

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: float | str | Any = "mean", bias: bool = True,
                 share_weights: bool = False, residual: bool = False) -> None:
        super().__init__()
        self.in_channels: int | tuple[int, int]
        self.in_channels, in_src, in_dst = check_lazy_in_channels(in_channels, _LAYER)
        self.out_channels = _pos_int(out_channels, "out_channels")
        self.heads = _pos_int(heads, "heads")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) \
                or not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"{_LAYER}: dropout must be in [0, 1), got {dropout!r}")
        self.fill_value = self._check_fill(fill_value, edge_dim)
        self.concat = bool(concat)
        self.negative_slope = float(negative_slope)
        self.dropout = float(dropout)
        self.add_self_loops = bool(add_self_loops)
        self.edge_dim = None if edge_dim is None else _pos_int(edge_dim, "edge_dim")
        self.share_weights = bool(share_weights)
        self.residual = bool(residual)
        H, C = self.heads, self.out_channels
        total_out = H * C if self.concat else C

        # Registration order gives PyG's state_dict order (own parameters first).
        self.lin_l = Linear(in_src, H * C, bias=bias, weight_initializer="glorot")
        self.lin_r = (self.lin_l if self.share_weights
                      else Linear(in_dst, H * C, bias=bias, weight_initializer="glorot"))
        self.att = Parameter(full((1, H, C), 0.0))
        self.lin_edge: Linear | None = (
            Linear(self.edge_dim, H * C, bias=False, weight_initializer="glorot")
            if self.edge_dim is not None else None)
        self.res: Linear | None = (Linear(in_dst, total_out, bias=False,
                                          weight_initializer="glorot")
                                   if self.residual else None)
        if bias:
            self.bias: Parameter | None = Parameter(full((total_out,), 0.0))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    @staticmethod
    def _check_fill(fill_value: Any, edge_dim: Any) -> Any:
        if isinstance(fill_value, str):
            if fill_value not in _FILLS:
                raise ValueError(f"{_LAYER}: fill_value must be one of {_FILLS}, a number or an "
                                 f"[edge_dim] array, got {fill_value!r}")
            return fill_value
        if isinstance(fill_value, bool):
            raise ValueError(f"{_LAYER}: fill_value must be a str, a number or an array, got "
                             f"{fill_value!r}")
        if isinstance(fill_value, (int, float, np.integer, np.floating)):
            return float(fill_value)
        a = fill_value.numpy() if isinstance(fill_value, Tensor) else np.asarray(fill_value)
        if a.dtype.kind not in "iuf" or a.ndim != 1 or (edge_dim is not None
                                                        and a.shape[0] != edge_dim):
            raise ValueError(f"{_LAYER}: an array fill_value must be numeric with shape "
                             f"[edge_dim={edge_dim}], got {a.dtype} {a.shape}")
        return np.array(a, dtype=np.float64, copy=True)

    def reset_parameters(self) -> None:
        """PyG's initialisation (a still-lazy ``Linear`` is initialised when sized)."""
        for lin in (self.lin_l, self.lin_r, self.lin_edge, self.res):
            if lin is not None:
                lin.reset_parameters()
        _glorot_(self.att)
        if self.bias is not None:
            init.zeros_(self.bias)

    # ----------------------------------------------------------------- forward
    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index: Any,
                edge_attr: Tensor | None = None,
                return_attention_weights: bool | None = None
                ) -> Tensor | tuple[Tensor, tuple[np.ndarray, Tensor]]:
        """``x``: ``[N, F]`` or ``(x_src, x_dst)``.  ``edge_index``: int ``[2, E]``
        (row 0 source, row 1 target) or an ``rtx.EdgeIndex``.  ``edge_attr``:
        ``[E]`` or ``[E, edge_dim]`` (required when the layer has ``edge_dim``).

        Returns ``[N_dst, H*C]`` (``[N_dst, C]`` if not ``concat``); with
        ``return_attention_weights=True`` also ``(edge_index, alpha)``: the int64
        ``[2, E']`` edges used (self-loops appended after the kept edges) and
        their attention ``[E', H]``.
        """
        H, C = self.heads, self.out_channels
        bipartite = isinstance(x, (tuple, list))
        if bipartite:
            assert isinstance(x, (tuple, list))
            if len(x) != 2:
                raise ValueError(f"{_LAYER}: bipartite input must be a pair (x_src, x_dst)")
            if x[1] is None:
                raise ValueError(f"{_LAYER}: x_dst is required (the attention reads the "
                                 "target features); pass (x_src, x_dst)")
            x_src = check_x(x[0], -1, "x_src", _LAYER)
            x_dst = check_x(x[1], -1, "x_dst", _LAYER)
        else:
            x_src = x_dst = check_x(x, -1, "x", _LAYER)
        self.lin_l.materialize(x_src.shape[1])
        self.lin_r.materialize(x_dst.shape[1])
        if self.res is not None:
            self.res.materialize(x_dst.shape[1])
        what = "x_src" if bipartite else "x"
        check_x(x_src, self.lin_l.in_features, what, _LAYER)
        check_x(x_dst, self.lin_r.in_features, "x_dst" if bipartite else what, _LAYER)
        if self.res is not None:
            check_x(x_dst, self.res.in_features, "x_dst" if bipartite else what, _LAYER)
        if edge_attr is not None and self.lin_edge is None:
            raise ValueError(f"{_LAYER}: edge_attr given but the layer has no edge_dim "
                             "(construct it with edge_dim=...)")
        if edge_attr is None and self.lin_edge is not None:
            raise ValueError(f"{_LAYER}: this layer has edge_dim={self.edge_dim}; pass edge_attr")

        n_src, n_dst = x_src.shape[0], x_dst.shape[0]
        given = edges(edge_index, n_src, n_dst, _LAYER)
        # the edges attended over: self-loops cached on the plan (shared by every layer)
        ei = given.with_self_loops() if self.add_self_loops else given
        xl = self.lin_l(x_src)
        xr = xl if (self.share_weights and not bipartite) else self.lin_r(x_dst)
        xe = None
        if self.lin_edge is not None:
            attr = self._edge_features(edge_attr, given.num_edges, ei.self_loop_info)
            xe = self.lin_edge(attr).reshape(ei.num_edges, H, C)
        xl3 = xl.reshape(n_src, H, C)
        scores = gatv2_scores(xl3, xr.reshape(n_dst, H, C), self.att.reshape(H, C), ei,
                              self.negative_slope, xe)
        return attention_output(self, scores, xl3, ei, ei, x_dst, return_attention_weights)

    def _edge_features(self, edge_attr: Any, num_edges: int,
                       loops: SelfLoops | None) -> Tensor:
        """``edge_attr`` of the kept edges, then the self-loops' ``fill_value`` rows."""
        assert self.edge_dim is not None
        if not isinstance(edge_attr, Tensor):
            raise TypeError(f"{_LAYER}: edge_attr must be an rtx.Tensor, got "
                            f"{type(edge_attr).__name__}")
        D = self.edge_dim
        attr = edge_attr.reshape(-1, 1) if edge_attr.ndim == 1 else edge_attr
        if attr.ndim != 2 or attr.shape[1] != D or attr.shape[0] != num_edges:
            raise ValueError(f"{_LAYER}: edge_attr must have shape [{num_edges}, {D}] (one row "
                             f"per edge of edge_index), got {edge_attr.shape}")
        if loops is None:
            return attr
        attr = index_select(attr, loops.kept)
        dst, num_loops = loops.kept_dst, loops.num_loops
        fv = self.fill_value
        if isinstance(fv, str):
            counts = dst.counts()
            if counts[num_loops:].any():
                raise ValueError(
                    f"{_LAYER}: fill_value={fv!r} aggregates the features of the edges into "
                    f"each node with a self-loop, but some edges point to targets >= "
                    f"{num_loops} = min(N_src, N_dst), which get no loop (PyG fails here "
                    "too); use a number fill_value or add_self_loops=False")
            n = dst.num_rows  # >= num_loops; the rows past num_loops are empty
            if fv in ("max", "min"):
                sign = 1.0 if fv == "max" else -1.0
                fill = segment_max(attr * sign, dst, n) * sign
            else:
                fill = index_add(attr, dst, n)
                if fv == "mean":
                    cnt = np.maximum(counts, 1)
                    fill = fill * tensor((1.0 / cnt).astype(attr.dtype).reshape(-1, 1))
            if n != num_loops:
                fill = fill[:num_loops]
        elif isinstance(fv, float):
            fill = full((num_loops, D), fv, dtype=attr.dtype)
        else:
            fill = tensor(np.broadcast_to(fv.astype(attr.dtype), (num_loops, D)).copy())
        return concat([attr, fill], 0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"
