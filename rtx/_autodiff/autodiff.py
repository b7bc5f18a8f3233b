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

from .. import _dtypes
from . import sparse as _sparse
from .grad_mode import _state
from .graph import Node
from .ops import Op

_tensor_type: Any = None  # rtx.tensor.Tensor, registered by rtx/tensor.py


class _Sink:
    """The untracked path's context: saving to it keeps nothing alive."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        pass


_SINK = _Sink()


class _Ctx:
    """A tracked op's saved state (attributes set by the op's forward)."""

    needs_input_grad: tuple[bool, ...]


def register_tensor_type(cls: Any) -> None:
    """Called once by ``rtx/tensor.py``: the class whose instances ``apply`` unwraps
    and creates (the engine never imports it: it sits below ``Tensor``)."""
    global _tensor_type
    _tensor_type = cls
    _sparse._tensor_type = cls
    _dtypes.register_tensor_type(cls)  # host conversion reads tensors too


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
        T = _tensor_type
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
            n = Node(op, ctx, tuple(parents), self.inner.dtype(out))
            res = T._make(out, self, True, n)
            if op.view:
                _share_counter(self.inner, res, args[0])
            sv = op.saves
            if sv:
                vs = []
                for i in sv:
                    t = res if i < 0 else args[i]
                    if isinstance(t, T):  # (a scalar operand has no buffer)
                        vc = t._vc
                        if vc is None:
                            vc = t._vc = [0]
                        vs.append((vc, vc[0], i, t._value))
                if vs:
                    n.versions = vs
            elif sv is None:
                n.versions = _saved_versions(ctx, args, res, T)
            return res
        res = T._make(op.forward(_SINK, self.inner, *prims, **attrs), self)
        if op.view:
            _share_counter(self.inner, res, args[0])
        return res


def _share_counter(B: Any, out: Any, src: Any) -> None:
    """``out`` (a view op's result) shares ``src``'s version counter when the
    backend made it an alias of ``src``'s buffer."""
    if B.aliases(out._value, src._value):
        vc = src._vc
        if vc is None:
            vc = src._vc = [0]
        out._vc = vc


def _saved_versions(ctx: _Ctx, args: tuple[Any, ...], out: Any, T: Any) -> Any:
    """``[(counter, version now, input index or -1 for the output, prim)]`` for
    each input / the output whose buffer the forward saved on ``ctx``, or None.

    Checked before the node's backward runs (graph._check_versions)."""
    saved = ctx.__dict__.values()
    res = None
    for i, a in enumerate(args):
        if isinstance(a, T):
            v = a._value
            for s in saved:
                if s is v:
                    vc = a._vc
                    if vc is None:
                        vc = a._vc = [0]
                    if res is None:
                        res = []
                    res.append((vc, vc[0], i, v))
                    break
    v = out._value
    for s in saved:
        if s is v:
            vc = out._vc
            if vc is None:
                vc = out._vc = [0]
            if res is None:
                res = []
            res.append((vc, vc[0], -1, v))
            break
    return res
