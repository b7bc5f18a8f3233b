"""``rtx.show_config()``: how this rtx was built and how it runs."""

from __future__ import annotations

import platform
import sys
from typing import Any

import numpy as np

from . import _kernels
from ._threads import get_num_threads
from ._version import __version__


def config() -> dict[str, Any]:
    return {
        "version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
        "openmp": bool(_kernels.openmp_enabled()),
        "num_threads": get_num_threads(),
        "omp_max_threads": _kernels.omp_max_threads(),
        "compiler_flags": _kernels.build_cflags(),
        "parallel_thresholds": _kernels.get_parallel_thresholds(),
        "cache_limit_bytes": _kernels.get_cache_limit(),
    }


def show_config() -> None:
    """Print the version, OpenMP status, thread count and compiler flags."""
    for key, value in config().items():
        print(f"{key:>20}: {value}")
