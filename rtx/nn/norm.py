"""Normalisation layers: PyTorch's ``LayerNorm`` and ``BatchNorm1d``, and PyG's
graph-wise layer norm (``torch_geometric.nn.norm.LayerNorm``) as ``GraphLayerNorm``.

Same arguments, defaults, parameter and buffer names, shapes and statistics as
PyTorch / PyG, so their ``state_dict`` s load as is.  Composed from rtx's
differentiable ops (mean, products, ``sqrt``; the segment ops for per-graph
statistics), so every gradient is the exact derivative of the forward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..autograd.grad_mode import no_grad
from ..creation import full, tensor, zeros
from ..functional import index_select, sqrt
from ..graph_ops import segment_sum
from ..tensor import Tensor, int64
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["BatchNorm1d", "GraphLayerNorm", "LayerNorm"]


def _positive_float(v: Any, name: str, layer: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(v)) or float(v) < 0:
        raise ValueError(f"{layer}: {name} must be a finite number >= 0, got {v!r}")
    return float(v)


def _check_float(x: Any, layer: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{layer}: input must be an rtx.Tensor, got {type(x).__name__}")
    if x.dtype.kind != "f":
        raise TypeError(f"{layer}: input must be float32 or float64, got {x.dtype}")
    return x


class LayerNorm(Module):
    r"""PyTorch's ``LayerNorm``: over the last ``len(normalized_shape)`` dims,

    ``y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias``

    with the biased variance.  ``weight`` (ones) and ``bias`` (zeros) have
    ``normalized_shape``; ``elementwise_affine=False`` has neither, ``bias=False``
    no ``bias`` (PyTorch's names).  The input's trailing dims must equal
    ``normalized_shape`` (``ValueError`` otherwise).
    """

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True,
                 dtype: Any = None) -> None:
        super().__init__()
        ns = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) \
            else tuple(normalized_shape)
        if not ns or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1
                         for d in ns):
            raise ValueError(f"LayerNorm: normalized_shape must be an int >= 1 or a non-empty "
                             f"sequence of them, got {normalized_shape!r}")
        self.normalized_shape = tuple(int(d) for d in ns)
        self.eps = _positive_float(eps, "eps", "LayerNorm")
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight: Parameter | None = Parameter(full(self.normalized_shape, 1.0,
                                                           dtype=dtype))
            if bias:
                self.bias: Parameter | None = Parameter(zeros(*self.normalized_shape,
                                                              dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        x = _check_float(input, "LayerNorm")
        k = len(self.normalized_shape)
        if x.ndim < k or tuple(x.shape[x.ndim - k:]) != self.normalized_shape:
            raise ValueError(f"LayerNorm: expected an input with shape [*, "
                             f"{', '.join(map(str, self.normalized_shape))}], got {x.shape}")
        dims = tuple(range(x.ndim - k, x.ndim))
        xc = x - x.mean(dims, keepdim=True)
        var = (xc * xc).mean(dims, keepdim=True)
        out = xc / sqrt(var + self.eps)
        if self.weight is not None:
            out = out * self.weight
        if self.bias is not None:
            out = out + self.bias
        return out

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class BatchNorm1d(Module):
    r"""PyTorch's ``BatchNorm1d`` over ``[N, C]`` or ``[N, C, L]`` input.

    Training (or ``track_running_stats=False``): normalise with the batch's
    mean and biased variance per channel, and (when tracking) update
    ``running_mean`` / ``running_var`` with ``momentum`` (``None``: the
    cumulative average, ``1 / num_batches_tracked``), the running variance from
    the *unbiased* batch variance; ``num_batches_tracked`` counts the updates.
    Evaluation with tracked statistics normalises with the running ones.
    ``weight`` (ones) and ``bias`` (zeros) when ``affine``.  Buffers and
    parameters have PyTorch's names (``running_mean``, ``running_var``,
    ``num_batches_tracked`` (int64, 0-d)), so a torch ``state_dict`` loads as is.
    Training with one value per channel is a ``ValueError`` (as PyTorch).
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 dtype: Any = None) -> None:
        super().__init__()
        if isinstance(num_features, bool) or not isinstance(num_features, (int, np.integer)) \
                or num_features < 1:
            raise ValueError(f"BatchNorm1d: num_features must be an int >= 1, got "
                             f"{num_features!r}")
        self.num_features = int(num_features)
        self.eps = _positive_float(eps, "eps", "BatchNorm1d")
        self.momentum = None if momentum is None else _positive_float(momentum, "momentum",
                                                                      "BatchNorm1d")
        self.affine = bool(affine)
        self.track_running_stats = bool(track_running_stats)
        C = self.num_features
        if self.affine:
            self.weight: Parameter | None = Parameter(full((C,), 1.0, dtype=dtype))
            self.bias: Parameter | None = Parameter(zeros(C, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", zeros(C, dtype=dtype))
            self.register_buffer("running_var", full((C,), 1.0, dtype=dtype))
            self.register_buffer("num_batches_tracked", zeros((), dtype=int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        x = _check_float(input, "BatchNorm1d")
        if x.ndim not in (2, 3):
            raise ValueError(f"BatchNorm1d: expected 2D or 3D input (got {x.ndim}D input)")
        if x.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm1d: expected {self.num_features} channels (input "
                             f"dim 1), got shape {x.shape}")
        dims = (0,) if x.ndim == 2 else (0, 2)
        n = x.shape[0] * (1 if x.ndim == 2 else x.shape[2])
        use_batch = self.training or not self.track_running_stats
        if self.training and n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {list(x.shape)}")
        shape = (1, self.num_features) if x.ndim == 2 else (1, self.num_features, 1)
        if use_batch:
            mean = x.mean(dims, keepdim=True)
            xc = x - mean
            var = (xc * xc).mean(dims, keepdim=True)
            if self.training and self.track_running_stats:
                self._update_running(mean, var, n)
            out = xc / sqrt(var + self.eps)
        else:
            rm = self.running_mean.to(x.dtype).reshape(shape)
            rv = self.running_var.to(x.dtype).reshape(shape)
            out = (x - rm) / sqrt(rv + self.eps)
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        if self.bias is not None:
            out = out + self.bias.reshape(shape)
        return out

    def _update_running(self, mean: Tensor, var: Tensor, n: int) -> None:
        with no_grad():
            self.num_batches_tracked.add_(1)
            f = (1.0 / float(self.num_batches_tracked.item()) if self.momentum is None
                 else self.momentum)
            m = mean.detach().reshape(self.num_features).to(self.running_mean.dtype)
            v = (var.detach().reshape(self.num_features) * (n / (n - 1))).to(
                self.running_var.dtype)
            self.running_mean.mul_(1.0 - f).add_(m * f)
            self.running_var.mul_(1.0 - f).add_(v * f)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class GraphLayerNorm(Module):
    r"""PyG's ``torch_geometric.nn.norm.LayerNorm(in_channels, eps, affine, mode)``
    (named apart from PyTorch's ``LayerNorm``).

    ``mode="graph"`` (PyG's default): each graph of the batch is normalised as
    one unit, over all its nodes and channels: ``x - mean`` divided by
    ``std + eps`` (biased std, eps outside the root) without ``batch``, by
    ``sqrt(var + eps)`` per graph with ``batch`` (PyG's two formulas);
    ``mode="node"``: PyTorch's layer norm over the channels.  ``weight``
    (ones) and ``bias`` (zeros) ``[in_channels]`` when ``affine``.
    """

    def __init__(self, in_channels: int, eps: float = 1e-5, affine: bool = True,
                 mode: str = "graph", dtype: Any = None) -> None:
        super().__init__()
        if isinstance(in_channels, bool) or not isinstance(in_channels, (int, np.integer)) \
                or in_channels < 1:
            raise ValueError(f"GraphLayerNorm: in_channels must be an int >= 1, got "
                             f"{in_channels!r}")
        if mode not in ("graph", "node"):
            raise ValueError(f"GraphLayerNorm: mode must be 'graph' or 'node', got {mode!r}")
        self.in_channels = int(in_channels)
        self.eps = _positive_float(eps, "eps", "GraphLayerNorm")
        self.affine = bool(affine)
        self.mode = mode
        if self.affine:
            self.weight: Parameter | None = Parameter(full((self.in_channels,), 1.0,
                                                           dtype=dtype))
            self.bias: Parameter | None = Parameter(zeros(self.in_channels, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, x: Tensor, batch: Any = None, batch_size: int | None = None) -> Tensor:
        """``x``: ``[N, in_channels]``; ``batch``: the graph of each node (int
        ``[N]``, values in ``[0, batch_size)``), or ``None`` for one graph."""
        x = _check_float(x, "GraphLayerNorm")
        if x.ndim != 2 or x.shape[1] != self.in_channels:
            raise ValueError(f"GraphLayerNorm: x must have shape [N, {self.in_channels}], got "
                             f"{x.shape}")
        if self.mode == "node":
            xc = x - x.mean(-1, keepdim=True)
            out = xc / sqrt((xc * xc).mean(-1, keepdim=True) + self.eps)
        elif batch is None:
            xc = x - x.mean()
            out = xc / (sqrt((xc * xc).mean()) + self.eps)
        else:
            b = np.asarray(batch.numpy() if isinstance(batch, Tensor) else batch)
            if b.ndim != 1 or b.shape[0] != x.shape[0] or (b.size and b.dtype.kind not in "iu"):
                raise ValueError(f"GraphLayerNorm: batch must be an int [{x.shape[0]}] array, "
                                 f"got {b.dtype} {b.shape}")
            if batch_size is None:
                batch_size = int(b.max()) + 1 if b.size else 0
            cnt = np.maximum(np.bincount(b.astype(np.int64), minlength=batch_size)
                             if b.size else np.zeros(batch_size, np.int64), 1)
            if cnt.shape[0] != batch_size:
                raise IndexError(f"GraphLayerNorm: batch holds graph {int(b.max())} but "
                                 f"batch_size is {batch_size}")
            norm = tensor((1.0 / (cnt * x.shape[1])).astype(x.dtype).reshape(-1, 1))
            mean = segment_sum(x, b, batch_size).sum(-1, keepdim=True) * norm
            xc = x - index_select(mean, b)
            var = segment_sum(xc * xc, b, batch_size).sum(-1, keepdim=True) * norm
            out = xc / index_select(sqrt(var + self.eps), b)
        if self.weight is not None:
            out = out * self.weight
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, affine={self.affine}, mode={self.mode})"
