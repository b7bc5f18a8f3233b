"""``rtx.nn.functional``: activations, dropout and losses (PyTorch's semantics).

The declared ops' functions (``relu``, ``leaky_relu``, ``softmax``, the graph
ops ``segment_softmax``, ``message_passing``, ...) are generated from their
declarations (``rtx/_faces.py``) and come through ``rtx/nn/_faces.py``: the
same function objects as ``rtx.<name>``.  Dropout, the losses and
``embedding`` are written below.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..autograd.ops import OPS
from ..backend.index_plan import IndexPlan, as_plan
from ..creation import Generator, _rng
from ..functional import as_tensor_arg as _t
from ..tensor import Tensor, as_tensor
from . import _faces
from ._faces import *  # noqa: F403 - the declared ops' nn.functional faces


def _check_p(p: Any) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating, np.integer)):
        raise TypeError(f"dropout probability has to be a number, got {type(p).__name__}")
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return float(p)


def dropout(input: Any, p: float = 0.5, training: bool = True,
            generator: Generator | None = None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)``
    (identity when ``training`` is False or ``p == 0``; all zeros when ``p == 1``).

    The mask is drawn (as uniforms ``u >= p``) from ``generator`` or rtx's
    default generator, so ``rtx.manual_seed`` makes it reproducible.
    """
    p = _check_p(p)
    x = _t(input)
    if not training or p == 0.0:
        return x
    if x.dtype.kind != "f":
        raise TypeError(f"dropout(): expected a floating point tensor, got {x.dtype}")
    u = _rng(None, generator).random(x.shape)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    mask = np.where(u >= p, scale, 0.0).astype(x.dtype)
    return x * as_tensor(mask, x._ad)


# -------------------------------------------------------------------- losses
_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(reduction: Any) -> str:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction!r} is not a valid value for reduction "
                         "(expected 'none', 'mean' or 'sum')")
    return str(reduction)


def _size(shape: tuple[int, ...]) -> str:
    return "rtx.Size([" + ", ".join(str(s) for s in shape) + "])"


def _class_inputs(name: str, input: Any, target: Any, weight: Any, ignore_index: int
                  ) -> tuple[Tensor, np.ndarray, Tensor, float, tuple[int, ...]]:
    """Validate and flatten ``input`` to ``[N, C]`` rows (classes along dim 1, as in
    PyTorch) and ``target`` to ``N`` safe classes with per-row weights.

    Returns ``(rows, safe_target, row_weights, weight_sum, output_shape)``.
    Everything is checked before any op runs.
    """
    x = _t(input)
    if x.dtype.kind != "f":
        raise TypeError(f"{name}(): input must be a floating point tensor, got {x.dtype}")
    if x.ndim == 0:
        raise ValueError(f"{name}(): input must have at least 1 dimension (classes), got 0-d")
    t = np.asarray(target.numpy() if isinstance(target, Tensor) else target)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{name}(): target must hold integer class indices, got dtype {t.dtype}")
    want: tuple[int, ...]
    if x.ndim == 1:
        c, want = x.shape[0], ()
    else:
        c, want = x.shape[1], (x.shape[0],) + x.shape[2:]
    if t.shape != want:
        raise ValueError(
            f"{name}(): expected target of shape {want} for input of shape {x.shape}, "
            f"got {t.shape}"
        )
    if c == 0:
        raise ValueError(f"{name}(): input has no classes (size 0 along the class dim)")
    flat = t.reshape(-1).astype(np.int64)
    ignored = flat == ignore_index
    bad = ~ignored & ((flat < 0) | (flat >= c))
    if bad.any():
        raise IndexError(f"Target {int(flat[np.argmax(bad)])} is out of bounds.")
    safe = np.where(ignored, 0, flat)
    if weight is None:
        w_rows = np.where(ignored, 0.0, 1.0)
    else:
        w = np.asarray(weight.numpy() if isinstance(weight, Tensor) else weight)
        if w.dtype.kind not in "biuf" or w.shape != (c,):
            raise ValueError(
                f"{name}(): weight must be a float tensor of shape ({c},), got "
                f"{w.dtype} of shape {w.shape}"
            )
        w_rows = np.where(ignored, 0.0, w.astype(np.float64)[safe])
    denom = float(w_rows.sum())
    if x.ndim == 1:
        rows = x.reshape(1, c)
    elif x.ndim == 2:
        rows = x
    else:  # [N, C, d1, ...] -> [N * d1 * ..., C], classes last
        rows = x.permute(0, *range(2, x.ndim), 1).reshape(-1, c)
    wt = as_tensor(w_rows.astype(x.dtype), x._ad)
    return rows, np.ascontiguousarray(safe), wt, denom, want


