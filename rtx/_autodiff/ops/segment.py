"""Segment op rules: mean, max, softmax (``segment_sum`` is ``index_add``).

``index`` reaching these rules is always an ``IndexPlan`` (the public faces
wrap raw indices once), so the backward pass reuses the forward's checked
indices and CSR grouping.  (``segment_max``'s argmax positions are kept as
``ctx._argmax``: the backward kernel scatters by them, after a check.)
"""

from __future__ import annotations

from .base import Op


class SegmentSoftmax(Op):
    """Softmax over the entries sharing an index; backward ``y * (g - segsum(g * y))``."""

    name = "segment_softmax"
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
    """Mean over each segment (0 when empty); backward ``g[index] / count``."""

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
    """Max over each segment (0 when empty); the gradient goes to the first
    entry holding the max."""

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
