"""Segment ops (issue 11 item 3), what op_db's generic tests do not cover:
segment_softmax against a loop reference on large scores and a dense softmax,
max's ties and NaN, softmax's backward formula, the softmax kernels' two paths
bitwise equal, the kernels' own argument checks, a huge segment count.  Values,
gradchecks, adjoints, bitwise determinism across threads and index forms, bad
inputs and properties: tests/op_db.py entries, run by test_ops.py,
test_autograd.py and test_graph_ops_db.py."""

from __future__ import annotations

import numpy as np
import pytest
from _graph_reference import np_segment_max
from conftest import bits, child_env, run_python, tol

import rtx
from rtx import _kernels

INDEX_DTYPES = [np.int32, np.int64]


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
# --------------------------------------------------------------- bad input
# ---------------------------------------------------------------- property
def softmax_kernels_agree(s, g, plan, N, threads):
    """The CSR and the entry-order softmax kernels -- and, for indices that never
    descend, the entry-order kernel on chunks cut between segments -- forward
    and backward on ``threads``, give the same bits; returns the forward."""
    ptr, perm = plan.csr()
    idx = plan.indices
    chunks = [False] + ([True] if plan._is_sorted() else [])
    old = _kernels.set_segment_parallel_min(0)
    try:
        a = np.empty_like(s)
        _kernels.segment_softmax_csr(s, perm, ptr, a, threads)
        c = np.empty_like(s)
        _kernels.segment_softmax_backward_csr(a, g, perm, ptr, c, threads)
        for is_sorted in chunks:
            b = np.full_like(s, 7)
            _kernels.segment_softmax_entries(s, idx, N, b, threads, is_sorted)
            np.testing.assert_array_equal(bits(a), bits(b))
            d = np.full_like(s, 7)
            _kernels.segment_softmax_backward_entries(a, g, idx, N, d, threads, is_sorted)
            np.testing.assert_array_equal(bits(c), bits(d))
    finally:
        _kernels.set_segment_parallel_min(old)
    return a


