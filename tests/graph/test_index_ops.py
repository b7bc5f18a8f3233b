"""index_select / index_add: values against numpy (np.take / np.add.at), every
corner of the contract in issue 3, determinism across thread counts, and
parallelism proved by the kernels' OpenMP thread ids (never by timing)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import bits, gc_paused
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import rtx
from rtx import _kernels
from rtx.backend.base import Backend

INDEX_DTYPES = [np.int32, np.int64]
INDEX_KINDS = ["numpy", "list", "tensor"]
STRATEGIES = ["serial", "rows", "csr", "cols"]
OMP = _kernels.openmp_enabled()


def as_kind(idx: np.ndarray, kind: str):
    if kind == "numpy":
        return idx
    if kind == "list":
        return idx.tolist()
    return rtx.tensor(idx)


def np_add_at(src: np.ndarray, idx, n: int) -> np.ndarray:
    out = np.zeros((n,) + src.shape[1:], src.dtype)
    np.add.at(out, np.asarray(idx, dtype=np.int64), src)
    return out


@pytest.fixture
def force_parallel():
    """Make every kernel call take its parallel path, restoring the thresholds after."""
    old = _kernels.set_parallel_thresholds(gather=0, scatter=0, scatter_min_row_bytes=0)
    yield
    _kernels.set_parallel_thresholds(**old)


# ------------------------------------------------------------------ values
@pytest.mark.valgrind
@pytest.mark.parametrize("shape", [(7,), (7, 3), (7, 2, 3)], ids=["D1", "D2", "D3"])
@pytest.mark.parametrize("idx_dtype", INDEX_DTYPES, ids=["i32", "i64"])
@pytest.mark.parametrize("kind", INDEX_KINDS)
def test_index_select_values(backend, dtype, shape, idx_dtype, kind):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    idx = np.array([6, 0, 0, 3, 6, 6, 1], dtype=idx_dtype)  # repeats, 2 4 5 missing
    out = rtx.index_select(rtx.tensor(x), as_kind(idx, kind))
    assert out.shape == (len(idx),) + shape[1:]
    assert out.dtype == dtype
    np.testing.assert_array_equal(bits(out.numpy()), bits(np.take(x, idx, axis=0)))


@pytest.mark.valgrind
@pytest.mark.parametrize("shape", [(9,), (9, 3), (9, 2, 3)], ids=["D1", "D2", "D3"])
@pytest.mark.parametrize("idx_dtype", INDEX_DTYPES, ids=["i32", "i64"])
@pytest.mark.parametrize("kind", INDEX_KINDS)
def test_index_add_values(backend, dtype, shape, idx_dtype, kind):
    rng = np.random.default_rng(1)
    src = rng.standard_normal(shape).astype(dtype)
    idx = np.array([4, 0, 4, 4, 2, 0, 5, 4, 0], dtype=idx_dtype)
    out = rtx.index_add(rtx.tensor(src), as_kind(idx, kind), 7)
    assert out.shape == (7,) + shape[1:]
    assert out.dtype == dtype
    ref = np_add_at(src, idx, 7)
    # index order, starting from +0.0, like np.add.at: the same bits
    np.testing.assert_array_equal(bits(out.numpy()), bits(ref))
    # rows 1, 3 and 6 are untouched: exactly +0.0
    assert np.all(bits(out.numpy()[[1, 3, 6]]) == 0)


def test_index_add_duplicates_accumulate_in_order(backend):
    # 1e8 + 1 - 1e8 in float32 depends on the order: index order gives 0.0
    src = np.array([[1e8], [1.0], [-1e8], [3.0]], dtype=np.float32)
    out = rtx.index_add(rtx.tensor(src), [2, 2, 2, 0], 3).numpy()
    assert out[2, 0] == np.float32(np.float32(np.float32(1e8) + 1) - np.float32(1e8))
    assert out[0, 0] == 3.0 and bits(out[1]).item() == 0


def test_index_add_negative_zero_sum_is_positive_zero(backend):
    # an untouched row and a row of -0.0 contributions: 0.0 + -0.0 == +0.0
    src = np.array([[-0.0], [-0.0]], dtype=np.float64)
    out = rtx.index_add(rtx.tensor(src), [1, 1], 2).numpy()
    np.testing.assert_array_equal(bits(out), bits(np_add_at(src, [1, 1], 2)))


# ------------------------------------------------------------------ empty
@pytest.mark.valgrind
def test_empty_indices(backend, dtype):
    x = rtx.tensor(np.ones((4, 3, 2), dtype))
    out = rtx.index_select(x, [])
    assert out.shape == (0, 3, 2) and out.dtype == dtype
    z = rtx.index_add(rtx.tensor(np.ones((0, 3), dtype)), np.zeros(0, np.int32), 5)
    assert z.shape == (5, 3)
    assert np.all(bits(z.numpy()) == 0)
    z0 = rtx.index_add(rtx.tensor(np.ones((0, 3), dtype)), [], 0)
    assert z0.shape == (0, 3)


def test_empty_x_with_no_indices(backend, dtype):
    out = rtx.index_select(rtx.tensor(np.ones((0, 4), dtype)), np.zeros(0, np.int64))
    assert out.shape == (0, 4)


@pytest.mark.valgrind
@pytest.mark.parametrize("shape", [(5, 0), (5, 3, 0), (5, 0, 2)])
def test_zero_width_rows(backend, dtype, shape):
    x = rtx.tensor(np.ones(shape, dtype))
    out = rtx.index_select(x, [4, 0, 4])
    assert out.shape == (3,) + shape[1:]
    z = rtx.index_add(x, [1, 1, 0, 2, 2], 3)
    assert z.shape == (3,) + shape[1:]


def test_index_add_num_rows_larger_than_any_index(backend, dtype):
    src = np.arange(6, dtype=dtype).reshape(3, 2)
    out = rtx.index_add(rtx.tensor(src), [0, 0, 1], 1000).numpy()
    assert out.shape == (1000, 2)
    np.testing.assert_array_equal(out, np_add_at(src, [0, 0, 1], 1000))


# --------------------------------------------------------- non-contiguous
@pytest.mark.valgrind
def test_non_contiguous_inputs(backend, dtype):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((8, 12)).astype(dtype)
    views = {
        "transposed": base.T,                  # (12, 8), F-ordered
        "row-step": base[::2],                 # (4, 12)
        "col-step": base[:, ::3],              # (8, 4)
        "both": base[1::2, ::-2],              # (4, 6), negative stride
        "3d-permuted": base.reshape(2, 4, 12).transpose(2, 0, 1),
    }
    for name, v in views.items():
        n = v.shape[0]
        idx = np.array([n - 1, 0, n - 1, 1], dtype=np.int64)
        idx_view = np.repeat(idx, 2)[::2]       # a non-contiguous index array too
        got = rtx.index_select(rtx.tensor(v), idx_view).numpy()
        np.testing.assert_array_equal(got, np.take(v, idx, axis=0), err_msg=name)
        src = v
        tgt = rng.integers(0, 5, n)
        got = rtx.index_add(rtx.tensor(src), tgt[::-1], 5).numpy()
        np.testing.assert_array_equal(bits(got), bits(np_add_at(src, tgt[::-1], 5)),
                                      err_msg=name)


def test_non_native_and_readonly_indices(backend, dtype):
    x = np.arange(12, dtype=dtype).reshape(6, 2)
    idx = np.array([5, 1, 1], dtype=">i8")
    ro = np.array([2, 3], dtype=np.int32)
    ro.flags.writeable = False
    np.testing.assert_array_equal(rtx.index_select(rtx.tensor(x), idx).numpy(), x[[5, 1, 1]])
    np.testing.assert_array_equal(rtx.index_select(rtx.tensor(x), ro).numpy(), x[[2, 3]])
    np.testing.assert_array_equal(rtx.index_add(rtx.tensor(x[:3]), idx, 6).numpy(),
                                  np_add_at(x[:3], [5, 1, 1], 6))


@pytest.mark.valgrind
@pytest.mark.parametrize("idx_dtype", INDEX_DTYPES, ids=["i32", "i64"])
def test_misaligned_indices(backend, idx_dtype):
    buf = np.zeros(np.dtype(idx_dtype).itemsize * 4 + 1, np.uint8)
    idx = np.frombuffer(buf.data, dtype=idx_dtype, count=4, offset=1)
    assert not idx.flags.aligned
    x = np.arange(10.0).reshape(5, 2)
    np.testing.assert_array_equal(rtx.index_select(rtx.tensor(x), idx).numpy(), x[[0] * 4])
    np.testing.assert_array_equal(rtx.index_add(rtx.tensor(x[:4]), idx, 1).numpy(),
                                  x[:4].sum(0, keepdims=True))


def test_kernel_on_readonly_numpy_input():
    B = rtx.CpuBackend()
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    x.flags.writeable = False
    np.testing.assert_array_equal(B.index_select(x, rtx.IndexPlan([9, 0], 10)), x[[9, 0]])
    np.testing.assert_array_equal(B.index_add(x, rtx.IndexPlan([1] * 10, 2), 2),
                                  np_add_at(x, [1] * 10, 2))


# --------------------------------------------------------------- bad input
BAD_INDICES = [
    ([[0, 1]], TypeError, "1-D"),
    (np.zeros((2, 1), np.int64), TypeError, "1-D"),
    (np.array(1), TypeError, "1-D"),
    (3, TypeError, "indices"),
    (None, TypeError, "indices"),
    ("01", TypeError, "indices"),
    ([0.0, 1.0], TypeError, "int32 or int64"),
    (np.array([0, 1], np.float32), TypeError, "int32 or int64"),
    (np.array([0, 1], np.uint32), TypeError, "int32 or int64"),
    (np.array([0, 1], np.int16), TypeError, "int32 or int64"),
    ([True, False], TypeError, "bool"),
    (np.array([True, False]), TypeError, "int32 or int64"),
    ([0, [1]], TypeError, "indices"),
    ([0, 2, -1], IndexError, r"indices\[2\] = -1 is out of range .*\[0, 4\)"),
    ([0, 4], IndexError, r"indices\[1\] = 4 is out of range .*\[0, 4\)"),
    (np.array([3, 2**31 - 1], np.int32), IndexError, r"indices\[1\] = 2147483647"),
    ([1, 2**70], IndexError, r"indices\[1\]"),
]


def _snapshot(*arrays):
    return [np.array(a, copy=True) for a in arrays]


@pytest.mark.parametrize("bad,exc,msg", BAD_INDICES)
def test_index_select_bad_indices(backend, bad, exc, msg):
    x_np = np.arange(12, dtype=np.float64).reshape(4, 3)
    x = rtx.tensor(x_np)
    before = x.numpy().copy()
    bad_before = _snapshot(bad) if isinstance(bad, np.ndarray) else None
    with gc_paused():
        allocs, held = rtx.memory_stats()["allocations"], rtx.memory_stats()["current_bytes"]
        with pytest.raises(exc, match=msg):
            rtx.index_select(x, bad)
        # no output was allocated (at most the private index snapshot, freed
        # again) and nothing was modified
        assert rtx.memory_stats()["allocations"] - allocs <= 1
        assert rtx.memory_stats()["current_bytes"] == held
    np.testing.assert_array_equal(x.numpy(), before)
    if bad_before is not None:
        np.testing.assert_array_equal(bad, bad_before[0])


@pytest.mark.parametrize("bad,exc,msg", BAD_INDICES)
def test_index_add_bad_indices(backend, bad, exc, msg):
    n = len(bad) if isinstance(bad, list) or (isinstance(bad, np.ndarray) and bad.ndim) else 2
    src_np = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
    src = rtx.tensor(src_np)
    with gc_paused():
        allocs, held = rtx.memory_stats()["allocations"], rtx.memory_stats()["current_bytes"]
        with pytest.raises(exc, match=msg):
            rtx.index_add(src, bad, 4)
        # at most the private index snapshot was allocated, and it is gone again
        assert rtx.memory_stats()["allocations"] - allocs <= 1
        assert rtx.memory_stats()["current_bytes"] == held
    np.testing.assert_array_equal(src.numpy(), src_np)


@pytest.mark.parametrize("num_rows,exc,msg", [
    (-1, ValueError, "num_rows must be >= 0"),
    (2.0, TypeError, "num_rows must be an int"),
    (True, TypeError, "num_rows must be an int"),
    (None, TypeError, "num_rows must be an int"),
    ("3", TypeError, "num_rows must be an int"),
    (1, IndexError, r"indices\[0\] = 1 is out of range .*\[0, 1\)"),
])
def test_index_add_bad_num_rows(backend, num_rows, exc, msg):
    src = rtx.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(exc, match=msg):
        rtx.index_add(src, [1, 0], num_rows)


def test_index_add_numpy_integer_num_rows(backend):
    out = rtx.index_add(rtx.tensor(np.ones((2, 1))), [1, 1], np.int64(3))
    assert out.shape == (3, 1)


def test_index_add_length_mismatch(backend):
    src = rtx.tensor(np.ones((3, 2), np.float32))
    idx = np.array([0, 1], np.int64)
    with pytest.raises(ValueError, match=r"len\(indices\) = 2 must equal src.shape\[0\] = 3"):
        rtx.index_add(src, idx, 4)
    np.testing.assert_array_equal(idx, [0, 1])


def test_zero_dim_data_rejected(backend):
    with pytest.raises(ValueError, match="x must have at least 1 dimension"):
        rtx.index_select(rtx.tensor(np.float64(1.0)), [0])
    with pytest.raises(ValueError, match="src must have at least 1 dimension"):
        rtx.index_add(rtx.tensor(np.float64(1.0)), [0], 1)


@pytest.mark.parametrize("num_rows,row", [(2**48, (4,)), (2**40, (2**30,)), (2**70, (1,))])
def test_index_add_huge_num_rows_is_memory_error(backend, num_rows, row):
    src = rtx.tensor(np.ones((0,) + row, np.float32))  # no elements, wide rows
    with pytest.raises(MemoryError):
        rtx.index_add(src, [], num_rows)


def test_index_add_huge_num_rows_with_indices(backend):
    src = rtx.tensor(np.ones((2, 8), np.float32))
    with pytest.raises(MemoryError):
        rtx.index_add(src, [0, 2**45], 2**50)
    with pytest.raises(MemoryError):
        rtx.index_add(src, [0, 2**62], 2**70)
    with pytest.raises((IndexError, MemoryError)):
        rtx.index_add(src, [0, -1], 2**70)
    # the process is fine afterwards
    assert rtx.index_add(src, [0, 0], 1).numpy()[0, 0] == 2.0


# -------------------------------------------------- inputs never modified
def test_inputs_unchanged_after_success(backend, dtype):
    rng = np.random.default_rng(3)
    x_np = rng.standard_normal((50, 4)).astype(dtype)
    idx = rng.integers(0, 50, 200).astype(np.int32)
    x, idx_copy = rtx.tensor(x_np), idx.copy()
    rtx.index_select(x, idx)
    rtx.index_add(rtx.index_select(x, idx), idx, 50)
    np.testing.assert_array_equal(x.numpy(), x_np)
    np.testing.assert_array_equal(idx, idx_copy)


def test_output_does_not_alias_input(backend):
    x = rtx.tensor(np.arange(6.0).reshape(3, 2))
    out = rtx.index_select(x, [0, 1, 2])
    if backend.name == "cpu":
        assert not np.shares_memory(out.numpy(), x.numpy())


# ---------------------------------------------- large inputs / parallel paths
def _large(dtype, E=60_000, N=5_000, F=7, seed=4, order="uniform"):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, N, E)
    if order == "sorted":
        idx.sort()
    elif order == "skewed":  # most indices on few rows
        idx = np.minimum(rng.zipf(1.3, E) - 1, N - 1)
    return (rng.standard_normal((N, F)).astype(dtype), idx,
            rng.standard_normal((E, F)).astype(dtype))


@pytest.mark.parametrize("F", [1, 16, 70])
def test_large_inputs_cross_the_parallel_threshold(dtype, F):
    """Above the default thresholds (no forcing): the parallel kernels run and agree."""
    itemsize = np.dtype(dtype).itemsize
    E = 2 * max(_kernels.get_parallel_thresholds().values()) // (F * itemsize) + 1
    E = min(E, 400_000)
    assert E * F * itemsize >= _kernels.get_parallel_thresholds()["gather"]
    x, idx, src = _large(dtype, E=E, F=F)
    rtx.set_num_threads(2)
    got = rtx.index_select(rtx.tensor(x), idx).numpy()
    assert _kernels.last_kernel_thread_ids() == ([0, 1] if OMP else [0])
    np.testing.assert_array_equal(bits(got), bits(x[idx]))
    got = rtx.index_add(rtx.tensor(src[: len(idx)]), idx, x.shape[0]).numpy()
    expect_parallel = OMP and F * itemsize >= _kernels.get_parallel_thresholds()[
        "scatter_min_row_bytes"]
    assert _kernels.last_kernel_thread_ids() == ([0, 1] if expect_parallel else [0])
    np.testing.assert_array_equal(bits(got), bits(np_add_at(src[: len(idx)], idx, x.shape[0])))


@pytest.mark.parametrize("order", ["uniform", "sorted", "skewed"])
@pytest.mark.parametrize("F", [1, 3, 16, 33])
def test_scatter_strategies_bitwise_equal(dtype, order, F):
    x, idx, src = _large(dtype, E=20_000, N=3_000, F=F, order=order)
    ref = np_add_at(src, idx, 3_000)
    for strategy in STRATEGIES:
        for T in (1, 2, 3, 4):
            out = np.full((3_000, F), np.nan, dtype)  # the kernel must zero-fill itself
            _kernels.scatter_add_rows(src, idx, out, T, _kernels.SCATTER_STRATEGIES[strategy])
            np.testing.assert_array_equal(bits(out), bits(ref), err_msg=f"{strategy} T={T}")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_scatter_strategies_use_threads(strategy):
    x, idx, src = _large(np.float32, E=20_000, N=2_000, F=64)
    out = np.empty((2_000, 64), np.float32)
    _kernels.scatter_add_rows(src, idx, out, 2, _kernels.SCATTER_STRATEGIES[strategy])
    ids = _kernels.last_kernel_thread_ids()
    assert ids == ([0, 1] if OMP and strategy != "serial" else [0])


def test_scatter_strategy_rejects_unknown():
    out = np.empty((2, 1), np.float32)
    with pytest.raises(ValueError, match="unknown strategy"):
        _kernels.scatter_add_rows(np.ones((1, 1), np.float32), np.zeros(1, np.int64), out, 2, 9)


def test_threshold_setter_validates():
    with pytest.raises(ValueError):
        _kernels.set_parallel_thresholds(gather=-1)
    with pytest.raises(ValueError):
        _kernels.set_parallel_thresholds(scatter=1.5)
    assert set(_kernels.get_parallel_thresholds()) == {"gather", "scatter",
                                                       "scatter_min_row_bytes"}


@pytest.mark.parametrize("op", ["select", "add"])
def test_bitwise_equal_across_thread_counts_and_runs(dtype, op, force_parallel):
    x, idx, src = _large(dtype, E=30_000, N=400, F=24)  # ~75 duplicates per row
    results = []
    for T in (1, 2, 4, 2, 1, 4):
        rtx.set_num_threads(T)
        if op == "select":
            out = rtx.index_select(rtx.tensor(x), idx).numpy()
        else:
            out = rtx.index_add(rtx.tensor(src), idx, 400).numpy()
        ids = _kernels.last_kernel_thread_ids()
        assert ids == (list(range(T)) if OMP else [0]), (T, ids)
        results.append(bits(out).copy())
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


@pytest.mark.valgrind
def test_parallel_paths_on_tiny_inputs(dtype, force_parallel):
    """Threshold 0: more threads than rows/indices, N < T, E < T."""
    rng = np.random.default_rng(5)
    for N, E, F in [(1, 5, 3), (3, 1, 2), (2, 2, 1), (10, 0, 4), (1, 1, 1)]:
        x = rng.standard_normal((N, F)).astype(dtype)
        idx = rng.integers(0, N, E)
        src = rng.standard_normal((E, F)).astype(dtype)
        for T in (2, 4, 7):
            rtx.set_num_threads(T)
            np.testing.assert_array_equal(rtx.index_select(rtx.tensor(x), idx).numpy(), x[idx])
            np.testing.assert_array_equal(bits(rtx.index_add(rtx.tensor(src), idx, N).numpy()),
                                          bits(np_add_at(src, idx, N)))


def test_parallel_thread_ids_prove_openmp():
    if not OMP:
        pytest.skip("serial build")
    assert _kernels.parallel_thread_ids(10_000, 2) == 2


def test_copy_bandwidth_kernel_copies():
    src = np.random.default_rng(0).integers(0, 255, 100_003, dtype=np.uint8)
    dst = np.zeros_like(src)
    _kernels.copy_bandwidth_kernel(src, dst, 3)
    np.testing.assert_array_equal(src, dst)


# --------------------------------------------------- defaults vs kernels
@pytest.mark.parametrize("shape", [(40,), (40, 5), (40, 3, 4), (40, 0)])
def test_backend_default_bodies_match_cpu_kernels(dtype, shape, force_parallel):
    """Backend's host round-trip defaults and CpuBackend's kernels: the same bits."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape).astype(dtype)
    raw = rng.integers(0, 40, 300).astype(np.int32)
    src = rng.standard_normal((300,) + shape[1:]).astype(dtype)
    idx = rtx.IndexPlan(raw, 40)   # backends take checked plans (the faces make them)
    cpu, minimal = rtx.CpuBackend(), rtx.MinimalBackend()
    rtx.set_num_threads(2)
    for B in (cpu, minimal):
        default_sel = Backend.index_select(B, B.from_numpy(x), idx)
        default_add = Backend.index_add(B, B.from_numpy(src), idx, 40)
        np.testing.assert_array_equal(bits(B.to_numpy(default_sel)),
                                      bits(cpu.index_select(x, idx)))
        np.testing.assert_array_equal(bits(B.to_numpy(default_add)),
                                      bits(cpu.index_add(src, idx, 40)))
        np.testing.assert_array_equal(bits(B.to_numpy(B.index_add(B.from_numpy(src), idx, 40))),
                                      bits(cpu.index_add(src, idx, 40)))


