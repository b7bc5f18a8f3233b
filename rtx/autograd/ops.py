"""Differentiable ops: each forward sits next to its backward rule.

``forward(ctx, B, *inputs, **attrs)`` computes on the inner backend ``B``'s
primitives and may save state on ``ctx``; ``backward(ctx, B, g)`` returns one
gradient (or ``None``) per positional input.  On the untracked path ``ctx`` is
a sink that stores nothing.  Gradients are reduced back to each input's shape
(``unbroadcast``) explicitly, never left to luck.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

OPS: dict[str, type[Op]] = {}


def _is_prim(x: Any) -> bool:
    return not isinstance(x, (int, float, bool, np.generic))


def unbroadcast(B: Any, g: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``g`` over the dims along which an input of ``shape`` was broadcast."""
    gshape = tuple(B.shape(g))
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    dims = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and gshape[i + lead] != 1
    )
    if dims:
        g = B.sum(g, dims, keepdim=True)
    return B.reshape(g, shape)


def _shape(B: Any, x: Any) -> tuple[int, ...] | None:
    return tuple(B.shape(x)) if _is_prim(x) else None


class Op:
    """Base of every recorded op.  ``name`` is the registry key."""

    name = "op"
    differentiable = True

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.__dict__.get("name"):
            OPS[cls.name] = cls

    @staticmethod
    def forward(ctx: Any, B: Any, *args: Any, **attrs: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Any, B: Any, g: Any) -> tuple[Any, ...]:
        raise NotImplementedError


# --------------------------------------------------------------- arithmetic
class Add(Op):
    name = "add"

    @staticmethod
    def forward(ctx, B, a, b):
        ctx.sa, ctx.sb = _shape(B, a), _shape(B, b)
        return B.add(a, b)

    @staticmethod
    def backward(ctx, B, g):
        return (
            unbroadcast(B, g, ctx.sa) if ctx.sa is not None else None,
            unbroadcast(B, g, ctx.sb) if ctx.sb is not None else None,
        )


class Sub(Op):
    name = "sub"

    @staticmethod
    def forward(ctx, B, a, b):
        ctx.sa, ctx.sb = _shape(B, a), _shape(B, b)
        return B.sub(a, b)

    @staticmethod
    def backward(ctx, B, g):
        return (
            unbroadcast(B, g, ctx.sa) if ctx.sa is not None else None,
            unbroadcast(B, B.neg(g), ctx.sb) if ctx.sb is not None else None,
        )


class Mul(Op):
    name = "mul"

    @staticmethod
    def forward(ctx, B, a, b):
        ctx.a, ctx.b = a, b
        return B.mul(a, b)

    @staticmethod
    def backward(ctx, B, g):
        a, b = ctx.a, ctx.b
        return (
            unbroadcast(B, B.mul(g, b), tuple(B.shape(a))) if _is_prim(a) else None,
            unbroadcast(B, B.mul(g, a), tuple(B.shape(b))) if _is_prim(b) else None,
        )


class Div(Op):
    name = "div"

    @staticmethod
    def forward(ctx, B, a, b):
        ctx.a, ctx.b = a, b
        return B.div(a, b)

    @staticmethod
    def backward(ctx, B, g):
        a, b = ctx.a, ctx.b
        ga = gb = None
        if _is_prim(a):
            ga = unbroadcast(B, B.div(g, b), tuple(B.shape(a)))
        if _is_prim(b):
            # d(a/b)/db = -a / b^2
            gb = unbroadcast(B, B.neg(B.div(B.mul(g, a), B.mul(b, b))), tuple(B.shape(b)))
        return ga, gb


class Pow(Op):
    name = "pow"

    @staticmethod
    def forward(ctx, B, a, b):
        out = B.pow(a, b)
        ctx.a, ctx.b, ctx.out = a, b, out
        return out

    @staticmethod
    def backward(ctx, B, g):
        a, b, out = ctx.a, ctx.b, ctx.out
        ga = gb = None
        if _is_prim(a):
            if _is_prim(b):
                da = B.mul(b, B.pow(a, B.sub(b, 1)))
            else:
                da = B.mul(B.pow(a, b - 1), b) if b != 0 else B.mul(a, 0)
            ga = unbroadcast(B, B.mul(g, da), tuple(B.shape(a)))
        if _is_prim(b):
            # d(a^b)/db = a^b log a, taken as 0 where a == 0 (PyTorch's convention)
            loga = B.log(B.where(B.eq(a, 0), 1, a)) if _is_prim(a) else math.log(a)
            gb = unbroadcast(B, B.mul(g, B.mul(out, loga)), tuple(B.shape(b)))
        return ga, gb


