# cython: language_level=3
"""rtx's compiled core: owned storage, the caching allocator and the
OpenMP kernels (row gather / scatter-add, segment ops, fused message passing
and fused kernels numpy does badly).

Each family lives in its own ``.pxi`` file, included here so they share one
extension module and one OpenMP runtime.  The shared base comes first, in
this order (each uses only what an earlier one defines):

- ``_openmp.pxi``   OpenMP shim (thread number / team size, serial fallback)
- ``_common.pxi``   fused dtypes (``real``, ``index_t``), inline row helpers
- ``_vmath.pxi``    vectorisable float math (branch-free selects, expf, expm1f)
- ``_diag.pxi``     thread-id probes and the bandwidth reference kernel
- ``_storage.pxi``  owned storage and the caching allocator
- ``_snapshot.pxi`` private, immutable snapshots of index arrays (what kernels trust)
- ``_csr.pxi``      CSR grouping, row splits, the grouped row sum and the one
                    parallel CSR driver

then the kernel families, each using only the base (never another family's
helpers: tests/test_layers.py checks it), so their order does not matter:

- ``_index.pxi``    gather / scatter-add
- ``_segment.pxi``  segment softmax / mean / max / min over a CSR grouping
- ``_message.pxi``  fused message passing and its SDDMM gradient
- ``_gatv2.pxi``    fused GATv2 attention scores and their gradients
- ``_grouped.pxi``  grouped (segment) matmul: each row by its type's weight
- ``_narrow.pxi``   narrow matmul ``x.T @ g`` (g of at most 8 columns)
- ``_gemm.pxi``     a large matmul's pieces as BLAS calls run by rtx's OpenMP team
- ``_dense.pxi``    threaded sums over dim 0 and in-place arithmetic (numpy's bits)
- ``_sample.pxi``   heterogeneous neighbour sampling (rtx.loader)
- ``_dlpack.pxi``   DLPack import/export
- ``_fused.pxi``    fused elementwise kernels (the Fusion backend)
- ``_negative.pxi`` negative sampling of non-edges (rtx.utils.negative_sampling)
- ``_optim.pxi``    fused optimiser updates (rtx.optim.SparseAdam, Adam, AdamW)
- ``_loss.pxi``     cross-entropy from logits per row (forward and backward)
"""

from cython.parallel cimport prange

include "_openmp.pxi"
include "_common.pxi"
include "_vmath.pxi"
include "_diag.pxi"
include "_storage.pxi"
include "_snapshot.pxi"
include "_csr.pxi"
include "_record.pxi"
include "_index.pxi"
include "_segment.pxi"
include "_message.pxi"
include "_gatv2.pxi"
include "_grouped.pxi"
include "_narrow.pxi"
include "_gemm.pxi"
include "_dense.pxi"
include "_sample.pxi"
include "_dlpack.pxi"
include "_fused.pxi"
include "_negative.pxi"
include "_optim.pxi"
include "_loss.pxi"
