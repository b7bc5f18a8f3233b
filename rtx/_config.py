"""``rtx.show_config()``: how this rtx was built and how it runs."""

from __future__ import annotations

import platform
import sys
from typing import Any

import numpy as np

from . import _spin
from ._kernels import (
    build_cflags,
    get_cache_limit,
    get_parallel_thresholds,
    omp_max_threads,
    openmp_enabled,
)
from ._threads import get_num_threads
from ._version import __version__


def config() -> dict[str, Any]:
    return {
        "version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
        "openmp": bool(openmp_enabled()),
        "num_threads": get_num_threads(),
        "omp_max_threads": omp_max_threads(),
        "omp_spin": _spin.SPIN if openmp_enabled() else None,
        "compiler_flags": build_cflags(),
        "parallel_thresholds": get_parallel_thresholds(),
        "cache_limit_bytes": get_cache_limit(),
    }


def show_config() -> None:
    """Print the version, OpenMP status, thread count and compiler flags."""
    for key, value in config().items():
        print(f"{key:>20}: {value}")
