# Cross-entropy from logits, per row of [N, C] (rtx/backend/loss.py's
# cross_entropy_forward / _backward; the math is in that module's docstring):
#
#   forward:   m = max_j x[i, j],  l = log sum_j exp(x[i, j] - m),
#              loss[i] = l - (x[i, t] - m),  stats[i] = (m, l)
#   backward:  out[i, j] = (exp((x[i, j] - m) - l) - [j == t]) * scale[i]
#
# numpy took 2 ms for the forward of [18000, 8] (a HetGAT epoch's loss) and
# 106 ms for [100000, 349] (ogbn-mag's classes): a reduction along rows of a few
# elements runs numpy's slow strided loop, and exp, sum and log are passes of
# their own.  Here, per row: the max in the lanes of one 32-byte vector (8
# floats or 4 doubles; lane k takes columns k, k + W, ...), the lanes then the
# tail column by column; x - m into a row scratch and exp over it in place (a
# plain loop the compiler vectorises); the sum in lanes, the lanes and the tail
# added in double.  The order depends on C alone, never on the thread count.
# float32's exp is _vmath.pxi's rtx_expf (branch-free; within 1.4 ulp, 0 below
# -87.34 where expf returns subnormals: a term that small cannot move a sum that
# holds exp(0) = 1); float64's is libm's.  A row with a NaN gets a NaN max, and so
# a NaN loss (numpy's max); an infinite max gives inf - inf = NaN, as numpy: such
# rows (a lane sum of v - v is NaN) are read again one value at a time for
# numpy's max.  Each row is one thread's.  A target outside [0, C) (the caller
# checks them on a private copy first) reads nothing and gives a NaN loss.

