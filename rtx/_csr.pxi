# CSR machinery shared by the scatter, segment and message-passing kernels:
# grouping (a stable counting sort), splitting rows into balanced ranges, the
# grouping's consistency test, the grouped row sum, and THE parallel driver
# every CSR kernel runs on.  Kernel families use only this file, _common.pxi
# and _diag.pxi, never each other's helpers.
#
# Grouping: for an index array ``idx`` of length E over N rows,
# ``perm[ptr[r]:ptr[r + 1]]`` are the positions i with ``idx[i] == r`` in
# increasing order.  Serial and deterministic (the result is a pure function
# of ``idx``); kernels that reduce over it give each destination row to
# exactly one thread, which adds its entries in that order, so their bits
# never depend on the thread count.
#
# ``ptr`` has N + 2 slots: counts go to ptr[d + 2], the prefix sum makes
# ptr[d + 1] the start of d, and the fill pass bumps it to the end of d (= the
# start of d + 1), leaving the CSR pointers in ptr[0..N] without a second
# array.  ptr[N + 1] is scratch.

cdef enum:
    # Source rows prefetched ahead by the CSR row kernels (their reads are all
    # random, so they want more misses in flight than a gather).
    CSR_PREFETCH_AHEAD = 16
    MAX_SAMPLE_BUCKETS = 1024
    SAMPLE_SIZE = 8192

# Bytes touched ((E + N) * H * itemsize) below which segment/message kernels
# stay on one thread (same reasoning as the index kernels' cut-overs).
cdef Py_ssize_t SEGMENT_PARALLEL_MIN = 256 << 10


def set_segment_parallel_min(Py_ssize_t nbytes):
    #: -> int
    """Bytes from which segment/message kernels use threads; returns the old
    value (for tests and benchmarks: results never depend on it)."""
    global SEGMENT_PARALLEL_MIN
    if nbytes < 0:
        raise ValueError("nbytes must be >= 0")
    old = SEGMENT_PARALLEL_MIN
    SEGMENT_PARALLEL_MIN = nbytes
    return old


cdef int _segment_threads(int num_threads, Py_ssize_t E, Py_ssize_t N, Py_ssize_t F,
                          Py_ssize_t itemsize):
    """Team size of a segment/message kernel: 1 below ``SEGMENT_PARALLEL_MIN``."""
    if (E + N) * F * itemsize < SEGMENT_PARALLEL_MIN:
        return 1
    return _team_size(num_threads, N)


# ------------------------------------------------------------------ grouping
cdef void _csr_build(const index_t* ip, Py_ssize_t E, Py_ssize_t N,
                     int64_t* ptr, int64_t* perm) noexcept nogil:
    cdef Py_ssize_t i, r
    memset(ptr, 0, <size_t>(N + 2) * sizeof(int64_t))
    for i in range(E):
        ptr[<Py_ssize_t>ip[i] + 2] += 1
    for r in range(2, N + 2):
        ptr[r] += ptr[r - 1]
    for i in range(E):
        r = <Py_ssize_t>ip[i] + 1
        perm[ptr[r]] = i
        ptr[r] += 1


def csr_build(const index_t[::1] idx, int64_t[::1] ptr, int64_t[::1] perm):
    """Fill ``ptr`` (length N + 2; the CSR pointers end up in ``ptr[:N + 1]``)
    and ``perm`` (length E) with the stable grouping of ``idx`` over N rows.

    Every index must already be in ``[0, N)`` (an ``IndexPlan`` checked it).
    """
    cdef Py_ssize_t E = idx.shape[0]
    cdef Py_ssize_t N = ptr.shape[0] - 2
    if N < 0:
        raise ValueError("csr_build: ptr needs N + 2 slots")
    if perm.shape[0] != E:
        raise ValueError("csr_build: perm must have one slot per index")
    if E == 0:
        ptr[:] = 0
        return
    with nogil:
        _csr_build(&idx[0], E, N, &ptr[0], &perm[0])


cdef _check_grouping(const int64_t[::1] perm, const int64_t[::1] ptr, Py_ssize_t E,
                     Py_ssize_t N, str op):
    """The grouping has one slot per entry and its pointers span exactly [0, E)."""
    if perm.shape[0] != E or ptr.shape[0] < N + 1:
        raise ValueError(f"{op}: the grouping does not match the data")
    if N > 0 and (ptr[0] != 0 or ptr[N] != E):
        raise ValueError(f"{op}: the grouping does not cover the data")


