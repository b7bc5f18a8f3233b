"""``gradcheck`` and ``check_adjoint``: verify gradients against finite differences.

``gradcheck`` follows ``torch.autograd.gradcheck``: for every input tensor that
requires grad it builds the numerical Jacobian by central differences (the
quotients are formed in float64; float32 inputs draw a warning because their
perturbations are too coarse for the default tolerances), builds the analytical
Jacobian with one backward per output element, runs that backward twice and
requires the two results to agree exactly (``nondet_tol``), and compares
``|analytical - numerical| <= atol + rtol * |numerical|`` element by element.
``fast_mode=True`` instead compares ``v^T J u`` for random unit vectors ``u``
(per input) and ``v`` (over the outputs): one backward and two evaluations per
input, for large inputs.  The user's tensors are never modified: the check runs
on copies, and their ``.grad`` is left untouched.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._autodiff.grad_mode import no_grad
from ..creation import from_numpy
from ..tensor import Tensor
from .graph import grad as autograd_grad


class GradcheckError(RuntimeError):
    """A gradient check failed (the message names the input and the worst element)."""



def _outputs(res: Any) -> list[Any]:
    outs: list[Any] | None
    if isinstance(res, Tensor):
        outs = [res]
    else:
        outs = list(res) if isinstance(res, (tuple, list)) else None
    if outs is None or not all(isinstance(o, Tensor) for o in outs):
        raise TypeError("gradcheck: fn must return a Tensor or a tuple/list of Tensors")
    return outs


def _fmt_index(shape: tuple[int, ...], flat: int) -> str:
    if not shape:
        return "()"
    return str(tuple(int(i) for i in np.unravel_index(flat, shape)))


class _Problem:
    """What gradcheck differentiates: which inputs, which outputs, how to rebuild them."""

    def __init__(self, fn: Callable[..., Any], inputs: Any) -> None:
        self.fn = fn
        self.inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
        self.diff = [
            i for i, x in enumerate(self.inputs) if isinstance(x, Tensor) and x.requires_grad
        ]
        if not self.diff:
            raise ValueError(
                "gradcheck expects at least one input tensor to require gradient "
                "(call requires_grad_() on the inputs to check)"
            )
        ads = {id(self.inputs[i]._ad) for i in self.diff}
        if len(ads) != 1:
            raise TypeError("gradcheck: the inputs live on different backends")
        self.ad = self.inputs[self.diff[0]]._ad
        self.host = {}
        for i in self.diff:
            x = self.inputs[i]
            if x.dtype.kind != "f":
                raise TypeError(f"gradcheck: input {i} requires grad but has dtype {x.dtype}")
            if x.dtype != np.float64:
                warnings.warn(
                    f"gradcheck: input {i} requires gradient and is not a double precision "
                    f"floating point tensor ({x.dtype}); finite differences at this precision "
                    "are unreliable. Check gradients in float64.",
                    UserWarning,
                    stacklevel=3,
                )
            self.host[i] = np.array(x.numpy(), copy=True)

    def args(self, values: dict[int, np.ndarray], requires_grad: bool) -> list[Any]:
        B = self.ad.inner
        args = list(self.inputs)
        for i in self.diff:
            t = Tensor._make(B.copy(B.from_numpy(np.array(values[i], order="C"))), self.ad)
            if requires_grad:
                t.requires_grad_(True)
            args[i] = t
        return args

    def evaluate(self, values: dict[int, np.ndarray]) -> np.ndarray:
        """The differentiable outputs, flattened and concatenated in float64."""
        with no_grad():
            outs = _outputs(self.fn(*self.args(values, False)))
        parts = [np.asarray(o.numpy(), dtype=np.float64).reshape(-1)
                 for o in outs if o.dtype.kind == "f"]
        return np.concatenate(parts) if parts else np.zeros(0)

    def output_layout(self, outs: list[Any]) -> list[tuple[int, Any, int]]:
        """(output index, tensor, offset in the flat vector) of the differentiable outputs."""
        lay, off = [], 0
        for k, o in enumerate(outs):
            if o.dtype.kind == "f":
                lay.append((k, o, off))
                off += o.numel()
        return lay

    def locate_output(self, outs_shapes: list[tuple[int, tuple[int, ...], int]], row: int) -> str:
        for k, shape, off in outs_shapes:
            n = int(np.prod(shape, dtype=np.int64))
            if off <= row < off + n:
                return f"output {k} element {_fmt_index(shape, row - off)}"
        return f"output row {row}"


def _analytical(prob: _Problem, args: list[Any], outs: list[Any]) -> dict[int, np.ndarray]:
    """Full Jacobians d(flat outputs)/d(flat input i), one backward per output element."""
    B = prob.ad.inner
    lay = prob.output_layout(outs)
    n_out = sum(o.numel() for _, o, _ in lay)
    jac = {i: np.zeros((n_out, prob.host[i].size)) for i in prob.diff}
    ins = [args[i] for i in prob.diff]
    for _, o, off in lay:
        if not o.requires_grad:
            continue
        shape, dt = o.shape, o.dtype
        for m in range(o.numel()):
            go = np.zeros(shape, dtype=dt)
            go.reshape(-1)[m] = 1
            gt = Tensor._make(B.from_numpy(go), prob.ad)
            grads = autograd_grad(o, ins, grad_outputs=gt, retain_graph=True, allow_unused=True)
            for i, g in zip(prob.diff, grads, strict=True):
                if g is not None:
                    jac[i][off + m] = np.asarray(g.numpy(), dtype=np.float64).reshape(-1)
    return jac


def _numerical(prob: _Problem, i: int, eps: float) -> np.ndarray:
    """d(flat outputs)/d(flat input i) by central differences."""
    x = prob.host[i]
    cols = []
    for j in range(x.size):
        vals = dict(prob.host)
        xp = x.copy()
        xp.reshape(-1)[j] += eps
        vals[i] = xp
        fp = prob.evaluate(vals)
        xm = x.copy()
        xm.reshape(-1)[j] -= eps
        vals[i] = xm
        fm = prob.evaluate(vals)
        cols.append((fp - fm) / (2 * eps))
    if not cols:
        return np.zeros((prob.evaluate(prob.host).size, 0))
    return np.stack(cols, axis=1)


def _fail(msg: str, raise_exception: bool) -> bool:
    if raise_exception:
        raise GradcheckError(msg)
    return False


def _compare_full(
    prob: _Problem,
    i: int,
    ana: np.ndarray,
    num: np.ndarray,
    atol: float,
    rtol: float,
    out_shapes: list[tuple[int, tuple[int, ...], int]],
) -> str | None:
    if ana.shape != num.shape:
        return (
            f"Jacobian shape mismatch for input {i}: analytical {ana.shape} vs "
            f"numerical {num.shape} (does fn return the same outputs every call?)"
        )
    err = np.abs(ana - num)
    excess = err - (atol + rtol * np.abs(num))
    bad = ~(excess <= 0)  # NaN counts as a failure
    if not bad.any():
        return None
    score = np.where(np.isnan(excess), np.inf, excess)
    r, c = np.unravel_index(int(np.argmax(score)), score.shape)
    shape = prob.inputs[i].shape
    return (
        f"Jacobian mismatch for input {i} (shape {shape}): {int(bad.sum())} of {bad.size} "
        f"entries differ beyond atol={atol}, rtol={rtol}.\n"
        f"Worst: d({prob.locate_output(out_shapes, int(r))}) / d(input {i} element "
        f"{_fmt_index(shape, int(c))}): analytical {float(ana[r, c])!r}, "
        f"numerical {float(num[r, c])!r}, |difference| {float(err[r, c])!r}.\n"
        f"Max |difference| over all entries: {float(np.nanmax(err)) if err.size else 0.0!r}."
    )


def gradcheck(
    fn: Callable[..., Any],
    inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    fast_mode: bool = False,
    *,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    seed: int = 0,
) -> bool:
    """Check the gradients of ``fn(*inputs)`` against central finite differences.

    ``inputs``: a tensor or a tuple of arguments; the tensors among them that
    require grad are checked (use float64).  ``fn`` returns a tensor or a tuple
    of tensors; its floating point outputs are differentiated.  Returns
    ``True``, or raises ``GradcheckError`` naming the input and the worst
    element (returns ``False`` instead when ``raise_exception=False``).
    """
    prob = _Problem(fn, inputs)
    args = prob.args(prob.host, True)
    outs = _outputs(fn(*args))
    lay = prob.output_layout(outs)
    out_shapes = [(k, o.shape, off) for k, o, off in lay]
    if fast_mode:
        return _fast(prob, args, outs, out_shapes, eps, atol, rtol, raise_exception,
                     nondet_tol, seed)
    ana = _analytical(prob, args, outs)
    again = _analytical(prob, args, outs)
    for i in prob.diff:
        diff = np.abs(ana[i] - again[i])
        if diff.size and not (np.nanmax(diff) <= nondet_tol or
                              np.array_equal(ana[i], again[i], equal_nan=True)):
            return _fail(
                f"Backward is not deterministic for input {i}: two backward passes through the "
                f"same graph differ by up to {float(np.nanmax(diff))!r} "
                f"(nondet_tol={nondet_tol}).",
                raise_exception,
            )
    for i in prob.diff:
        msg = _compare_full(prob, i, ana[i], _numerical(prob, i, eps), atol, rtol, out_shapes)
        if msg is not None:
            return _fail(msg, raise_exception)
    return True


def _fast(
    prob: _Problem,
    args: list[Any],
    outs: list[Any],
    out_shapes: list[tuple[int, tuple[int, ...], int]],
    eps: float,
    atol: float,
    rtol: float,
    raise_exception: bool,
    nondet_tol: float,
    seed: int,
) -> bool:
    B = prob.ad.inner
    rng = np.random.default_rng(seed)
    lay = prob.output_layout(outs)
    n_out = sum(o.numel() for _, o, _ in lay)
    v = rng.standard_normal(n_out)
    if n_out:
        v /= np.linalg.norm(v)
    tracked = [(o, off) for _, o, off in lay if o.requires_grad]
    ins = [args[i] for i in prob.diff]

    def vjp() -> list[np.ndarray]:
        res = [np.zeros(prob.host[i].size) for i in prob.diff]
        if not tracked:
            return res
        gos = [
            Tensor._make(B.from_numpy(np.array(
                v[off:off + o.numel()].reshape(o.shape), dtype=o.dtype, order="C")), prob.ad)
            for o, off in tracked
        ]
        grads = autograd_grad([o for o, _ in tracked], ins, grad_outputs=gos,
                              retain_graph=True, allow_unused=True)
        for r, g in zip(res, grads, strict=True):
            if g is not None:
                r[:] = np.asarray(g.numpy(), dtype=np.float64).reshape(-1)
        return res

    first, second = vjp(), vjp()
    for i, a, b in zip(prob.diff, first, second, strict=True):
        d = np.abs(a - b)
        if d.size and not (np.nanmax(d) <= nondet_tol or np.array_equal(a, b, equal_nan=True)):
            return _fail(
                f"Backward is not deterministic for input {i}: two backward passes through the "
                f"same graph differ by up to {float(np.nanmax(d))!r} (nondet_tol={nondet_tol}).",
                raise_exception,
            )
    for i, vj in zip(prob.diff, first, strict=True):
        x = prob.host[i]
        u = rng.standard_normal(x.size)
        if x.size:
            u /= np.linalg.norm(u)
        vals = dict(prob.host)
        vals[i] = (x.reshape(-1) + eps * u).astype(x.dtype).reshape(x.shape)
        fp = prob.evaluate(vals)
        vals[i] = (x.reshape(-1) - eps * u).astype(x.dtype).reshape(x.shape)
        fm = prob.evaluate(vals)
        num = float(v @ ((fp - fm) / (2 * eps)))
        ana = float(vj @ u)
        if not abs(ana - num) <= atol + rtol * abs(num):
            msg = (
                f"Fast gradcheck failed for input {i} (shape {prob.inputs[i].shape}): "
                f"v^T J u analytical {ana!r} vs numerical {num!r} "
                f"(atol={atol}, rtol={rtol})."
            )
            if x.size * n_out <= 250_000:  # small enough: name the worst element
                full = _compare_full(prob, i, _analytical(prob, args, outs)[i],
                                     _numerical(prob, i, eps), atol, rtol, out_shapes)
                if full is not None:
                    msg += "\nSlow-mode recheck: " + full
            return _fail(msg, raise_exception)
    return True


def check_adjoint(
    f: Callable[[Any], Any],
    g: Callable[[Any], Any],
    x_shape: Sequence[int],
    y_shape: Sequence[int],
    *,
    dtype: Any = np.float64,
    atol: float | None = None,
    rtol: float | None = None,
    trials: int = 3,
    seed: int = 0,
) -> bool:
    """Check that linear maps ``f: X -> Y`` and ``g: Y -> X`` are adjoint:
    ``<f(x), y> == <x, g(y)>`` for random ``x`` of ``x_shape`` and ``y`` of
    ``y_shape`` (tensors of ``dtype`` on the current default backend).

    The tolerance is ``atol + rtol * (|f(x)| |y| + |x| |g(y)|)`` (norms:
    the Cauchy-Schwarz scale of both sides); defaults ``rtol`` 1e-10 in float64,
    1e-4 in float32, ``atol`` 0.  Returns ``True`` or raises ``GradcheckError``.
    """
    dt = np.dtype(dtype)
    if rtol is None:
        rtol = 1e-10 if dt == np.float64 else 1e-4
    if atol is None:
        atol = 0.0
    rng = np.random.default_rng(seed)
    xs, ys = tuple(x_shape), tuple(y_shape)
    for trial in range(trials):
        x = rng.standard_normal(xs).astype(dt)
        y = rng.standard_normal(ys).astype(dt)
        with no_grad():
            fx = f(from_numpy(np.array(x, copy=True)))
            gy = g(from_numpy(np.array(y, copy=True)))
        fxa = np.asarray(fx.numpy(), dtype=np.float64)
        gya = np.asarray(gy.numpy(), dtype=np.float64)
        if fxa.shape != ys:
            raise GradcheckError(f"check_adjoint: f(x) has shape {fxa.shape}, expected {ys}")
        if gya.shape != xs:
            raise GradcheckError(f"check_adjoint: g(y) has shape {gya.shape}, expected {xs}")
        x64, y64 = x.astype(np.float64), y.astype(np.float64)
        lhs = float(np.sum(fxa * y64))
        rhs = float(np.sum(x64 * gya))
        scale = (np.linalg.norm(fxa) * np.linalg.norm(y64)
                 + np.linalg.norm(x64) * np.linalg.norm(gya))
        if not abs(lhs - rhs) <= atol + rtol * scale:
            raise GradcheckError(
                f"check_adjoint: <f(x), y> = {lhs!r} but <x, g(y)> = {rhs!r} "
                f"(|difference| {abs(lhs - rhs)!r} > atol + rtol * scale = "
                f"{atol + rtol * scale!r}, trial {trial}, seed {seed})"
            )
    return True
