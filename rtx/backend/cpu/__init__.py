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
this backend's buffers has CPU code of its own (``index_accumulate`` in place,
``index.py``).  ``CpuBackend`` itself (``backend.py``) composes the mixins and
answers the core queries (``shape``, ``dtype``, ``aliases`` ...).
"""

from __future__ import annotations

from ._alloc import empty, own
from .backend import CPU_MIXINS, CpuBackend

__all__ = ["CPU_MIXINS", "CpuBackend", "empty", "own"]
