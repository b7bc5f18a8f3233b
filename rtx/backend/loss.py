"""Fused loss kernels: cross-entropy from logits and NLL from log-probabilities.

Rows are ``[N, C]``; ``target`` is a host int64 array of ``N`` class indices,
each in ``[0, C)`` (checked again here, on a private copy: ``IndexError``; the
caller substitutes a valid class for ignored rows and gives them zero ``scale``).
Defaults are host round-trips through numpy (vectorised ``exp``; a scalar-``exp``
OpenMP kernel measured 3x slower, see docs/nn.md); a backend may override them.

``cross_entropy_forward(x, target) -> (loss, stats)``: with the row max
``m[i]`` and ``l[i] = log sum_j exp(x[i, j] - m[i])`` (the stable log-sum-exp
``m + l``), ``loss[i] = l[i] - (x[i, target[i]] - m[i])``, in one pass, never
through ``log(softmax)``; ``stats`` is ``[N, 2]`` = ``(m, l)`` per row, kept for
the backward.  ``cross_entropy_backward(x, stats, target, scale)``:
``(softmax(x) - onehot) * scale[:, None]`` with ``softmax = exp((x - m) - l)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._family import Family
from ._host import contiguous
from .index import check_bounds


def check_rows_target(shape: tuple[int, ...], target: Any, op: str) -> np.ndarray:
    """``target`` as a private int64 copy after checking it against rows of ``shape``
    (``[N, C]``): 1-D of length N, every entry in ``[0, C)`` (IndexError)."""
    if len(shape) != 2:
        raise ValueError(f"{op}(): expected [N, C] rows, got shape {shape}")
    t = np.array(target, dtype=np.int64, copy=True)  # private: nothing else can change it
    if t.ndim != 1 or t.shape[0] != shape[0]:
        raise ValueError(f"{op}(): target must have shape ({shape[0]},), got {t.shape}")
    check_bounds(t, shape[1], op)
    return t


def _flat_index(target: np.ndarray, n: int, c: int) -> np.ndarray:
    """Positions of ``(i, target[i])`` in a C-contiguous ``[n, c]`` array."""
    return np.arange(n, dtype=np.int64) * c + target


def np_cross_entropy_forward(x: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.ascontiguousarray(x)
    n, c = x.shape
    if n == 0:
        return np.zeros(0, x.dtype), np.zeros((0, 2), x.dtype)
    stats = np.empty((n, 2), x.dtype)
    m = stats[:, 0]
    np.max(x, axis=1, out=m)
    z = np.subtract(x, m[:, None])
    # (x_t - m), read before the exp: l - (x_t - m) keeps l's digits next to a large m
    picked = z.reshape(-1)[_flat_index(target, n, c)]
    np.exp(z, out=z)
    logs = stats[:, 1]
    np.log(np.sum(z, axis=1), out=logs)
    return np.subtract(logs, picked), stats


def np_cross_entropy_backward(x: np.ndarray, stats: np.ndarray, target: np.ndarray,
                              scale: np.ndarray) -> np.ndarray:
    n, c = x.shape
    g = np.subtract(x, stats[:, :1])
    g -= stats[:, 1:]
    np.exp(g, out=g)
    g.reshape(-1)[_flat_index(target, n, c)] -= 1
    g *= np.asarray(scale, dtype=g.dtype)[:, None]
    return g


def np_nll_forward(x: np.ndarray, target: np.ndarray) -> np.ndarray:
    return np.negative(x[np.arange(x.shape[0]), target])


def np_nll_backward(scale: np.ndarray, target: np.ndarray, shape: tuple[int, ...],
                    dtype: np.dtype) -> np.ndarray:
    g = np.zeros(shape, dtype)
    g[np.arange(shape[0]), target] = -scale
    return g


class LossOps(Family):
    FAMILY = "loss"  # its ops: the public methods below (``_family.py``)

    def cross_entropy_forward(self, x: Any, target: np.ndarray) -> tuple[Any, Any]:
        target = check_rows_target(tuple(self.shape(x)), target, "cross_entropy_forward")  # type: ignore[attr-defined]
        loss, stats = np_cross_entropy_forward(self._h(x), target)
        fn = self.from_numpy  # type: ignore[attr-defined]
        return fn(contiguous(loss)), fn(contiguous(stats))

    def cross_entropy_backward(self, x: Any, stats: Any, target: np.ndarray, scale: Any) -> Any:
        target = check_rows_target(tuple(self.shape(x)), target, "cross_entropy_backward")  # type: ignore[attr-defined]
        return self._host(lambda a, s, c: np_cross_entropy_backward(a, s, target, c),
                          x, stats, scale)

    def nll_forward(self, x: Any, target: np.ndarray) -> Any:
        target = check_rows_target(tuple(self.shape(x)), target, "nll_forward")  # type: ignore[attr-defined]
        return self._host(lambda a: np_nll_forward(a, target), x)

    def nll_backward(self, scale: Any, target: np.ndarray, shape: tuple[int, ...]) -> Any:
        dt = np.dtype(self.dtype(scale))  # type: ignore[attr-defined]
        target = check_rows_target(tuple(shape), target, "nll_backward")
        return self._host(lambda s: np_nll_backward(s, target, shape, dt), scale)
