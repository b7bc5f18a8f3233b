"""Host round-trip helper shared by the default op bodies (``contiguous`` and
``plain_ndarray`` are rtx._dtypes', re-exported for the backends)."""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from .._dtypes import contiguous as contiguous
from .._dtypes import plain_ndarray as plain_ndarray


def check_output(rows: int, shape: tuple[int, ...], itemsize: int, op: str) -> None:
    """MemoryError for an output (or state) of ``rows`` rows of ``shape[1:]`` too
    large for this platform (numpy would raise ValueError for it): an O(1)
    allocation check of the default bodies, not an input check."""
    row = 1
    for d in shape[1:]:
        row *= d
    if rows * max(row, 1) * itemsize > sys.maxsize:
        raise MemoryError(f"{op}(): an output of {rows} rows x {row} elements is too large")


def rows2d(a: np.ndarray) -> np.ndarray:
    """``a`` as a C-contiguous (len, prod(rest)) view (a copy only if needed): the
    2-D layout the row kernels take."""
    return np.ascontiguousarray(a).reshape(a.shape[0], math.prod(a.shape[1:]))


class HostRoundTrip:
    """Mixin: run a numpy function on host copies of primitives."""

    # True for a backend whose primitives are numpy arrays (the CPU backend): it
    # runs the ``host_body`` ops' bodies as they are (``_family.host_body``).
    HOST_ARRAYS = False

    def _host_empty(self, shape: tuple[int, ...], dtype: Any, zero: bool = False) -> np.ndarray:
        """An output array for a ``host_body`` (the CPU backend allocates from its
        caching allocator; a host round-trip needs only a numpy array)."""
        return np.zeros(shape, dtype) if zero else np.empty(shape, dtype)

    def _h(self, x: Any) -> Any:
        """A primitive as a numpy array; Python/numpy scalars pass through."""
        if isinstance(x, (int, float, bool, np.generic)):
            return x
        return self.to_numpy(x)  # type: ignore[attr-defined]

    def _host(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn`` on host copies of the positional args (primitives or scalars);
        keyword args (shapes, dims, keys) pass through untouched."""
        res = fn(*[self._h(a) for a in args], **kwargs)
        return self.from_numpy(contiguous(res))  # type: ignore[attr-defined]
