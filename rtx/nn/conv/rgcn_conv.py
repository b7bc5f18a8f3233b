"""``RGCNConv``: relational graph convolution (Schlichtkrull et al.; PyTorch
Geometric's RGCNConv).

Same arguments, defaults, math, parameter names (``weight``, ``comp``,
``root``, ``bias``), shapes and initialisation as
``torch_geometric.nn.RGCNConv``, so a PyG ``state_dict`` converted to numpy
loads as is::

    out_i = x_i @ root + bias + sum_r aggr_{j in N_r(i)} x_j @ W_r

with ``aggr`` the mean (PyG's default: per relation, over ``i``'s incoming
edges of that relation), sum or max.  No Python loop over the relations:
the edges are grouped by (target, relation) pair once per graph, the pairs'
aggregates come from ONE fused ``message_passing`` (``mean``: weighted by
``1 / |N_r(i)|``; no ``[E, F]`` tensor) or one ``segment_max``, every pair
is multiplied by its relation's weight and summed into its target by ONE
``segment_matmul_sum`` (a GEMM per chunk of each relation's pairs, added
into the targets: no ``[pairs, out]`` product is kept, nor its gradient;
block-diagonal weights: one ``segment_matmul`` group per (relation, block),
then one ``index_add``).  Work and memory grow
with the number of distinct (target, relation) pairs, at most ``E``, not
with the number of relations.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ...autograd import no_grad
from ...backend.index_plan import EdgeIndex, IndexPlan, as_plan
from ...creation import full, tensor
from ...functional import (
    index_add,
    index_select,
    message_passing,
    segment_matmul,
    segment_matmul_sum,
    segment_max,
)
from ...tensor import Tensor
from .. import init
from ..lazy import UninitializedParameter, check_lazy_in_channels, is_lazy
from ..module import Module
from ..parameter import Parameter
from ._inputs import check_x, edges

__all__ = ["RGCNConv"]

_LAYER = "RGCNConv"
_AGGRS = ("mean", "add", "sum", "max")


def _pos_int(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{_LAYER}: {name} must be an int >= 1, got {v!r}")
    return int(v)


def _glorot_(t: Tensor) -> None:
    """PyG's ``glorot``: U(-b, b), b = sqrt(6 / (size(-2) + size(-1)))."""
    b = math.sqrt(6.0 / (t.shape[-2] + t.shape[-1]))
    init.uniform_(t, -b, b)


class _Pairs(NamedTuple):
    """The (target, relation) pairs of a graph: ``to_pair`` (sources -> pairs,
    for the fused aggregation), ``rel`` (each pair's relation, over R),
    ``dst`` (each pair's target, over N_dst), ``inv_count`` (per edge,
    ``1 / |N_r(i)|`` of its pair) and ``blocks`` (the pair x block groups of a
    block-diagonal weight, or None)."""

    to_pair: EdgeIndex
    rel: IndexPlan
    dst: IndexPlan
    inv_count: np.ndarray
    blocks: IndexPlan | None


