"""libgomp's spin setting while rtx's kernels load (``rtx/_loader.py``).

GNU libgomp reads its spin setting once, when it loads.  By default its idle
workers spin ~300,000 times after every parallel region, holding a core that
rtx's matmul threads or numpy's BLAS need next: on 2 cores a HetGAT epoch (30k
papers, 2 threads; three alternating pairs of processes) ran 0.18-0.22 s with
the default and 0.17-0.19 s with 10,000, each pair faster with 10,000
(docs/performance.md).  So
``GOMP_SPINCOUNT=10000`` is in the environment while rtx's extension loads,
unless the user set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` (theirs wins), and
removed again afterwards, so child processes and other libraries never see it.
When a libgomp is already in the process (torch imported first: rtx's kernels
then share torch's copy, set up at torch's import), the setting comes too late;
``SPIN`` says which setting holds, and ``rtx.show_config()`` with it.
"""

from __future__ import annotations

import os

SPIN_COUNT = "10000"
SPIN = "not set yet (rtx's extension not loaded)"
_set_here = False


def _libgomp_loaded() -> bool:
    """Whether a GNU libgomp is mapped into this process already (Linux; False
    where /proc cannot tell)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            return any("libgomp" in line for line in fh)
    except OSError:
        return False


def before_load() -> None:
    """Put rtx's spin setting in the environment (unless the user chose one) and
    record which setting the kernels will run with."""
    global SPIN, _set_here
    _set_here = "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ
    if not _set_here:
        SPIN = "the user's (OMP_WAIT_POLICY / GOMP_SPINCOUNT)"
        return
    SPIN = (f"GOMP_SPINCOUNT={SPIN_COUNT} (rtx)" if not _libgomp_loaded() else
            "libgomp's default: libgomp was loaded before rtx (torch imported first?); "
            f"import rtx first or set GOMP_SPINCOUNT={SPIN_COUNT}")
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT


def after_load() -> None:
    """Take rtx's setting out of the environment again."""
    global _set_here
    if _set_here:
        os.environ.pop("GOMP_SPINCOUNT", None)
        _set_here = False
