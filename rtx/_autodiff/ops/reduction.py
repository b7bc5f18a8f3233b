"""Op rules, reduction family: sum, mean, max, min.

Each rule's forward and backward side by side (see ``base.py``)."""

from __future__ import annotations

import math
from typing import Any

from .base import SINK, Op


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
    """The sum over ``dim`` (all dims when None); bool and integer tensors sum in int64."""

    signature = "input: Tensor, dim: Dims = None, keepdim: bool = False"
    faces = ("method", "function")
    name = "sum"
    saves = ()

    @staticmethod
    def forward(ctx, B, a, dim=None, keepdim=False):
        if ctx is not SINK:   # (untracked: no shape to keep)
            ctx.shape, ctx.dim, ctx.keepdim = tuple(B.shape(a)), dim, keepdim
        return B.sum(a, dim, keepdim)

    @staticmethod
    def backward(ctx, B, g):
        return (_expand_back(B, g, ctx.shape, ctx.dim, ctx.keepdim),)


class Mean(Op):
    """The mean over ``dim`` (all dims when None) of a floating point tensor."""

    signature = "input: Tensor, dim: Dims = None, keepdim: bool = False"
    faces = ("method", "function")
    name = "mean"
    saves = ()
    fresh_grads = True

    @staticmethod
    def check(a, dim, keepdim):
        if a.dtype.kind != "f":
            raise TypeError(f"mean() needs a floating point tensor, got rtx.{a.dtype}")

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
