"""Threads: the GIL, concurrent kernel calls, set_num_threads races, fork.

* Every kernel releases the GIL while it runs: a second Python thread keeps
  executing *during* the call (checked by timestamps inside the call's middle
  third, not by timing ratios).
* Four Python threads calling the kernels at once, each with an OpenMP team of
  its own, get exactly the bits of a serial run.
* ``set_num_threads`` changed by one thread in a loop never corrupts another
  thread's call (results never depend on the thread count).
* ``os.fork()`` after the OpenMP pool was used does not hang the child: GNU
  libgomp is not fork-safe, so rtx runs kernels serially in a forked child
  (``rtx/_threads.py``, see docs/memory-safety.md).
"""

from __future__ import annotations

import os
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from conftest import run_child

import rtx
from rtx import _kernels

needs_omp = pytest.mark.skipif(not _kernels.openmp_enabled(), reason="serial build")


# ------------------------------------------------------------------ the GIL
def _gil_released_during(call, attempts: int = 8) -> tuple[bool, list[float]]:
    """Run ``call`` in a worker thread while this thread records timestamps.

    True when, for some call, this thread ran Python code in the middle third
    of the call.  A kernel that holds the GIL makes that impossible: this
    thread can only run before the call enters C or after it returns.
    """
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    durations = []
    try:
        for _ in range(attempts):
            spans: list[tuple[float, float]] = []
            ready = threading.Event()

            def worker(spans=spans, ready=ready):
                ready.wait()
                for _ in range(3):
                    s = time.perf_counter()
                    call()
                    spans.append((s, time.perf_counter()))

            th = threading.Thread(target=worker)
            th.start()
            stamps = []
            ready.set()
            while th.is_alive():
                stamps.append(time.perf_counter())
            th.join()
            ts = np.array(stamps)
            for s, e in spans:
                durations.append(e - s)
                lo, hi = s + (e - s) / 3, e - (e - s) / 3
                if np.any((ts > lo) & (ts < hi)):
                    return True, durations
    finally:
        sys.setswitchinterval(old)
    return False, durations


E, F = 250_000, 16
_rng = np.random.default_rng(0)
_X = _rng.standard_normal((E, F)).astype(np.float32)
_IDX = _rng.integers(0, E, E).astype(np.int64)
_BIG_IDX = np.tile(_IDX.astype(np.int32), 64)  # ~5 ms per call: room to observe


KERNELS = {
    "gather_rows": lambda: _kernels.gather_rows(_X, _IDX, np.empty_like(_X), 1),
    "scatter_add_rows": lambda: _kernels.scatter_add_rows(_X, _IDX, np.empty_like(_X), 1),
    "scatter_add_rows(2 threads)": lambda: _kernels.scatter_add_rows(
        _X, _IDX, np.empty_like(_X), 2),
    "first_out_of_bounds": lambda: _kernels.first_out_of_bounds(_BIG_IDX, E),
    "Storage(zeroed)": lambda: (_kernels.empty_cache(), _kernels.Storage(64 << 20, True)),
    "rtx.index_select": lambda: rtx.index_select(_XT, _IDX),
    "rtx.index_add": lambda: rtx.index_add(_XT, _IDX, E),
}
_XT = rtx.from_numpy(_X)
_FPROG = np.array([[_kernels.FUSED_OPS["mul"][0], 2, 0, 0, -1, -1],
                   [_kernels.FUSED_OPS["exp"][0], 3, 2, -1, -1, -1]], dtype=np.int32)
_FX = _X.reshape(-1)
KERNELS["fused_eval"] = lambda: _kernels.fused_eval(_FPROG, 4, [_FX], [], [],
                                                    [np.empty_like(_FX)], [3], _FX.shape, 1)
