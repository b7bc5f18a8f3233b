"""Op rules, shape family: reshape, permute, broadcast_to, getitem, concat, stack.

Each rule's forward and backward side by side (see ``base.py``)."""

from __future__ import annotations

from .base import Op, unbroadcast


# -------------------------------------------------------------------- shape
class Reshape(Op):
    name = "reshape"
    saves = ()
    view = True

    @staticmethod
    def forward(ctx, B, a, shape):
        ctx.shape = tuple(B.shape(a))
        return B.reshape(a, shape)

    @staticmethod
    def backward(ctx, B, g):
        return (B.reshape(g, ctx.shape),)


class Permute(Op):
    name = "permute"
    saves = ()
    view = True

    @staticmethod
    def forward(ctx, B, a, dims):
        ctx.dims = dims
        return B.permute(a, dims)

    @staticmethod
    def backward(ctx, B, g):
        inv = [0] * len(ctx.dims)
        for i, d in enumerate(ctx.dims):
            inv[d] = i
        return (B.permute(g, tuple(inv)),)


class BroadcastTo(Op):
    """``Tensor.expand`` / ``broadcast_to``: a view where the backend has views
    (``B.expand``); the backward sums over the broadcast dims."""

    name = "broadcast_to"
    saves = ()
    view = True

    @staticmethod
    def forward(ctx, B, a, shape):
        ctx.shape = tuple(B.shape(a))
        return B.expand(a, shape)

    @staticmethod
    def backward(ctx, B, g):
        return (unbroadcast(B, g, ctx.shape),)


class GetItem(Op):
    """Basic and advanced indexing; repeated indices accumulate in the backward."""

    name = "getitem"
    saves = ()
    fresh_grads = True
    view = True

    @staticmethod
    def forward(ctx, B, a, key):
        ctx.shape, ctx.key = tuple(B.shape(a)), key
        return B.getitem(a, key)

    @staticmethod
    def backward(ctx, B, g):
        return (B.slice_backward(g, ctx.shape, ctx.key),)


class Concat(Op):
    """``concat(*xs, dim=d)``: the gradient is split back along ``dim``."""

    name = "concat"
    saves = ()

    @staticmethod
    def forward(ctx, B, *xs, dim=0):
        d = dim % len(B.shape(xs[0]))
        ctx.dim, ctx.sizes = d, [B.shape(x)[d] for x in xs]
        return B.concat(xs, d)

    @staticmethod
    def backward(ctx, B, g):
        out, start = [], 0
        needs = ctx.needs_input_grad
        for i, n in enumerate(ctx.sizes):
            if needs[i]:
                key = (slice(None),) * ctx.dim + (slice(start, start + n),)
                out.append(B.getitem(g, key))
            else:
                out.append(None)
            start += n
        return tuple(out)


class Stack(Op):
    name = "stack"
    saves = ()

    @staticmethod
    def forward(ctx, B, *xs, dim=0):
        d = dim % (len(B.shape(xs[0])) + 1)
        ctx.dim, ctx.n = d, len(xs)
        return B.stack(xs, d)

    @staticmethod
    def backward(ctx, B, g):
        needs = ctx.needs_input_grad
        pre = (slice(None),) * ctx.dim
        return tuple(B.getitem(g, pre + (i,)) if needs[i] else None for i in range(ctx.n))
