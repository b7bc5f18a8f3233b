# Row gather (index_select) and deterministic row scatter-add (index_add)
# along dim 0.  Inputs arrive validated and C-contiguous from the Python
# boundary (rtx/backend/cpu.py): 2-D ``(rows, F)`` data, 1-D indices already
# bounds-checked.  One source serves float32/float64 x int32/int64.
#
# Determinism of scatter-add: every destination row is reduced by exactly one
# thread, adding its source rows in increasing source position, starting from
# +0.0.  The serial path adds in the same order, so the bits do not depend on
# the thread count, and no thread ever races on ``+=`` (no atomics either).

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

ctypedef fused real:
    float
    double

ctypedef fused index_t:
    int32_t
    int64_t

# Work (elements moved) below which a kernel stays on one thread: starting an
# OpenMP team costs a few microseconds, about what copying this many floats
# costs.  Measured by benchmarks/bench_index.py --threshold (see docs/performance.md).
cdef Py_ssize_t GATHER_PARALLEL_MIN = 32768
cdef Py_ssize_t SCATTER_PARALLEL_MIN = 32768


def get_parallel_thresholds():
    return {"gather": GATHER_PARALLEL_MIN, "scatter": SCATTER_PARALLEL_MIN}


def set_parallel_thresholds(gather=None, scatter=None):
    """Tune the serial/parallel cut-over (elements moved).  For benchmarks and tests."""
    global GATHER_PARALLEL_MIN, SCATTER_PARALLEL_MIN
    if gather is not None:
        if gather < 0:
            raise ValueError("gather threshold must be >= 0")
        GATHER_PARALLEL_MIN = gather
    if scatter is not None:
        if scatter < 0:
            raise ValueError("scatter threshold must be >= 0")
        SCATTER_PARALLEL_MIN = scatter


def first_out_of_bounds(const index_t[::1] idx, Py_ssize_t n):
    """Position of the first index outside ``[0, n)``, or -1 when all are valid."""
    cdef Py_ssize_t i, m = idx.shape[0]
    cdef Py_ssize_t bad = -1
    cdef index_t v
    with nogil:
        for i in range(m):
            v = idx[i]
            if v < 0 or v >= n:
                bad = i
                break
    return bad


cdef inline void _copy_row(real* dst, const real* src, Py_ssize_t F) noexcept nogil:
    cdef Py_ssize_t j
    if F == 1:
        dst[0] = src[0]
    elif F <= 8:
        for j in range(F):
            dst[j] = src[j]
    else:
        memcpy(dst, src, <size_t>F * sizeof(real))


def gather_rows(const real[:, ::1] x, const index_t[::1] idx, real[:, ::1] out,
                int num_threads):
    """out[i, :] = x[idx[i], :] (indices pre-validated)."""
    cdef Py_ssize_t E = idx.shape[0]
    cdef Py_ssize_t F = x.shape[1]
    cdef Py_ssize_t i
    cdef const real* xp
    cdef real* op
    if E == 0 or F == 0:
        return
    xp = &x[0, 0]
    op = &out[0, 0]
    with nogil:
        if num_threads > 1 and E * F >= GATHER_PARALLEL_MIN:
            for i in prange(E, num_threads=num_threads, schedule="static"):
                _copy_row(op + i * F, xp + <Py_ssize_t>idx[i] * F, F)
        else:
            for i in range(E):
                _copy_row(op + i * F, xp + <Py_ssize_t>idx[i] * F, F)


cdef inline void _add_row(real* dst, const real* src, Py_ssize_t F) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(F):
        dst[j] += src[j]


cdef int _csr_by_destination(const index_t* idx, Py_ssize_t E, Py_ssize_t N,
                             int64_t* ptr, int64_t* perm) noexcept nogil:
    """Stable counting sort of positions 0..E-1 by destination (CSR order)."""
    cdef Py_ssize_t i, r
    cdef int64_t* fill
    for r in range(N + 1):
        ptr[r] = 0
    for i in range(E):
        ptr[idx[i] + 1] += 1
    for r in range(N):
        ptr[r + 1] += ptr[r]
    fill = <int64_t*>malloc(<size_t>(N + 1) * sizeof(int64_t))
    if fill == NULL:
        return -1
    memcpy(fill, ptr, <size_t>(N + 1) * sizeof(int64_t))
    for i in range(E):
        r = idx[i]
        perm[fill[r]] = i
        fill[r] += 1
    free(fill)
    return 0


def scatter_add_rows(const real[:, ::1] src, const index_t[::1] idx, real[:, ::1] out,
                     int num_threads):
    """out[idx[i], :] += src[i, :] into a zero-filled ``out`` (indices pre-validated).

    Deterministic for any ``num_threads``: see the note at the top of this file.
    """
    cdef Py_ssize_t E = idx.shape[0]
    cdef Py_ssize_t F = src.shape[1]
    cdef Py_ssize_t N = out.shape[0]
    cdef Py_ssize_t i, r, k
    cdef const real* sp
    cdef real* op
    cdef int64_t* ptr = NULL
    cdef int64_t* perm = NULL
    cdef int rc = 0
    if E == 0 or F == 0 or N == 0:
        return
    sp = &src[0, 0]
    op = &out[0, 0]
    if num_threads <= 1 or E * F < SCATTER_PARALLEL_MIN:
        with nogil:
            for i in range(E):
                _add_row(op + <Py_ssize_t>idx[i] * F, sp + i * F, F)
        return
    ptr = <int64_t*>malloc(<size_t>(N + 1) * sizeof(int64_t))
    perm = <int64_t*>malloc(<size_t>(E if E > 0 else 1) * sizeof(int64_t))
    if ptr == NULL or perm == NULL:
        free(ptr)
        free(perm)
        raise MemoryError("rtx.index_add: cannot allocate the destination grouping")
    try:
        with nogil:
            rc = _csr_by_destination(&idx[0], E, N, ptr, perm)
            if rc == 0:
                for r in prange(N, num_threads=num_threads, schedule="guided"):
                    for k in range(ptr[r], ptr[r + 1]):
                        _add_row(op + r * F, sp + perm[k] * F, F)
        if rc != 0:
            raise MemoryError("rtx.index_add: cannot allocate the destination grouping")
    finally:
        free(ptr)
        free(perm)
