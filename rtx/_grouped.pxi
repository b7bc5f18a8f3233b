# Grouped (segment) matmul: every row multiplied by the weight of its type, all
# types in one pass (HeteroLinear, RGCNConv; pyg_lib's segment_matmul without
# the sort).
#
#   out[i, :]    = x[i, :] @ W[type[i]]            (W: T stacked [K, M] blocks)
#   grad_x[i, :] = g[i, :] @ W[type[i]].T          (the first, with transposed blocks)
#   grad_W[t]    = sum over rows i of type t of outer(x[i, :], g[i, :])
#
# Rows are visited in the type grouping's order (``perm`` / ``ptr`` of a checked
# IndexPlan over T types), so consecutive rows share one weight block and it
# stays in cache.  The row passes split the grouping's positions into fixed
# chunks (each output row written by one thread); the weight gradient gives
# each (type, block of GROUPED_KB weight rows) to one thread, which adds the
# type's rows in increasing position: the bits never depend on the thread count.
# Index arrays must come from checked plans (every type < T, perm a permutation).

cdef enum:
    GROUPED_CHUNK = 64   # grouping positions per parallel chunk of the row passes
    GROUPED_KB = 8       # weight rows per work item of the weight gradient


cdef Py_ssize_t GROUPED_PARALLEL_MIN = 256 << 10


def set_grouped_parallel_min(Py_ssize_t nbytes):
    #: -> int
    """Bytes (rows * (K + M) * itemsize) from which the grouped matmul uses
    threads; returns the old value (tests and benchmarks: results never depend
    on it)."""
    global GROUPED_PARALLEL_MIN
    if nbytes < 0:
        raise ValueError("nbytes must be >= 0")
    old = GROUPED_PARALLEL_MIN
    GROUPED_PARALLEL_MIN = nbytes
    return old


cdef int _grouped_threads(int num_threads, Py_ssize_t N, Py_ssize_t K, Py_ssize_t M,
                          Py_ssize_t itemsize, Py_ssize_t work) noexcept nogil:
    if N * (K + M) * itemsize < GROUPED_PARALLEL_MIN:
        return 1
    return _team_size(_clamp_threads(num_threads), work)


cdef inline void _grouped_row(const real* xr, const real* w, Py_ssize_t K, Py_ssize_t M,
                              real* orow) noexcept nogil:
    """orow = xr @ w (w [K, M], xr [K], orow [M]): axpy rows (vectorised over M)
    in a fixed order."""
    cdef Py_ssize_t k, m
    cdef real a
    for m in range(M):
        orow[m] = 0
    for k in range(K):
        a = xr[k]
        for m in range(M):
            orow[m] = orow[m] + a * w[k * M + m]


cdef void _grouped_rows(const real* xp, const index_t* tp, const int64_t* perm,
                        const real* wp, Py_ssize_t N, Py_ssize_t K, Py_ssize_t M,
                        real* op, int T) noexcept nogil:
    """Every row of the grouping (positions [0, N)) through its type's block."""
    cdef Py_ssize_t c, p, p1, i
    cdef Py_ssize_t nchunks = (N + GROUPED_CHUNK - 1) // GROUPED_CHUNK
    if T <= 1:
        _mark_seen()
        for p in range(N):
            i = perm[p]
            _grouped_row(xp + i * K, wp + <Py_ssize_t>tp[i] * K * M, K, M, op + i * M)
        return
    for c in prange(nchunks, num_threads=T, schedule="static", chunksize=4):
        _mark_seen()
        p1 = (c + 1) * GROUPED_CHUNK
        if p1 > N:
            p1 = N
        for p in range(c * GROUPED_CHUNK, p1):
            i = perm[p]
            _grouped_row(xp + i * K, wp + <Py_ssize_t>tp[i] * K * M, K, M, op + i * M)


