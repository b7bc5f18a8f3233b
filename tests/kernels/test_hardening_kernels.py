"""Hardening of the kernel / Cython boundary (issue 9, kernel half).

* Index arrays are snapshotted: the kernels read a private, immutable,
  rtx-owned copy that was bounds-checked *after* it was copied, so another
  Python thread rewriting the user's index array mid-call cannot make a kernel
  write out of bounds (it segfaulted before).  Races run in a child process
  (``conftest.run_child``): a crash is a failed test, not a dead suite.
* DLPack arguments (``dl_device`` / ``max_version``) of every malformed form
  raise a clean exception (short tuples segfaulted: the extension is built
  with ``boundscheck=False``).
* Entry points of ``rtx._kernels`` clamp or reject thread counts and sizes
  before any OpenMP region or allocation sees them.
* Observable dispatch: the scatter strategy auto dispatch picks
  (``_kernels.scatter_strategy_for`` / ``last_scatter_strategy``), exact
  allocator counters under small and zero cache limits, and the DLPack
  owner's reference count checked first, in isolation.
"""

from __future__ import annotations

import textwrap
import threading

import numpy as np
import pytest
from conftest import run_child

import rtx
from rtx import _kernels
from rtx.backend.index import freeze_indices, is_index_snapshot, snapshot

needs_omp = pytest.mark.skipif(not _kernels.openmp_enabled(), reason="serial build")

# ------------------------------------------------------------------ races
_RACE = textwrap.dedent(
    """
    import sys, threading, time, numpy as np, rtx
    op, kind = sys.argv[1], sys.argv[2]
    N = 1000
    x = rtx.tensor(np.ones((N, 64), np.float32))
    src = rtx.tensor(np.ones((20000, 64), np.float32))
    if kind == "numpy":
        idx = np.zeros(20000, np.int64)
        def bad(): idx[:] = 1 << 40
        def good(): idx[:] = 0
    else:  # an rtx tensor rewritten in place by the other thread
        idx = rtx.zeros(20000, dtype="int64")
        view = idx.numpy()
        def bad(): view[:] = 1 << 40
        def good(): idx.fill_(0)
    stop = False
    def flip():
        while not stop:
            bad(); good()
    th = threading.Thread(target=flip)
    th.start()
    ok = errs = 0
    t_end = time.perf_counter() + float(sys.argv[3])
    try:
        while time.perf_counter() < t_end:
            try:
                if op == "select":
                    out = rtx.index_select(x, idx)
                else:
                    out = rtx.index_add(src, idx, N)
                ok += 1
            except IndexError:
                errs += 1
    finally:
        stop = True
        th.join()
    print("survived", ok, errs)
    """
)


@pytest.mark.parametrize("op", ["select", "add"])
@pytest.mark.parametrize("kind", ["numpy", "tensor"])
def test_index_array_rewritten_by_another_thread_never_crashes(op, kind):
    """Before the fix: segfault / bus error within a few hundred calls."""
    r = run_child(_RACE.replace("sys.argv[1], sys.argv[2]", f"{op!r}, {kind!r}")
                  .replace("float(sys.argv[3])", "2.0"), timeout=120)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-3000:])
    assert "survived" in r.stdout


