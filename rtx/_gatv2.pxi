# Fused GATv2 attention scores and their gradients, never forming the
# (E, H, C) per-edge sum that PyG's GATv2Conv materialises; and GAT's per-head
# attention dot (head_dot_rows / head_dot_backward) and edge scores from per-node
# logits (gat_scores_rows), at the end of the file.
#
#   z[e, h, c]   = xl[src[e], h, c] + xr[dst[e], h, c] (+ xe[e, h, c])
#   score[e, h]  = sum_c att[h, c] * lrelu(z[e, h, c])
#   gz[e, h, c]  = g[e, h] * att[h, c] * lrelu'(z[e, h, c])      (lrelu'(0) = slope)
#
#   gatv2_scores_csr:      score, over the TARGET grouping (each score written once;
#                          a target's xr row read once, source rows prefetched)
#   gatv2_bwd_dst:         over the TARGET grouping: grad_xr[r] = sum of gz over r's
#                          incoming edges; grad_xe[e] = gz[e]; grad_att partial sums
#                          (in double) per chunk of targets (chunks cut from the data alone, never
#                          from the thread count; the caller adds the chunks in order)
#   gatv2_bwd_src:         over the SOURCE grouping: grad_xl[s] = sum of gz over s's
#                          outgoing edges
#
# Rows are (H*C) wide; every output row / partial is reduced by one thread in
# increasing edge position, so the bits never depend on the thread count.
# Index arrays must come from checked plans (src < len(xl), dst < len(xr)).
#
# ``in_group_order``: the other end's indices come as EdgeIndex's
# ``_in_group_order`` copy (listed as the grouping lists the edges), read in
# order where ``other[perm[k]]`` is one random read per edge; the per-edge rows
# still go through ``perm``.  The same values, so the same bits.  1M random edges
# over 100,000 nodes, 2 threads, old and new builds alternating (6 rounds), ms:
# one head of 64: forward 27.7 -> 22.4, by-target backward 34.2 -> 30.2,
# by-source 27.5 -> 22.2; four heads of 16: 31.1 -> 25.7, 42.5 -> 40.1,
# 32.4 -> 29.6.

cdef enum:
    # Targets + edges per grad_att chunk (the chunk count depends on the data only).
    GATV2_ATT_CHUNK_WORK = 8192
    GATV2_ATT_MAX_CHUNKS = 1024


cdef enum:
    # Channels per stack block of the vectorisable inner loops.
    GATV2_BLOCK = 64


cdef inline void _gatv2_zd(const real* a, const real* b, const real* ee, bint has_e,
                           real slope, real* z, real* d, Py_ssize_t n) noexcept nogil:
    """z = a + b (+ ee), d = lrelu'(z) (1 where z > 0, else slope; a NaN gets slope
    and stays NaN through z * d), for n channels.  Plain loops the compiler
    vectorises (the select becomes a blend: a scalar branch on random signs
    mispredicts half the time, 6x slower measured)."""
    cdef Py_ssize_t j
    if has_e:
        for j in range(n):
            z[j] = a[j] + b[j] + ee[j]
    else:
        for j in range(n):
            z[j] = a[j] + b[j]
    for j in range(n):
        d[j] = 1 if z[j] > 0 else slope


# Two-stage prefetch for grouping position k: the index entry and the per-edge
# row (scores / gradients) of position k + 2A, then the feature row of position
# k + A, whose index is in cache by then (A = CSR_PREFETCH_AHEAD).  Without the
# first stage the index load itself misses and stalls the loop (most of the
# forward's time at E = 1M, measured with perf).
#
# In C and always inlined: as a Cython ``cdef inline`` function (a void function
# of loads and prefetches only, too big for GCC's early inliner) GCC 12 took it
# for pure and deleted every call, so the GATv2 kernels ran with no prefetch at
# all (E = 10^6, one head of 64 channels, 1 thread: the forward 321 ms, 106 ms with
# its prefetches; tests/project/test_kernel_prefetch.py checks the built code).
cdef extern from *:
    """
    /* other: int64 (idx64) or int32 indices, listed by edge (other[perm[k]]) or,
       by_k, in the grouping's order (other[k]: read in order, nothing to fetch);
       rows: row_bytes per row */
    RTX_ALWAYS_INLINE void rtx_gatv2_prefetch(const void* other, int idx64, int by_k,
                                              const int64_t* perm, Py_ssize_t k,
                                              Py_ssize_t kend, Py_ssize_t A,
                                              const void* rows, size_t row_bytes,
                                              const void* per_edge, size_t edge_bytes) {
        if (k + 2 * A < kend) {
            int64_t e2 = perm[k + 2 * A];
            if (!by_k)
                rtx_prefetch(idx64 ? (const void*)((const int64_t*)other + e2)
                                   : (const void*)((const int32_t*)other + e2));
            rtx_prefetch((const char*)per_edge + e2 * (int64_t)edge_bytes);
        }
        if (k + A < kend) {
            int64_t e1 = by_k ? k + A : perm[k + A];
            int64_t o = idx64 ? ((const int64_t*)other)[e1] : ((const int32_t*)other)[e1];
            rtx_prefetch_row((const char*)rows + o * (int64_t)row_bytes, row_bytes);
        }
    }
    """
    void rtx_gatv2_prefetch(const void* other, int idx64, int by_k, const int64_t* perm,
                            Py_ssize_t k, Py_ssize_t kend, Py_ssize_t A, const void* rows,
                            size_t row_bytes, const void* per_edge,
                            size_t edge_bytes) noexcept nogil


cdef inline void _gatv2_terms(const real* a, const real* b, const real* ee, bint has_e,
                              const real* att, real slope, real* t, real* d,
                              Py_ssize_t n) noexcept nogil:
    """t[j] = att[j] * lrelu(a[j] + b[j] (+ ee[j])) for n channels (``d``: scratch)."""
    cdef Py_ssize_t j
    _gatv2_zd(a, b, ee, has_e, slope, t, d, n)
    for j in range(n):
        t[j] = att[j] * (t[j] * d[j])


