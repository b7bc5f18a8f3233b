# Fused message passing over a CSR grouping (_csr.pxi's driver), never materialising
# the (E, H, C) message tensor.
#
#   message_csr:  out[r] = sum over k in [ptr[r], ptr[r+1]) of
#                 w[e, h] * x[other[e], h*C:(h+1)*C]   (e = perm[k]; w = 1 if unweighted)
#     forward:    grouping by target (dst), other = src, x = node features
#     grad_x:     grouping by source (src), other = dst, x = grad_out (the transpose pass)
#   sddmm_dot:    gw[e, h] = <g[dst[e], h-block], x[src[e], h-block]>  (grad of the weight;
#                 _common.pxi's _dot order, eight-lane sums; _dot_heads computes
#                 four heads' at a time for float32 with 8 | C, the same bits)
#
# Each output row is reduced by one thread in increasing edge position, so the
# bits never depend on the thread count or on whether the grouping was cached.


cdef void _message_rows(const real* xp, const index_t* other, const real* wp, bint weighted,
                        const int64_t* perm, const int64_t* ptr, Py_ssize_t H, Py_ssize_t C,
                        real* op, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    cdef Py_ssize_t r, k, h, kend
    cdef Py_ssize_t F = H * C
    cdef int64_t e
    cdef const real* xs
    cdef real* row
    kend = ptr[r1]
    for r in range(r0, r1):
        row = op + r * F
        memset(row, 0, <size_t>F * sizeof(real))
        for k in range(ptr[r], ptr[r + 1]):
            # two stages: the edge's index and weight 2A edges ahead (perm is read in
            # order, its targets are not), then its x row A edges ahead, whose address
            # that first stage brought into the cache
            if k + 2 * CSR_PREFETCH_AHEAD < kend:
                e = perm[k + 2 * CSR_PREFETCH_AHEAD]
                rtx_prefetch(other + e)
                if weighted:
                    rtx_prefetch(wp + e * H)
            if k + CSR_PREFETCH_AHEAD < kend:
                rtx_prefetch_row(xp + <Py_ssize_t>other[perm[k + CSR_PREFETCH_AHEAD]] * F,
                                 <size_t>F * sizeof(real))
            e = perm[k]
            xs = xp + <Py_ssize_t>other[e] * F
            if not weighted:
                _add_row(row, xs, F)
            elif H == 1:
                _axpy_row(row, wp[e], xs, F)
            else:
                for h in range(H):
                    _axpy_row(row + h * C, wp[e * H + h], xs + h * C, C)


ctypedef struct MessageJob:
    const void* a       # forward: x; backward: grad
    const void* b       # backward: x
    const void* idx     # forward: other; backward: dst
    bint idx64
    const void* w
    bint weighted
    bint need_w
    const int64_t* perm
    const int64_t* ptr
    Py_ssize_t H
    Py_ssize_t C
    void* out           # forward: out; backward: grad_x
    void* out2          # backward: grad_weight (or NULL)
    bint dbl


cdef void _message_chunk(const void* job, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    cdef const MessageJob* j = <const MessageJob*>job
    if j.dbl:
        if j.idx64:
            _message_rows(<const double*>j.a, <const int64_t*>j.idx, <const double*>j.w,
                          j.weighted, j.perm, j.ptr, j.H, j.C, <double*>j.out, r0, r1)
        else:
            _message_rows(<const double*>j.a, <const int32_t*>j.idx, <const double*>j.w,
                          j.weighted, j.perm, j.ptr, j.H, j.C, <double*>j.out, r0, r1)
    else:
        if j.idx64:
            _message_rows(<const float*>j.a, <const int64_t*>j.idx, <const float*>j.w,
                          j.weighted, j.perm, j.ptr, j.H, j.C, <float*>j.out, r0, r1)
        else:
            _message_rows(<const float*>j.a, <const int32_t*>j.idx, <const float*>j.w,
                          j.weighted, j.perm, j.ptr, j.H, j.C, <float*>j.out, r0, r1)


def message_csr(const real[:, ::1] x, const index_t[::1] other, const real[:, ::1] weight,
                bint weighted, const int64_t[::1] perm, const int64_t[::1] ptr,
                real[:, ::1] out, Py_ssize_t heads, int num_threads):
    """out[r] = sum_k weight[e] * x[other[e]] over the grouping (see the top of
    this file).  ``x`` is (rows, H*C), ``weight`` (E, H) (ignored unless
    ``weighted``), ``out`` (N, H*C) with N = len(ptr) - 1.  ``other`` must hold
    indices in ``[0, x.shape[0])`` (a checked plan)."""
    cdef Py_ssize_t E = other.shape[0]
    cdef Py_ssize_t F = x.shape[1]
    cdef Py_ssize_t N = out.shape[0]
    cdef Py_ssize_t H = heads
    cdef const real* wp = NULL
    cdef MessageJob job
    cdef int T, rc
    if H < 1 or F % H != 0:
        raise ValueError("message_csr: the row width must be a multiple of heads")
    if out.shape[1] != F or ptr.shape[0] != N + 1:
        raise ValueError("message_csr: shapes do not match")
    if weighted and (weight.shape[0] != E or weight.shape[1] != H):
        raise ValueError("message_csr: weight must be (E, heads)")
    _check_grouping(perm, ptr, E, N, "message_csr")
    _reset_seen()
    if N == 0 or F == 0:
        return
    if E == 0:
        out[:, :] = 0
        return
    if x.shape[0] == 0:
        raise IndexError("message_csr: x has no rows to gather from")
    if weighted:
        wp = &weight[0, 0]
    job.a = &x[0, 0]
    job.b = NULL
    job.idx = &other[0]
    job.idx64 = index_t is int64_t
    job.w = wp
    job.weighted = weighted
    job.need_w = False
    job.perm = &perm[0]
    job.ptr = &ptr[0]
    job.H = H
    job.C = F // H
    job.out = &out[0, 0]
    job.out2 = NULL
    job.dbl = real is double
    T = _segment_threads(num_threads, E, N, F, sizeof(real))
    with nogil:
        rc = _csr_parallel(_message_chunk, &job, &ptr[0], N, T, CSR_DYNAMIC)
    if rc != 0:
        raise MemoryError("message_csr: out of memory")


cdef void _sddmm_block(const real* gp, const real* xp, const index_t* sp, const index_t* dp,
                       Py_ssize_t H, Py_ssize_t C, real* wp, Py_ssize_t e0,
                       Py_ssize_t e1) noexcept nogil:
    cdef Py_ssize_t e
    cdef Py_ssize_t F = H * C
    cdef const real* g
    cdef const real* x
    for e in range(e0, e1):
        if e + CSR_PREFETCH_AHEAD < e1:
            rtx_prefetch_row(xp + <Py_ssize_t>sp[e + CSR_PREFETCH_AHEAD] * F,
                             <size_t>F * sizeof(real))
            rtx_prefetch_row(gp + <Py_ssize_t>dp[e + CSR_PREFETCH_AHEAD] * F,
                             <size_t>F * sizeof(real))
        g = gp + <Py_ssize_t>dp[e] * F
        x = xp + <Py_ssize_t>sp[e] * F
        _dot_heads(g, x, H, C, wp + e * H)


def sddmm_dot(const real[:, ::1] grad, const real[:, ::1] x, const index_t[::1] src,
              const index_t[::1] dst, real[:, ::1] out, int num_threads):
    """out[e, h] = <grad[dst[e], h-block], x[src[e], h-block]> with H = out.shape[1]
    blocks per row.  Indices must be checked (``src`` < len(x), ``dst`` < len(grad))."""
    cdef Py_ssize_t E = src.shape[0]
    cdef Py_ssize_t F = x.shape[1]
    cdef Py_ssize_t H = out.shape[1]
    cdef Py_ssize_t c, nchunks, chunk, e0, e1
    cdef int T
    if dst.shape[0] != E or out.shape[0] != E or grad.shape[1] != F:
        raise ValueError("sddmm_dot: shapes do not match")
    if H < 1 or F % H != 0:
        raise ValueError("sddmm_dot: the row width must be a multiple of out.shape[1]")
    _reset_seen()
    if E == 0:
        return
    if F == 0:
        out[:, :] = 0
        return
    if x.shape[0] == 0 or grad.shape[0] == 0:
        raise IndexError("sddmm_dot: no rows to read")
    # the team splits the edges (there is no row grouping: N = E for the split)
    T = _segment_threads(num_threads, E, E, F, sizeof(real))
    chunk = (E + 8 * T - 1) // (8 * T)
    nchunks = (E + chunk - 1) // chunk
    with nogil:
        if T <= 1:
            _mark_seen()
            _sddmm_block(&grad[0, 0], &x[0, 0], &src[0], &dst[0], H, F // H, &out[0, 0], 0, E)
        else:
            for c in prange(nchunks, num_threads=T, schedule="dynamic", chunksize=1):
                _mark_seen()
                e0 = c * chunk
                e1 = e0 + chunk
                if e1 > E:
                    e1 = E
                _sddmm_block(&grad[0, 0], &x[0, 0], &src[0], &dst[0], H, F // H,
                             &out[0, 0], e0, e1)


cdef void _message_bwd_rows(const real* gp, const real* xp, const index_t* dst,
                            const real* wp, bint weighted, bint need_w,
                            const int64_t* perm, const int64_t* ptr, Py_ssize_t H,
                            Py_ssize_t C, real* gxp, real* gwp,
                            Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """Per source row s: grad_x[s] = sum_e w[e] * g[dst[e]] and, from the same
    g row, grad_w[e, h] = <g[dst[e]], x[s]> per head (each edge e has one source,
    so every grad_w entry is written once)."""
    cdef Py_ssize_t s, k, h, kend
    cdef Py_ssize_t F = H * C
    cdef int64_t e
    cdef const real* grow
    cdef const real* xs
    cdef real* row
    kend = ptr[r1]
    for s in range(r0, r1):
        row = gxp + s * F
        xs = xp + s * F
        memset(row, 0, <size_t>F * sizeof(real))
        for k in range(ptr[s], ptr[s + 1]):
            # two stages, as in _message_rows: the edge's target index, weight and
            # grad_weight slot 2A edges ahead, then its g row A edges ahead
            if k + 2 * CSR_PREFETCH_AHEAD < kend:
                e = perm[k + 2 * CSR_PREFETCH_AHEAD]
                rtx_prefetch(dst + e)
                if weighted:
                    rtx_prefetch(wp + e * H)
                    if need_w:
                        rtx_prefetch_w(gwp + e * H)
            if k + CSR_PREFETCH_AHEAD < kend:
                rtx_prefetch_row(gp + <Py_ssize_t>dst[perm[k + CSR_PREFETCH_AHEAD]] * F,
                                 <size_t>F * sizeof(real))
            e = perm[k]
            grow = gp + <Py_ssize_t>dst[e] * F
            if not weighted:
                _add_row(row, grow, F)
                continue
            for h in range(H):
                _axpy_row(row + h * C, wp[e * H + h], grow + h * C, C)
            if need_w:
                _dot_heads(grow, xs, H, C, gwp + e * H)


cdef void _message_bwd_chunk(const void* job, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    cdef const MessageJob* j = <const MessageJob*>job
    if j.dbl:
        if j.idx64:
            _message_bwd_rows(<const double*>j.a, <const double*>j.b, <const int64_t*>j.idx,
                              <const double*>j.w, j.weighted, j.need_w, j.perm, j.ptr, j.H,
                              j.C, <double*>j.out, <double*>j.out2, r0, r1)
        else:
            _message_bwd_rows(<const double*>j.a, <const double*>j.b, <const int32_t*>j.idx,
                              <const double*>j.w, j.weighted, j.need_w, j.perm, j.ptr, j.H,
                              j.C, <double*>j.out, <double*>j.out2, r0, r1)
    else:
        if j.idx64:
            _message_bwd_rows(<const float*>j.a, <const float*>j.b, <const int64_t*>j.idx,
                              <const float*>j.w, j.weighted, j.need_w, j.perm, j.ptr, j.H,
                              j.C, <float*>j.out, <float*>j.out2, r0, r1)
        else:
            _message_bwd_rows(<const float*>j.a, <const float*>j.b, <const int32_t*>j.idx,
                              <const float*>j.w, j.weighted, j.need_w, j.perm, j.ptr, j.H,
                              j.C, <float*>j.out, <float*>j.out2, r0, r1)


def message_backward_csr(const real[:, ::1] grad, const real[:, ::1] x, const index_t[::1] dst,
                         const real[:, ::1] weight, bint weighted, bint need_weight,
                         const int64_t[::1] perm, const int64_t[::1] ptr,
                         real[:, ::1] grad_x, real[:, ::1] grad_weight, Py_ssize_t heads,
                         int num_threads):
    """Fused backward of message passing over the SOURCE grouping (``perm``/
    ``ptr`` over x's rows): ``grad_x`` (the transpose pass, bitwise equal to
    ``message_csr(grad, dst, ...)``) and, when ``weighted and need_weight``,
    ``grad_weight`` (bitwise equal to ``sddmm_dot``), reading each
    ``grad[dst[e]]`` row once.  ``dst`` must hold indices in ``[0, len(grad))``."""
    cdef Py_ssize_t E = dst.shape[0]
    cdef Py_ssize_t F = x.shape[1]
    cdef Py_ssize_t N = x.shape[0]
    cdef Py_ssize_t H = heads
    cdef const real* wp = NULL
    cdef real* gwp = NULL
    cdef MessageJob job
    cdef int T, rc
    if H < 1 or F % H != 0:
        raise ValueError("message_backward_csr: the row width must be a multiple of heads")
    if grad.shape[1] != F or grad_x.shape[0] != N or grad_x.shape[1] != F or ptr.shape[0] != N + 1:
        raise ValueError("message_backward_csr: shapes do not match")
    if weighted and (weight.shape[0] != E or weight.shape[1] != H):
        raise ValueError("message_backward_csr: weight must be (E, heads)")
    need_weight = need_weight and weighted
    if need_weight and (grad_weight.shape[0] != E or grad_weight.shape[1] != H):
        raise ValueError("message_backward_csr: grad_weight must be (E, heads)")
    _check_grouping(perm, ptr, E, N, "message_backward_csr")
    _reset_seen()
    if N == 0 or F == 0:
        if need_weight and E > 0:
            grad_weight[:, :] = 0
        return
    if E == 0:
        grad_x[:, :] = 0
        return
    if grad.shape[0] == 0:
        raise IndexError("message_backward_csr: grad has no rows to read")
    if weighted:
        wp = &weight[0, 0]
    if need_weight:
        gwp = &grad_weight[0, 0]
    job.a = &grad[0, 0]
    job.b = &x[0, 0]
    job.idx = &dst[0]
    job.idx64 = index_t is int64_t
    job.w = wp
    job.weighted = weighted
    job.need_w = need_weight
    job.perm = &perm[0]
    job.ptr = &ptr[0]
    job.H = H
    job.C = F // H
    job.out = &grad_x[0, 0]
    job.out2 = gwp
    job.dbl = real is double
    T = _segment_threads(num_threads, E, N, F, sizeof(real))
    with nogil:
        rc = _csr_parallel(_message_bwd_chunk, &job, &ptr[0], N, T, CSR_DYNAMIC)
    if rc != 0:
        raise MemoryError("message_backward_csr: out of memory")
