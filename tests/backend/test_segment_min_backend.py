"""segment_min below the faces: the kernels (``segment_min_csr`` /
``segment_min_backward_csr``) and the backend body (on the CPU backend and, through
the host round-trip, the minimal one).

Mirrors segment_max: per segment and column the min and the position of its
FIRST occurrence (ties: the lowest position wins), NaN propagates (the first
NaN wins), an empty segment gives 0 and argmin -1; the backward sends each
gradient to its argmin entry.  Bits never depend on the thread count.  (The
op itself, its rule and faces: S1's side, tests/graph/test_segment.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from _graph_reference import np_segment_arg_backward, np_segment_max, np_segment_min
from conftest import assert_both_threads_run, bits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rtx
from rtx import _kernels
from rtx.backend import CpuBackend, MinimalBackend


def loop_min(s: np.ndarray, idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference by definition: scan each segment in increasing position."""
    E = s.shape[0]
    s2 = s.reshape(E, int(np.prod(s.shape[1:])))
    out = np.zeros((n, s2.shape[1]), s.dtype)
    arg = np.full((n, s2.shape[1]), -1, np.int64)
    for j in range(s2.shape[1]):
        for e in range(E):
            r = idx[e]
            v = s2[e, j]
            if arg[r, j] < 0:
                out[r, j], arg[r, j] = v, e
            elif not np.isnan(out[r, j]) and (v < out[r, j] or np.isnan(v)):
                out[r, j], arg[r, j] = v, e
    return out.reshape((n,) + s.shape[1:]), arg.reshape((n,) + s.shape[1:])


def grouping(idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    ptr, perm = rtx.IndexPlan(idx, n).csr()
    return np.ascontiguousarray(ptr), np.ascontiguousarray(perm)


def kernel_min(s2: np.ndarray, idx: np.ndarray, n: int, T: int) -> tuple[np.ndarray, np.ndarray]:
    ptr, perm = grouping(idx, n)
    out = np.full((n, s2.shape[1]), np.nan, s2.dtype)      # the kernel writes every element
    arg = np.full((n, s2.shape[1]), 12345, np.int64)
    _kernels.segment_min_csr(s2, perm, ptr, out, arg, T)
    return out, arg


@pytest.fixture
def force_parallel():
    old = _kernels.set_segment_parallel_min(0)
    yield
    _kernels.set_segment_parallel_min(old)


@pytest.mark.parametrize("F", [1, 3, 70])
def test_kernel_matches_the_definition(dtype, F):
    rng = np.random.default_rng(0)
    E, N = 200, 17                                     # segment 16 (and more) empty
    s = rng.integers(-3, 4, (E, F)).astype(dtype)      # many ties
    idx = rng.integers(0, 12, E)
    out, arg = kernel_min(s, idx, N, 1)
    want, want_arg = loop_min(s, idx, N)
    np.testing.assert_array_equal(bits(out), bits(want))
    np.testing.assert_array_equal(arg, want_arg)
    assert (arg[12:] == -1).all() and (out[12:] == 0).all()
    # the vectorised numpy reference (tests/_graph_reference.py) is the same rule
    m, a = np_segment_min(s, idx, N)
    np.testing.assert_array_equal(m, want)
    np.testing.assert_array_equal(a, want_arg)


def test_ties_first_entry_wins_and_signed_zeros():
    s = np.array([[1.0], [-0.0], [0.0], [-0.0], [2.0]])
    idx = np.array([0, 1, 1, 1, 0])
    out, arg = kernel_min(s, idx, 2, 1)
    assert arg[:, 0].tolist() == [0, 1]
    assert np.signbit(out[1, 0])                        # the first of the tied zeros: -0.0
    s[1, 0] = 0.0
    out, arg = kernel_min(s, idx, 2, 1)
    assert arg[1, 0] == 1 and not np.signbit(out[1, 0])


def test_nan_propagates_first_nan_wins():
    nan_a = np.frombuffer(np.uint64(0x7FF8000000000001).tobytes(), np.float64)[0]
    nan_b = np.frombuffer(np.uint64(0xFFF8000000000002).tobytes(), np.float64)[0]
    s = np.array([[3.0], [nan_a], [-5.0], [nan_b], [1.0]])
    idx = np.array([0, 0, 0, 0, 1])
    out, arg = kernel_min(s, idx, 2, 1)
    assert arg[:, 0].tolist() == [1, 4]
    assert bits(out)[0, 0] == bits(np.array([nan_a]))[0]
    m, a = np_segment_min(s, idx, 2)
    assert np.isnan(m[0, 0]) and a[:, 0].tolist() == [1, 4]


@pytest.mark.parametrize("F", [1, 5])
def test_bitwise_for_any_thread_count(dtype, F, force_parallel):
    rng = np.random.default_rng(1)
    E, N = 30_000, 700
    s = rng.standard_normal((E, F)).astype(dtype)
    s[::97] = np.round(s[::97])                         # ties
    idx = rng.integers(0, N - 3, E)                     # 3 empty segments
    ref = kernel_min(s, idx, N, 1)
    g = rng.standard_normal((N, F)).astype(dtype)
    ptr, perm = grouping(idx, N)
    gref = np.empty((E, F), dtype)
    _kernels.segment_min_backward_csr(g, ref[1], perm, ptr, gref, 1)
    for T in (2, 3, 4, 2):
        out, arg = kernel_min(s, idx, N, T)
        np.testing.assert_array_equal(bits(out), bits(ref[0]))
        np.testing.assert_array_equal(arg, ref[1])
        gx = np.full((E, F), np.nan, dtype)
        _kernels.segment_min_backward_csr(g, arg, perm, ptr, gx, T)
        np.testing.assert_array_equal(bits(gx), bits(gref))
    np.testing.assert_array_equal(gref, np_segment_arg_backward(g, ref[1], E))
    if _kernels.openmp_enabled():
        assert_both_threads_run(lambda: kernel_min(s, idx, N, 2))


def test_min_is_minus_max_of_minus(dtype):
    rng = np.random.default_rng(2)
    s = rng.integers(-4, 5, (500, 4)).astype(dtype)
    idx = rng.integers(0, 40, 500)
    out, arg = kernel_min(s, idx, 41, 2)
    m, a = np_segment_max(-s, idx, 41)
    np.testing.assert_array_equal(out, -m + 0.0)
    np.testing.assert_array_equal(arg, a)


def test_backward_sends_gradient_to_the_argmin_only(dtype):
    s = np.array([[2.0, 1.0], [1.0, 1.0], [1.0, 3.0], [4.0, 0.5]], dtype)
    idx = np.array([0, 0, 0, 2])
    out, arg = kernel_min(s, idx, 3, 1)
    assert arg.tolist() == [[1, 0], [-1, -1], [3, 3]]
    g = np.array([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]], dtype)
    ptr, perm = grouping(idx, 3)
    gx = np.full((4, 2), np.nan, dtype)
    _kernels.segment_min_backward_csr(g, arg, perm, ptr, gx, 1)
    np.testing.assert_array_equal(gx, [[0, 20], [10, 0], [0, 0], [50, 60]])


