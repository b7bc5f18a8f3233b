"""Module-level ops (``rtx.add``, ``rtx.softmax``, ``rtx.index_add``, ...).

The declared ops' functions are generated from their declarations
(``rtx/_faces.py``) and star-imported here; the irregular ones (sequences of
tensors, ``where``'s either-side operands, shapes, ``max(dim)``) are written
below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _backend_state, _faces
from ._autodiff.ops import OPS
from ._dtypes import check_dim
from ._faces import *  # noqa: F403 - the generated functions (their names: _faces.__all__)
from .tensor import MaxResult, Tensor, matmul_checked, operand


def as_tensor_arg(x: Any) -> Tensor:
    """``x`` as a tensor on the default backend (tensors pass through)."""
    if isinstance(x, Tensor):
        return x
    return operand(x, _backend_state.default_autodiff(), scalars=False)


_t = as_tensor_arg


def max(x: Any, dim: Any = None, keepdim: bool = False) -> Tensor | MaxResult:  # noqa: A001
    return _t(x).max(dim, keepdim)


def min(x: Any, dim: Any = None, keepdim: bool = False) -> Tensor | MaxResult:  # noqa: A001
    return _t(x).min(dim, keepdim)


def argmax(x: Any, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _t(x).argmax(dim, keepdim)


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """Elements of ``a`` where ``cond`` holds, else of ``b`` (differentiable in a and b)."""
    ref = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else _t(a)
    ad = ref._ad
    c = operand(cond, ad, scalars=False)
    if c.dtype.kind != "b":
        raise TypeError(f"where(): cond must be a bool tensor, got {c.dtype}")
    if not ad.accepts(c._ad):
        raise TypeError("where(): cond lives on a different backend than a / b")
    # cond passed as a tensor: its version is recorded (the backward reuses the mask)
    return ad.apply(OPS["where"], c, operand(a, ad), operand(b, ad))


def matmul(a: Any, b: Any) -> Tensor:
    """Matrix product with numpy/PyTorch semantics (1-D, 2-D, batched)."""
    return matmul_checked(_t(a), _t(b))


def reshape(x: Any, shape: Sequence[int]) -> Tensor:
    return _t(x).reshape(tuple(shape))


def transpose(x: Any, dim0: int, dim1: int) -> Tensor:
    return _t(x).transpose(dim0, dim1)


def permute(x: Any, dims: Sequence[int]) -> Tensor:
    return _t(x).permute(tuple(dims))


def _same_backend(xs: Sequence[Any], name: str) -> list[Tensor]:
    if len(xs) == 0:
        raise ValueError(f"{name}(): expected a non-empty sequence of tensors")
    ts = [_t(x) for x in xs]
    ad = ts[0]._ad
    if any(t._ad is not ad and not ad.accepts(t._ad) for t in ts):
        raise TypeError(f"{name}(): tensors live on different backends")
    dts = {t.dtype for t in ts}
    if len(dts) > 1:
        raise TypeError(f"{name}(): tensors have different dtypes {sorted(map(str, dts))}")
    return ts


def concat(tensors: Sequence[Any], dim: int = 0) -> Tensor:
    ts = _same_backend(tensors, "concat")
    nd = ts[0].ndim
    if nd == 0:
        raise ValueError("concat(): zero-dimensional tensors cannot be concatenated")
    d = check_dim(dim, nd)
    for t in ts:
        if t.ndim != nd or t.shape[:d] + t.shape[d + 1:] != ts[0].shape[:d] + ts[0].shape[d + 1:]:
            raise ValueError(
                f"concat(): shapes {[t.shape for t in ts]} differ outside dim {d}"
            )
    return ts[0]._ad.apply(OPS["concat"], *ts, dim=d)


cat = concat


def stack(tensors: Sequence[Any], dim: int = 0) -> Tensor:
    ts = _same_backend(tensors, "stack")
    if any(t.shape != ts[0].shape for t in ts):
        raise ValueError(f"stack(): shapes differ: {[t.shape for t in ts]}")
    d = check_dim(dim, ts[0].ndim + 1)
    return ts[0]._ad.apply(OPS["stack"], *ts, dim=d)


# the hand-written functions, then the generated ones
__all__ = ["argmax", "cat", "concat", "matmul", "max", "min", "permute",
           "reshape", "stack", "transpose", "where", *_faces.__all__]
