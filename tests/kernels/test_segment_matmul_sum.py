"""``segment_matmul_sum``'s chunked path (rtx/backend/grouped.py) and the
scatter it adds its chunks with (``scatter_accumulate_rows``, rtx/_index.pxi):
the chunks' GEMMs added into the targets give the values of
``index_add(segment_matmul(...))`` (the unfused pair of ops) to rounding (BLAS
may round a GEMM of a few rows otherwise than one of the whole type block),
for any chunk size, and the same bits for any thread count; the backward pass
likewise (a type's chunks add their weight-gradient partials in order).  The
scatter adds each target's rows in increasing position: chunk by chunk, the
bits of one ``scatter_add_rows``.  The op's
values against numpy, its gradchecks and bad input: tests/op_db.py."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import spy_calls

import rtx
from rtx import _kernels
from rtx.autograd import gradcheck
from rtx.backend import grouped

DTYPES = [np.float32, np.float64]


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 3 rows: every type block of the tests below spans several."""
    monkeypatch.setattr(grouped, "SUM_CHUNK_BYTES", 1)
    monkeypatch.setattr(grouped, "SUM_CHUNK_MIN_ROWS", 3)


def _case(rng, dtype, N=40, K=5, M=4, T=3, n=7):
    x = rng.standard_normal((N, K)).astype(dtype)
    w = rng.standard_normal((T, K, M)).astype(dtype)
    types = np.sort(rng.integers(0, T, N))       # type order: the chunked path
    dst = rng.integers(0, n, N)
    return x, w, rtx.IndexPlan(types, T), rtx.IndexPlan(dst, n), n


def _both(x, w, tp, dp, n, g):
    """(out, grad_x, grad_w) of the fused op and of the two ops it replaces."""
    res = []
    for fused in (True, False):
        xr = rtx.tensor(x, requires_grad=True)
        wr = rtx.tensor(w, requires_grad=True)
        out = (rtx.segment_matmul_sum(xr, tp, wr, dp, n) if fused
               else rtx.index_add(rtx.segment_matmul(xr, tp, wr), dp, n))
        (out * rtx.tensor(g)).sum().backward()
        res.append((out.numpy(), xr.grad.numpy(), wr.grad.numpy()))
    return res


