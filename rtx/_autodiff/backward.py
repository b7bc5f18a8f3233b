"""``backward`` and ``grad`` over tensors: root gradients, leaf ``.grad``
accumulation, around the engine's walk (``graph._engine``).

Part of the engine layer (below ``Tensor``, which calls ``backward`` from
``Tensor.backward()`` -- an ordinary import, no cycle): the tensor class is the
one registered by ``rtx/tensor.py`` (``autodiff.register_tensor_type``), never
imported.  ``rtx.autograd`` re-exports both.
"""

from __future__ import annotations

from typing import Any

from .. import _dtypes
from . import autodiff
from .graph import OutputEdge, _engine, _grad_lock, _post_backward_hooks
from .sparse import RowSparseGrad, add_grads

__all__ = ["backward", "grad"]


def _T() -> Any:  # noqa: N802 - the registered Tensor class
    return autodiff._tensor_type


def _as_tensor(data: Any, ad: Any, dtype: Any) -> Any:
    B = ad.inner
    return autodiff._tensor_type._make(B.copy(B.from_numpy(_dtypes.to_host(data, dtype))), ad)


def _root_target(t: Any) -> Any:
    return t if t._node is None else t._node


def _leaf_value(B: Any, leaf: Any, g: Any, sh: bool) -> Any:
    """``g`` checked against ``leaf`` and made safe to store as its ``.grad``."""
    if type(g) is RowSparseGrad:  # (its values are always fresh: never shared)
        if g.shape != leaf.shape:
            raise RuntimeError(f"internal error: sparse gradient of shape {g.shape} for a "
                               f"leaf of shape {leaf.shape}")
        if B.dtype(g._vals) != B.dtype(leaf._value):
            g = RowSparseGrad(g._idx, B.cast(g._vals, B.dtype(leaf._value)), g.shape)
        return g
    gshape = tuple(B.shape(g))
    if gshape != leaf.shape:
        raise RuntimeError(
            f"internal error: gradient of shape {gshape} for a leaf of shape {leaf.shape}"
        )
    if B.dtype(g) != B.dtype(leaf._value):
        return B.cast(g, B.dtype(leaf._value))
    return B.copy(g) if sh else g


def _accumulate(leaf_grads: dict[int, list[Any]]) -> None:
    for leaf, g, sh in leaf_grads.values():
        B = leaf._ad.inner  # (the engine gave each gradient its leaf's backend)
        with _grad_lock:  # read-modify-write of a shared leaf's .grad
            old = leaf.grad
            if old is None:
                leaf.grad = _wrap(_leaf_value(B, leaf, g, sh), leaf._ad)
            else:
                g = _leaf_value(B, leaf, g, False)
                prev = old if type(old) is RowSparseGrad else old._value
                leaf.grad = _wrap(add_grads(B, prev, g), leaf._ad)


def _wrap(g: Any, ad: Any) -> Any:
    """A gradient primitive as what ``.grad`` holds: a Tensor, or the
    ``RowSparseGrad`` itself (bound to the leaf's backend)."""
    if type(g) is RowSparseGrad:
        return g._bound(ad)
    return _T()._make(g, ad)


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    if isinstance(x, _T()):
        return [x]
    return list(x)


