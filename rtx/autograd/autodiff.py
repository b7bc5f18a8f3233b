"""``Autodiff(inner)``: the backend decorator that records the tape.

It exposes the inner backend's op names over ``rtx.Tensor`` s.  Each call
unwraps the tensors to inner primitives, runs the op's forward on the inner
backend and, when grad mode is on and an input requires grad, records one
``Node`` whose ``ctx`` holds what the backward rule needs (primitives, shapes,
attributes) and ``needs_input_grad``.  Otherwise it takes the untracked path:
the forward runs with a context that stores nothing and no node is made.
"""

from __future__ import annotations

from typing import Any

from .._autodiff.ops import loss as _loss_ops  # noqa: F401 - registers the loss ops
from .grad_mode import _state
from .graph import Node
from .ops import OPS, Op

Tensor: Any = None  # rtx.tensor.Tensor, bound on first use (import cycle)


class _Sink:
    """The untracked path's context: saving to it keeps nothing alive."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        pass


_SINK = _Sink()


class _Ctx:
    """A tracked op's saved state (attributes set by the op's forward)."""

    needs_input_grad: tuple[bool, ...]


def _bind_tensor() -> Any:
    global Tensor
    from ..tensor import Tensor as T

    Tensor = T
    return T


class Autodiff:
    """Decorator backend: records differentiable ops over ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = f"autodiff<{inner.name}>"

    def __repr__(self) -> str:
        return f"<Autodiff over {self.inner!r}>"

    def _mismatch(self, op: type[Op], a: Any) -> TypeError:
        return TypeError(
            f"{op.name}: tensors live on different backends ({a._ad.name} vs {self.name})"
        )

    def apply(self, op: type[Op], *args: Any, **attrs: Any) -> Any:
        T = Tensor or _bind_tensor()
        prims = []
        track = False
        for a in args:
            if isinstance(a, T):
                if a._ad is not self:
                    raise self._mismatch(op, a)
                prims.append(a._value)
                if a._rg:
                    track = True
            else:
                prims.append(a)
        if track and getattr(_state, "enabled", True) and op.differentiable:
            needs = []
            parents = []
            for a in args:
                if isinstance(a, T) and a._rg:
                    needs.append(True)
                    node = a._node
                    parents.append(a if node is None else node)
                else:
                    needs.append(False)
                    parents.append(None)
            ctx = _Ctx()
            ctx.needs_input_grad = tuple(needs)
            out = op.forward(ctx, self.inner, *prims, **attrs)
            return T._make(out, self, True, Node(op, ctx, tuple(parents)))
        return T._make(op.forward(_SINK, self.inner, *prims, **attrs), self)


def _make_method(op: type[Op]) -> Any:
    def method(self: Autodiff, *args: Any, **attrs: Any) -> Any:
        return self.apply(op, *args, **attrs)

    method.__name__ = op.name
    method.__doc__ = f"Recorded ``{op.name}`` (forward and backward in rtx.autograd.ops)."
    return method


for _name, _op in OPS.items():
    setattr(Autodiff, _name, _make_method(_op))