class Maximum(Op):
    name = "maximum"
    _pick = "gt"

    @classmethod
    def forward(cls, ctx, B, a, b):
        ctx.a, ctx.b = a, b
        return getattr(B, cls.name)(a, b)

    @classmethod
    def backward(cls, ctx, B, g):
        # Ties split the gradient equally (PyTorch's rule for maximum/minimum).
        a, b = ctx.a, ctx.b
        win = getattr(B, cls._pick)(a, b)
        tie = B.eq(a, b)
        half = B.mul(g, 0.5)
        zero = B.mul(g, 0)
        ga = B.where(win, g, B.where(tie, half, zero))
        gb = B.where(win, zero, B.where(tie, half, g))
        return (
            unbroadcast(B, ga, tuple(B.shape(a))) if _is_prim(a) else None,
            unbroadcast(B, gb, tuple(B.shape(b))) if _is_prim(b) else None,
        )


class Minimum(Maximum):
    name = "minimum"
    _pick = "lt"


# -------------------------------------------------------------------- unary
class Neg(Op):
    name = "neg"

    @staticmethod
    def forward(ctx, B, a):
        return B.neg(a)

    @staticmethod
    def backward(ctx, B, g):
        return (B.neg(g),)


class Exp(Op):
    name = "exp"

    @staticmethod
    def forward(ctx, B, a):
        ctx.out = B.exp(a)
        return ctx.out

    @staticmethod
    def backward(ctx, B, g):
        return (B.mul(g, ctx.out),)


class Log(Op):
    name = "log"

    @staticmethod
    def forward(ctx, B, a):
        ctx.a = a
        return B.log(a)

    @staticmethod
    def backward(ctx, B, g):
        return (B.div(g, ctx.a),)


class Sqrt(Op):
    name = "sqrt"

    @staticmethod
    def forward(ctx, B, a):
        ctx.out = B.sqrt(a)
        return ctx.out

    @staticmethod
    def backward(ctx, B, g):
        return (B.div(g, B.mul(ctx.out, 2)),)


class Abs(Op):
    name = "abs"

    @staticmethod
    def forward(ctx, B, a):
        ctx.a = a
        return B.abs(a)

    @staticmethod
    def backward(ctx, B, g):
        # sign(0) = 0: |x| has zero gradient at 0, never 0/0 = NaN.
        return (B.mul(g, B.sign(ctx.a)),)


class Sign(Op):
    name = "sign"

    @staticmethod
    def forward(ctx, B, a):
        ctx.a = a
        return B.sign(a)

    @staticmethod
    def backward(ctx, B, g):
        return (B.mul(g, 0),)


class Relu(Op):
    name = "relu"

    @staticmethod
    def forward(ctx, B, a):
        ctx.a = a
        return B.relu(a)

    @staticmethod
    def backward(ctx, B, g):
        return (B.mul(g, B.cast(B.gt(ctx.a, 0), B.dtype(g))),)


class LeakyRelu(Op):
    name = "leaky_relu"

    @staticmethod
    def forward(ctx, B, a, negative_slope=0.01):
        ctx.a, ctx.slope = a, negative_slope
        return B.leaky_relu(a, negative_slope)

    @staticmethod
    def backward(ctx, B, g):
        return (B.where(B.gt(ctx.a, 0), g, B.mul(g, ctx.slope)),)


class Elu(Op):
    name = "elu"

    @staticmethod
    def forward(ctx, B, a, alpha=1.0):
        out = B.elu(a, alpha)
        ctx.a, ctx.out, ctx.alpha = a, out, alpha
        return out

    @staticmethod
    def backward(ctx, B, g):
        # x > 0: 1; else alpha * exp(x) = out + alpha
        return (B.where(B.gt(ctx.a, 0), g, B.mul(g, B.add(ctx.out, ctx.alpha))),)


class Sigmoid(Op):
    name = "sigmoid"

    @staticmethod
    def forward(ctx, B, a):
        ctx.out = B.sigmoid(a)
        return ctx.out

    @staticmethod
    def backward(ctx, B, g):
        s = ctx.out
        return (B.mul(g, B.mul(s, B.sub(1, s))),)


