"""Tests run under an MPI launcher: ``mpiexec -n 2 pytest tests/mpi -q``.

Under a plain ``pytest`` run (no launcher, or no mpi4py) every test here is
skipped with the reason, so the normal suite stays green; CI runs them under
``mpiexec`` (.ci/run).  Every rank runs the same tests in the same order, so
the collectives in them match up.
"""

from __future__ import annotations

import importlib.util

import pytest

import rtx.distributed as dist


def _skip_reason() -> str | None:
    if not dist.launched_by_mpi():
        return "MPI tests: run under `mpiexec -n 2 pytest tests/mpi`"
    if importlib.util.find_spec("mpi4py") is None:
        return "MPI tests need mpi4py (pip install \"rtx-gnn[mpi]\")"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _skip_reason()
    if reason is None:
        return
    here = str(config.rootpath / "tests" / "mpi")
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def world():
    """``(rank, world_size)`` after ``init()``; the tests need at least 2 ranks."""
    dist.init()
    size = dist.world_size()
    if size < 2:
        pytest.skip("MPI tests need at least 2 ranks")
    return dist.rank(), size
