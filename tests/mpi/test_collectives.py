"""all_reduce / broadcast / all_gather values over real MPI ranks."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
import rtx.distributed as dist
from rtx.distributed import _comm


def _local(rank: int, dtype, shape=(3, 4)) -> np.ndarray:
    rng = np.random.default_rng(100 + rank)
    return (rng.standard_normal(shape) * 10).astype(dtype)


CASES = [(dt, op) for dt in (np.float32, np.float64, np.int64, np.int32)
         for op in ("sum", "mean", "max", "min") if op != "mean" or np.dtype(dt).kind == "f"]


@pytest.mark.parametrize(("dtype", "op"), CASES)
def test_all_reduce_values(world, dtype, op):
    rank, size = world
    every = np.stack([_local(r, dtype) for r in range(size)])
    t = rtx.from_numpy(_local(rank, dtype).copy()) if np.dtype(dtype).kind == "f" else \
        rtx.tensor(_local(rank, dtype))
    buf_before = np.asarray(t)
    out = dist.all_reduce(t, op=op)
    assert out is t
    want = {"sum": every.sum(0), "mean": every.sum(0) / size, "max": every.max(0),
            "min": every.min(0)}[op]
    np.testing.assert_allclose(t.numpy(), want.astype(dtype), rtol=1e-6)
    assert np.shares_memory(np.asarray(t), buf_before)  # in place, zero-copy (CPU backend)
    same = dist.all_gather(t)
    for r in range(size):  # bitwise identical on every rank
        np.testing.assert_array_equal(same.numpy()[r], t.numpy())


def test_all_reduce_minimal_backend(world):
    rank, size = world
    with rtx.use_backend(rtx.MinimalBackend()):
        t = rtx.tensor(np.full(5, rank + 1.0))
        dist.all_reduce(t, op="sum")
        assert isinstance(t.backend, rtx.MinimalBackend)
    np.testing.assert_array_equal(t.numpy(), np.full(5, size * (size + 1) / 2))


@pytest.mark.parametrize("root", [0, 1])
def test_broadcast(world, root):
    rank, size = world
    t = rtx.tensor(_local(rank, np.float64, (7,)))
    dist.broadcast(t, root=root)
    np.testing.assert_array_equal(t.numpy(), _local(root, np.float64, (7,)))


def test_all_gather(world):
    rank, size = world
    t = rtx.tensor(_local(rank, np.float32, (2, 3)))
    out = dist.all_gather(t)
    assert out.shape == (size, 2, 3)
    for r in range(size):
        np.testing.assert_array_equal(out.numpy()[r], _local(r, np.float32, (2, 3)))


def test_barrier_rank_world(world):
    rank, size = world
    dist.barrier()
    assert dist.is_initialized() and 0 <= dist.rank() < dist.world_size() == size


def test_mismatched_shapes_raise_on_every_rank(world):
    rank, size = world
    t = rtx.zeros(3 + rank)
    with pytest.raises(ValueError, match="differ in shape"):
        dist.all_reduce(t)
    t2 = rtx.zeros(3, dtype=rtx.float64 if rank else rtx.float32)
    with pytest.raises(ValueError, match="differ in shape or dtype"):
        dist.broadcast(t2)
    np.testing.assert_array_equal(t.numpy(), 0)  # untouched


@pytest.mark.parametrize("call", ["all_reduce", "broadcast", "all_gather"])
def test_a_bad_argument_on_one_rank_raises_on_every_rank(world, call):
    """No rank is left blocked in the collective: the faulty rank raises its own
    error, the others a RuntimeError naming it; nothing is written."""
    rank, size = world
    base = rtx.tensor(np.arange(6.0).reshape(2, 3))
    t = base.T if rank == 1 else rtx.tensor(np.arange(6.0).reshape(3, 2))
    fn = getattr(dist, call)
    if rank == 1:
        with pytest.raises(ValueError, match="not contiguous"):
            fn(t)
    else:
        with pytest.raises(RuntimeError, match="rank 1 gave a bad argument.*not contiguous"):
            fn(t)
    np.testing.assert_array_equal(base.numpy(), np.arange(6.0).reshape(2, 3))
    dist.barrier()  # everyone is still in step
    ok = dist.all_reduce(rtx.tensor([1.0]))
    assert ok.item() == size


def test_bad_arguments_raise_before_communicating(world):
    rank, size = world
    t = rtx.tensor(np.arange(6.0).reshape(2, 3))
    with pytest.raises(ValueError, match="unknown op 'prod'"):
        dist.all_reduce(t, op="prod")
    with pytest.raises(ValueError, match="not contiguous"):
        dist.all_reduce(t.T)
    with pytest.raises(ValueError, match="not a rank"):
        dist.broadcast(t, root=size)
    with pytest.raises(TypeError, match="rtx.Tensor"):
        dist.all_reduce(np.zeros(3))
    with pytest.raises(TypeError, match="floating"):
        dist.all_reduce(rtx.tensor([1, 2]), op="mean")
    p = rtx.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="no_grad"):
        dist.all_reduce(p)
    with rtx.no_grad():
        dist.all_reduce(p)
    np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3))


def test_in_place_writes_bump_the_version_counter(world):
    """Where rtx has version counters, a buffer MPI overwrote after the tape
    saved it makes backward() refuse (no silently stale gradient)."""
    if not hasattr(rtx.zeros(1), "_version"):
        pytest.skip("this rtx has no tensor version counters")
    w = rtx.tensor(np.arange(3.0))
    v0 = w._version
    dist.all_reduce(w)
    assert w._version == v0 + 1
    dist.broadcast(w)
    assert w._version == v0 + 2
    x = rtx.tensor(np.ones(3), requires_grad=True)
    out = (x * w).sum()  # saves w for backward
    dist.all_reduce(w)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


@pytest.mark.parametrize("op", ["lor", "land", "max", "min"])
def test_all_reduce_bool(world, backend, op):
    """Logical or / and over ranks (max / min are the same on bools)."""
    rank, size = world
    mine = np.array([True, False, rank == 0, rank == 1, True, False])
    every = np.stack([np.array([True, False, r == 0, r == 1, True, False]) for r in range(size)])
    t = rtx.tensor(mine)
    dist.all_reduce(t, op=op)
    want = every.any(0) if op in ("lor", "max") else every.all(0)
    assert t.dtype == np.bool_
    np.testing.assert_array_equal(t.numpy(), want)


def test_bool_sum_is_refused_with_what_works(world):
    t = rtx.tensor(np.array([True, False]))
    with pytest.raises(TypeError, match=r"op='sum' of a bool tensor.*op='lor'.*op='land'"):
        dist.all_reduce(t, op="sum")
    with pytest.raises(TypeError, match="needs a bool tensor"):
        dist.all_reduce(rtx.tensor([1.0, 2.0]), op="lor")
    np.testing.assert_array_equal(t.numpy(), [True, False])
    dist.all_reduce(t, op="lor")  # in step afterwards


def test_different_ops_raise_on_every_rank_and_reduce_nothing(world):
    rank, size = world
    t = rtx.tensor([float(rank + 1)])
    with pytest.raises(dist.CollectiveMismatchError,
                       match=r"out of step.*rank 0: all_reduce\(op='sum'.*rank 1: "
                             r"all_reduce\(op='max'"):
        dist.all_reduce(t, op="sum" if rank == 0 else "max")
    assert t.item() == rank + 1
    with pytest.raises(dist.CollectiveMismatchError, match="rank 0: broadcast.root=0"):
        dist.broadcast(t, root=0 if rank == 0 else 1)
    with pytest.raises(dist.CollectiveMismatchError, match="rank 1: barrier"):
        dist.barrier() if rank else dist.all_gather(t)
    dist.all_reduce(t)  # in step afterwards
    assert t.item() == sum(r + 1 for r in range(size))


def test_check_same_names_every_difference(world):
    rank, size = world
    _comm.check_same({"a": 1, "b": [1, 2]}, "same")  # equal: no error
    each = ", ".join(f"rank {r}: {r}" for r in range(size))
    with pytest.raises(ValueError, match=rf"mine: the ranks differ \(b: {each}\)"):
        _comm.check_same({"a": 1, "b": rank}, "mine")
    objs = _comm.allgather_object({"rank": rank, "x": np.int64(3), "v": np.arange(2)})
    assert objs == [{"rank": r, "x": 3, "v": [0, 1]} for r in range(size)]
    with pytest.raises(TypeError, match="JSON"):
        _comm.allgather_object(object())


def test_timeout_argument_and_environment(world, monkeypatch):
    old = dist.get_timeout()
    try:
        dist.init(timeout=12.5)  # already initialised: only the timeout changes
        assert dist.get_timeout() == 12.5
        monkeypatch.setenv(_comm.TIMEOUT_ENV, "7")
        dist.init()
        assert dist.get_timeout() == 7.0
        for bad in ("0", "-1", "nan", "soon"):
            monkeypatch.setenv(_comm.TIMEOUT_ENV, bad)
            with pytest.raises(ValueError, match=_comm.TIMEOUT_ENV):
                dist.init()
        monkeypatch.delenv(_comm.TIMEOUT_ENV)
        with pytest.raises(ValueError, match="finite number of seconds"):
            dist.init(timeout=float("inf"))
        import datetime

        dist.init(timeout=datetime.timedelta(minutes=2))
        assert dist.get_timeout() == 120.0
    finally:
        dist.init(timeout=old)
