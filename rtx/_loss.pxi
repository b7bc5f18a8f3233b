# Fused binary cross-entropy from logits: one stable pass per direction (the face is
# rtx.nn.functional.binary_cross_entropy_with_logits, the body rtx/backend/loss.py).
#
# With l = log1p(exp(-|x|)) (never overflows), softplus(x) = max(x, 0) + l and
# softplus(-x) = max(-x, 0) + l, the loss of one element is
#
#   no pos_weight:  max(x, 0) - x * y + l
#   pos_weight p:   p * y * softplus(-x) + (1 - y) * softplus(x)
#
# (the second is -[p y log(sigmoid x) + (1 - y) log(1 - sigmoid x)] written without
# a difference of large terms; with p = 1 it equals the first).  The gradients:
#
#   d/dx  sigmoid(x) - y                  or  (1 - y) sigmoid(x) - p y sigmoid(-x)
#   d/dy  -x                              or  p softplus(-x) - softplus(x)
#   d/dp  (no input)                      or  y softplus(-x)
#
# with sigmoid from e = exp(-|x|) on the side that cannot overflow.  Arrays are
# flat, C-contiguous, of one length (checked here before the loop) and one dtype;
# ``pw`` of length 0 means no pos_weight.  Computed in double, stored as ``real``.

from libc.math cimport exp as _bce_exp
from libc.math cimport fabs as _bce_fabs
from libc.math cimport log1p as _bce_log1p

cdef Py_ssize_t BCE_PARALLEL_MIN = 1 << 15


cdef inline int _bce_threads(Py_ssize_t n, int num_threads) noexcept nogil:
    if n < BCE_PARALLEL_MIN:
        return 1
    return _clamp_threads(num_threads)


def bce_logits_forward(const real[::1] x, const real[::1] y, const real[::1] pw,
                       real[::1] out, int num_threads=1):
    """The per-element loss into ``out`` (see the file comment)."""
    cdef Py_ssize_t n = x.shape[0], i
    cdef bint has_pw = pw.shape[0] != 0
    if y.shape[0] != n or out.shape[0] != n or (has_pw and pw.shape[0] != n):
        raise ValueError(f"bce_logits_forward: lengths differ (x {n}, target {y.shape[0]}, "
                         f"pos_weight {pw.shape[0]}, out {out.shape[0]})")
    cdef int T = _bce_threads(n, num_threads)
    cdef double xi, yi, lp, pos, neg
    with nogil:
        for i in prange(n, num_threads=T, schedule="static"):
            xi = x[i]
            yi = y[i]
            lp = _bce_log1p(_bce_exp(-_bce_fabs(xi)))
            pos = xi if xi > 0 else 0.0    # max(x, 0)
            if has_pw:
                neg = pos - xi             # max(-x, 0)
                out[i] = <real>(pw[i] * yi * (neg + lp) + (1.0 - yi) * (pos + lp))
            else:
                out[i] = <real>(pos - xi * yi + lp)


def bce_logits_backward(const real[::1] x, const real[::1] y, const real[::1] pw,
                        const real[::1] g, real[::1] gx, real[::1] gy, real[::1] gp,
                        int num_threads=1):
    """``g`` times the derivatives into ``gx`` and, when they have ``n`` entries (else
    0), ``gy`` (target) and ``gp`` (pos_weight; needs ``pw``)."""
    cdef Py_ssize_t n = x.shape[0], i
    cdef bint has_pw = pw.shape[0] != 0
    cdef bint want_y = gy.shape[0] != 0, want_p = gp.shape[0] != 0
    if (y.shape[0] != n or g.shape[0] != n or gx.shape[0] != n
            or (has_pw and pw.shape[0] != n) or (want_y and gy.shape[0] != n)
            or (want_p and (gp.shape[0] != n or not has_pw))):
        raise ValueError(f"bce_logits_backward: lengths differ (x {n}, target {y.shape[0]}, "
                         f"pos_weight {pw.shape[0]}, grad {g.shape[0]}, outputs "
                         f"{gx.shape[0]}, {gy.shape[0]}, {gp.shape[0]})")
    cdef int T = _bce_threads(n, num_threads)
    cdef double xi, yi, gi, e, s, sn, lp, pos, neg, p
    with nogil:
        for i in prange(n, num_threads=T, schedule="static"):
            xi = x[i]
            yi = y[i]
            gi = g[i]
            e = _bce_exp(-_bce_fabs(xi))
            if xi >= 0:
                s = 1.0 / (1.0 + e)        # sigmoid(x)
                sn = e / (1.0 + e)         # sigmoid(-x)
            else:
                s = e / (1.0 + e)
                sn = 1.0 / (1.0 + e)
            if has_pw:
                p = pw[i]
                gx[i] = <real>(gi * ((1.0 - yi) * s - p * yi * sn))
            else:
                p = 1.0
                gx[i] = <real>(gi * (s - yi))
            if want_y or want_p:
                lp = _bce_log1p(e)
                pos = xi if xi > 0 else 0.0
                neg = pos - xi
                if want_y:
                    if has_pw:
                        gy[i] = <real>(gi * (p * (neg + lp) - (pos + lp)))
                    else:
                        gy[i] = <real>(-gi * xi)
                if want_p:
                    gp[i] = <real>(gi * yi * (neg + lp))
