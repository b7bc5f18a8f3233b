"""Fused GATv2 score rule: ``score[e, h] = sum_c att[h, c] * leaky_relu(xl[src[e], h, c]
+ xr[dst[e], h, c] [+ xe[e, h, c]])`` (backend family ``rtx/backend/gatv2.py``).

``edge_index`` reaching the rule is always an ``EdgeIndex`` (checked once); the
backward recomputes the per-edge sums from the saved inputs, so nothing
``[E, H, C]``-sized is kept between the passes.
"""

from __future__ import annotations

from .base import Op


class Gatv2Scores(Op):
    """Forward: one pass over the edges.  Backward: ``grad_xr`` and ``grad_att``
    over the target grouping, ``grad_xl`` over the source grouping."""

    name = "gatv2_scores"
    saves = (0, 1, 2, 3)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, xl, xr, att, xe, edge_index, negative_slope):
        out = B.gatv2_scores(xl, xr, att, edge_index, negative_slope, xe)
        ctx.xl, ctx.xr, ctx.att, ctx.xe = xl, xr, att, xe
        ctx.edge_index, ctx.slope = edge_index, negative_slope
        return out

    @staticmethod
    def backward(ctx, B, g):
        need = tuple(bool(n) for n in ctx.needs_input_grad[:4])
        if ctx.xe is None:
            need = need[:3] + (False,)
        gxl, gxr, gatt, gxe = B.gatv2_scores_backward(g, ctx.xl, ctx.xr, ctx.att, ctx.edge_index,
                                                      ctx.slope, ctx.xe, need=need)
        return (gxl, gxr, gatt, gxe, None, None)