def test_kernels_refuse_bad_arguments_before_writing():
    s = np.ones((3, 2))
    ptr, perm = grouping(np.array([0, 1, 1]), 2)
    out = np.full((2, 2), 7.0)
    arg = np.full((2, 2), 7, np.int64)
    with pytest.raises(ValueError, match="shapes"):
        _kernels.segment_min_csr(s, perm, ptr, np.empty((2, 3)), arg, 1)
    with pytest.raises(ValueError, match="grouping"):
        _kernels.segment_min_csr(s[:2], perm, ptr, out, arg, 1)
    assert (out == 7).all() and (arg == 7).all()
    gx = np.full((3, 2), 7.0)
    for bad in (3, -2):
        a = np.zeros((2, 2), np.int64)
        a[1, 1] = bad
        with pytest.raises(IndexError, match="argmin"):
            _kernels.segment_min_backward_csr(np.ones((2, 2)), a, perm, ptr, gx, 1)
    assert (gx == 7).all()
    with pytest.raises(ValueError):          # float32 grad, float64 out: no specialisation
        _kernels.segment_min_backward_csr(np.ones((2, 2), np.float32), np.zeros((2, 2), np.int64),
                                          perm, ptr, gx, 1)


@pytest.mark.parametrize("B", [CpuBackend(), MinimalBackend()], ids=["cpu", "minimal"])
def test_backend_bodies(B, dtype):
    rng = np.random.default_rng(3)
    s = rng.integers(-2, 3, (60, 2, 3)).astype(dtype)
    idx = rng.integers(0, 9, 60)
    plan = rtx.IndexPlan(idx, 10)
    m, a = B.segment_min(B.from_numpy(s), plan, 10)
    want, want_arg = loop_min(s, idx, 10)
    np.testing.assert_array_equal(B.to_numpy(m), want)
    assert B.to_numpy(m).dtype == dtype
    np.testing.assert_array_equal(B.to_numpy(a), want_arg)
    g = rng.standard_normal((10, 2, 3)).astype(dtype)
    gx = B.to_numpy(B.segment_min_backward(B.from_numpy(g), a, plan, 60))
    np.testing.assert_array_equal(gx, np_segment_arg_backward(g, want_arg, 60))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(E=st.integers(0, 60), N=st.integers(1, 12), F=st.integers(1, 4),
       seed=st.integers(0, 2**16), threads=st.sampled_from([1, 2, 3]))
def test_property_matches_the_definition(E, N, F, seed, threads):
    rng = np.random.default_rng(seed)
    s = rng.integers(-3, 4, (E, F)).astype(np.float64)
    s[rng.random((E, F)) < 0.05] = np.nan
    idx = rng.integers(0, N, E)
    old = _kernels.set_segment_parallel_min(0)
    try:
        out, arg = kernel_min(s, idx, N, threads)
    finally:
        _kernels.set_segment_parallel_min(old)
    want, want_arg = loop_min(s, idx, N)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(arg, want_arg)
