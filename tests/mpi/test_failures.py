"""Bounded failures (issue 23): each failure the issue lists, reproduced as its
own MPI job (``tests/mpi/scenarios.py`` or the example's CLI) under a hard
``timeout``: a hang fails the test, not the run.  Rank 0 launches the job;
every rank checks the same result (broadcast), so all pass or fail together.
"""

from __future__ import annotations

import os
import sys

import pytest

import rtx.distributed as dist
from rtx.distributed import _comm

from .jobs import QUICK, _env, _show, mpi_job, scenario


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
    # the exiting rank says so, and the other sees it in its collective (whichever
    # aborts first may cut the other's message short)
    assert "[rank 1/2] rtx.distributed: this rank is exiting while another is not" in r["err"] \
        or "[rank 0/2] rtx.distributed.CollectiveMismatchError: all_reduce: the ranks are " \
           "out of step" in r["err"], _show(r)
    assert "rank 0: all_reduce(op='sum', shape (1,) float32); rank 1: exit()" in r["err"], \
        _show(r)


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


# ------------------------------------------------ the example's command line
EXAMPLE = ["-m", "rtx.examples.hetgat", "--distributed", "--num-papers", "120", "--hidden", "8",
           "--heads", "2", "--progress", "none"]
# the console script rtx-hetgat runs this entry point
CONSOLE = ["-c", "import sys; from rtx.examples.hetgat import cli; sys.exit(cli())",
           "--distributed", "--num-papers", "120", "--hidden", "8", "--heads", "2",
           "--progress", "none"]

LOSS_FAILS = """
import rtx.distributed.hetgat as _h
_orig, _calls = _h.DistributedHetGAT.loss, [0]
def _loss(self, logits):
    _calls[0] += 1
    if _calls[0] == 3:
        raise RuntimeError("injected failure in the loss on this rank")
    return _orig(self, logits)
_h.DistributedHetGAT.loss = _loss
"""
NO_PYMETIS = "import sys\nsys.modules['pymetis'] = None  # as if pymetis were not installed\n"


def _site(tmp: str, code: str) -> list[str]:
    """hydra's ``-env PYTHONPATH ...`` for a segment whose sitecustomize runs ``code``."""
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "sitecustomize.py"), "w") as fh:
        fh.write(code)
    return ["-env", "PYTHONPATH", os.pathsep.join([tmp, _env()["PYTHONPATH"]])]


def _out_dir(tmp_path_factory) -> str:
    d = str(tmp_path_factory.mktemp("cli")) if dist.rank() == 0 else ""
    return _comm.broadcast_object(d, 0, "out dir")


def _one_error_line(r: dict) -> str:
    lines = [ln for ln in r["err"].splitlines() if "error:" in ln]
    assert len(lines) == 1 and lines[0].startswith("rtx-hetgat: error: "), _show(r)
    assert "Traceback" not in r["err"], _show(r)
    return lines[0]


@pytest.mark.parametrize("both", [False, True])
def test_a_cli_error_is_printed_once_and_every_rank_exits_2(world, tmp_path_factory, both):
    out = _out_dir(tmp_path_factory)
    bad = [sys.executable, *EXAMPLE, "--out", out, "--epochs", "0"]
    good = bad if both else [sys.executable, *EXAMPLE, "--out", out, "--epochs", "2"]
    r = mpi_job([good, bad])
    assert r["rc"] == 2 and r["secs"] < QUICK, _show(r)
    line = _one_error_line(r)
    tag = "" if both else "[rank 1/2] "
    assert line == f"rtx-hetgat: error: {tag}argument --epochs: must be at least 1, got 0", line


def test_metis_missing_on_one_rank_is_one_error(world, tmp_path_factory):
    pytest.importorskip("pymetis")  # installed here, hidden on rank 1 only
    out = _out_dir(tmp_path_factory)
    tmp = os.path.join(out, "site")
    args = [sys.executable, *EXAMPLE, "--out", out, "--epochs", "2", "--partition", "metis"]
    r = mpi_job([args, [*_site(tmp, NO_PYMETIS), *args]])
    assert r["rc"] == 2 and r["secs"] < QUICK, _show(r)
    assert "[rank 1/2] --partition metis: pymetis is not installed" in _one_error_line(r)


@pytest.mark.parametrize(("opt", "value", "want"), [
    ("--seed", "1", "seed: rank 0: 0, rank 1: 1"),
    ("--epochs", "3", "epochs: rank 0: 2, rank 1: 3"),
])
def test_ranks_with_other_arguments_are_refused_before_training(world, tmp_path_factory, opt,
                                                                value, want):
    out = _out_dir(tmp_path_factory)
    base = [sys.executable, *EXAMPLE, "--out", out, "--epochs", "2"]
    r = mpi_job([base, [*base, opt, value]])
    assert r["rc"] == 2 and r["secs"] < QUICK, _show(r)
    line = _one_error_line(r)
    assert "the ranks differ" in line and want in line, line
    if opt == "--seed":  # another seed is another synthetic graph: the digests differ too
        assert "graph_sha256: rank 0: " in line, line
    assert "epoch    1" not in r["out"] and not os.listdir(out), _show(r)


@pytest.mark.parametrize("entry", ["module", "console"])
def test_an_exception_mid_training_ends_every_rank(world, tmp_path_factory, entry):
    out = _out_dir(tmp_path_factory)
    tmp = os.path.join(out, "site")
    args = [sys.executable, *(EXAMPLE if entry == "module" else CONSOLE), "--out", out,
            "--epochs", "500"]
    r = mpi_job([args, [*_site(tmp, LOSS_FAILS), *args]])
    assert r["rc"] not in (0, "timeout") and r["secs"] < QUICK, _show(r)
    assert "[rank 1/2] RuntimeError: injected failure in the loss on this rank" in r["err"]
    assert "[rank 1/2] rtx.distributed: an uncaught exception on this rank: aborting every " \
           "rank" in r["err"], _show(r)
    assert "trained" not in r["out"], _show(r)
