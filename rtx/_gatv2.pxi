# Fused GATv2 attention scores and their gradients, never forming the
# (E, H, C) per-edge sum that PyG's GATv2Conv materialises.
#
#   z[e, h, c]   = xl[src[e], h, c] + xr[dst[e], h, c] (+ xe[e, h, c])
#   score[e, h]  = sum_c att[h, c] * lrelu(z[e, h, c])
#   gz[e, h, c]  = g[e, h] * att[h, c] * lrelu'(z[e, h, c])      (lrelu'(0) = slope)
#
#   gatv2_scores_edges:    score, edge-parallel (each score written once)
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

cdef enum:
    # Targets + edges per grad_att chunk (the chunk count depends on the data only).
    GATV2_ATT_CHUNK_WORK = 8192
    GATV2_ATT_MAX_CHUNKS = 1024


cdef inline real _gatv2_edge(const real* a, const real* b, const real* ee, bint has_e,
                             const real* att, Py_ssize_t C, real slope) noexcept nogil:
    """sum_c att[c] * lrelu(a[c] + b[c] (+ ee[c])) for one edge and head."""
    cdef Py_ssize_t c
    cdef real v
    cdef real acc = 0
    for c in range(C):
        v = a[c] + b[c]
        if has_e:
            v = v + ee[c]
        if not v > 0:
            v = v * slope
        acc = acc + att[c] * v
    return acc


cdef void _gatv2_fwd_block(const real* xl, const real* xr, const real* xe, bint has_e,
                           const real* att, const index_t* sp, const index_t* dp,
                           Py_ssize_t H, Py_ssize_t C, real slope, real* out,
                           Py_ssize_t e0, Py_ssize_t e1) noexcept nogil:
    cdef Py_ssize_t e, h
    cdef Py_ssize_t F = H * C
    cdef const real* a
    cdef const real* b
    cdef const real* ee = NULL
    for e in range(e0, e1):
        a = xl + <Py_ssize_t>sp[e] * F
        b = xr + <Py_ssize_t>dp[e] * F
        if has_e:
            ee = xe + e * F
        for h in range(H):
            out[e * H + h] = _gatv2_edge(a + h * C, b + h * C,
                                         ee + h * C if has_e else NULL, has_e,
                                         att + h * C, C, slope)


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


def gatv2_scores_edges(const real[:, ::1] xl, const real[:, ::1] xr, const real[:, ::1] att,
                       const index_t[::1] src, const index_t[::1] dst, const real[:, ::1] xe,
                       bint has_e, double negative_slope, real[:, ::1] out, int num_threads):
    """out[e, h] = sum_c att[h, c] * lrelu(xl[src[e], h-block] + xr[dst[e], h-block]
    (+ xe[e, h-block]))[c].  ``xl`` (N_src, H*C), ``xr`` (N_dst, H*C), ``att``
    (H, C), ``out`` (E, H); ``xe`` (E, H*C), read only when ``has_e``."""
    cdef Py_ssize_t E = out.shape[0]
    cdef Py_ssize_t H = att.shape[0]
    cdef Py_ssize_t C = att.shape[1]
    cdef Py_ssize_t F = xl.shape[1]
    cdef Py_ssize_t c, nchunks, chunk, e0, e1
    cdef const real* xep = NULL
    cdef real slope = <real>negative_slope
    cdef int T
    if out.shape[1] != H:
        raise ValueError("gatv2_scores_edges: out must be (E, H)")
    _check_gatv2_shapes(xl.shape[0], F, xr.shape[0], xr.shape[1], H, C, E, src.shape[0],
                        dst.shape[0], has_e, xe.shape[0], xe.shape[1], "gatv2_scores_edges")
    _reset_seen()
    if E == 0:
        return
    if F == 0:
        out[:, :] = 0
        return
    if has_e:
        xep = &xe[0, 0]
    T = _segment_threads(num_threads, E, 0, F, sizeof(real))
    T = _team_size(T, E)
    chunk = (E + 8 * T - 1) // (8 * T)
    nchunks = (E + chunk - 1) // chunk
    with nogil:
        if T <= 1:
            _mark_seen()
            _gatv2_fwd_block(&xl[0, 0], &xr[0, 0], xep, has_e, &att[0, 0], &src[0], &dst[0],
                             H, C, slope, &out[0, 0], 0, E)
        else:
            for c in prange(nchunks, num_threads=T, schedule="dynamic", chunksize=1):
                _mark_seen()
                e0 = c * chunk
                e1 = e0 + chunk
                if e1 > E:
                    e1 = E
                _gatv2_fwd_block(&xl[0, 0], &xr[0, 0], xep, has_e, &att[0, 0], &src[0],
                                 &dst[0], H, C, slope, &out[0, 0], e0, e1)