@pytest.mark.valgrind
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_kernels_read_a_private_copy_checked_after_copying(itype):
    """Deterministic form of the race: the caller's array changes after
    validation (where the other thread strikes); the kernel reads the snapshot."""
    idx = np.array([0, 2, 1], dtype=itype)
    snap = snapshot(idx, 3, "index_select")
    assert is_index_snapshot(snap) and not np.shares_memory(snap, idx)
    plan = rtx.IndexPlan(idx, 3)              # what the faces hand a backend
    assert is_index_snapshot(plan._idx) and not np.shares_memory(plan._idx, idx)
    idx[:] = 1 << 30  # the user rewrites their array after validation
    x = np.arange(6.0).reshape(3, 2)
    for checked in (rtx.IndexPlan(snap, 3), plan):
        out = rtx.CpuBackend().index_select(x, checked)
        np.testing.assert_array_equal(out, x[[0, 2, 1]])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_snapshot_check_judges_exactly_the_copied_values(itype, threads):
    """While another thread flips entries between valid and out of range, the
    verdict of ``snapshot_indices`` must describe the copy it returns: no bad
    value in a snapshot reported clean, and the reported position is the first
    bad value of the copy.  (A check that re-read the caller's array after
    copying, the race the snapshot exists to close, fails this.)"""
    E, n = 1 << 22, 10
    idx = np.zeros(E, dtype=itype)
    stop = threading.Event()

    def flip():
        # whole-array in-place XOR: numpy releases the GIL for it, so the
        # flips sweep through the array while the snapshot copies and checks
        while not stop.is_set():
            np.bitwise_xor(idx, 1 << 30, out=idx)

    th = threading.Thread(target=flip)
    th.start()
    seen = {"clean": 0, "bad": 0}
    try:
        import time
        t_end = time.perf_counter() + 2.0
        while time.perf_counter() < t_end:
            snap, bad = _kernels.snapshot_indices(idx, n, threads)
            if bad < 0:
                assert int(snap.max()) < n, "a bad value in a snapshot reported clean"
                seen["clean"] += 1
            else:
                assert int(snap[bad]) >= n, "the reported position holds a valid value"
                assert int(snap[:bad].max(initial=0)) < n, "an earlier bad value was skipped"
                seen["bad"] += 1
    finally:
        stop.set()
        th.join()
    assert seen["clean"] + seen["bad"] > 0


@pytest.mark.valgrind
def test_snapshots_are_immutable_and_recognised():
    idx = np.array([3, 1, 2], dtype=np.int64)
    snap = freeze_indices(idx, "index_select")
    assert is_index_snapshot(snap)
    assert not snap.flags.writeable
    with pytest.raises(ValueError):
        snap.setflags(write=True)  # the memory refuses writable exports
    with pytest.raises(TypeError):
        memoryview(snap.base)[0] = 1  # a read-only export
    with pytest.raises((BufferError, ValueError)):
        np.frombuffer(snap.base, dtype=np.int64)[0] = 5
    # a snapshot is reused, never copied again; a plain read-only array is not one
    assert freeze_indices(snap, "index_select") is snap
    ro = np.array([1, 2], dtype=np.int64)
    ro.setflags(write=False)
    assert not is_index_snapshot(ro)
    t = rtx.tensor([1, 2])
    assert not is_index_snapshot(t.numpy())
    # contiguous slices of a snapshot are still immutable snapshots
    assert is_index_snapshot(snap[1:])
    assert not is_index_snapshot(np.zeros(0, np.int64))


@pytest.mark.valgrind
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_snapshot_reports_the_first_bad_index_of_the_copy(itype):
    idx = np.array([0, 1, 5, -1, 7], dtype=itype)
    with pytest.raises(IndexError, match=r"indices\[2\] = 5"):
        snapshot(idx, 5, "index_select")
    with pytest.raises(IndexError, match=r"indices\[3\] = -1"):
        snapshot(idx, 6, "index_add")
    big = np.zeros(10000, dtype=itype)
    big[9000] = 10
    with pytest.raises(IndexError, match=r"indices\[9000\]"):
        snapshot(big, 10, "index_select")
    assert np.array_equal(snapshot(np.array([], dtype=itype), 0, "x"), [])
    # the whole array is copied even when an early block is bad, or unchecked
    idx = np.arange(3 * 4096 + 5, dtype=itype)[::-1].copy()
    for n in (-1, 0, 10, 2**40):
        snap, bad = _kernels.snapshot_indices(idx, n)
        assert np.array_equal(snap, idx)
        assert bad == {-1: -1, 0: 0, 10: 0, 2**40: -1}[n]
    assert np.array_equal(freeze_indices(idx, "x"), idx)


