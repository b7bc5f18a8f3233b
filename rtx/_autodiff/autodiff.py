"""``Autodiff(inner)``: the backend decorator that records the tape.

It exposes the inner backend's op names over ``rtx.Tensor`` s.  Each call
unwraps the tensors to inner primitives, runs the op's forward on the inner
backend and, when grad mode is on and an input requires grad, records one
``Node`` whose ``ctx`` holds what the backward rule needs (primitives, shapes,
attributes) and ``needs_input_grad``.  Otherwise it takes the untracked path:
the forward runs with a context that stores nothing and no node is made.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from .. import _dtypes
from . import sparse as _sparse
from .grad_mode import _state
from .graph import new_node
from .ops import Op
from .ops.base import SINK

_tensor_type: Any = None  # rtx.tensor.Tensor, registered by rtx/tensor.py
_make_tensor: Any = None  # its _make


class _Ctx:
    """A tracked op's saved state (attributes set by the op's forward)."""

    needs_input_grad: tuple[bool, ...]


def register_tensor_type(cls: Any) -> None:
    """Called once by ``rtx/tensor.py``: the class whose instances ``apply`` unwraps
    and creates (the engine never imports it: it sits below ``Tensor``)."""
    global _tensor_type, _make_tensor
    _tensor_type = cls
    _make_tensor = cls._make      # (bound once: apply makes one per op)
    _sparse._tensor_type = cls
    _dtypes.register_tensor_type(cls)  # host conversion reads tensors too


class Autodiff:
    """Decorator backend: records differentiable ops over ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = f"autodiff<{inner.name}>"
        # the backend's mark_saved, when it wants to know what the tape saves
        self._mark = inner.mark_saved if getattr(inner, "MARKS_SAVED", False) else None

    def __repr__(self) -> str:
        return f"<Autodiff over {self.inner!r}>"

    def _mismatch(self, op: type[Op], a: Any) -> TypeError:
        return TypeError(
            f"{op.name}: tensors live on different backends ({a._ad.name} vs {self.name})"
        )

    def accepts(self, other: Autodiff) -> bool:
        """Whether tensors of ``other`` can be operands of this decorator's ops: the
        same backend, or one that decorates the other (``Fusion(inner)`` and ``inner``
        share data: ``Backend.adopt``)."""
        if other is self:
            return True
        a, b = self.inner, other.inner
        return getattr(a, "inner", None) is b or getattr(b, "inner", None) is a

    def apply(self, op: type[Op], *args: Any, **attrs: Any) -> Any:
        if _redirecting:
            to = getattr(_redirect, "to", None)
            if to is not None and to[0] is self and op.name in to[2]:
                return to[1].apply(op, *args, **attrs)
        T = _tensor_type
        prims = []
        track = False
        mixed = False
        for a in args:
            if isinstance(a, T):
                if a._ad is not self:
                    if not self.accepts(a._ad):
                        raise self._mismatch(op, a)
                    prims.append(self.inner.adopt(a._value, a._ad.inner))
                    mixed = True
                else:
                    prims.append(a._value)
                if a._rg:
                    track = True
            else:
                prims.append(a)
        if track and _state.enabled and op.differentiable:
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
            n = new_node(op, ctx, tuple(parents), self.inner.dtype(out), self.inner, mixed)
            res = _make_tensor(out, self, True, n)
            if op.view:
                _share_counter(self.inner, res, args[0])
            sv = op.saves
            if sv:
                vs = []
                mark = self._mark
                for i in sv:
                    t = res if i < 0 else args[i]
                    if isinstance(t, T):  # (a scalar operand has no buffer)
                        vc = t._vc
                        if vc is None:
                            vc = t._vc = [0]
                        vs.append((vc, vc[0], i, t._value))
                        if mark is not None:
                            # (the version entry holds it; released with ctx)
                            mark(t._value, ctx)
                    if mark is not None:
                        mark(out if i < 0 else prims[i], ctx)  # (ctx holds it)
                if vs:
                    n.versions = vs
            elif sv is None:
                n.versions = _saved_versions(ctx, args, res, T)
            return res
        res = _make_tensor(op.forward(SINK, self.inner, *prims, **attrs), self)
        if op.view:
            _share_counter(self.inner, res, args[0])
        return res


# Fusion as a mode (``rtx.fusion.enabled()``): while a thread is inside the block,
# the elementwise ops that thread applies on the inner backend's Autodiff run on the
# Fusion's instead (``_redirect.to = (inner's, fusion's, op names)``); every other op
# stays where it is (it would only materialise its operands there).  ``_redirecting``
# counts the blocks open in any thread, so that ``apply`` outside every block pays
# one global read for it.
_redirect = threading.local()
_redirecting = 0
_redirect_lock = threading.Lock()


@contextlib.contextmanager
def redirected(src: Autodiff, dst: Autodiff, ops: frozenset[str]) -> Iterator[None]:
    """Inside the block (this thread), ``src.apply`` of an op named in ``ops`` runs
    ``dst.apply`` (whose backend must accept ``src``'s tensors: ``Autodiff.accepts``)."""
    global _redirecting
    if not dst.accepts(src):
        raise TypeError(f"cannot redirect {src.name}'s ops to {dst.name}")
    prev = getattr(_redirect, "to", None)
    with _redirect_lock:
        _redirecting += 1
    _redirect.to = (src, dst, ops) if src is not dst else None
    try:
        yield
    finally:
        _redirect.to = prev
        with _redirect_lock:
            _redirecting -= 1


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
