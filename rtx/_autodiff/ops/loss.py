"""Fused loss ops: ``cross_entropy`` (from logits), ``nll_loss`` and
``binary_cross_entropy_with_logits``.

Each is ONE recorded node whose forward computes the per-row losses in one
backend call (``B.cross_entropy_forward``: a stable log-sum-exp per row) and
reduces them, and whose backward is one backend call
(``B.cross_entropy_backward``: ``softmax - onehot``, scaled per row) — never
``log(softmax(x))`` composed of separate nodes.

Inputs (prepared and validated by ``rtx.nn.functional``): ``x`` ``[N, C]``;
``target`` a host int64 array of ``N`` classes in ``[0, C)`` (ignored rows carry
a valid placeholder class); ``w`` ``[N]`` the per-row weights (``weight[target]``,
0 for ignored rows; not differentiated); ``reduction`` in none/sum/mean and
``denom`` the sum of ``w`` (mean divides by it; 0 gives NaN, like PyTorch).
"""

from __future__ import annotations

import math

from .base import Op, unbroadcast


def _reduce(ctx, B, rows, w, reduction, denom):
    rows = B.mul(rows, w)
    if reduction == "none":
        return rows
    s = B.sum(rows)
    if reduction == "sum":
        return s
    return B.mul(s, math.nan) if denom == 0 else B.div(s, denom)


def _row_scale(ctx, B, g):
    """d(output)/d(row loss) times the incoming gradient, per row."""
    if ctx.reduction == "mean":
        if ctx.denom == 0:  # every target ignored: NaN loss, zero gradient (PyTorch)
            return B.mul(ctx.w, 0.0)
        g = B.div(g, ctx.denom)
    return B.mul(ctx.w, g)


class CrossEntropy(Op):
    name = "cross_entropy"
    fresh_grads = True
    saves = (0, 2)  # the logits and the row weights (checked for in-place writes)

    @staticmethod
    def forward(ctx, B, x, target, w, reduction="mean", denom=1.0):
        rows, stats = B.cross_entropy_forward(x, target)
        ctx.x, ctx.stats, ctx.target, ctx.w = x, stats, target, w
        ctx.reduction, ctx.denom = reduction, denom
        return _reduce(ctx, B, rows, w, reduction, denom)

    @staticmethod
    def backward(ctx, B, g):
        gx = B.cross_entropy_backward(ctx.x, ctx.stats, ctx.target, _row_scale(ctx, B, g))
        return gx, None, None


class NllLoss(Op):
    name = "nll_loss"
    saves = (2,)
    fresh_grads = True
    saves = (2,)  # the row weights

    @staticmethod
    def forward(ctx, B, x, target, w, reduction="mean", denom=1.0):
        rows = B.nll_forward(x, target)
        ctx.shape, ctx.target, ctx.w = tuple(B.shape(x)), target, w
        ctx.reduction, ctx.denom = reduction, denom
        return _reduce(ctx, B, rows, w, reduction, denom)

    @staticmethod
    def backward(ctx, B, g):
        return B.nll_backward(_row_scale(ctx, B, g), ctx.target, ctx.shape), None, None


class BinaryCrossEntropyWithLogits(Op):
    """``binary_cross_entropy_with_logits``: ONE node, the elementwise loss in one
    stable backend call (``B.bce_with_logits_forward``: ``max(x, 0) - x y +
    log1p(exp(-|x|))``, or the ``pos_weight`` form), weighted and reduced; the
    backward one call too (``sigmoid(x) - y`` and, when asked, the target's and
    ``pos_weight``'s derivatives) -- never ``log(sigmoid(x))`` composed of nodes.

    Inputs (prepared and validated by ``rtx.nn.functional``): ``x`` and ``y`` of
    one shape and float dtype; ``w`` (``weight``) and ``pw`` (``pos_weight``) None
    or of that dtype and broadcastable to ``x``'s shape; every input differentiable,
    as in PyTorch.  ``reduction`` in none/sum/mean (the mean of nothing is NaN)."""

    name = "binary_cross_entropy_with_logits"
    fresh_grads = True
    saves = (0, 1, 2, 3)  # the logits, targets, weight and pos_weight

    @staticmethod
    def forward(ctx, B, x, y, w, pw, reduction="mean"):
        shape = tuple(B.shape(x))
        pwf = None if pw is None else B.broadcast_to(pw, shape)
        rows = B.bce_with_logits_forward(x, y, pwf)
        ctx.x, ctx.y, ctx.w, ctx.pw, ctx.pwf, ctx.rows = x, y, w, pw, pwf, rows
        ctx.reduction, ctx.shape = reduction, shape
        out = rows if w is None else B.mul(rows, w)
        if reduction == "none":
            return out
        s = B.sum(out)
        if reduction == "sum":
            return s
        n = math.prod(shape)
        return B.div(s, n) if n else B.mul(s, math.nan)

    @staticmethod
    def backward(ctx, B, g):
        shape, w, pw = ctx.shape, ctx.w, ctx.pw
        if ctx.reduction != "none":
            n = math.prod(shape)
            if ctx.reduction == "mean" and n:
                g = B.div(g, n)
            g = B.broadcast_to(g, shape)
        gl = g if w is None else B.mul(g, w)
        need = ctx.needs_input_grad
        gx, gy, gp = B.bce_with_logits_backward(ctx.x, ctx.y, ctx.pwf, gl, need[1],
                                                pw is not None and need[3])
        gw = None
        if w is not None and need[2]:
            gw = unbroadcast(B, B.mul(ctx.rows, g), tuple(B.shape(w)))
        if gp is not None:
            gp = unbroadcast(B, gp, tuple(B.shape(pw)))
        return gx, gy, gw, gp
