"""Segment op rules: mean, max, min, softmax (``segment_sum`` is ``index_add``).

``index`` reaching these rules is always an ``IndexPlan`` (the public faces
wrap raw indices once), so the backward pass reuses the forward's checked
indices and CSR grouping.  (``segment_max``'s argmax positions are kept as
``ctx._argmax``: the backward kernel scatters by them, after a check.)
"""


from __future__ import annotations

from .base import Op

_SEGMENT = "src: Data, index: Index(rows=num_segments, length=src), num_segments: Rows"


class SegmentSoftmax(Op):
    """Softmax over the entries of ``scores`` (``[E]`` or ``[E, H]``) sharing an index.

    Per segment and column ``exp(s - max) / sum(exp(s - max))``: the semantics
    of PyG's ``torch_geometric.utils.softmax(src, index, num_nodes=N)``, stable
    for large scores; empty segments are fine (they own no entries).  Forward
    and backward (``y * (g - segsum(g * y))``) are fused single passes over the
    index's CSR grouping.
    """

    signature = "scores: Data, index: Index(rows=num_segments, length=scores), num_segments: Rows"
    faces = ("function", "nn")
    name = "segment_softmax"

    @staticmethod
    def check(scores, index, num_segments):
        if scores.ndim not in (1, 2):
            raise ValueError(
                f"segment_softmax(): scores must be [E] or [E, H], got {scores.shape}")
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, scores, index, num_segments):
        out = ctx.y = B.segment_softmax(scores, index, num_segments)
        ctx.index, ctx.n = index, num_segments
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.segment_softmax_backward(ctx.y, g, ctx.index, ctx.n), None, None)


class SegmentMean(Op):
    """Mean of the rows of ``src`` sharing an index (0 for an empty segment);
    backward ``g[index] / count``."""

    signature = _SEGMENT
    faces = ("function", "nn")
    name = "segment_mean"
    saves = ()
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, src, index, num_segments):
        out = B.segment_mean(src, index, num_segments)
        ctx.index, ctx.n = index, num_segments
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.segment_mean_backward(g, ctx.index, ctx.n), None, None)


class SegmentMax(Op):
    """Max of the rows of ``src`` sharing an index, per column (0 for an empty segment).

    Ties: the gradient goes to the FIRST entry (lowest position) holding the
    max.  A NaN in a segment propagates.
    """

    signature = _SEGMENT
    faces = ("function", "nn")
    name = "segment_max"
    saves = ()
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, src, index, num_segments):
        out, ctx._argmax = B.segment_max(src, index, num_segments)
        ctx.index, ctx.e = index, B.shape(src)[0]
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.segment_max_backward(g, ctx._argmax, ctx.index, ctx.e), None, None)


class SegmentMin(Op):
    """Min of the rows of ``src`` sharing an index, per column (0 for an empty segment).

    Ties: the gradient goes to the FIRST entry (lowest position) holding the
    min.  A NaN in a segment propagates.
    """

    signature = _SEGMENT
    faces = ("function", "nn")
    name = "segment_min"
    saves = ()
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, src, index, num_segments):
        out, ctx._argmin = B.segment_min(src, index, num_segments)
        ctx.index, ctx.e = index, B.shape(src)[0]
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.segment_min_backward(g, ctx._argmin, ctx.index, ctx.e), None, None)
