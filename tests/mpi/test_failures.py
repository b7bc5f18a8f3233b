"""Bounded failures (issue 23): each failure the issue lists, reproduced as its
own MPI job (``tests/mpi/scenarios.py`` or the example's CLI) under a hard
``timeout``: a hang fails the test, not the run.  Rank 0 launches the job;
every rank checks the same result (broadcast), so all pass or fail together.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import child_env

import rtx.distributed as dist
from rtx.distributed import _comm

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "scenarios.py")
JOB_TIMEOUT = 90  # a hang: the job is killed and the test fails
QUICK = 30        # "within seconds", with room for a loaded 2-core machine


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a fresh MPI job: this test's, less the variables of
    the launcher that started it (a nested mpiexec is a job of its own)."""
    env = {k: v for k, v in child_env().items()
           if not k.startswith(("PMI_", "HYDI_", "HYDRA_", "MPI_LOCAL", "PMIX_", "OMPI_"))}
    env.pop(_comm.TIMEOUT_ENV, None)
    env.update(extra or {})
    return env


def mpi_job(segments: list[list[str]], env: dict[str, str] | None = None,
            timeout: float = JOB_TIMEOUT) -> dict:
    """Run ``mpiexec -n 1 SEG0 : -n 1 SEG1 ...`` (one rank per segment; hydra's
    ``-env NAME VALUE`` may open a segment) from rank 0; every rank gets
    ``{rc, out, err, secs}``.  ``rc`` is ``"timeout"`` for a hang."""
    res = None
    if dist.rank() == 0:
        cmd = ["mpiexec"]
        for i, seg in enumerate(segments):
            cmd += ([":"] if i else []) + ["-n", "1", *seg]
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="rtx-mpi-job-") as cwd:
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                   env=_env(env), cwd=cwd)
                res = {"rc": p.returncode, "out": p.stdout, "err": p.stderr}
            except subprocess.TimeoutExpired as exc:
                res = {"rc": "timeout", "out": str(exc.stdout), "err": str(exc.stderr)}
        res["secs"] = time.monotonic() - t0
    return _comm.broadcast_object(res, 0, "mpi_job")


def scenario(name: str, env: dict[str, str] | None = None) -> dict:
    return mpi_job([[sys.executable, SCENARIOS, name]] * 2, env)


def _show(r: dict) -> str:
    return f"rc={r['rc']} after {r['secs']:.1f} s\n--- stdout\n{r['out']}\n--- stderr\n{r['err']}"


# ------------------------------------------------- an exception or an early exit
def test_an_exception_on_one_rank_ends_every_rank(world):
    r = scenario("raise-on-rank1")
    assert r["rc"] not in (0, "timeout") and r["secs"] < QUICK, _show(r)
    assert "[rank 1/2] ValueError: boom from rank 1" in r["err"], _show(r)
    assert "[rank 1/2] Traceback" in r["err"], _show(r)
    assert "finished the loop" not in r["out"], _show(r)


@pytest.mark.parametrize("name", ["exit0-on-rank1", "exit3-on-rank1"])
def test_an_early_exit_on_one_rank_ends_every_rank(world, name):
    r = scenario(name)
    assert r["rc"] not in (0, "timeout") and r["secs"] < QUICK, _show(r)
    assert "[rank 1/2] rtx.distributed: this rank is exiting while another is not" in r["err"]
    assert "rank 0: all_reduce" in r["err"], _show(r)


# --------------------------------------------------- collectives that disagree
@pytest.mark.parametrize(("name", "match"), [
    ("root-mismatch", "rank 0: broadcast(root=0"),
    ("kind-mismatch", "rank 0: all_reduce(op='sum'"),
    ("op-mismatch", "rank 1: all_reduce(op='max'"),
])
def test_collectives_that_disagree_raise_on_every_rank(world, name, match):
    r = scenario(name)
    assert r["rc"] == 0 and r["secs"] < QUICK, _show(r)
    for rank in (0, 1):
        assert f"rank {rank}: caught CollectiveMismatchError" in r["out"], _show(r)
        assert f"rank {rank}: in step, sum 2.0" in r["out"], _show(r)
    assert match in r["out"], _show(r)
    if name == "op-mismatch":  # nothing was reduced
        assert "rank 0: value after 1.0" in r["out"] and "rank 1: value after 2.0" in r["out"]


# ------------------------------------------------------------------- watchdog
@pytest.mark.parametrize("how", ["env", "arg"])
def test_the_watchdog_ends_a_job_whose_rank_is_stuck(world, how):
    env = {_comm.TIMEOUT_ENV: "1.5"} if how == "env" else None
    r = scenario(f"watchdog-{how}", env)
    assert r["rc"] not in (0, "timeout") and r["secs"] < QUICK, _show(r)
    assert "[rank 0/2] rtx.distributed: all_reduce: agreeing on the call with the other ranks " \
           "waited 1.5 s" in r["err"], _show(r)
    assert "all_reduce returned" not in r["out"]


# --------------------------------------------------------------------- DDP
def test_an_extra_backward_on_rank0_raises_everywhere_without_mixing(world):
    r = scenario("extra-backward")
    assert r["rc"] == 0 and r["secs"] < QUICK, _show(r)
    assert "rank 0: caught at step 1 CollectiveMismatchError" in r["out"], _show(r)
    assert "rank 1: caught at step 2 CollectiveMismatchError" in r["out"], _show(r)
    assert "rank 0: after forward #2, backward #3" not in r["out"]
    assert "after forward #2, backward #3" in r["out"] and \
        "after forward #3, backward #3" in r["out"], _show(r)
    for rank in (0, 1):
        assert f"rank {rank}: gradients not mixed: True" in r["out"], _show(r)
        assert f"rank {rank}: in step" in r["out"], _show(r)