cdef inline real _gatv2_sum(const real* t, Py_ssize_t n) noexcept nogil:
    """sum of t[0:n] in a fixed order: four partial sums (t[j] into sum j % 4),
    then (s0 + s1) + (s2 + s3)."""
    cdef real s0 = 0
    cdef real s1 = 0
    cdef real s2 = 0
    cdef real s3 = 0
    cdef Py_ssize_t j = 0
    while j + 4 <= n:
        s0 = s0 + t[j]
        s1 = s1 + t[j + 1]
        s2 = s2 + t[j + 2]
        s3 = s3 + t[j + 3]
        j = j + 4
    if j < n:
        s0 = s0 + t[j]
    if j + 1 < n:
        s1 = s1 + t[j + 1]
    if j + 2 < n:
        s2 = s2 + t[j + 2]
    return (s0 + s1) + (s2 + s3)


cdef inline void _gatv2_edge_scores(const real* a, const real* b, const real* ee, bint has_e,
                                    const real* att, Py_ssize_t H, Py_ssize_t C, real slope,
                                    real* out) noexcept nogil:
    """out[h] = sum_c att[h, c] * lrelu(a + b (+ ee))[h, c] for one edge, every head:
    the terms of GATV2_BLOCK channels at a time, each head's sum over its C
    terms (c % 4 partial sums within the head, so the bits do not depend on
    the blocking)."""
    cdef real t[GATV2_BLOCK]
    cdef real d[GATV2_BLOCK]
    cdef real s0, s1, s2, s3
    cdef Py_ssize_t h, c0, n, j, lo, hi
    if C <= GATV2_BLOCK:
        # whole heads per block
        h = 0
        while h < H:
            n = GATV2_BLOCK // C
            if n > H - h:
                n = H - h
            _gatv2_terms(a + h * C, b + h * C, ee + h * C if has_e else NULL, has_e,
                         att + h * C, slope, t, d, n * C)
            for j in range(n):
                out[h + j] = _gatv2_sum(t + j * C, C)
            h = h + n
        return
    for h in range(H):  # long heads: blocks of one head, partial sums carried over
        s0 = 0
        s1 = 0
        s2 = 0
        s3 = 0
        c0 = 0
        while c0 < C:
            n = C - c0 if C - c0 < GATV2_BLOCK else GATV2_BLOCK
            lo = h * C + c0
            _gatv2_terms(a + lo, b + lo, ee + lo if has_e else NULL, has_e, att + lo, slope,
                         t, d, n)
            j = 0
            while j + 4 <= n:
                s0 = s0 + t[j]
                s1 = s1 + t[j + 1]
                s2 = s2 + t[j + 2]
                s3 = s3 + t[j + 3]
                j = j + 4
            hi = n - j  # < 4 left: only in the head's last block (GATV2_BLOCK % 4 == 0)
            if hi > 0:
                s0 = s0 + t[j]
            if hi > 1:
                s1 = s1 + t[j + 1]
            if hi > 2:
                s2 = s2 + t[j + 2]
            c0 = c0 + n
        out[h] = (s0 + s1) + (s2 + s3)


cdef void _gatv2_fwd_rows(const real* xl, const real* xr, const real* xe, bint has_e,
                          const real* att, const index_t* sp, bint by_k,
                          const int64_t* perm, const int64_t* ptr, Py_ssize_t H,
                          Py_ssize_t C, real slope, real* out, Py_ssize_t r0,
                          Py_ssize_t r1) noexcept nogil:
    """Targets [r0, r1) of the target grouping: each target's xr row is read once
    for all its incoming edges; the source rows are prefetched ahead.  ``by_k``:
    ``sp`` lists the sources in the grouping's order (``sp[k]`` for the edge
    ``perm[k]``)."""
    cdef Py_ssize_t r, k, kend
    cdef Py_ssize_t F = H * C
    cdef int64_t e
    cdef const real* a
    cdef const real* b
    cdef const real* ee = NULL
    kend = ptr[r1]
    for r in range(r0, r1):
        b = xr + r * F
        for k in range(ptr[r], ptr[r + 1]):
            rtx_gatv2_prefetch(sp, index_t is int64_t, by_k, perm, k, kend, CSR_PREFETCH_AHEAD,
                               xl, <size_t>F * sizeof(real), out, H * sizeof(real))
            e = perm[k]
            a = xl + <Py_ssize_t>sp[k if by_k else e] * F
            if has_e:
                ee = xe + e * F
            _gatv2_edge_scores(a, b, ee, has_e, att, H, C, slope, out + e * H)


cdef _check_gatv2_shapes(Py_ssize_t nl, Py_ssize_t F, Py_ssize_t nr, Py_ssize_t Fr,
                         Py_ssize_t H, Py_ssize_t C, Py_ssize_t E, Py_ssize_t ns,
                         Py_ssize_t nd, bint has_e, Py_ssize_t xe0, Py_ssize_t xe1, str op):
    if H < 1 or C < 0 or H * C != F or Fr != F:
        raise ValueError(f"{op}: xl, xr must be (rows, H*C) with att (H, C)")
    if ns != E or nd != E:
        raise ValueError(f"{op}: src and dst must have one entry per edge")
    if has_e and (xe0 != E or xe1 != F):
        raise ValueError(f"{op}: xe must be (E, H*C)")
    if E > 0 and F > 0 and (nl == 0 or nr == 0):
        raise IndexError(f"{op}: no rows to gather from")


