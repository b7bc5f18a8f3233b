"""Differentiable ops: each forward sits next to its backward rule.

``forward(ctx, B, *inputs, **attrs)`` computes on the inner backend ``B``'s
primitives and may save state on ``ctx`` (primitives, shapes and attributes,
never ``Tensor`` s); ``backward(ctx, B, g)`` returns one gradient (or ``None``)
per positional input.  ``ctx.needs_input_grad[i]`` says whether input ``i``
needs a gradient, so a rule computes only what is used.  On the untracked path
``ctx`` is a sink that stores nothing: a forward must never read back what it
saved (write ``out = ctx.out = ...; return out``).

Gradients are reduced back to each input's shape (``unbroadcast``) explicitly,
never left to luck.  ``fresh_grads = True`` declares that a rule returns only
newly computed buffers (no alias of ``g`` or of each other); rules that pass
``g`` (or a view of it) through keep the default ``False`` and the engine
copies such a buffer before it becomes a leaf's ``.grad`` when ``g`` was
shared or went to several inputs; ``None`` (custom ``Function`` s) means
anything may be returned, even saved state, so the engine always copies.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

OPS: dict[str, type[Op]] = {}

_SCALARS = (int, float, bool, np.generic)


def _is_prim(x: Any) -> bool:
    return not isinstance(x, _SCALARS)


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


def _zeros_like(B: Any, g: Any) -> Any:
    return B.zeros(tuple(B.shape(g)), B.dtype(g))


class Op:
    """Base of every recorded op.  ``name`` is the registry key."""

    name = "op"
    differentiable = True
    fresh_grads = False
    view = False  # True: the result may alias the first input's buffer (a view)
    # Which buffers the forward saves on ctx (input positions; -1 = the output), for
    # the version-counter check; None = find out by inspecting ctx (slower).
    # tests/test_version_counter.py checks each declaration against the inspection.
    saves: tuple[int, ...] | None = None

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
    saves = ()

    @staticmethod
    def forward(ctx, B, a, b):
        ctx.sa, ctx.sb = _shape(B, a), _shape(B, b)
        return B.add(a, b)

    @staticmethod
    def backward(ctx, B, g):
        na, nb = ctx.needs_input_grad
        return (
            unbroadcast(B, g, ctx.sa) if na else None,
            unbroadcast(B, g, ctx.sb) if nb else None,
        )


class Sub(Op):
    name = "sub"
    saves = ()

    @staticmethod
    def forward(ctx, B, a, b):
        ctx.sa, ctx.sb = _shape(B, a), _shape(B, b)
        return B.sub(a, b)

    @staticmethod
    def backward(ctx, B, g):
        na, nb = ctx.needs_input_grad
        return (
            unbroadcast(B, g, ctx.sa) if na else None,
            unbroadcast(B, B.neg(g), ctx.sb) if nb else None,
        )


class Mul(Op):
    name = "mul"
    saves = (0, 1)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, b):
        ctx.a, ctx.b = a, b
        return B.mul(a, b)

    @staticmethod
    def backward(ctx, B, g):
        a, b = ctx.a, ctx.b
        na, nb = ctx.needs_input_grad
        return (
            unbroadcast(B, B.mul(g, b), tuple(B.shape(a))) if na else None,
            unbroadcast(B, B.mul(g, a), tuple(B.shape(b))) if nb else None,
        )


class Div(Op):
    name = "div"
    saves = (1, -1)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, b):
        out = B.div(a, b)
        ctx.sa, ctx.b, ctx.out = _shape(B, a), b, out
        return out

    @staticmethod
    def backward(ctx, B, g):
        na, nb = ctx.needs_input_grad
        q = B.div(g, ctx.b)
        # d(a/b)/db = -a / b^2 = -(a/b) / b
        gb = unbroadcast(B, B.neg(B.mul(q, ctx.out)), tuple(B.shape(ctx.b))) if nb else None
        ga = unbroadcast(B, q, ctx.sa) if na else None
        return ga, gb


class Pow(Op):
    name = "pow"
    saves = (0, 1, -1)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, b):
        out = B.pow(a, b)
        ctx.a, ctx.b, ctx.out = a, b, out
        return out

    @staticmethod
    def backward(ctx, B, g):
        a, b, out = ctx.a, ctx.b, ctx.out
        na, nb = ctx.needs_input_grad
        ga = gb = None
        if na:
            # PyTorch's rule: 0 where the exponent is 0 (so 0**0 gives 0, not 0 * inf)
            if _is_prim(b):
                da = B.where(B.eq(b, 0), 0, B.mul(b, B.pow(a, B.sub(b, 1))))
            elif b == 0:
                da = _zeros_like(B, a)
            else:
                da = B.mul(B.pow(a, b - 1), b)
            ga = unbroadcast(B, B.mul(g, da), tuple(B.shape(a)))
        if nb:
            # d(a^b)/db = a^b log a, taken as 0 where a == 0 and b >= 0 (PyTorch's rule;
            # 0 ** negative keeps inf * -inf = -inf as PyTorch does)
            # (b needs a gradient, so it is a primitive here)
            if _is_prim(a):
                zero = B.eq(a, 0)
                gb = B.mul(g, B.mul(out, B.log(B.where(zero, 1, a))))  # no log(0) warning
                gb = B.where(zero, B.where(B.lt(b, 0), B.mul(g, -math.inf), 0), gb)
            else:
                loga = math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan)
                gb = B.mul(g, B.mul(out, loga))
                if a == 0:
                    gb = B.where(B.ge(b, 0), 0, gb)
            gb = unbroadcast(B, gb, tuple(B.shape(b)))
        return ga, gb


class Maximum(Op):
    name = "maximum"
    saves = (0, 1)
    fresh_grads = True
    _a_loses, _b_loses = "lt", "gt"

    @classmethod
    def forward(cls, ctx, B, a, b):
        ctx.a, ctx.b = a, b
        return getattr(B, cls.name)(a, b)

    @classmethod
    def backward(cls, ctx, B, g):
        # PyTorch's rule: ties split the gradient equally; an input gets nothing
        # only where it strictly loses, so where either is NaN both get g.
        a, b = ctx.a, ctx.b
        na, nb = ctx.needs_input_grad
        gs = B.where(B.eq(a, b), B.mul(g, 0.5), g)
        ga = gb = None
        if na:
            ga = unbroadcast(B, B.where(getattr(B, cls._a_loses)(a, b), 0, gs),
                             tuple(B.shape(a)))
        if nb:
            gb = unbroadcast(B, B.where(getattr(B, cls._b_loses)(a, b), 0, gs),
                             tuple(B.shape(b)))
        return ga, gb


class Minimum(Maximum):
    name = "minimum"
    _a_loses, _b_loses = "gt", "lt"


# -------------------------------------------------------------------- unary
class Neg(Op):
    name = "neg"
    saves = ()
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        return B.neg(a)

    @staticmethod
    def backward(ctx, B, g):
        return (B.neg(g),)


class Exp(Op):
    name = "exp"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        out = ctx.out = B.exp(a)
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.mul(g, ctx.out),)


class Log(Op):
    name = "log"
    saves = (0,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        ctx.a = a
        return B.log(a)

    @staticmethod
    def backward(ctx, B, g):
        return (B.div(g, ctx.a),)


class Sqrt(Op):
    name = "sqrt"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        out = ctx.out = B.sqrt(a)
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.div(B.mul(g, 0.5), ctx.out),)


class Abs(Op):
    name = "abs"
    saves = (0,)
    fresh_grads = True

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
    saves = ()
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        return B.sign(a)

    @staticmethod
    def backward(ctx, B, g):
        return (_zeros_like(B, g),)


class Relu(Op):
    name = "relu"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        out = ctx.out = B.relu(a)
        return out

    @staticmethod
    def backward(ctx, B, g):
        # PyTorch's threshold rule: 0 where out <= 0, else g (a NaN input passes g)
        return (B.where(B.le(ctx.out, 0), 0, g),)


class LeakyRelu(Op):
    name = "leaky_relu"
    saves = (0,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, negative_slope=0.01):
        ctx.a, ctx.slope = a, negative_slope
        return B.leaky_relu(a, negative_slope)

    @staticmethod
    def backward(ctx, B, g):
        return (B.where(B.gt(ctx.a, 0), g, B.mul(g, ctx.slope)),)


class Elu(Op):
    name = "elu"
    saves = (0, -1)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, alpha=1.0):
        out = B.elu(a, alpha)
        ctx.a, ctx.out, ctx.alpha = a, out, alpha
        return out

    @staticmethod
    def backward(ctx, B, g):
        # x <= 0: alpha * exp(x) = out + alpha; else 1 (so a NaN input passes g, as in
        # PyTorch's elu_backward)
        return (B.where(B.le(ctx.a, 0), B.mul(g, B.add(ctx.out, ctx.alpha)), g),)


class Sigmoid(Op):
    name = "sigmoid"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        out = ctx.out = B.sigmoid(a)
        return out

    @staticmethod
    def backward(ctx, B, g):
        s = ctx.out
        return (B.mul(B.mul(g, s), B.sub(1, s)),)


class Tanh(Op):
    name = "tanh"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        out = ctx.out = B.tanh(a)
        return out

    @staticmethod
    def backward(ctx, B, g):
        t = ctx.out
        return (B.mul(g, B.sub(1, B.mul(t, t))),)


class Softmax(Op):
    name = "softmax"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, dim):
        out = ctx.out = B.softmax(a, dim)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, B, g):
        # dx = y * (g - sum(g * y, dim, keepdim)), the row sum broadcast explicitly.
        y = ctx.out
        shape = tuple(B.shape(y))
        s = B.broadcast_to(B.sum(B.mul(g, y), ctx.dim, keepdim=True), shape)
        return (B.mul(y, B.sub(g, s)),)


class LogSoftmax(Op):
    name = "log_softmax"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, dim):
        out = ctx.out = B.log_softmax(a, dim)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, B, g):
        # dx = g - softmax(x) * sum(g, dim, keepdim), the row sum broadcast explicitly.
        shape = tuple(B.shape(ctx.out))
        s = B.broadcast_to(B.sum(g, ctx.dim, keepdim=True), shape)
        return (B.sub(g, B.mul(B.exp(ctx.out), s)),)


class Where(Op):
    """``where(cond, a, b)``; ``cond`` is a bool primitive (never differentiated)."""

    name = "where"
    saves = (0,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, cond, a, b):
        ctx.cond, ctx.sa, ctx.sb = cond, _shape(B, a), _shape(B, b)
        return B.where(cond, a, b)

    @staticmethod
    def backward(ctx, B, g):
        _, na, nb = ctx.needs_input_grad
        cond = ctx.cond
        return (
            None,
            unbroadcast(B, B.where(cond, g, 0), ctx.sa) if na else None,
            unbroadcast(B, B.where(cond, 0, g), ctx.sb) if nb else None,
        )


class Cast(Op):
    name = "cast"
    saves = ()

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
    saves = ()

    @staticmethod
    def forward(ctx, B, a):
        return B.copy(a)

    @staticmethod
    def backward(ctx, B, g):
        return (g,)


# --------------------------------------------------------------- reductions
def _keepdim_shape(shape: tuple[int, ...], dim: Any) -> tuple[int, ...]:
    """``shape`` with the reduced dims kept as size 1."""
    nd = len(shape)
    dims = range(nd) if dim is None else (dim,) if isinstance(dim, int) else dim
    dims = {d % max(nd, 1) for d in dims}
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def _expand_back(B: Any, g: Any, shape: tuple[int, ...], dim: Any, keepdim: bool) -> Any:
    """Broadcast a reduced gradient back to the input's ``shape``."""
    if not keepdim:
        g = B.reshape(g, _keepdim_shape(shape, dim))
    return B.broadcast_to(g, shape)


