"""Which OpenMP spin setting rtx's kernels run with (``rtx.show_config()``).

GNU libgomp reads its spin setting once, when it loads: how many times an idle
worker polls for work after a parallel region before it sleeps
(``GOMP_SPINCOUNT``; 300,000 when neither it nor ``OMP_WAIT_POLICY`` is set,
far fewer while a process has more libgomp threads than CPUs).  rtx leaves it to
libgomp's default or the user's, as torch does: a worker that sleeps makes the
next region wait for it, and on the 2-vCPU VMs this project measures on the host
then runs both vCPUs on one core for the next milliseconds of work.

rtx used to set ``GOMP_SPINCOUNT=10000`` while its extension loaded, measured
when its matmul pieces ran on Python threads that spinning OpenMP workers took
the cores from; the pieces now run in rtx's own team (rtx/_gemm.pxi).  With
10,000, on the AMD EPYC VM of 2026-12-07 (docs/performance.md), six
back-to-back products of 1M floats after a 20 ms idle spell read 1.7-1.9 ms the
first and still 1.0-1.2 ms the sixth; with libgomp's default 0.7-0.9 ms the
first and 0.2-0.4 ms the sixth (torch: 0.6, then 0.1 ms).
"""

from __future__ import annotations

import os

SPIN = "not known yet (rtx's extension not loaded)"


def before_load() -> None:
    """Record which spin setting the kernels will run with: the user's
    (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` in the environment) or libgomp's
    default.  Nothing is set."""
    global SPIN
    user = "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ
    SPIN = ("the user's (OMP_WAIT_POLICY / GOMP_SPINCOUNT)" if user else
            "libgomp's default (GOMP_SPINCOUNT unset)")