@pytest.mark.parametrize("dtype", DTYPES)
def test_chunked_matches_the_two_ops(small_chunks, monkeypatch, dtype):
    rng = np.random.default_rng(0)
    x, w, tp, dp, n = _case(rng, dtype)
    g = rng.standard_normal((n, w.shape[2])).astype(dtype)
    calls = spy_calls(monkeypatch, grouped, "scatter_accumulate_rows")
    (out, gx, gw), (out2, gx2, gw2) = _both(x, w, tp, dp, n, g)
    counts = np.bincount(tp.indices, minlength=w.shape[0])
    assert len(calls) == sum(-(-c // 3) for c in counts) > w.shape[0]   # 3-row chunks per type
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, out2, rtol=tol, atol=tol)
    np.testing.assert_allclose(gx, gx2, rtol=tol, atol=tol)
    ref = np.zeros((n, w.shape[2]))
    np.add.at(ref, dp.indices, np.einsum("nk,nkm->nm", x.astype(np.float64),
                                         w.astype(np.float64)[tp.indices]))
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    gh = g.astype(np.float64)[dp.indices]
    gw_ref = np.stack([x[tp.indices == t].astype(np.float64).T @ gh[tp.indices == t]
                       for t in range(w.shape[0])])
    np.testing.assert_allclose(gw, gw_ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(gw2, gw_ref, rtol=tol, atol=tol)


def test_chunked_gradcheck(small_chunks):
    rng = np.random.default_rng(1)
    x, w, tp, dp, n = _case(rng, np.float64, N=13, K=3, M=2, T=3, n=4)
    xr = rtx.tensor(x, requires_grad=True)
    wr = rtx.tensor(w, requires_grad=True)
    assert gradcheck(lambda a, b: rtx.segment_matmul_sum(a, tp, b, dp, n), [xr, wr])


@pytest.mark.parametrize("need_x,need_weight", [(True, False), (False, True), (False, False)])
def test_backward_computes_what_is_needed(small_chunks, need_x, need_weight):
    rng = np.random.default_rng(5)
    x, w, tp, dp, n = _case(rng, np.float64)
    g = rng.standard_normal((n, w.shape[2]))
    B = rtx.CpuBackend()
    full = B.segment_matmul_sum_backward(g, x, tp, w, dp)
    got = B.segment_matmul_sum_backward(g, x, tp, w, dp, need_x=need_x, need_weight=need_weight)
    for want, have, needed in zip(full, got, (need_x, need_weight), strict=True):
        assert (have is None) if not needed else np.array_equal(have, want)


def test_inputs_untouched_and_types_without_rows(small_chunks):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((9, 3))
    w = rng.standard_normal((4, 3, 2))
    tp = rtx.IndexPlan(np.array([1, 1, 1, 1, 3, 3, 3, 3, 3]), 4)   # types 0, 2: no rows
    dp = rtx.IndexPlan(np.array([0, 4, 0, 1, 4, 4, 0, 2, 1]), 6)   # rows 3, 5: no pairs
    x0, w0 = x.copy(), w.copy()
    xr, wr = rtx.tensor(x, requires_grad=True), rtx.tensor(w, requires_grad=True)
    out = rtx.segment_matmul_sum(xr, tp, wr, dp, 6)
    out.sum().backward()
    assert np.array_equal(x, x0) and np.array_equal(w, w0)
    assert not out.numpy()[[3, 5]].any()
    assert not wr.grad.numpy()[[0, 2]].any() and wr.grad.numpy()[[1, 3]].all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_same_bits_for_any_thread_count(dtype):
    """Large enough for the threaded scatter (>= 2 MiB, rows >= 128 bytes)."""
    rng = np.random.default_rng(3)
    x, w, tp, dp, n = _case(rng, dtype, N=30_000, K=8, M=48, T=3, n=5_000)
    g = rng.standard_normal((n, 48)).astype(dtype)
    got = []
    before = rtx.get_num_threads()
    try:
        for threads in (1, 2, 3):
            rtx.set_num_threads(threads)
            got.append(_both(x, w, tp, dp, n, g)[0])
    finally:
        rtx.set_num_threads(before)
    for out, gx, gw in got[1:]:
        assert np.array_equal(out, got[0][0])
        assert np.array_equal(gx, got[0][1])
        assert np.array_equal(gw, got[0][2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_scatter_accumulate_rows_chunks(dtype, threads):
    """Chunk by chunk into one output (zero-filled by the first) = one
    ``scatter_add_rows`` over all of them, bit for bit."""
    rng = np.random.default_rng(4)
    E, F, N = 70_000, 40, 3_000
    src = rng.standard_normal((E, F)).astype(dtype)
    idx = rng.integers(0, N, E)
    want = np.empty((N, F), dtype)
    _kernels.scatter_add_rows(src, idx, want, 1)
    out = np.full((N, F), np.nan, dtype)         # garbage: the first chunk zero-fills
    for i, e0 in enumerate(range(0, E, 25_000)):
        _kernels.scatter_accumulate_rows(src[e0:e0 + 25_000], idx[e0:e0 + 25_000], out,
                                         threads, i == 0)
    assert np.array_equal(out, want)
    before = out.copy()                          # without zero: adds to what is there
    _kernels.scatter_accumulate_rows(src[:5], idx[:5], out, threads)
    np.add.at(before, idx[:5], src[:5])
    assert np.array_equal(out, before)


def test_scatter_accumulate_rows_edges():
    out = np.full((3, 2), 7.0)
    _kernels.scatter_accumulate_rows(np.zeros((0, 2)), np.zeros(0, np.int64), out, 2)
    assert (out == 7.0).all()                    # nothing to add, no zero fill
    _kernels.scatter_accumulate_rows(np.zeros((0, 2)), np.zeros(0, np.int64), out, 2, True)
    assert not out.any()                         # zero fill asked: done
    with pytest.raises(ValueError, match="shapes"):
        _kernels.scatter_accumulate_rows(np.zeros((2, 2)), np.zeros(3, np.int64), out, 2)
    with pytest.raises(ValueError, match="shapes"):
        _kernels.scatter_accumulate_rows(np.zeros((2, 3)), np.zeros(2, np.int64), out, 2)
    with pytest.raises(IndexError, match="no rows"):
        _kernels.scatter_accumulate_rows(np.zeros((2, 2)), np.zeros(2, np.int64),
                                         np.zeros((0, 2)), 2)
