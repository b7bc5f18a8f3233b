"""Differential tests against PyTorch: elementwise ops, reductions, and the
gradients of random autograd graphs.  They run in the normal suite when torch
is installed and skip (with the reason) when it is not; rtx never needs torch."""

from __future__ import annotations

import numpy as np
import pytest

import rtx

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: the differential tests against it are skipped "
                    "(optional; `pip install torch` to run them)")

DT = {np.float32: (rtx.float32, torch.float32), np.float64: (rtx.float64, torch.float64)}
TOL = {np.float32: {"rtol": 2e-5, "atol": 2e-6}, np.float64: {"rtol": 1e-11, "atol": 1e-12}}
SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 0.5, 2.0, 1e-30])


def _data(rng, shape, dtype, specials=True):
    a = rng.standard_normal(shape).astype(dtype)
    if specials and a.size:
        k = max(1, a.size // 4)
        a.reshape(-1)[rng.integers(0, a.size, k)] = rng.choice(SPECIALS, k)
    return a


def _pair(a, requires_grad=False):
    r = rtx.tensor(a, requires_grad=requires_grad)
    t = torch.tensor(a, requires_grad=requires_grad)
    return r, t


def _same(r, t, dtype, what):
    got = r.numpy() if isinstance(r, rtx.Tensor) else np.asarray(r)
    want = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_allclose(got, want, equal_nan=True, err_msg=what, **TOL[dtype])


UNARY = {
    "neg": (lambda x: -x, lambda x: -x),
    "exp": (rtx.exp, torch.exp),
    "log": (rtx.log, torch.log),
    "sqrt": (rtx.sqrt, torch.sqrt),
    "abs": (rtx.abs, torch.abs),
    "sign": (rtx.sign, torch.sign),
    "relu": (rtx.relu, torch.relu),
    "sigmoid": (rtx.sigmoid, torch.sigmoid),
    "tanh": (rtx.tanh, torch.tanh),
    "elu": (rtx.elu, torch.nn.functional.elu),
    "leaky_relu": (lambda x: rtx.leaky_relu(x, 0.1),
                   lambda x: torch.nn.functional.leaky_relu(x, 0.1)),
}
BINARY = {
    "add": (rtx.add, torch.add),
    "sub": (rtx.sub, torch.sub),
    "mul": (rtx.mul, torch.mul),
    "div": (rtx.div, torch.div),
    "pow": (rtx.pow, torch.pow),
    "maximum": (rtx.maximum, torch.maximum),
    "minimum": (rtx.minimum, torch.minimum),
}
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (5,)), ((0, 3), (3,))]


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_values_and_grads(name, dtype):
    rng = np.random.default_rng(1)
    fr, ft = UNARY[name]
    for shape in [(5, 4), (), (0, 2)]:
        a = _data(rng, shape, dtype)
        r, t = _pair(a, True)
        with np.errstate(all="ignore"):
            yr = fr(r)
        yt = ft(t)
        want = yt
        if name == "sign":  # documented difference: rtx's sign(NaN) is NaN, PyTorch's is 0
            want = torch.where(torch.isnan(t), t, yt).detach()
        _same(yr, want, dtype, f"{name} forward")
        g = _data(rng, shape, dtype, specials=False)
        with np.errstate(all="ignore"):
            yr.backward(rtx.tensor(g))
        yt.backward(torch.tensor(g))
        if name in ("abs", "sqrt", "log") and not np.all(np.isfinite(a)):
            # at +-inf / 0 the two libraries' inf * 0 conventions may differ: compare finite
            mask = np.isfinite(a) & (a != 0)
            np.testing.assert_allclose(r.grad.numpy()[mask], t.grad.numpy()[mask],
                                       equal_nan=True, **TOL[dtype])
        else:
            _same(r.grad, t.grad, dtype, f"{name} grad")


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binary_values_and_grads(name, dtype):
    rng = np.random.default_rng(2)
    fr, ft = BINARY[name]
    for sa, sb in SHAPES:
        a = _data(rng, sa, dtype)
        b = _data(rng, sb, dtype)
        if name == "pow":
            a = np.abs(a) + 0.1          # real results only; 0**0 is tested separately
            b = np.where(np.isfinite(b), b, 2.0).astype(dtype)
            a = np.where(np.isfinite(a), a, 3.0).astype(dtype)
        ra, ta = _pair(a, True)
        rb, tb = _pair(b, True)
        with np.errstate(all="ignore"):
            yr = fr(ra, rb)
            yt = ft(ta, tb)
            _same(yr, yt, dtype, f"{name}{sa}{sb} forward")
            g = _data(rng, yt.shape, dtype, specials=False)
            yr.backward(rtx.tensor(g))
            yt.backward(torch.tensor(g))
        _same(ra.grad, ta.grad, dtype, f"{name}{sa}{sb} grad a")
        _same(rb.grad, tb.grad, dtype, f"{name}{sa}{sb} grad b")


def test_pow_gradients_at_zero_match_torch():
    a = np.array([0.0, 0.0, 0.0, 2.0, 0.0])
    b = np.array([0.0, 1.0, 2.0, 0.0, 0.5])
    ra, ta = _pair(a, True)
    rb, tb = _pair(b, True)
    with np.errstate(all="ignore"):
        (ra ** rb).sum().backward()
    (ta ** tb).sum().backward()
    _same(ra.grad, ta.grad, np.float64, "pow grad a")
    _same(rb.grad, tb.grad, np.float64, "pow grad b")


REDUCE = ["sum", "mean", "amax", "amin"]


