# Fused message passing over a CSR grouping (_csr.pxi's driver), never materialising
# the (E, H, C) message tensor.
#
#   message_csr:  out[r] = sum over k in [ptr[r], ptr[r+1]) of
#                 w[e, h] * x[other[e], h*C:(h+1)*C]   (e = perm[k]; w = 1 if unweighted)
#     forward:    grouping by target (dst), other = src, x = node features
#     grad_x:     grouping by source (src), other = dst, x = grad_out (the transpose pass)
#   sddmm_dot:    gw[e, h] = <g[dst[e], h-block], x[src[e], h-block]>  (grad of the weight;
#                 _common.pxi's _dot order, eight-lane sums; _dot_heads computes
#                 four heads' at a time for float32 with 8 | C, and a lone head
#                 (one-head rows) by its own tree, the same bits)
#
# Each output row is reduced by one thread in increasing edge position, so the
# bits never depend on the thread count or on whether the grouping was cached.
#
# ``in_group_order``: ``other`` (forward) / ``dst`` (backward) is given as the
# grouping lists the edges (``other[perm[k]]`` stored at k: EdgeIndex's cached
# ``_in_group_order`` copy), so that index is read in order instead of one
# random read per edge; the edge's weight and grad_weight slot still go
# through ``perm`` (unweighted, ``perm`` is not read at all).  The same values,
# so the same bits.  1M edges over 100,000 nodes, H = 4, C = 16, 2 threads,
# alternating in one process: forward over unsorted edges 14.8 -> 11.6 ms,
# backward 20.5-21.3 -> 18.1-19.3 ms (sorted targets: 20.1-20.3 -> 17.7-18.1 ms).