@pytest.mark.valgrind
@pytest.mark.parametrize("H", [1, 3, 8])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("order", ["random", "sorted", "sorted+loops"])
def test_softmax_entry_and_csr_kernels_are_bitwise_equal(dtype, H, threads, order):
    """The two forward/backward kernels (chosen by row width and order) give the
    same bits; sorted indices take the grouped kernel's side-by-side runs."""
    rng = np.random.default_rng(7)
    E, N = 3000, 70
    idx = rng.integers(0, N, E).astype(np.int32)
    idx[idx == 5] = 6  # an empty segment
    if order != "random":  # sorted by counting (valgrind cannot run numpy's SIMD sort)
        idx = np.repeat(np.arange(N, dtype=np.int32), np.bincount(idx, minlength=N))
    if order == "sorted+loops":  # self-loops appended: one entry per segment at the end
        idx = np.concatenate([idx[: E - N], np.arange(N, dtype=np.int32)])
    s = (rng.standard_normal((E, H)) * 20).astype(dtype)
    s[3, 0] = -np.inf
    s[idx == 9] = -0.0  # signed zeros: the max's sign must not matter
    s[np.flatnonzero(idx == 9)[:2]] = 0.0
    g = rng.standard_normal((E, H)).astype(dtype)
    plan = rtx.IndexPlan(idx, N)
    a = softmax_kernels_agree(s, g, plan, N, threads)
    np.testing.assert_allclose(a, ref_softmax(s, idx, N), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("H", [1, 2, 1100])
@pytest.mark.parametrize("threads", [2, 4, 5])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_softmax_entry_kernels_bucket_by_owner_for_any_team(dtype, H, threads, index_dtype):
    """The entry-order kernels on T > 1 threads copy each owner's entries into
    buckets (two owners: counters in registers; more: a table) and write by
    position: the same bits as the CSR kernels and as one thread, for int32 and
    int64 indices, rows wider than the exponentiation block (H = 1100 > 1024),
    hubs, NaN and -inf scores and empty segments.  E is odd: the buckets' int32
    index copies then end off an 8-byte boundary, where the float64 values must
    not start (UBSan's misaligned store, under the ASan job)."""
    rng = np.random.default_rng(11)
    E, N = (301, 9) if H > 8 else (4001, 120)
    idx = rng.integers(0, N, E)
    idx[: E // 4] = 3                           # a hub segment beside short ones
    idx[idx == 7] = 8                           # an empty segment
    rng.shuffle(idx)
    idx = idx.astype(index_dtype)
    s = (rng.standard_normal((E, H)) * 20).astype(dtype)
    s[np.flatnonzero(idx == 2)[:1], 0] = np.nan  # segment 2's column 0 is NaN
    s[np.flatnonzero(idx == 4), 0] = -np.inf    # segment 4's column 0: exp(-inf - -inf)
    g = rng.standard_normal((E, H)).astype(dtype)
    plan = rtx.IndexPlan(idx, N)
    got = softmax_kernels_agree(s, g, plan, N, threads)
    np.testing.assert_array_equal(bits(softmax_kernels_agree(s, g, plan, N, 1)), bits(got))
    special = (idx == 2) | (idx == 4)
    clean = s.copy()
    clean[special, 0] = 0                       # the reference sees finite scores only
    want = ref_softmax(clean, idx, N)
    np.testing.assert_allclose(got[~special], want[~special], **tol(dtype))
    np.testing.assert_allclose(got[special, 1:], want[special, 1:], **tol(dtype))
    assert np.isnan(got[special, 0]).all()


@pytest.mark.parametrize("H", [1, 4, 1100])
@pytest.mark.parametrize("threads", [2, 3, 5])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("layout", ["short segments", "hub across the cuts", "one segment",
                                    "empty segments", "more segments than entries"])
def test_softmax_on_sorted_chunks(dtype, H, threads, index_dtype, layout):
    """Sorted indices: each thread runs the one-thread entry-order passes on a
    chunk of positions cut between segments (the cut moves past a segment that
    straddles it, so a hub can leave a thread nothing): the CSR kernels' bits,
    NaN and -inf scores included.  With more segments than entries the state is
    kept per run of equal indices (_ent_chunk_runs), not per segment."""
    rng = np.random.default_rng(13)
    E, N = (330, 12) if H > 8 else (5000, 2200)
    if layout == "more segments than entries":
        N = 9 * E
        idx = np.sort(rng.integers(0, N, E))
        idx[E // 2:E // 2 + 40] = idx[E // 2]             # and one longer run
        idx = np.sort(idx)
    elif layout == "short segments":
        idx = np.sort(rng.integers(0, N, E))
    elif layout == "hub across the cuts":
        idx = np.sort(np.concatenate([rng.integers(0, N, E // 3), np.full(E - E // 3, 5)]))
    elif layout == "one segment":
        idx = np.full(E, 3)
    else:
        idx = np.sort(rng.integers(0, N, E)) // 7 * 7     # six of every seven segments empty
    idx = idx.astype(index_dtype)
    s = (rng.standard_normal((E, H)) * 20).astype(dtype)
    s[0, 0] = np.nan
    s[np.flatnonzero(idx == idx[E // 2]), H - 1] = -np.inf
    g = rng.standard_normal((E, H)).astype(dtype)
    plan = rtx.IndexPlan(idx, N)
    assert plan._is_sorted()
    got = softmax_kernels_agree(s, g, plan, N, threads)
    np.testing.assert_array_equal(bits(softmax_kernels_agree(s, g, plan, N, 1)), bits(got))


@pytest.mark.valgrind
@pytest.mark.parametrize("H", [1, 4])
def test_softmax_state_by_run_small(dtype, H):
    """The run-indexed state (sorted indices, more segments than entries) on 1 and 2
    threads against the CSR kernels, small enough for memcheck."""
    rng = np.random.default_rng(H)
    E, N = 300, 3000
    idx = np.sort(rng.integers(0, N, E))
    s = rng.standard_normal((E, H)).astype(dtype)
    g = rng.standard_normal((E, H)).astype(dtype)
    plan = rtx.IndexPlan(idx, N)
    ref = softmax_kernels_agree(s, g, plan, N, 1)
    np.testing.assert_array_equal(bits(softmax_kernels_agree(s, g, plan, N, 2)), bits(ref))


@pytest.mark.valgrind
@pytest.mark.parametrize("layout", ["short segments", "hub", "one segment"])
def test_softmax_sorted_one_head_streams(dtype, layout):
    """Sorted indices, one score per entry: a chunk of at least 1,024 entries runs
    in four interleaved parts cut between segments (_ent_stream_cuts), on 1 and 2
    threads; the CSR kernels' bits, a NaN, -inf and signed zeros included, with
    parts of unequal length (the tails) and a segment longer than a part."""
    rng = np.random.default_rng(17)
    E, N = 2600, 700
    if layout == "short segments":
        idx = np.sort(rng.integers(0, N, E))
    elif layout == "hub":
        idx = np.sort(np.concatenate([rng.integers(0, N, E // 2), np.full(E - E // 2, 9)]))
    else:
        idx = np.full(E, 4)
    s = rng.standard_normal((E, 1)).astype(dtype)
    s[7, 0], s[E - 3, 0] = np.nan, -np.inf
    k = E // 3 + int(np.flatnonzero(idx[E // 3:-1] == idx[E // 3 + 1:])[0])
    seg = np.flatnonzero(idx == idx[k])       # a segment of 2+ entries: max -0.0 then +0.0
    s[seg, 0] = -np.abs(s[seg, 0]) - 1
    s[seg[:2], 0] = [-0.0, 0.0]
    g = rng.standard_normal((E, 1)).astype(dtype)
    plan = rtx.IndexPlan(idx, N)
    assert plan._is_sorted()
    ref = softmax_kernels_agree(s, g, plan, N, 1)
    np.testing.assert_array_equal(bits(softmax_kernels_agree(s, g, plan, N, 2)), bits(ref))


@pytest.mark.skipif(not _kernels.openmp_enabled(), reason="serial build")
@pytest.mark.parametrize("H", [1, 2])
def test_softmax_backward_team_over_a_random_index(dtype, H, monkeypatch):
    """The backend's entry-order backward over random indices runs on one thread
    while one head's state (N values) fits SOFTMAX_BWD_SERIAL_STATE_BYTES (a team
    would first bucket every entry by owner), on the team past it or for wider
    rows; the forward keeps its team.  The bits are the team kernel's either way."""
    from rtx.backend import CpuBackend
    from rtx.backend import segment as seg

    rng = np.random.default_rng(23)
    E, N = 6000, 150
    idx = rng.integers(0, N, E)
    plan = rtx.IndexPlan(idx, N)
    assert not plan.is_ordered()
    s = rng.standard_normal((E, H)).astype(dtype)
    g = rng.standard_normal((E, H)).astype(dtype)
    B = CpuBackend()
    old, threads = _kernels.set_segment_parallel_min(0), rtx.get_num_threads()
    rtx.set_num_threads(2)
    try:
        y = B.to_numpy(B.segment_softmax(B.from_numpy(s), plan, N))
        assert _kernels.last_kernel_thread_ids() == [0, 1]
        team = np.empty_like(s)
        _kernels.segment_softmax_backward_entries(y, g, plan._narrow_idx(), N, team, 2)
        assert _kernels.last_kernel_thread_ids() == [0, 1]
        for limit, one in ((seg.SOFTMAX_BWD_SERIAL_STATE_BYTES, H == 1),
                           (N * np.dtype(dtype).itemsize - 1, False)):
            monkeypatch.setattr(seg, "SOFTMAX_BWD_SERIAL_STATE_BYTES", limit)
            got = B.to_numpy(B.segment_softmax_backward(B.from_numpy(y), B.from_numpy(g),
                                                        plan, N))
            assert _kernels.last_kernel_thread_ids() == ([0] if one else [0, 1])
            np.testing.assert_array_equal(bits(got), bits(team))
    finally:
        _kernels.set_segment_parallel_min(old)
        rtx.set_num_threads(threads)


@pytest.mark.skipif(not _kernels.openmp_enabled(), reason="serial build")
def test_softmax_entry_kernels_with_a_smaller_team_than_asked():
    """OpenMP may give a region fewer threads than the kernel's T (here
    OMP_THREAD_LIMIT=1 under 4 asked): each thread then takes several of the T
    tasks of each step, and the results are still the CSR kernel's bits."""
    code = """
import numpy as np, rtx
from rtx import _kernels as K
K.set_segment_parallel_min(0)
rng = np.random.default_rng(5)
idx = rng.integers(0, 50, 3000)
s = rng.standard_normal((3000, 2)).astype(np.float32)
g = rng.standard_normal((3000, 2)).astype(np.float32)
ptr, perm = rtx.IndexPlan(idx, 50).csr()
a, b, c, d = (np.empty_like(s) for _ in range(4))
K.segment_softmax_csr(s, perm, ptr, a, 1)
K.segment_softmax_entries(s, idx, 50, b, 4)
K.segment_softmax_backward_csr(a, g, perm, ptr, c, 1)
K.segment_softmax_backward_entries(a, g, idx, 50, d, 4)
assert (a.view(np.uint32) == b.view(np.uint32)).all()
assert (c.view(np.uint32) == d.view(np.uint32)).all()
print("ok")
"""
    env = child_env()
    env["OMP_THREAD_LIMIT"] = "1"
    r = run_python(["-c", code], env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.parametrize("threads", [1, 2])
def test_softmax_float32_exp_accuracy_and_limits(threads):
    """float32 segment softmax exponentiates with rtx_expf (rtx/_vmath.pxi): on
    segments {0, x} the weight of x is exp(x) / (1 + exp(x)) to a few ulp over
    the whole range where exp(x) is normal; below it (x < -87.3365) the weight is
    0, -inf gives 0, a NaN score makes its segment NaN, and a hub segment (more
    entries than the vectorised block holds, the scalar loop) has the same bits
    in the grouped and the entry-order kernels."""
    x = np.concatenate([-np.geomspace(1e-7, 87.33, 100_000), np.linspace(-87.33, 0, 50_001),
                        [-87.4, -90.0, -103.0, -1e30, -np.inf, np.nan]]).astype(np.float32)
    n = len(x)
    s = np.zeros((2 * n, 1), np.float32)
    s[1::2, 0] = x
    idx = np.repeat(np.arange(n), 2)
    plan = rtx.IndexPlan(idx, n)
    ptr, perm = plan.csr()
    y = np.empty_like(s)
    _kernels.segment_softmax_csr(s, perm, ptr, y, threads)
    got = y[1::2, 0].astype(np.float64)
    xd = x.astype(np.float64)
    ref = np.exp(xd) / (1 + np.exp(xd))
    ok = np.isfinite(xd) & (xd >= -87.33)
    np.testing.assert_allclose(got[ok], ref[ok], rtol=3e-7, atol=0)
    assert (got[-6:-2] == 0).all() and got[-2] == 0       # flushed below FLT_MIN, -inf
    assert np.isnan(y[-2:, 0]).all()                       # NaN: the whole segment
    # a hub over SEG_BUF (1024) entries beside short segments: both kernels agree
    rng = np.random.default_rng(3)
    hub = np.concatenate([np.zeros(1500, np.int64), rng.integers(1, 40, 1500)])
    sc = (rng.standard_normal((3000, 1)) * 10).astype(np.float32)
    hp = rtx.IndexPlan(hub, 40)
    hptr, hperm = hp.csr()
    old = _kernels.set_segment_parallel_min(0)
    try:
        a, b = np.empty_like(sc), np.empty_like(sc)
        _kernels.segment_softmax_csr(sc, hperm, hptr, a, threads)
        _kernels.segment_softmax_entries(sc, hp.indices, 40, b, threads)
    finally:
        _kernels.set_segment_parallel_min(old)
    np.testing.assert_array_equal(bits(a), bits(b))
    np.testing.assert_allclose(a, ref_softmax(sc, hub, 40), rtol=1e-5, atol=1e-7)


def test_index_plan_is_ordered_and_the_softmax_kernel_it_picks():
    """is_ordered: at most one descent per 16 indices (ascending, or ascending with
    self-loops appended); _is_sorted: none.  Sorted plans take the entry-order
    passes on chunks ("sorted", also once the plan has its grouping: the one-head
    forward's interleaved parts are as fast), nearly ordered ones the grouped kernel,
    random narrow ones the entry-order kernel: the values equal the reference
    every way."""
    from rtx.backend.segment import _softmax_kernel
    rng = np.random.default_rng(1)
    N = 50
    rand = rng.integers(0, N, 2000)
    srt = np.sort(rand)
    loops = np.concatenate([srt, np.arange(N)])
    assert rtx.IndexPlan(srt, N).is_ordered() and rtx.IndexPlan(loops, N).is_ordered()
    assert not rtx.IndexPlan(rand, N).is_ordered()
    assert rtx.IndexPlan(np.zeros(0, np.int64), 1).is_ordered()
    assert rtx.IndexPlan(srt, N)._is_sorted()
    assert rtx.IndexPlan(np.zeros(0, np.int64), 1)._is_sorted()
    assert not rtx.IndexPlan(loops, N)._is_sorted()
    assert not rtx.IndexPlan(rand, N)._is_sorted()
    s = rng.standard_normal(2050).astype(np.float32)
    for idx, kernel in ((rand, "entries"), (srt, "sorted"), (loops, "csr")):
        plan = rtx.IndexPlan(idx, N)
        x = s[: len(idx)]
        assert _softmax_kernel(plan, x.reshape(-1, 1), 2, False) == kernel
        out = rtx.segment_softmax(rtx.tensor(x), plan, N).numpy()
        np.testing.assert_allclose(out, ref_softmax(x.reshape(-1, 1), idx, N)[:, 0],
                                   rtol=1e-5, atol=1e-7)
    plan = rtx.IndexPlan(srt, N)
    plan.csr()                                       # grouped: still the sorted passes
    assert _softmax_kernel(plan, s[:2000].reshape(-1, 1), 2, False) == "sorted"
    assert _softmax_kernel(plan, s[:2000].reshape(-1, 1), 2, True) == "sorted"
    assert _softmax_kernel(plan, s[:2000].reshape(-1, 2), 2, False) == "sorted"


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
