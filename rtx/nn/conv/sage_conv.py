"""``SAGEConv``: GraphSAGE (Hamilton et al.; PyTorch Geometric's SAGEConv).

Same arguments, defaults, parameter names (``lin_l``, ``lin_r``, ``lin``),
shapes and initialisation as ``torch_geometric.nn.SAGEConv``, so a PyG
``state_dict`` converted to numpy loads as is.  ``-1`` input sizes are lazy
(sized by the first input).  Aggregation runs on rtx's native ops: ``sum`` /
``mean`` through the fused ``message_passing`` (no ``[E, F]`` message tensor;
mean = sum / in-degree), ``max`` / ``min`` through ``segment_max`` over the
gathered source rows (there is no fused max message pass: this one forms the
``[E, F]`` gathered rows, as PyG does).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...backend.index_plan import EdgeIndex
from ...creation import tensor
from ...functional import index_select, maximum, message_passing, segment_max, sqrt
from ...tensor import Tensor
from ..lazy import check_lazy_in_channels
from ..linear import Linear
from ..module import Module
from ._inputs import check_x, edges

__all__ = ["SAGEConv"]

_AGGRS = ("mean", "sum", "add", "max", "min")
_LAYER = "SAGEConv"


class SAGEConv(Module):
    r"""GraphSAGE layer, PyTorch Geometric's ``SAGEConv``::

        x'_i = W_l · aggr_{j in N(i)} x_j + b_l  [+ W_r x_i]     (then x' / ||x'||_2 if normalize)

    Args:
        in_channels: input size, ``-1`` (lazy: from the first input), or a
            ``(src, dst)`` pair of them for bipartite input.
        out_channels: output size.
        aggr: ``"mean"`` (default), ``"sum"`` (``"add"``), ``"max"`` or ``"min"``
            over each target's incoming edges; a node without incoming edges
            aggregates to 0 (as PyG).
        normalize: L2-normalise each output row (PyG: ``F.normalize``, eps 1e-12).
        root_weight: add ``lin_r(x_dst)`` (no bias).
        project: first map the sources through ``relu(lin(x_src))``
            (``lin``: ``[F_src, F_src]`` with bias; not with a lazy size, as PyG).
        bias: ``lin_l``'s bias.

    Parameters (PyG's names): ``lin.weight`` / ``lin.bias`` (``project``),
    ``lin_l.weight`` ``[out, F_src]``, ``lin_l.bias``, ``lin_r.weight``
    ``[out, F_dst]``; PyTorch's ``Linear`` initialisation, as PyG.
    """

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int,
                 aggr: str = "mean", normalize: bool = False, root_weight: bool = True,
                 project: bool = False, bias: bool = True) -> None:
        super().__init__()
        self.in_channels: int | tuple[int, int]
        self.in_channels, in_src, in_dst = check_lazy_in_channels(in_channels, _LAYER)
        if isinstance(out_channels, bool) or not isinstance(out_channels, (int, np.integer)) \
                or out_channels < 1:
            raise ValueError(f"{_LAYER}: out_channels must be an int >= 1, got "
                             f"{out_channels!r}")
        if not isinstance(aggr, str) or aggr not in _AGGRS:
            raise ValueError(f"{_LAYER}: aggr must be one of {_AGGRS}, got {aggr!r}")
        self.out_channels = int(out_channels)
        self.aggr = aggr
        self._reduce = "sum" if aggr == "add" else aggr
        self.normalize = bool(normalize)
        self.root_weight = bool(root_weight)
        self.project = bool(project)
        if self.project:
            if in_src < 0:
                raise ValueError(f"'{_LAYER}' does not support lazy initialization with "
                                 "`project=True`")
            self.lin: Linear | None = Linear(in_src, in_src, bias=True)
        else:
            self.lin = None
        self.lin_l = Linear(in_src, self.out_channels, bias=bias)
        self.lin_r: Linear | None = (Linear(in_dst, self.out_channels, bias=False)
                                     if self.root_weight else None)
        self._deg: tuple[Any, np.dtype, Tensor] | None = None

    def reset_parameters(self) -> None:
        """PyG's: every ``Linear`` re-initialised (nothing for a still-lazy one)."""
        for lin in (self.lin, self.lin_l, self.lin_r):
            if lin is not None:
                lin.reset_parameters()

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index: Any,
                size: tuple[int, int] | None = None) -> Tensor:
        """``x``: ``[N, F]`` or ``(x_src, x_dst)`` (``x_dst`` may be ``None``: then
        there is no root term and the output has ``size[1]`` rows, else
        ``N_src``, as PyG).  ``edge_index``: int ``[2, E]`` (row 0 source, row 1
        target) or an ``rtx.EdgeIndex``.  Returns ``[N_dst, out_channels]``."""
        x_dst: Tensor | None
        bipartite = isinstance(x, (tuple, list))
        if bipartite:
            if len(x) != 2:
                raise ValueError(f"{_LAYER}: bipartite input must be a pair (x_src, x_dst)")
            x_src = check_x(x[0], -1, "x_src", _LAYER)
            x_dst = None if x[1] is None else check_x(x[1], -1, "x_dst", _LAYER)
        else:
            x_src = x_dst = check_x(x, -1, "x", _LAYER)
        # Lazy sizes are taken here, before the width checks.
        self.lin_l.materialize(x_src.shape[1])
        if self.lin_r is not None and x_dst is not None:
            self.lin_r.materialize(x_dst.shape[1])
        first = self.lin if self.lin is not None else self.lin_l
        check_x(x_src, first.in_features, "x_src" if bipartite else "x", _LAYER)
        if self.lin_r is not None and x_dst is not None:
            check_x(x_dst, self.lin_r.in_features,
                    "x_dst" if bipartite else "x (as the target features)", _LAYER)
        n_src = x_src.shape[0]
        if x_dst is not None:
            n_dst = x_dst.shape[0]
        elif size is not None:
            n_dst = int(size[1])
        else:
            n_dst = n_src
        if size is not None and (int(size[0]) != n_src or int(size[1]) != n_dst):
            raise ValueError(f"{_LAYER}: size={tuple(size)} does not match the input "
                             f"({n_src}, {n_dst})")
        ei = edges(edge_index, n_src, n_dst, _LAYER)

        if self.lin is not None:
            x_src = self.lin(x_src).relu()
        out = self._aggregate(x_src, ei, n_dst)
        if self.lin_r is not None and x_dst is not None:
            out = out + self.lin_r(x_dst)
        if self.normalize:  # F.normalize(out, p=2, dim=-1): out / max(||out||, 1e-12)
            out = out / sqrt(maximum((out * out).sum(-1, keepdim=True), 1e-24))
        return out

    def _aggregate(self, x_src: Tensor, ei: EdgeIndex, n_dst: int) -> Tensor:
        """``lin_l(aggr_j x_j)``.  For sum / mean the map is linear, so it is
        applied first when it narrows the rows (fewer channels to pass); the
        bias is added after the aggregation either way."""
        lin = self.lin_l
        if self._reduce in ("max", "min"):
            rows = index_select(x_src, ei.src)  # [E, F]: no fused max message pass
            if self._reduce == "max":
                agg = segment_max(rows, ei.dst, n_dst)
            else:
                agg = -segment_max(-rows, ei.dst, n_dst)
            return lin(agg)
        narrow = lin.out_features < lin.in_features
        h = x_src @ lin.weight.T if narrow else x_src
        agg = message_passing(h, ei, n_dst)
        if self._reduce == "mean":
            agg = agg * self._inv_degree(ei, x_src.dtype)
        if narrow:
            return agg if lin.bias is None else agg + lin.bias
        return lin(agg)

    def _inv_degree(self, ei: EdgeIndex, dtype: np.dtype) -> Tensor:
        """``1 / max(in-degree, 1)`` as an ``[N_dst, 1]`` column (cached per EdgeIndex)."""
        if self._deg is not None and self._deg[0] is ei and self._deg[1] == dtype:
            return self._deg[2]
        cnt = np.maximum(ei.dst.counts(), 1).astype(dtype)
        col = tensor((1.0 / cnt).reshape(-1, 1).astype(dtype))
        self._deg = (ei, dtype, col)
        return col

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, aggr={self.aggr})"
