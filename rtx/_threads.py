"""Thread-count control with scikit-learn semantics.

``None`` (the default) means "all usable cores": OpenMP's own default team
size (which respects ``OMP_NUM_THREADS`` and ``threadpoolctl``) capped by the
CPUs this process may run on.  Without OpenMP every kernel runs on 1 thread.
"""

from __future__ import annotations

import os

from ._kernels import omp_max_threads, openmp_enabled

_requested: int | None = None
# GNU libgomp is not fork-safe: a child forked after the parent ran an OpenMP
# parallel region inherits a thread pool whose threads do not exist in it, and
# its next parallel region waits for them forever.  So in a forked child every
# kernel runs on one thread (the serial paths start no OpenMP region at all).
# Workers that need threads: use the "spawn" or "forkserver" start method.
_forked_child = False


def _after_fork_in_child() -> None:
    global _forked_child, _cpus
    _forked_child = True
    _cpus = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
# Upper bound on the threads one kernel call starts.  Larger requests are
# clamped: libgomp crashes (SIGSEGV) when asked for tens of thousands of
# threads, and the kernels' per-thread tables are sized for at most this many.
MAX_THREADS = 256


# The usable CPU count is read once (affinity + cgroup quota cost ~6 us to read
# and every kernel call asks); set_num_threads(None) and a fork re-read it.
_cpus: int | None = None


def _usable_cpus() -> int:
    global _cpus
    if _cpus is None:
        _cpus = _read_usable_cpus()
    return _cpus


def _read_usable_cpus() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    # cgroup v2 CPU quota (containers).
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            quota, period = fh.read().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def set_num_threads(n: int | None) -> None:
    """Set the number of threads rtx's kernels use.

    ``n > 0``: exactly ``n`` (at most ``MAX_THREADS``); ``n < 0``:
    ``usable_cpus + 1 + n`` (so ``-1`` is all cores, ``-2`` all but one);
    ``None``: back to the default.  ``0`` is an error.  Results never depend on this setting.
    """
    global _requested, _cpus
    if n is None:
        _requested = None
        _cpus = None
        return
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"set_num_threads expects an int or None, got {type(n).__name__}")
    if n == 0:
        raise ValueError("set_num_threads(0) is invalid: use a positive count, -1 or None")
    if n < 0:
        n = max(1, _usable_cpus() + 1 + n)
    _requested = min(n, MAX_THREADS)


def get_num_threads() -> int:
    """The number of threads the next kernel call will use."""
    if not openmp_enabled() or _forked_child:
        return 1
    if _requested is not None:
        return _requested
    return max(1, min(omp_max_threads(), _usable_cpus()))
