"""Segment ops (issue 11 item 3): segment_sum / mean / max / softmax against
numpy references and a dense softmax, float64 gradchecks, bitwise determinism
across thread counts and plan vs raw index, and bad input rejected before
anything is written."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import bits, tol
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rtx
from rtx import _kernels
from rtx.autograd import gradcheck
from rtx.backend.segment import np_segment_max, np_segment_mean, np_segment_softmax

INDEX_DTYPES = [np.int32, np.int64]
OPS = ["segment_mean", "segment_max", "segment_softmax"]


@pytest.fixture
def force_parallel():
    """Every segment/message kernel call takes its parallel path."""
    old = _kernels.set_segment_parallel_min(0)
    old_t = _kernels.set_parallel_thresholds(gather=0, scatter=0, scatter_min_row_bytes=0)
    yield
    _kernels.set_segment_parallel_min(old)
    _kernels.set_parallel_thresholds(**old_t)


def ref_softmax(s: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    """A loop-per-segment reference (independent of the vectorised one in the backend)."""
    s64 = s.astype(np.float64)
    out = np.zeros_like(s64)
    for r in range(n):
        m = idx == r
        if m.any():
            v = s64[m]
            e = np.exp(v - v.max(axis=0))
            out[m] = e / e.sum(axis=0)
    return out


def random_case(rng, E=40, N=9, shape=(), dtype=np.float64, idx_dtype=np.int64):
    idx = rng.integers(0, N, E).astype(idx_dtype)
    idx[idx == 3] = 4  # segment 3 is empty
    s = rng.standard_normal((E,) + shape).astype(dtype)
    return s, idx, N


# ------------------------------------------------------------------ values
@pytest.mark.valgrind
@pytest.mark.parametrize("shape", [(), (3,)], ids=["E", "EH"])
@pytest.mark.parametrize("idx_dtype", INDEX_DTYPES, ids=["i32", "i64"])
def test_segment_softmax_matches_reference(backend, dtype, shape, idx_dtype):
    rng = np.random.default_rng(0)
    s, idx, N = random_case(rng, shape=shape, dtype=dtype, idx_dtype=idx_dtype)
    s = s * 30  # large scores: stability matters
    y = rtx.segment_softmax(rtx.tensor(s), idx, N)
    assert y.dtype == dtype and y.shape == s.shape
    np.testing.assert_allclose(y.numpy(), ref_softmax(s, idx, N), **tol(dtype))
    # every non-empty segment sums to 1 per column
    sums = np.zeros((N,) + shape)
    np.add.at(sums, idx, y.numpy().astype(np.float64))
    present = np.bincount(idx, minlength=N) > 0
    np.testing.assert_allclose(sums[present], 1.0, rtol=1e-5)


@pytest.mark.parametrize("H", [1, 4])
def test_segment_softmax_equals_dense_softmax_on_equal_groups(backend, dtype, H):
    rng = np.random.default_rng(1)
    G, K = 6, 5  # 6 groups of 5 entries, shuffled
    dense = rng.standard_normal((G, K, H)).astype(dtype)
    idx = np.repeat(np.arange(G), K)
    perm = rng.permutation(G * K)
    s = dense.reshape(G * K, H)[perm]
    y = rtx.segment_softmax(rtx.tensor(s), idx[perm], G).numpy()
    expect = rtx.softmax(rtx.tensor(dense), 1).numpy().reshape(G * K, H)[perm]
    np.testing.assert_allclose(y, expect, **tol(dtype))


def test_segment_softmax_large_and_empty(backend):
    s = np.array([1000.0, 1001.0, -1000.0, 5.0], dtype=np.float32)
    idx = np.array([0, 0, 2, 2])
    y = rtx.segment_softmax(rtx.tensor(s), idx, 4).numpy()
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, [1 / (1 + np.e), np.e / (1 + np.e), 0.0, 1.0], rtol=1e-6)
    empty = rtx.segment_softmax(rtx.zeros(0, 2), np.zeros(0, np.int64), 3)
    assert empty.shape == (0, 2)


@pytest.mark.valgrind
@pytest.mark.parametrize("shape", [(), (3,), (2, 2)], ids=["E", "EF", "EAB"])
def test_segment_sum_mean_max_match_numpy(backend, dtype, shape):
    rng = np.random.default_rng(2)
    s, idx, N = random_case(rng, shape=shape, dtype=dtype)
    t = rtx.tensor(s)
    out_sum = np.zeros((N,) + shape, dtype)
    np.add.at(out_sum, idx, s)
    np.testing.assert_allclose(rtx.segment_sum(t, idx, N).numpy(), out_sum, **tol(dtype))
    np.testing.assert_allclose(rtx.segment_mean(t, idx, N).numpy(),
                               np_segment_mean(s, idx, N), **tol(dtype))
    m = rtx.segment_max(t, idx, N).numpy()
    expect = np.zeros((N,) + shape, dtype)
    for r in range(N):
        if (idx == r).any():
            expect[r] = s[idx == r].max(axis=0)
    np.testing.assert_array_equal(m, expect)
    # empty segment 3 gives 0 for all three
    for f in (rtx.segment_sum, rtx.segment_mean, rtx.segment_max):
        assert np.all(f(t, idx, N).numpy()[3] == 0)


def test_segment_max_ties_give_gradient_to_first(backend):
    s = rtx.tensor(np.array([2.0, 5.0, 5.0, 1.0, 5.0]), requires_grad=True)
    idx = np.array([0, 0, 0, 1, 0])
    out = rtx.segment_max(s, idx, 3)
    np.testing.assert_array_equal(out.numpy(), [5.0, 1.0, 0.0])
    out.backward(rtx.tensor(np.array([10.0, 20.0, 30.0])))
    np.testing.assert_array_equal(s.grad.numpy(), [0.0, 10.0, 0.0, 20.0, 0.0])


def test_segment_max_nan_propagates(backend):
    s = np.array([1.0, np.nan, 3.0, 2.0])
    out = rtx.segment_max(rtx.tensor(s), np.array([0, 0, 0, 1]), 2).numpy()
    assert np.isnan(out[0]) and out[1] == 2.0
    m, arg = np_segment_max(s, np.array([0, 0, 0, 1]), 2)
    assert np.isnan(m[0]) and arg[0] == 1


# --------------------------------------------------------------- gradients
@pytest.mark.valgrind
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", [(), (3,)], ids=["E", "EH"])
def test_gradcheck(backend, op, shape):
    rng = np.random.default_rng(3)
    s, idx, N = random_case(rng, E=17, N=6, shape=shape)
    if op == "segment_max":
        s = s + np.arange(s.size).reshape(s.shape) * 1e-2  # no ties within eps
    t = rtx.tensor(s, requires_grad=True)
    fn = getattr(rtx, op)
    assert gradcheck(lambda a: fn(a, idx, N), (t,))


@pytest.mark.parametrize("use_plan", [False, True])
def test_segment_sum_gradcheck_and_adjoint(backend, use_plan):
    rng = np.random.default_rng(4)
    s, idx, N = random_case(rng, E=15, N=5, shape=(2,))
    index = rtx.IndexPlan(idx, N) if use_plan else idx
    t = rtx.tensor(s, requires_grad=True)
    assert gradcheck(lambda a: rtx.segment_sum(a, index, N), (t,))
    # <segment_sum(a), b> == <a, index_select(b, idx)>
    b = rng.standard_normal((N, 2))
    lhs = float((rtx.segment_sum(rtx.tensor(s), index, N).numpy() * b).sum())
    rhs = float((s * rtx.index_select(rtx.tensor(b), index).numpy()).sum())
    assert lhs == pytest.approx(rhs, rel=1e-12)


def test_segment_softmax_backward_formula(backend, dtype):
    rng = np.random.default_rng(5)
    s, idx, N = random_case(rng, shape=(4,), dtype=dtype)
    g = rng.standard_normal(s.shape).astype(dtype)
    t = rtx.tensor(s, requires_grad=True)
    y = rtx.segment_softmax(t, idx, N)
    y.backward(rtx.tensor(g))
    yn = ref_softmax(s, idx, N)
    d = np.zeros((N, 4))
    np.add.at(d, idx, g * yn)
    np.testing.assert_allclose(t.grad.numpy(), yn * (g - d[idx]), rtol=1e-4 if dtype ==
                               np.float32 else 1e-10, atol=1e-6 if dtype == np.float32 else 1e-12)


# ------------------------------------------------------------- determinism
@pytest.mark.parametrize("op", ["segment_sum"] + OPS)
def test_bitwise_across_threads_and_plan(op, dtype, force_parallel):
    rng = np.random.default_rng(6)
    E, N = 20000, 300
    s = rng.standard_normal((E, 5)).astype(dtype)
    g = rng.standard_normal((N, 5) if op != "segment_softmax" else (E, 5)).astype(dtype)
    idx = rng.integers(0, N, E)
    plan = rtx.IndexPlan(idx, N)
    fn = getattr(rtx, op)
    res = []
    for T in (1, 2, 2):
        for index in (idx, plan):
            rtx.set_num_threads(T)
            t = rtx.tensor(s, requires_grad=True)
            y = fn(t, index, N)
            y.backward(rtx.tensor(g))
            res.append((bits(y.numpy()), bits(t.grad.numpy())))
    for y, gr in res[1:]:
        np.testing.assert_array_equal(y, res[0][0])
        np.testing.assert_array_equal(gr, res[0][1])
    if _kernels.openmp_enabled():
        rtx.set_num_threads(2)
        seen = set()
        for _ in range(50):  # chunks are dynamic: a busy machine may give one thread all
            fn(rtx.tensor(s), plan, N)
            seen |= set(_kernels.last_kernel_thread_ids())
            if len(seen) == 2:
                break
        assert seen == {0, 1}
    assert plan.is_grouped


# --------------------------------------------------------------- bad input
@pytest.mark.parametrize("op", ["segment_sum"] + OPS)
def test_bad_input(backend, op):
    fn = getattr(rtx, op)
    s = rtx.tensor(np.ones((4, 2)))
    before = s.numpy().copy()
    with pytest.raises(IndexError, match=r"indices\[2\]"):
        fn(s, np.array([0, 1, 5, 0]), 3)
    with pytest.raises(IndexError):
        fn(s, np.array([0, 1, -1, 0]), 3)
    with pytest.raises(ValueError, match="must equal|len"):
        fn(s, np.array([0, 1, 0]), 3)
    with pytest.raises(ValueError, match=">= 0"):
        fn(s, np.array([0, 1, 1, 0]), -1)
    with pytest.raises(TypeError):
        fn(s, np.array([0.0, 1.0, 1.0, 0.0]), 3)
    with pytest.raises(TypeError):
        fn(s, np.array([[0, 1, 1, 0]]), 3)
    with pytest.raises(TypeError):
        fn(s, np.array([0, 1, 1, 0]), 3.5)
    with pytest.raises(ValueError, match="IndexPlan"):
        fn(s, rtx.IndexPlan(np.array([0, 1, 1, 0]), 5), 3)
    np.testing.assert_array_equal(s.numpy(), before)
    if op != "segment_sum":
        with pytest.raises(TypeError, match="float"):
            fn(rtx.tensor(np.ones(4, np.int64)), np.array([0, 1, 1, 0]), 3)


def test_segment_softmax_rank(backend):
    with pytest.raises(ValueError, match=r"\[E\] or \[E, H\]"):
        rtx.segment_softmax(rtx.zeros(4, 2, 2), np.array([0, 1, 1, 0]), 2)


# ---------------------------------------------------------------- property
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 60), st.integers(1, 12), st.integers(1, 3), st.integers(0, 2**31),
       st.sampled_from(OPS), st.sampled_from([1, 2]))
def test_property_matches_numpy(E, N, H, seed, op, threads):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, N, E)
    s = (rng.standard_normal((E, H)) * 10).round(1)  # ties likely
    rtx.set_num_threads(threads)
    old = _kernels.set_segment_parallel_min(0)
    try:
        out = getattr(rtx, op)(rtx.tensor(s), rtx.IndexPlan(idx, N), N).numpy()
    finally:
        _kernels.set_segment_parallel_min(old)
        rtx.set_num_threads(None)
    if op == "segment_softmax":
        np.testing.assert_allclose(out, np_segment_softmax(s, idx, N), rtol=1e-12, atol=1e-14)
    elif op == "segment_mean":
        np.testing.assert_allclose(out, np_segment_mean(s, idx, N), rtol=1e-12, atol=1e-14)
    else:
        np.testing.assert_array_equal(out, np_segment_max(s, idx, N)[0])


@pytest.mark.valgrind
@pytest.mark.parametrize("H", [1, 3, 8])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_softmax_entry_and_csr_kernels_are_bitwise_equal(dtype, H, threads):
    """The two forward/backward kernels (chosen by row width) give the same bits."""
    rng = np.random.default_rng(7)
    E, N = 3000, 70
    idx = rng.integers(0, N, E).astype(np.int32)
    idx[idx == 5] = 6  # an empty segment
    s = (rng.standard_normal((E, H)) * 20).astype(dtype)
    s[3, 0] = -np.inf
    s[idx == 9] = -0.0  # signed zeros: the max's sign must not matter
    s[np.flatnonzero(idx == 9)[:2]] = 0.0
    g = rng.standard_normal((E, H)).astype(dtype)
    plan = rtx.IndexPlan(idx, N)
    ptr, perm = plan.csr()
    old = _kernels.set_segment_parallel_min(0)
    try:
        a, b = np.empty_like(s), np.empty_like(s)
        _kernels.segment_softmax_csr(s, perm, ptr, a, threads)
        _kernels.segment_softmax_entries(s, plan.indices, N, b, threads)
        np.testing.assert_array_equal(bits(a), bits(b))
        c, d = np.empty_like(s), np.empty_like(s)
        _kernels.segment_softmax_backward_csr(a, g, perm, ptr, c, threads)
        _kernels.segment_softmax_backward_entries(a, g, plan.indices, N, d, threads)
        np.testing.assert_array_equal(bits(c), bits(d))
    finally:
        _kernels.set_segment_parallel_min(old)
    np.testing.assert_allclose(a, ref_softmax(s, idx, N), rtol=1e-5, atol=1e-7)


def test_kernels_reject_mismatched_grouping():
    s = np.ones((4, 1))
    out = np.empty_like(s)
    ptr, perm = rtx.IndexPlan(np.array([0, 1, 1]), 2).csr()
    with pytest.raises(ValueError):
        _kernels.segment_softmax_csr(s, perm, ptr, out, 1)
    with pytest.raises(ValueError):
        _kernels.segment_softmax_entries(s, np.array([0, 1, 1]), 2, out, 1)
    arg = np.full((2, 1), 7, np.int64)
    with pytest.raises(IndexError):
        _kernels.segment_max_backward_csr(np.ones((2, 1)), arg, perm, ptr, np.empty((3, 1)), 1)


def test_huge_num_segments_is_a_memory_error(backend):
    """A segment count whose state cannot be allocated fails cleanly, output untouched."""
    s = rtx.tensor(np.ones((2, 1)))
    for fn in (rtx.segment_softmax, rtx.segment_mean, rtx.segment_max):
        with pytest.raises(MemoryError):
            fn(s, np.array([0, 1]), 2**62)
    with pytest.raises(MemoryError):
        _kernels.segment_softmax_entries(np.ones((2, 1)), np.array([0, 1]), 2**62,
                                         np.empty((2, 1)), 1)
