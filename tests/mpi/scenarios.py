"""Failure scenarios, each run as its own MPI job by tests/mpi/test_failures.py:

    mpiexec -n 2 python tests/mpi/scenarios.py NAME

Each prints what it saw on each rank; the test reads the job's exit status,
its output and how long it took (a hang is the job's ``timeout``).
"""

from __future__ import annotations

import sys
import time

import numpy as np

import rtx
import rtx.distributed as dist


def _loop(n: int, fail_at: int | None, fail: object) -> None:
    """``n`` all-reduces; rank 1 runs ``fail()`` at step ``fail_at``."""
    r = dist.rank()
    for i in range(n):
        if r == 1 and i == fail_at:
            fail()  # type: ignore[operator]
        t = rtx.tensor([1.0])
        dist.all_reduce(t)
        time.sleep(0.01)
    print(f"rank {r}: finished the loop", flush=True)


def raise_on_rank1() -> None:
    dist.init()

    def boom() -> None:
        raise ValueError("boom from rank 1")

    _loop(2000, 3, boom)


def exit0_on_rank1() -> None:
    dist.init()
    _loop(2000, 3, lambda: sys.exit(0))


def exit3_on_rank1() -> None:
    dist.init()
    _loop(2000, 3, lambda: sys.exit(3))


def _caught(call: object) -> None:
    r = dist.rank()
    try:
        call()  # type: ignore[operator]
    except (RuntimeError, ValueError) as exc:
        print(f"rank {r}: caught {type(exc).__name__}: {exc}", flush=True)
    else:
        print(f"rank {r}: no error", flush=True)
    t = rtx.tensor([1.0])
    dist.all_reduce(t)  # still in step afterwards
    print(f"rank {r}: in step, sum {t.item()}", flush=True)


def root_mismatch() -> None:
    dist.init()
    r = dist.rank()
    _caught(lambda: dist.broadcast(rtx.tensor([float(r)]), root=r))


def kind_mismatch() -> None:
    dist.init()
    r = dist.rank()
    t = rtx.tensor([float(r)])
    _caught(lambda: dist.all_reduce(t) if r == 0 else dist.broadcast(t))


def op_mismatch() -> None:
    dist.init()
    r = dist.rank()
    t = rtx.tensor([float(r + 1)])
    _caught(lambda: dist.all_reduce(t, op="sum" if r == 0 else "max"))
    print(f"rank {r}: value after {t.item()}", flush=True)


def _stuck_rank1(timeout: float | None) -> None:
    dist.init(timeout=timeout)
    if dist.rank() == 1:
        time.sleep(60)  # never reaches the collective in time
    dist.all_reduce(rtx.tensor([1.0]))
    print(f"rank {dist.rank()}: all_reduce returned", flush=True)


def watchdog_env() -> None:
    _stuck_rank1(None)  # RTX_DIST_TIMEOUT from the environment


def watchdog_arg() -> None:
    _stuck_rank1(1.5)


def extra_backward() -> None:
    """Rank 0 alone runs a second backward() after one forward: every rank
    raises at that reduction, and no gradient is mixed (each rank's .grad is
    what its own backward passes accumulated)."""
    dist.init()
    r = dist.rank()
    rtx.manual_seed(0)
    model = rtx.nn.Linear(3, 2).double()
    ddp = dist.DistributedDataParallel(model)
    x = rtx.tensor(np.arange(6.0).reshape(2, 3) + r)

    def local_grad() -> np.ndarray:
        (g,) = rtx.autograd.grad((model(x) ** 2).sum(), [model.weight])  # no DDP hook
        return g.numpy().copy()

    synced = None
    for step in range(3):
        model.zero_grad()
        loss = (ddp(x) ** 2).sum()
        try:
            loss.backward()
            if r == 0 and step == 1:
                synced = model.weight.grad.numpy().copy()
                (ddp.module(x) ** 2).sum().backward()  # the extra one
        except RuntimeError as exc:
            print(f"rank {r}: caught at step {step} {type(exc).__name__}: {exc}", flush=True)
            want = local_grad() if synced is None else synced + local_grad()
            ok = bool(np.allclose(model.weight.grad.numpy(), want, rtol=1e-13, atol=0))
            print(f"rank {r}: gradients not mixed: {ok}", flush=True)
            break
    else:
        print(f"rank {r}: no error", flush=True)
    dist.barrier()
    print(f"rank {r}: in step", flush=True)


SCENARIOS = {f.__name__.replace("_", "-"): f for f in (
    raise_on_rank1, exit0_on_rank1, exit3_on_rank1, root_mismatch, kind_mismatch,
    op_mismatch, watchdog_env, watchdog_arg, extra_backward)}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]]()