# the CSR kernels (segment, message passing, the plan's scatter) and the byte compare
_PLAN = rtx.IndexPlan(_IDX, E)
_PTR, _PERM = _PLAN.csr()
_ARG = np.zeros((E, F), np.int64)
_X1 = np.ascontiguousarray(_X[:, :1])
_W = _rng.standard_normal((E, 1)).astype(np.float32)
_BIG_COPY = _BIG_IDX.copy()
_X1_8, _IDX_8 = np.tile(_X1, (8, 1)), np.tile(_IDX, 8)
KERNELS.update({
    "csr_build": lambda: _kernels.csr_build(_BIG_IDX, np.empty(E + 2, np.int64),
                                            np.empty(len(_BIG_IDX), np.int64)),
    "scatter_add_csr": lambda: _kernels.scatter_add_csr(_X, _PERM, _PTR, np.empty_like(_X), 1),
    "segment_softmax_csr": lambda: _kernels.segment_softmax_csr(_X, _PERM, _PTR,
                                                                np.empty_like(_X), 1),
    "segment_softmax_entries": lambda: _kernels.segment_softmax_entries(
        _X1, _IDX, E, np.empty_like(_X1), 1),
    "segment_mean_csr": lambda: _kernels.segment_mean_csr(_X, _PERM, _PTR, np.empty_like(_X), 1),
    "segment_max_csr": lambda: _kernels.segment_max_csr(_X, _PERM, _PTR, np.empty_like(_X),
                                                        np.empty_like(_ARG), 1),
    "segment_min_csr": lambda: _kernels.segment_min_csr(_X, _PERM, _PTR, np.empty_like(_X),
                                                        np.empty_like(_ARG), 1),
    "segment_max_backward_csr": lambda: _kernels.segment_max_backward_csr(
        _X, _ARG, _PERM, _PTR, np.empty_like(_X), 1),
    "message_csr": lambda: _kernels.message_csr(_X, _IDX, _W, True, _PERM, _PTR,
                                                np.empty_like(_X), 1, 1),
    "message_backward_csr": lambda: _kernels.message_backward_csr(
        _X, _X, _IDX, _W, True, True, _PERM, _PTR, np.empty_like(_X), np.empty_like(_W), 1, 1),
    "sddmm_dot": lambda: _kernels.sddmm_dot(_X, _X, _IDX, _IDX, np.empty_like(_W), 1),
    "memeq": lambda: _kernels.memeq(_BIG_IDX, _BIG_COPY),
    # the segment and message kernels' backward halves
    "segment_softmax_backward_csr": lambda: _kernels.segment_softmax_backward_csr(
        _X, _X, _PERM, _PTR, np.empty_like(_X), 1),
    # 8x the entries: ~1 ms over E rows is too short to observe on a loaded machine
    "segment_softmax_backward_entries": lambda: _kernels.segment_softmax_backward_entries(
        _X1_8, _X1_8, _IDX_8, E, np.empty_like(_X1_8), 1),
    "segment_mean_backward_csr": lambda: _kernels.segment_mean_backward_csr(
        _X, _PERM, _PTR, np.empty_like(_X), 1),
    "segment_min_backward_csr": lambda: _kernels.segment_min_backward_csr(
        _X, _ARG, _PERM, _PTR, np.empty_like(_X), 1),
})
# the public graph ops over a checked plan (the kernel is the call's middle)
_EI = rtx.EdgeIndex(np.stack([_IDX, _IDX]), E, E)
KERNELS.update({
    "rtx.segment_sum": lambda: rtx.segment_sum(_XT, _PLAN, E),
    "rtx.segment_mean": lambda: rtx.segment_mean(_XT, _PLAN, E),
    "rtx.segment_max": lambda: rtx.segment_max(_XT, _PLAN, E),
    "rtx.segment_min": lambda: rtx.segment_min(_XT, _PLAN, E),
    "rtx.segment_softmax": lambda: rtx.segment_softmax(_XT, _PLAN, E),
    "rtx.message_passing": lambda: rtx.message_passing(_XT, _EI, E),
})
# cross-entropy's row kernels (4M logits: a few ms per call)
_CE_T = (_IDX % F).astype(np.int64)
_CE_STATS = np.empty((E, 2), np.float32)
_kernels.cross_entropy_rows(_X, _CE_T, np.empty(E, np.float32), _CE_STATS, 1)
KERNELS.update({
    "cross_entropy_rows": lambda: _kernels.cross_entropy_rows(
        _X, _CE_T, np.empty(E, np.float32), np.empty((E, 2), np.float32), 1),
    "cross_entropy_rows_backward": lambda: _kernels.cross_entropy_rows_backward(
        _X, _CE_STATS, _CE_T, np.ones(E, np.float32), np.empty_like(_X), 1),
})
if hasattr(_kernels, "parallel_thread_ids"):
    KERNELS["parallel_thread_ids"] = lambda: _kernels.parallel_thread_ids(20_000_000, 1)


@pytest.mark.parametrize("name", list(KERNELS))
def test_every_kernel_releases_the_gil(name):
    ok, durations = _gil_released_during(KERNELS[name])
    assert ok, (f"{name}: no other Python thread ran during any of {len(durations)} calls "
                f"(durations {[round(d * 1e3, 2) for d in durations]} ms): GIL held?")


def test_gil_probe_detects_a_gil_holding_call():
    """The probe must be able to fail: list.sort (C code) holds the GIL throughout.
    (A long sort: the GIL's hand-over at the call's two ends can stall the worker
    for tens of ms on a busy machine, which stretches the measured span; 300,000
    floats, 60-90 ms under ASan, once let a stamp land in the middle third.)"""
    a = np.random.default_rng(1).random(1_200_000).tolist()
    ok, durations = _gil_released_during(lambda: sorted(a), attempts=3)
    assert not ok, f"probe saw progress during a GIL-holding call ({durations})"


# ----------------------------------------------------- concurrent callers
def _workload(seed: int):
    rng = np.random.default_rng(seed)
    out = []
    for dtype in (np.float32, np.float64):
        for it in (np.int32, np.int64):
            n, m, f = int(rng.integers(1000, 40000)), int(rng.integers(1000, 60000)), \
                int(rng.integers(1, 40))
            x = rtx.tensor(rng.standard_normal((n, f)).astype(dtype))
            idx = rng.integers(0, n, m).astype(it)
            g = rtx.index_select(x, idx)
            s = rtx.index_add(g, idx, n)
            out.append((g.numpy().tobytes(), s.numpy().tobytes()))
    return out


