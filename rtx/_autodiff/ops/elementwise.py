"""Op rules, elementwise family: arithmetic, comparisons' neighbours, where, cast, copy.

Each rule's forward and backward side by side (see ``base.py``)."""

from __future__ import annotations

import math
from typing import Any

from .base import _SCALARS, SINK, Op, _is_prim, _ndarray, unbroadcast


def _shape(B: Any, x: Any) -> tuple[int, ...] | None:
    return tuple(B.shape(x)) if _is_prim(x) else None


def _shapes(B: Any, a: Any, b: Any) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """``(_shape(B, a), _shape(B, b))`` in one call (a binary op's recorded forward;
    ``_is_prim``'s test written out, so that it is one call in all)."""
    return (tuple(B.shape(a)) if type(a) is _ndarray or not isinstance(a, _SCALARS) else None,
            tuple(B.shape(b)) if type(b) is _ndarray or not isinstance(b, _SCALARS) else None)


def _zeros_like(B: Any, g: Any) -> Any:
    return B.zeros(tuple(B.shape(g)), B.dtype(g))


# --------------------------------------------------------------- arithmetic
class Add(Op):
    """``input + other`` (broadcast; PyTorch's dtype promotion)."""

    signature = "input: Operand, other: Operand"
    faces = ("method", "function", "__add__", "__radd__")
    fused = "add"
    name = "add"
    saves = ()

    @staticmethod
    def forward(ctx, B, a, b):
        if ctx is not SINK:   # (untracked: no shapes to compute)
            ctx.sa, ctx.sb = _shapes(B, a, b)
        return B.add(a, b)

    @staticmethod
    def backward(ctx, B, g):
        na, nb = ctx.needs_input_grad
        return (
            unbroadcast(B, g, ctx.sa) if na else None,
            unbroadcast(B, g, ctx.sb) if nb else None,
        )


class Sub(Op):
    """``input - other`` (broadcast; PyTorch's dtype promotion)."""

    signature = "input: Operand, other: Operand"
    faces = ("method", "function", "__sub__", "__rsub__")
    fused = "sub"
    name = "sub"
    saves = ()

    @staticmethod
    def forward(ctx, B, a, b):
        if ctx is not SINK:
            ctx.sa, ctx.sb = _shapes(B, a, b)
        return B.sub(a, b)

    @staticmethod
    def backward(ctx, B, g):
        na, nb = ctx.needs_input_grad
        return (
            unbroadcast(B, g, ctx.sa) if na else None,
            unbroadcast(B, B.neg(g), ctx.sb) if nb else None,
        )


class Mul(Op):
    """``input * other`` (broadcast; PyTorch's dtype promotion)."""

    signature = "input: Operand, other: Operand"
    faces = ("method", "function", "__mul__", "__rmul__")
    fused = "mul"
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
    """``input / other`` (true division, broadcast; PyTorch's dtype promotion)."""

    signature = "input: Operand, other: Operand"
    faces = ("method", "function", "__truediv__", "__rtruediv__")
    fused = "div"
    name = "div"
    saves = (1, -1)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, b):
        out = B.div(a, b)
        if ctx is not SINK:
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
    """``input ** other`` (broadcast; PyTorch's dtype promotion)."""

    signature = "input: Operand, other: Operand"
    faces = ("method", "function", "__pow__", "__rpow__")
    fused = "pow"
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
    """The elementwise maximum of ``input`` and ``other`` (NaN propagates)."""

    signature = "input: Operand, other: Operand"
    faces = ("method", "function")
    fused = "maximum"
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
    """The elementwise minimum of ``input`` and ``other`` (NaN propagates)."""

    fused = "minimum"
    name = "minimum"
    _a_loses, _b_loses = "gt", "lt"


# -------------------------------------------------------------------- unary
class Neg(Op):
    """``-input``."""

    signature = "input: Tensor"
    faces = ("method", "function", "__neg__")
    fused = "neg"
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
    """``e ** input`` (integer and bool tensors give float32)."""

    signature = "input: FloatTensor"
    faces = ("method", "function")
    fused = "exp"
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


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


class Erf(Op):
    """The error function ``2 / sqrt(pi) * integral(exp(-t**2), 0, input)`` (integer
    and bool tensors give float32), as ``torch.erf``."""

    signature = "input: FloatTensor"
    faces = ("method", "function")
    fused = "erf"
    name = "erf"
    saves = (0,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        ctx.a = a
        return B.elementwise("erf", a)

    @staticmethod
    def backward(ctx, B, g):
        # d erf(x) / dx = 2 / sqrt(pi) * exp(-x**2)
        a = ctx.a
        return (B.mul(g, B.mul(B.exp(B.neg(B.mul(a, a))), _TWO_OVER_SQRT_PI)),)


class Log(Op):
    """The natural logarithm (integer and bool tensors give float32)."""

    signature = "input: FloatTensor"
    faces = ("method", "function")
    fused = "log"
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
    """The square root (integer and bool tensors give float32)."""

    signature = "input: FloatTensor"
    faces = ("method", "function")
    fused = "sqrt"
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
    """``|input|``; its gradient at 0 is 0."""

    signature = "input: Tensor"
    faces = ("method", "function", "__abs__")
    fused = "abs"
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
    """-1, 0 or 1 (NaN for NaN); its gradient is 0."""

    signature = "input: Tensor"
    faces = ("method", "function")
    fused = "sign"
    name = "sign"
    saves = ()
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        return B.sign(a)

    @staticmethod
    def backward(ctx, B, g):
        return (_zeros_like(B, g),)


class Where(Op):
    """``where(cond, a, b)``; ``cond`` is a bool primitive (never differentiated).
    (Its face, ``rtx.where``, is hand-written: either value may be the tensor.)"""

    fused = "where"
    name = "where"
    saves = (0,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, cond, a, b):
        ctx.cond = cond
        ctx.sa, ctx.sb = _shapes(B, a, b)
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
    fused = "copy"
    saves = ()

    @staticmethod
    def forward(ctx, B, a):
        return B.copy(a)

    @staticmethod
    def backward(ctx, B, g):
        return (g,)


# --------------------------------------------------------------- comparisons
class _Compare(Op):
    """A comparison: a bool tensor, never differentiated (nothing is recorded)."""

    signature = "input: Operand, other: Operand"
    differentiable = False
    saves = ()

    @classmethod
    def forward(cls, ctx, B, a, b):
        return getattr(B, cls.name)(a, b)

    @staticmethod
    def backward(ctx, B, g):  # pragma: no cover - never recorded (differentiable = False)
        raise RuntimeError("comparisons have no gradient")


class Eq(_Compare):
    """``input == other`` elementwise (a bool tensor)."""

    name = fused = "eq"
    faces = ("method", "function", "__eq__")


class Ne(_Compare):
    """``input != other`` elementwise (a bool tensor)."""

    name = fused = "ne"
    faces = ("method", "function", "__ne__")


class Lt(_Compare):
    """``input < other`` elementwise (a bool tensor)."""

    name = fused = "lt"
    faces = ("method", "function", "__lt__")


class Le(_Compare):
    """``input <= other`` elementwise (a bool tensor)."""

    name = fused = "le"
    faces = ("method", "function", "__le__")


class Gt(_Compare):
    """``input > other`` elementwise (a bool tensor)."""

    name = fused = "gt"
    faces = ("method", "function", "__gt__")


class Ge(_Compare):
    """``input >= other`` elementwise (a bool tensor)."""

    name = fused = "ge"
    faces = ("method", "function", "__ge__")
