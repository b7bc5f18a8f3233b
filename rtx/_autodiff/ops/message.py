"""Fused message passing rule: ``out[dst[e]] += weight[e] * x[src[e]]``.

``edge_index`` reaching the rule is always an ``EdgeIndex`` (checked once;
the target grouping serves the forward, the source grouping the backward).
"""

from __future__ import annotations

from .base import Op


class MessagePassing(Op):
    """Fused ``out[dst[e]] += weight[e] * x[src[e]]`` over ``num_nodes`` output rows.

    ``edge_index``: int ``[2, E]`` (row 0 source, row 1 target) or an
    ``EdgeIndex``; ``x``: ``[N_src, F]`` with ``weight`` ``[E]``, or ``[N_src, H,
    C]`` with ``weight`` ``[E, H]``; no ``weight`` sums the messages.  Never
    materialises the ``[E, ...]`` messages; the backward pass is a transpose
    message pass (``grad_x``, over the source grouping) and an SDDMM
    (``grad_weight``).
    """

    signature = ("x: Data, edge_index: EdgeIndex(src=x, dst=num_nodes), num_nodes: Rows, "
                 "weight: OptTensor = None")
    faces = ("function", "nn")
    name = "message_passing"
    saves = (0, 3)
    fresh_grads = True

    @staticmethod
    def check(x, edge_index, num_nodes, weight):
        op = "message_passing"
        if x.ndim not in (2, 3):
            raise ValueError(f"{op}(): x must be [N, F] or [N, H, C], got shape {x.shape}")
        if weight is None:
            return
        if weight.dtype != x.dtype:
            raise TypeError(f"{op}(): weight dtype {weight.dtype} != x dtype {x.dtype}")
        ws = weight.shape
        if x.ndim == 2 and len(ws) != 1:
            raise ValueError(f"{op}(): with x [N, F] the weight must be [E], got {ws}")
        if x.ndim == 3 and (len(ws) != 2 or ws[1] != x.shape[1]):
            raise ValueError(f"{op}(): with x [N, H, C] = {x.shape} the weight must be "
                             f"[E, {x.shape[1]}], got {ws}")
        if ws[0] != edge_index.num_edges:
            raise ValueError(f"{op}(): weight has {ws[0]} rows but there are "
                             f"{edge_index.num_edges} edges")

    @staticmethod
    def forward(ctx, B, x, edge_index, num_nodes, weight):
        out = B.message_passing(x, edge_index, num_nodes, weight)
        ctx.x, ctx.weight, ctx.edge_index = x, weight, edge_index
        return out

    @staticmethod
    def backward(ctx, B, g):
        nx, _, _, nw = ctx.needs_input_grad
        gx, gw = B.message_passing_backward(g, ctx.x, ctx.edge_index, ctx.weight,
                                            need_x=nx, need_weight=nw)
        return (gx if nx else None, None, None, gw if nw else None)
