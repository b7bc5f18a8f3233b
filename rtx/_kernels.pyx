# cython: language_level=3
"""rtx's compiled core: owned storage, the caching allocator and the
OpenMP kernels (row gather / scatter-add, segment ops, fused message passing
and fused kernels numpy does badly).

Each family lives in its own ``.pxi`` file, included here so they share one
extension module and one OpenMP runtime.  Include order matters (a file may
use only what an earlier one defines):

1. ``_openmp.pxi``   OpenMP shim (thread number / team size, serial fallback)
2. ``_common.pxi``   fused dtypes (``real``, ``index_t``), inline row helpers
3. ``_diag.pxi``     thread-id probes and the bandwidth reference kernel
4. ``_storage.pxi``  owned storage and the caching allocator
5. ``_csr.pxi``      CSR grouping (counting sort + row pointers, row splits)
6. ``_index.pxi``    gather / scatter-add
7. ``_snapshot.pxi`` private, immutable snapshots of index arrays
8. ``_segment.pxi``  segment softmax / mean / max over a CSR grouping
9. ``_message.pxi``  fused message passing and its SDDMM gradient
   ``_gatv2.pxi``    fused GATv2 attention scores and their gradients
10. ``_sample.pxi``  heterogeneous neighbour sampling (rtx.loader)
11. ``_dlpack.pxi``  DLPack import/export
12. ``_fused.pxi``   fused elementwise kernels (the Fusion backend)
"""

from cython.parallel cimport prange

include "_openmp.pxi"
include "_common.pxi"
include "_diag.pxi"
include "_storage.pxi"
include "_csr.pxi"
include "_index.pxi"
include "_snapshot.pxi"
include "_segment.pxi"
include "_message.pxi"
include "_gatv2.pxi"
include "_sample.pxi"
include "_dlpack.pxi"
include "_fused.pxi"