def _class_loss(op: str, input: Any, target: Any, weight: Any, ignore_index: int,
                reduction: str) -> Tensor:
    reduction = _check_reduction(reduction)
    rows, safe, w, denom, shape = _class_inputs(op, input, target, weight, ignore_index)
    out = rows._ad.apply(OPS[op], rows, safe, w, reduction=reduction, denom=denom)
    return out.reshape(shape) if reduction == "none" else out


def cross_entropy(input: Any, target: Any, weight: Any = None, ignore_index: int = -100,
                  reduction: str = "mean") -> Tensor:
    """Cross-entropy from unnormalised logits and integer class targets.

    ``input``: ``[N, C]``, ``[C]`` or ``[N, C, d1, ...]`` (classes along dim 1);
    ``target``: ``[N]``, ``[]`` or ``[N, d1, ...]`` class indices in ``[0, C)`` or
    ``ignore_index``.  Row loss ``w[t] * (logsumexp(x) - x[t])`` (0 for ignored
    rows); ``reduction``: ``"none"``, ``"sum"`` or ``"mean"`` (sum divided by the
    summed weights of the non-ignored targets: NaN when all are ignored, as in
    PyTorch).  One fused, stable node: the backward is ``softmax - onehot``.
    """
    return _class_loss("cross_entropy", input, target, weight, ignore_index, reduction)


def nll_loss(input: Any, target: Any, weight: Any = None, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities: row loss ``-w[t] * x[t]``
    (shapes, ``ignore_index`` and reductions as in ``cross_entropy``)."""
    return _class_loss("nll_loss", input, target, weight, ignore_index, reduction)


def _pointwise_loss(name: str, input: Any, target: Any, reduction: str, square: bool) -> Tensor:
    reduction = _check_reduction(reduction)
    x = _t(input)
    y = target if isinstance(target, Tensor) else as_tensor(target, x._ad, x.dtype)
    if x.dtype.kind != "f" or y.dtype.kind != "f":
        raise TypeError(f"{name}(): input and target must be floating point, got {x.dtype} "
                        f"and {y.dtype}")
    if y.shape != x.shape:
        warnings.warn(
            f"Using a target size ({_size(y.shape)}) that is different to the input size "
            f"({_size(x.shape)}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.", UserWarning, stacklevel=3)
    d = x - y
    e = d * d if square else d.abs()
    if reduction == "none":
        return e
    return e.sum() if reduction == "sum" else e.mean()


def l1_loss(input: Any, target: Any, reduction: str = "mean") -> Tensor:
    """``|input - target|`` (broadcast, with PyTorch's warning when the shapes differ),
    reduced by ``"mean"`` (default), ``"sum"`` or ``"none"``; ``|x|'(0) = 0``."""
    return _pointwise_loss("l1_loss", input, target, reduction, square=False)


def mse_loss(input: Any, target: Any, reduction: str = "mean") -> Tensor:
    """``(input - target)^2`` reduced by ``"mean"`` (default), ``"sum"`` or ``"none"``."""
    return _pointwise_loss("mse_loss", input, target, reduction, square=True)


def _padding_idx(padding_idx: Any, num_embeddings: int, who: str) -> int:
    """PyTorch's rule: None, or an int in ``[-num_embeddings, num_embeddings)``
    (negative counts from the end); returns the row, -1 for none."""
    if padding_idx is None:
        return -1
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)):
        raise TypeError(f"{who}: padding_idx must be None or an int, got "
                        f"{type(padding_idx).__name__}")
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"{who}: padding_idx must be within num_embeddings "
                         f"[{-num_embeddings}, {num_embeddings}), got {padding_idx}")
    return int(padding_idx) % num_embeddings


