"""Graph-learning primitives: segment ops and fused message passing.

``index`` / ``edge_index`` arguments take raw int32/int64 indices (rtx tensor,
numpy array or sequence), checked and wrapped on the fly (nothing is cached
across calls), or an ``IndexPlan`` / ``EdgeIndex`` built once and reused: then
the indices are not re-checked and the CSR grouping is computed once.  Every
op is deterministic bit for bit for any thread count, and a plan gives the
same bits as raw indices.
"""

from __future__ import annotations

from typing import Any

from . import _backend_state
from ._autodiff.ops import gatv2 as _gatv2_rules  # noqa: F401 - registers the op
from ._autodiff.ops import message as _message_rules  # noqa: F401 - registers the op
from ._autodiff.ops import segment as _segment_rules  # noqa: F401 - registers the op
from .autograd.ops import OPS
from .backend.gatv2 import check_gatv2
from .backend.index_plan import EdgeIndex, IndexPlan, as_plan
from .backend.message import check_message
from .backend.segment import FLOAT_DTYPES
from .functional import index_add
from .tensor import Tensor, _operand

__all__ = ["EdgeIndex", "IndexPlan", "gatv2_scores", "message_passing", "segment_max",
           "segment_mean", "segment_softmax", "segment_sum"]


def _t(x: Any) -> Tensor:
    if isinstance(x, Tensor):
        return x
    return _operand(x, _backend_state.default_autodiff(), scalars=False)


def _segment_args(src: Any, index: Any, num_segments: int, op: str) -> tuple[Tensor, IndexPlan]:
    src = _t(src)
    if src.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}(): data must be float32 or float64, got {src.dtype}")
    if src.ndim < 1:
        raise ValueError(f"{op}(): data must have at least 1 dimension, got a 0-d tensor")
    return src, as_plan(index, num_segments, op, length=src.shape[0])


def segment_sum(src: Any, index: Any, num_segments: int) -> Tensor:
    """``out[r] = sum of src[i] with index[i] == r`` (``num_segments`` rows; empty -> 0).

    This is ``rtx.index_add(src, index, num_segments)`` (the same kernel).
    """
    return index_add(src, index, num_segments)


def segment_mean(src: Any, index: Any, num_segments: int) -> Tensor:
    """Mean of the rows of ``src`` sharing an index (0 for an empty segment)."""
    src, plan = _segment_args(src, index, num_segments, "segment_mean")
    return src._ad.apply(OPS["segment_mean"], src, plan, plan.num_rows)


def segment_max(src: Any, index: Any, num_segments: int) -> Tensor:
    """Max of the rows of ``src`` sharing an index, per column (0 for an empty segment).

    Ties: the gradient goes to the FIRST entry (lowest position) holding the
    max.  A NaN in a segment propagates.
    """
    src, plan = _segment_args(src, index, num_segments, "segment_max")
    return src._ad.apply(OPS["segment_max"], src, plan, plan.num_rows)


def segment_softmax(scores: Any, index: Any, num_segments: int) -> Tensor:
    """Softmax over the entries of ``scores`` (``[E]`` or ``[E, H]``) sharing an index.

    Per segment and column ``exp(s - max) / sum(exp(s - max))``: the semantics
    of PyG's ``torch_geometric.utils.softmax(src, index, num_nodes=N)``, stable
    for large scores; empty segments are fine (they own no entries).  Forward
    and backward are fused single passes over the index's CSR grouping.
    """
    scores, plan = _segment_args(scores, index, num_segments, "segment_softmax")
    if scores.ndim not in (1, 2):
        raise ValueError(f"segment_softmax(): scores must be [E] or [E, H], got {scores.shape}")
    return scores._ad.apply(OPS["segment_softmax"], scores, plan, plan.num_rows)


def message_passing(x: Any, edge_index: Any, num_nodes: int, weight: Any = None) -> Tensor:
    """Fused ``out[dst[e]] += weight[e] * x[src[e]]`` over ``num_nodes`` output rows.

    ``edge_index``: int ``[2, E]`` (row 0 source, row 1 target) or an
    ``EdgeIndex``; ``x``: ``[N_src, F]`` with ``weight`` ``[E]``, or ``[N_src, H,
    C]`` with ``weight`` ``[E, H]``; no ``weight`` sums the messages.  Never
    materialises the ``[E, ...]`` messages; the backward pass is a transpose
    message pass (``grad_x``) and an SDDMM (``grad_weight``).
    """
    x = _t(x)
    w = None if weight is None else _operand(weight, x._ad, scalars=False)
    if x.ndim not in (2, 3):
        raise ValueError(f"message_passing(): x must be [N, F] or [N, H, C], got {x.shape}")
    ei, _ = check_message(x.shape, x.dtype, edge_index, num_nodes,
                          None if w is None else w.shape, None if w is None else w.dtype)
    return x._ad.apply(OPS["message_passing"], x, w, ei, ei.num_dst)


# ------------------------------------------------------------------ GATv2 scores

def gatv2_scores(xl: Any, xr: Any, att: Any, edge_index: Any, negative_slope: float = 0.2,
                 xe: Any = None) -> Tensor:
    """GATv2's attention logits, fused: ``[E, H]`` with

    ``score[e, h] = sum_c att[h, c] * leaky_relu(xl[src[e], h, c] + xr[dst[e], h, c]
    (+ xe[e, h, c]))``

    ``xl``: ``[N_src, H, C]`` (transformed sources), ``xr``: ``[N_dst, H, C]``
    (transformed targets), ``att``: ``[H, C]``, ``xe``: optional ``[E, H, C]``
    (transformed edge features); ``edge_index``: int ``[2, E]`` or an
    ``EdgeIndex``.  Neither pass forms the ``[E, H, C]`` sum (PyG's
    ``GATv2Conv`` does): the backward recomputes it edge by edge.
    """
    xl = _t(xl)
    xr = _operand(xr, xl._ad, scalars=False)
    att = _operand(att, xl._ad, scalars=False)
    xe_t = None if xe is None else _operand(xe, xl._ad, scalars=False)
    ei = check_gatv2(xl.shape, xl.dtype, xr.shape, xr.dtype, att.shape, att.dtype, edge_index,
                     None if xe_t is None else xe_t.shape, None if xe_t is None else xe_t.dtype,
                     negative_slope)
    return xl._ad.apply(OPS["gatv2_scores"], xl, xr, att, xe_t, ei, float(negative_slope))
