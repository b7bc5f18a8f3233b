# Narrow matmul: ``x.T @ g`` where ``g`` has at most NARROW_MAX columns (the weight
# gradient of a projection onto a few columns: a GAT layer's attention logits,
# ``[N, F].T @ [N, heads]``).  BLAS's blocked kernels do badly there: OpenBLAS
# took 2.5 ms for [100000, 64].T @ [100000, 4] on 2 threads, about 1 / 20 of its
# rate on square shapes, and more in a training step (docs/performance.md).
#
#   out[f, j] = sum over i in [0, K), in increasing i, of x[i, f] * g[i, j]
#
# one running sum per output entry, so the bits depend on the shapes alone, not
# on the vector width or the thread count.  The caller (rtx/backend/_matmul.py)
# cuts K into the same shape-chosen pieces as its BLAS split and adds the
# pieces' partial products in order: ``narrow_tn`` computes every piece's partial
# (pieces handed out to the threads dynamically) and sums them in piece order.
#
# Inside a piece, rows come in blocks of about 32 KiB of x (8 to 512 rows: they
# stay in L1 while every tile passes over them; the next block's rows are
# prefetched) and columns of x in tiles of one 32-byte vector (8 floats or 4
# doubles: GCC's vector extensions, two SSE registers on baseline x86-64, one
# register in the AVX2 and AVX-512F copies GCC builds next to it, picked at load
# time: _vmath.pxi's RTX_SIMD_CLONES; no FMA in any, so the same bits).  The
# accumulators of a tile live in registers across a block's rows and in a
# private buffer between blocks; the last columns that fill no tile run one
# value at a time (the same operations per entry).

cdef enum:
    NARROW_MAX = 8        # the most columns of g (the kernel's register budget)
    NARROW_MAX_PIECES = 64


