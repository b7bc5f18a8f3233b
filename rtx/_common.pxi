# Shared by every kernel family (included first, after _openmp.pxi): the fused
# dtypes one kernel source serves, and small inline row helpers.
#
#   real     float32 / float64 data
#   index_t  int32 / int64 indices (user-facing; CSR arrays are always int64)

from cython.parallel cimport parallel

from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

ctypedef fused real:
    float
    double

ctypedef fused index_t:
    int32_t
    int64_t

cdef enum:
    # Rows prefetched ahead of the one being read by gather/scatter loops.
    PREFETCH_AHEAD = 4
    # Most OpenMP threads a kernel splits its work for (stack arrays of bounds).
    MAX_KERNEL_THREADS = 256

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    /* 32- and 16-byte vectors of floats and doubles (GCC / clang vector extensions:
       one register in the RTX_SIMD_CLONES copies, two on baseline SSE2), shared by
       the families' SIMD loops (_narrow.pxi, _loss.pxi, _gatv2.pxi's head_dot) */
    typedef float rtx_v8f __attribute__((vector_size(32)));
    typedef float rtx_v4f __attribute__((vector_size(16)));
    typedef double rtx_v4d __attribute__((vector_size(32)));
    #define rtx_prefetch(p) __builtin_prefetch((const void*)(p), 0, 1)
    #define rtx_prefetch_w(p) __builtin_prefetch((const void*)(p), 1, 1)
    /* for helpers of prefetches: GCC takes a void function of loads and prefetches
       for pure and deletes its calls unless it inlines it first (_gatv2.pxi) */
    #define RTX_ALWAYS_INLINE static inline __attribute__((always_inline))
    #else
    #define rtx_prefetch(p) ((void)0)
    #define rtx_prefetch_w(p) ((void)0)
    #define RTX_ALWAYS_INLINE static inline
    #endif
    /* Prefetch a whole row (up to 2 KiB of it), one request per cache line. */
    static inline void rtx_prefetch_row(const void* p, size_t nbytes) {
        const char* c = (const char*)p;
        size_t off;
        if (nbytes > 2048) nbytes = 2048;
        for (off = 0; off < nbytes; off += 64) rtx_prefetch(c + off);
    }
    #if defined(__SSE2__) || defined(_M_X64)
    #include <emmintrin.h>
    #define RTX_HAVE_STREAM 1
    /* n bytes, dst 16-byte aligned, n a multiple of 16: non-temporal stores
       (no read-for-ownership of the destination, no cache pollution). */
    static inline void rtx_stream_copy(void* dst, const void* src, size_t n) {
        __m128i* d = (__m128i*)dst;
        const __m128i* s = (const __m128i*)src;
        size_t i, m = n / 16;
        for (i = 0; i + 4 <= m; i += 4) {
            __m128i a = _mm_loadu_si128(s + i), b = _mm_loadu_si128(s + i + 1);
            __m128i c = _mm_loadu_si128(s + i + 2), e = _mm_loadu_si128(s + i + 3);
            _mm_stream_si128(d + i, a); _mm_stream_si128(d + i + 1, b);
            _mm_stream_si128(d + i + 2, c); _mm_stream_si128(d + i + 3, e);
        }
        for (; i < m; i++) _mm_stream_si128(d + i, _mm_loadu_si128(s + i));
    }
    static inline void rtx_store_fence(void) { _mm_sfence(); }
    /* (x0+x1, x2+x3, y0+y1, y2+y3): one level of the dots' pairwise tree */
    static inline __m128 rtx__pair_sums(__m128 x, __m128 y) {
        return _mm_add_ps(_mm_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
    }
    /* One head's eight lane sums of _dot (lane l: j = l, l + 8, ... in increasing
       j, each p = p + a*b from p = 0), added pairwise: (p0+p1, p2+p3, p4+p5, p6+p7).
       c a multiple of 8. */
    static inline __m128 rtx__dot_pairs(const float* a, const float* b, Py_ssize_t c) {
        __m128 lo = _mm_setzero_ps(), hi = _mm_setzero_ps();
        Py_ssize_t j;
        for (j = 0; j < c; j += 8) {
            lo = _mm_add_ps(lo, _mm_mul_ps(_mm_loadu_ps(a + j), _mm_loadu_ps(b + j)));
            hi = _mm_add_ps(hi, _mm_mul_ps(_mm_loadu_ps(a + j + 4), _mm_loadu_ps(b + j + 4)));
        }
        return rtx__pair_sums(lo, hi);
    }
    /* out[h] = _dot(a + h*c, b + h*c, c) for h < nh, bitwise (the same products and
       the same additions: ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7))), four heads at a
       time: their final additions run as two vector adds, where _dot spends a
       chain of scalar shuffles and adds per head.  c a multiple of 8. */
    #define RTX_HAVE_DOT_HEADS 1
    static inline void rtx_dot_heads_f32(const float* a, const float* b, Py_ssize_t nh,
                                         Py_ssize_t c, float* out) {
        Py_ssize_t h, k;
        for (h = 0; h < nh; h += 4) {
            __m128 q[4], s01, s23, r;
            float tmp[4];
            if (nh - h == 1) {
                /* one head left (every call for one-head rows): its pair sums
                   r = (p0+p1, p2+p3, p4+p5, p6+p7) added as (r0+r1) + (r2+r3), the
                   same tree, without the four-head path's three heads of zeros
                   (sddmm_dot, one head of 16 over 10^6 edges, 2 threads: 12.6 ->
                   5.2 ms) */
                r = rtx__dot_pairs(a + h * c, b + h * c, c);
                r = _mm_add_ps(r, _mm_shuffle_ps(r, r, _MM_SHUFFLE(3, 3, 3, 1)));
                out[h] = _mm_cvtss_f32(_mm_add_ss(r, _mm_movehl_ps(r, r)));
                return;
            }
            if (nh - h >= 4) {
                /* four heads' lanes side by side in one loop (each head's lanes
                   still in increasing j): independent chains where one head at a
                   time left each short loop's adds waiting */
                __m128 lo[4], hi[4];
                Py_ssize_t j;
                for (k = 0; k < 4; k++) lo[k] = hi[k] = _mm_setzero_ps();
                for (j = 0; j < c; j += 8) {
                    for (k = 0; k < 4; k++) {
                        const float* ak = a + (h + k) * c + j;
                        const float* bk = b + (h + k) * c + j;
                        lo[k] = _mm_add_ps(lo[k], _mm_mul_ps(_mm_loadu_ps(ak),
                                                             _mm_loadu_ps(bk)));
                        hi[k] = _mm_add_ps(hi[k], _mm_mul_ps(_mm_loadu_ps(ak + 4),
                                                             _mm_loadu_ps(bk + 4)));
                    }
                }
                for (k = 0; k < 4; k++)
                    q[k] = rtx__pair_sums(lo[k], hi[k]);
            } else {
                for (k = 0; k < 4; k++)
                    q[k] = h + k < nh ? rtx__dot_pairs(a + (h + k) * c, b + (h + k) * c, c)
                                      : _mm_setzero_ps();
            }
            /* (q0[0]+q0[1], q0[2]+q0[3], q1[0]+q1[1], q1[2]+q1[3]), then 2 and 3 */
            s01 = rtx__pair_sums(q[0], q[1]);
            s23 = rtx__pair_sums(q[2], q[3]);
            r = rtx__pair_sums(s01, s23);
            if (h + 4 <= nh) {
                _mm_storeu_ps(out + h, r);
            } else {
                _mm_storeu_ps(tmp, r);
                for (k = 0; h + k < nh; k++) out[h + k] = tmp[k];
            }
        }
    }
    #else
    #define RTX_HAVE_STREAM 0
    static inline void rtx_stream_copy(void* dst, const void* src, size_t n) {
        memcpy(dst, src, n);
    }
    static inline void rtx_store_fence(void) {}
    #define RTX_HAVE_DOT_HEADS 0
    static inline void rtx_dot_heads_f32(const float* a, const float* b, Py_ssize_t nh,
                                         Py_ssize_t c, float* out) {
        (void)a; (void)b; (void)nh; (void)c; (void)out;   /* never called: flag is 0 */
    }
    #endif
    """
    void rtx_prefetch(const void* p) noexcept nogil
    void rtx_prefetch_w(const void* p) noexcept nogil   # a line about to be written
    void rtx_prefetch_row(const void* p, size_t nbytes) noexcept nogil
    int RTX_HAVE_STREAM
    void rtx_stream_copy(void* dst, const void* src, size_t n) noexcept nogil
    void rtx_store_fence() noexcept nogil
    int RTX_HAVE_DOT_HEADS
    void rtx_dot_heads_f32(const float* a, const float* b, Py_ssize_t nh, Py_ssize_t c,
                           float* out) noexcept nogil


cdef inline int _clamp_threads(int num_threads) noexcept nogil:
    """``num_threads`` clamped to [1, MAX_KERNEL_THREADS] (libgomp crashes on absurd
    team sizes)."""
    if num_threads < 1:
        return 1
    if num_threads > MAX_KERNEL_THREADS:
        return MAX_KERNEL_THREADS
    return num_threads


cdef inline int _team_size(int num_threads, Py_ssize_t work) noexcept nogil:
    """``num_threads`` clamped to [1, MAX_KERNEL_THREADS] and to ``work`` items."""
    cdef int T = num_threads
    if T > MAX_KERNEL_THREADS:
        T = MAX_KERNEL_THREADS
    if work < T:
        T = <int>work
    if T < 1:
        T = 1
    return T


cdef inline void _copy_row(real* dst, const real* src, Py_ssize_t F) noexcept nogil:
    cdef Py_ssize_t j
    if F == 1:
        dst[0] = src[0]
    elif F * sizeof(real) <= 128:
        for j in range(F):
            dst[j] = src[j]
    else:
        memcpy(dst, src, <size_t>F * sizeof(real))


cdef inline void _add_row(real* dst, const real* src, Py_ssize_t F) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(F):
        dst[j] += src[j]


cdef inline real _dot(const real* a, const real* b, Py_ssize_t n) noexcept nogil:
    """sum_j a[j] * b[j] in one fixed order: eight running sums (lane l takes
    j = l, l + 8, ... in increasing j), added as ((0+1)+(2+3))+((4+5)+(6+7)), then
    the n % 8 tail in increasing j.  The order depends on n alone (the same bits
    at any thread count); the eight lanes vectorise, where one running sum is a
    chain of dependent adds (latency-bound: 4x slower at 16 channels, measured)."""
    cdef real p[8]
    cdef Py_ssize_t j, lane, m = n - n % 8
    cdef real s
    for lane in range(8):
        p[lane] = 0
    for j in range(0, m, 8):
        for lane in range(8):
            p[lane] = p[lane] + a[j + lane] * b[j + lane]
    s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))
    for j in range(m, n):
        s = s + a[j] * b[j]
    return s


cdef inline void _dot_heads(const real* a, const real* b, Py_ssize_t H, Py_ssize_t C,
                            real* out) noexcept nogil:
    """out[h] = _dot(a + h*C, b + h*C, C) for h < H, bitwise: float32 rows whose
    head width is a multiple of 8 take rtx_dot_heads_f32 (SSE2; the per-head
    horizontal additions of four heads as vector adds), the rest _dot per head."""
    cdef Py_ssize_t h
    if real is float:
        if RTX_HAVE_DOT_HEADS and C % 8 == 0:
            rtx_dot_heads_f32(a, b, H, C, out)
            return
    for h in range(H):
        out[h] = _dot(a + h * C, b + h * C, C)


cdef inline void _axpy_row(real* dst, real a, const real* src, Py_ssize_t F) noexcept nogil:
    """dst += a * src"""
    cdef Py_ssize_t j
    for j in range(F):
        dst[j] += a * src[j]
