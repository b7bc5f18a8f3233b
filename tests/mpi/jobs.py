"""Running a separate MPI job from inside the MPI test session (rank 0 launches,
every rank gets the result)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

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