cdef extern from *:
    """
    #include <string.h>
    #if defined(__GNUC__) || defined(__clang__)
    #ifndef RTX_NARROW_BLOCK_BYTES
    #define RTX_NARROW_BLOCK_BYTES 32768
    #endif
    #define RTX_HAVE_NARROW 1
    #else
    #define RTX_HAVE_NARROW 0
    #endif

    #if RTX_HAVE_NARROW
    /* One block of rows [i0, i1) of one tile of W columns: acc[j] (W lanes:
       columns t0..t0+W-1 of x) += g[i, j] * x[i, t0..t0+W-1], in increasing i.
       N is a constant in each instantiation below, so acc stays in registers;
       accbuf holds NARROW_MAX (8) vectors per tile. */
    #define RTX_NARROW_BLOCK(T, V, N)                                               \\
        {                                                                           \\
            V a[N];                                                                 \\
            memcpy(a, acc, sizeof(a));                                              \\
            for (Py_ssize_t i = i0; i < i1; i++) {                                  \\
                V xv;                                                               \\
                if (t == 0 && i + rb < i_hi)  /* the next block's row, from memory */ \\
                    for (Py_ssize_t q = 0; q < rowbytes; q += 64)                   \\
                        __builtin_prefetch((const char*)(x + (i + rb) * ldx) + q);  \\
                memcpy(&xv, x + i * ldx + t0, sizeof(xv));                          \\
                const T* gr = g + i * ldg;                                          \\
                for (int j = 0; j < N; j++)                                         \\
                    a[j] = a[j] + gr[j] * xv;                                       \\
            }                                                                       \\
            memcpy(acc, a, sizeof(a));                                              \\
        }

    #define RTX_NARROW_PIECE(NAME, T, V)                                            \\
    RTX_SIMD_CLONES                                                               \\
    static void NAME(const T* x, Py_ssize_t ldx, const T* g, Py_ssize_t ldg,        \\
                     Py_ssize_t i_lo, Py_ssize_t i_hi, Py_ssize_t F, int n,         \\
                     T* accbuf, T* out) {                                           \\
        /* out[f * n + j] = sum_{i_lo <= i < i_hi} x[i, f] g[i, j];                 \\
           accbuf: F * NARROW_MAX values of scratch */                              \\
        const Py_ssize_t W = (Py_ssize_t)(sizeof(V) / sizeof(T));                   \\
        Py_ssize_t ntiles = F / W, t, i, f;                                         \\
        int j;                                                                      \\
        memset(accbuf, 0, (size_t)(F * 8) * sizeof(T));                             \\
        /* rows per block: their x rows in about NARROW_BLOCK_BYTES (L1) */         \\
        Py_ssize_t rb = RTX_NARROW_BLOCK_BYTES / (F * (Py_ssize_t)sizeof(T));        \\
        rb = rb < 8 ? 8 : rb > 512 ? 512 : rb;                                      \\
        const Py_ssize_t rowbytes = F * (Py_ssize_t)sizeof(T);                      \\
        for (Py_ssize_t b0 = i_lo; b0 < i_hi; b0 += rb) {                           \\
            Py_ssize_t i0 = b0, i1 = b0 + rb < i_hi ? b0 + rb : i_hi;               \\
            for (t = 0; t < ntiles; t++) {                                          \\
                Py_ssize_t t0 = t * W;                                              \\
                T* acc = accbuf + t0 * 8;  /* n vectors of W lanes */               \\
                switch (n) {                                                        \\
                    case 1: RTX_NARROW_BLOCK(T, V, 1) break;                        \\
                    case 2: RTX_NARROW_BLOCK(T, V, 2) break;                        \\
                    case 3: RTX_NARROW_BLOCK(T, V, 3) break;                        \\
                    case 4: RTX_NARROW_BLOCK(T, V, 4) break;                        \\
                    case 5: RTX_NARROW_BLOCK(T, V, 5) break;                        \\
                    case 6: RTX_NARROW_BLOCK(T, V, 6) break;                        \\
                    case 7: RTX_NARROW_BLOCK(T, V, 7) break;                        \\
                    default: RTX_NARROW_BLOCK(T, V, 8) break;                       \\
                }                                                                   \\
            }                                                                       \\
            /* the last columns, one value at a time (same order per entry) */     \\
            for (f = ntiles * W; f < F; f++) {                                      \\
                T* acc = accbuf + f * 8;                                            \\
                for (i = i0; i < i1; i++) {                                         \\
                    T xf = x[i * ldx + f];                                          \\
                    for (j = 0; j < n; j++)                                         \\
                        acc[j] = acc[j] + g[i * ldg + j] * xf;                      \\
                }                                                                   \\
            }                                                                       \\
        }                                                                           \\
        for (t = 0; t < ntiles; t++)                                                \\
            for (j = 0; j < n; j++)                                                 \\
                for (f = 0; f < W; f++)                                             \\
                    out[(t * W + f) * n + j] = accbuf[t * W * 8 + j * W + f];       \\
        for (f = ntiles * W; f < F; f++)                                            \\
            for (j = 0; j < n; j++)                                                 \\
                out[f * n + j] = accbuf[f * 8 + j];                                 \\
    }

    RTX_NARROW_PIECE(rtx_narrow_piece_f32, float, rtx_v8f)
    RTX_NARROW_PIECE(rtx_narrow_piece_f64, double, rtx_v4d)
    #else
    static void rtx_narrow_piece_f32(const float* x, Py_ssize_t ldx, const float* g,
                                     Py_ssize_t ldg, Py_ssize_t i_lo, Py_ssize_t i_hi,
                                     Py_ssize_t F, int n, float* accbuf, float* out) {
        (void)x; (void)ldx; (void)g; (void)ldg; (void)i_lo; (void)i_hi; (void)F;
        (void)n; (void)accbuf; (void)out;   /* never called: RTX_HAVE_NARROW is 0 */
    }
    static void rtx_narrow_piece_f64(const double* x, Py_ssize_t ldx, const double* g,
                                     Py_ssize_t ldg, Py_ssize_t i_lo, Py_ssize_t i_hi,
                                     Py_ssize_t F, int n, double* accbuf, double* out) {
        (void)x; (void)ldx; (void)g; (void)ldg; (void)i_lo; (void)i_hi; (void)F;
        (void)n; (void)accbuf; (void)out;
    }
    #endif
    """
    int RTX_HAVE_NARROW
    void rtx_narrow_piece_f32(const float* x, Py_ssize_t ldx, const float* g, Py_ssize_t ldg,
                              Py_ssize_t i_lo, Py_ssize_t i_hi, Py_ssize_t F, int n,
                              float* accbuf, float* out) noexcept nogil
    void rtx_narrow_piece_f64(const double* x, Py_ssize_t ldx, const double* g,
                              Py_ssize_t ldg, Py_ssize_t i_lo, Py_ssize_t i_hi, Py_ssize_t F,
                              int n, double* accbuf, double* out) noexcept nogil


