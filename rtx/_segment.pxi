# Segment reductions and segment softmax over a CSR grouping (_csr.pxi).
#
# Data arrive as 2-D ``(E, H)`` C-contiguous arrays (trailing dims flattened;
# H = 1 for 1-D scores), the grouping as ``perm``/``ptr`` int64 arrays from
# ``csr_build`` over N segments.  Each segment (a destination row) is
# computed by exactly one thread from its entries in increasing position, so
# results are bitwise identical for any thread count.  Columns are processed
# in blocks of SEG_BLOCK so per-segment state (max, sum) lives on the stack.

from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.math cimport INFINITY, exp

cdef enum:
    SEG_BLOCK = 64
    # Scores of one segment's head block exponentiated side by side (stack).
    SEG_BUF = 1024
    # Entries ahead whose randomly placed scores the CSR softmax kernels prefetch.
    SEG_PREFETCH = 32

cdef inline void _exp_block(real* x, Py_ssize_t n) noexcept nogil:
    """x = _exp(x) over a block (float32: rtx_expf_block, its SIMD copy for the CPU)."""
    cdef Py_ssize_t i
    if real is float:
        rtx_expf_block(x, n)
    else:
        for i in range(n):
            x[i] = exp(x[i])


cdef inline real _exp(real v) noexcept nogil:
    """exp in the kernels' dtype: float32 by rtx_expf (vectorisable), float64 by libm."""
    if real is float:
        return rtx_expf(v)
    else:
        return exp(v)


cdef inline void _softmax_run1(const real* x, real* y, Py_ssize_t n) noexcept nogil:
    """_softmax_rows on one segment of n > 0 consecutive scores (H = 1), bit for
    bit: the max in order, exp(x - max) in one vectorised loop, the sum in
    order, times its reciprocal.  (A grouping is stable, so a segment whose
    first and last entries are n - 1 positions apart holds consecutive ones.)"""
    cdef Py_ssize_t i
    cdef real m = x[0]
    cdef real v, z = 0
    for i in range(1, n):
        v = x[i]
        if v > m or v != v:
            m = v
    for i in range(n):
        y[i] = _exp(x[i] - m)
    for i in range(n):
        z += y[i]
    z = 1 / z
    for i in range(n):
        y[i] *= z


cdef inline void _softmax_bwd_run1(const real* y, const real* g, real* o,
                                   Py_ssize_t n) noexcept nogil:
    """_softmax_bwd_rows on one segment of n consecutive entries (H = 1)."""
    cdef Py_ssize_t i
    cdef real d = 0
    for i in range(n):
        d += g[i] * y[i]
    for i in range(n):
        o[i] = y[i] * (g[i] - d)