cdef extern from *:
    """
    #include <stdlib.h>
    #if defined(__GNUC__) || defined(__clang__)
    typedef int32_t rtx_ce_v8i __attribute__((vector_size(32)));
    typedef int64_t rtx_ce_v4i __attribute__((vector_size(32)));
    /* one 32-byte vector of lanes (GCC's vector extensions: two SSE registers on
       baseline x86-64, one register in the RTX_SIMD_CLONES copies) */
    #define RTX_CE_LOAD(V, p) ({ V v_; memcpy(&v_, (p), sizeof(V)); v_; })
    #else
    #error "rtx/_loss.pxi needs GCC's or clang's vector extensions"
    #endif
    /* m = the row max as numpy's max gives it: lane-wise compares, and lane sums
       of v - v, NaN iff the row holds a NaN or an infinity; such a row is read
       again one value at a time (its max NaN if it has one) */
    #define RTX_CE_ROW_MAX(T, V, VI, W, INF)                                        \\
        V mx, ck = {0};                                                             \\
        Py_ssize_t j, k;                                                            \\
        for (k = 0; k < W; k++) mx[k] = -INF;                                       \\
        for (j = 0; j + W <= C; j += W) {                                           \\
            V v = RTX_CE_LOAD(V, x + j);                                            \\
            VI gt = (VI)(v > mx);                                                   \\
            mx = (V)(((VI)v & gt) | ((VI)mx & ~gt));                                \\
            ck += v - v;                                                            \\
        }                                                                           \\
        T m = mx[0], c = ck[0];                                                     \\
        for (k = 1; k < W; k++) {                                                   \\
            m = mx[k] > m ? mx[k] : m;                                              \\
            c = c + ck[k];                                                          \\
        }                                                                           \\
        for (; j < C; j++) {                                                        \\
            m = x[j] > m ? x[j] : m;                                                \\
            c = c + (x[j] - x[j]);                                                  \\
        }                                                                           \\
        if (c != c) {                                                               \\
            m = x[0];                                                               \\
            for (j = 0; j < C && m == m; j++)                                       \\
                m = (x[j] != x[j] || x[j] > m) ? x[j] : m;                          \\
        }

    /* rows [r0, r1): z = x - m into buf, exp in place (a plain loop: it
       vectorises), the sum in lanes (then lane by lane, then the tail), in
       double from the lanes on; l = log(sum); 0, or -1 without memory */
    #define RTX_CE_FORWARD(NAME, EXPBLOCK, T, V, VI, W, INF)                        \\
    RTX_SIMD_CLONES                                                               \\
    static int NAME(const T* xs, const int64_t* tg, Py_ssize_t C, T* loss,          \\
                    T* stats, Py_ssize_t r0, Py_ssize_t r1) {                        \\
        T* buf = (T*)malloc((size_t)C * sizeof(T));                                 \\
        if (buf == NULL)                                                            \\
            return -1;                                                              \\
        for (Py_ssize_t i = r0; i < r1; i++) {                                      \\
            const T* x = xs + i * C;                                                \\
            RTX_CE_ROW_MAX(T, V, VI, W, INF)                                        \\
            for (j = 0; j < C; j++)                                                 \\
                buf[j] = x[j] - m;                                                  \\
            EXPBLOCK(buf, C);                                                       \\
            V acc = {0};                                                            \\
            for (j = 0; j + W <= C; j += W)                                         \\
                acc += RTX_CE_LOAD(V, buf + j);                                     \\
            double s = 0;                                                           \\
            for (k = 0; k < W; k++)                                                 \\
                s += (double)acc[k];                                                \\
            for (; j < C; j++)                                                      \\
                s += (double)buf[j];                                                \\
            T l = (T)log(s);                                                        \\
            int64_t t = tg[i];                                                      \\
            stats[2 * i] = m;                                                       \\
            stats[2 * i + 1] = l;                                                   \\
            loss[i] = (t >= 0 && t < C) ? l - (x[t] - m) : (T)NAN;                  \\
        }                                                                           \\
        free(buf);                                                                  \\
        return 0;                                                                   \\
    }

    #define RTX_CE_BACKWARD(NAME, EXP, T)                                           \\
    RTX_SIMD_CLONES                                                               \\
    static void NAME(const T* xs, const T* stats, const int64_t* tg,                \\
                     const T* scale, Py_ssize_t C, T* out, Py_ssize_t r0,           \\
                     Py_ssize_t r1) {                                               \\
        for (Py_ssize_t i = r0; i < r1; i++) {                                      \\
            const T* x = xs + i * C;                                                \\
            T* o = out + i * C;                                                     \\
            T m = stats[2 * i], l = stats[2 * i + 1], s = scale[i];                 \\
            for (Py_ssize_t j = 0; j < C; j++)                                      \\
                o[j] = EXP((x[j] - m) - l) * s;                                     \\
            int64_t t = tg[i];                                                      \\
            if (t >= 0 && t < C)                                                    \\
                o[t] = (EXP((x[t] - m) - l) - (T)1) * s;                            \\
        }                                                                           \\
    }

    static inline void rtx_ce_exp_f32(float* b, Py_ssize_t n) {
        for (Py_ssize_t j = 0; j < n; j++) b[j] = rtx_expf(b[j]);
    }
    static inline void rtx_ce_exp_f64(double* b, Py_ssize_t n) {
        for (Py_ssize_t j = 0; j < n; j++) b[j] = exp(b[j]);
    }
    RTX_CE_FORWARD(rtx_ce_forward_f32, rtx_ce_exp_f32, float, rtx_v8f, rtx_ce_v8i, 8,
                   INFINITY)
    RTX_CE_FORWARD(rtx_ce_forward_f64, rtx_ce_exp_f64, double, rtx_v4d, rtx_ce_v4i, 4,
                   INFINITY)
    RTX_CE_BACKWARD(rtx_ce_backward_f32, rtx_expf, float)
    RTX_CE_BACKWARD(rtx_ce_backward_f64, exp, double)
    """
    int rtx_ce_forward_f32(const float* xs, const int64_t* tg, Py_ssize_t C, float* loss,
                           float* stats, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil
    int rtx_ce_forward_f64(const double* xs, const int64_t* tg, Py_ssize_t C, double* loss,
                           double* stats, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil
    void rtx_ce_backward_f32(const float* xs, const float* stats, const int64_t* tg,
                             const float* scale, Py_ssize_t C, float* out, Py_ssize_t r0,
                             Py_ssize_t r1) noexcept nogil
    void rtx_ce_backward_f64(const double* xs, const double* stats, const int64_t* tg,
                             const double* scale, Py_ssize_t C, double* out, Py_ssize_t r0,
                             Py_ssize_t r1) noexcept nogil


cdef enum:
    CE_CHUNKS_PER_THREAD = 4


cdef inline int _ce_forward(const real* x, const int64_t* tg, Py_ssize_t C, real* loss,
                            real* stats, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """0, or -1 when the row scratch could not be allocated."""
    if real is float:
        return rtx_ce_forward_f32(x, tg, C, loss, stats, r0, r1)
    else:
        return rtx_ce_forward_f64(x, tg, C, loss, stats, r0, r1)


cdef inline void _ce_backward(const real* x, const real* stats, const int64_t* tg,
                              const real* scale, Py_ssize_t C, real* out, Py_ssize_t r0,
                              Py_ssize_t r1) noexcept nogil:
    if real is float:
        rtx_ce_backward_f32(x, stats, tg, scale, C, out, r0, r1)
    else:
        rtx_ce_backward_f64(x, stats, tg, scale, C, out, r0, r1)


cdef inline Py_ssize_t _ce_chunk(Py_ssize_t N, int T) noexcept nogil:
    """Rows per chunk: about CE_CHUNKS_PER_THREAD chunks per thread."""
    cdef Py_ssize_t n = CE_CHUNKS_PER_THREAD * <Py_ssize_t>T
    return (N + n - 1) // n


def cross_entropy_rows(const real[:, ::1] x, const int64_t[::1] target, real[::1] loss,
                       real[:, ::1] stats, int num_threads):
    """Cross-entropy from the logits ``x`` ([N, C]) per row: ``loss[i]`` and
    ``stats[i] = (m, l)`` (the row max and the log of the sum of ``exp(x - m)``).
    ``target`` holds N class indices in ``[0, C)``, a private array the caller
    has checked (an index outside reads nothing and gives a NaN loss)."""
    cdef Py_ssize_t N = x.shape[0]
    cdef Py_ssize_t C = x.shape[1]
    cdef Py_ssize_t c, chunk, nch, r0, r1
    cdef Py_ssize_t failed = 0
    cdef int T
    if target.shape[0] != N or loss.shape[0] != N or stats.shape[0] != N \
            or stats.shape[1] != 2:
        raise ValueError("cross_entropy_rows: target and loss must have N entries and "
                         "stats shape (N, 2)")
    if C == 0 and N > 0:
        raise ValueError("cross_entropy_rows: no classes")
    _reset_seen()
    if N == 0:
        return
    T = _segment_threads(num_threads, 0, N, C, sizeof(real))
    chunk = _ce_chunk(N, T)
    nch = (N + chunk - 1) // chunk
    with nogil:
        if T <= 1:
            _mark_seen()
            failed = _ce_forward(&x[0, 0], &target[0], C, &loss[0], &stats[0, 0], 0, N) != 0
        else:
            for c in prange(nch, num_threads=T, schedule="static"):
                _mark_seen()
                r0 = c * chunk
                r1 = r0 + chunk
                if r1 > N:
                    r1 = N
                failed += _ce_forward(&x[0, 0], &target[0], C, &loss[0], &stats[0, 0], r0,
                                      r1) != 0
    if failed:
        raise MemoryError("cross_entropy_rows: out of memory (a row's scratch)")


def cross_entropy_rows_backward(const real[:, ::1] x, const real[:, ::1] stats,
                                const int64_t[::1] target, const real[::1] scale,
                                real[:, ::1] out, int num_threads):
    """``out[i, j] = (exp((x[i, j] - m) - l) - [j == target[i]]) * scale[i]`` with
    ``(m, l) = stats[i]`` from ``cross_entropy_rows``.  ``target`` as there."""
    cdef Py_ssize_t N = x.shape[0]
    cdef Py_ssize_t C = x.shape[1]
    cdef Py_ssize_t c, chunk, nch, r0, r1
    cdef int T
    if (stats.shape[0] != N or stats.shape[1] != 2 or target.shape[0] != N
            or scale.shape[0] != N or out.shape[0] != N or out.shape[1] != C):
        raise ValueError("cross_entropy_rows_backward: stats must be (N, 2), target and "
                         "scale N entries, out the shape of x")
    _reset_seen()
    if N == 0 or C == 0:
        return
    T = _segment_threads(num_threads, 0, N, C, sizeof(real))
    chunk = _ce_chunk(N, T)
    nch = (N + chunk - 1) // chunk
    with nogil:
        if T <= 1:
            _mark_seen()
            _ce_backward(&x[0, 0], &stats[0, 0], &target[0], &scale[0], C, &out[0, 0], 0, N)
        else:
            for c in prange(nch, num_threads=T, schedule="static"):
                _mark_seen()
                r0 = c * chunk
                r1 = r0 + chunk
                if r1 > N:
                    r1 = N
                _ce_backward(&x[0, 0], &stats[0, 0], &target[0], &scale[0], C, &out[0, 0],
                             r0, r1)