cdef inline void _narrow_piece(const real* x, Py_ssize_t ldx, const real* g, Py_ssize_t ldg,
                               Py_ssize_t i0, Py_ssize_t i1, Py_ssize_t F, int n,
                               real* accbuf, real* out) noexcept nogil:
    if real is float:
        rtx_narrow_piece_f32(x, ldx, g, ldg, i0, i1, F, n, accbuf, out)
    else:
        rtx_narrow_piece_f64(x, ldx, g, ldg, i0, i1, F, n, accbuf, out)


def narrow_available():
    #: -> bool
    """Whether this build has the narrow matmul kernel (GCC / Clang vector
    extensions); without it the caller keeps BLAS."""
    return bool(RTX_HAVE_NARROW)


def narrow_tn(const real[:, :] x not None, const real[:, :] g not None,
              const int64_t[::1] bounds not None, real[:, ::1] out not None, int num_threads):
    """``out = x.T @ g`` for ``x`` [K, F] and ``g`` [K, n], ``n <= 8``, both with
    contiguous rows (any row stride): the partial product of each piece of rows
    ``[bounds[p], bounds[p + 1])`` (``bounds`` ascending from 0 to K; at most 64
    pieces) in one running sum per entry, in increasing row, then the pieces'
    partials added in piece order.  The bits depend on the shapes and ``bounds``
    alone, never on ``num_threads``."""
    cdef Py_ssize_t K = x.shape[0]
    cdef Py_ssize_t F = x.shape[1]
    cdef Py_ssize_t n = g.shape[1]
    cdef Py_ssize_t P = bounds.shape[0] - 1
    cdef Py_ssize_t isz = sizeof(real)
    cdef Py_ssize_t ldx, ldg, p, q, e
    cdef int T
    cdef real* part
    cdef real* acc
    cdef real* o
    if not RTX_HAVE_NARROW:
        raise RuntimeError("narrow_tn: not built with vector extensions")
    if g.shape[0] != K or out.shape[0] != F or out.shape[1] != n:
        raise ValueError("narrow_tn: shapes do not match")
    if n < 1 or n > NARROW_MAX:
        raise ValueError(f"narrow_tn: g must have 1 to {NARROW_MAX} columns, got {n}")
    if P < 1 or P > NARROW_MAX_PIECES or bounds[0] != 0 or bounds[P] != K:
        raise ValueError("narrow_tn: bounds must run from 0 to len(x) in at most 64 pieces")
    for p in range(P):
        if bounds[p + 1] < bounds[p]:
            raise ValueError("narrow_tn: bounds must be ascending")
    if F == 0:
        return
    if K == 0:
        out[:, :] = 0
        return
    if (x.strides[1] != isz or g.strides[1] != isz or x.strides[0] % isz != 0
            or g.strides[0] % isz != 0 or x.strides[0] < 0 or g.strides[0] < 0):
        raise ValueError("narrow_tn: x and g need contiguous rows")
    if F > PY_SSIZE_T_MAX // (isz * NARROW_MAX * (P + 2)):
        raise MemoryError("narrow_tn: too many columns")
    ldx = x.strides[0] // isz
    ldg = g.strides[0] // isz
    # every piece's partial [F, n], then one accumulator buffer [F, 8] per piece
    part = <real*>malloc(<size_t>(P * F * n + P * F * NARROW_MAX) * sizeof(real))
    if part == NULL:
        raise MemoryError("narrow_tn: out of memory")
    T = _team_size(_clamp_threads(num_threads), P)
    _reset_seen()
    with nogil:
        for p in prange(P, num_threads=T, schedule="dynamic", chunksize=1):
            _mark_seen()
            _narrow_piece(&x[0, 0], ldx, &g[0, 0], ldg, bounds[p], bounds[p + 1], F, <int>n,
                          part + P * F * n + p * F * NARROW_MAX, part + p * F * n)
        o = &out[0, 0]
        e = F * n
        for q in range(e):
            o[q] = part[q]
        for p in range(1, P):
            acc = part + p * e
            for q in range(e):
                o[q] = o[q] + acc[q]
    free(part)