class Tanh(Op):
    name = "tanh"

    @staticmethod
    def forward(ctx, B, a):
        ctx.out = B.tanh(a)
        return ctx.out

    @staticmethod
    def backward(ctx, B, g):
        t = ctx.out
        return (B.mul(g, B.sub(1, B.mul(t, t))),)


class Softmax(Op):
    name = "softmax"

    @staticmethod
    def forward(ctx, B, a, dim):
        ctx.out, ctx.dim = B.softmax(a, dim), dim
        return ctx.out

    @staticmethod
    def backward(ctx, B, g):
        # dx = y * (g - sum(g * y, dim, keepdim)), the row sum broadcast explicitly.
        y = ctx.out
        shape = tuple(B.shape(y))
        s = B.broadcast_to(B.sum(B.mul(g, y), ctx.dim, keepdim=True), shape)
        return (B.mul(y, B.sub(g, s)),)


class LogSoftmax(Op):
    name = "log_softmax"

    @staticmethod
    def forward(ctx, B, a, dim):
        ctx.out, ctx.dim = B.log_softmax(a, dim), dim
        return ctx.out

    @staticmethod
    def backward(ctx, B, g):
        # dx = g - softmax(x) * sum(g, dim, keepdim), the row sum broadcast explicitly.
        shape = tuple(B.shape(ctx.out))
        s = B.broadcast_to(B.sum(g, ctx.dim, keepdim=True), shape)
        return (B.sub(g, B.mul(B.exp(ctx.out), s)),)


class Where(Op):
    name = "where"

    @staticmethod
    def forward(ctx, B, cond, a, b):
        ctx.cond, ctx.sa, ctx.sb = cond, _shape(B, a), _shape(B, b)
        return B.where(cond, a, b)

    @staticmethod
    def backward(ctx, B, g):
        zero = B.mul(g, 0)
        return (
            None,
            unbroadcast(B, B.where(ctx.cond, g, zero), ctx.sa) if ctx.sa is not None else None,
            unbroadcast(B, B.where(ctx.cond, zero, g), ctx.sb) if ctx.sb is not None else None,
        )


class Cast(Op):
    name = "cast"

    @staticmethod
    def forward(ctx, B, a, dtype):
        ctx.dtype = B.dtype(a)
        return B.cast(a, dtype)

    @staticmethod
    def backward(ctx, B, g):
        return (B.cast(g, ctx.dtype),)


class Copy(Op):
    """A copy keeps the tensor's identity on the tape: its gradient flows straight back."""

    name = "copy"

    @staticmethod
    def forward(ctx, B, a):
        return B.copy(a)

    @staticmethod
    def backward(ctx, B, g):
        return (g,)


# --------------------------------------------------------------- reductions
def _expand_back(B: Any, g: Any, shape: tuple[int, ...], dim: Any, keepdim: bool) -> Any:
    """Broadcast a reduced gradient back to the input's ``shape``."""
    if not keepdim:
        nd = len(shape)
        dims = range(nd) if dim is None else (dim,) if isinstance(dim, int) else dim
        dims = {d % max(nd, 1) for d in dims}
        g = B.reshape(g, tuple(1 if i in dims else s for i, s in enumerate(shape)))
    return B.broadcast_to(g, shape)


class Sum(Op):
    name = "sum"

    @staticmethod
    def forward(ctx, B, a, dim=None, keepdim=False):
        ctx.shape, ctx.dim, ctx.keepdim = tuple(B.shape(a)), dim, keepdim
        return B.sum(a, dim, keepdim)

    @staticmethod
    def backward(ctx, B, g):
        return (_expand_back(B, g, ctx.shape, ctx.dim, ctx.keepdim),)


class Mean(Op):
    name = "mean"

    @staticmethod
    def forward(ctx, B, a, dim=None, keepdim=False):
        shape = tuple(B.shape(a))
        ctx.shape, ctx.dim, ctx.keepdim = shape, dim, keepdim
        if dim is None:
            ctx.count = math.prod(shape)
        else:
            dims = (dim,) if isinstance(dim, int) else dim
            ctx.count = math.prod(shape[d] for d in dims)
        return B.mean(a, dim, keepdim)

    @staticmethod
    def backward(ctx, B, g):
        return (B.div(_expand_back(B, g, ctx.shape, ctx.dim, ctx.keepdim), ctx.count),)