# ----------------------------------------------------------------- adjoint
# ------------------------------------------------------- property tests
_settings = settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def gather_case(draw):
    n = draw(st.integers(1, 12))
    tail = draw(st.lists(st.integers(0, 4), max_size=2))
    dt = draw(st.sampled_from([np.float32, np.float64]))
    x = draw(hnp.arrays(dt, (n, *tail), elements=st.floats(-1e6, 1e6, width=32)))
    idx = draw(hnp.arrays(draw(st.sampled_from(INDEX_DTYPES)), st.integers(0, 40),
                          elements=st.integers(0, n - 1)))
    return x, idx


@given(case=gather_case(), threads=st.sampled_from([1, 2, 3]), parallel=st.booleans())
@_settings
def test_property_index_select_matches_np_take(backend, case, threads, parallel):
    x, idx = case
    rtx.set_num_threads(threads)
    old = _kernels.set_parallel_thresholds(gather=0 if parallel else 1 << 40)
    try:
        got = rtx.index_select(rtx.tensor(x), idx).numpy()
    finally:
        _kernels.set_parallel_thresholds(**old)
    np.testing.assert_array_equal(bits(got), bits(np.take(x, idx, axis=0)))


@st.composite
def scatter_case(draw):
    n = draw(st.integers(0, 12))
    tail = draw(st.lists(st.integers(0, 4), max_size=2))
    dt = draw(st.sampled_from([np.float32, np.float64]))
    e = draw(st.integers(0, 40)) if n > 0 else 0
    idx = draw(hnp.arrays(draw(st.sampled_from(INDEX_DTYPES)), e,
                          elements=st.integers(0, max(n - 1, 0))))
    src = draw(hnp.arrays(dt, (e, *tail), elements=st.floats(-1e6, 1e6, width=32)))
    return src, idx, n


