"""The CPU backend (float32 and float64; int and bool tensors pass through numpy).

Primitives are numpy arrays whose memory is an rtx ``Storage`` (allocated by
``_alloc.py`` through the caching allocator) or, for ``rtx.from_numpy``, the
user's own array.  One module per op family, as ``rtx/backend/`` has one per
family of default bodies: elementwise and reduction ops run numpy ufuncs
writing into owned output buffers (``out=``); activations and their backward
rules run fixed programs of the fused evaluator (compiled by
``rtx/backend/_program.py``, which also compiles Fusion's).  The graph ops
(index, segment, message passing, GATv2, grouped matmul) have one body each in
their family module (``rtx/backend/index.py``, ...: ``host_body``), the OpenMP
kernels of ``rtx._kernels`` over checked ``IndexPlan`` / ``EdgeIndex``
arguments; ``HOST_ARRAYS`` makes them this backend's methods as they are, with
outputs from the caching allocator (``_host_empty``).  Only what is specific to
this backend's buffers stays here (``index_accumulate`` in place).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import Backend
from ._alloc import empty, own
from .activation import CpuActivation
from .creation import CpuCreation
from .elementwise import CpuElementwise
from .index import CpuIndex
from .linalg import CpuLinalg
from .reduction import CpuReduction
from .shape import CpuShape

__all__ = ["CpuBackend", "empty", "own"]

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