@needs_omp
def test_four_threads_at_once_match_a_serial_run_bit_for_bit():
    seeds = list(range(8))
    rtx.set_num_threads(1)
    serial = {s: _workload(s) for s in seeds}
    rtx.set_num_threads(2)
    results: dict[int, list] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def run(my_seeds):
        try:
            barrier.wait()
            for s in my_seeds:
                results[s] = _workload(s)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(seeds[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for s in seeds:
        assert results[s] == serial[s], f"seed {s}: concurrent result differs from serial"


@needs_omp
def test_set_num_threads_in_another_thread_does_not_corrupt_calls():
    rtx.set_num_threads(1)
    ref = _workload(123)
    stop = threading.Event()
    errors: list[BaseException] = []

    def toggler():
        k = 0
        while not stop.is_set():
            rtx.set_num_threads([1, 2, 3, 4, -1, None][k % 6])
            k += 1
            time.sleep(0)

    def caller():
        try:
            for _ in range(4):
                assert _workload(123) == ref
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    tog = threading.Thread(target=toggler)
    callers = [threading.Thread(target=caller) for _ in range(3)]
    tog.start()
    for c in callers:
        c.start()
    for c in callers:
        c.join()
    stop.set()
    tog.join()
    assert not errors, errors


def test_absurd_thread_counts_are_clamped_not_crashing():
    """set_num_threads(70000) used to make libgomp segfault on the next kernel."""
    code = textwrap.dedent("""
        import numpy as np, rtx
        x = rtx.randn(70000, 1, seed=0)
        idx = np.arange(70000)[::-1].copy()
        rtx.set_num_threads(70000)
        assert 1 <= rtx.get_num_threads() <= 256
        r = rtx.index_select(x, idx)
        s = rtx.index_add(x, idx, 70000)
        assert np.array_equal(r.numpy(), x.numpy()[::-1])
        assert np.array_equal(s.numpy(), x.numpy()[::-1])
        print("ok")
    """)
    p = run_child(code)
    assert p.returncode == 0 and p.stdout.strip() == "ok", (p.returncode, p.stdout, p.stderr)


# --------------------------------------------------------------------- fork
FORK_CHILD = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import rtx
    from rtx import _kernels
    rtx.set_num_threads(2)
    # use the OpenMP pool in the parent, for sure
    assert _kernels.parallel_thread_ids(1_000_000, 2) >= 1
    x = rtx.randn(300_000, 8, seed=0)
    idx = np.arange(300_000)[::-1].copy()
    r = rtx.index_select(x, idx).numpy().copy()
    s = rtx.index_add(x, idx, 300_000).numpy().copy()
    pid = os.fork()
    if pid == 0:
        try:
            ok = rtx.get_num_threads() == 1
            ok &= np.array_equal(rtx.index_select(x, idx).numpy(), r)
            ok &= np.array_equal(rtx.index_add(x, idx, 300_000).numpy(), s)
            rtx.set_num_threads(4)           # still serial in a forked child
            ok &= rtx.get_num_threads() == 1
            ok &= np.array_equal(rtx.index_add(x, idx, 300_000).numpy(), s)
        except BaseException:
            ok = False
        os._exit(0 if ok else 3)
    deadline = time.time() + 60
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            print("child exit", code)
            sys.exit(0 if code == 0 else 1)
        time.sleep(0.05)
    os.kill(pid, 9)
    print("child HUNG")
    sys.exit(2)
""")


@needs_omp
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_fork_after_the_openmp_pool_was_used_does_not_hang_the_child():
    p = run_child(FORK_CHILD)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert "child exit 0" in p.stdout


@needs_omp
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_multiprocessing_fork_workers_run_kernels():
    code = textwrap.dedent("""
        import multiprocessing as mp
        import numpy as np, rtx
        def work(seed):
            x = rtx.randn(50_000, 4, seed=seed)
            idx = np.arange(50_000)[::-1].copy()
            return float(rtx.index_add(rtx.index_select(x, idx), idx, 50_000).sum().item())
        if __name__ == "__main__":
            rtx.set_num_threads(2)
            rtx._kernels.parallel_thread_ids(1_000_000, 2)
            want = [work(s) for s in range(4)]
            with mp.get_context("fork").Pool(2) as pool:
                got = pool.map(work, range(4))
            assert got == want, (got, want)
            print("ok")
    """)
    p = run_child(code)
    assert p.returncode == 0 and p.stdout.strip() == "ok", (p.returncode, p.stdout, p.stderr)


def test_the_build_never_fuses_a_multiply_and_an_add():
    """Every SIMD copy of a kernel (SSE2, AVX2, AVX-512F: RTX_SIMD_CLONES) rounds
    each product: the build passes -ffp-contract=off (setup.py), or the AVX-512F
    copies would use FMA and give other bits on other CPUs."""
    import sys

    from rtx import _kernels as K
    flags = K.build_cflags()
    if sys.platform == "win32" or "-fopenmp" not in flags and "-O" not in flags:
        pytest.skip("not a GCC / clang build")
    assert "-ffp-contract=off" in flags.split()
