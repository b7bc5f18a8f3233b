"""Cross-entropy's row kernels (``cross_entropy_rows`` / ``_backward``,
rtx/_loss.pxi): the values of numpy's formulas (the stable log-sum-exp), the
same bits on any thread count, numpy's NaN and infinity semantics, and clear
errors for bad arguments, with nothing read outside the rows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtx import _kernels as K

DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=2e-6, atol=2e-6), np.float64: dict(rtol=1e-13, atol=1e-13)}


def _ref(x: np.ndarray, t: np.ndarray, scale: np.ndarray):
    """numpy's formulas, in float64: loss, (m, l), gradient."""
    x64 = x.astype(np.float64)
    m = x64.max(1)
    z = x64 - m[:, None]
    l = np.log(np.exp(z).sum(1))
    n = len(t)
    loss = l - z[np.arange(n), t]
    g = np.exp(z - l[:, None])
    g[np.arange(n), t] -= 1
    return loss, np.stack([m, l], 1), g * scale[:, None]


def _run(x, t, scale, threads):
    n, c = x.shape
    loss, stats = np.empty(n, x.dtype), np.empty((n, 2), x.dtype)
    K.cross_entropy_rows(x, t, loss, stats, threads)
    g = np.empty_like(x)
    K.cross_entropy_rows_backward(x, stats, t, scale.astype(x.dtype), g, threads)
    return loss, stats, g


@pytest.mark.valgrind
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("c", [1, 3, 7, 8, 9, 16, 31, 349])
def test_values_match_numpys_formulas(dt, c):
    rng = np.random.default_rng(c)
    n = 257
    x = (rng.standard_normal((n, c)) * 4).astype(dt)
    t = rng.integers(0, c, n)
    scale = rng.uniform(0.1, 2.0, n)
    loss, stats, g = _run(x, t, scale, 2)
    want_loss, want_stats, want_g = _ref(x, t, scale)
    np.testing.assert_allclose(loss, want_loss, **TOL[dt])
    assert np.array_equal(stats[:, 0], x.max(1))      # the max itself, exactly
    np.testing.assert_allclose(stats[:, 1], want_stats[:, 1], **TOL[dt])
    np.testing.assert_allclose(g, want_g, **TOL[dt])
    assert loss.dtype == stats.dtype == g.dtype == dt


@pytest.mark.parametrize("dt", DTYPES)
def test_bits_do_not_depend_on_the_thread_count(dt):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((20000, 13)).astype(dt)   # large enough for a team
    t = rng.integers(0, 13, 20000)
    scale = rng.uniform(0.5, 1.5, 20000)
    one = _run(x, t, scale, 1)
    for threads in (2, 3, 4):
        got = _run(x, t, scale, threads)
        if K.openmp_enabled():         # a team ran (its ids from the backward's chunks)
            assert len(K.last_kernel_thread_ids()) > 1
        for a, b in zip(one, got, strict=True):
            assert a.tobytes() == b.tobytes()


@pytest.mark.valgrind
@pytest.mark.parametrize("dt", DTYPES)
def test_nan_and_infinity_follow_numpy(dt):
    x = np.array([[0.0, np.nan, 1.0, 2.0],          # a NaN: NaN loss, NaN max
                  [np.inf, 0.0, 1.0, 2.0],           # +inf: inf - inf = NaN
                  [-np.inf, 0.0, 1.0, 2.0],          # -inf: exp(-inf) = 0, finite
                  [1e30 if dt == np.float32 else 1e300, 0.0, 0.0, 0.0],   # huge: stable
                  [5.0, 5.0, 5.0, 5.0]], dt)
    t = np.array([2, 1, 3, 0, 1])
    loss, stats, g = _run(x, t, np.ones(5), 1)
    assert np.isnan(loss[0]) and np.isnan(stats[0, 0]) and np.isnan(g[0]).all()
    assert np.isnan(loss[1]) and stats[1, 0] == np.inf
    want = _ref(x[2:], t[2:], np.ones(3))
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(loss[2:], want[0], **TOL[dt])
        np.testing.assert_allclose(g[2:], want[2], **TOL[dt])
    assert loss[3] == 0 and loss[4] == pytest.approx(np.log(4), rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), c=st.integers(1, 40), seed=st.integers(0, 2**31 - 1),
       spread=st.sampled_from([1e-3, 1.0, 50.0]))
def test_property_float64(n, c, seed, spread):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c)) * spread
    t = rng.integers(0, c, n)
    scale = rng.uniform(-2, 2, n)
    loss, stats, g = _run(x, t, scale, 2)
    want_loss, want_stats, want_g = _ref(x, t, scale)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, want_g, rtol=1e-12, atol=1e-12)
    assert (loss >= -1e-12).all()


@pytest.mark.valgrind
def test_a_target_outside_the_row_reads_nothing():
    # the backend checks targets on a private copy first; the kernel still never
    # reads outside a row: such a row's loss is NaN, its gradient has no -1
    x = np.zeros((3, 4), np.float32)
    t = np.array([0, 4, -1])
    loss, stats, g = _run(x, t, np.ones(3), 1)
    assert loss[0] == pytest.approx(np.log(4)) and np.isnan(loss[1:]).all()
    np.testing.assert_allclose(g[1:], 0.25)


@pytest.mark.valgrind
def test_bad_arguments_raise_before_writing():
    x = np.zeros((3, 4), np.float32)
    loss, stats = np.full(3, 7, np.float32), np.full((3, 2), 7, np.float32)
    t = np.zeros(3, np.int64)
    with pytest.raises(ValueError):
        K.cross_entropy_rows(x, t[:2], loss, stats, 1)
    with pytest.raises(ValueError):
        K.cross_entropy_rows(x, t, loss[:2], stats, 1)
    with pytest.raises(ValueError):
        K.cross_entropy_rows(x, t, loss, np.zeros((3, 3), np.float32), 1)
    with pytest.raises(ValueError):
        K.cross_entropy_rows(np.zeros((3, 0), np.float32), t, loss, stats, 1)
    with pytest.raises(ValueError):   # mixed dtypes: no signature matches
        K.cross_entropy_rows(x, t, loss.astype(np.float64), stats, 1)
    assert (loss == 7).all() and (stats == 7).all()
    g = np.full((3, 4), 7, np.float32)
    for args in [(x, stats[:2], t, loss, g), (x, stats, t[:1], loss, g),
                 (x, stats, t, loss[:1], g), (x, stats, t, loss, g[:, :3])]:
        with pytest.raises(ValueError):
            K.cross_entropy_rows_backward(*args, 1)
    assert (g == 7).all()
    # no rows: nothing to do
    K.cross_entropy_rows(np.zeros((0, 4), np.float32), t[:0], loss[:0], stats[:0], 2)