class Sum(Op):
    name = "sum"
    saves = ()

    @staticmethod
    def forward(ctx, B, a, dim=None, keepdim=False):
        ctx.shape, ctx.dim, ctx.keepdim = tuple(B.shape(a)), dim, keepdim
        return B.sum(a, dim, keepdim)

    @staticmethod
    def backward(ctx, B, g):
        return (_expand_back(B, g, ctx.shape, ctx.dim, ctx.keepdim),)


class Mean(Op):
    name = "mean"
    saves = ()
    fresh_grads = True

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
    """``amax`` / ``max``: the gradient is shared equally by the elements that
    attain the extremum (PyTorch's rule for ``amax`` and full ``max()``)."""

    name = "max"
    saves = (0, -1)
    fresh_grads = True
    _reduce = "max"

    @classmethod
    def forward(cls, ctx, B, a, dim=None, keepdim=False):
        out = getattr(B, cls._reduce)(a, dim, keepdim)
        ctx.a, ctx.out, ctx.dim, ctx.keepdim = a, out, dim, keepdim
        return out

    @classmethod
    def backward(cls, ctx, B, g):
        shape = tuple(B.shape(ctx.a))
        kshape = _keepdim_shape(shape, ctx.dim)
        m = B.broadcast_to(B.reshape(ctx.out, kshape), shape)
        a = ctx.a
        # where the extremum is NaN, the NaN elements share the gradient (PyTorch's
        # rule for max()/max(dim); NaN == NaN is false, so eq alone would hit none)
        hit = B.cast(B.where(B.ne(m, m), B.ne(a, a), B.eq(a, m)), B.dtype(g))
        count = B.sum(hit, ctx.dim, keepdim=True)
        share = B.broadcast_to(B.div(B.reshape(g, kshape), count), shape)
        return (B.mul(hit, share),)


class Min(Max):
    name = "min"
    _reduce = "min"


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
    name = "broadcast_to"
    saves = ()
    view = True

    @staticmethod
    def forward(ctx, B, a, shape):
        ctx.shape = tuple(B.shape(a))
        return B.broadcast_to(a, shape)

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


# -------------------------------------------------------------------- index
class IndexSelect(Op):
    """Row gather; its backward is ``index_add`` (the adjoint)."""

    name = "index_select"
    saves = ()
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, x, indices):
        out = B.index_select(x, indices)
        ctx.indices, ctx.n = indices, B.shape(x)[0]
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.index_add(g, ctx.indices, ctx.n), None)


class IndexAdd(Op):
    """Row scatter-add; its backward is ``index_select`` (the adjoint)."""

    name = "index_add"
    saves = ()
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, src, indices, num_rows):
        out = B.index_add(src, indices, num_rows)
        ctx.indices = indices
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.index_select(g, ctx.indices), None, None)