def embedding(input: Any, weight: Tensor, padding_idx: int | None = None,
              sparse: bool = False) -> Tensor:
    """Rows ``weight[input]``: ``[*input.shape, embedding_dim]`` (PyTorch's
    ``F.embedding``; ``max_norm`` / ``scale_grad_by_freq`` are not supported).

    ``input``: int32/int64 indices of any shape (an rtx tensor, a numpy array, a
    sequence or an ``rtx.IndexPlan`` over ``weight``'s rows), each in ``[0,
    num_embeddings)`` (IndexError otherwise, before anything runs).  The rows of
    ``padding_idx`` get no gradient.  ``sparse=True``: ``weight.grad`` is a
    row-sparse gradient over the rows in ``input`` (``grad.is_sparse``;
    ``rtx.optim.SparseAdam`` updates only those rows).
    """
    if not isinstance(weight, Tensor):
        raise TypeError(f"embedding(): weight must be an rtx.Tensor, got {type(weight).__name__}")
    if weight.ndim != 2:
        raise ValueError(f"embedding(): weight must be 2-D [num_embeddings, embedding_dim], "
                         f"got shape {weight.shape}")
    if not isinstance(sparse, (bool, np.bool_)):
        raise TypeError(f"embedding(): sparse must be a bool, got {type(sparse).__name__}")
    n = weight.shape[0]
    pad = _padding_idx(padding_idx, n, "embedding()")
    if isinstance(input, IndexPlan):
        shape: tuple[int, ...] = (len(input),)
        flat: Any = input
    elif isinstance(input, Tensor):
        shape = input.shape
        flat = input.reshape(-1) if input.ndim != 1 else input
    else:
        a = np.asarray(input)
        if a.dtype == object or a.dtype.kind not in "iu":
            raise TypeError(f"embedding(): indices must be int32 or int64, got {a.dtype}")
        shape, flat = a.shape, a.reshape(-1)
    plan = as_plan(flat, n, "embedding")
    out = weight._ad.apply(OPS["embedding"], weight, plan, padding_idx=pad, sparse=bool(sparse))
    if len(shape) != 1:
        out = out.reshape(*shape, weight.shape[1])
    return out


def _legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    """PyTorch's ``size_average`` / ``reduce`` (deprecated there too) as a reduction."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  "reduction='none' / 'sum' / 'mean' instead.", UserWarning, stacklevel=3)
    if reduce is not None and not reduce:
        return "none"
    return "sum" if size_average is not None and not size_average else "mean"


def _like_input(x: Tensor, v: Any, what: str) -> Tensor:
    """``v`` as a tensor of ``x``'s dtype on ``x``'s backend, broadcastable to ``x``."""
    t = v if isinstance(v, Tensor) else as_tensor(v, x._ad, x.dtype)
    if t.dtype.kind not in "biuf":
        raise TypeError(f"binary_cross_entropy_with_logits(): {what} must be numeric, got "
                        f"{t.dtype}")
    if t.dtype != x.dtype:
        t = t.to(x.dtype)
    try:
        full = np.broadcast_shapes(t.shape, x.shape)
    except ValueError:
        full = None
    if full != x.shape:
        raise ValueError(f"binary_cross_entropy_with_logits(): {what} of size "
                         f"{_size(t.shape)} cannot be broadcast to the input size "
                         f"{_size(x.shape)}")
    return t


def binary_cross_entropy_with_logits(input: Any, target: Any, weight: Any = None,
                                     size_average: bool | None = None,
                                     reduce: bool | None = None, reduction: str = "mean",
                                     pos_weight: Any = None) -> Tensor:
    """Binary cross-entropy of logits ``input`` against probabilities ``target``
    (PyTorch's semantics): per element
    ``-w * [p * y * log(sigmoid(x)) + (1 - y) * log(1 - sigmoid(x))]``.

    ``target`` has ``input``'s shape (ValueError otherwise, as in PyTorch);
    ``weight`` (rescales each element) and ``pos_weight`` (weighs the positive
    term; a ``[C]`` tensor weighs the classes along the last dim) broadcast to
    it.  ``reduction``: ``"mean"`` (default; NaN for an empty input), ``"sum"``
    or ``"none"``; ``size_average`` / ``reduce`` are PyTorch's deprecated forms of
    it.  One fused, stable node (``max(x, 0) - x y + log1p(exp(-|x|))``, never
    ``log(sigmoid(x))``): the gradient is ``w * (sigmoid(x) - y)``; the target,
    ``weight`` and ``pos_weight`` are differentiable too.
    """
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    x = _t(input)
    if x.dtype.kind != "f":
        raise TypeError(f"binary_cross_entropy_with_logits(): input must be a floating "
                        f"point tensor, got {x.dtype}")
    y = target if isinstance(target, Tensor) else as_tensor(target, x._ad, x.dtype)
    if y.shape != x.shape:
        raise ValueError(f"Target size ({_size(y.shape)}) must be the same as input size "
                         f"({_size(x.shape)})")
    y = _like_input(x, y, "target")
    w = None if weight is None else _like_input(x, weight, "weight")
    pw = None if pos_weight is None else _like_input(x, pos_weight, "pos_weight")
    return x._ad.apply(OPS["binary_cross_entropy_with_logits"], x, y, w, pw,
                       reduction=reduction)


__all__ = ["binary_cross_entropy_with_logits", "cross_entropy", "dropout", "embedding",
           "l1_loss", "mse_loss", "nll_loss", *_faces.__all__]
