# Fused optimiser updates.  adam_rows: rtx.optim.SparseAdam's lazy Adam step over the
# rows of a coalesced row-sparse gradient, in one parallel pass (below); adam_step
# (at the end): Adam's / AdamW's dense step over a flat parameter.
#
# Per row i (r = rows[i]) and column j, in the parameter's dtype and in
# torch.optim.SparseAdam's order of operations:
#
#   um = (g - m[r]) * (1 - beta1);   uv = (g * g - v[r]) * (1 - beta2)
#   m[r] += um;   v[r] += uv
#   p[r] += ((um + m_old) / (sqrt(uv + v_old) + eps)) * (-step_size)
#
# The rows must be distinct (each thread owns the rows it writes): the caller
# checks it; ``rows`` must be an immutable index snapshot (no other thread can
# change it while the GIL is released) and its bounds are checked here.

from libc.math cimport sqrt, sqrtf

cdef enum:
    ADAM_PARALLEL_MIN = 65536      # elements below which one thread does it all


cdef inline float _sqrt_r(float x) noexcept nogil:
    return sqrtf(x)


cdef inline double _sqrt_d(double x) noexcept nogil:
    return sqrt(x)


def adam_rows(real[:, ::1] param, real[:, ::1] exp_avg, real[:, ::1] exp_avg_sq,
              const index_t[::1] rows, const real[:, ::1] grad, double beta1,
              double beta2, double eps, double step_size, int num_threads):
    """SparseAdam's step over ``rows`` (distinct, an index snapshot) in place:
    ``param``, ``exp_avg``, ``exp_avg_sq`` ``[N, D]``; ``grad`` ``[len(rows), D]``
    (see the top of ``_optim.pxi``).  ``IndexError`` for a row outside ``[0, N)``,
    ``ValueError`` for mismatched shapes, ``TypeError`` for rows that are not an
    immutable snapshot; nothing is written then."""
    cdef Py_ssize_t N = param.shape[0]
    cdef Py_ssize_t D = param.shape[1]
    cdef Py_ssize_t K = rows.shape[0]
    cdef Py_ssize_t i, j, bad = -1
    cdef int64_t r
    cdef real c1 = <real>(1.0 - beta1)
    cdef real c2 = <real>(1.0 - beta2)
    cdef real e = <real>eps
    cdef real ns = <real>(-step_size)
    cdef real gv, om, ov, um, uv
    cdef real* pr
    cdef real* mr
    cdef real* vr
    cdef const real* gr
    cdef int T = _clamp_threads(num_threads)
    if (exp_avg.shape[0] != N or exp_avg.shape[1] != D or exp_avg_sq.shape[0] != N
            or exp_avg_sq.shape[1] != D or grad.shape[0] != K or grad.shape[1] != D):
        raise ValueError("adam_rows: param, exp_avg, exp_avg_sq must be [N, D] and grad "
                         "[len(rows), D]")
    if not is_index_snapshot(rows.base if rows.base is not None else rows):
        raise TypeError("adam_rows: rows must be an rtx index snapshot (immutable)")
    if K == 0 or D == 0:
        return
    with nogil:
        for i in range(K):
            if rows[i] < 0 or rows[i] >= N:
                bad = i
                break
    if bad >= 0:
        raise IndexError(f"adam_rows: rows[{bad}] = {rows[bad]} is outside [0, {N})")
    if K * D < ADAM_PARALLEL_MIN:
        T = 1
    with nogil:
        for i in prange(K, num_threads=T, schedule="static"):
            r = rows[i]
            pr = &param[r, 0]
            mr = &exp_avg[r, 0]
            vr = &exp_avg_sq[r, 0]
            gr = &grad[i, 0]
            for j in range(D):
                gv = gr[j]
                om = mr[j]
                ov = vr[j]
                um = (gv - om) * c1
                uv = (gv * gv - ov) * c2
                mr[j] = om + um
                vr[j] = ov + uv
                if real is float:
                    pr[j] = pr[j] + ((um + om) / (_sqrt_r(uv + ov) + e)) * ns
                else:
                    pr[j] = pr[j] + ((um + om) / (_sqrt_d(uv + ov) + e)) * ns


def adam_step(real[::1] param, real[::1] exp_avg, real[::1] exp_avg_sq,
              const real[::1] grad, double beta1, double beta2, double eps,
              double step_size, double bias2_sqrt, double weight_decay, bint decoupled,
              double lr, int num_threads, real[::1] max_exp_avg_sq=None):
    """Adam's dense step in place over flat arrays (rtx.optim.Adam's order of
    operations, in the parameter's dtype): ``decoupled`` (AdamW) ``p *= 1 - lr
    wd``, else ``g += wd p``; ``m = m b1 + g (1 - b1)``; ``v = v b2 + (g g) (1 -
    b2)``; with ``max_exp_avg_sq`` (amsgrad; None without) ``vmax = max(vmax, v)``
    (NaN propagates) is used for ``v``; ``p -= (m / (sqrt(v) / bias2_sqrt + eps))
    step_size``.  ``ValueError`` for arrays of different lengths."""
    cdef Py_ssize_t n = param.shape[0]
    cdef Py_ssize_t i
    cdef bint ams = max_exp_avg_sq is not None
    cdef real b1 = <real>beta1
    cdef real b2 = <real>beta2
    cdef real c1 = <real>(1.0 - beta1)
    cdef real c2 = <real>(1.0 - beta2)
    cdef real e = <real>eps
    cdef real ss = <real>step_size
    cdef real bc = <real>bias2_sqrt
    cdef real wd = <real>weight_decay
    cdef real decay = <real>(1.0 - lr * weight_decay)
    cdef bint l2 = weight_decay != 0.0 and not decoupled
    cdef bint dec = weight_decay != 0.0 and decoupled
    cdef real pv, gv, mv, vv, vm
    cdef real* vmp = NULL
    cdef int T = _clamp_threads(num_threads)
    if (exp_avg.shape[0] != n or exp_avg_sq.shape[0] != n or grad.shape[0] != n
            or (ams and max_exp_avg_sq.shape[0] != n)):
        raise ValueError("adam_step: param, exp_avg, exp_avg_sq, max_exp_avg_sq and grad "
                         "must have one length")
    if n == 0:
        return
    if ams:
        vmp = &max_exp_avg_sq[0]
    if n < ADAM_PARALLEL_MIN:
        T = 1
    with nogil:
        for i in prange(n, num_threads=T, schedule="static"):
            pv = param[i]
            if dec:
                pv = pv * decay
            gv = grad[i]
            if l2:
                gv = gv + pv * wd
            mv = exp_avg[i] * b1 + gv * c1
            vv = exp_avg_sq[i] * b2 + (gv * gv) * c2
            exp_avg[i] = mv
            exp_avg_sq[i] = vv
            if ams:
                vm = vmp[i]
                if not (vm > vv or vm != vm):
                    vm = vv
                vmp[i] = vm
                vv = vm
            if real is float:
                param[i] = pv - (mv / (_sqrt_r(vv) / bc + e)) * ss
            else:
                param[i] = pv - (mv / (_sqrt_d(vv) / bc + e)) * ss