@pytest.mark.parametrize("name", REDUCE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reductions_values_and_grads(name, dtype):
    rng = np.random.default_rng(3)
    for shape, dim, keepdim in [((3, 4), None, False), ((3, 4), 1, True), ((2, 3, 4), (0, 2),
                                False), ((3, 4), -1, False), ((), 0, False), ((0, 3), 1, False),
                                ((4, 5), 0, True)]:
        a = rng.standard_normal(shape).astype(dtype)
        if a.size > 3:
            a.reshape(-1)[1] = a.reshape(-1)[2]       # a tie for amax/amin
        r, t = _pair(a, True)
        if dim is None:
            yr, yt = getattr(r, name)(), getattr(t, name)()
        else:
            yr, yt = getattr(r, name)(dim, keepdim), getattr(t, name)(dim, keepdim)
        _same(yr, yt, dtype, f"{name}{shape} dim={dim}")
        if yt.numel():
            g = rng.standard_normal(tuple(yt.shape)).astype(dtype)
            yr.backward(rtx.tensor(g))
            yt.backward(torch.tensor(g))
            _same(r.grad, t.grad, dtype, f"{name}{shape} dim={dim} grad")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_family_and_max_dim(dtype):
    rng = np.random.default_rng(4)
    for shape, dim in [((3, 5), -1), ((2, 3, 4), 1), ((), 0), ((4,), 0)]:
        a = rng.standard_normal(shape).astype(dtype)
        for name in ("softmax", "log_softmax"):
            r, t = _pair(a, True)
            yr, yt = getattr(r, name)(dim), getattr(t, name)(dim)
            _same(yr, yt, dtype, f"{name}{shape}")
            g = rng.standard_normal(shape).astype(dtype)
            yr.backward(rtx.tensor(g))
            yt.backward(torch.tensor(g))
            _same(r.grad, t.grad, dtype, f"{name}{shape} grad")
        r, t = _pair(a, True)
        (vr, ir), (vt, it) = r.max(dim), t.max(dim)
        _same(vr, vt, dtype, "max values")
        assert ir.tolist() == it.tolist()


def _random_graph(lib, leaves, rng_ops):
    """The same random op sequence on rtx or torch tensors (ops keep values finite)."""
    pool = list(leaves)
    for kind, i, j, c in rng_ops:
        x, y = pool[i % len(pool)], pool[j % len(pool)]
        if kind == 0:
            z = x + y
        elif kind == 1:
            z = x * y
        elif kind == 2:
            z = x - c * y
        elif kind == 3:
            z = x.tanh()
        elif kind == 4:
            z = x.sigmoid() * y
        elif kind == 5:
            z = (x * x + 1.0).sqrt()
        elif kind == 6:
            z = x.relu() + y
        elif kind == 7:
            z = (x @ y.T if lib is rtx else x @ y.T).tanh()
            z = z.sum(1, keepdim=True) * y
        elif kind == 8:
            z = x.softmax(-1) * y
        elif kind == 9:
            z = lib.maximum(x, y) - lib.minimum(x, c * y)
        elif kind == 10:
            z = x / (y * y + 1.0)
        else:
            z = x.exp().mean(0, keepdim=True) * y
        pool.append(z)
    return sum(p.sum() for p in pool[len(leaves):]) + pool[-1].amax()


@pytest.mark.parametrize("seed", range(12))
def test_random_autograd_graphs_match_torch(seed):
    rng = np.random.default_rng(100 + seed)
    n_leaves = 3
    vals = [rng.standard_normal((4, 5)) * 0.5 for _ in range(n_leaves)]
    ops = [(int(rng.integers(0, 12)), int(rng.integers(0, 99)), int(rng.integers(0, 99)),
            float(rng.uniform(-2, 2))) for _ in range(20)]
    rl = [rtx.tensor(v, requires_grad=True) for v in vals]
    tl = [torch.tensor(v, requires_grad=True) for v in vals]
    out_r = _random_graph(rtx, rl, ops)
    out_t = _random_graph(torch, tl, ops)
    _same(out_r, out_t, np.float64, "graph output")
    out_r.backward()
    out_t.backward()
    for i, (a, b) in enumerate(zip(rl, tl, strict=True)):
        if b.grad is None:
            assert a.grad is None
        else:
            _same(a.grad, b.grad, np.float64, f"leaf {i} grad")


def test_nan_gradient_conventions_match_torch():
    nan = float("nan")
    a = np.array([1.0, nan, -3.0, 0.0])
    for fr, ft in ((lambda x: x.relu(), lambda x: x.relu()),
                   (lambda x: x.max(), lambda x: x.max()),
                   (lambda x: x.reshape(2, 2).max(1)[0], lambda x: x.reshape(2, 2).max(1)[0])):
        r, t = _pair(a, True)
        fr(r).sum().backward()
        ft(t).sum().backward()
        _same(r.grad, t.grad, np.float64, "nan grad")
    b = np.array([2.0, 2.0, nan, 0.0])
    for name in ("maximum", "minimum"):
        ra, ta = _pair(a, True)
        rb, tb = _pair(b, True)
        getattr(rtx, name)(ra, rb).sum().backward()
        getattr(torch, name)(ta, tb).sum().backward()
        _same(ra.grad, ta.grad, np.float64, f"{name} nan grad a")
        _same(rb.grad, tb.grad, np.float64, f"{name} nan grad b")


def test_inplace_version_errors_match_torch():
    """Both libraries refuse the same stale saved tensor."""
    for lib in (rtx, torch):
        x = lib.ones(3, requires_grad=True)
        w = lib.ones(3)
        y = (x * w).sum()
        with lib.no_grad():
            w.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()


def test_inplace_cast_errors_match_torch():
    for f in (rtx.tensor, torch.tensor):
        t = f([1, 2])
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                               "output type Long"):
            t.add_(1.5)
