"""pytest plugin for the memory-checking jobs (loaded with ``-p pytest_memcheck``).

Fails the session at start-up unless the imported ``rtx`` is the job's own
instrumented copy (``$RTX_MEMCHECK_PKG``) built with ``$RTX_MEMCHECK_CFLAG``:
otherwise the job would silently test another build (the installed wheel or
the in-tree one) and prove nothing.

With ``$RTX_MEMCHECK_LEAKS=1`` (the ASan job's leak check, whose environment turns
the check at exit off) it runs LeakSanitizer's check once when the session
ends, after the session's fixtures are torn down, and fails the session when
the check reports a leak.  rtx's cache of free blocks is emptied first (what
rtx's exit handler does before a check at exit).
"""

from __future__ import annotations

import ctypes
import gc
import os

import pytest


def _check() -> tuple[str | None, str]:
    import rtx
    from rtx import _kernels

    want = os.environ.get("RTX_MEMCHECK_PKG")
    got = os.path.dirname(os.path.abspath(rtx.__file__))
    so = os.path.abspath(_kernels.__file__)
    if want and (got != os.path.abspath(want) or os.path.dirname(so) != os.path.abspath(want)):
        return f"memcheck: imported rtx from {got} (extension {so}), expected {want}", ""
    flag = os.environ.get("RTX_MEMCHECK_CFLAG")
    flags = _kernels.build_cflags()
    if flag and flag not in flags:
        return f"memcheck: rtx was built with {flags!r}, lacking {flag!r}", ""
    if not _kernels.openmp_enabled():
        return "memcheck: rtx was built without OpenMP", ""
    job = os.environ.get("RTX_MEMCHECK_JOB", "?")
    return None, f"memcheck[{job}]: rtx from {so}; cflags: {flags}"


def pytest_sessionstart(session):  # noqa: ARG001
    err, _ = _check()
    if err:
        pytest.exit(err, returncode=3)


def pytest_report_header(config):  # noqa: ARG001
    return _check()[1]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):  # noqa: ARG001
    if os.environ.get("RTX_MEMCHECK_LEAKS") != "1":
        return
    try:
        check = ctypes.CDLL(None)["__lsan_do_recoverable_leak_check"]
    except AttributeError:
        print("memcheck: RTX_MEMCHECK_LEAKS=1 but no LeakSanitizer in this process")
        session.exitstatus = 3
        return
    check.restype = ctypes.c_int
    import rtx

    gc.collect()
    # rtx's allocator cache holds free blocks on purpose (reachable through its
    # C stacks, but not rtx's to report as live memory): hand them back first,
    # as rtx's own exit handler does before the check at exit.
    rtx.empty_cache()
    leaked = check()
    print(f"memcheck[lsan]: leak check at session end: {'LEAKS' if leaked else 'none'}",
          flush=True)
    if leaked:
        session.exitstatus = 1