cdef void _softmax_rows(const real* sp, const int64_t* perm, const int64_t* ptr,
                        Py_ssize_t H, real* yp, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """y = exp(s - max) / sum(exp(s - max)) over each segment in [r0, r1)."""
    cdef real m[SEG_BLOCK]
    cdef real z[SEG_BLOCK]
    cdef real buf[SEG_BUF]
    cdef Py_ssize_t r, k, j, h0, hb, p0, p1, i, kend
    cdef int64_t e
    cdef real v
    kend = ptr[r1]
    for r in range(r0, r1):
        p0 = ptr[r]
        p1 = ptr[r + 1]
        if p0 == p1:
            continue
        if H == 1 and perm[p1 - 1] - perm[p0] == p1 - 1 - p0:
            # one score per entry, the segment's entries side by side (edges in
            # target order): the same steps on contiguous memory
            _softmax_run1(sp + perm[p0], yp + perm[p0], p1 - p0)
            continue
        # the scores (and output slots) of the entries SEG_PREFETCH ahead, read at
        # random: their lines requested while this segment is computed
        for k in range(p0, p1):
            if k + SEG_PREFETCH < kend:
                e = perm[k + SEG_PREFETCH]
                rtx_prefetch(sp + e * H)
                rtx_prefetch_w(yp + e * H)
        h0 = 0
        while h0 < H:
            hb = H - h0 if H - h0 < SEG_BLOCK else SEG_BLOCK
            e = perm[p0]
            for j in range(hb):
                m[j] = sp[e * H + h0 + j]
                z[j] = 0
            for k in range(p0 + 1, p1):
                e = perm[k]
                for j in range(hb):
                    v = sp[e * H + h0 + j]
                    # NaN propagates: once m is NaN it stays NaN
                    if v > m[j] or v != v:
                        m[j] = v
            if (p1 - p0) * hb <= SEG_BUF:
                # the segment's shifted scores side by side, exponentiated in one
                # loop the compiler vectorises (the same _exp, so the same bits)
                i = 0
                for k in range(p0, p1):
                    e = perm[k]
                    for j in range(hb):
                        buf[i + j] = sp[e * H + h0 + j] - m[j]
                    i += hb
                for i in range((p1 - p0) * hb):
                    buf[i] = _exp(buf[i])
                i = 0
                for k in range(p0, p1):
                    for j in range(hb):
                        z[j] += buf[i + j]
                    i += hb
                for j in range(hb):
                    z[j] = 1 / z[j]
                i = 0
                for k in range(p0, p1):
                    e = perm[k]
                    for j in range(hb):
                        yp[e * H + h0 + j] = buf[i + j] * z[j]
                    i += hb
                h0 += hb
                continue
            for k in range(p0, p1):
                e = perm[k]
                for j in range(hb):
                    v = _exp(sp[e * H + h0 + j] - m[j])
                    yp[e * H + h0 + j] = v
                    z[j] += v
            for j in range(hb):
                z[j] = 1 / z[j]
            for k in range(p0, p1):
                e = perm[k]
                for j in range(hb):
                    yp[e * H + h0 + j] *= z[j]
            h0 += hb


cdef void _softmax_bwd_rows(const real* yp, const real* gp, const int64_t* perm,
                            const int64_t* ptr, Py_ssize_t H, real* op,
                            Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """grad_in = y * (g - sum_seg(g * y)) over each segment in [r0, r1)."""
    cdef real d[SEG_BLOCK]
    cdef Py_ssize_t r, k, j, h0, hb, p0, p1, q, kend
    cdef int64_t e
    kend = ptr[r1]
    for r in range(r0, r1):
        p0 = ptr[r]
        p1 = ptr[r + 1]
        if p0 == p1:
            continue
        if H == 1 and perm[p1 - 1] - perm[p0] == p1 - 1 - p0:
            _softmax_bwd_run1(yp + perm[p0], gp + perm[p0], op + perm[p0], p1 - p0)
            continue
        for k in range(p0, p1):     # as in _softmax_rows: the entries ahead
            if k + SEG_PREFETCH < kend:
                e = perm[k + SEG_PREFETCH]
                rtx_prefetch(yp + e * H)
                rtx_prefetch(gp + e * H)
                rtx_prefetch_w(op + e * H)
        h0 = 0
        while h0 < H:
            hb = H - h0 if H - h0 < SEG_BLOCK else SEG_BLOCK
            for j in range(hb):
                d[j] = 0
            for k in range(p0, p1):
                q = perm[k] * H + h0
                for j in range(hb):
                    d[j] += gp[q + j] * yp[q + j]
            for k in range(p0, p1):
                q = perm[k] * H + h0
                for j in range(hb):
                    op[q + j] = yp[q + j] * (gp[q + j] - d[j])
            h0 += hb


cdef void _mean_rows(const real* sp, const int64_t* perm, const int64_t* ptr, Py_ssize_t F,
                     real* op, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """Sum in index order (as index_add), then divide by the count; empty -> 0."""
    cdef Py_ssize_t r, j, n
    cdef real cnt
    _csr_reduce(sp, perm, ptr, F, op, r0, r1)
    for r in range(r0, r1):
        n = ptr[r + 1] - ptr[r]
        if n > 1:
            cnt = <real>n
            for j in range(F):
                op[r * F + j] /= cnt


cdef void _mean_bwd_rows(const real* gp, const int64_t* perm, const int64_t* ptr, Py_ssize_t F,
                         real* op, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """grad_in[e] = g[segment(e)] / count(segment(e))."""
    cdef Py_ssize_t r, k, j
    cdef real cnt
    cdef real* dst
    for r in range(r0, r1):
        cnt = <real>(ptr[r + 1] - ptr[r])
        for k in range(ptr[r], ptr[r + 1]):
            dst = op + perm[k] * F
            for j in range(F):
                dst[j] = gp[r * F + j] / cnt


cdef void _max_rows(const real* sp, const int64_t* perm, const int64_t* ptr, Py_ssize_t F,
                    real* op, int64_t* ap, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """Per segment and column: the max and the position of its FIRST occurrence
    (lowest position; NaN wins and propagates).  Empty segments: 0 and -1."""
    cdef Py_ssize_t r, k, j
    cdef int64_t e
    cdef real v
    cdef real* row
    cdef int64_t* arow
    for r in range(r0, r1):
        row = op + r * F
        arow = ap + r * F
        if ptr[r] == ptr[r + 1]:
            for j in range(F):
                row[j] = 0
                arow[j] = -1
            continue
        e = perm[ptr[r]]
        for j in range(F):
            row[j] = sp[e * F + j]
            arow[j] = e
        for k in range(ptr[r] + 1, ptr[r + 1]):
            e = perm[k]
            for j in range(F):
                v = sp[e * F + j]
                if (v > row[j] or v != v) and row[j] == row[j]:
                    row[j] = v
                    arow[j] = e


cdef void _min_rows(const real* sp, const int64_t* perm, const int64_t* ptr, Py_ssize_t F,
                    real* op, int64_t* ap, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """``_max_rows`` for the min: the position of its FIRST occurrence (NaN wins
    and propagates).  Empty segments: 0 and -1."""
    cdef Py_ssize_t r, k, j
    cdef int64_t e
    cdef real v
    cdef real* row
    cdef int64_t* arow
    for r in range(r0, r1):
        row = op + r * F
        arow = ap + r * F
        if ptr[r] == ptr[r + 1]:
            for j in range(F):
                row[j] = 0
                arow[j] = -1
            continue
        e = perm[ptr[r]]
        for j in range(F):
            row[j] = sp[e * F + j]
            arow[j] = e
        for k in range(ptr[r] + 1, ptr[r + 1]):
            e = perm[k]
            for j in range(F):
                v = sp[e * F + j]
                if (v < row[j] or v != v) and row[j] == row[j]:
                    row[j] = v
                    arow[j] = e


cdef void _arg_bwd_rows(const real* gp, const int64_t* ap, const int64_t* perm,
                        const int64_t* ptr, Py_ssize_t F, real* op,
                        Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """grad_in = 0 except grad_in[arg[r, j], j] = g[r, j] (segment r's rows only):
    the backward of segment max and min (``arg``: their argmax / argmin)."""
    cdef Py_ssize_t r, k, j
    cdef int64_t a
    for r in range(r0, r1):
        for k in range(ptr[r], ptr[r + 1]):
            memset(op + perm[k] * F, 0, <size_t>F * sizeof(real))
        for j in range(F):
            a = ap[r * F + j]
            if a >= 0:
                op[a * F + j] = gp[r * F + j]


cdef enum:
    SEG_SOFTMAX = 0
    SEG_SOFTMAX_BWD = 1
    SEG_MEAN = 2
    SEG_MEAN_BWD = 3
    SEG_MAX = 4
    SEG_MIN = 5
    SEG_ARG_BWD = 6     # max and min backward


cdef void _segment_run(int kind, const real* a, const real* b, const int64_t* perm,
                       const int64_t* ptr, Py_ssize_t F, real* op, int64_t* ap,
                       Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    if kind == SEG_SOFTMAX:
        _softmax_rows(a, perm, ptr, F, op, r0, r1)
    elif kind == SEG_SOFTMAX_BWD:
        _softmax_bwd_rows(a, b, perm, ptr, F, op, r0, r1)
    elif kind == SEG_MEAN:
        _mean_rows(a, perm, ptr, F, op, r0, r1)
    elif kind == SEG_MEAN_BWD:
        _mean_bwd_rows(a, perm, ptr, F, op, r0, r1)
    elif kind == SEG_MAX:
        _max_rows(a, perm, ptr, F, op, ap, r0, r1)
    elif kind == SEG_MIN:
        _min_rows(a, perm, ptr, F, op, ap, r0, r1)
    else:
        _arg_bwd_rows(a, ap, perm, ptr, F, op, r0, r1)


ctypedef struct SegmentJob:
    int kind
    const void* a
    const void* b
    const int64_t* perm
    const int64_t* ptr
    Py_ssize_t F
    void* out
    int64_t* arg
    bint dbl


cdef void _segment_chunk(const void* job, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    cdef const SegmentJob* j = <const SegmentJob*>job
    if j.dbl:
        _segment_run(j.kind, <const double*>j.a, <const double*>j.b, j.perm, j.ptr, j.F,
                     <double*>j.out, j.arg, r0, r1)
    else:
        _segment_run(j.kind, <const float*>j.a, <const float*>j.b, j.perm, j.ptr, j.F,
                     <float*>j.out, j.arg, r0, r1)


cdef int _segment_parallel(int kind, const real* a, const real* b, const int64_t* perm,
                           const int64_t* ptr, Py_ssize_t N, Py_ssize_t F, real* op,
                           int64_t* ap, int T) noexcept nogil:
    """Run a row kernel over segments [0, N) on T threads (the CSR driver:
    the result never depends on the split)."""
    cdef SegmentJob job
    job.kind = kind
    job.a = a
    job.b = b
    job.perm = perm
    job.ptr = ptr
    job.F = F
    job.out = op
    job.arg = ap
    job.dbl = real is double
    return _csr_parallel(_segment_chunk, &job, ptr, N, T, CSR_DYNAMIC)


cdef Py_ssize_t _first_outside(const int64_t[:, ::1] a, int64_t lo, int64_t hi):
    """Flat position of the first entry of ``a`` outside [lo, hi), or -1."""
    cdef Py_ssize_t n = a.shape[0] * a.shape[1]
    cdef Py_ssize_t i
    cdef const int64_t* p
    if n == 0:
        return -1
    p = &a[0, 0]
    with nogil:
        for i in range(n):
            if p[i] < lo or p[i] >= hi:
                return i
    return -1


def segment_softmax_csr(const real[:, ::1] scores, const int64_t[::1] perm,
                        const int64_t[::1] ptr, real[:, ::1] out, int num_threads):
    """Softmax of ``scores`` (E, H) over the entries of each segment (CSR
    ``perm``/``ptr`` over N = len(ptr) - 1 segments), per column.  Stable (the
    segment max is subtracted); entries of no segment do not exist (every
    position belongs to one)."""
    cdef Py_ssize_t E = scores.shape[0]
    cdef Py_ssize_t H = scores.shape[1]
    cdef Py_ssize_t N = ptr.shape[0] - 1
    cdef int T, rc
    if out.shape[0] != E or out.shape[1] != H:
        raise ValueError("segment_softmax_csr: out has the wrong shape")
    _check_grouping(perm, ptr, E, N, "segment_softmax_csr")
    _reset_seen()
    if E == 0 or H == 0:
        return
    T = _segment_threads(num_threads, E, N, H, sizeof(real))
    with nogil:
        rc = _segment_parallel(SEG_SOFTMAX, &scores[0, 0], NULL, &perm[0], &ptr[0], N, H,
                               &out[0, 0], NULL, T)
    if rc != 0:
        raise MemoryError("segment_softmax_csr: out of memory")


def segment_softmax_backward_csr(const real[:, ::1] y, const real[:, ::1] grad,
                                 const int64_t[::1] perm, const int64_t[::1] ptr,
                                 real[:, ::1] out, int num_threads):
    """grad_in = y * (grad - segsum(grad * y)), one fused pass per segment."""
    cdef Py_ssize_t E = y.shape[0]
    cdef Py_ssize_t H = y.shape[1]
    cdef Py_ssize_t N = ptr.shape[0] - 1
    cdef int T, rc
    if (grad.shape[0] != E or grad.shape[1] != H or out.shape[0] != E
            or out.shape[1] != H):
        raise ValueError("segment_softmax_backward_csr: shapes do not match")
    _check_grouping(perm, ptr, E, N, "segment_softmax_backward_csr")
    _reset_seen()
    if E == 0 or H == 0:
        return
    T = _segment_threads(num_threads, E, N, H, sizeof(real))
    with nogil:
        rc = _segment_parallel(SEG_SOFTMAX_BWD, &y[0, 0], &grad[0, 0], &perm[0], &ptr[0], N, H,
                               &out[0, 0], NULL, T)
    if rc != 0:
        raise MemoryError("segment_softmax_backward_csr: out of memory")


def segment_mean_csr(const real[:, ::1] src, const int64_t[::1] perm, const int64_t[::1] ptr,
                     real[:, ::1] out, int num_threads):
    """out[r] = mean of src over segment r's entries (0 for an empty segment)."""
    cdef Py_ssize_t E = src.shape[0]
    cdef Py_ssize_t F = src.shape[1]
    cdef Py_ssize_t N = out.shape[0]
    cdef const real* sp = NULL
    cdef int T, rc
    if out.shape[1] != F or ptr.shape[0] != N + 1:
        raise ValueError("segment_mean_csr: shapes do not match")
    _check_grouping(perm, ptr, E, N, "segment_mean_csr")
    _reset_seen()
    if N == 0 or F == 0:
        return
    if E > 0:
        sp = &src[0, 0]
    T = _segment_threads(num_threads, E, N, F, sizeof(real))
    with nogil:
        rc = _segment_parallel(SEG_MEAN, sp, NULL, &perm[0] if E > 0 else NULL, &ptr[0], N, F,
                               &out[0, 0], NULL, T)
    if rc != 0:
        raise MemoryError("segment_mean_csr: out of memory")


def segment_mean_backward_csr(const real[:, ::1] grad, const int64_t[::1] perm,
                              const int64_t[::1] ptr, real[:, ::1] out, int num_threads):
    """out[e] = grad[segment(e)] / count(segment(e))."""
    cdef Py_ssize_t N = grad.shape[0]
    cdef Py_ssize_t F = grad.shape[1]
    cdef Py_ssize_t E = out.shape[0]
    cdef int T, rc
    if out.shape[1] != F or ptr.shape[0] != N + 1:
        raise ValueError("segment_mean_backward_csr: shapes do not match")
    _check_grouping(perm, ptr, E, N, "segment_mean_backward_csr")
    _reset_seen()
    if E == 0 or F == 0:
        return
    T = _segment_threads(num_threads, E, N, F, sizeof(real))
    with nogil:
        rc = _segment_parallel(SEG_MEAN_BWD, &grad[0, 0], NULL, &perm[0], &ptr[0], N, F,
                               &out[0, 0], NULL, T)
    if rc != 0:
        raise MemoryError("segment_mean_backward_csr: out of memory")


cdef _extreme_csr(int kind, str op, const real[:, ::1] src, const int64_t[::1] perm,
                  const int64_t[::1] ptr, real[:, ::1] out, int64_t[:, ::1] arg,
                  int num_threads):
    """segment max / min (``kind``): the values and their first positions."""
    cdef Py_ssize_t E = src.shape[0]
    cdef Py_ssize_t F = src.shape[1]
    cdef Py_ssize_t N = out.shape[0]
    cdef const real* sp = NULL
    cdef int T, rc
    if (out.shape[1] != F or arg.shape[0] != N or arg.shape[1] != F
            or ptr.shape[0] != N + 1):
        raise ValueError(f"{op}: shapes do not match")
    _check_grouping(perm, ptr, E, N, op)
    _reset_seen()
    if N == 0 or F == 0:
        return
    if E > 0:
        sp = &src[0, 0]
    T = _segment_threads(num_threads, E, N, F, sizeof(real))
    with nogil:
        rc = _segment_parallel(kind, sp, NULL, &perm[0] if E > 0 else NULL, &ptr[0], N, F,
                               &out[0, 0], &arg[0, 0], T)
    if rc != 0:
        raise MemoryError(f"{op}: out of memory")


cdef _arg_backward_csr(str op, str argname, const real[:, ::1] grad,
                       const int64_t[:, ::1] arg, const int64_t[::1] perm,
                       const int64_t[::1] ptr, real[:, ::1] out, int num_threads):
    """The backward of segment max / min: ``grad`` to the ``arg`` positions."""
    cdef Py_ssize_t N = grad.shape[0]
    cdef Py_ssize_t F = grad.shape[1]
    cdef Py_ssize_t E = out.shape[0]
    cdef int T, rc
    if (out.shape[1] != F or arg.shape[0] != N or arg.shape[1] != F
            or ptr.shape[0] != N + 1):
        raise ValueError(f"{op}: shapes do not match")
    _check_grouping(perm, ptr, E, N, op)
    if _first_outside(arg, -1, E) >= 0:
        raise IndexError(f"{op}: {argname} holds a position outside [-1, E)")
    _reset_seen()
    if E == 0 or F == 0:
        return
    T = _segment_threads(num_threads, E, N, F, sizeof(real))
    with nogil:
        rc = _segment_parallel(SEG_ARG_BWD, &grad[0, 0], NULL, &perm[0], &ptr[0], N, F,
                               &out[0, 0], <int64_t*>&arg[0, 0], T)
    if rc != 0:
        raise MemoryError(f"{op}: out of memory")


def segment_max_csr(const real[:, ::1] src, const int64_t[::1] perm, const int64_t[::1] ptr,
                    real[:, ::1] out, int64_t[:, ::1] argmax, int num_threads):
    """out[r, j] = max of src[:, j] over segment r (0 when empty); ``argmax``
    the position of its first occurrence (-1 when empty).  NaN propagates (the
    first NaN wins)."""
    _extreme_csr(SEG_MAX, "segment_max_csr", src, perm, ptr, out, argmax, num_threads)


def segment_max_backward_csr(const real[:, ::1] grad, const int64_t[:, ::1] argmax,
                             const int64_t[::1] perm, const int64_t[::1] ptr,
                             real[:, ::1] out, int num_threads):
    """out = 0 except out[argmax[r, j], j] = grad[r, j]; ``argmax`` from
    ``segment_max_csr`` with the same grouping."""
    _arg_backward_csr("segment_max_backward_csr", "argmax", grad, argmax, perm, ptr, out,
                      num_threads)


def segment_min_csr(const real[:, ::1] src, const int64_t[::1] perm, const int64_t[::1] ptr,
                    real[:, ::1] out, int64_t[:, ::1] argmin, int num_threads):
    """out[r, j] = min of src[:, j] over segment r (0 when empty); ``argmin``
    the position of its first occurrence (-1 when empty).  NaN propagates (the
    first NaN wins)."""
    _extreme_csr(SEG_MIN, "segment_min_csr", src, perm, ptr, out, argmin, num_threads)


def segment_min_backward_csr(const real[:, ::1] grad, const int64_t[:, ::1] argmin,
                             const int64_t[::1] perm, const int64_t[::1] ptr,
                             real[:, ::1] out, int num_threads):
    """out = 0 except out[argmin[r, j], j] = grad[r, j]; ``argmin`` from
    ``segment_min_csr`` with the same grouping."""
    _arg_backward_csr("segment_min_backward_csr", "argmin", grad, argmin, perm, ptr, out,
                      num_threads)


# ------------------------------------------------- segment softmax by entry order
# For narrow rows (H * itemsize <= ENTRY_MAX_ROW_BYTES_FWD / _BWD) and a random
# index, the CSR kernels above touch one cache line per entry at random.  This variant
# keeps the E-sized arrays sequential and only the N-sized per-segment state
# (max, sum: small enough to stay cached) random.  Each thread owns a range of
# segments (``_row_bounds``) and folds their entries in increasing position, as
# the CSR kernels do, so both give the same bits for any thread count (the max
# is exact; it keeps the first of equal values, which only the sign of a zero
# could tell, and exp(s - max) does not see it).
#
# On T > 1 threads the owners' entries are found without a grouping: each thread
# copies the entries of its own position range into per-owner buckets (counted
# first, then filled; the buckets of one owner side by side in thread order, so
# in increasing position).  Owners compute their state from their contiguous
# copies (the forward copies s and keeps exp(s - max) in the copy; the backward
# copies the products g * y), then every thread writes
# the outputs of its own position range, finding each entry's copy by replaying
# the fill: sequential, and no two threads write one cache line.

# Widest rows (bytes) sent to the entry-order kernels: measured on 2 threads,
# E = 1e6 random over N = 1e5 (docs/performance.md, 2026-12-03), ms against the CSR
# kernels': forward float32 H=1 4.7 vs 8.0, H=2 7.1 vs 9.8, H=4 13.5 vs 11.6 (CSR
# wins), float64 H=1 6.5 vs 10.7, H=2 15.3 vs 14.1 (CSR wins); backward float32 H=1
# 2.2 vs 4.8, H=2 4.5 vs 7.8, H=4 7.5 vs 8.9, float64 H=2 7.7 vs 11.0, H=4 24.1 vs
# 13.0 (CSR wins).
cdef Py_ssize_t ENTRY_MAX_ROW_BYTES_FWD = 8
cdef Py_ssize_t ENTRY_MAX_ROW_BYTES_BWD = 16


cdef enum:
    # Teams of the entry-order kernels: at most this many threads (each thread's
    # bucket counts are a T x T table on the stack; the kernels are for small teams).
    ENTRY_MAX_THREADS = 8


cdef inline real _max_nan(real m, real v) noexcept nogil:
    """The running max of the kernels (v replaces m when greater or NaN), branch-free:
    float32 as a bitwise blend (gcc vectorises the loops over a row's heads with
    it), float64 and the one-head loops in SSE2 registers (_max_nan1)."""
    if real is float:
        return rtx_self((v > m) | (v != v), v, m)
    else:
        return rtx_maxnan_d(m, v)


cdef inline real _max_nan1(real m, real v) noexcept nogil:
    """``_max_nan`` for scalar loops (one head: m[ip[k]] updated through memory),
    the same bits (rtx_maxnan_f / _d in _vmath.pxi)."""
    if real is float:
        return rtx_maxnan_f(m, v)
    else:
        return rtx_maxnan_d(m, v)


cdef void _ent_max(const real* sp, const index_t* ip, Py_ssize_t n, Py_ssize_t H,
                   real* m) noexcept nogil:
    """m[r] = max(m[r], s[k]) over the entries k < n (segment r = ip[k])."""
    cdef Py_ssize_t k, j, q
    if H == 1:
        for k in range(n):
            q = <Py_ssize_t>ip[k]
            m[q] = _max_nan1(m[q], sp[k])
        return
    for k in range(n):
        q = <Py_ssize_t>ip[k] * H
        for j in range(H):
            m[q + j] = _max_nan(m[q + j], sp[k * H + j])


cdef void _ent_exp1(const real* sp, const index_t* ip, Py_ssize_t n, const real* m,
                    real* ex) noexcept nogil:
    """ex[k] = exp(s[k] - m[r]) over the entries k < n (H = 1, ex may be sp): in
    blocks, the shifted scores side by side, exponentiated in one vectorised loop
    (_exp_block); the sums are the caller's (_ent_expsum, _ent_sum4)."""
    cdef Py_ssize_t k, k0, k1
    cdef real buf[SEG_BUF]
    k0 = 0
    while k0 < n:
        k1 = k0 + SEG_BUF if k0 + SEG_BUF < n else n
        for k in range(k0, k1):
            buf[k - k0] = sp[k] - m[<Py_ssize_t>ip[k]]
        _exp_block(buf, k1 - k0)
        for k in range(k0, k1):
            ex[k] = buf[k - k0]
        k0 = k1


cdef void _ent_expsum(const real* sp, const index_t* ip, Py_ssize_t n, Py_ssize_t H,
                      const real* m, real* z, real* ex) noexcept nogil:
    """ex[k] = exp(s[k] - m[r]) and z[r] += ex[k] over the entries k < n, in order
    (ex may be sp itself).  In blocks: the shifted scores side by side,
    exponentiated in one vectorised loop, then summed in order; rows wider than a
    block one value at a time (the same _exp: the same bits)."""
    cdef Py_ssize_t k, j, i, k0, k1, kb, q
    cdef real v
    cdef real buf[SEG_BUF]
    kb = SEG_BUF // H
    if kb == 0:
        for k in range(n):
            q = <Py_ssize_t>ip[k] * H
            for j in range(H):
                v = _exp(sp[k * H + j] - m[q + j])
                ex[k * H + j] = v
                z[q + j] += v
        return
    k0 = 0
    while k0 < n:
        k1 = k0 + kb if k0 + kb < n else n
        if H == 1:
            _ent_exp1(sp + k0, ip + k0, k1 - k0, m, ex + k0)
            for k in range(k0, k1):
                z[<Py_ssize_t>ip[k]] += ex[k]
        else:
            i = 0
            for k in range(k0, k1):
                q = <Py_ssize_t>ip[k] * H
                for j in range(H):
                    buf[i + j] = sp[k * H + j] - m[q + j]
                i += H
            _exp_block(buf, (k1 - k0) * H)
            i = 0
            for k in range(k0, k1):
                q = <Py_ssize_t>ip[k] * H
                for j in range(H):
                    v = buf[i + j]
                    ex[k * H + j] = v
                    z[q + j] += v
                i += H
        k0 = k1


cdef void _ent_dot(const real* yp, const real* gp, const index_t* ip, Py_ssize_t n,
                   Py_ssize_t H, real* d) noexcept nogil:
    """d[r] += g[k] * y[k] over the entries k < n, in order."""
    cdef Py_ssize_t k, j, q
    if H == 1:
        for k in range(n):
            d[<Py_ssize_t>ip[k]] += gp[k] * yp[k]
        return
    for k in range(n):
        q = <Py_ssize_t>ip[k] * H
        for j in range(H):
            d[q + j] += gp[k * H + j] * yp[k * H + j]


cdef void _ent_sum(const real* pp, const index_t* ip, Py_ssize_t n, Py_ssize_t H,
                   real* d) noexcept nogil:
    """d[r] += p[k] over the entries k < n, in order (p: _ent_fill's products g * y)."""
    cdef Py_ssize_t k, j, q
    if H == 1:
        for k in range(n):
            d[<Py_ssize_t>ip[k]] += pp[k]
        return
    for k in range(n):
        q = <Py_ssize_t>ip[k] * H
        for j in range(H):
            d[q + j] += pp[k * H + j]


cdef enum:
    ENT_STREAMS = 4          # sorted one-head chunks: interleaved runs of segments
    ENT_STREAMS_MIN = 1024   # entries from which a sorted chunk is split in streams


cdef void _ent_stream_cuts(const index_t* ip, Py_ssize_t n, Py_ssize_t* c) noexcept nogil:
    """c[0 .. ENT_STREAMS]: ENT_STREAMS parts of the sorted entries [0, n), each cut
    between two segments (_sorted_cut), so no segment has entries in two parts."""
    cdef Py_ssize_t t
    for t in range(ENT_STREAMS + 1):
        c[t] = _sorted_cut(ip, n, t, ENT_STREAMS)


cdef inline Py_ssize_t _ent_common(const Py_ssize_t* c) noexcept nogil:
    """The length every part of c has (the interleaved loop's count; tails follow)."""
    cdef Py_ssize_t t, L = c[1] - c[0]
    for t in range(1, ENT_STREAMS):
        if c[t + 1] - c[t] < L:
            L = c[t + 1] - c[t]
    return L


cdef void _ent_max4(const real* sp, const index_t* ip, const Py_ssize_t* c,
                    real* m) noexcept nogil:
    """_ent_max (H = 1) over sorted entries split in the parts c: one entry of each
    part per step.  A segment's entries lie in one part and are visited in order,
    so every segment gets the same max steps in the same order (the same bits);
    the parts' chains of dependent maxima (each waits for its segment's last
    store) overlap instead of running one after another."""
    cdef Py_ssize_t L = _ent_common(c), j, t, q0, q1, q2, q3
    cdef const real* s0 = sp + c[0]
    cdef const real* s1 = sp + c[1]
    cdef const real* s2 = sp + c[2]
    cdef const real* s3 = sp + c[3]
    cdef const index_t* i0 = ip + c[0]
    cdef const index_t* i1 = ip + c[1]
    cdef const index_t* i2 = ip + c[2]
    cdef const index_t* i3 = ip + c[3]
    for j in range(L):
        q0 = <Py_ssize_t>i0[j]
        q1 = <Py_ssize_t>i1[j]
        q2 = <Py_ssize_t>i2[j]
        q3 = <Py_ssize_t>i3[j]
        m[q0] = _max_nan1(m[q0], s0[j])
        m[q1] = _max_nan1(m[q1], s1[j])
        m[q2] = _max_nan1(m[q2], s2[j])
        m[q3] = _max_nan1(m[q3], s3[j])
    for t in range(ENT_STREAMS):
        _ent_max(sp + c[t] + L, ip + c[t] + L, c[t + 1] - c[t] - L, 1, m)


cdef void _ent_sum4(const real* pp, const real* gp, const index_t* ip, const Py_ssize_t* c,
                    real* d) noexcept nogil:
    """d[r] += p[k] (gp NULL: _ent_sum) or d[r] += g[k] * p[k] (_ent_dot, p = y) over
    sorted entries split in the parts c, H = 1: one entry of each part per step
    (each segment's sum in its order: the same bits, as _ent_max4)."""
    cdef Py_ssize_t L = _ent_common(c), j, t, q0, q1, q2, q3
    cdef const real* p0 = pp + c[0]
    cdef const real* p1 = pp + c[1]
    cdef const real* p2 = pp + c[2]
    cdef const real* p3 = pp + c[3]
    cdef const index_t* i0 = ip + c[0]
    cdef const index_t* i1 = ip + c[1]
    cdef const index_t* i2 = ip + c[2]
    cdef const index_t* i3 = ip + c[3]
    cdef const real* g0
    cdef const real* g1
    cdef const real* g2
    cdef const real* g3
    if gp == NULL:
        for j in range(L):
            q0 = <Py_ssize_t>i0[j]
            q1 = <Py_ssize_t>i1[j]
            q2 = <Py_ssize_t>i2[j]
            q3 = <Py_ssize_t>i3[j]
            d[q0] += p0[j]
            d[q1] += p1[j]
            d[q2] += p2[j]
            d[q3] += p3[j]
        for t in range(ENT_STREAMS):
            _ent_sum(pp + c[t] + L, ip + c[t] + L, c[t + 1] - c[t] - L, 1, d)
        return
    g0 = gp + c[0]
    g1 = gp + c[1]
    g2 = gp + c[2]
    g3 = gp + c[3]
    for j in range(L):
        q0 = <Py_ssize_t>i0[j]
        q1 = <Py_ssize_t>i1[j]
        q2 = <Py_ssize_t>i2[j]
        q3 = <Py_ssize_t>i3[j]
        d[q0] += g0[j] * p0[j]
        d[q1] += g1[j] * p1[j]
        d[q2] += g2[j] * p2[j]
        d[q3] += g3[j] * p3[j]
    for t in range(ENT_STREAMS):
        _ent_dot(pp + c[t] + L, gp + c[t] + L, ip + c[t] + L, c[t + 1] - c[t] - L, 1, d)


cdef void _ent_state(bint backward, const real* a, const real* b, const index_t* ip,
                     Py_ssize_t n, Py_ssize_t H, real* m, real* z, real* ex, Py_ssize_t lo,
                     Py_ssize_t hi, const Py_ssize_t* cuts=NULL) noexcept nogil:
    """The state of segments [lo, hi) from their n entries (in increasing position):
    forward, the max in m, 1 / sum(exp(s - max)) in z (0 stays 0) and each entry's
    exp(s - max) in ex; backward, sum(g * y) in m (from a = y and b = g, or from
    a = the products g * y when b is NULL).  ``cuts`` (H = 1, sorted entries):
    their parts (_ent_stream_cuts), run interleaved; the same bits."""
    cdef Py_ssize_t k
    if backward:
        for k in range(lo * H, hi * H):
            m[k] = 0
        if cuts != NULL:
            _ent_sum4(a, b, ip, cuts, m)    # (b NULL: a holds the products)
        elif b != NULL:
            _ent_dot(a, b, ip, n, H, m)
        else:
            _ent_sum(a, ip, n, H, m)
        return
    for k in range(lo * H, hi * H):
        m[k] = -INFINITY
        z[k] = 0
    if cuts != NULL:
        _ent_max4(a, ip, cuts, m)
        _ent_exp1(a, ip, n, m, ex)
        _ent_sum4(ex, NULL, ip, cuts, z)
    else:
        _ent_max(a, ip, n, H, m)
        _ent_expsum(a, ip, n, H, m, z, ex)
    for k in range(lo * H, hi * H):
        if z[k] != 0:
            z[k] = 1 / z[k]


cdef inline Py_ssize_t _ent_owner(int64_t r, const Py_ssize_t* bounds, int T) noexcept nogil:
    """The thread whose segment range [bounds[u], bounds[u + 1]) holds r, branch-free."""
    cdef Py_ssize_t u
    cdef Py_ssize_t o = 0
    for u in range(1, T):
        o += r >= bounds[u]
    return o


cdef void _ent_count(const index_t* ip, Py_ssize_t e0, Py_ssize_t e1, const Py_ssize_t* bounds,
                     int T, Py_ssize_t* count) noexcept nogil:
    """count[u] = how many of the entries [e0, e1) owner u holds (counted in a
    local table: the T threads' tables share cache lines)."""
    cdef Py_ssize_t c[ENTRY_MAX_THREADS]
    cdef Py_ssize_t u, e, n1
    cdef int64_t split
    if T == 2:
        n1 = 0
        split = bounds[1]
        for e in range(e0, e1):
            n1 += <int64_t>ip[e] >= split
        count[0] = e1 - e0 - n1
        count[1] = n1
        return
    for u in range(T):
        c[u] = 0
    for e in range(e0, e1):
        c[_ent_owner(<int64_t>ip[e], bounds, T)] += 1
    for u in range(T):
        count[u] = c[u]


cdef void _ent_fill(const real* a, const real* b, const index_t* ip, Py_ssize_t H,
                    Py_ssize_t e0, Py_ssize_t e1, const Py_ssize_t* bounds, int T,
                    const Py_ssize_t* offset, index_t* qi, real* qa) noexcept nogil:
    """Bucket the entries [e0, e1) by owner: the i-th one owner u holds goes to
    slot offset[u] + i of the copies (its index in qi, and in qa its row of a or,
    when b is given, of b * a: the backward's products, the bits _ent_dot forms)."""
    cdef Py_ssize_t c[ENTRY_MAX_THREADS]
    cdef Py_ssize_t u, e, j, k, k0, k1
    cdef int64_t split
    if T == 2:
        # the two write positions in registers (a table in memory makes every
        # entry wait for the previous one's store)
        k0 = offset[0]
        k1 = offset[1]
        split = bounds[1]
        for e in range(e0, e1):
            u = <int64_t>ip[e] >= split
            k = k0 ^ ((k0 ^ k1) & -u)      # k1 if u else k0, branch-free
            k0 += 1 - u
            k1 += u
            qi[k] = ip[e]
            if b == NULL:
                if H == 1:
                    qa[k] = a[e]
                else:
                    for j in range(H):
                        qa[k * H + j] = a[e * H + j]
            elif H == 1:
                qa[k] = b[e] * a[e]
            else:
                for j in range(H):
                    qa[k * H + j] = b[e * H + j] * a[e * H + j]
        return
    for u in range(T):
        c[u] = offset[u]
    for e in range(e0, e1):
        u = _ent_owner(<int64_t>ip[e], bounds, T)
        k = c[u]
        c[u] = k + 1
        qi[k] = ip[e]
        if b == NULL:
            for j in range(H):
                qa[k * H + j] = a[e * H + j]
        else:
            for j in range(H):
                qa[k * H + j] = b[e * H + j] * a[e * H + j]


cdef void _ent_write(const index_t* ip, Py_ssize_t H, const real* z, const real* ex,
                     real* yp, Py_ssize_t e0, Py_ssize_t e1, const Py_ssize_t* bounds, int T,
                     const Py_ssize_t* offset) noexcept nogil:
    """y = exp(s - m[r]) * z[r] for the entries [e0, e1), the exponentials read
    from ex: at the same position (no bounds), or from the bucket slot _ent_fill
    gave the entry (its walk replayed from offset)."""
    cdef Py_ssize_t c[ENTRY_MAX_THREADS]
    cdef Py_ssize_t u, e, j, k, k0, k1, q
    cdef int64_t split
    if bounds == NULL:
        if H == 1:
            for e in range(e0, e1):
                yp[e] = ex[e] * z[<Py_ssize_t>ip[e]]
        else:
            for e in range(e0, e1):
                q = <Py_ssize_t>ip[e] * H
                for j in range(H):
                    yp[e * H + j] = ex[e * H + j] * z[q + j]
        return
    if T == 2:
        k0 = offset[0]
        k1 = offset[1]
        split = bounds[1]
        for e in range(e0, e1):
            u = <int64_t>ip[e] >= split
            k = k0 ^ ((k0 ^ k1) & -u)
            k0 += 1 - u
            k1 += u
            q = <Py_ssize_t>ip[e] * H
            if H == 1:
                yp[e] = ex[k] * z[q]
            else:
                for j in range(H):
                    yp[e * H + j] = ex[k * H + j] * z[q + j]
        return
    for u in range(T):
        c[u] = offset[u]
    for e in range(e0, e1):
        u = _ent_owner(<int64_t>ip[e], bounds, T)
        k = c[u]
        c[u] = k + 1
        q = <Py_ssize_t>ip[e] * H
        for j in range(H):
            yp[e * H + j] = ex[k * H + j] * z[q + j]


cdef void _ent_bwd_write(const real* yp, const real* gp, const index_t* ip, Py_ssize_t H,
                         const real* d, real* op, Py_ssize_t e0, Py_ssize_t e1) noexcept nogil:
    """grad_in = y * (g - d[r]) for the entries [e0, e1)."""
    cdef Py_ssize_t e, j, q
    if H == 1:
        for e in range(e0, e1):
            op[e] = yp[e] * (gp[e] - d[<Py_ssize_t>ip[e]])
        return
    for e in range(e0, e1):
        q = <Py_ssize_t>ip[e] * H
        for j in range(H):
            op[e * H + j] = yp[e * H + j] * (gp[e * H + j] - d[q + j])


cdef void _ent_team(bint backward, const real* a, const real* b, const index_t* ip,
                    Py_ssize_t E, Py_ssize_t N, Py_ssize_t H, real* op, int T,
                    const Py_ssize_t* bounds, Py_ssize_t* count, Py_ssize_t* start,
                    index_t* qi, real* qa, real* state) noexcept nogil:
    """One thread's share of the T tasks of each step, inside one parallel region,
    the steps separated by barriers (one region instead of four: measured 5-10 %
    faster on 2 threads when the call follows an idle spell).  Works for any
    team size."""
    cdef int tid = rtx_omp_thread_num()
    cdef int nt = rtx_omp_num_threads()
    cdef Py_ssize_t t, u, e, acc
    cdef real* z = state + N * H
    _mark_seen()
    t = tid
    while t < T:
        _ent_count(ip, (E * t) // T, (E * (t + 1)) // T, bounds, T, count + t * T)
        t += nt
    rtx_omp_barrier()
    if tid == 0:
        # owner u's copies: [start[u], start[u + 1]), thread 0's bucket first;
        # count[t * T + u] becomes where thread t's bucket for owner u begins
        acc = 0
        for u in range(T):
            start[u] = acc
            for t in range(T):
                e = count[t * T + u]
                count[t * T + u] = acc
                acc += e
        start[T] = acc
    rtx_omp_barrier()
    t = tid
    while t < T:
        _ent_fill(a, b, ip, H, (E * t) // T, (E * (t + 1)) // T, bounds, T, count + t * T,
                  qi, qa)
        t += nt
    rtx_omp_barrier()
    u = tid
    while u < T:
        _ent_state(backward, qa + start[u] * H, NULL,
                   qi + start[u], start[u + 1] - start[u], H, state, z, qa + start[u] * H,
                   bounds[u], bounds[u + 1])
        u += nt
    rtx_omp_barrier()
    t = tid
    while t < T:
        if backward:
            _ent_bwd_write(a, b, ip, H, state, op, (E * t) // T, (E * (t + 1)) // T)
        else:
            _ent_write(ip, H, z, qa, op, (E * t) // T, (E * (t + 1)) // T, bounds, T,
                       count + t * T)
        t += nt


cdef void _ent_chunk(bint backward, const real* a, const real* b, const index_t* ip,
                     Py_ssize_t e0, Py_ssize_t e1, Py_ssize_t lo, Py_ssize_t hi,
                     Py_ssize_t N, Py_ssize_t H, real* op, real* state,
                     bint is_sorted=False) noexcept nogil:
    """The one-thread entry-order passes over entries [e0, e1), whose segments
    lie in [lo, hi) and hold no other entry (all of them on one thread; a chunk
    of sorted indices cut between two segments): their state in ``state``'s
    rows [lo, hi), the outputs at the entries' positions.  ``is_sorted``: the
    entries' indices never descend (one head: the passes then run on interleaved
    parts, _ent_stream_cuts; a false word gives wrong values, never an access
    outside the state)."""
    cdef real* z = state + N * H
    cdef Py_ssize_t n = e1 - e0
    cdef Py_ssize_t c[ENT_STREAMS + 1]
    cdef const Py_ssize_t* cuts = NULL
    if n <= 0:
        return
    if is_sorted and H == 1 and n >= ENT_STREAMS_MIN:
        # one score per entry, sorted: each segment's maxima and sums are a chain
        # of dependent steps through its state, so split the chunk in parts run
        # interleaved (their chains overlap)
        _ent_stream_cuts(ip + e0, n, c)
        cuts = c
    if backward:
        _ent_state(True, a + e0 * H, b + e0 * H, ip + e0, n, H, state, z, NULL, lo, hi, cuts)
        _ent_bwd_write(a + e0 * H, b + e0 * H, ip + e0, H, state, op + e0 * H, 0, n)
    else:   # the exponentials kept in the output, scaled in place
        _ent_state(False, a + e0 * H, NULL, ip + e0, n, H, state, z, op + e0 * H, lo, hi,
                   cuts)
        _ent_write(ip + e0, H, z, op + e0 * H, op + e0 * H, 0, n, NULL, 1, NULL)


cdef int _ent_chunk_runs(bint backward, const real* a, const real* b, const index_t* ip,
                         Py_ssize_t e0, Py_ssize_t e1, Py_ssize_t H,
                         real* op) noexcept nogil:
    """``_ent_chunk`` over sorted entries [e0, e1) with the state indexed by run
    (each segment is one run of equal indices) instead of by segment: memory for
    the runs present, where segment ids span far more (a grouped HetGAT layer's
    (target, relation) segments: 600,000 of them for 133,334 edges at 60
    relations).  The same passes over the same groups in the same order: the
    same bits.  -1 when out of memory (nothing written)."""
    cdef Py_ssize_t n = e1 - e0
    cdef Py_ssize_t k, nr
    cdef index_t* rid
    cdef real* st
    if n <= 0:
        return 0
    rid = <index_t*>malloc(<size_t>n * sizeof(index_t))
    if rid == NULL:
        return -1
    nr = 0
    rid[0] = 0
    for k in range(1, n):
        nr += ip[e0 + k] != ip[e0 + k - 1]
        rid[k] = <index_t>nr
    nr += 1
    st = <real*>malloc(<size_t>(2 * nr * H) * sizeof(real))
    if st == NULL:
        free(rid)
        return -1
    cdef const real* bb = NULL     # (an if, not a ternary: Cython's temporary drops const)
    if b != NULL:
        bb = b + e0 * H
    _ent_chunk(backward, a + e0 * H, bb, rid, 0, n, 0, nr, nr, H, op + e0 * H, st, True)
    free(st)
    free(rid)
    return 0


cdef inline Py_ssize_t _sorted_cut(const index_t* ip, Py_ssize_t E, Py_ssize_t t,
                                   Py_ssize_t T) noexcept nogil:
    """Where chunk t of T starts: about E * t / T, moved forward past the
    entries of the segment that straddles it (sorted indices)."""
    cdef Py_ssize_t c
    if t <= 0:
        return 0
    if t >= T:
        return E
    c = (E * t) // T
    while 0 < c < E and ip[c] == ip[c - 1]:
        c += 1
    return c


cdef int _softmax_by_entries(bint backward, const real* a, const real* b, const index_t* ip,
                             Py_ssize_t E, Py_ssize_t N, Py_ssize_t H, real* op,
                             int T, bint is_sorted=False) noexcept nogil:
    """Forward (a = scores) or backward (a = y, b = grad) on T threads (see above).
    ``is_sorted``: the indices are non-decreasing (a checked plan's cached
    count of descents is 0): then each thread runs the one-thread passes on its
    own chunk of positions, cut between segments -- no buckets."""
    cdef Py_ssize_t t, e0, e1
    cdef Py_ssize_t bounds[ENTRY_MAX_THREADS + 1]
    cdef Py_ssize_t count[ENTRY_MAX_THREADS * ENTRY_MAX_THREADS]
    cdef Py_ssize_t start[ENTRY_MAX_THREADS + 1]
    cdef int failed[ENTRY_MAX_THREADS]
    cdef size_t qi_bytes
    cdef real* state
    cdef index_t* qi
    cdef real* qa
    if T > ENTRY_MAX_THREADS:
        T = ENTRY_MAX_THREADS
    if is_sorted and N > E:
        # more segments than entries: the state by run (_ent_chunk_runs), not by
        # segment (whose 2 * N * H values would be most of the call's memory)
        if T <= 1:
            _mark_seen()
            return _ent_chunk_runs(backward, a, b, ip, 0, E, H, op)
        for t in prange(T, num_threads=T, schedule="static", chunksize=1):
            _mark_seen()
            e0 = _sorted_cut(ip, E, t, T)
            e1 = _sorted_cut(ip, E, t + 1, T)
            failed[t] = _ent_chunk_runs(backward, a, b, ip, e0, e1, H, op)
        for t in range(T):
            if failed[t] != 0:
                return -1
        return 0
    state = <real*>malloc(<size_t>(2 * N * H if N > 0 else 1) * sizeof(real))
    if state == NULL:
        return -1
    if is_sorted and T > 1:
        for t in prange(T, num_threads=T, schedule="static", chunksize=1):
            _mark_seen()
            e0 = _sorted_cut(ip, E, t, T)
            e1 = _sorted_cut(ip, E, t + 1, T)
            if e1 > e0:
                _ent_chunk(backward, a, b, ip, e0, e1, <Py_ssize_t>ip[e0],
                           <Py_ssize_t>ip[e1 - 1] + 1, N, H, op, state, True)
        free(state)
        return 0
    if T == 1:
        _mark_seen()
        _ent_chunk(backward, a, b, ip, 0, E, 0, N, N, H, op, state, is_sorted)
        free(state)
        return 0
    # the index copies, then the values from a 64-byte boundary: int32 copies of an
    # odd count would leave float64 values misaligned (UB; UBSan's report)
    qi_bytes = (<size_t>E * sizeof(index_t) + 63) // 64 * 64
    qi = <index_t*>malloc(qi_bytes + <size_t>E * H * sizeof(real))
    if qi == NULL:
        free(state)
        return -1
    qa = <real*>((<char*>qi) + qi_bytes)
    _row_bounds(ip, E, N, T, bounds)
    with parallel(num_threads=T):
        _ent_team(backward, a, b, ip, E, N, H, op, T, bounds, count, start, qi, qa, state)
    free(qi)
    free(state)
    return 0


def softmax_entry_mode(Py_ssize_t H, Py_ssize_t itemsize, int num_threads, bint backward):
    #: -> bool
    """Whether the entry-order kernel is the faster one for rows of ``H``
    items of ``itemsize`` bytes on ``num_threads`` (the results are equal).  It
    buckets the entries by owning thread, for small teams only."""
    cdef Py_ssize_t limit = ENTRY_MAX_ROW_BYTES_BWD if backward else ENTRY_MAX_ROW_BYTES_FWD
    return H * itemsize <= limit and num_threads <= 4


def segment_softmax_entries(const real[:, ::1] scores, const index_t[::1] idx,
                            Py_ssize_t num_segments, real[:, ::1] out, int num_threads,
                            bint is_sorted=False):
    """``segment_softmax_csr`` computed in entry order from the (checked) index
    itself: no CSR grouping needed, bitwise equal to the CSR kernel.
    ``is_sorted``: the caller's word that ``idx`` never descends (a checked
    plan's cached descent count is 0); each thread then takes a chunk of
    positions cut between segments.  A false word gives wrong values (threads
    sharing a segment's state), never an access outside ``out`` or the state."""
    cdef Py_ssize_t E = scores.shape[0]
    cdef Py_ssize_t H = scores.shape[1]
    cdef Py_ssize_t N = num_segments
    cdef int T, rc
    if idx.shape[0] != E or out.shape[0] != E or out.shape[1] != H or N < 0:
        raise ValueError("segment_softmax_entries: shapes do not match")
    _reset_seen()
    if E == 0 or H == 0:
        return
    if N > PY_SSIZE_T_MAX // (2 * H * <Py_ssize_t>sizeof(real)):
        raise MemoryError("segment_softmax_entries: too many segments")
    T = _segment_threads(num_threads, E, N, H, sizeof(real))
    with nogil:
        rc = _softmax_by_entries(False, &scores[0, 0], NULL, &idx[0], E, N, H, &out[0, 0], T,
                                 is_sorted)
    if rc != 0:
        raise MemoryError("segment_softmax_entries: out of memory")


def segment_softmax_backward_entries(const real[:, ::1] y, const real[:, ::1] grad,
                                     const index_t[::1] idx, Py_ssize_t num_segments,
                                     real[:, ::1] out, int num_threads, bint is_sorted=False):
    """``segment_softmax_backward_csr`` in entry order (bitwise equal);
    ``is_sorted`` as in ``segment_softmax_entries``."""
    cdef Py_ssize_t E = y.shape[0]
    cdef Py_ssize_t H = y.shape[1]
    cdef Py_ssize_t N = num_segments
    cdef int T, rc
    if (idx.shape[0] != E or grad.shape[0] != E or grad.shape[1] != H or out.shape[0] != E
            or out.shape[1] != H or N < 0):
        raise ValueError("segment_softmax_backward_entries: shapes do not match")
    _reset_seen()
    if E == 0 or H == 0:
        return
    if N > PY_SSIZE_T_MAX // (2 * H * <Py_ssize_t>sizeof(real)):
        raise MemoryError("segment_softmax_backward_entries: too many segments")
    T = _segment_threads(num_threads, E, N, H, sizeof(real))
    with nogil:
        rc = _softmax_by_entries(True, &y[0, 0], &grad[0, 0], &idx[0], E, N, H, &out[0, 0], T,
                                 is_sorted)
    if rc != 0:
        raise MemoryError("segment_softmax_backward_entries: out of memory")
