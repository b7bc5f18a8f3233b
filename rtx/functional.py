"""Module-level ops (``rtx.add``, ``rtx.softmax``, ``rtx.index_add``, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _backend_state
from ._autodiff.ops import OPS
from ._dtypes import check_dim
from .tensor import MaxResult, Tensor, _indices, _matmul, _operand


def _t(x: Any) -> Tensor:
    if isinstance(x, Tensor):
        return x
    return _operand(x, _backend_state.default_autodiff(), scalars=False)


def _binary(name: str, a: Any, b: Any) -> Tensor:
    if isinstance(a, Tensor):
        return a._ad.apply(OPS[name], a, _operand(b, a._ad))
    if isinstance(b, Tensor):
        return b._ad.apply(OPS[name], _operand(a, b._ad), b)
    a = _t(a)
    return a._ad.apply(OPS[name], a, _operand(b, a._ad))


def add(a: Any, b: Any) -> Tensor:
    return _binary("add", a, b)


def sub(a: Any, b: Any) -> Tensor:
    return _binary("sub", a, b)


def mul(a: Any, b: Any) -> Tensor:
    return _binary("mul", a, b)


def div(a: Any, b: Any) -> Tensor:
    return _binary("div", a, b)


def pow(a: Any, b: Any) -> Tensor:  # noqa: A001 - PyTorch's name
    return _binary("pow", a, b)


def maximum(a: Any, b: Any) -> Tensor:
    return _binary("maximum", a, b)


def minimum(a: Any, b: Any) -> Tensor:
    return _binary("minimum", a, b)


def neg(x: Any) -> Tensor:
    return _t(x).neg()


def exp(x: Any) -> Tensor:
    return _t(x).exp()


def log(x: Any) -> Tensor:
    return _t(x).log()


def sqrt(x: Any) -> Tensor:
    return _t(x).sqrt()


def abs(x: Any) -> Tensor:  # noqa: A001 - PyTorch's name
    return _t(x).abs()


def sign(x: Any) -> Tensor:
    return _t(x).sign()


def relu(x: Any) -> Tensor:
    return _t(x).relu()


def leaky_relu(x: Any, negative_slope: float = 0.01) -> Tensor:
    return _t(x).leaky_relu(negative_slope)


def elu(x: Any, alpha: float = 1.0) -> Tensor:
    return _t(x).elu(alpha)


def sigmoid(x: Any) -> Tensor:
    return _t(x).sigmoid()


def tanh(x: Any) -> Tensor:
    return _t(x).tanh()


def softmax(x: Any, dim: int = -1) -> Tensor:
    return _t(x).softmax(dim)


def log_softmax(x: Any, dim: int = -1) -> Tensor:
    return _t(x).log_softmax(dim)


def sum(x: Any, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return _t(x).sum(dim, keepdim)


def mean(x: Any, dim: Any = None, keepdim: bool = False) -> Tensor:
    return _t(x).mean(dim, keepdim)


def max(x: Any, dim: Any = None, keepdim: bool = False) -> Tensor | MaxResult:  # noqa: A001
    return _t(x).max(dim, keepdim)


def min(x: Any, dim: Any = None, keepdim: bool = False) -> Tensor | MaxResult:  # noqa: A001
    return _t(x).min(dim, keepdim)


def argmax(x: Any, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _t(x).argmax(dim, keepdim)


def eq(a: Any, b: Any) -> Tensor:
    return _t(a).eq(b)


def ne(a: Any, b: Any) -> Tensor:
    return _t(a).ne(b)


def lt(a: Any, b: Any) -> Tensor:
    return _t(a).lt(b)


def le(a: Any, b: Any) -> Tensor:
    return _t(a).le(b)


def gt(a: Any, b: Any) -> Tensor:
    return _t(a).gt(b)


def ge(a: Any, b: Any) -> Tensor:
    return _t(a).ge(b)


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """Elements of ``a`` where ``cond`` holds, else of ``b`` (differentiable in a and b)."""
    ref = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else _t(a)
    ad = ref._ad
    c = _operand(cond, ad, scalars=False)
    if c.dtype.kind != "b":
        raise TypeError(f"where(): cond must be a bool tensor, got {c.dtype}")
    if c._ad is not ad:
        raise TypeError("where(): cond lives on a different backend than a / b")
    # cond passed as a tensor: its version is recorded (the backward reuses the mask)
    return ad.apply(OPS["where"], c, _operand(a, ad), _operand(b, ad))


def matmul(a: Any, b: Any) -> Tensor:
    """Matrix product with numpy/PyTorch semantics (1-D, 2-D, batched)."""
    return _matmul(_t(a), _t(b))


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
    if any(t._ad is not ad for t in ts):
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


def index_select(x: Any, indices: Any) -> Tensor:
    """Row gather along dim 0: ``out[i] = x[indices[i]]``.

    ``indices``: 1-D int32/int64 (rtx tensor, numpy array or sequence), each in
    ``[0, x.shape[0])``.  Its gradient is ``index_add`` of the output gradient.
    """
    x = _t(x)
    idx = _indices(indices, "index_select")
    return x._ad.apply(OPS["index_select"], x, idx)


def index_add(src: Any, indices: Any, num_rows: int) -> Tensor:
    """Row scatter-add along dim 0 into ``num_rows`` zero rows.

    ``out[indices[i]] += src[i]``; repeated indices accumulate in index order
    (deterministic for any thread count).  Its gradient is ``index_select``.
    """
    src = _t(src)
    idx = _indices(indices, "index_add")
    return src._ad.apply(OPS["index_add"], src, idx, num_rows)
