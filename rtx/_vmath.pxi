# Vectorisable float math: branch-free C inlines that gcc's vectoriser keeps in
# vector registers (libm's transcendentals are scalar calls), shared by the
# fused elementwise kernels (_fused.pxi) and the segment softmax (_segment.pxi).
# Each gives the same bits in a scalar and in a vectorised loop (no FMA
# contraction: the build passes -ffp-contract=off and no -ffast-math).

cdef extern from *:
    """
    #include <math.h>
    #include <stdint.h>
    #include <string.h>
    /* keep ? x : y as a bitwise blend: no branch, so the loops around it
       vectorise (gcc will not if-convert a float select under the default
       -ftrapping-math); the result is bit-for-bit the ternary's. */
    static inline float rtx_self(int keep, float x, float y) {
        uint32_t a, b, m = (uint32_t)0 - (uint32_t)(keep != 0);
        float r;
        memcpy(&a, &x, 4); memcpy(&b, &y, 4);
        a = (a & m) | (b & ~m);
        memcpy(&r, &a, 4);
        return r;
    }
    static inline double rtx_seld(int keep, double x, double y) {
        uint64_t a, b, m = (uint64_t)0 - (uint64_t)(keep != 0);
        double r;
        memcpy(&a, &x, 8); memcpy(&b, &y, 8);
        a = (a & m) | (b & ~m);
        memcpy(&r, &a, 8);
        return r;
    }
    /* (v > m || v != v) ? v : m -- the segment kernels' running max (v replaces
       m when greater or NaN) -- for a scalar read-modify-write of m through
       memory: the same select in SSE2 registers.  The integer blend above
       moves the value to a general register and reads m a second time; in a
       loop of random m[ip[k]] updates that ran 2x slower (a C loop, 1M entries
       over 100,000 segments, best of 15: one head 1.9 -> 1.0 ms float32,
       2.5-3.8 -> 1.4-2.0 ms float64; float64 rows of 2 and 4 heads 5.7 -> 3.0
       and 11.9 -> 5.9 ms).  Keep rtx_self where gcc vectorises the loop over a
       row's heads (float32 rows of 2 and 4: 2.3 ms, against 2.6 and 5.4 in
       SSE2 scalars).  The same bits either way: both select v or m. */
    #if defined(__SSE2__) || defined(_M_X64)
    #include <emmintrin.h>
    static inline float rtx_maxnan_f(float m, float v) {
        __m128 M = _mm_set_ss(m), V = _mm_set_ss(v);
        __m128 t = _mm_or_ps(_mm_cmpgt_ss(V, M), _mm_cmpunord_ss(V, V));
        return _mm_cvtss_f32(_mm_or_ps(_mm_and_ps(t, V), _mm_andnot_ps(t, M)));
    }
    static inline double rtx_maxnan_d(double m, double v) {
        __m128d M = _mm_set_sd(m), V = _mm_set_sd(v);
        __m128d t = _mm_or_pd(_mm_cmpgt_sd(V, M), _mm_cmpunord_sd(V, V));
        return _mm_cvtsd_f64(_mm_or_pd(_mm_and_pd(t, V), _mm_andnot_pd(t, M)));
    }
    #else
    static inline float rtx_maxnan_f(float m, float v) {
        return rtx_self((v > m) | (v != v), v, m);
    }
    static inline double rtx_maxnan_d(double m, double v) {
        return rtx_seld((v > m) | (v != v), v, m);
    }
    #endif
    /* expm1f(x) for x <= 0 (or NaN), branch-free so that the loops around it
       vectorise (libm's expm1f is a scalar call: ~16 ns per element here, this
       ~2 ns).  x = n ln2 + r with |r| <= ln2/2 (Cody-Waite, fdlibm's split of
       ln2); expm1(r) by its Taylor series to r^8 in Horner form (truncation
       < 2^-25 relative); expm1(x) = 2^n expm1(r) + (2^n - 1), both terms exact
       scalings.  Within 1.2 ulp of the exact value (98.8% correctly rounded on
       4M points of [-40, 0]); -0.0 stays -0.0, x < -30 gives -1 (what expm1f
       rounds to there), NaN gives NaN.  Selects are bitwise blends: a ?: on
       floats stops gcc's vectoriser. */
    static inline float rtx_expm1f_neg(float x) {
        const float inv_ln2 = 1.44269504088896341f, shifter = 12582912.0f;  /* 1.5*2^23 */
        const float ln2_hi = 0.693145751953125f, ln2_lo = 1.428606765330187045e-06f;
        float xc = rtx_self(x >= -30.0f, x, -30.0f);    /* NaN -> -30, restored below */
        xc = rtx_self(xc <= 0.0f, xc, 0.0f);
        float kd = xc * inv_ln2 + shifter;              /* round to nearest integer */
        uint32_t u;
        memcpy(&u, &kd, 4);
        int32_t n = (int32_t)(u << 10) >> 10;           /* low 22 bits, sign-extended */
        kd -= shifter;
        float r = (xc - kd * ln2_hi) - kd * ln2_lo;
        float p = 1.0f + r * (1.0f / 8);
        p = 1.0f + r * (1.0f / 7) * p;
        p = 1.0f + r * (1.0f / 6) * p;
        p = 1.0f + r * (1.0f / 5) * p;
        p = 1.0f + r * (1.0f / 4) * p;
        p = 1.0f + r * (1.0f / 3) * p;
        p = 1.0f + r * 0.5f * p;
        p = r * p;                                      /* expm1(r) */
        uint32_t bits = (uint32_t)(n + 127) << 23;      /* 2^n, n in [-44, 0] */
        float two_n;
        memcpy(&two_n, &bits, 4);
        float y = rtx_self(n == 0, p, two_n * p + (two_n - 1.0f));  /* keeps -0.0 */
        return rtx_self(x != x, x, y);
    }
    /* expf(x), branch-free so that the loops around it vectorise (libm's expf
       is a scalar call).  x = n ln2 + r with |r| <= ln2/2 (Cephes' split of
       ln2), exp(r) by Cephes' degree-7 polynomial, times 2^n built in the
       exponent bits (2^(n-1) * 2 for n = 128).  Within 1.4 ulp of the exact
       value on every float of [-87.33, 88.72] (all 2.2e9 checked against
       double exp); x > 88.7228 gives inf, x below -87.3365 (where exp(x) <
       FLT_MIN) gives 0 where libm's expf returns subnormals down to -103.97;
       NaN gives NaN. */
    static inline float rtx_expf(float x) {
        const float hi = 88.72283935546875f, lo = -87.33654022216797f;
        const float inv_ln2 = 1.44269504088896341f, shifter = 12582912.0f;  /* 1.5*2^23 */
        float xc = rtx_self(x <= hi, x, hi);              /* NaN -> hi, restored below */
        xc = rtx_self(xc >= lo, xc, lo);
        float kd = xc * inv_ln2 + shifter;                /* round to nearest integer */
        uint32_t u;
        memcpy(&u, &kd, 4);
        int32_t n = (int32_t)(u << 10) >> 10;             /* -126 .. 128 */
        kd -= shifter;
        float r = (xc - kd * 0.693359375f) + kd * 2.12194440e-4f;
        float p = 1.9875691500E-4f;
        p = p * r + 1.3981999507E-3f;
        p = p * r + 8.3334519073E-3f;
        p = p * r + 4.1665795894E-2f;
        p = p * r + 1.6666665459E-1f;
        p = p * r + 5.0000001201E-1f;
        p = p * (r * r) + r + 1.0f;
        int32_t big = n > 127;
        uint32_t bits = (uint32_t)(n - big + 127) << 23;  /* 2^n, or 2^127 for n = 128 */
        float two_n;
        memcpy(&two_n, &bits, 4);
        float y = p * two_n;
        y = rtx_self(big, y * 2.0f, y);
        y = rtx_self(x >= lo, y, 0.0f);                   /* NaN: false, fixed below */
        y = rtx_self(x <= hi, y, (float)INFINITY);
        return rtx_self(x != x, x, y);
    }
    /* RTX_SIMD_CLONES before a function: on x86-64 gcc also builds an AVX-512F
       copy (16 float lanes) and an AVX2 copy (8) of it beside the baseline
       SSE2 one (4), picked at load time by the CPU (an ifunc).  The build turns
       contraction off (-ffp-contract=off, setup.py: AVX-512F would fuse a * b + c
       into an FMA), so every copy runs the same IEEE operations: the same bits.
       (Not under ASan, whose instrumentation the ifunc resolver runs before;
       valgrind's CPU has no AVX-512, so it runs the AVX2 copy.)  Measured, a
       [30000, 64] float32 ELU on 2 threads: 1.26 ms with the AVX2 copy, 0.68 ms
       with the AVX-512F one; the sigmoid 2.0 and 0.81 ms (2026-12-06). */
    #if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) \
        && !defined(__SANITIZE_ADDRESS__)
    #define RTX_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
    #else
    #define RTX_SIMD_CLONES
    #endif
    /* d[i] = a[i] op b[i], op RTX_ARITH_ADD / SUB / MUL / DIV: one IEEE operation
       per element (numpy's bits); d may be a or b (element i reads before it
       writes).  The dense in-place updates and the fused evaluator's arithmetic. */
    enum { RTX_ARITH_ADD = 0, RTX_ARITH_SUB = 1, RTX_ARITH_MUL = 2, RTX_ARITH_DIV = 3 };
    #define RTX_ARITH_LOOPS(d, a, b, n)                                         \
        switch (op) {                                                           \
        case RTX_ARITH_ADD: for (i = 0; i < n; i++) d[i] = a[i] + b[i]; break;  \
        case RTX_ARITH_SUB: for (i = 0; i < n; i++) d[i] = a[i] - b[i]; break;  \
        case RTX_ARITH_MUL: for (i = 0; i < n; i++) d[i] = a[i] * b[i]; break;  \
        default:            for (i = 0; i < n; i++) d[i] = a[i] / b[i]; break;  \
        }
    RTX_SIMD_CLONES
    static void rtx_arith_f32(int op, float* d, const float* a, const float* b,
                              Py_ssize_t n) {
        Py_ssize_t i;
        RTX_ARITH_LOOPS(d, a, b, n)
    }
    RTX_SIMD_CLONES
    static void rtx_arith_f64(int op, double* d, const double* a, const double* b,
                              Py_ssize_t n) {
        Py_ssize_t i;
        RTX_ARITH_LOOPS(d, a, b, n)
    }
    /* d[i] = a[i] op s (rev: s op a[i]), op as above: one IEEE operation per
       element, numpy's bits for an array and a scalar of its dtype (the CPU
       backend's small arithmetic: x * 0.5, 1 - x) */
    #define RTX_ARITH_S_LOOPS(d, a, s, n)                                       \
        switch (op + 4 * (rev != 0)) {                                          \
        case RTX_ARITH_ADD: for (i = 0; i < n; i++) d[i] = a[i] + s; break;     \
        case RTX_ARITH_SUB: for (i = 0; i < n; i++) d[i] = a[i] - s; break;     \
        case RTX_ARITH_MUL: for (i = 0; i < n; i++) d[i] = a[i] * s; break;     \
        case RTX_ARITH_DIV: for (i = 0; i < n; i++) d[i] = a[i] / s; break;     \
        case 4 + RTX_ARITH_ADD: for (i = 0; i < n; i++) d[i] = s + a[i]; break; \
        case 4 + RTX_ARITH_SUB: for (i = 0; i < n; i++) d[i] = s - a[i]; break; \
        case 4 + RTX_ARITH_MUL: for (i = 0; i < n; i++) d[i] = s * a[i]; break; \
        default:                for (i = 0; i < n; i++) d[i] = s / a[i]; break; \
        }
    RTX_SIMD_CLONES
    static void rtx_arith_scalar_f32(int op, int rev, float* d, const float* a, float s,
                                     Py_ssize_t n) {
        Py_ssize_t i;
        RTX_ARITH_S_LOOPS(d, a, s, n)
    }
    RTX_SIMD_CLONES
    static void rtx_arith_scalar_f64(int op, int rev, double* d, const double* a, double s,
                                     Py_ssize_t n) {
        Py_ssize_t i;
        RTX_ARITH_S_LOOPS(d, a, s, n)
    }
    /* d[i] = (a[i] op b[i]) ? 1 : 0, op RTX_CMP_EQ / NE / LT / LE / GT / GE (IEEE:
       every comparison with a NaN false but NE); the fused evaluator's predicates */
    enum { RTX_CMP_EQ = 0, RTX_CMP_NE = 1, RTX_CMP_LT = 2, RTX_CMP_LE = 3,
           RTX_CMP_GT = 4, RTX_CMP_GE = 5 };
    #define RTX_CMP_LOOPS(d, a, b, n)                                                  \
        switch (op) {                                                                  \
        case RTX_CMP_EQ: for (i = 0; i < n; i++) d[i] = a[i] == b[i]; break;           \
        case RTX_CMP_NE: for (i = 0; i < n; i++) d[i] = a[i] != b[i]; break;           \
        case RTX_CMP_LT: for (i = 0; i < n; i++) d[i] = a[i] < b[i]; break;            \
        case RTX_CMP_LE: for (i = 0; i < n; i++) d[i] = a[i] <= b[i]; break;           \
        case RTX_CMP_GT: for (i = 0; i < n; i++) d[i] = a[i] > b[i]; break;            \
        default:         for (i = 0; i < n; i++) d[i] = a[i] >= b[i]; break;           \
        }
    RTX_SIMD_CLONES
    static void rtx_cmp_f32(int op, float* d, const float* a, const float* b,
                            Py_ssize_t n) {
        Py_ssize_t i;
        RTX_CMP_LOOPS(d, a, b, n)
    }
    RTX_SIMD_CLONES
    static void rtx_cmp_f64(int op, double* d, const double* a, const double* b,
                            Py_ssize_t n) {
        Py_ssize_t i;
        RTX_CMP_LOOPS(d, a, b, n)
    }
    /* d[i] = c[i] != 0 ? a[i] : b[i] (a bitwise select: NaNs and signed zeros kept) */
    RTX_SIMD_CLONES
    static void rtx_where_f32(float* d, const float* c, const float* a, const float* b,
                              Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) d[i] = rtx_self(c[i] != 0, a[i], b[i]);
    }
    RTX_SIMD_CLONES
    static void rtx_where_f64(double* d, const double* c, const double* a, const double* b,
                              Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) d[i] = rtx_seld(c[i] != 0, a[i], b[i]);
    }
    /* d[i] = a[i] > 0 ? a[i] : a[i] * k (NaN: NaN * k) */
    RTX_SIMD_CLONES
    static void rtx_leaky_f32(float* d, const float* a, float k, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) {
            float x = a[i];
            d[i] = rtx_self(x > 0, x, x * k);
        }
    }
    RTX_SIMD_CLONES
    static void rtx_leaky_f64(double* d, const double* a, double k, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) {
            double x = a[i];
            d[i] = rtx_seld(x > 0, x, x * k);
        }
    }
    /* x[i] = rtx_expf(x[i]) over a block */
    RTX_SIMD_CLONES
    static void rtx_expf_block(float* x, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++)
            x[i] = rtx_expf(x[i]);
    }
    /* d[i] = sigmoid(a[i]) over a block, in the stable form: e = exp(-|x|) (never
       overflows), 1 / (1 + e) for x >= 0 and e / (1 + e) below (NaN: NaN); the
       fused evaluator's float sigmoid, exp by rtx_expf (vectorised: libm's expf
       is a scalar call) */
    RTX_SIMD_CLONES
    static void rtx_sigmoid_block_f32(float* d, const float* a, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) {
            float x = a[i];
            float e = rtx_expf(-fabsf(x));
            float y = 1.0f + e;
            d[i] = rtx_self(x >= 0, 1.0f / y, e / y);
        }
    }
    /* d[i] = elu(a[i]) = a[i] > 0 ? a[i] : alpha * expm1(a[i]) over a block (NaN:
       alpha * NaN, a NaN); the fused evaluator's float ELU */
    RTX_SIMD_CLONES
    static void rtx_elu_block_f32(float* d, const float* a, float alpha, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) {
            float x = a[i];
            float y = alpha * rtx_expm1f_neg(x);
            d[i] = rtx_self(x > 0, x, y);
        }
    }
    """
    void rtx_expf_block(float* x, Py_ssize_t n) noexcept nogil
    enum:
        RTX_ARITH_ADD
        RTX_ARITH_SUB
        RTX_ARITH_MUL
        RTX_ARITH_DIV
    void rtx_arith_f32(int op, float* d, const float* a, const float* b,
                       Py_ssize_t n) noexcept nogil
    enum:
        RTX_CMP_EQ
    void rtx_cmp_f32(int op, float* d, const float* a, const float* b,
                     Py_ssize_t n) noexcept nogil
    void rtx_cmp_f64(int op, double* d, const double* a, const double* b,
                     Py_ssize_t n) noexcept nogil
    void rtx_where_f32(float* d, const float* c, const float* a, const float* b,
                       Py_ssize_t n) noexcept nogil
    void rtx_where_f64(double* d, const double* c, const double* a, const double* b,
                       Py_ssize_t n) noexcept nogil
    void rtx_leaky_f32(float* d, const float* a, float k, Py_ssize_t n) noexcept nogil
    void rtx_leaky_f64(double* d, const double* a, double k, Py_ssize_t n) noexcept nogil
    void rtx_arith_f64(int op, double* d, const double* a, const double* b,
                       Py_ssize_t n) noexcept nogil
    void rtx_arith_scalar_f32(int op, int rev, float* d, const float* a, float s,
                              Py_ssize_t n) noexcept nogil
    void rtx_arith_scalar_f64(int op, int rev, double* d, const double* a, double s,
                              Py_ssize_t n) noexcept nogil
    void rtx_elu_block_f32(float* d, const float* a, float alpha, Py_ssize_t n) noexcept nogil
    void rtx_sigmoid_block_f32(float* d, const float* a, Py_ssize_t n) noexcept nogil
    float rtx_self(int keep, float x, float y) noexcept nogil
    double rtx_seld(int keep, double x, double y) noexcept nogil
    float rtx_maxnan_f(float m, float v) noexcept nogil
    double rtx_maxnan_d(double m, double v) noexcept nogil
    float rtx_expm1f_neg(float x) noexcept nogil
    float rtx_expf(float x) noexcept nogil