cdef void _gatv2_bwd_rows(const real* gp, const real* xl, const real* xr, const real* xe,
                          bint has_e, const real* att, const index_t* other, bint by_dst,
                          bint by_k, const int64_t* perm, const int64_t* ptr, Py_ssize_t H,
                          Py_ssize_t C, real slope, real* grow, bint need_row,
                          real* gxe, bint need_e, double* part, bint need_att,
                          Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """Rows [r0, r1) of one grouping.  ``by_dst``: row r is a target (its own
    features are xr[r], the other end xl[other[e]]); else a source (xl[r], and
    xr[other[e]]); ``by_k``: ``other`` in the grouping's order (``other[k]``).
    Accumulates gz into grow[r] (need_row), writes gxe[e] (need_e) and adds
    g * lrelu(z) into ``part`` (need_att, zeroed by the caller).  z is summed as
    in the forward (xl term, xr term, xe term)."""
    cdef real z[GATV2_BLOCK]
    cdef real d[GATV2_BLOCK]
    cdef Py_ssize_t r, k, h, j, c0, n, o, kend
    cdef Py_ssize_t F = H * C
    cdef int64_t e
    cdef const real* own
    cdef const real* oth
    cdef const real* lrow
    cdef const real* rrow
    cdef real* row = NULL
    cdef real gh
    kend = ptr[r1]
    for r in range(r0, r1):
        if by_dst:
            own = xr + r * F
        else:
            own = xl + r * F
        if need_row:
            row = grow + r * F
            memset(row, 0, <size_t>F * sizeof(real))
        for k in range(ptr[r], ptr[r + 1]):
            rtx_gatv2_prefetch(other, index_t is int64_t, by_k, perm, k, kend,
                               CSR_PREFETCH_AHEAD, xl if by_dst else xr,
                               <size_t>F * sizeof(real), gp, H * sizeof(real))
            e = perm[k]
            oth = (xl if by_dst else xr) + <Py_ssize_t>other[k if by_k else e] * F
            lrow = oth if by_dst else own
            rrow = own if by_dst else oth
            for h in range(H):
                gh = gp[e * H + h]
                c0 = 0
                while c0 < C:
                    n = C - c0 if C - c0 < GATV2_BLOCK else GATV2_BLOCK
                    o = h * C + c0
                    _gatv2_zd(lrow + o, rrow + o, xe + e * F + o if has_e else NULL, has_e,
                              slope, z, d, n)
                    if need_att:
                        for j in range(n):
                            part[o + j] = part[o + j] + <double>(gh * (z[j] * d[j]))
                    for j in range(n):
                        z[j] = gh * att[o + j] * d[j]  # gz
                    if need_row:
                        for j in range(n):
                            row[o + j] = row[o + j] + z[j]
                    if need_e:
                        for j in range(n):
                            gxe[e * F + o + j] = z[j]
                    c0 = c0 + n


# ------------------------------------------------------------ the CSR driver
# One job struct for the three passes; each row function casts it back and
# dispatches on the dtype and the index width, then runs on ``_csr_parallel``
# (rtx/_csr.pxi): rows [r0, r1) of one grouping, each output row written by
# one call, so the bits never depend on the thread count or the split.

ctypedef struct Gatv2Job:
    const void* grad    # backward: g (E, H)
    const void* xl
    const void* xr
    const void* xe
    bint has_e
    const void* att
    const void* other   # forward / by-target backward: src; by-source backward: dst
    bint idx64
    bint by_k           # other in the grouping's order (other[k], not other[perm[k]])
    bint by_dst
    const int64_t* perm
    const int64_t* ptr
    Py_ssize_t H
    Py_ssize_t C
    double slope
    void* out           # forward: scores; backward: grad_xr (by target) / grad_xl
    bint need_row
    void* gxe
    bint need_e
    double* part
    bint need_att
    const Py_ssize_t* bounds  # by-target backward: the grad_att chunks' target ranges
    bint dbl


cdef void _gatv2_fwd_chunk(const void* job, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    cdef const Gatv2Job* j = <const Gatv2Job*>job
    if j.dbl:
        if j.idx64:
            _gatv2_fwd_rows(<const double*>j.xl, <const double*>j.xr, <const double*>j.xe,
                            j.has_e, <const double*>j.att, <const int64_t*>j.other, j.by_k,
                            j.perm, j.ptr, j.H, j.C, <double>j.slope, <double*>j.out, r0, r1)
        else:
            _gatv2_fwd_rows(<const double*>j.xl, <const double*>j.xr, <const double*>j.xe,
                            j.has_e, <const double*>j.att, <const int32_t*>j.other, j.by_k,
                            j.perm, j.ptr, j.H, j.C, <double>j.slope, <double*>j.out, r0, r1)
    else:
        if j.idx64:
            _gatv2_fwd_rows(<const float*>j.xl, <const float*>j.xr, <const float*>j.xe,
                            j.has_e, <const float*>j.att, <const int64_t*>j.other, j.by_k,
                            j.perm, j.ptr, j.H, j.C, <float>j.slope, <float*>j.out, r0, r1)
        else:
            _gatv2_fwd_rows(<const float*>j.xl, <const float*>j.xr, <const float*>j.xe,
                            j.has_e, <const float*>j.att, <const int32_t*>j.other, j.by_k,
                            j.perm, j.ptr, j.H, j.C, <float>j.slope, <float*>j.out, r0, r1)


cdef void _gatv2_bwd_range(const Gatv2Job* j, double* part, Py_ssize_t r0,
                           Py_ssize_t r1) noexcept nogil:
    if j.dbl:
        if j.idx64:
            _gatv2_bwd_rows(<const double*>j.grad, <const double*>j.xl, <const double*>j.xr,
                            <const double*>j.xe, j.has_e, <const double*>j.att,
                            <const int64_t*>j.other, j.by_dst, j.by_k, j.perm, j.ptr, j.H,
                            j.C, <double>j.slope, <double*>j.out, j.need_row, <double*>j.gxe,
                            j.need_e, part, j.need_att, r0, r1)
        else:
            _gatv2_bwd_rows(<const double*>j.grad, <const double*>j.xl, <const double*>j.xr,
                            <const double*>j.xe, j.has_e, <const double*>j.att,
                            <const int32_t*>j.other, j.by_dst, j.by_k, j.perm, j.ptr, j.H,
                            j.C, <double>j.slope, <double*>j.out, j.need_row, <double*>j.gxe,
                            j.need_e, part, j.need_att, r0, r1)
    else:
        if j.idx64:
            _gatv2_bwd_rows(<const float*>j.grad, <const float*>j.xl, <const float*>j.xr,
                            <const float*>j.xe, j.has_e, <const float*>j.att,
                            <const int64_t*>j.other, j.by_dst, j.by_k, j.perm, j.ptr, j.H,
                            j.C, <float>j.slope, <float*>j.out, j.need_row, <float*>j.gxe,
                            j.need_e, part, j.need_att, r0, r1)
        else:
            _gatv2_bwd_rows(<const float*>j.grad, <const float*>j.xl, <const float*>j.xr,
                            <const float*>j.xe, j.has_e, <const float*>j.att,
                            <const int32_t*>j.other, j.by_dst, j.by_k, j.perm, j.ptr, j.H,
                            j.C, <float>j.slope, <float*>j.out, j.need_row, <float*>j.gxe,
                            j.need_e, part, j.need_att, r0, r1)


cdef void _gatv2_bwd_src_chunk(const void* job, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    _gatv2_bwd_range(<const Gatv2Job*>job, NULL, r0, r1)


cdef void _gatv2_bwd_dst_chunk(const void* job, Py_ssize_t c0, Py_ssize_t c1) noexcept nogil:
    """The by-target pass runs over grad_att CHUNKS [c0, c1) (the driver's rows
    are chunks here): chunk c is targets [bounds[c], bounds[c + 1]) with its own
    partial row part[c] (cut from the data alone, never from the thread count)."""
    cdef const Gatv2Job* j = <const Gatv2Job*>job
    cdef Py_ssize_t c
    cdef Py_ssize_t F = j.H * j.C
    for c in range(c0, c1):
        _gatv2_bwd_range(j, j.part + c * F if j.need_att else NULL, j.bounds[c],
                         j.bounds[c + 1])


cdef void _gatv2_job(Gatv2Job* job, const void* xl, const void* xr, const void* xe,
                     bint has_e, const void* att, const void* other, bint idx64,
                     const int64_t* perm, const int64_t* ptr, Py_ssize_t H, Py_ssize_t C,
                     double slope, bint dbl) noexcept nogil:
    memset(job, 0, sizeof(Gatv2Job))
    job.xl = xl
    job.xr = xr
    job.xe = xe
    job.has_e = has_e
    job.att = att
    job.other = other
    job.idx64 = idx64
    job.perm = perm
    job.ptr = ptr
    job.H = H
    job.C = C
    job.slope = slope
    job.dbl = dbl


def gatv2_scores_csr(const real[:, ::1] xl, const real[:, ::1] xr, const real[:, ::1] att,
                     const index_t[::1] src, const real[:, ::1] xe, bint has_e,
                     double negative_slope, const int64_t[::1] perm, const int64_t[::1] ptr,
                     real[:, ::1] out, int num_threads, bint in_group_order=False):
    """out[e, h] = sum_c att[h, c] * lrelu(xl[src[e], h-block] + xr[dst[e], h-block]
    (+ xe[e, h-block]))[c], over the TARGET grouping (``perm``/``ptr`` over xr's
    rows; each score written once).  ``xl`` (N_src, H*C), ``xr`` (N_dst, H*C),
    ``att`` (H, C), ``out`` (E, H); ``xe`` (E, H*C), read only when ``has_e``.
    ``in_group_order``: ``src`` lists the sources in the grouping's order
    (``src[k]`` for the edge ``perm[k]``: EdgeIndex's ``_in_group_order("dst")``),
    read in order; the same bits."""
    cdef Py_ssize_t E = out.shape[0]
    cdef Py_ssize_t H = att.shape[0]
    cdef Py_ssize_t C = att.shape[1]
    cdef Py_ssize_t F = xl.shape[1]
    cdef Py_ssize_t N = xr.shape[0]
    cdef Gatv2Job job
    cdef int T, rc
    if out.shape[1] != H:
        raise ValueError("gatv2_scores_csr: out must be (E, H)")
    _check_gatv2_shapes(xl.shape[0], F, N, xr.shape[1], H, C, E, src.shape[0], E, has_e,
                        xe.shape[0], xe.shape[1], "gatv2_scores_csr")
    _check_grouping(perm, ptr, E, N, "gatv2_scores_csr")
    _reset_seen()
    if E == 0:
        return
    if F == 0:
        out[:, :] = 0
        return
    _gatv2_job(&job, &xl[0, 0], &xr[0, 0], &xe[0, 0] if has_e else NULL, has_e, &att[0, 0],
               &src[0], index_t is int64_t, &perm[0], &ptr[0], H, C, negative_slope,
               real is double)
    job.out = &out[0, 0]
    job.by_k = in_group_order
    T = _segment_threads(num_threads, E, N, F, sizeof(real))
    with nogil:
        rc = _csr_parallel(_gatv2_fwd_chunk, &job, &ptr[0], N, T, CSR_DYNAMIC)
    if rc != 0:
        raise MemoryError("gatv2_scores_csr: out of memory")


def gatv2_att_chunks(Py_ssize_t E, Py_ssize_t N):
    #: -> int
    """How many grad_att partial rows ``gatv2_bwd_dst`` fills for E edges over N
    targets (a function of the data size only)."""
    cdef Py_ssize_t n = (E + N) // GATV2_ATT_CHUNK_WORK
    if n > GATV2_ATT_MAX_CHUNKS:
        n = GATV2_ATT_MAX_CHUNKS
    if n > N:
        n = N
    return n if n > 0 else 1


def gatv2_bwd_dst(const real[:, ::1] grad, const real[:, ::1] xl, const real[:, ::1] xr,
                  const real[:, ::1] att, const index_t[::1] src, const real[:, ::1] xe,
                  bint has_e, double negative_slope, const int64_t[::1] perm,
                  const int64_t[::1] ptr, real[:, ::1] grad_xr, bint need_xr,
                  real[:, ::1] grad_xe, bint need_e, double[:, ::1] att_part, bint need_att,
                  int num_threads, bint in_group_order=False):
    """Backward over the TARGET grouping (``perm``/``ptr`` over xr's rows):
    ``grad_xr`` (need_xr), ``grad_xe`` (E, H*C; need_e, only with has_e) and, when
    need_att, ``att_part`` (float64, gatv2_att_chunks(E, N) rows of H*C): per chunk
    of targets the sum of g * lrelu(z) (accumulated in double), to be added up in
    row order by the caller.  ``in_group_order`` as in ``gatv2_scores_csr``."""
    cdef Py_ssize_t E = grad.shape[0]
    cdef Py_ssize_t H = att.shape[0]
    cdef Py_ssize_t C = att.shape[1]
    cdef Py_ssize_t F = xl.shape[1]
    cdef Py_ssize_t N = xr.shape[0]
    cdef Py_ssize_t c, nchunks
    cdef Py_ssize_t* bounds
    cdef int64_t* cptr
    cdef Gatv2Job job
    cdef int T, rc
    need_e = need_e and has_e
    if grad.shape[1] != H:
        raise ValueError("gatv2_bwd_dst: grad must be (E, H)")
    _check_gatv2_shapes(xl.shape[0], F, N, xr.shape[1], H, C, E, src.shape[0], E, has_e,
                        xe.shape[0], xe.shape[1], "gatv2_bwd_dst")
    _check_grouping(perm, ptr, E, N, "gatv2_bwd_dst")
    nchunks = gatv2_att_chunks(E, N)
    if need_xr and (grad_xr.shape[0] != N or grad_xr.shape[1] != F):
        raise ValueError("gatv2_bwd_dst: grad_xr must be (N_dst, H*C)")
    if need_e and (grad_xe.shape[0] != E or grad_xe.shape[1] != F):
        raise ValueError("gatv2_bwd_dst: grad_xe must be (E, H*C)")
    if need_att and (att_part.shape[0] != nchunks or att_part.shape[1] != F):
        raise ValueError("gatv2_bwd_dst: att_part must be (gatv2_att_chunks(E, N), H*C)")
    _reset_seen()
    if need_att:
        att_part[:, :] = 0
    if N == 0 or F == 0:
        return
    if E == 0:
        if need_xr:
            grad_xr[:, :] = 0
        return
    _gatv2_job(&job, &xl[0, 0], &xr[0, 0], &xe[0, 0] if has_e else NULL, has_e, &att[0, 0],
               &src[0], index_t is int64_t, &perm[0], &ptr[0], H, C, negative_slope,
               real is double)
    job.grad = &grad[0, 0]
    job.by_dst = True
    job.by_k = in_group_order
    job.out = &grad_xr[0, 0] if need_xr else NULL
    job.need_row = need_xr
    job.gxe = &grad_xe[0, 0] if need_e else NULL
    job.need_e = need_e
    job.part = &att_part[0, 0] if need_att else NULL
    job.need_att = need_att
    bounds = <Py_ssize_t*>malloc(<size_t>(nchunks + 1) * sizeof(Py_ssize_t))
    cptr = <int64_t*>malloc(<size_t>(nchunks + 1) * sizeof(int64_t))
    if bounds == NULL or cptr == NULL:
        free(bounds)
        free(cptr)
        raise MemoryError("gatv2_bwd_dst: out of memory")
    T = _segment_threads(num_threads, E, N, F, sizeof(real))
    with nogil:
        _csr_split(&ptr[0], N, nchunks, bounds)
        for c in range(nchunks + 1):
            cptr[c] = ptr[bounds[c]] + bounds[c]  # the chunks' work, for the driver's balance
        job.bounds = bounds
        rc = _csr_parallel(_gatv2_bwd_dst_chunk, &job, cptr, nchunks, T, CSR_DYNAMIC)
    free(bounds)
    free(cptr)
    if rc != 0:
        raise MemoryError("gatv2_bwd_dst: out of memory")


def gatv2_bwd_src(const real[:, ::1] grad, const real[:, ::1] xl, const real[:, ::1] xr,
                  const real[:, ::1] att, const index_t[::1] dst, const real[:, ::1] xe,
                  bint has_e, double negative_slope, const int64_t[::1] perm,
                  const int64_t[::1] ptr, real[:, ::1] grad_xl, int num_threads,
                  bint in_group_order=False):
    """Backward over the SOURCE grouping (``perm``/``ptr`` over xl's rows):
    ``grad_xl[s]`` = sum of gz over the edges leaving s.  ``in_group_order``:
    ``dst`` lists the targets in this grouping's order (``dst[k]`` for the edge
    ``perm[k]``: ``_in_group_order("src")``); the same bits."""
    cdef Py_ssize_t E = grad.shape[0]
    cdef Py_ssize_t H = att.shape[0]
    cdef Py_ssize_t C = att.shape[1]
    cdef Py_ssize_t F = xl.shape[1]
    cdef Py_ssize_t N = xl.shape[0]
    cdef Gatv2Job job
    cdef int T, rc
    if grad.shape[1] != H:
        raise ValueError("gatv2_bwd_src: grad must be (E, H)")
    _check_gatv2_shapes(N, F, xr.shape[0], xr.shape[1], H, C, E, E, dst.shape[0], has_e,
                        xe.shape[0], xe.shape[1], "gatv2_bwd_src")
    _check_grouping(perm, ptr, E, N, "gatv2_bwd_src")
    if grad_xl.shape[0] != N or grad_xl.shape[1] != F:
        raise ValueError("gatv2_bwd_src: grad_xl must be (N_src, H*C)")
    _reset_seen()
    if N == 0 or F == 0:
        return
    if E == 0:
        grad_xl[:, :] = 0
        return
    _gatv2_job(&job, &xl[0, 0], &xr[0, 0], &xe[0, 0] if has_e else NULL, has_e, &att[0, 0],
               &dst[0], index_t is int64_t, &perm[0], &ptr[0], H, C, negative_slope,
               real is double)
    job.grad = &grad[0, 0]
    job.by_dst = False
    job.by_k = in_group_order
    job.out = &grad_xl[0, 0]
    job.need_row = True
    T = _segment_threads(num_threads, E, N, F, sizeof(real))
    with nogil:
        rc = _csr_parallel(_gatv2_bwd_src_chunk, &job, &ptr[0], N, T, CSR_DYNAMIC)
    if rc != 0:
        raise MemoryError("gatv2_bwd_src: out of memory")


# ------------------------------------------------------------------ head_dot
# out[n, h] = sum_c x[n, h, c] * att[h, c]: GAT's per-node attention logits from
# the transformed features (PyG's ``(x * att).sum(-1)``), one pass over x and no
# [N, H, C] product.  Each value is _common.pxi's _dot (eight lane sums; float32
# heads of 8k channels four at a time, _dot_heads), where one running sum per
# head is a chain of dependent adds.  Rows are cut into chunks of
# HEAD_DOT_CHUNK_ROWS (from the data size alone); each row is written by one
# thread, and grad_att's partial sums are one float64 row per chunk, added in
# chunk order by the caller, so the bits never depend on the thread count.  The
# backward's row loop is C over non-aliasing rows (``restrict``: vectorised, in
# _vmath.pxi's SIMD copies).
cdef extern from *:
    """
    /* head_dot_backward's rows [r0, r1) (see _head_dot_bwd_chunk): grad_x (gx not
       NULL) and the float64 sums of g * x into pp (not NULL), in increasing row
       order; compiled in _vmath.pxi's SIMD copies (no FMA: the same bits in each) */
    #if defined(__GNUC__) || defined(__clang__)
    /* four doubles at a time (_common.pxi's rtx_v4d) */
    static inline __attribute__((always_inline)) rtx_v4d rtx_hd_ld4_f64(const double* p) {
        rtx_v4d v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    static inline __attribute__((always_inline)) rtx_v4d rtx_hd_ld4_f32(const float* p) {
        rtx_v4f v;
        memcpy(&v, p, sizeof v);
        return __builtin_convertvector(v, rtx_v4d);
    }
    /* grad_att's sums when 16 | C: whole rows cut into blocks of 16 columns (one
       head's), two blocks at a time, their sums in registers down the rows (a sum
       kept in memory waits for its own store every row) */
    #define RTX_HD_VEC_BLOCKS(T, SFX)                                                 \\
        if (C % 16 == 0) {                                                            \\
            const Py_ssize_t nb = F / 16;                                             \\
            for (Py_ssize_t b = 0; b < nb; b += 2) {                                  \\
                const Py_ssize_t b1 = b + 1 < nb ? b + 1 : b;                         \\
                const Py_ssize_t h0 = b * 16 / C, h1 = b1 * 16 / C;                   \\
                rtx_v4d a0[4], a1[4];                                                 \\
                for (int k = 0; k < 4; k++) {                                         \\
                    a0[k] = rtx_hd_ld4_f64(pp + b * 16 + 4 * k);                      \\
                    a1[k] = rtx_hd_ld4_f64(pp + b1 * 16 + 4 * k);                     \\
                }                                                                     \\
                for (Py_ssize_t r = r0; r < r1; r++) {                                \\
                    const double g0 = (double)g[r * H + h0];                          \\
                    const double g1 = (double)g[r * H + h1];                          \\
                    const T* x0 = x + r * F + b * 16;                                 \\
                    const T* x1 = x + r * F + b1 * 16;                                \\
                    for (int k = 0; k < 4; k++) {                                     \\
                        a0[k] += g0 * rtx_hd_ld4_##SFX(x0 + 4 * k);                   \\
                        a1[k] += g1 * rtx_hd_ld4_##SFX(x1 + 4 * k);                   \\
                    }                                                                 \\
                }                                                                     \\
                /* (a lone last block ran twice, from the same start: one copy) */  \\
                for (int k = 0; k < 4; k++) {                                         \\
                    memcpy(pp + b * 16 + 4 * k, &a0[k], sizeof(rtx_v4d));             \\
                    memcpy(pp + b1 * 16 + 4 * k, &a1[k], sizeof(rtx_v4d));            \\
                }                                                                     \\
            }                                                                         \\
            return;                                                                   \\
        }
    #else
    #define RTX_HD_VEC_BLOCKS(T, SFX)
    #endif
    #define RTX_HD_BWD_ROWS(T, SFX)                                                   \\
    RTX_SIMD_CLONES                                                                   \\
    static void rtx_head_dot_bwd_rows_##SFX(const T* __restrict g,                    \\
            const T* __restrict x, const T* __restrict att, T* __restrict gx,         \\
            double* __restrict pp, Py_ssize_t H, Py_ssize_t C, Py_ssize_t r0,         \\
            Py_ssize_t r1) {                                                          \\
        const Py_ssize_t F = H * C;                                                   \\
        if (gx) {                                                                     \\
            for (Py_ssize_t r = r0; r < r1; r++) {                                    \\
                for (Py_ssize_t h = 0; h < H; h++) {                                  \\
                    const T gv = g[r * H + h];                                        \\
                    const T* ah = att + h * C;                                        \\
                    T* gr = gx + r * F + h * C;                                       \\
                    for (Py_ssize_t c = 0; c < C; c++) gr[c] = gv * ah[c];            \\
                }                                                                     \\
            }                                                                         \\
        }                                                                             \\
        if (!pp) return;                                                              \\
        RTX_HD_VEC_BLOCKS(T, SFX)                                                     \\
        for (Py_ssize_t r = r0; r < r1; r++) {                                        \\
            for (Py_ssize_t h = 0; h < H; h++) {                                      \\
                const double gd = (double)g[r * H + h];                               \\
                const T* xr = x + r * F + h * C;                                      \\
                double* ph = pp + h * C;                                              \\
                for (Py_ssize_t c = 0; c < C; c++) ph[c] += gd * (double)xr[c];       \\
            }                                                                         \\
        }                                                                             \\
    }
    RTX_HD_BWD_ROWS(float, f32)
    RTX_HD_BWD_ROWS(double, f64)
    """
    void rtx_head_dot_bwd_rows_f32(const float* g, const float* x, const float* att,
                                   float* gx, double* pp, Py_ssize_t H, Py_ssize_t C,
                                   Py_ssize_t r0, Py_ssize_t r1) noexcept nogil
    void rtx_head_dot_bwd_rows_f64(const double* g, const double* x, const double* att,
                                   double* gx, double* pp, Py_ssize_t H, Py_ssize_t C,
                                   Py_ssize_t r0, Py_ssize_t r1) noexcept nogil

cdef enum:
    HEAD_DOT_CHUNK_ROWS = 2048


def head_dot_chunks(Py_ssize_t N):
    #: -> int
    """Rows of the grad_att partials ``head_dot_backward`` fills for N rows."""
    if N <= 0:
        return 1
    return (N + HEAD_DOT_CHUNK_ROWS - 1) // HEAD_DOT_CHUNK_ROWS


cdef void _head_dot_chunk(const real* x, const real* att, real* out, Py_ssize_t H,
                          Py_ssize_t C, Py_ssize_t N, Py_ssize_t ch) noexcept nogil:
    """Chunk ``ch``'s rows of out[n, h] = sum_c x[n, h*C + c] * att[h, c]."""
    cdef Py_ssize_t r
    cdef Py_ssize_t r1 = (ch + 1) * HEAD_DOT_CHUNK_ROWS
    if r1 > N:
        r1 = N
    for r in range(ch * HEAD_DOT_CHUNK_ROWS, r1):
        _dot_heads(x + r * H * C, att, H, C, out + r * H)


cdef void _head_dot_bwd_chunk(const real* g, const real* x, const real* att, real* gx,
                              bint need_x, double* part, bint need_att, Py_ssize_t H,
                              Py_ssize_t C, Py_ssize_t N, Py_ssize_t ch) noexcept nogil:
    """Chunk ``ch``'s rows: grad_x (need_x) and, into ``part`` (the chunk's row of
    H*C float64 sums, zeroed here), sum of g[n, h] * x[n, h, c] in increasing row
    order."""
    cdef Py_ssize_t F = H * C
    cdef Py_ssize_t r0 = ch * HEAD_DOT_CHUNK_ROWS
    cdef Py_ssize_t r1 = r0 + HEAD_DOT_CHUNK_ROWS
    cdef double* pp = part + ch * F if need_att else NULL
    if r1 > N:
        r1 = N
    if need_att:
        memset(pp, 0, <size_t>F * sizeof(double))
    if real is float:
        rtx_head_dot_bwd_rows_f32(g, x, att, gx if need_x else NULL, pp, H, C, r0, r1)
    else:
        rtx_head_dot_bwd_rows_f64(g, x, att, gx if need_x else NULL, pp, H, C, r0, r1)


def head_dot_rows(const real[:, ::1] x, const real[:, ::1] att, real[:, ::1] out,
                  int num_threads):
    """``out[n, h] = sum_c x[n, h*C + c] * att[h, c]``: x (N, H*C), att (H, C), out
    (N, H); each sum in _dot's order."""
    cdef Py_ssize_t N = x.shape[0]
    cdef Py_ssize_t H = att.shape[0]
    cdef Py_ssize_t C = att.shape[1]
    cdef Py_ssize_t ch, nch
    cdef int T
    if x.shape[1] != H * C or out.shape[0] != N or out.shape[1] != H:
        raise ValueError("head_dot_rows: x must be (N, H*C), att (H, C) and out (N, H)")
    _reset_seen()
    if N == 0 or H == 0:
        return
    if C == 0:
        out[:, :] = 0
        return
    nch = head_dot_chunks(N)
    # the segment kernels' team-size rule, at most one thread per chunk
    T = _team_size(_segment_threads(num_threads, 0, N, H * C, sizeof(real)), nch)
    with nogil:
        if T <= 1:
            _mark_seen()
            for ch in range(nch):
                _head_dot_chunk(&x[0, 0], &att[0, 0], &out[0, 0], H, C, N, ch)
        else:
            for ch in prange(nch, num_threads=T, schedule="static"):
                _mark_seen()
                _head_dot_chunk(&x[0, 0], &att[0, 0], &out[0, 0], H, C, N, ch)


def head_dot_backward(const real[:, ::1] grad, const real[:, ::1] x, const real[:, ::1] att,
                      real[:, ::1] grad_x, bint need_x, double[:, ::1] att_part,
                      bint need_att, int num_threads):
    """``grad_x[n, h*C + c] = grad[n, h] * att[h, c]`` (need_x; (N, H*C)) and, when
    need_att, ``att_part`` (float64, head_dot_chunks(N) rows of H*C): per chunk of
    rows the sum of grad[n, h] * x[n, h*C + c], to be added up in row order by the
    caller."""
    cdef Py_ssize_t N = x.shape[0]
    cdef Py_ssize_t H = att.shape[0]
    cdef Py_ssize_t C = att.shape[1]
    cdef Py_ssize_t F = H * C
    cdef Py_ssize_t ch, nch = head_dot_chunks(x.shape[0])
    cdef real* gx = NULL
    cdef double* part = NULL
    cdef int T
    if x.shape[1] != F or grad.shape[0] != N or grad.shape[1] != H:
        raise ValueError("head_dot_backward: grad must be (N, H), x (N, H*C), att (H, C)")
    if need_x and (grad_x.shape[0] != N or grad_x.shape[1] != F):
        raise ValueError("head_dot_backward: grad_x must be (N, H*C)")
    if need_att and (att_part.shape[0] != nch or att_part.shape[1] != F):
        raise ValueError("head_dot_backward: att_part must be (head_dot_chunks(N), H*C)")
    _reset_seen()
    if F == 0:
        return
    if N == 0:
        if need_att:
            att_part[:, :] = 0
        return
    if need_x:
        gx = &grad_x[0, 0]
    if need_att:
        part = &att_part[0, 0]
    T = _team_size(_segment_threads(num_threads, 0, N, F, sizeof(real)), nch)
    with nogil:
        if T <= 1:
            _mark_seen()
            for ch in range(nch):
                _head_dot_bwd_chunk(&grad[0, 0], &x[0, 0], &att[0, 0], gx, need_x, part,
                                    need_att, H, C, N, ch)
        else:
            for ch in prange(nch, num_threads=T, schedule="static"):
                _mark_seen()
                _head_dot_bwd_chunk(&grad[0, 0], &x[0, 0], &att[0, 0], gx, need_x, part,
                                    need_att, H, C, N, ch)


# ------------------------------------------------------------------ GAT's scores
# gat_scores_rows: GAT's (v1) edge scores from its per-node logits, in one pass
# over the edges where the composed ops take four (two row gathers, an add, a
# leaky ReLU) and two [E, H] temporaries:
#
#   out[e, h] = lrelu(a_src[src[e], h] + a_dst[dst[e], h])
#
# the same two IEEE operations per value as index_select + add + leaky_relu (the
# slope rounded to the dtype first, as leaky_relu does; x > 0 ? x : x * slope,
# a NaN kept), so the same bits.  The edges are cut into fixed chunks; each
# value is written once.

cdef enum:
    GAT_SCORES_CHUNK = 8192


cdef inline void _gat_score_heads(const real* s, const real* d, real k, Py_ssize_t H,
                                  real* o) noexcept nogil:
    cdef Py_ssize_t h
    cdef real z
    for h in range(H):
        z = s[h] + d[h]
        # a bitwise select, no branch (random signs mispredict: 3x slower)
        if real is float:
            o[h] = rtx_self(z > 0, z, z * k)
        else:
            o[h] = rtx_seld(z > 0, z, z * k)


cdef void _gat_scores_block(const real* a_src, const real* a_dst, const index_t* src,
                            const index_t* dst, real k, Py_ssize_t H, real* out,
                            Py_ssize_t e0, Py_ssize_t e1) noexcept nogil:
    cdef Py_ssize_t e
    cdef const real* s
    cdef const real* d
    for e in range(e0, e1):
        if e + CSR_PREFETCH_AHEAD < e1:
            rtx_prefetch(a_src + <Py_ssize_t>src[e + CSR_PREFETCH_AHEAD] * H)
            rtx_prefetch(a_dst + <Py_ssize_t>dst[e + CSR_PREFETCH_AHEAD] * H)
        s = a_src + <Py_ssize_t>src[e] * H
        d = a_dst + <Py_ssize_t>dst[e] * H
        _gat_score_heads(s, d, k, H, out + e * H)


def gat_scores_rows(const real[:, ::1] a_src, const real[:, ::1] a_dst,
                    const index_t[::1] src, const index_t[::1] dst, double negative_slope,
                    real[:, ::1] out, int num_threads):
    """``out[e, h] = leaky_relu(a_src[src[e], h] + a_dst[dst[e], h], negative_slope)``
    for ``a_src`` (N_src, H), ``a_dst`` (N_dst, H), ``out`` (E, H).  ``src`` and
    ``dst`` must come from checked plans (``src < N_src``, ``dst < N_dst``)."""
    cdef Py_ssize_t E = src.shape[0]
    cdef Py_ssize_t H = a_src.shape[1]
    cdef Py_ssize_t c, nch, e0, e1
    cdef real k = <real>negative_slope
    cdef int T
    if dst.shape[0] != E or out.shape[0] != E or a_dst.shape[1] != H or out.shape[1] != H:
        raise ValueError("gat_scores_rows: a_src (N_src, H), a_dst (N_dst, H), src and dst "
                         "of E entries and out (E, H) do not match")
    _reset_seen()
    if E == 0 or H == 0:
        return
    if a_src.shape[0] == 0 or a_dst.shape[0] == 0:
        raise IndexError("gat_scores_rows: no rows to read")
    nch = (E + GAT_SCORES_CHUNK - 1) // GAT_SCORES_CHUNK
    T = _team_size(_segment_threads(num_threads, E, E, H, sizeof(real)), nch)
    with nogil:
        if T <= 1:
            _mark_seen()
            _gat_scores_block(&a_src[0, 0], &a_dst[0, 0], &src[0], &dst[0], k, H,
                              &out[0, 0], 0, E)
        else:
            for c in prange(nch, num_threads=T, schedule="static"):
                _mark_seen()
                e0 = c * GAT_SCORES_CHUNK
                e1 = e0 + GAT_SCORES_CHUNK
                if e1 > E:
                    e1 = E
                _gat_scores_block(&a_src[0, 0], &a_dst[0, 0], &src[0], &dst[0], k, H,
                                  &out[0, 0], e0, e1)