# float32's row loops in C, twice: once for baseline x86-64 (SSE2) and once
# compiled for AVX2 (eight float lanes), picked at run time by the CPU
# (``rtx_msg_avx2``: an explicit test, not an ifunc, so ASan builds keep it).
# The same operations in the same order per output value -- the adds and
# multiplies of _axpy_row / _add_row (no FMA: the AVX2 copy is not built for
# it), and _dot_heads' eight lane sums added ((0+1)+(2+3))+((4+5)+(6+7)) -- so
# both copies give the Cython loops' bits (float64 keeps those loops).
cdef extern from *:
    """
    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) \\
        && RTX_HAVE_DOT_HEADS
    #include <immintrin.h>
    #define RTX_MSG_HAVE_AVX2 1
    #define RTX_MSG_AVX2_FN __attribute__((target("avx2")))
    static int rtx_msg_avx2(void) {
        static int ok = -1;
        if (ok < 0) {
            __builtin_cpu_init();
            ok = __builtin_cpu_supports("avx2") ? 1 : 0;
        }
        return ok;
    }
    /* The backward's per-edge work, one pass over the edge's g row (each 8-lane
       load of g feeds both):
         row[h*c + j] += w[h] * g[h*c + j]    (grad_x: a multiply, then an add,
                                               as _axpy_row)
         out[h] = rtx_dot_heads_f32(g, x, nh, c)'s value (grad_weight)
       One 8-lane register per head holds the dot's lanes: lane l sums
       g[j] * x[j] for j = l, l + 8, ... in increasing j; the lanes are then added
       pairwise, ((0+1)+(2+3))+((4+5)+(6+7)), four heads at a time by shuffles.
       The same operations per value as the two loops it replaced (the axpy, then
       the dots: each loaded the g row), so the same bits.  1M edges over 100,000
       nodes, four heads of 16, 2 threads, the kernel alone, old and new builds
       alternating (8 rounds): 17.1 -> 13.8 ms (random targets), 17.5 -> 13.6 ms
       (sorted). */
    /* eight lanes of one head: r += a * g, and q + g * x returned */
    RTX_MSG_AVX2_FN
    static inline __m256 rtx__axpy_dot_step(float* r, const float* g, const float* x,
                                            __m256 a, __m256 q) {
        const __m256 gv = _mm256_loadu_ps(g);
        _mm256_storeu_ps(r, _mm256_add_ps(_mm256_loadu_ps(r), _mm256_mul_ps(a, gv)));
        return _mm256_add_ps(q, _mm256_mul_ps(gv, _mm256_loadu_ps(x)));
    }
    RTX_MSG_AVX2_FN
    static inline __m256 rtx__axpy_dot8_avx2(float* row, const float* g, const float* x,
                                             float w, Py_ssize_t c) {
        const __m256 a = _mm256_set1_ps(w);
        __m256 acc = _mm256_setzero_ps();
        for (Py_ssize_t j = 0; j < c; j += 8)
            acc = rtx__axpy_dot_step(row + j, g + j, x + j, a, acc);
        return acc;
    }
    /* (x_01, x_23, y_01, y_23 | x_45, x_67, y_45, y_67): one level of the tree */
    RTX_MSG_AVX2_FN
    static inline __m256 rtx__pair_sums8(__m256 x, __m256 y) {
        return _mm256_add_ps(_mm256_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm256_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
    }
    RTX_MSG_AVX2_FN
    static inline void rtx_axpy_dot_heads_avx2(float* row, const float* g, const float* x,
                                               const float* w, Py_ssize_t nh, Py_ssize_t c,
                                               float* out) {
        for (Py_ssize_t h = 0; h < nh; h += 4) {
            float* r0 = row + h * c;
            const float* g0 = g + h * c;
            const float* x0 = x + h * c;
            __m256 q0, q1, q2, q3;
            if (nh - h == 1) {
                /* one head left (every call for one-head rows): its lanes' tree
                   alone, without three heads of zeros */
                q0 = rtx__axpy_dot8_avx2(r0, g0, x0, w[h], c);
                __m128 p = _mm_hadd_ps(_mm256_castps256_ps128(q0),
                                       _mm256_extractf128_ps(q0, 1));
                p = _mm_hadd_ps(p, p);
                out[h] = _mm_cvtss_f32(_mm_add_ss(p, _mm_movehdup_ps(p)));
                return;
            }
            if (nh - h >= 4) {
                /* four heads side by side in one loop (each head's lanes still in
                   increasing j): four independent chains */
                const __m256 a0 = _mm256_set1_ps(w[h]), a1 = _mm256_set1_ps(w[h + 1]);
                const __m256 a2 = _mm256_set1_ps(w[h + 2]), a3 = _mm256_set1_ps(w[h + 3]);
                q0 = q1 = q2 = q3 = _mm256_setzero_ps();
                for (Py_ssize_t j = 0; j < c; j += 8) {
                    q0 = rtx__axpy_dot_step(r0 + j, g0 + j, x0 + j, a0, q0);
                    q1 = rtx__axpy_dot_step(r0 + c + j, g0 + c + j, x0 + c + j, a1, q1);
                    q2 = rtx__axpy_dot_step(r0 + 2 * c + j, g0 + 2 * c + j, x0 + 2 * c + j,
                                            a2, q2);
                    q3 = rtx__axpy_dot_step(r0 + 3 * c + j, g0 + 3 * c + j, x0 + 3 * c + j,
                                            a3, q3);
                }
            } else {    /* two or three heads left; the rest zeros */
                q0 = rtx__axpy_dot8_avx2(r0, g0, x0, w[h], c);
                q1 = rtx__axpy_dot8_avx2(r0 + c, g0 + c, x0 + c, w[h + 1], c);
                q2 = nh - h > 2 ? rtx__axpy_dot8_avx2(r0 + 2 * c, g0 + 2 * c, x0 + 2 * c,
                                                      w[h + 2], c)
                                : _mm256_setzero_ps();
                q3 = _mm256_setzero_ps();
            }
            /* (q0_0123, q1_0123, q2_0123, q3_0123 | the same of lanes 4567) */
            __m256 t = rtx__pair_sums8(rtx__pair_sums8(q0, q1), rtx__pair_sums8(q2, q3));
            __m128 r = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
            if (h + 4 <= nh) {
                _mm_storeu_ps(out + h, r);
            } else {
                float tmp[4];
                _mm_storeu_ps(tmp, r);
                for (int k = 0; h + k < nh; k++) out[h + k] = tmp[k];
            }
        }
    }
    #else
    #define RTX_MSG_HAVE_AVX2 0
    #define RTX_MSG_AVX2_FN
    static int rtx_msg_avx2(void) { return 0; }
    #endif

    /* rtx_axpy_dot_heads_avx2's values for the baseline copy (CPUs without AVX2):
       the axpy, then the dots, each loading the g row */
    static inline void rtx_axpy_dot_heads_f32(float* row, const float* g, const float* x,
                                              const float* w, Py_ssize_t nh, Py_ssize_t c,
                                              float* out) {
        for (Py_ssize_t h = 0; h < nh; h++) {
            const float a = w[h];
            for (Py_ssize_t j = 0; j < c; j++) row[h * c + j] += a * g[h * c + j];
        }
        rtx_dot_heads_f32(g, x, nh, c, out);
    }

    /* _message_rows for float32 (see there) */
    #define RTX_MSG_FWD_ROWS(NAME, IT, ATTR)                                          \\
    ATTR static void NAME(const float* xp, const void* other_v, int by_k,             \\
                          const float* wp, int weighted, const int64_t* perm,          \\
                          const int64_t* ptr, Py_ssize_t H, Py_ssize_t C, float* op,   \\
                          Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t A) {                \\
        const IT* other = (const IT*)other_v;                                         \\
        const Py_ssize_t F = H * C;                                                   \\
        const int64_t kend = ptr[r1];                                                 \\
        for (Py_ssize_t r = r0; r < r1; r++) {                                        \\
            float* row = op + r * F;                                                  \\
            memset(row, 0, (size_t)F * sizeof(float));                                \\
            for (int64_t k = ptr[r]; k < ptr[r + 1]; k++) {                           \\
                if (k + 2 * A < kend && (!by_k || weighted)) {                        \\
                    int64_t e2 = perm[k + 2 * A];                                     \\
                    if (!by_k) rtx_prefetch(other + e2);                              \\
                    if (weighted) rtx_prefetch(wp + e2 * H);                          \\
                }                                                                     \\
                if (k + A < kend)                                                     \\
                    rtx_prefetch_row(xp + (Py_ssize_t)other[by_k ? k + A : perm[k + A]] \\
                                     * F, (size_t)F * sizeof(float));                 \\
                const float* xs = xp + (Py_ssize_t)other[by_k ? k : perm[k]] * F;     \\
                if (!weighted) {                                                      \\
                    for (Py_ssize_t j = 0; j < F; j++) row[j] += xs[j];               \\
                } else {                                                              \\
                    const int64_t e = perm[k];                                        \\
                    for (Py_ssize_t h = 0; h < H; h++) {                              \\
                        const float a = wp[e * H + h];                                \\
                        float* d = row + h * C;                                       \\
                        const float* sx = xs + h * C;                                 \\
                        for (Py_ssize_t j = 0; j < C; j++) d[j] += a * sx[j];         \\
                    }                                                                 \\
                }                                                                     \\
            }                                                                         \\
        }                                                                             \\
    }

    /* _message_bwd_rows for float32 (see there); AXDOT: an edge's grad_x axpy and
       grad_weight dots, when grad_weight is asked for */
    #define RTX_MSG_BWD_ROWS(NAME, IT, ATTR, AXDOT)                                   \\
    ATTR static void NAME(const float* gp, const float* xp, const void* dst_v,        \\
                          int by_k, const float* wp, int weighted, int need_w,         \\
                          const int64_t* perm, const int64_t* ptr, Py_ssize_t H,       \\
                          Py_ssize_t C, float* gxp, float* gwp, Py_ssize_t r0,         \\
                          Py_ssize_t r1, Py_ssize_t A) {                               \\
        const IT* dst = (const IT*)dst_v;                                             \\
        const Py_ssize_t F = H * C;                                                   \\
        const int64_t kend = ptr[r1];                                                 \\
        for (Py_ssize_t s = r0; s < r1; s++) {                                        \\
            float* row = gxp + s * F;                                                 \\
            const float* xs = xp + s * F;                                             \\
            memset(row, 0, (size_t)F * sizeof(float));                                \\
            for (int64_t k = ptr[s]; k < ptr[s + 1]; k++) {                           \\
                if (k + 2 * A < kend && (!by_k || weighted)) {                        \\
                    int64_t e2 = perm[k + 2 * A];                                     \\
                    if (!by_k) rtx_prefetch(dst + e2);                                \\
                    if (weighted) {                                                   \\
                        rtx_prefetch(wp + e2 * H);                                    \\
                        if (need_w) rtx_prefetch_w(gwp + e2 * H);                     \\
                    }                                                                 \\
                }                                                                     \\
                if (k + A < kend)                                                     \\
                    rtx_prefetch_row(gp + (Py_ssize_t)dst[by_k ? k + A : perm[k + A]] \\
                                     * F, (size_t)F * sizeof(float));                 \\
                const float* grow = gp + (Py_ssize_t)dst[by_k ? k : perm[k]] * F;     \\
                if (!weighted) {                                                      \\
                    for (Py_ssize_t j = 0; j < F; j++) row[j] += grow[j];             \\
                    continue;                                                         \\
                }                                                                     \\
                const int64_t e = perm[k];                                            \\
                if (need_w) {                                                         \\
                    AXDOT(row, grow, xs, wp + e * H, H, C, gwp + e * H);              \\
                    continue;                                                         \\
                }                                                                     \\
                for (Py_ssize_t h = 0; h < H; h++) {                                  \\
                    const float a = wp[e * H + h];                                    \\
                    float* d = row + h * C;                                           \\
                    const float* sg = grow + h * C;                                   \\
                    for (Py_ssize_t j = 0; j < C; j++) d[j] += a * sg[j];             \\
                }                                                                     \\
            }                                                                         \\
        }                                                                             \\
    }

    RTX_MSG_FWD_ROWS(rtx_msg_fwd_rows_i32, int32_t, )
    RTX_MSG_FWD_ROWS(rtx_msg_fwd_rows_i64, int64_t, )
    RTX_MSG_BWD_ROWS(rtx_msg_bwd_rows_i32, int32_t, , rtx_axpy_dot_heads_f32)
    RTX_MSG_BWD_ROWS(rtx_msg_bwd_rows_i64, int64_t, , rtx_axpy_dot_heads_f32)
    #if RTX_MSG_HAVE_AVX2
    RTX_MSG_FWD_ROWS(rtx_msg_fwd_rows_i32_avx2, int32_t, RTX_MSG_AVX2_FN)
    RTX_MSG_FWD_ROWS(rtx_msg_fwd_rows_i64_avx2, int64_t, RTX_MSG_AVX2_FN)
    RTX_MSG_BWD_ROWS(rtx_msg_bwd_rows_i32_avx2, int32_t, RTX_MSG_AVX2_FN, rtx_axpy_dot_heads_avx2)
    RTX_MSG_BWD_ROWS(rtx_msg_bwd_rows_i64_avx2, int64_t, RTX_MSG_AVX2_FN, rtx_axpy_dot_heads_avx2)
    #else
    #define rtx_msg_fwd_rows_i32_avx2 rtx_msg_fwd_rows_i32
    #define rtx_msg_fwd_rows_i64_avx2 rtx_msg_fwd_rows_i64
    #define rtx_msg_bwd_rows_i32_avx2 rtx_msg_bwd_rows_i32
    #define rtx_msg_bwd_rows_i64_avx2 rtx_msg_bwd_rows_i64
    #endif
    typedef void (*rtx_msg_fwd_fn)(const float*, const void*, int, const float*, int,
                                   const int64_t*, const int64_t*, Py_ssize_t, Py_ssize_t,
                                   float*, Py_ssize_t, Py_ssize_t, Py_ssize_t);
    typedef void (*rtx_msg_bwd_fn)(const float*, const float*, const void*, int,
                                   const float*, int, int, const int64_t*, const int64_t*,
                                   Py_ssize_t, Py_ssize_t, float*, float*, Py_ssize_t,
                                   Py_ssize_t, Py_ssize_t);
    /* The C row loops for float32 rows of C channels per head over int64 (idx64)
       or int32 indices, their AVX2 copy when avx2 is asked for and the CPU has
       it; NULL unless C % 8 == 0 (the dots' lanes): the Cython loops run then. */
    static rtx_msg_fwd_fn rtx_msg_fwd_rows(Py_ssize_t C, int idx64, int avx2) {
        if (!(RTX_HAVE_DOT_HEADS && C % 8 == 0))
            return NULL;
        avx2 = avx2 && rtx_msg_avx2();
        if (idx64)
            return avx2 ? rtx_msg_fwd_rows_i64_avx2 : rtx_msg_fwd_rows_i64;
        return avx2 ? rtx_msg_fwd_rows_i32_avx2 : rtx_msg_fwd_rows_i32;
    }
    static rtx_msg_bwd_fn rtx_msg_bwd_rows(Py_ssize_t C, int idx64, int avx2) {
        if (!(RTX_HAVE_DOT_HEADS && C % 8 == 0))
            return NULL;
        avx2 = avx2 && rtx_msg_avx2();
        if (idx64)
            return avx2 ? rtx_msg_bwd_rows_i64_avx2 : rtx_msg_bwd_rows_i64;
        return avx2 ? rtx_msg_bwd_rows_i32_avx2 : rtx_msg_bwd_rows_i32;
    }
    """
    int rtx_msg_avx2() noexcept nogil
    int RTX_MSG_HAVE_AVX2
    ctypedef void (*rtx_msg_fwd_fn)(const float* xp, const void* other, int by_k,
                                    const float* wp, int weighted, const int64_t* perm,
                                    const int64_t* ptr, Py_ssize_t H, Py_ssize_t C,
                                    float* op, Py_ssize_t r0, Py_ssize_t r1,
                                    Py_ssize_t A) noexcept nogil
    ctypedef void (*rtx_msg_bwd_fn)(const float* gp, const float* xp, const void* dst,
                                    int by_k, const float* wp, int weighted, int need_w,
                                    const int64_t* perm, const int64_t* ptr, Py_ssize_t H,
                                    Py_ssize_t C, float* gxp, float* gwp, Py_ssize_t r0,
                                    Py_ssize_t r1, Py_ssize_t A) noexcept nogil
    rtx_msg_fwd_fn rtx_msg_fwd_rows(Py_ssize_t C, int idx64, int avx2) noexcept nogil
    rtx_msg_bwd_fn rtx_msg_bwd_rows(Py_ssize_t C, int idx64, int avx2) noexcept nogil


