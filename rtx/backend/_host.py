"""Host round-trip helper shared by the default op bodies."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def contiguous(a: Any, dtype: Any = None) -> np.ndarray:
    """``a`` as a C-contiguous array, keeping 0-d arrays 0-d (unlike np.ascontiguousarray)."""
    return np.require(np.asarray(a, dtype=dtype), requirements="C")


def plain_ndarray(a: np.ndarray, what: str = "rtx") -> np.ndarray:
    """``a`` as a base-class ``numpy.ndarray`` over the same memory.

    numpy subclasses change what operators and reductions mean (``np.matrix``:
    ``*`` is a matrix product and results stay 2-D; ``np.memmap``: a subclass
    the kernels' fast paths do not recognise), so every array entering rtx is
    viewed as a plain ndarray.  ``np.matrix`` keeps its 2-D shape.  A masked
    array is accepted only when nothing is masked: rtx tensors have no mask,
    and silently using the hidden values under the mask would be wrong.
    """
    if type(a) is np.ndarray:
        return a
    if isinstance(a, np.ma.MaskedArray):
        if np.ma.is_masked(a):
            raise TypeError(
                f"{what}: a numpy masked array with masked elements cannot become a tensor "
                "(rtx tensors have no mask); fill it first (a.filled(value)) or pass "
                "a.data to use the values under the mask"
            )
        a = np.ma.getdata(a)
    return a.view(np.ndarray)


def check_output(rows: int, shape: tuple[int, ...], itemsize: int, op: str) -> None:
    """MemoryError for an output (or state) of ``rows`` rows of ``shape[1:]`` too
    large for this platform (numpy would raise ValueError for it): an O(1)
    allocation check of the default bodies, not an input check."""
    row = 1
    for d in shape[1:]:
        row *= d
    if rows * max(row, 1) * itemsize > sys.maxsize:
        raise MemoryError(f"{op}(): an output of {rows} rows x {row} elements is too large")


class HostRoundTrip:
    """Mixin: run a numpy function on host copies of primitives."""

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