cdef void _gatv2_bwd_rows(const real* gp, const real* xl, const real* xr, const real* xe,
                          bint has_e, const real* att, const index_t* other, bint by_dst,
                          const int64_t* perm, const int64_t* ptr, Py_ssize_t H,
                          Py_ssize_t C, real slope, real* grow, bint need_row,
                          real* gxe, bint need_e, double* part, bint need_att,
                          Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """Rows [r0, r1) of one grouping.  ``by_dst``: row r is a target (its own
    features are xr[r], the other end xl[other[e]]); else a source (xl[r], and
    xr[other[e]]).  Accumulates gz into grow[r] (need_row), writes gxe[e]
    (need_e) and adds g * lrelu(z) into ``part`` (need_att, zeroed by the caller)."""
    cdef Py_ssize_t r, k, h, c, idx, kend
    cdef Py_ssize_t F = H * C
    cdef int64_t e
    cdef const real* own
    cdef const real* oth
    cdef real* row = NULL
    cdef real gh, v, d
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
            if k + CSR_PREFETCH_AHEAD < kend:
                rtx_prefetch_row((xl if by_dst else xr)
                                 + <Py_ssize_t>other[perm[k + CSR_PREFETCH_AHEAD]] * F,
                                 <size_t>F * sizeof(real))
            e = perm[k]
            if by_dst:
                oth = xl + <Py_ssize_t>other[e] * F
            else:
                oth = xr + <Py_ssize_t>other[e] * F
            for h in range(H):
                gh = gp[e * H + h]
                for c in range(C):
                    idx = h * C + c
                    # the same sum as the forward: xl term first, then xr, then xe
                    if by_dst:
                        v = oth[idx] + own[idx]
                    else:
                        v = own[idx] + oth[idx]
                    if has_e:
                        v = v + xe[e * F + idx]
                    d = 1
                    if not v > 0:
                        d = slope
                    if need_att:
                        part[idx] = part[idx] + <double>(gh * (v * d))
                    v = gh * att[idx] * d
                    if need_row:
                        row[idx] = row[idx] + v
                    if need_e:
                        gxe[e * F + idx] = v


def gatv2_att_chunks(Py_ssize_t E, Py_ssize_t N):
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
                  int num_threads):
    """Backward over the TARGET grouping (``perm``/``ptr`` over xr's rows):
    ``grad_xr`` (need_xr), ``grad_xe`` (E, H*C; need_e, only with has_e) and, when
    need_att, ``att_part`` (float64, gatv2_att_chunks(E, N) rows of H*C): per chunk
    of targets the sum of g * lrelu(z) (accumulated in double), to be added up in
    row order by the caller."""
    cdef Py_ssize_t E = grad.shape[0]
    cdef Py_ssize_t H = att.shape[0]
    cdef Py_ssize_t C = att.shape[1]
    cdef Py_ssize_t F = xl.shape[1]
    cdef Py_ssize_t N = xr.shape[0]
    cdef Py_ssize_t c, nchunks
    cdef Py_ssize_t* bounds
    cdef const real* xep = NULL
    cdef real* gxr = NULL
    cdef real* gxe = NULL
    cdef double* pp = NULL
    cdef real slope = <real>negative_slope
    cdef int T
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
    if has_e:
        xep = &xe[0, 0]
    if need_xr:
        gxr = &grad_xr[0, 0]
    if need_e:
        gxe = &grad_xe[0, 0]
    if need_att:
        pp = &att_part[0, 0]
    T = _segment_threads(num_threads, E, N, F, sizeof(real))
    T = _team_size(T, nchunks)
    bounds = <Py_ssize_t*>malloc(<size_t>(nchunks + 1) * sizeof(Py_ssize_t))
    if bounds == NULL:
        raise MemoryError("gatv2_bwd_dst: out of memory")
    _csr_split(&ptr[0], N, nchunks, bounds)
    with nogil:
        if T <= 1:
            _mark_seen()
            for c in range(nchunks):
                _gatv2_bwd_rows(&grad[0, 0], &xl[0, 0], &xr[0, 0], xep, has_e, &att[0, 0],
                                &src[0], True, &perm[0], &ptr[0], H, C, slope, gxr, need_xr,
                                gxe, need_e, pp + c * F if need_att else NULL, need_att,
                                bounds[c], bounds[c + 1])
        else:
            for c in prange(nchunks, num_threads=T, schedule="dynamic", chunksize=1):
                _mark_seen()
                _gatv2_bwd_rows(&grad[0, 0], &xl[0, 0], &xr[0, 0], xep, has_e, &att[0, 0],
                                &src[0], True, &perm[0], &ptr[0], H, C, slope, gxr, need_xr,
                                gxe, need_e, pp + c * F if need_att else NULL, need_att,
                                bounds[c], bounds[c + 1])
    free(bounds)


