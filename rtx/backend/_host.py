"""Host round-trip helper shared by the default op bodies."""

from __future__ import annotations

from typing import Any

import numpy as np


def contiguous(a: Any, dtype: Any = None) -> np.ndarray:
    """``a`` as a C-contiguous array, keeping 0-d arrays 0-d (unlike np.ascontiguousarray)."""
    return np.require(np.asarray(a, dtype=dtype), requirements="C")


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