cdef void _grouped_weight_grad(const real* xp, const real* gp, const int64_t* perm,
                               const int64_t* ptr, Py_ssize_t NT, Py_ssize_t K, Py_ssize_t M,
                               real* wp, int T) noexcept nogil:
    """grad_W[t, k0:k1, :] for every (type, block of weight rows) work item: the
    type's rows four at a time (one load and store of the accumulator row per
    four rows), then the rest one by one, in increasing position."""
    cdef Py_ssize_t nkb = (K + GROUPED_KB - 1) // GROUPED_KB
    cdef Py_ssize_t item, t, k0, k1, k, p, pend, i0, i1, i2, i3, m
    cdef real a0, a1, a2, a3
    cdef real* wrow
    cdef const real* g0
    cdef const real* g1
    cdef const real* g2
    cdef const real* g3
    for item in prange(NT * nkb, num_threads=T, schedule="dynamic", chunksize=1):
        _mark_seen()
        t = item // nkb
        k0 = (item % nkb) * GROUPED_KB
        k1 = k0 + GROUPED_KB
        if k1 > K:
            k1 = K
        memset(wp + (t * K + k0) * M, 0, <size_t>((k1 - k0) * M) * sizeof(real))
        p = ptr[t]
        pend = ptr[t + 1]
        while p + 4 <= pend:
            i0 = perm[p]
            i1 = perm[p + 1]
            i2 = perm[p + 2]
            i3 = perm[p + 3]
            g0 = gp + i0 * M
            g1 = gp + i1 * M
            g2 = gp + i2 * M
            g3 = gp + i3 * M
            for k in range(k0, k1):
                a0 = xp[i0 * K + k]
                a1 = xp[i1 * K + k]
                a2 = xp[i2 * K + k]
                a3 = xp[i3 * K + k]
                wrow = wp + (t * K + k) * M
                for m in range(M):
                    wrow[m] = wrow[m] + ((a0 * g0[m] + a1 * g1[m]) + (a2 * g2[m] + a3 * g3[m]))
            p = p + 4
        while p < pend:
            i0 = perm[p]
            g0 = gp + i0 * M
            for k in range(k0, k1):
                a0 = xp[i0 * K + k]
                wrow = wp + (t * K + k) * M
                for m in range(M):
                    wrow[m] = wrow[m] + a0 * g0[m]
            p = p + 1


def segment_matmul_rows(const real[:, ::1] x, const index_t[::1] types,
                        const int64_t[::1] perm, const real[:, ::1] weight,
                        real[:, ::1] out, int num_threads):
    """``out[i] = x[i] @ W[types[i]]``, W the ``weight`` (T*K, M) as T blocks
    [K, M] (K = x's columns); every row visited in the grouping order ``perm``
    (a permutation of the rows, from the checked plan of ``types`` over T).
    (grad_x is this with the transposed blocks.)"""
    cdef Py_ssize_t N = x.shape[0]
    cdef Py_ssize_t K = x.shape[1]
    cdef Py_ssize_t M = weight.shape[1]
    cdef Py_ssize_t NT
    cdef int T
    if K < 0 or (K == 0 and weight.shape[0] != 0) or (K > 0 and weight.shape[0] % K != 0):
        raise ValueError("segment_matmul_rows: weight must be (T*K, M)")
    NT = weight.shape[0] // K if K > 0 else 0
    if types.shape[0] != N or perm.shape[0] != N:
        raise ValueError("segment_matmul_rows: types and perm need one entry per row")
    if out.shape[0] != N or out.shape[1] != M:
        raise ValueError("segment_matmul_rows: out must be (rows, M)")
    _reset_seen()
    if N == 0:
        return
    if out.shape[1] == 0:
        return
    if K == 0 or M == 0 or NT == 0:
        out[:, :] = 0
        return
    T = _grouped_threads(num_threads, N, K, M, sizeof(real),
                         (N + GROUPED_CHUNK - 1) // GROUPED_CHUNK)
    with nogil:
        _grouped_rows(&x[0, 0], &types[0], &perm[0], &weight[0, 0], N, K, M, &out[0, 0], T)


def segment_matmul_weight_grad(const real[:, ::1] x, const real[:, ::1] grad,
                               const int64_t[::1] perm, const int64_t[::1] ptr,
                               real[:, ::1] grad_weight, int num_threads):
    """``grad_weight[t*K:(t+1)*K] = sum over the rows i of type t of outer(x[i],
    grad[i])``, over the CSR grouping ``perm`` / ``ptr`` (T + 1 pointers) of the
    types; ``grad_weight`` (T*K, M)."""
    cdef Py_ssize_t N = x.shape[0]
    cdef Py_ssize_t K = x.shape[1]
    cdef Py_ssize_t M = grad.shape[1]
    cdef Py_ssize_t NT = ptr.shape[0] - 1
    cdef int T
    if NT < 0 or grad.shape[0] != N:
        raise ValueError("segment_matmul_weight_grad: x and grad need the same rows")
    _check_grouping(perm, ptr, N, NT, "segment_matmul_weight_grad")
    if grad_weight.shape[0] != NT * K or grad_weight.shape[1] != M:
        raise ValueError("segment_matmul_weight_grad: grad_weight must be (T*K, M)")
    _reset_seen()
    if NT == 0 or K == 0 or M == 0:
        return
    T = _grouped_threads(num_threads, N, K, M, sizeof(real),
                         NT * ((K + GROUPED_KB - 1) // GROUPED_KB))
    with nogil:
        _grouped_weight_grad(&x[0, 0], &grad[0, 0], &perm[0], &ptr[0], NT, K, M,
                             &grad_weight[0, 0], T)