def gatv2_bwd_src(const real[:, ::1] grad, const real[:, ::1] xl, const real[:, ::1] xr,
                  const real[:, ::1] att, const index_t[::1] dst, const real[:, ::1] xe,
                  bint has_e, double negative_slope, const int64_t[::1] perm,
                  const int64_t[::1] ptr, real[:, ::1] grad_xl, int num_threads):
    """Backward over the SOURCE grouping (``perm``/``ptr`` over xl's rows):
    ``grad_xl[s]`` = sum of gz over the edges leaving s."""
    cdef Py_ssize_t E = grad.shape[0]
    cdef Py_ssize_t H = att.shape[0]
    cdef Py_ssize_t C = att.shape[1]
    cdef Py_ssize_t F = xl.shape[1]
    cdef Py_ssize_t N = xl.shape[0]
    cdef Py_ssize_t c, nchunks
    cdef Py_ssize_t* bounds
    cdef const real* xep = NULL
    cdef real slope = <real>negative_slope
    cdef int T
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
    if has_e:
        xep = &xe[0, 0]
    T = _segment_threads(num_threads, E, N, F, sizeof(real))
    nchunks = _csr_nchunks(T, N)
    bounds = <Py_ssize_t*>malloc(<size_t>(nchunks + 1) * sizeof(Py_ssize_t))
    if bounds == NULL:
        raise MemoryError("gatv2_bwd_src: out of memory")
    with nogil:
        if T <= 1 or nchunks <= 1:
            _mark_seen()
            _gatv2_bwd_rows(&grad[0, 0], &xl[0, 0], &xr[0, 0], xep, has_e, &att[0, 0],
                            &dst[0], False, &perm[0], &ptr[0], H, C, slope, &grad_xl[0, 0],
                            True, NULL, False, NULL, False, 0, N)
        else:
            _csr_split(&ptr[0], N, nchunks, bounds)
            for c in prange(nchunks, num_threads=T, schedule="dynamic", chunksize=1):
                _mark_seen()
                _gatv2_bwd_rows(&grad[0, 0], &xl[0, 0], &xr[0, 0], xep, has_e, &att[0, 0],
                                &dst[0], False, &perm[0], &ptr[0], H, C, slope,
                                &grad_xl[0, 0], True, NULL, False, NULL, False,
                                bounds[c], bounds[c + 1])
    free(bounds)