cdef bint _msg_use_avx2 = True


def message_avx2(enable=None):
    #: enable: bool | None
    #: -> bool
    """Whether float32 message passing may run its AVX2 row loops (on a CPU that
    has AVX2: ``message_avx2_available()``); ``enable`` sets it and the previous
    setting is returned.  The SSE2 loops give the same bits (tests)."""
    global _msg_use_avx2
    old = _msg_use_avx2
    if enable is not None:
        _msg_use_avx2 = bool(enable)
    return old


def message_avx2_available():
    #: -> bool
    """Whether this build has the AVX2 row loops and this CPU runs them."""
    return bool(RTX_MSG_HAVE_AVX2 and rtx_msg_avx2())


cdef void _message_rows(const real* xp, const index_t* other, bint by_k, const real* wp,
                        bint weighted, const int64_t* perm, const int64_t* ptr,
                        Py_ssize_t H, Py_ssize_t C, real* op, Py_ssize_t r0,
                        Py_ssize_t r1) noexcept nogil:
    """``by_k``: ``other`` is in the grouping's order (other[k] for the edge at
    position k), not the edges' (other[perm[k]]), so it is read in order."""
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
            if k + 2 * CSR_PREFETCH_AHEAD < kend and (weighted or not by_k):
                e = perm[k + 2 * CSR_PREFETCH_AHEAD]
                if not by_k:
                    rtx_prefetch(other + e)
                if weighted:
                    rtx_prefetch(wp + e * H)
            if k + CSR_PREFETCH_AHEAD < kend:
                e = k + CSR_PREFETCH_AHEAD if by_k else perm[k + CSR_PREFETCH_AHEAD]
                rtx_prefetch_row(xp + <Py_ssize_t>other[e] * F, <size_t>F * sizeof(real))
            xs = xp + <Py_ssize_t>other[k if by_k else perm[k]] * F
            if not weighted:
                _add_row(row, xs, F)
                continue
            e = perm[k]
            if H == 1:
                _axpy_row(row, wp[e], xs, F)
            else:
                for h in range(H):
                    _axpy_row(row + h * C, wp[e * H + h], xs + h * C, C)


