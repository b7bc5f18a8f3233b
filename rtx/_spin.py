"""Which OpenMP spin setting rtx's kernels run with (``rtx.show_config()``).

GNU libgomp reads its spin setting once, when it loads: how many times an idle
worker polls for work after a parallel region before it sleeps
(``GOMP_SPINCOUNT``; 300,000 when neither it nor ``OMP_WAIT_POLICY`` is set,
far fewer while a process has more libgomp threads than CPUs).  rtx leaves it to
libgomp's default or the user's, as torch does: a worker that sleeps makes the
next region wait for it, and on the 2-vCPU VMs this project measures on the host
then runs both vCPUs on one core for the next milliseconds of work.

rtx used to set ``GOMP_SPINCOUNT=10000`` while its extension loaded: chosen
when its matmul pieces ran on Python threads that spinning OpenMP workers took
the cores from (docs/performance.md's thread-pool table); its note here also
gave a HetGAT epoch of 0.17-0.19 s against 0.18-0.22 s with the default.  The
pieces now run in rtx's own team (rtx/_gemm.pxi).  Measured again on the AMD
EPYC VM (docs/performance.md, the figures of 2026-12-08 00:20): the HetGAT
epoch the same inside the noise (synthetic graph) or faster with the default
(wide); six back-to-back products of 1M floats after a 20 ms idle spell
1.7-1.9 ms the first and still 1.0-1.2 ms the sixth with 10,000, 0.7-0.9 ms
and 0.2-0.4 ms with the default (torch: 0.6, then 0.1 ms).
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
