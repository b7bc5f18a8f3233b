"""``MinimalBackend``: implements only the four core methods.

Its primitive is an opaque host buffer (bytes + shape + dtype), never a numpy
array, so every op it runs goes through the ``Backend`` defaults.  It exists
to prove that the defaults make any backend complete, and as the template in
``docs/backends.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._host import contiguous
from .base import Backend


class HostBuffer:
    """An immutable host copy of an array's values."""

    __slots__ = ("data", "shape", "dtype")

    def __init__(self, a: np.ndarray) -> None:
        a = contiguous(a)
        self.data = a.tobytes()
        self.shape = tuple(a.shape)
        self.dtype = a.dtype

    def __repr__(self) -> str:
        return f"HostBuffer(shape={self.shape}, dtype={self.dtype})"


class MinimalBackend(Backend):
    name = "minimal"

    def from_numpy(self, a: np.ndarray) -> HostBuffer:
        return HostBuffer(np.asarray(a))

    def to_numpy(self, p: HostBuffer) -> np.ndarray:
        return np.frombuffer(p.data, dtype=p.dtype).reshape(p.shape).copy()

    def shape(self, p: HostBuffer) -> tuple[int, ...]:
        return p.shape

    def dtype(self, p: HostBuffer) -> np.dtype:
        return p.dtype

    def is_prim(self, p: Any) -> bool:
        return isinstance(p, HostBuffer)
