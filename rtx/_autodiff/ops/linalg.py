"""Op rules, linalg family: matmul.

Each rule's forward and backward side by side (see ``base.py``)."""

from __future__ import annotations

from .base import Op, unbroadcast


# ------------------------------------------------------------------- linalg
class MatMul(Op):
    """matmul of operands with >= 2 dims (batch dims broadcast)."""

    name = "matmul"
    saves = (0, 1)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, b):
        ctx.a, ctx.b = a, b
        return B.matmul(a, b)

    @staticmethod
    def backward(ctx, B, g):
        a, b = ctx.a, ctx.b
        na, nb = ctx.needs_input_grad
        ga = gb = None
        if na:
            sb = tuple(B.shape(b))
            nd = len(sb)
            tb = tuple(range(nd - 2)) + (nd - 1, nd - 2)
            ga = unbroadcast(B, B.matmul(g, B.permute(b, tb)), tuple(B.shape(a)))
        if nb:
            sa = tuple(B.shape(a))
            nd = len(sa)
            ta = tuple(range(nd - 2)) + (nd - 1, nd - 2)
            gb = unbroadcast(B, B.matmul(B.permute(a, ta), g), tuple(B.shape(b)))
        return ga, gb