class Max(Op):
    name = "max"
    _reduce = "max"

    @classmethod
    def forward(cls, ctx, B, a, dim=None, keepdim=False):
        out = getattr(B, cls._reduce)(a, dim, keepdim)
        ctx.a, ctx.out, ctx.dim, ctx.keepdim = a, out, dim, keepdim
        return out

    @classmethod
    def backward(cls, ctx, B, g):
        # The gradient is shared equally by the elements that attain the extremum.
        shape = tuple(B.shape(ctx.a))
        m = _expand_back(B, ctx.out, shape, ctx.dim, ctx.keepdim)
        hit = B.cast(B.eq(ctx.a, m), B.dtype(g))
        count = B.broadcast_to(B.sum(hit, ctx.dim, keepdim=True), shape)
        gfull = _expand_back(B, g, shape, ctx.dim, ctx.keepdim)
        return (B.mul(hit, B.div(gfull, count)),)


class Min(Max):
    name = "min"
    _reduce = "min"


# ------------------------------------------------------------------- linalg
class MatMul(Op):
    """matmul of operands with >= 2 dims (batch dims broadcast)."""

    name = "matmul"

    @staticmethod
    def forward(ctx, B, a, b):
        ctx.a, ctx.b = a, b
        return B.matmul(a, b)

    @staticmethod
    def backward(ctx, B, g):
        a, b = ctx.a, ctx.b
        sa, sb = tuple(B.shape(a)), tuple(B.shape(b))
        ta = tuple(range(len(sa) - 2)) + (len(sa) - 1, len(sa) - 2)
        tb = tuple(range(len(sb) - 2)) + (len(sb) - 1, len(sb) - 2)
        ga = unbroadcast(B, B.matmul(g, B.permute(b, tb)), sa)
        gb = unbroadcast(B, B.matmul(B.permute(a, ta), g), sb)
        return ga, gb


# -------------------------------------------------------------------- shape
class Reshape(Op):
    name = "reshape"

    @staticmethod
    def forward(ctx, B, a, shape):
        ctx.shape = tuple(B.shape(a))
        return B.reshape(a, shape)

    @staticmethod
    def backward(ctx, B, g):
        return (B.reshape(g, ctx.shape),)


class Permute(Op):
    name = "permute"

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
    name = "broadcast_to"

    @staticmethod
    def forward(ctx, B, a, shape):
        ctx.shape = tuple(B.shape(a))
        return B.broadcast_to(a, shape)

    @staticmethod
    def backward(ctx, B, g):
        return (unbroadcast(B, g, ctx.shape),)


class GetItem(Op):
    name = "getitem"

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

    @staticmethod
    def forward(ctx, B, *xs, dim=0):
        nd = len(B.shape(xs[0]))
        ctx.dim = dim % nd
        ctx.sizes = [B.shape(x)[ctx.dim] for x in xs]
        return B.concat(xs, ctx.dim)

    @staticmethod
    def backward(ctx, B, g):
        nd = len(B.shape(g))
        out, start = [], 0
        for n in ctx.sizes:
            key = (slice(None),) * ctx.dim + (slice(start, start + n),) + (Ellipsis,)
            out.append(B.getitem(g, key) if nd else g)
            start += n
        return tuple(out)


class Stack(Op):
    name = "stack"

    @staticmethod
    def forward(ctx, B, *xs, dim=0):
        nd = len(B.shape(xs[0])) + 1
        ctx.dim, ctx.n = dim % nd, len(xs)
        return B.stack(xs, ctx.dim)

    @staticmethod
    def backward(ctx, B, g):
        return tuple(
            B.getitem(g, (slice(None),) * ctx.dim + (i,)) for i in range(ctx.n)
        )


# -------------------------------------------------------------------- index
class IndexSelect(Op):
    """Row gather; its backward is ``index_add`` (the adjoint)."""

    name = "index_select"

    @staticmethod
    def forward(ctx, B, x, indices):
        out = B.index_select(x, indices)
        ctx.indices, ctx.n = indices, B.shape(x)[0]
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.index_add(g, ctx.indices, ctx.n),)


class IndexAdd(Op):
    """Row scatter-add; its backward is ``index_select`` (the adjoint)."""

    name = "index_add"

    @staticmethod
    def forward(ctx, B, src, indices, num_rows):
        out = B.index_add(src, indices, num_rows)
        ctx.indices = indices
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.index_select(g, ctx.indices),)
