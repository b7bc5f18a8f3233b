"""The narrow matmul ``x.T @ g`` (g of at most 8 columns; rtx/_narrow.pxi), which
rtx's matmul takes instead of BLAS for a weight gradient onto a few columns
(rtx/backend/_matmul.py): one running sum per entry over each shape-chosen piece
of rows, the pieces added in order, whatever the thread count."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import spy_calls

import rtx
from rtx import _kernels
from rtx.backend import _matmul

pytestmark = pytest.mark.skipif(not _kernels.narrow_available(),
                                reason="built without vector extensions")

DTYPES = [np.float32, np.float64]


@pytest.fixture
def calls(monkeypatch):
    """The calls rtx's matmul made to the narrow kernel."""
    return spy_calls(monkeypatch, _matmul, "narrow_tn")


def _expected(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``x.T @ g`` as the kernel defines it, written out in numpy: per piece of
    rows (the BLAS split's inner pieces), each entry's products summed one row
    after another (``np.add.accumulate`` is that running sum), then the pieces'
    partials added in order."""
    K, F = x.shape
    n = g.shape[1]
    big = F * K * n >= _matmul.SPLIT_MIN
    pieces = (_matmul._pieces(K, _matmul.MIN_INNER) if big else []) or [(0, K)]
    total = None
    for k0, k1 in pieces:
        prod = x[k0:k1, :, None] * g[k0:k1, None, :]           # [rows, F, n], exact
        part = np.add.accumulate(prod, axis=0, dtype=x.dtype)[-1]
        total = part if total is None else total + part
    return total


def _operands(rng, K, F, n, dt):
    return rng.standard_normal((K, F)).astype(dt), rng.standard_normal((K, n)).astype(dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("K,F,n", [
    (5000, 64, 4),      # below the split threshold: one piece
    (20000, 64, 4),     # eight pieces
    (9000, 13, 3),      # a width that is not a multiple of the 8-lane tile
    (7000, 37, 2),
    (6000, 300, 1),     # one column
    (12000, 24, 7),     # 5-8 columns on a narrow x
    (4096, 8, 8),
    (20000, 1, 5),
])
def test_x_transposed_at_g_is_the_ordered_running_sum(dt, K, F, n, calls):
    rng = np.random.default_rng(K + F + n)
    x, g = _operands(rng, K, F, n, dt)
    want = _expected(x, g)
    ref = x.astype(np.float64).T @ g.astype(np.float64)
    got = {}
    for t in (1, 2, 3):
        rtx.set_num_threads(t)
        got[t] = (rtx.tensor(x).T @ rtx.tensor(g)).numpy()
    assert len(calls) == 3                                      # the narrow kernel ran
    for t in (1, 2, 3):
        np.testing.assert_array_equal(got[t], want)             # bitwise, any threads
    tol = 1e-4 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(got[1], ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("dt", DTYPES)
def test_strided_rows_are_read_in_place(dt, calls):
    """x and g as column slices of wider arrays (rows contiguous, row stride
    longer than the row): the narrow kernel reads them where they are, and gives
    the bits of their contiguous copies."""
    rng = np.random.default_rng(5)
    wide_x = rng.standard_normal((8000, 100)).astype(dt)
    wide_g = rng.standard_normal((8000, 10)).astype(dt)
    x, g = wide_x[:, 3:67], wide_g[:, 2:6]
    got = (rtx.tensor(wide_x)[:, 3:67].T @ rtx.tensor(wide_g)[:, 2:6]).numpy()
    B = rtx.CpuBackend()
    direct = B.matmul(x.T, g)
    assert len(calls) == 2
    np.testing.assert_array_equal(direct, _expected(np.ascontiguousarray(x),
                                                    np.ascontiguousarray(g)))
    np.testing.assert_array_equal(got, direct)


@pytest.mark.parametrize("K,F,n,how", [
    (8000, 64, 9, "too many columns"),
    (8000, 600, 8, "wide x with 5-8 columns"),
    (8000, 1000, 1, "wide x with one column"),
    (1000, 64, 4, "short inner dimension"),
    (8000, 64, 4, "g's rows strided"),
    (8000, 64, 4, "x not transposed"),
    (8000, 64, 4, "mixed dtypes"),
])
def test_other_shapes_and_layouts_keep_blas(K, F, n, how, calls):
    rng = np.random.default_rng(9)
    x, g = _operands(rng, K, F, n, np.float64)
    a, b = x.T, g
    if how == "g's rows strided":
        b = np.repeat(g, 2, axis=1)[:, ::2]
    elif how == "x not transposed":
        a = np.ascontiguousarray(x.T)
    elif how == "mixed dtypes":
        b = g.astype(np.float32)
    got = rtx.CpuBackend().matmul(a, b)
    assert calls == []
    ref = x.T @ g
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_the_weight_gradient_of_a_projection_onto_heads():
    """``w.grad = x.T @ grad`` of ``x @ w`` with 4 output columns (a GAT layer's
    attention logits) goes through the narrow kernel; checked against numpy."""
    rtx.set_num_threads(2)
    rng = np.random.default_rng(2)
    x = rtx.tensor(rng.standard_normal((6000, 64)), requires_grad=True)
    w = rtx.tensor(rng.standard_normal((64, 4)), requires_grad=True)
    g = rng.standard_normal((6000, 4))
    (x @ w).backward(rtx.tensor(g))
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().T @ g, rtol=1e-11)
    np.testing.assert_allclose(x.grad.numpy(), g @ w.numpy().T, rtol=1e-12)


# ------------------------------------------------------------ the kernel's checks
def _call(x, g, bounds, out, T=2):
    _kernels.narrow_tn(x, g, np.asarray(bounds, np.int64), out, T)


@pytest.mark.parametrize("bad,msg", [
    (lambda x, g, o: (x, g[:-1], [0, 100], o), "shapes"),
    (lambda x, g, o: (x, g, [0, 100], np.zeros((5, 3))), "shapes"),
    (lambda x, g, o: (x, np.zeros((100, 9)), [0, 100], np.zeros((4, 9))), "columns"),
    (lambda x, g, o: (x, np.zeros((100, 0)), [0, 100], np.zeros((4, 0))), "columns"),
    (lambda x, g, o: (x, g, [0, 50], o), "bounds"),
    (lambda x, g, o: (x, g, [10, 100], o), "bounds"),
    (lambda x, g, o: (x, g, [0], o), "bounds"),
    (lambda x, g, o: (x, g, [0, 60, 40, 100], o), "ascending"),
    (lambda x, g, o: (x, g, list(range(0, 66)) + [100], o), "bounds"),
    (lambda x, g, o: (np.asfortranarray(x), g, [0, 100], o), "contiguous rows"),
    (lambda x, g, o: (x, g[:, ::-1], [0, 100], o), "contiguous rows"),
    (lambda x, g, o: (x[::-1], g, [0, 100], o), "contiguous rows"),
])
def test_bad_arguments_raise_before_anything_is_written(bad, msg):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((100, 4))
    g = rng.standard_normal((100, 3))
    args = bad(x, g, np.full((4, 3), 7.0))
    before = args[3].copy()
    with pytest.raises(ValueError, match=msg):
        _call(*args)
    np.testing.assert_array_equal(args[3], before)


def test_empty_inner_dimension_gives_zeros():
    out = np.full((4, 3), 7.0)
    _call(np.zeros((0, 4)), np.zeros((0, 3)), [0, 0], out)
    assert (out == 0).all()
    out32 = np.full((0, 3), 7.0, np.float32)
    _call(np.zeros((5, 0), np.float32), np.zeros((5, 3), np.float32), [0, 5], out32)


def test_none_is_refused():
    x, g, b, o = np.zeros((10, 4)), np.zeros((10, 3)), np.array([0, 10]), np.zeros((4, 3))
    for args in [(None, g, b, o), (x, None, b, o), (x, g, None, o), (x, g, b, None)]:
        with pytest.raises(TypeError):
            _kernels.narrow_tn(*args, 2)


def test_the_dtype_must_agree():
    with pytest.raises((TypeError, ValueError)):
        _call(np.zeros((10, 4)), np.zeros((10, 3), np.float32), [0, 10], np.zeros((4, 3)))
