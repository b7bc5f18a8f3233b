"""Fused loss kernels: cross-entropy from logits and NLL from log-probabilities.

Rows are ``[N, C]``; ``target`` is a host int64 array of ``N`` class indices,
each in ``[0, C)`` (checked again here, on a private copy: ``IndexError``; the
caller substitutes a valid class for ignored rows and gives them zero ``scale``).
Defaults are host round-trips: cross-entropy through rtx's row kernels
(rtx/_loss.pxi: each row read once per pass, in vector lanes, a vectorised
``exp`` for float32), NLL through numpy; a backend may override them.

``cross_entropy_forward(x, target) -> (loss, stats)``: with the row max
``m[i]`` and ``l[i] = log sum_j exp(x[i, j] - m[i])`` (the stable log-sum-exp
``m + l``), ``loss[i] = l[i] - (x[i, target[i]] - m[i])``, in one pass, never
through ``log(softmax)``; ``stats`` is ``[N, 2]`` = ``(m, l)`` per row, kept for
the backward.  ``cross_entropy_backward(x, stats, target, scale)``:
``(softmax(x) - onehot) * scale[:, None]`` with ``softmax = exp((x - m) - l)``.

``bce_with_logits_forward(x, target, pos_weight)`` / ``bce_with_logits_backward``:
binary cross-entropy from logits, elementwise and stable:
``max(x, 0) - x * y + log1p(exp(-|x|))``, or with ``pos_weight`` ``p``
``p * y * softplus(-x) + (1 - y) * softplus(x)``; host bodies of numpy's
vectorised ufuncs with few temporaries (an OpenMP kernel with scalar libm
``exp`` / ``log1p`` in double was measured 16x slower: 31 ms vs 1.9 ms for 10^6
float32 logits, load average 5, docs/nn.md).  ``x``, ``target`` and
``pos_weight`` (or None) have one shape and one float dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._kernels import cross_entropy_rows, cross_entropy_rows_backward
from .._threads import get_num_threads
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


def np_cross_entropy_forward(x: np.ndarray, target: np.ndarray, empty: Any
                             ) -> tuple[np.ndarray, np.ndarray]:
    """``(loss, stats)`` of the float32 / float64 rows of ``x`` by rtx's row kernel
    (rtx/_loss.pxi); ``target``: a private, checked int64 copy (one class per row).
    ``empty(shape, dtype)`` allocates the outputs (the backend's ``_host_empty``)."""
    n = x.shape[0]
    x = np.ascontiguousarray(x)
    loss, stats = empty((n,), x.dtype), empty((n, 2), x.dtype)
    cross_entropy_rows(x, target, loss, stats, get_num_threads())
    return loss, stats


def np_cross_entropy_backward(x: np.ndarray, stats: np.ndarray, target: np.ndarray,
                              scale: np.ndarray, empty: Any) -> np.ndarray:
    """``(softmax(x) - onehot) * scale[:, None]`` by the row kernel (``stats`` and
    ``scale`` cast to ``x``'s dtype).  ``empty(shape, dtype)`` allocates the
    gradient (a [N, C] array: the caching allocator's block spares ogbn-mag's 349
    classes a fresh buffer's page faults)."""
    n, c = x.shape
    dt = x.dtype
    g = empty((n, c), dt)
    cross_entropy_rows_backward(
        np.ascontiguousarray(x), np.ascontiguousarray(stats, dtype=dt), target,
        np.ascontiguousarray(np.broadcast_to(np.asarray(scale, dtype=dt), (n,))), g,
        get_num_threads())
    return g


def _check(a: Any, dtype: np.dtype, what: str, shape: tuple[int, ...]) -> np.ndarray:
    h = np.asarray(a)
    if h.shape != shape or h.dtype != dtype:
        raise ValueError(f"bce_with_logits: {what} must be {dtype} of shape {shape}, got "
                         f"{h.dtype} of shape {h.shape}")
    return h


def _bce_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``e = exp(-|x|)`` (never overflows) and ``l = log1p(e)``."""
    e = np.abs(x)
    np.negative(e, out=e)
    np.exp(e, out=e)
    return e, np.log1p(e)


def np_bce_with_logits_forward(x: np.ndarray, y: np.ndarray, pw: np.ndarray | None
                               ) -> np.ndarray:
    """The elementwise loss: ``max(x, 0) - x y + l`` or, with ``pos_weight`` ``p``,
    ``p y (max(-x, 0) + l) + (1 - y) (max(x, 0) + l)`` (no difference of large
    terms), ``l = log1p(exp(-|x|))``; numpy's vectorised ufuncs, in x's dtype."""
    shape, dt = x.shape, x.dtype
    if dt.kind != "f":
        raise TypeError(f"bce_with_logits: expected float input, got {dt}")
    y = _check(y, dt, "target", shape)
    if pw is not None:
        pw = _check(pw, dt, "pos_weight", shape)
    # few temporaries: each fresh 4 MB array costs its page faults (a host body has no
    # caching allocator)
    out = np.abs(x)
    np.negative(out, out=out)
    np.exp(out, out=out)
    np.log1p(out, out=out)                   # l
    t = np.maximum(x, 0)
    if pw is None:
        out += t
        np.multiply(x, y, out=t)
        out -= t                             # max(x, 0) + l - x y
        return out
    u = np.subtract(t, x)                    # max(-x, 0)
    u += out
    u *= pw
    u *= y                                   # p y softplus(-x)
    t += out                                 # softplus(x)
    np.subtract(1, y, out=out)
    out *= t
    out += u
    return out


def np_bce_with_logits_backward(x: np.ndarray, y: np.ndarray, pw: np.ndarray | None,
                                g: np.ndarray, need_target: bool, need_pos_weight: bool
                                ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``g`` times the derivatives: ``sigmoid(x) - y`` or ``(1 - y) sigmoid(x) -
    p y sigmoid(-x)`` for the input; ``-x`` or ``p softplus(-x) - softplus(x)`` for
    the target; ``y softplus(-x)`` for ``pos_weight``.  ``sigmoid(x)`` is
    ``(1 + tanh(x / 2)) / 2``, which cannot overflow."""
    shape, dt = x.shape, x.dtype
    if dt.kind != "f":
        raise TypeError(f"bce_with_logits: expected float input, got {dt}")
    if need_pos_weight and pw is None:
        raise ValueError("bce_with_logits_backward: no pos_weight to differentiate")
    y = _check(y, dt, "target", shape)
    g = _check(g, dt, "grad", shape)
    if pw is not None:
        pw = _check(pw, dt, "pos_weight", shape)
    s = np.multiply(x, 0.5, dtype=dt)
    np.tanh(s, out=s)
    s *= 0.5
    s += 0.5                                 # sigmoid(x) = (1 + tanh(x / 2)) / 2: no overflow
    if pw is None:
        gx = s
        gx -= y
    else:
        sn = np.subtract(1, s, dtype=dt)     # sigmoid(-x)
        gx = np.subtract(1, y, dtype=dt)
        gx *= s
        sn *= pw
        sn *= y
        gx -= sn
    gx *= g
    gy = gp = None
    if need_target or need_pos_weight:
        _, lg = _bce_parts(x)
        pos = np.maximum(x, 0)
        neg = pos - x
        neg += lg                            # softplus(-x)
        if need_target:
            if pw is None:
                gy = np.negative(x)
            else:
                gy = np.multiply(pw, neg)
                gy -= pos
                gy -= lg                     # - softplus(x)
            gy *= g
        if need_pos_weight:
            gp = np.multiply(y, neg)
            gp *= g
    return gx, gy, gp


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
        loss, stats = np_cross_entropy_forward(self._h(x), target, self._host_empty)
        fn = self.from_numpy  # type: ignore[attr-defined]
        return fn(contiguous(loss)), fn(contiguous(stats))

    def cross_entropy_backward(self, x: Any, stats: Any, target: np.ndarray, scale: Any) -> Any:
        target = check_rows_target(tuple(self.shape(x)), target, "cross_entropy_backward")  # type: ignore[attr-defined]
        empty = self._host_empty
        return self._host(lambda a, s, c: np_cross_entropy_backward(a, s, target, c, empty),
                          x, stats, scale)

    def nll_forward(self, x: Any, target: np.ndarray) -> Any:
        target = check_rows_target(tuple(self.shape(x)), target, "nll_forward")  # type: ignore[attr-defined]
        return self._host(lambda a: np_nll_forward(a, target), x)

    def nll_backward(self, scale: Any, target: np.ndarray, shape: tuple[int, ...]) -> Any:
        dt = np.dtype(self.dtype(scale))  # type: ignore[attr-defined]
        target = check_rows_target(tuple(shape), target, "nll_backward")
        return self._host(lambda s: np_nll_backward(s, target, shape, dt), scale)

    def bce_with_logits_forward(self, x: Any, target: Any, pos_weight: Any = None) -> Any:
        h = self._h
        loss = np_bce_with_logits_forward(h(x), h(target),
                                          None if pos_weight is None else h(pos_weight))
        return self.from_numpy(contiguous(loss))  # type: ignore[attr-defined]

    def bce_with_logits_backward(self, x: Any, target: Any, pos_weight: Any, grad: Any,
                                 need_target: bool = False, need_pos_weight: bool = False
                                 ) -> tuple[Any, Any, Any]:
        """``(d/dx, d/dtarget or None, d/dpos_weight or None)`` times ``grad``
        (elementwise, all of ``x``'s shape)."""
        h = self._h
        outs = np_bce_with_logits_backward(h(x), h(target),
                                           None if pos_weight is None else h(pos_weight),
                                           h(grad), need_target, need_pos_weight)
        fn = self.from_numpy  # type: ignore[attr-defined]
        return tuple(None if o is None else fn(contiguous(o)) for o in outs)  # type: ignore[return-value]
