"""``Autodiff(inner)``: the backend decorator that records the tape.

It exposes the inner backend's op names over ``rtx.Tensor`` s.  Each call
unwraps the tensors to inner primitives, runs the op's forward on the inner
backend and, when grad mode is on and an input requires grad, records one
``Node``.  Otherwise it takes the untracked path: the forward runs with a
context that stores nothing.
"""

from __future__ import annotations

from typing import Any

from .grad_mode import _state
from .graph import Node
from .ops import OPS, Op


class _Sink:
    """The untracked path's context: saving to it keeps nothing alive."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        pass


_SINK = _Sink()


class _Ctx:
    """A tracked op's saved state."""

    __dict__: dict[str, Any]


class Autodiff:
    """Decorator backend: records differentiable ops over ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = f"autodiff<{inner.name}>"

    def __repr__(self) -> str:
        return f"<Autodiff over {self.inner!r}>"

    def apply(self, op: type[Op], *args: Any, **attrs: Any) -> Any:
        from ..tensor import Tensor

        prims = []
        parents: list[Any] = []
        track = False
        for a in args:
            if isinstance(a, Tensor):
                if a._ad is not self:
                    raise TypeError(
                        f"{op.name}: tensors live on different backends "
                        f"({a._ad.name} vs {self.name})"
                    )
                prims.append(a._value)
                if a.requires_grad:
                    track = True
                    parents.append(a if a._node is None else a._node)
                else:
                    parents.append(None)
            else:
                prims.append(a)
                parents.append(None)
        if track and getattr(_state, "enabled", True) and op.differentiable:
            ctx = _Ctx()
            out = op.forward(ctx, self.inner, *prims, **attrs)
            return Tensor._make(out, self, True, Node(op, ctx, tuple(parents)))
        out = op.forward(_SINK, self.inner, *prims, **attrs)
        return Tensor._make(out, self)


def _make_method(op: type[Op]) -> Any:
    def method(self: Autodiff, *args: Any, **attrs: Any) -> Any:
        return self.apply(op, *args, **attrs)

    method.__name__ = op.name
    method.__doc__ = f"Recorded ``{op.name}`` (forward and backward in rtx.autograd.ops)."
    return method


for _name, _op in OPS.items():
    setattr(Autodiff, _name, _make_method(_op))