# ----------------------------------------------------------------- splitting
cdef void _csr_split(const int64_t* ptr, Py_ssize_t N, Py_ssize_t nchunks,
                     Py_ssize_t* bounds) noexcept nogil:
    """Cut rows [0, N) into ``nchunks`` contiguous ranges of about equal work
    (entries + rows): ``bounds[0] = 0 <= bounds[1] <= ... <= bounds[nchunks] = N``.
    Only the balance depends on it, never a result."""
    cdef Py_ssize_t c, lo, hi, mid
    cdef Py_ssize_t total = ptr[N] + N
    bounds[0] = 0
    for c in range(1, nchunks):
        lo = bounds[c - 1]
        hi = N
        while lo < hi:
            mid = (lo + hi) // 2
            if (ptr[mid] + mid) * nchunks >= c * total:
                hi = mid
            else:
                lo = mid + 1
        bounds[c] = lo
    bounds[nchunks] = N


cdef inline Py_ssize_t _csr_nchunks(int T, Py_ssize_t N) noexcept nogil:
    """Chunks handed out dynamically: about 8 per thread, so a thread the OS
    runs late (a shared machine) finds most of the work done by the others."""
    cdef Py_ssize_t n = 1 if T <= 1 else 8 * <Py_ssize_t>T
    if n > N:
        n = N
    return n if n > 0 else 1