class RGCNConv(Module):
    r"""Relational GCN layer, PyTorch Geometric's ``RGCNConv``.

    Args:
        in_channels: input size, or ``(src, dst)`` sizes (``root`` maps the
            target features); ``-1`` is lazy (rtx/nn/lazy.py): the size comes
            from the first input, and ``weight`` / ``root`` are created and
            initialised then (PyG's convention for its other layers).
        out_channels: output size.  ``num_relations``: edge types.
        num_bases: basis decomposition, ``W_r = sum_b comp[r, b] weight[b]``.
        num_blocks: block-diagonal decomposition (``weight`` ``[R, B, in/B,
            out/B]``; both sizes must divide).  Not with ``num_bases``.
        aggr: ``"mean"`` (per relation, PyG's default), ``"add"`` / ``"sum"``,
            ``"max"``.
        root_weight: add ``x_i @ root``.  ``is_sorted``: PyG's hint that the
            edges are sorted by type; accepted and not needed.
        bias: learnable ``bias`` ``[out_channels]``.

    Parameters (PyG's names and shapes): ``weight`` ``[R, in, out]`` (``[B,
    in, out]`` with bases, ``[R, B, in/B, out/B]`` with blocks), ``comp``
    ``[R, B]``, ``root`` ``[in_dst, out]``, ``bias`` ``[out]``; glorot
    initialisation and a zero bias, as PyG.

    ``forward(x, edge_index, edge_type)``: ``x`` ``[N, in]`` or ``(x_src,
    x_dst)``; ``edge_index`` int ``[2, E]`` or an ``rtx.EdgeIndex``;
    ``edge_type`` ``E`` ints in ``[0, num_relations)`` (or an
    ``rtx.IndexPlan`` over ``num_relations``: the grouping by (target,
    relation) is then built once per graph and reused, as it is for the same
    ``EdgeIndex`` and plan objects).
    """

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int,
                 num_relations: int, num_bases: int | None = None,
                 num_blocks: int | None = None, aggr: str = "mean",
                 root_weight: bool = True, is_sorted: bool = False, bias: bool = True) -> None:
        super().__init__()
        self.in_channels: int | tuple[int, int]
        self.in_channels, in_src, in_dst = check_lazy_in_channels(in_channels, _LAYER)
        self.out_channels = _pos_int(out_channels, "out_channels")
        self.num_relations = _pos_int(num_relations, "num_relations")
        if num_bases is not None and num_blocks is not None:
            raise ValueError(f"{_LAYER}: can not apply both basis-decomposition and "
                             "block-diagonal-decomposition at the same time")
        self.num_bases = None if num_bases is None else _pos_int(num_bases, "num_bases")
        self.num_blocks = None if num_blocks is None else _pos_int(num_blocks, "num_blocks")
        if aggr not in _AGGRS:
            raise ValueError(f"{_LAYER}: aggr must be one of {_AGGRS}, got {aggr!r}")
        self.aggr = aggr
        self.is_sorted = bool(is_sorted)
        R, M = self.num_relations, self.out_channels
        if self.num_bases is not None:
            self.weight = self._param((self.num_bases, in_src, M), 1)
            self.comp: Parameter | None = Parameter(full((R, self.num_bases), 0.0))
        elif self.num_blocks is not None:
            B = self.num_blocks
            self._check_blocks(in_src)
            self.weight = self._param((R, B, in_src // B if in_src >= 0 else -1, M // B), 2)
            self.register_parameter("comp", None)
        else:
            self.weight = self._param((R, in_src, M), 1)
            self.register_parameter("comp", None)
        if root_weight:
            self.root: Parameter | None = self._param((in_dst, M), 0)
        else:
            self.register_parameter("root", None)
        if bias:
            self.bias: Parameter | None = Parameter(full((M,), 0.0))
        else:
            self.register_parameter("bias", None)
        self._pairs: tuple[EdgeIndex, IndexPlan, _Pairs] | None = None
        self.reset_parameters()

    @staticmethod
    def _param(shape: tuple[int, ...], lazy_axis: int) -> Parameter:
        """A parameter of ``shape``, or a lazy placeholder when ``shape[lazy_axis]``
        is -1 (an input size not known yet)."""
        if shape[lazy_axis] < 0:
            return UninitializedParameter(shape)
        return Parameter(full(shape, 0.0))

    def _check_blocks(self, in_src: int) -> None:
        B, M = self.num_blocks, self.out_channels
        assert B is not None
        if (in_src >= 0 and in_src % B) or M % B:
            sizes = f"in_channels ({in_src}) and " if in_src >= 0 else ""
            raise ValueError(f"{_LAYER}: num_blocks={B} must divide {sizes}out_channels ({M})")

    def reset_parameters(self) -> None:
        """PyG's: glorot ``weight``, ``comp``, ``root``; zero ``bias`` (a still-lazy
        ``weight`` / ``root`` is initialised when the first input sizes it)."""
        if not is_lazy(self.weight):
            _glorot_(self.weight)
        if self.comp is not None:
            _glorot_(self.comp)
        if self.root is not None and not is_lazy(self.root):
            _glorot_(self.root)
        if self.bias is not None:
            init.zeros_(self.bias)

    def _in_sizes(self) -> tuple[int, int]:
        """(source, target) input widths, -1 where still lazy (read from the
        parameters: a ``load_state_dict`` sizes them too)."""
        in_src, in_dst = ((self.in_channels, self.in_channels)
                          if isinstance(self.in_channels, int) else self.in_channels)
        w = self.weight
        if not is_lazy(w):
            in_src = w.shape[2] * w.shape[1] if self.num_blocks is not None else w.shape[1]
        if self.root is not None and not is_lazy(self.root):
            in_dst = self.root.shape[0]
        elif isinstance(self.in_channels, int):
            in_dst = in_src
        return in_src, in_dst

    def _materialize(self, width_src: int, width_dst: int) -> None:
        """Size the lazy ``weight`` / ``root`` from the first input's widths and
        initialise them as ``reset_parameters`` does (glorot)."""
        w, root = self.weight, self.root
        sizes = (self.in_channels,) if isinstance(self.in_channels, int) else self.in_channels
        if -1 not in sizes:
            return
        if is_lazy(w) and self.num_blocks is not None and width_src % self.num_blocks:
            raise ValueError(f"{_LAYER}: num_blocks={self.num_blocks} must divide the input "
                             f"size, got x_src of width {width_src}")
        with no_grad():
            if is_lazy(w):
                assert isinstance(w, UninitializedParameter)
                t = list(w.template)
                t[t.index(-1)] = (width_src // self.num_blocks if self.num_blocks is not None
                                  else width_src)
                w.materialize(t)
                _glorot_(w)
            if root is not None and is_lazy(root):
                assert isinstance(root, UninitializedParameter)
                root.materialize((width_dst, self.out_channels))
                _glorot_(root)
        in_src, in_dst = self._in_sizes()
        self.in_channels = (in_src if isinstance(self.in_channels, int)
                            else (in_src, in_dst if self.root is not None else width_dst))

    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index: Any,
                edge_type: Any) -> Tensor:
        in_src, in_dst = self._in_sizes()
        if isinstance(x, (tuple, list)):
            if len(x) != 2:
                raise ValueError(f"{_LAYER}: bipartite input must be a pair (x_src, x_dst)")
            x_src = check_x(x[0], in_src, "x_src", _LAYER)
            x_dst = check_x(x[1], in_dst, "x_dst", _LAYER)
        else:
            if not isinstance(self.in_channels, int) and in_src != in_dst:
                raise ValueError(f"{_LAYER}: in_channels={self.in_channels} needs bipartite "
                                 "(x_src, x_dst) input")
            x_src = x_dst = check_x(x, in_src, "x", _LAYER)
        self._materialize(x_src.shape[1], x_dst.shape[1])
        n_src, n_dst = x_src.shape[0], x_dst.shape[0]
        ei = edges(edge_index, n_src, n_dst, _LAYER)
        if edge_type is None:
            raise ValueError(f"{_LAYER}: edge_type is required (one relation per edge)")
        types = as_plan(edge_type, self.num_relations, _LAYER, length=ei.num_edges)
        pairs = self._pair_structure(ei, types)
        out = self._relations(x_src, pairs, n_dst)
        if self.root is not None:
            out = out + x_dst @ self.root
        if self.bias is not None:
            out = out + self.bias
        return out

    def _relations(self, x_src: Tensor, pairs: _Pairs, n_dst: int) -> Tensor:
        """``sum_r aggr_{j in N_r(i)} x_j @ W_r`` for every target ``i``."""
        P = len(pairs.rel)
        if self.aggr == "max":
            agg = segment_max(index_select(x_src, pairs.to_pair.src), pairs.to_pair.dst, P)
        elif self.aggr == "mean":
            w = tensor(pairs.inv_count.astype(x_src.dtype))
            agg = message_passing(x_src, pairs.to_pair, P, w)
        else:
            agg = message_passing(x_src, pairs.to_pair, P)
        M = self.out_channels
        if self.num_blocks is not None:
            B = self.num_blocks
            assert pairs.blocks is not None
            rows = agg.reshape(P * B, agg.shape[1] // B)
            w = self.weight.reshape(self.num_relations * B, self.weight.shape[2],
                                    self.weight.shape[3])
            h = segment_matmul(rows, pairs.blocks, w).reshape(P, M)
        else:
            weight: Tensor = self.weight
            if self.comp is not None:  # basis decomposition
                weight = (self.comp @ weight.reshape(weight.shape[0], -1)).reshape(
                    self.num_relations, weight.shape[1], M)
            # each pair times its relation's weight, summed into its target, in
            # chunks: no [P, M] product, nor its gradient (segment_matmul_sum)
            return segment_matmul_sum(agg, pairs.rel, weight, pairs.dst, n_dst)
        return index_add(h, pairs.dst, n_dst)

    def _pair_structure(self, ei: EdgeIndex, types: IndexPlan) -> _Pairs:
        """The (target, relation) grouping of the edges, kept for the same
        ``EdgeIndex`` and edge-type plan objects (both immutable)."""
        cached = self._pairs
        if cached is not None and cached[0] is ei and cached[1] is types:
            return cached[2]
        R, n_dst = self.num_relations, max(ei.num_dst, 1)
        dst = ei.dst.indices.astype(np.int64, copy=False)
        # relation-major keys: the pairs come sorted by relation, so the grouped
        # matmul runs one GEMM per relation on contiguous rows
        key = types.indices.astype(np.int64, copy=False) * n_dst + dst
        uniq, pair_of_edge, counts = np.unique(key, return_inverse=True, return_counts=True)
        P = uniq.shape[0]
        to_pair = EdgeIndex(np.stack([ei.src.indices.astype(np.int64, copy=False),
                                      pair_of_edge.astype(np.int64)]), ei.num_src, P)
        rel = IndexPlan(uniq // n_dst, R)
        pdst = IndexPlan(uniq % n_dst, ei.num_dst)
        inv = (1.0 / counts)[pair_of_edge]
        blocks = None
        if self.num_blocks is not None:
            B = self.num_blocks
            g = ((uniq // n_dst)[:, None] * B + np.arange(B)[None, :]).reshape(-1)
            blocks = IndexPlan(g, R * B)
        pairs = _Pairs(to_pair, rel, pdst, inv, blocks)
        self._pairs = (ei, types, pairs)
        return pairs

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
                f"num_relations={self.num_relations})")
