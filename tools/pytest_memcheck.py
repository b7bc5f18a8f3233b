"""pytest plugin for the memory-checking jobs (loaded with ``-p pytest_memcheck``).

Fails the session at start-up unless the imported ``rtx`` is the job's own
instrumented copy (``$RTX_MEMCHECK_PKG``) built with ``$RTX_MEMCHECK_CFLAG``:
otherwise the job would silently test another build (the installed wheel or
the in-tree one) and prove nothing.
"""

from __future__ import annotations

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
