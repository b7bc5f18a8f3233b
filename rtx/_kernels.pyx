# cython: language_level=3
"""rtx's compiled core: owned storage, the caching allocator and the
OpenMP kernels (row gather / scatter-add and fused kernels numpy does badly).

Each family lives in its own ``.pxi`` file, included here so they share one
extension module and one OpenMP runtime.
"""

from cython.parallel cimport prange

include "_openmp.pxi"
include "_storage.pxi"
include "_index.pxi"
include "_dlpack.pxi"
include "_fused.pxi"
