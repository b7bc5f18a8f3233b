"""``rtx.autograd.Function``: user-defined ops with custom gradients, as in PyTorch.

>>> class Cube(rtx.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x * x * x
...     @staticmethod
...     def backward(ctx, grad):
...         (x,) = ctx.saved_tensors
...         return 3 * x * x * grad
>>> y = Cube.apply(x)

``forward`` runs with grad mode off on the tensors it is given and returns a
tensor or a tuple of tensors; ``backward`` gets one gradient per output
(zeros for outputs that got none, unless ``ctx.set_materialize_grads(False)``)
and returns one gradient (or ``None``) per ``forward`` input.

Saved tensors are kept as backend primitives, not as ``Tensor`` objects, so
saving an output does not create a reference cycle; ``ctx.saved_tensors``
rebuilds (detached) tensors on access.  Storing a tensor directly as a ``ctx``
attribute (``ctx.y = y``) does create a cycle for outputs: use
``save_for_backward``.
"""

from __future__ import annotations

from typing import Any

from .._autodiff.grad_mode import _state, no_grad
from .._autodiff.graph import OutputEdge, new_node
from .._autodiff.ops import unbroadcast
from ..tensor import Tensor


class FunctionCtx:
    """The ``ctx`` of a ``Function``: saved state for its backward."""

    needs_input_grad: tuple[bool, ...]
    # set by Function.apply when the call is recorded
    _ad: Any
    _n_out: int
    _in_meta: list[Any]
    _out_meta: list[Any]

    def __init__(self) -> None:
        self.needs_input_grad = ()
        self._saved: tuple[Any, ...] | None = None
        self._nondiff: set[int] = set()
        self._materialize = True

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep ``tensors`` (or ``None`` s) for ``backward`` (read them back as
        ``ctx.saved_tensors``)."""
        saved: list[tuple[Any, Any, list[int], int] | None] = []
        for i, t in enumerate(tensors):
            if t is None:
                saved.append(None)
            elif isinstance(t, Tensor):
                vc = t._vc
                if vc is None:
                    vc = t._vc = [0]
                saved.append((t._value, t._ad, vc, vc[0]))  # version checked in backward
            else:
                raise TypeError(
                    f"save_for_backward() takes tensors or None, got {type(t).__name__} "
                    f"at position {i} (store other values as ctx attributes)"
                )
        self._saved = tuple(saved)

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """The tensors given to ``save_for_backward``, as detached tensors."""
        if self._saved is None:
            return ()
        out: list[Any] = []
        for s in self._saved:
            if s is None:
                out.append(None)
                continue
            t = Tensor._make(s[0], s[1])
            t._vc = s[2]  # an alias of what was saved
            out.append(t)
        return tuple(out)

    def mark_non_differentiable(self, *outputs: Any) -> None:
        """Outputs of ``forward`` that get no gradient (e.g. indices)."""
        self._nondiff.update(id(o) for o in outputs)

    def set_materialize_grads(self, value: bool) -> None:
        """``False``: ``backward`` gets ``None`` (not zeros) for outputs without gradient."""
        self._materialize = bool(value)


class _FunctionOp:
    """Adapter: a ``Function`` class as the tape's op (``name`` + ``backward``)."""

    differentiable = True
    fresh_grads = None  # a user rule may return its incoming gradient or saved tensors

    def __init__(self, fn: type[Function]) -> None:
        self.fn = fn
        self.name = fn.__name__

    def backward(self, ctx: FunctionCtx, B: Any, g: Any) -> tuple[Any, ...]:
        ad = ctx._ad
        gs = list(g) if ctx._n_out > 1 else [g]
        grads_in = []
        for k, gk in enumerate(gs):
            meta = ctx._out_meta[k]
            if gk is None:
                if ctx._materialize and meta is not None:
                    gk = B.zeros(meta[0], meta[1])
            elif meta is not None and B.dtype(gk) != meta[1]:
                gk = B.cast(gk, meta[1])  # each output's gradient in its dtype (PyTorch)
            grads_in.append(None if gk is None else Tensor._make(gk, ad))
        with no_grad():
            res = self.fn.backward(ctx, *grads_in)
        if not isinstance(res, tuple):
            res = (res,)
        n_in = len(ctx._in_meta)
        if len(res) != n_in:
            if len(res) > n_in and all(r is None for r in res[n_in:]):
                res = res[:n_in]
            else:
                raise RuntimeError(
                    f"function {self.name}Backward returned an incorrect number of "
                    f"gradients (expected {n_in}, got {len(res)})"
                )
        out: list[Any] = []
        for i, (r, meta) in enumerate(zip(res, ctx._in_meta, strict=True)):
            if r is None or meta is None:
                out.append(None)
                continue
            if not isinstance(r, Tensor):
                raise TypeError(
                    f"function {self.name}Backward returned a {type(r).__name__} as the "
                    f"gradient at index {i}; expected a Tensor or None"
                )
            if not ad.accepts(r._ad):
                raise TypeError(
                    f"function {self.name}Backward returned a gradient on another backend "
                    f"at index {i}"
                )
            shape, dtype = meta
            p = r._value if r._ad is ad else B.adopt(r._value, r._ad.inner)
            gshape = tuple(B.shape(p))
            if gshape != shape:
                try:
                    fits = _sums_to(gshape, shape)
                except ValueError:
                    fits = False
                if not fits:
                    raise RuntimeError(
                        f"function {self.name}Backward returned an invalid gradient at index "
                        f"{i} - got shape {list(gshape)} but expected shape compatible with "
                        f"{list(shape)}"
                    )
                p = unbroadcast(B, p, shape)
            if B.dtype(p) != dtype:
                p = B.cast(p, dtype)
            out.append(p)
        return tuple(out)


