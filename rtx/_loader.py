"""Loads rtx's compiled extension before anything else in rtx imports it.

Two things happen here, once, at ``import rtx``:

* GNU libgomp reads its spin setting once, when ``rtx._kernels`` loads it.  By
  default its idle workers spin ~300,000 times after every parallel region,
  holding a core that rtx's matmul threads or numpy's BLAS need next: on 2 cores
  a HetGAT epoch (30k papers, 2 threads; three alternating pairs of processes)
  ran 0.18-0.22 s with the default and 0.17-0.19 s with 10,000, each pair faster
  with 10,000 (docs/performance.md).  So ``GOMP_SPINCOUNT=10000`` is
  in the environment while the extension loads, unless the user set
  ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` (theirs wins); it is removed again
  afterwards, so child processes and other libraries never see it.  When a
  libgomp is already in the process (torch imported first: rtx's kernels then
  share torch's copy, read at torch's import), the setting comes too late:
  ``SPIN`` says so, and ``rtx.show_config()`` with it.
* An import from an unbuilt source tree fails with a message saying how to build.
* ``RTX_PURE_PYTHON=1`` takes effect before any compiled module of the per-op path
  loads (``rtx/_compiled.py``: the ``.py`` files run instead).
"""

from __future__ import annotations

import os

from . import _compiled

_compiled.install()



def _libgomp_loaded() -> bool:
    """Whether a GNU libgomp is mapped into this process already (Linux; False
    where /proc cannot tell)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            return any("libgomp" in line for line in fh)
    except OSError:
        return False


_spin = "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ
# what the OpenMP workers' spin is (rtx.show_config): rtx's, the user's, or
# libgomp's default because libgomp was initialised before rtx could set it
SPIN = ("GOMP_SPINCOUNT=10000 (rtx)" if _spin and not _libgomp_loaded() else
        "the user's (OMP_WAIT_POLICY / GOMP_SPINCOUNT)" if not _spin else
        "libgomp's default: libgomp was loaded before rtx (torch imported first?); "
        "import rtx first or set GOMP_SPINCOUNT=10000")
if _spin:
    os.environ["GOMP_SPINCOUNT"] = "10000"
try:
    from . import _kernels  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on how rtx was built
    _here = os.path.dirname(os.path.abspath(__file__))
    if os.path.exists(os.path.join(os.path.dirname(_here), "setup.py")):
        raise ImportError(
            f"rtx is being imported from its source tree ({_here}), which holds no compiled "
            "extension (`python -m ...` and `python -c ...` put the current directory first "
            "on sys.path). For an installed rtx, use the console scripts (rtx-hetgat, "
            "rtx-karate, pytest) or run from another directory; or build in place: "
            "`pip install -e .` or `python setup.py build_ext --inplace`."
        ) from _exc
    raise
finally:
    if _spin:
        del os.environ["GOMP_SPINCOUNT"]
