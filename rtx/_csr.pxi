# CSR grouping shared by the scatter, segment and message-passing kernels.
#
# A stable counting sort of positions by index: for an index array ``idx`` of
# length E over N rows, ``perm[ptr[r]:ptr[r + 1]]`` are the positions i with
# ``idx[i] == r`` in increasing order.  Serial and deterministic (the result
# is a pure function of ``idx``); kernels that reduce over it give each
# destination row to exactly one thread, which adds its entries in that
# order, so their bits never depend on the thread count.
#
# ``ptr`` has N + 2 slots: counts go to ptr[d + 2], the prefix sum makes
# ptr[d + 1] the start of d, and the fill pass bumps it to the end of d (= the
# start of d + 1), leaving the CSR pointers in ptr[0..N] without a second
# array.  ptr[N + 1] is scratch.


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