def _alias(Tensor: Any, o: Any, ad: Any, node: Any = None) -> Any:
    """A new tensor over ``o``'s buffer, sharing its version counter."""
    v = o._value if o._ad is ad else ad.inner.adopt(o._value, o._ad.inner)
    t = Tensor._make(v, ad, node is not None, node)
    vc = o._vc
    if vc is None:
        vc = o._vc = [0]
    t._vc = vc
    return t


def _sums_to(gshape: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether a gradient of ``gshape`` reduces (un-broadcasts) to ``shape``."""
    if len(gshape) < len(shape):
        return False
    lead = len(gshape) - len(shape)
    return all(s == 1 or s == gshape[lead + i] for i, s in enumerate(shape))


class Function:
    """Base class for ops with a custom gradient (subclass, then ``MyFn.apply(...)``)."""

    _op: _FunctionOp | None = None

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls._op = _FunctionOp(cls)

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define backward(ctx, *grads)")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` and, if an input needs a gradient, record it on the tape."""
        if cls._op is None:
            raise TypeError("call apply() on a subclass of rtx.autograd.Function")
        ad = None
        mixed = False
        needs = []
        in_meta: list[Any] = []
        parents: list[Any] = []
        for a in args:
            if isinstance(a, Tensor):
                if ad is None:
                    ad = a._ad
                elif a._ad is not ad:
                    if not ad.accepts(a._ad):   # (a Fusion and its inner backend mix)
                        raise TypeError(
                            f"{cls.__name__}.apply: tensors live on different backends")
                    mixed = True
                rg = a._rg
                needs.append(rg)
                if rg:
                    in_meta.append((a.shape, a.dtype))
                    parents.append(a if a._node is None else a._node)
                else:
                    in_meta.append(None)
                    parents.append(None)
            else:
                needs.append(False)
                in_meta.append(None)
                parents.append(None)
        track = any(needs) and _state.enabled
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(needs) if track else (False,) * len(args)
        with no_grad():
            result = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(result, tuple)
        outs = (result,) if single else result
        nondiff = ctx._nondiff
        ctx._nondiff = set()
        if not track:
            ctx._saved = None
            res = tuple(_alias(Tensor, o, o._ad) if isinstance(o, Tensor) else o for o in outs)
            return res[0] if single else res
        assert ad is not None   # (tracking needs an input tensor that requires grad)
        node = new_node(cls._op, ctx, tuple(parents), None, ad.inner, mixed)
        n = len(outs)
        ctx._ad = ad
        ctx._n_out = n
        ctx._in_meta = in_meta
        out_meta: list[Any] = []
        res_list: list[Any] = []
        for k, o in enumerate(outs):
            if not isinstance(o, Tensor):
                out_meta.append(None)
                res_list.append(o)
                continue
            if not ad.accepts(o._ad):
                raise TypeError(
                    f"{cls.__name__}.forward returned a tensor on another backend (output {k})"
                )
            diff = id(o) not in nondiff and o.dtype.kind == "f"
            if diff:
                out_meta.append((o.shape, o.dtype))
                target = node if n == 1 else OutputEdge(node, k, n)
                res_list.append(_alias(Tensor, o, ad, target))
            else:
                out_meta.append(None)
                res_list.append(_alias(Tensor, o, ad))
        ctx._out_meta = out_meta
        if ctx._saved:
            node.versions = [(s[2], s[3], f"its saved tensor {i}", s[0])
                             for i, s in enumerate(ctx._saved) if s is not None] or None
        res = tuple(res_list)
        return res[0] if single else res