@pytest.mark.valgrind
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_snapshot_in_parts_is_the_serial_snapshot(itype):
    """``snapshot_indices(idx, n, threads)`` copies and checks in one part per
    thread: the same copy and the same first bad position as one thread, with
    the bad values in the first, a middle or the last part, on a part's edge,
    in several parts, or nowhere, and parts shorter than a copy block."""
    rng = np.random.default_rng(5)
    for m in (3, 7, 4096 * 3 + 5, 40_000):
        base = rng.integers(0, 100, m).astype(itype)
        cases = [[], [0], [m - 1], [m // 2], [m // 3, m - 1], [m // 3 + 1, m // 2, 1]]
        for threads in (2, 3, 5):
            if m < threads:
                continue
            edges = [m * t // threads for t in range(1, threads)]   # each part's first
            for bads in cases + [[e] for e in edges] + [[e - 1] for e in edges]:
                idx = base.copy()
                idx[bads] = np.array([-1, 100, 10**6])[np.arange(len(bads)) % 3]
                for n in (100, -1):
                    want, wbad = _kernels.snapshot_indices(idx, n)
                    got, gbad = _kernels.snapshot_indices(idx, n, threads)
                    assert _kernels.is_index_snapshot(got) and got.dtype == itype
                    np.testing.assert_array_equal(got, idx)
                    np.testing.assert_array_equal(got, want)
                    assert gbad == wbad == (min(bads) if bads and n >= 0 else -1)
    # a thread count beyond the kernels' cap, or none: the same snapshot
    idx = base.copy()
    idx[-1] = -5
    for threads in (0, -3, 10**6):
        got, bad = _kernels.snapshot_indices(idx, 100, threads)
        np.testing.assert_array_equal(got, idx)
        assert bad == m - 1


def test_boundary_snapshots_share_the_work_from_the_threshold():
    from rtx.backend import _index_check
    assert _index_check.snapshot_threads(_index_check.SNAPSHOT_PARALLEL_MIN - 1) == 1
    assert (_index_check.snapshot_threads(_index_check.SNAPSHOT_PARALLEL_MIN)
            == rtx.get_num_threads())
    # a bad index found by a part that is not the first: the boundary's error
    idx = np.zeros(_index_check.SNAPSHOT_PARALLEL_MIN + 10, dtype=np.int64)
    idx[-3] = 7
    before = rtx.get_num_threads()
    try:
        rtx.set_num_threads(2)
        with pytest.raises(IndexError, match=rf"indices\[{len(idx) - 3}\] = 7"):
            rtx.index_select(rtx.zeros((5, 2)), idx)
    finally:
        rtx.set_num_threads(before)


def test_backward_uses_the_indices_of_the_forward():
    """The tape keeps the snapshot: rewriting the user's index array between
    forward and backward no longer changes the gradient (it silently did)."""
    x = rtx.tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    idx = np.array([0, 0, 3], dtype=np.int64)
    y = rtx.index_select(x, idx)
    idx[:] = 1
    (y * rtx.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[4, 6], [0, 0], [0, 0], [5, 6]])


def test_index_select_input_is_never_modified_and_results_match():
    rng = np.random.default_rng(0)
    for itype in (np.int32, np.int64):
        idx = rng.integers(0, 50, size=300).astype(itype)
        before = idx.copy()
        x = rng.standard_normal((50, 3))
        np.testing.assert_array_equal(rtx.index_select(rtx.tensor(x), idx).numpy(), x[idx])
        out = rtx.index_add(rtx.tensor(rng.standard_normal((300, 3))), idx, 50)
        assert out.shape == (50, 3)
        np.testing.assert_array_equal(idx, before)


# ---------------------------------------------------------------- DLPack args
def _stable_id(v: object) -> str:
    """A test id that is the same in every process (pytest-xdist compares them)."""
    return "object()" if type(v) is object else repr(v)


_BAD_DEVICE = [(), (1,), [1], (None, 0), (1, None), (None, None), ("1", "0"), "10", b"10",
               1, 1.0, (1.5, 0), (1, 0, 0), {0: 1, 1: 0}, (2**64, 0), (1, 2**64),
               (-(2**70), 0), object(), (True, False)]
_BAD_VERSION = [(), (1,), [1], (None, 0), (1, None), ("1", "0"), "10", b"1", 1, 1.0,
                (1.5, 0), {0: 1, 1: 0}, object(), (True, 0)]


def _dlpack_child(kwarg: str, values_src: str) -> str:
    return textwrap.dedent(f"""
        import rtx
        t = rtx.tensor([1.0, 2.0])
        for v in {values_src}:
            try:
                t.__dlpack__(**{{{kwarg!r}: v}})
            except (TypeError, ValueError, BufferError, OverflowError):
                pass
            else:
                raise SystemExit(f"accepted {{v!r}}")
        print("clean")
        """)


@pytest.mark.parametrize("kwarg", ["dl_device", "max_version"])
def test_malformed_dlpack_arguments_in_a_child(kwarg):
    """Before the fix ``dl_device=(1,)`` segfaulted: checked in a child first."""
    r = run_child(_dlpack_child(kwarg, "[(), (1,), [1], 'a', (None,)]"))
    assert r.returncode == 0 and "clean" in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])