@given(case=scatter_case(), threads=st.sampled_from([1, 2, 3]),
       strategy=st.sampled_from(["auto", *STRATEGIES]))
@_settings
def test_property_index_add_matches_np_add_at(backend, case, threads, strategy):
    src, idx, n = case
    ref = np_add_at(src, idx, n)
    rtx.set_num_threads(threads)
    old = _kernels.set_parallel_thresholds(scatter=0)
    try:
        got = rtx.index_add(rtx.tensor(src), idx, n).numpy()
    finally:
        _kernels.set_parallel_thresholds(**old)
    np.testing.assert_array_equal(bits(got), bits(ref))
    # the kernel itself, every strategy, on an output full of garbage
    row = int(np.prod(src.shape[1:]))
    flat = np.ascontiguousarray(src).reshape(src.shape[0], row)
    out = np.full((n, row), np.inf, src.dtype)
    _kernels.scatter_add_rows(flat, idx, out, threads, _kernels.SCATTER_STRATEGIES[strategy])
    np.testing.assert_array_equal(bits(out), bits(ref.reshape(n, row)))


# ------------------------------------------------------- benchmark smoke
def test_benchmark_quick_mode_runs():
    """``python benchmarks/run.py index --quick`` runs end to end against the rtx
    under test (it also checks rtx against numpy/scipy before timing); no timing
    is asserted."""
    import os

    from conftest import run_python

    run = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "benchmarks", "run.py")
    if not os.path.isfile(run):
        pytest.skip("benchmarks/ is not here (tests copied out of the checkout)")
    r = run_python([run, "index", "--quick", "--repeats", "1", "--anchors", "numpy,scipy"])
    assert r.returncode == 0, r.stderr
    assert f"from {os.path.dirname(os.path.realpath(rtx.__file__))}" in r.stdout, r.stdout[:300]
    assert "rtx.index_select" in r.stdout and "rtx.index_add" in r.stdout
    assert "copy bandwidth" in r.stdout
    r = run_python([run, "tape", "--ops", "10", "--repeats", "2", "--no-torch"])
    assert r.returncode == 0, r.stderr
    assert "fwd+bwd" in r.stdout