cdef void _row_bounds(const index_t* ip, Py_ssize_t E, Py_ssize_t N, Py_ssize_t T,
                      Py_ssize_t* bounds) noexcept nogil:
    """Split rows [0, N) into T contiguous ranges of about E/T indices each,
    WITHOUT a grouping (for kernels that scan the indices in entry order).

    Uses a histogram of an evenly spaced sample of the indices; only the
    balance depends on it, never the result.
    """
    cdef Py_ssize_t counts[MAX_SAMPLE_BUCKETS]
    cdef Py_ssize_t B = N if N < MAX_SAMPLE_BUCKETS else MAX_SAMPLE_BUCKETS
    cdef Py_ssize_t w = (N + B - 1) // B
    cdef Py_ssize_t S = E if E < SAMPLE_SIZE else SAMPLE_SIZE
    cdef Py_ssize_t s, b, t, acc, r
    for b in range(B):
        counts[b] = 0
    for s in range(S):
        counts[<Py_ssize_t>ip[(s * E) // S] // w] += 1
    bounds[0] = 0
    t = 1
    acc = 0
    for b in range(B):
        acc += counts[b]
        while t < T and acc * T >= t * S:
            r = (b + 1) * w
            bounds[t] = r if r < N else N
            t += 1
    while t <= T:
        bounds[t] = N
        t += 1


# -------------------------------------------------------- the parallel driver
# A CSR kernel is a row function ``rows(job, r0, r1)`` that computes rows
# [r0, r1) of its output from the grouping (each row by one call, from its
# entries in increasing position) and a job struct holding its arguments (a
# family's own struct; the row function casts it back and dispatches on the
# dtype).  The driver cuts [0, N) into contiguous ranges of equal work and
# runs them on the team; the row function writes only the rows of its range
# (and per-entry outputs of those rows' entries), so no two calls write the
# same memory and the bits never depend on the thread count or the split.

ctypedef void (*csr_rows_fn)(const void* job, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil

cdef enum:
    # how the driver hands out ranges
    CSR_DYNAMIC = 0     # about 8 per thread, dynamically (see _csr_nchunks)
    CSR_PER_THREAD = 1  # one per thread, statically: thread t always gets range t


cdef int _csr_parallel(csr_rows_fn rows, const void* job, const int64_t* ptr, Py_ssize_t N,
                       int T, int schedule) noexcept nogil:
    """Run ``rows(job, r0, r1)`` over rows [0, N) on ``T`` threads (``ptr``: the
    grouping's N + 1 row pointers, for the balance only).  Returns -1 when the
    range bounds cannot be allocated (nothing was run), else 0."""
    cdef Py_ssize_t c
    cdef Py_ssize_t nchunks = T if schedule == CSR_PER_THREAD else _csr_nchunks(T, N)
    cdef Py_ssize_t* bounds
    if T <= 1 or nchunks <= 1:
        _mark_seen()
        rows(job, 0, N)
        return 0
    bounds = <Py_ssize_t*>malloc(<size_t>(nchunks + 1) * sizeof(Py_ssize_t))
    if bounds == NULL:
        return -1
    _csr_split(ptr, N, nchunks, bounds)
    if schedule == CSR_PER_THREAD:
        for c in prange(nchunks, num_threads=T, schedule="static", chunksize=1):
            _mark_seen()
            rows(job, bounds[c], bounds[c + 1])
    else:
        for c in prange(nchunks, num_threads=T, schedule="dynamic", chunksize=1):
            _mark_seen()
            rows(job, bounds[c], bounds[c + 1])
    free(bounds)
    return 0


# ------------------------------------------------------- the grouped row sum
cdef inline void _csr_reduce_narrow(const real* sp, const int64_t* perm, const int64_t* ptr,
                                    real* op, Py_ssize_t r0, Py_ssize_t r1,
                                    const Py_ssize_t W) noexcept nogil:
    """``_csr_reduce`` for rows of W <= 8 values, W a constant at each call (then
    unrolled, the sums in registers): the same adds from 0 in the same order, so
    the same bits (-0.0 sums to +0.0 either way)."""
    cdef Py_ssize_t r, k, j
    cdef Py_ssize_t kend = ptr[r1]
    cdef const real* s
    cdef real acc[8]
    for r in range(r0, r1):
        for j in range(W):
            acc[j] = 0
        for k in range(ptr[r], ptr[r + 1]):
            if k + CSR_PREFETCH_AHEAD < kend:
                rtx_prefetch(sp + perm[k + CSR_PREFETCH_AHEAD] * W)
            s = sp + perm[k] * W
            for j in range(W):
                acc[j] = acc[j] + s[j]
        for j in range(W):
            op[r * W + j] = acc[j]


cdef void _csr_reduce(const real* sp, const int64_t* perm, const int64_t* ptr, Py_ssize_t F,
                      real* op, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """Rows [r0, r1): zero each, then add its source rows in CSR (= index) order."""
    cdef Py_ssize_t r, k
    cdef Py_ssize_t kend = ptr[r1]
    cdef real* row
    # narrow rows (GAT's [E, heads] gradients): the sums in registers, W a literal
    if F == 1:
        _csr_reduce_narrow(sp, perm, ptr, op, r0, r1, 1)
        return
    if F == 4:
        _csr_reduce_narrow(sp, perm, ptr, op, r0, r1, 4)
        return
    if F == 8:
        _csr_reduce_narrow(sp, perm, ptr, op, r0, r1, 8)
        return
    for r in range(r0, r1):
        row = op + r * F
        memset(row, 0, <size_t>F * sizeof(real))
        for k in range(ptr[r], ptr[r + 1]):
            if k + CSR_PREFETCH_AHEAD < kend:
                rtx_prefetch_row(sp + perm[k + CSR_PREFETCH_AHEAD] * F, <size_t>F * sizeof(real))
            _add_row(row, sp + perm[k] * F, F)


ctypedef struct CsrReduceJob:
    const void* src
    const int64_t* perm
    const int64_t* ptr
    Py_ssize_t F
    void* out
    bint dbl


cdef void _csr_reduce_chunk(const void* job, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    cdef const CsrReduceJob* j = <const CsrReduceJob*>job
    if j.dbl:
        _csr_reduce(<const double*>j.src, j.perm, j.ptr, j.F, <double*>j.out, r0, r1)
    else:
        _csr_reduce(<const float*>j.src, j.perm, j.ptr, j.F, <float*>j.out, r0, r1)


cdef int _csr_reduce_parallel(const real* sp, const int64_t* perm, const int64_t* ptr,
                              Py_ssize_t N, Py_ssize_t F, real* op, int T,
                              int schedule) noexcept nogil:
    """``_csr_reduce`` over rows [0, N) on the driver; -1 when out of memory."""
    cdef CsrReduceJob job
    job.src = sp
    job.perm = perm
    job.ptr = ptr
    job.F = F
    job.out = op
    job.dbl = real is double
    return _csr_parallel(_csr_reduce_chunk, &job, ptr, N, T, schedule)
