"""Fused message passing rule: ``out[dst[e]] += weight[e] * x[src[e]]``.

``edge_index`` reaching the rule is always an ``EdgeIndex`` (checked once;
the target grouping serves the forward, the source grouping the backward).
"""

from __future__ import annotations

from .base import Op


class MessagePassing(Op):
    """Forward: one pass over the target grouping.  Backward: ``grad_x`` is the
    transpose pass (source grouping), ``grad_weight`` an SDDMM."""

    name = "message_passing"
    saves = (0, 1)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, x, weight, edge_index, num_nodes):
        out = B.message_passing(x, edge_index, num_nodes, weight)
        ctx.x, ctx.weight, ctx.edge_index = x, weight, edge_index
        return out

    @staticmethod
    def backward(ctx, B, g):
        nx, nw = ctx.needs_input_grad[:2]
        gx, gw = B.message_passing_backward(g, ctx.x, ctx.edge_index, ctx.weight,
                                            need_x=nx, need_weight=nw)
        return (gx if nx else None, gw if nw else None, None, None)