@pytest.mark.valgrind
@pytest.mark.parametrize("dev", _BAD_DEVICE, ids=_stable_id)
def test_malformed_dl_device_raises_cleanly(dev):
    t = rtx.tensor([1.0, 2.0])
    with pytest.raises((TypeError, BufferError)):
        t.__dlpack__(dl_device=dev)


@pytest.mark.valgrind
@pytest.mark.parametrize("ver", _BAD_VERSION, ids=_stable_id)
def test_malformed_max_version_raises_cleanly(ver):
    t = rtx.tensor([1.0, 2.0])
    with pytest.raises(TypeError):
        t.__dlpack__(max_version=ver)


@pytest.mark.valgrind
def test_wellformed_dlpack_arguments_still_work():
    t = rtx.tensor([1.0, 2.0])
    for dev in [(1, 0), [1, 0], (np.int32(1), np.int64(0))]:
        assert _kernels.dlpack_capsule_state(t.__dlpack__(dl_device=dev)) == "unused"
    for ver in [(1, 0), [0, 8], (2**70, 0), (np.int64(1), 3)]:
        assert _kernels.dlpack_capsule_state(t.__dlpack__(max_version=ver)) == "unused"
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))   # a well-formed pair for another device
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(1, 2**70))
    for copy in (1, 0, "yes", np.bool_(True)):
        with pytest.raises(TypeError):
            t.__dlpack__(copy=copy)
    with pytest.raises(ValueError):
        t.__dlpack__(stream=1)


@pytest.mark.valgrind
def test_module_constants_cannot_break_the_export():
    """The export reads its version from C constants, not from module globals a
    user can rebind (``DLPACK_VERSION = ()`` read out of bounds before)."""
    old = _kernels.DLPACK_VERSION
    try:
        _kernels.DLPACK_VERSION = ()
        cap = rtx.tensor([1.0]).__dlpack__(max_version=(1, 0))
        assert np.from_dlpack(_Holder(cap)).tolist() == [1.0]
    finally:
        _kernels.DLPACK_VERSION = old


class _Holder:
    def __init__(self, cap):
        self.cap = cap

    def __dlpack__(self, **kw):
        return self.cap

    def __dlpack_device__(self):
        return (1, 0)


# -------------------------------------------------------- kernel entry points
@pytest.mark.valgrind
@pytest.mark.parametrize("threads", [-5, 0, 1, 257])
def test_kernel_thread_counts_are_clamped(threads):
    x = np.arange(20.0).reshape(10, 2)
    idx = snapshot(np.array([9, 0, 3], dtype=np.int64), 10, "t")
    out = np.empty((3, 2))
    _kernels.gather_rows(x, idx, out, threads)
    np.testing.assert_array_equal(out, x[[9, 0, 3]])
    res = np.empty((10, 2))
    _kernels.scatter_add_rows(out, idx, res, threads)
    ref = np.zeros((10, 2))
    np.add.at(ref, [9, 0, 3], out)
    np.testing.assert_array_equal(res, ref)
    src = np.arange(100, dtype=np.uint8)
    dst = np.zeros(100, dtype=np.uint8)
    _kernels.copy_bandwidth_kernel(src, dst, threads)
    np.testing.assert_array_equal(dst, src)
    assert 1 <= _kernels.parallel_thread_ids(50, threads) <= 256


_HUGE_TEAMS = textwrap.dedent(
    """
    import numpy as np
    from rtx import _kernels as k
    from rtx.backend.index import snapshot
    E = 300_000                     # 2.4 MB: above every parallel threshold
    x = np.arange(2.0 * E).reshape(E, 2)
    idx = snapshot(np.arange(E)[::-1].copy(), E, "t")
    out = np.empty((E, 2))
    res = np.empty((E, 2))
    src = np.ones(1 << 22, np.uint8)
    dst = np.zeros(1 << 22, np.uint8)
    for T in (100_000, 2**31 - 1):
        k.gather_rows(x, idx, out, T)
        assert np.array_equal(out, x[::-1])
        k.scatter_add_rows(out, idx, res, T)
        assert np.array_equal(res, x)
        k.copy_bandwidth_kernel(src, dst, T)
        assert (dst == 1).all()
        assert 1 <= k.parallel_thread_ids(1000, T) <= 256
    print("ok")
    """
)


