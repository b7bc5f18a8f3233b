"""Dense passes numpy runs on one thread, in rtx/_dense.pxi with numpy's bits: the
CPU backend's float sum over dim 0 of rows of at most 64 columns, and its float
in-place arithmetic on large same-shape operands (the tape's gradient
accumulation)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import spy_calls

import rtx
from rtx import _kernels
from rtx.backend.cpu import creation as cpu_creation
from rtx.backend.cpu import reduction as cpu_reduction

DTYPES = [np.float32, np.float64]




def _data(rng, shape, dt):
    a = (rng.standard_normal(shape) * np.exp(rng.uniform(-8, 8, shape))).astype(dt)
    flat = a.reshape(-1)
    flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return a


# ------------------------------------------------------------------ sum over dim 0
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(70000, 1), (30000, 4), (9000, 17), (5000, 32),
                                   (3000, 64), (2000, 4, 16), (100000, 8)])
def test_sum_over_dim0_is_numpys_sum_on_any_thread_count(dt, shape, monkeypatch):
    calls = spy_calls(monkeypatch, cpu_reduction, "sum_rows")
    rng = np.random.default_rng(sum(shape))
    a = _data(rng, shape, dt)
    a[:, 0] = -0.0                                       # a column of -0.0: numpy gives +0.0
    want = np.add.reduce(a, axis=0)
    B = rtx.CpuBackend()
    for t in (1, 2, 3):
        rtx.set_num_threads(t)
        for dim, keep in [(0, False), ((0,), True), (-a.ndim, False)]:
            got = B.sum(a, dim, keep)
            w = want[None] if keep else want
            assert got.shape == w.shape and got.dtype == w.dtype
            assert got.tobytes() == w.tobytes()
    assert len(calls) == 9


@pytest.mark.parametrize("case", ["wide rows", "strided", "ints", "other dim", "small"])
def test_other_sums_keep_numpy(case, monkeypatch):
    calls = spy_calls(monkeypatch, cpu_reduction, "sum_rows")
    rng = np.random.default_rng(1)
    a, dim = rng.standard_normal((3000, 65)), 0
    if case == "strided":
        a = rng.standard_normal((6000, 128))[:, ::2]
    elif case == "ints":
        a = rng.integers(0, 100, (3000, 64))
    elif case == "other dim":
        a, dim = rng.standard_normal((3000, 64)), 1
    elif case == "small":
        a = rng.standard_normal((100, 64))
    got = rtx.CpuBackend().sum(a, dim)
    assert calls == []
    np.testing.assert_array_equal(got, np.sum(a, axis=dim))


def test_bias_gradient_through_the_tape():
    rtx.set_num_threads(2)
    rng = np.random.default_rng(2)
    x = rtx.tensor(rng.standard_normal((5000, 16)), requires_grad=True)
    b = rtx.tensor(rng.standard_normal(16), requires_grad=True)
    g = rng.standard_normal((5000, 16))
    (x + b).backward(rtx.tensor(g))
    np.testing.assert_array_equal(b.grad.numpy(), np.add.reduce(g, axis=0))


def test_sum_rows_kernel_checks():
    a = np.ones((10, 4))
    with pytest.raises(ValueError, match="columns"):
        _kernels.sum_rows(a, np.zeros(3), 2)
    with pytest.raises(TypeError):
        _kernels.sum_rows(None, np.zeros(4), 2)
    with pytest.raises(TypeError):
        _kernels.sum_rows(a, None, 2)
    buf = np.ones(44)
    with pytest.raises(ValueError, match="overlaps"):
        _kernels.sum_rows(buf[:40].reshape(10, 4), buf[4:8], 2)      # out is a's second row
    with pytest.raises(ValueError, match="overlaps"):
        _kernels.sum_rows(buf[:40].reshape(10, 4), buf[38:42], 2)    # out across the end
    assert (buf == 1).all()
    out = np.full(4, 7.0)
    _kernels.sum_rows(np.zeros((0, 4)), out, 2)
    assert (out == 0).all()
    _kernels.sum_rows(np.zeros((5, 0)), np.zeros(0), 2)


# ------------------------------------------------------------ in-place arithmetic
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op,ufunc", [("add", np.add), ("sub", np.subtract),
                                      ("mul", np.multiply), ("div", np.true_divide)])
def test_inplace_arithmetic_is_numpys_on_any_thread_count(dt, op, ufunc, monkeypatch):
    calls = spy_calls(monkeypatch, cpu_creation, "inplace_arith")
    rng = np.random.default_rng(3)
    dst0 = _data(rng, (700, 500), dt)
    src = _data(rng, (700, 500), dt)
    src.reshape(-1)[10:13] = [0.0, -0.0, np.nan]            # x / 0, x / -0, NaN
    want = dst0.copy()
    with np.errstate(all="ignore"):     # (x / 0, inf - inf: numpy warns, rtx's threads do not)
        ufunc(want, src, out=want)
    for t in (1, 2, 3):
        rtx.set_num_threads(t)
        dst = dst0.copy()
        with np.errstate(all="ignore"):
            got = rtx.CpuBackend().inplace(op, dst, src)
        assert got is dst
        assert dst.tobytes() == want.tobytes()
    assert len(calls) == 2                                    # threads 2 and 3


@pytest.mark.parametrize("case", ["aliased", "broadcast", "promoted", "small", "strided"])
def test_other_inplace_ops_keep_numpy(case, monkeypatch):
    rtx.set_num_threads(2)
    calls = spy_calls(monkeypatch, cpu_creation, "inplace_arith")
    rng = np.random.default_rng(4)
    buf = rng.standard_normal(600_000)
    dst, src = buf[:300_000], rng.standard_normal(300_000)
    if case == "aliased":
        src = buf[100_000:400_000]                             # overlaps dst
    elif case == "broadcast":
        dst, src = dst.reshape(3000, 100), rng.standard_normal(100)
    elif case == "promoted":
        src = src.astype(np.float32)
    elif case == "small":
        dst, src = dst[:1000], src[:1000]
    elif case == "strided":
        dst = buf[::2]
    want = dst.copy()
    want += src
    rtx.CpuBackend().inplace("add", dst, src)
    assert calls == []
    np.testing.assert_array_equal(dst, want)


def test_gradient_paths_summed_through_the_fast_path():
    """A tensor used twice gets the sum of both paths (the engine accumulates
    with the in-place add, large enough here for the threaded kernel)."""
    rtx.set_num_threads(2)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((600, 500))
    x = rtx.tensor(a, requires_grad=True)
    (x * x + x.exp()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * a + np.exp(a), rtol=1e-13)


def test_inplace_arith_kernel_checks():
    d = np.zeros(10)
    with pytest.raises(ValueError, match="op"):
        _kernels.inplace_arith("pow", d, np.ones(10), 2)
    with pytest.raises(ValueError, match="source"):
        _kernels.inplace_arith("add", d, np.ones(9), 2)
    with pytest.raises(ValueError, match="overlaps"):
        _kernels.inplace_arith("add", d[:6], d[4:], 2)
    with pytest.raises(TypeError):
        _kernels.inplace_arith("add", None, np.ones(10), 2)
    with pytest.raises(TypeError):
        _kernels.inplace_arith("add", d, None, 2)
    assert (d == 0).all()
    with pytest.raises(ValueError, match="overlaps"):
        _kernels.inplace_arith("add", d, d, 2)