def _root_grads(outputs: list[Any], grad_outputs: Any, fn: str) -> list[tuple[Any, Any, bool]]:
    gos = [None] * len(outputs) if grad_outputs is None else _as_list(grad_outputs)
    if len(gos) != len(outputs):
        raise ValueError(
            f"{fn}: got {len(gos)} gradients for {len(outputs)} outputs"
        )
    roots = []
    for i, (t, go) in enumerate(zip(outputs, gos, strict=True)):
        if not isinstance(t, _T()):
            raise TypeError(f"{fn}: outputs[{i}] is a {type(t).__name__}, not an rtx.Tensor")
        if not t._rg:
            raise RuntimeError(
                f"{fn}: element {i} of the outputs does not require grad and has no grad_fn"
            )
        B = t._ad.inner
        if go is None:
            if t.numel() != 1:
                raise RuntimeError(
                    f"{fn}: grad can be implicitly created only for scalar outputs, "
                    f"output {i} has shape {t.shape}; pass the gradient explicitly"
                )
            roots.append((_root_target(t), B.full(t.shape, 1, t.dtype), False))
            continue
        gt = go if isinstance(go, _T()) else _as_tensor(go, t._ad, t.dtype)
        if not t._ad.accepts(gt._ad):
            raise TypeError(f"{fn}: gradient {i} lives on a different backend than its output")
        if gt.shape != t.shape:
            raise ValueError(f"{fn}: gradient {i} has shape {gt.shape}, expected {t.shape}")
        g = gt._value if gt._ad is t._ad else B.adopt(gt._value, gt._ad.inner)
        if gt.dtype != t.dtype:
            g = B.cast(g, t.dtype)
        roots.append((_root_target(t), g, True))
    return roots


def _single_ad(ts: list[Any], fn: str) -> Any:
    ad = ts[0]._ad
    for t in ts[1:]:
        if not ad.accepts(t._ad):   # the same backend, or a Fusion and its inner one
            raise TypeError(f"{fn}: tensors live on different backends")
    return ad


def backward(
    tensors: Any, grad_tensors: Any = None, retain_graph: bool | None = None
) -> None:
    """Accumulate the gradients of ``tensors`` into the leaves' ``.grad`` (like
    ``torch.autograd.backward``).  ``grad_tensors``: one gradient per tensor
    (``None`` allowed for one-element tensors)."""
    outs = _as_list(tensors)
    if not outs:
        raise ValueError("backward: no tensors given")
    roots = _root_grads(outs, grad_tensors, "backward")
    ad = _single_ad(outs, "backward")
    leaf_grads = _engine(ad.inner, roots, bool(retain_graph))
    _accumulate(leaf_grads)
    if _post_backward_hooks:
        leaves = [entry[0] for entry in leaf_grads.values()]
        del leaf_grads
        for fn in list(_post_backward_hooks.values()):
            fn(leaves)


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    allow_unused: bool = False,
) -> tuple[Any, ...]:
    """The gradients of ``outputs`` with respect to ``inputs`` (like
    ``torch.autograd.grad``), returned instead of accumulated: no ``.grad``
    is touched.  An input the outputs do not depend on raises unless
    ``allow_unused=True`` (then its entry is ``None``)."""
    outs = _as_list(outputs)
    ins = _as_list(inputs)
    if not outs or not ins:
        raise ValueError("grad: outputs and inputs must be non-empty")
    for i, t in enumerate(ins):
        if not isinstance(t, _T()):
            raise TypeError(f"grad: inputs[{i}] is a {type(t).__name__}, not an rtx.Tensor")
        if not t._rg:
            raise RuntimeError(f"grad: inputs[{i}] does not require grad")
    roots = _root_grads(outs, grad_outputs, "grad")
    ad = _single_ad(outs + ins, "grad")
    B = ad.inner
    capture: dict[int, Any] = {}
    keys = []
    for t in ins:
        tgt = _root_target(t)
        if type(tgt) is OutputEdge:
            k, idx = id(tgt.node), tgt.index
        else:
            k, idx = id(tgt), None
        capture[k] = idx
        keys.append((k, idx))
    got = _engine(B, roots, bool(retain_graph), capture)
    res: list[Any] = []
    for i, (t, (k, idx)) in enumerate(zip(ins, keys, strict=True)):
        entry = got.get(k)
        g = None
        if entry is not None:
            g = entry[0] if idx is None else entry[0][idx]
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"grad: inputs[{i}] was not used in the graph of the outputs; "
                    "pass allow_unused=True to get None for it"
                )
            res.append(None)
            continue
        res.append(_wrap(_leaf_value(t._ad.inner, t, g, True), t._ad))
    return tuple(res)
