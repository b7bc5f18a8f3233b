"""rtx.distributed in one process: clear errors without a launcher or mpi4py,
lazy import.  The multi-rank tests are in tests/mpi (run under mpiexec)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import run_child

import rtx
import rtx.distributed as dist
from rtx.distributed import _comm


@pytest.fixture
def fresh(monkeypatch):
    """rtx.distributed as if never initialised (restored afterwards)."""
    monkeypatch.setattr(_comm, "_COMM", None)
    monkeypatch.setattr(_comm, "_MPI", None)
    return monkeypatch


def test_import_rtx_does_not_import_mpi4py():
    r = run_child("import sys, rtx, rtx.distributed; print('mpi4py' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_without_mpi4py_names_the_extra(fresh):
    fresh.setitem(sys.modules, "mpi4py", None)  # makes `from mpi4py import MPI` fail
    with pytest.raises(ImportError, match=r'pip install "rtx\[mpi\]"'):
        dist.init(allow_singleton=True)
    assert not dist.is_initialized()


def test_without_a_launcher_init_refuses(fresh):
    for v in _comm._LAUNCH_VARS:
        fresh.delenv(v, raising=False)
    assert not dist.launched_by_mpi()
    with pytest.raises(RuntimeError, match="mpiexec -n N"):
        dist.init()
    fresh.setenv("PMI_RANK", "0")
    assert dist.launched_by_mpi()


def test_collectives_before_init_raise(fresh):
    t = rtx.zeros(3)
    for call in (dist.rank, dist.world_size, dist.barrier, lambda: dist.all_reduce(t),
                 lambda: dist.broadcast(t), lambda: dist.all_gather(t),
                 lambda: dist.DistributedDataParallel(object())):
        with pytest.raises(RuntimeError, match="call rtx.distributed.init"):
            call()
    np.testing.assert_array_equal(t.numpy(), 0)


def test_singleton_world_in_a_child():
    """A world of one rank (allow_singleton): collectives are the identity, DDP a no-op."""
    code = """
import numpy as np, rtx, rtx.distributed as dist
dist.init(allow_singleton=True)
assert (dist.rank(), dist.world_size()) == (0, 1)
t = rtx.tensor([1.0, -2.0, 3.0])
dist.all_reduce(t, op="mean"); dist.broadcast(t); g = dist.all_gather(t)
assert g.shape == (1, 3) and np.array_equal(g.numpy()[0], [1.0, -2.0, 3.0])
try:
    dist.all_reduce(t, op="prod")
except ValueError as e:
    assert "unknown op" in str(e)
else:
    raise AssertionError("no error")
class M:
    def __init__(self):
        self.w = rtx.tensor([[1.0, 2.0]], requires_grad=True)
    def parameters(self):
        return [self.w]
    def __call__(self, x):
        return x @ self.w
m = M(); ddp = dist.DistributedDataParallel(m)
(ddp(rtx.tensor([[3.0]])) ** 2).sum().backward()
assert np.allclose(m.w.grad.numpy(), [[18.0, 36.0]]), m.w.grad
print("ok")
"""
    r = run_child(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("ok")
