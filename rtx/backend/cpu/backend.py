"""``CpuBackend``: the CPU family mixins composed, and its core (the primitives'
shape, dtype and aliasing, asked several times per op: a compiled module,
rtx/_compiled.py).  See the package docstring."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import Backend
from ._alloc import empty
from .activation import CpuActivation
from .creation import CpuCreation
from .elementwise import CpuElementwise
from .index import CpuIndex
from .linalg import CpuLinalg
from .reduction import CpuReduction
from .shape import CpuShape

_ndarray = np.ndarray

# The family overrides, in Backend's family order: each mixin overrides only ops
# of its family (tests/backend/test_backend_layout.py).
CPU_MIXINS = (CpuElementwise, CpuActivation, CpuReduction, CpuLinalg, CpuShape, CpuIndex,
              CpuCreation)


class CpuBackend(CpuElementwise, CpuActivation, CpuReduction, CpuLinalg, CpuShape, CpuIndex,
                 CpuCreation, Backend):
    """Native CPU backend."""

    name = "cpu"
    HOST_ARRAYS = True  # primitives are numpy arrays: the host bodies run as they are

    def _host_empty(self, shape: tuple[int, ...], dtype: Any, zero: bool = False) -> np.ndarray:
        return empty(shape, dtype, zero)

    # ----------------------------------------------------------------- core
    def from_numpy(self, a: np.ndarray) -> np.ndarray:
        return a

    def to_numpy(self, p: np.ndarray) -> np.ndarray:
        return p

    def shape(self, p: np.ndarray) -> tuple[int, ...]:
        return p.shape

    def dtype(self, p: np.ndarray) -> np.dtype:
        return p.dtype

    def is_prim(self, p: Any) -> bool:
        return type(p) is _ndarray

    def aliases(self, view: Any, base: Any) -> bool:
        b = view.base
        return b is not None and (b is base or b is base.base)
