# Dense passes numpy runs on one thread, on rtx's threads with numpy's bits
# (rtx/backend/cpu/: reduction.py's sum over dim 0, creation.py's in-place
# arithmetic -- the tape's gradient accumulation and the bias gradients of a
# training step):
#
#   sum_rows:       out[j] = sum over rows i, in increasing i from +0, of a[i, j]
#                   -- numpy's add.reduce over axis 0 of a C-contiguous array;
#                   the threads split the COLUMNS (each column's sum stays one
#                   running sum, so the bits never depend on the thread count)
#   inplace_arith:  dst = dst (+ - * /) src elementwise (one IEEE operation per
#                   element: numpy's in-place ufunc), the threads split the elements

cdef enum:
    DENSE_COL_ALIGN = 64        # column ranges start on this many bytes
    DENSE_CHUNK = 1 << 16       # elements per parallel work item of inplace_arith


cdef extern from *:
    """
    /* out[j] = sum over rows i < N, in order from +0, of a[i * F + j], for the
       columns j in [c0, c1): a vector loop over j per row (SIMD copies: the
       same adds, the same bits) */
    #define RTX_SUM_COLS(NAME, T)                                                   \
    RTX_SIMD_CLONES                                                                 \
    static void NAME(const T* a, Py_ssize_t N, Py_ssize_t F, Py_ssize_t c0,         \
                     Py_ssize_t c1, T* out) {                                       \
        T* restrict o = out + c0;                                                   \
        Py_ssize_t w = c1 - c0;                                                     \
        for (Py_ssize_t j = 0; j < w; j++)                                          \
            o[j] = 0;                                                               \
        for (Py_ssize_t i = 0; i < N; i++) {                                        \
            const T* restrict r = a + i * F + c0;                                   \
            for (Py_ssize_t j = 0; j < w; j++)                                      \
                o[j] = o[j] + r[j];                                                 \
        }                                                                           \
    }
    RTX_SUM_COLS(rtx_sum_cols_f32, float)
    RTX_SUM_COLS(rtx_sum_cols_f64, double)
    """
    void rtx_sum_cols_f32(const float* a, Py_ssize_t N, Py_ssize_t F, Py_ssize_t c0,
                          Py_ssize_t c1, float* out) noexcept nogil
    void rtx_sum_cols_f64(const double* a, Py_ssize_t N, Py_ssize_t F, Py_ssize_t c0,
                          Py_ssize_t c1, double* out) noexcept nogil


cdef inline bint _spans_overlap(const void* p, Py_ssize_t pbytes, const void* q,
                                Py_ssize_t qbytes) noexcept nogil:
    """Whether the byte ranges [p, p + pbytes) and [q, q + qbytes) share a byte."""
    return (<size_t>p < <size_t>q + <size_t>qbytes
            and <size_t>q < <size_t>p + <size_t>pbytes)


cdef inline void _sum_cols(const real* ap, Py_ssize_t N, Py_ssize_t F, Py_ssize_t c0,
                           Py_ssize_t c1, real* op) noexcept nogil:
    if real is float:
        rtx_sum_cols_f32(ap, N, F, c0, c1, op)
    else:
        rtx_sum_cols_f64(ap, N, F, c0, c1, op)


def sum_rows(const real[:, ::1] a not None, real[::1] out not None, int num_threads):
    """``out = a.sum(axis=0)`` with numpy's bits (one running sum per column from
    +0, rows in order); the columns split over ``num_threads`` threads in ranges
    of whole 64-byte lines."""
    cdef Py_ssize_t N = a.shape[0]
    cdef Py_ssize_t F = a.shape[1]
    cdef Py_ssize_t per = DENSE_COL_ALIGN // sizeof(real)
    cdef Py_ssize_t nblk, t, c0, c1
    cdef const real* ap
    cdef int T
    if out.shape[0] != F:
        raise ValueError(f"sum_rows: out has {out.shape[0]} elements, a has {F} columns")
    if F == 0:
        return
    if N > 0 and _spans_overlap(&out[0], F * sizeof(real), &a[0, 0], N * F * sizeof(real)):
        raise ValueError("sum_rows: out overlaps a")
    if N == 0:
        out[:] = 0
        return
    ap = &a[0, 0]
    nblk = (F + per - 1) // per                 # 64-byte column blocks
    T = _team_size(_clamp_threads(num_threads), nblk)
    _reset_seen()
    with nogil:
        if T == 1:
            _mark_seen()
            _sum_cols(ap, N, F, 0, F, &out[0])
        else:
            for t in prange(T, num_threads=T, schedule="static", chunksize=1):
                _mark_seen()
                c0 = (nblk * t) // T * per
                c1 = (nblk * (t + 1)) // T * per
                if c1 > F:
                    c1 = F
                _sum_cols(ap, N, F, c0, c1, &out[0])


cdef inline void _arith(int op, real* d, const real* s, Py_ssize_t n) noexcept nogil:
    if real is float:
        rtx_arith_f32(op, d, d, s, n)
    else:
        rtx_arith_f64(op, d, d, s, n)


_DENSE_OPS = {"add": RTX_ARITH_ADD, "sub": RTX_ARITH_SUB, "mul": RTX_ARITH_MUL,
              "div": RTX_ARITH_DIV}


def inplace_arith(str op, real[::1] dst not None, const real[::1] src not None,
                  int num_threads):
    """``dst op= src`` elementwise (``op``: add, sub, mul, div), numpy's bits;
    ``src`` and ``dst`` of one length and not overlapping.  Split over
    ``num_threads`` threads in chunks of 65,536 elements."""
    cdef Py_ssize_t n = dst.shape[0]
    cdef Py_ssize_t nchunks, c, lo, hi
    cdef int code, T
    cdef real* dp
    cdef const real* sp
    if op not in _DENSE_OPS:
        raise ValueError(f"inplace_arith: op must be add, sub, mul or div, got {op!r}")
    code = _DENSE_OPS[op]
    if src.shape[0] != n:
        raise ValueError(f"inplace_arith: {src.shape[0]} source elements for {n}")
    if n == 0:
        return
    dp = &dst[0]
    sp = &src[0]
    if _spans_overlap(dp, n * sizeof(real), sp, n * sizeof(real)):
        raise ValueError("inplace_arith: the source overlaps the destination")
    nchunks = (n + DENSE_CHUNK - 1) // DENSE_CHUNK
    T = _team_size(_clamp_threads(num_threads), nchunks)
    _reset_seen()
    with nogil:
        for c in prange(nchunks, num_threads=T, schedule="static"):
            _mark_seen()
            lo = c * DENSE_CHUNK
            hi = lo + DENSE_CHUNK if lo + DENSE_CHUNK < n else n
            _arith(code, dp + lo, sp + lo, hi - lo)