ctypedef struct MessageJob:
    const void* a       # forward: x; backward: grad
    const void* b       # backward: x
    const void* idx     # forward: other; backward: dst
    bint idx64
    bint by_k           # idx in the grouping's order (idx[k]), not the edges' (idx[e])
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
    rtx_msg_fwd_fn c_fwd    # forward: the C row loops (rtx_msg_fwd_rows), or NULL
    rtx_msg_bwd_fn c_bwd    # backward: the same (rtx_msg_bwd_rows), or NULL


cdef void _message_chunk(const void* job, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    cdef const MessageJob* j = <const MessageJob*>job
    if j.dbl:
        if j.idx64:
            _message_rows(<const double*>j.a, <const int64_t*>j.idx, j.by_k,
                          <const double*>j.w, j.weighted, j.perm, j.ptr, j.H, j.C,
                          <double*>j.out, r0, r1)
        else:
            _message_rows(<const double*>j.a, <const int32_t*>j.idx, j.by_k,
                          <const double*>j.w, j.weighted, j.perm, j.ptr, j.H, j.C,
                          <double*>j.out, r0, r1)
    elif j.c_fwd != NULL:
        j.c_fwd(<const float*>j.a, j.idx, j.by_k, <const float*>j.w, j.weighted, j.perm,
                j.ptr, j.H, j.C, <float*>j.out, r0, r1, CSR_PREFETCH_AHEAD)
    else:
        if j.idx64:
            _message_rows(<const float*>j.a, <const int64_t*>j.idx, j.by_k,
                          <const float*>j.w, j.weighted, j.perm, j.ptr, j.H, j.C,
                          <float*>j.out, r0, r1)
        else:
            _message_rows(<const float*>j.a, <const int32_t*>j.idx, j.by_k,
                          <const float*>j.w, j.weighted, j.perm, j.ptr, j.H, j.C,
                          <float*>j.out, r0, r1)


def message_csr(const real[:, ::1] x, const index_t[::1] other, const real[:, ::1] weight,
                bint weighted, const int64_t[::1] perm, const int64_t[::1] ptr,
                real[:, ::1] out, Py_ssize_t heads, int num_threads,
                bint in_group_order=False):
    """out[r] = sum_k weight[e] * x[other[e]] over the grouping (see the top of
    this file).  ``x`` is (rows, H*C), ``weight`` (E, H) (ignored unless
    ``weighted``), ``out`` (N, H*C) with N = len(ptr) - 1.  ``other`` must hold
    indices in ``[0, x.shape[0])`` (a checked plan).  ``in_group_order``:
    ``other`` is given in the grouping's order, ``other[k]`` for the edge
    ``perm[k]`` (``EdgeIndex``'s cached copy), so it is read in order: the
    same bits."""
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
    job.by_k = in_group_order
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
    job.c_fwd = rtx_msg_fwd_rows(job.C, job.idx64, _msg_use_avx2) if real is float else NULL
    job.c_bwd = NULL
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


cdef void _message_bwd_rows(const real* gp, const real* xp, const index_t* dst, bint by_k,
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
            if k + 2 * CSR_PREFETCH_AHEAD < kend and (weighted or not by_k):
                e = perm[k + 2 * CSR_PREFETCH_AHEAD]
                if not by_k:
                    rtx_prefetch(dst + e)
                if weighted:
                    rtx_prefetch(wp + e * H)
                    if need_w:
                        rtx_prefetch_w(gwp + e * H)
            if k + CSR_PREFETCH_AHEAD < kend:
                e = k + CSR_PREFETCH_AHEAD if by_k else perm[k + CSR_PREFETCH_AHEAD]
                rtx_prefetch_row(gp + <Py_ssize_t>dst[e] * F, <size_t>F * sizeof(real))
            grow = gp + <Py_ssize_t>dst[k if by_k else perm[k]] * F
            if not weighted:
                _add_row(row, grow, F)
                continue
            e = perm[k]
            for h in range(H):
                _axpy_row(row + h * C, wp[e * H + h], grow + h * C, C)
            if need_w:
                _dot_heads(grow, xs, H, C, gwp + e * H)


cdef void _message_bwd_chunk(const void* job, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    cdef const MessageJob* j = <const MessageJob*>job
    if j.dbl:
        if j.idx64:
            _message_bwd_rows(<const double*>j.a, <const double*>j.b, <const int64_t*>j.idx,
                              j.by_k, <const double*>j.w, j.weighted, j.need_w, j.perm,
                              j.ptr, j.H, j.C, <double*>j.out, <double*>j.out2, r0, r1)
        else:
            _message_bwd_rows(<const double*>j.a, <const double*>j.b, <const int32_t*>j.idx,
                              j.by_k, <const double*>j.w, j.weighted, j.need_w, j.perm,
                              j.ptr, j.H, j.C, <double*>j.out, <double*>j.out2, r0, r1)
    elif j.c_bwd != NULL:
        j.c_bwd(<const float*>j.a, <const float*>j.b, j.idx, j.by_k, <const float*>j.w,
                j.weighted, j.need_w, j.perm, j.ptr, j.H, j.C, <float*>j.out,
                <float*>j.out2, r0, r1, CSR_PREFETCH_AHEAD)
    else:
        if j.idx64:
            _message_bwd_rows(<const float*>j.a, <const float*>j.b, <const int64_t*>j.idx,
                              j.by_k, <const float*>j.w, j.weighted, j.need_w, j.perm,
                              j.ptr, j.H, j.C, <float*>j.out, <float*>j.out2, r0, r1)
        else:
            _message_bwd_rows(<const float*>j.a, <const float*>j.b, <const int32_t*>j.idx,
                              j.by_k, <const float*>j.w, j.weighted, j.need_w, j.perm,
                              j.ptr, j.H, j.C, <float*>j.out, <float*>j.out2, r0, r1)


def message_backward_csr(const real[:, ::1] grad, const real[:, ::1] x, const index_t[::1] dst,
                         const real[:, ::1] weight, bint weighted, bint need_weight,
                         const int64_t[::1] perm, const int64_t[::1] ptr,
                         real[:, ::1] grad_x, real[:, ::1] grad_weight, Py_ssize_t heads,
                         int num_threads, bint in_group_order=False):
    """Fused backward of message passing over the SOURCE grouping (``perm``/
    ``ptr`` over x's rows): ``grad_x`` (the transpose pass, bitwise equal to
    ``message_csr(grad, dst, ...)``) and, when ``weighted and need_weight``,
    ``grad_weight`` (bitwise equal to ``sddmm_dot``), reading each
    ``grad[dst[e]]`` row once.  ``dst`` must hold indices in ``[0, len(grad))``;
    ``in_group_order`` as in ``message_csr`` (``dst[k]`` for the edge ``perm[k]``)."""
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
    job.by_k = in_group_order
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
    job.c_fwd = NULL
    job.c_bwd = rtx_msg_bwd_rows(job.C, job.idx64, _msg_use_avx2) if real is float else NULL
    T = _segment_threads(num_threads, E, N, F, sizeof(real))
    with nogil:
        rc = _csr_parallel(_message_bwd_chunk, &job, &ptr[0], N, T, CSR_DYNAMIC)
    if rc != 0:
        raise MemoryError("message_backward_csr: out of memory")