def test_absurd_kernel_team_sizes_are_clamped_in_a_child():
    """A team of 100,000 threads crashed libgomp (or exhausted memory): every
    kernel entry point clamps its ``num_threads`` to 256 itself."""
    r = run_child(_HUGE_TEAMS, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])


@pytest.mark.valgrind
def test_set_parallel_thresholds_is_all_or_nothing():
    old = _kernels.get_parallel_thresholds()
    try:
        with pytest.raises((ValueError, OverflowError)):
            _kernels.set_parallel_thresholds(gather=123, scatter=2**70)
        assert _kernels.get_parallel_thresholds() == old
        for bad in (-1, 1.5, True, "3", None.__class__):
            with pytest.raises(ValueError):
                _kernels.set_parallel_thresholds(scatter_min_row_bytes=bad)
    finally:
        _kernels.set_parallel_thresholds(**old)


@pytest.mark.valgrind
def test_kernel_shape_mismatches_raise_before_writing():
    x = np.ones((4, 3))
    idx = snapshot(np.array([1, 2], dtype=np.int64), 4, "t")
    out = np.full((2, 2), 7.0)
    with pytest.raises(ValueError):
        _kernels.gather_rows(x, idx, out, 1)
    assert (out == 7).all()
    res = np.full((4, 2), 7.0)
    with pytest.raises(ValueError):
        _kernels.scatter_add_rows(np.ones((2, 3)), idx, res, 1)
    with pytest.raises(ValueError):
        _kernels.scatter_add_rows(np.ones((3, 2)), idx, res, 1)
    for s in (-1, 5, 2**40):
        with pytest.raises((ValueError, OverflowError)):
            _kernels.scatter_add_rows(np.ones((2, 2)), idx, res, 1, s)
    assert (res == 7).all()
    with pytest.raises(ValueError):
        _kernels.copy_bandwidth_kernel(np.zeros(3, np.uint8), np.zeros(2, np.uint8), 1)


# ----------------------------------------------------- scatter strategy choice
def _auto(E, N, F, itemsize, T):
    return _kernels.scatter_strategy_for(E, N, F, itemsize, T)


