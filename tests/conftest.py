"""Shared fixtures: every op test runs on every backend configuration."""

from __future__ import annotations

import contextlib
import gc
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import rtx


def _fusion_backend() -> rtx.Backend:
    return rtx.fusion.Fusion(rtx.CpuBackend(), min_elements=0)


# The backends under test: names from rtx's backend registry
# (rtx.backend.register_backend; "package.module:name" imports the module first).
# RTX_TEST_BACKENDS=cpu,fusion selects them; the default is every backend rtx
# registers itself (cpu, minimal).  "fusion" (opt-in) is the elementwise-fusing
# stack over the CPU backend with min_elements=0: it fuses even the small
# tensors the tests use.
if "fusion" not in rtx.backend.registered_backends():  # test modules import conftest again
    rtx.backend.register_backend("fusion", _fusion_backend)
DEFAULT_BACKENDS = ["cpu", "minimal"]
BACKEND_NAMES = [b.strip() for b in os.environ.get("RTX_TEST_BACKENDS", "").split(",")
                 if b.strip()] or DEFAULT_BACKENDS
for _name in BACKEND_NAMES:   # an unknown name fails at collection, naming the known ones
    try:
        rtx.backend.create_backend(_name)
    except (KeyError, ImportError) as _e:
        raise pytest.UsageError(f"RTX_TEST_BACKENDS: {_e}") from None
DTYPES = [np.float32, np.float64]

# Hypothesis: RTX_HYPOTHESIS_PROFILE=ci (set by .ci/run) draws the same examples on
# every run (derandomize), so a CI verdict never depends on the run's luck; locally
# every run explores new examples (a CI run's chain test drew a float32 case no
# earlier run had met: tests/backend/test_fusion.py's tolerance note).
try:
    from hypothesis import settings as _hyp_settings
except ImportError:  # the test extras are not installed: no hypothesis tests either
    _hyp_settings = None
if _hyp_settings is not None:
    _hyp_settings.register_profile("ci", derandomize=True, print_blob=True)
    if os.environ.get("RTX_HYPOTHESIS_PROFILE"):
        _hyp_settings.load_profile(os.environ["RTX_HYPOTHESIS_PROFILE"])


@pytest.fixture(params=BACKEND_NAMES)
def backend(request):
    """Run the test with new tensors created on each backend."""
    b = rtx.backend.create_backend(request.param)
    with rtx.use_backend(b):
        yield b


@pytest.fixture(params=DTYPES, ids=["float32", "float64"])
def dtype(request):
    return np.dtype(request.param)


@pytest.fixture(autouse=True)
def _restore_threads():
    yield
    rtx.set_num_threads(None)


@pytest.fixture
def force_parallel():
    """Every segment/message kernel call (and every gather / scatter) takes its
    parallel path."""
    from rtx import _kernels
    old = _kernels.set_segment_parallel_min(0)
    old_t = _kernels.set_parallel_thresholds(gather=0, scatter=0, scatter_min_row_bytes=0)
    yield
    _kernels.set_segment_parallel_min(old)
    _kernels.set_parallel_thresholds(**old_t)


def spy_calls(monkeypatch, module, name: str) -> list:
    """Replace ``module.name`` (a function) by a wrapper that records each call's
    positional arguments before calling it; returns the list of records."""
    seen: list = []
    orig = getattr(module, name)

    def spy(*args):
        seen.append(args)
        return orig(*args)

    monkeypatch.setattr(module, name, spy)
    return seen


def tol(dtype) -> dict:
    """Comparison tolerances against numpy references for a dtype."""
    return {"rtol": 1e-5, "atol": 1e-6} if np.dtype(dtype) == np.float32 else {
        "rtol": 1e-12, "atol": 1e-12}


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bits of a float array (bitwise comparisons, -0.0 != +0.0)."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def assert_both_threads_run(call, seconds: float = 10.0) -> None:
    """``call()`` (a kernel run with 2 threads) splits its work over threads 0 and 1
    at least once (``rtx._kernels.last_kernel_thread_ids``).  Chunks are handed out
    dynamically, so on a busy machine thread 0 may take all of one call's: retry
    for up to ``seconds`` (a machine running two test suites at once needed more
    than 50 tries)."""
    import time

    from rtx import _kernels

    seen: set[int] = set()
    end = time.monotonic() + seconds
    while True:
        call()
        seen |= set(_kernels.last_kernel_thread_ids())
        if seen == {0, 1} or time.monotonic() > end:
            break
        time.sleep(0.001)  # let the other thread be scheduled
    assert seen == {0, 1}, f"threads seen: {sorted(seen)}"


def child_env() -> dict[str, str]:
    """Environment for a child interpreter that imports the SAME rtx as this one
    (CI runs the tests from the source tree against an installed rtx)."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(rtx.__file__)))
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([root, *rest])
    return env


def run_python(args: list[str], timeout: float = 120,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python *args`` from a fresh empty directory, against the rtx under test.

    The child's working directory goes first on its ``sys.path``: it must hold
    nothing importable (neither the source tree's ``rtx/`` nor stray modules that
    shadow the standard library, as a shared ``/tmp`` can)."""
    with tempfile.TemporaryDirectory(prefix="rtx-child-") as cwd:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              timeout=timeout, env=env if env is not None else child_env(),
                              cwd=cwd)


def run_child(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -c code`` from a neutral directory, against the rtx under test."""
    return run_python(["-c", code], timeout)


@contextlib.contextmanager
def gc_paused():
    """Collect, then keep the cyclic collector off for the block: a test that counts
    rtx's live bytes around one call must not see unrelated garbage (an earlier
    test's reference cycles) freed in the middle of it."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