def test_scatter_strategy_for_each_regime():
    """Every strategy is chosen where the thresholds say (a wrong cut-over was
    invisible before: every strategy gives the same bits)."""
    th = _kernels.get_parallel_thresholds()
    big, row_min = th["scatter"], th["scatter_min_row_bytes"]
    cols_block, csr_threads = _kernels.scatter_dispatch_constants()
    # one thread: always serial
    assert _auto(10**6, 10**4, 1024, 4, 1) == "serial"
    # below the size threshold: serial; at it: parallel
    F = 64
    n_rows = big // (F * 4)            # (E + N) * F * 4 == big when E + N == n_rows
    assert _auto(n_rows // 2, n_rows - n_rows // 2 - 1, F, 4, 2) == "serial"
    assert _auto(n_rows // 2, n_rows - n_rows // 2, F, 4, 2) == "rows"
    # narrow rows stay serial whatever the size; the narrowest parallel row
    narrow = row_min // 4 - 1
    assert _auto(10**7, 10**5, narrow, 4, 2) == "serial"
    assert _auto(10**7, 10**5, row_min // 4, 4, 2) == "rows"
    # wide rows: COLS once each thread's column block reaches cols_block bytes
    assert _auto(10**5, 10**4, cols_block * 2 // 4, 4, 2) == "cols"
    assert _auto(10**5, 10**4, cols_block * 2 // 4 - 1, 4, 2) == "rows"
    assert _auto(10**5, 10**4, cols_block * 2 // 8, 8, 2) == "cols"
    # many threads: CSR instead of ROWS
    assert _auto(10**6, 10**4, 64, 4, csr_threads) == "csr"
    assert _auto(10**6, 10**4, 64, 4, csr_threads - 1) == "rows"
    assert _auto(10**6, 10**4, cols_block * csr_threads // 4, 4, csr_threads) == "cols"


@needs_omp
@pytest.mark.parametrize("case,expect", [
    ((100, 50, 4, 2), "serial"),             # tiny
    ((20000, 2000, 64, 1), "serial"),        # one thread
    ((20000, 2000, 64, 2), "rows"),
    ((20000, 2000, 8, 2), "serial"),         # narrow rows
    ((4000, 500, 2048, 2), "cols"),          # wide rows
    ((20000, 2000, 64, 8), "csr"),           # many threads
])
def test_scatter_add_rows_runs_the_strategy_auto_dispatch_chose(case, expect):
    E, N, F, T = case
    rng = np.random.default_rng(1)
    src = rng.standard_normal((E, F)).astype(np.float32)
    idx = snapshot(rng.integers(0, N, E).astype(np.int64), N, "t")
    out = np.empty((N, F), np.float32)
    old = _kernels.set_parallel_thresholds(scatter=1 << 20)
    try:
        assert _auto(E, N, F, 4, T) == expect
        _kernels.scatter_add_rows(src, idx, out, T)
        assert _kernels.last_scatter_strategy() == expect
        ref = np.zeros((N, F), np.float32)
        np.add.at(ref, idx, src)
        assert np.array_equal(out, ref)
        for name, code in _kernels.SCATTER_STRATEGIES.items():
            _kernels.scatter_add_rows(src, idx, out, T, code)
            assert _kernels.last_scatter_strategy() == (expect if name == "auto" else (
                "serial" if T == 1 else name))
            assert np.array_equal(out, ref)
    finally:
        _kernels.set_parallel_thresholds(**old)


@needs_omp
def test_index_add_through_the_api_reports_its_strategy():
    rtx.set_num_threads(2)
    old = _kernels.set_parallel_thresholds(scatter=0, scatter_min_row_bytes=0)
    try:
        rtx.index_add(rtx.ones((64, 32)), np.arange(64) % 8, 8)
        assert _kernels.last_scatter_strategy() == "rows"
        rtx.set_num_threads(1)
        rtx.index_add(rtx.ones((64, 32)), np.arange(64) % 8, 8)
        assert _kernels.last_scatter_strategy() == "serial"
    finally:
        _kernels.set_parallel_thresholds(**old)


# ------------------------------------------------------------ allocator stats
_STATS_CHILD = textwrap.dedent(
    """
    import gc
    from rtx import _kernels as k
    gc.disable()
    def st(): return k.memory_stats()
    k.empty_cache()
    base = st()
    assert base["current_bytes"] == 0 or True
    def check(limit, nbytes, cached_after):
        k.set_cache_limit(limit)
        k.empty_cache()
        s0 = st()
        s = k.Storage(nbytes)
        cls = st()["current_bytes"] - s0["current_bytes"]
        assert cls >= nbytes, (cls, nbytes)
        s1 = st()
        assert s1["allocations"] == s0["allocations"] + 1
        del s
        s2 = st()
        assert s2["current_bytes"] == s0["current_bytes"], ("current not decremented", s0, s2)
        assert s2["frees"] == s0["frees"] + 1
        assert s2["cached_bytes"] == (cls if cached_after else 0), s2
        assert s2["system_frees"] == s0["system_frees"] + (0 if cached_after else 1), s2
        assert s2["peak_bytes"] >= s0["current_bytes"] + cls
        return cls
    check(0, 100, False)              # caching disabled
    check(0, 10**6, False)
    cls = check(1 << 20, 5000, True)  # fits under the limit
    check(4096, 5000, False)          # above a small limit: bypasses the cache
    check(1 << 30, 10**6, True)
    # a cache at its limit: the next block bypasses it and is still uncounted
    k.set_cache_limit(8192)
    k.empty_cache()
    a, b, c = k.Storage(4096), k.Storage(4096), k.Storage(4096)
    cur = st()["current_bytes"]
    del a
    assert st()["cached_bytes"] == 4096 and st()["current_bytes"] == cur - 4096
    del b
    assert st()["cached_bytes"] == 8192 and st()["current_bytes"] == cur - 8192
    sf = st()["system_frees"]
    del c
    s = st()
    assert s["cached_bytes"] == 8192 and s["current_bytes"] == cur - 3 * 4096, s
    assert s["system_frees"] == sf + 1
    # a cache hit is counted and served from the cache
    h = st()["cache_hits"]
    d = k.Storage(4033)  # same size class as 4096
    assert st()["cache_hits"] == h + 1 and st()["cached_bytes"] == 4096
    del d
    # lowering the limit below what is cached releases it
    k.set_cache_limit(100)
    assert st()["cached_bytes"] == 0
    print("ok")
    """
)


@pytest.mark.valgrind
def test_memory_stats_exact_with_small_and_zero_cache_limits():
    """In a child: the counters are process-global and the test sets the limit."""
    r = run_child(_STATS_CHILD)
    assert r.returncode == 0 and "ok" in r.stdout, (r.stdout, r.stderr[-3000:])


@pytest.mark.valgrind
def test_memory_stats_bypass_in_process():
    old = _kernels.get_cache_limit()
    try:
        _kernels.set_cache_limit(0)
        s0 = _kernels.memory_stats()
        s = _kernels.Storage(12345)
        del s
        s1 = _kernels.memory_stats()
        assert s1["current_bytes"] == s0["current_bytes"]
        assert s1["cached_bytes"] == 0
        assert s1["system_frees"] == s0["system_frees"] + 1
    finally:
        _kernels.set_cache_limit(old)


# --------------------------------------------- DLPack ownership, in isolation
_DLPACK_REFCOUNT = textwrap.dedent(
    """
    import sys, numpy as np, rtx
    from rtx import _kernels
    a = rtx.tensor(np.arange(4.0))
    arr = a.numpy()
    for ver in (None, (1, 0)):
        before = sys.getrefcount(arr)
        cap = _kernels.dlpack_export(arr, max_version=ver)
        after = sys.getrefcount(arr)
        if after != before + 1:
            print(f"OWNER-REFCOUNT: export took {after - before} references, expected 1")
            raise SystemExit(3)
        del cap   # an unconsumed capsule drops exactly that reference
        if sys.getrefcount(arr) != before:
            print(f"OWNER-REFCOUNT: capsule destructor left {sys.getrefcount(arr) - before}")
            raise SystemExit(4)
    print("ok")
    """
)


@pytest.mark.valgrind
def test_dlpack_export_takes_exactly_one_owner_reference_first():
    """Runs before any consumer touches the memory, in its own process: a
    missing ``Py_INCREF`` is named here instead of surfacing as a late crash."""
    r = run_child(_DLPACK_REFCOUNT)
    assert r.returncode == 0 and "ok" in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])


# -------------------------------------------------- misc. shared state
_REENTRANT_RELEASE = textwrap.dedent(
    """
    import gc, sys
    from rtx import _kernels as k
    errors = []
    sys.unraisablehook = lambda u: errors.append(repr(u.exc_value))
    k.set_cache_limit(1 << 26)
    for rnd in range(20):
        # many size classes in the cache ...
        blocks = [k.Storage(4096 + 512 * i) for i in range(64)]
        del blocks
        # ... and cyclic garbage holding Storages of other classes, which a
        # collection triggered inside the release frees into the cache
        for i in range(64):
            a = [k.Storage(1 << 16 + (i % 3))]
            a.append(a)
        del a
        gc.set_threshold(1, 1, 1)
        k.empty_cache()
        gc.set_threshold(700, 10, 10)
        gc.collect()
    s = k.memory_stats()
    k.empty_cache()
    s2 = k.memory_stats()
    assert s2["cached_bytes"] == 0, s2
    assert s2["system_frees"] - s["system_frees"] >= 0
    # every block obtained from the system is held by a Storage or returned
    assert s2["system_allocations"] - s2["system_frees"] == s2["allocations"] - s2["frees"], s2
    assert not errors, errors
    print("ok")
    """
)


def test_cache_release_with_frees_from_a_gc_inside_it():
    """Storages freed by garbage collections around ``empty_cache`` keep the
    counters consistent (the release detaches the cache before freeing it)."""
    r = run_child(_REENTRANT_RELEASE)
    assert r.returncode == 0 and "ok" in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])


def test_release_cache_survives_reentrant_frees():
    """Frees during a cache release (a GC pass inside it) are kept consistent."""
    old = _kernels.get_cache_limit()
    try:
        _kernels.set_cache_limit(1 << 24)
        blocks = [_kernels.Storage(4096 * (i % 5 + 1)) for i in range(200)]
        del blocks
        errors = []

        def churn():
            try:
                for _ in range(200):
                    xs = [_kernels.Storage(8192) for _ in range(5)]
                    del xs
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        th = threading.Thread(target=churn)
        th.start()
        for _ in range(50):
            _kernels.empty_cache()
        th.join()
        assert not errors
        s = _kernels.memory_stats()
        assert s["cached_bytes"] >= 0
        _kernels.empty_cache()
        assert _kernels.memory_stats()["cached_bytes"] == 0
    finally:
        _kernels.set_cache_limit(old)
