# Split GEMM in rtx's OpenMP team: a large matmul cut into pieces (by the caller,
# rtx/backend/_matmul.py, from the shapes alone), each piece one call of the
# cblas ?gemm of the OpenBLAS that numpy already loaded, on one BLAS thread,
# the pieces run by rtx's own OpenMP threads.
#
# Why not Python threads each calling np.matmul (the path this replaces where it
# can): rtx's OpenMP workers spin for a while after every kernel (libgomp's
# default spin: rtx/_spin.py), and with torch imported first they share torch's
# libgomp.  Those spinning workers then hold the cores the Python pool's threads
# need for the GEMM that follows every kernel.  Run by the OpenMP team itself,
# the GEMM's pieces go to the very workers that spin, and a call costs one
# OpenMP region instead of a queue hand-off to a Python thread pool.
#
# The bits are np.matmul's on the same piece: numpy's matmul of a 2-D float
# piece with both sides "blasable" calls the same cblas ?gemm with the same
# arguments (row-major; a side is NoTrans when its columns are contiguous and
# its row stride, in elements, is at least its row length, else Trans with the
# column stride; numpy's matmul.c.src), so ``gemm_split`` leaves to numpy the
# cases where numpy calls something else: a piece with a size of 1 (gemv, dot or
# numpy's own loop), a matrix times its own transpose (syrk), a layout no BLAS
# takes, or a dimension past a 32-bit int.
#
# The function pointers are looked up here, by name, in a library the process
# has ALREADY loaded (``dlopen(RTLD_NOLOAD)``: this never loads anything), and
# OpenBLAS's own build string says whether its integers are 64-bit
# (``USE64BITINT``); a library whose build string cannot be read is not used.
# The caller then checks a small product against np.matmul before trusting it.

from libc.stdint cimport int64_t

cimport numpy as cnp

cnp.import_array()


cdef extern from *:
    """
    #if defined(__unix__) || defined(__APPLE__)
    #include <dlfcn.h>
    #define RTX_HAVE_DLSYM 1
    #else
    #define RTX_HAVE_DLSYM 0
    #endif
    #include <string.h>
    #include <limits.h>

    typedef void (*rtx_sgemm32_t)(int, int, int, int, int, int, float, const float*, int,
                                  const float*, int, float, float*, int);
    typedef void (*rtx_sgemm64_t)(int, int, int, long long, long long, long long, float,
                                  const float*, long long, const float*, long long, float,
                                  float*, long long);
    typedef void (*rtx_dgemm32_t)(int, int, int, int, int, int, double, const double*, int,
                                  const double*, int, double, double*, int);
    typedef void (*rtx_dgemm64_t)(int, int, int, long long, long long, long long, double,
                                  const double*, long long, const double*, long long, double,
                                  double*, long long);
    typedef char* (*rtx_blas_config_t)(void);

    /* written only by rtx_gemm_bind / rtx_gemm_unbind, with the GIL held and no
       kernel of this family running (the caller binds once, before any call) */
    static void* rtx_gemm_s = NULL;
    static void* rtx_gemm_d = NULL;
    static int rtx_gemm_ilp64 = 0;

    #define RTX_ROW_MAJOR 101
    #define RTX_NO_TRANS 111
    #define RTX_TRANS 112

    static void rtx_gemm_unbind(void) { rtx_gemm_s = NULL; rtx_gemm_d = NULL; }

    /* 1: bound; 0: not (no such library loaded, a symbol missing, or a build
       string that does not say how wide its integers are) */
    static int rtx_gemm_bind(const char* path, const char* sname, const char* dname,
                             const char* cname) {
    #if RTX_HAVE_DLSYM
        void* h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        void *s, *d, *c;
        const char* conf;
        if (h == NULL) return 0;
        s = dlsym(h, sname);
        d = dlsym(h, dname);
        c = dlsym(h, cname);
        dlclose(h);      /* drops only the reference RTLD_NOLOAD took */
        if (s == NULL || d == NULL || c == NULL) return 0;
        conf = ((rtx_blas_config_t)c)();
        if (conf == NULL || strncmp(conf, "OpenBLAS", 8) != 0) return 0;
        rtx_gemm_ilp64 = strstr(conf, "USE64BITINT") != NULL;
        rtx_gemm_s = s;
        rtx_gemm_d = d;
        return 1;
    #else
        (void)path; (void)sname; (void)dname; (void)cname;
        return 0;
    #endif
    }

    static int rtx_gemm_bound(void) { return rtx_gemm_s != NULL; }
    static int rtx_gemm_is_ilp64(void) { return rtx_gemm_ilp64; }

    static void* rtx_gemm_fn(int dbl) { return dbl ? rtx_gemm_d : rtx_gemm_s; }

    /* C[m, n] = op(A) op(B), row-major, by fn (a cblas ?gemm taking 64-bit integers
       when ilp64); every size already checked to fit an int */
    static void rtx_sgemm(void* fn, int ilp64, int ta, int tb, Py_ssize_t m, Py_ssize_t n,
                          Py_ssize_t k, const float* A, Py_ssize_t lda, const float* B,
                          Py_ssize_t ldb, float* C, Py_ssize_t ldc) {
        if (ilp64)
            ((rtx_sgemm64_t)fn)(RTX_ROW_MAJOR, ta, tb, m, n, k, 1.0f, A, lda, B, ldb,
                                0.0f, C, ldc);
        else
            ((rtx_sgemm32_t)fn)(RTX_ROW_MAJOR, ta, tb, (int)m, (int)n, (int)k, 1.0f,
                                A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
    }
    static void rtx_dgemm(void* fn, int ilp64, int ta, int tb, Py_ssize_t m, Py_ssize_t n,
                          Py_ssize_t k, const double* A, Py_ssize_t lda, const double* B,
                          Py_ssize_t ldb, double* C, Py_ssize_t ldc) {
        if (ilp64)
            ((rtx_dgemm64_t)fn)(RTX_ROW_MAJOR, ta, tb, m, n, k, 1.0, A, lda, B, ldb,
                                0.0, C, ldc);
        else
            ((rtx_dgemm32_t)fn)(RTX_ROW_MAJOR, ta, tb, (int)m, (int)n, (int)k, 1.0,
                                A, (int)lda, B, (int)ldb, 0.0, C, (int)ldc);
    }
    """
    int RTX_NO_TRANS
    int RTX_TRANS
    int rtx_gemm_bind(const char* path, const char* sname, const char* dname,
                      const char* cname)
    void rtx_gemm_unbind()
    int rtx_gemm_bound() noexcept nogil
    int rtx_gemm_is_ilp64()
    void* rtx_gemm_fn(int dbl)
    void rtx_sgemm(void* fn, int ilp64, int ta, int tb, Py_ssize_t m, Py_ssize_t n,
                   Py_ssize_t k, const float* A, Py_ssize_t lda, const float* B,
                   Py_ssize_t ldb, float* C, Py_ssize_t ldc) noexcept nogil
    void rtx_dgemm(void* fn, int ilp64, int ta, int tb, Py_ssize_t m, Py_ssize_t n,
                   Py_ssize_t k, const double* A, Py_ssize_t lda, const double* B,
                   Py_ssize_t ldb, double* C, Py_ssize_t ldc) noexcept nogil


cdef enum:
    GEMM_MAX_PIECES = 64
    GEMM_INT_MAX = 2147483647


def gemm_bind(str path, str prefix, str suffix):
    #: path: str
    #: prefix: str
    #: suffix: str
    #: -> bool
    """Bind ``gemm_split`` to ``{prefix}cblas_sgemm{suffix}`` and ``..._dgemm...`` of
    the OpenBLAS at ``path``, which must already be loaded in this process (nothing
    is loaded here); its ``{prefix}openblas_get_config{suffix}`` says whether its
    integers are 64-bit.  Call once, before any ``gemm_split``.  False (and
    unbound) when any of that fails."""
    cdef bytes p = path.encode()
    cdef bytes s = f"{prefix}cblas_sgemm{suffix}".encode()
    cdef bytes d = f"{prefix}cblas_dgemm{suffix}".encode()
    cdef bytes c = f"{prefix}openblas_get_config{suffix}".encode()
    rtx_gemm_unbind()
    return bool(rtx_gemm_bind(p, s, d, c))


def gemm_unbind():
    #: -> None
    """Forget the bound BLAS: ``gemm_split`` returns False from now on."""
    rtx_gemm_unbind()


def gemm_bound():
    #: -> bool
    """Whether ``gemm_split`` has a BLAS (``gemm_bind`` succeeded)."""
    return bool(rtx_gemm_bound())


def gemm_ilp64():
    #: -> bool
    """Whether the bound BLAS takes 64-bit integers (its build string says
    ``USE64BITINT``)."""
    return bool(rtx_gemm_is_ilp64())


cdef inline int _gemm_side(Py_ssize_t s0, Py_ssize_t s1, Py_ssize_t d1, Py_ssize_t d0,
                           Py_ssize_t isz, Py_ssize_t* ld) noexcept:
    """numpy's choice for one side of a GEMM with strides (s0, s1) in bytes and
    shape (d0, d1): NoTrans when its columns are contiguous and its row stride is at
    least d1 elements, else Trans when its rows are contiguous and its column stride
    is at least d0, else -1 (no BLAS layout); ``ld`` the leading dimension."""
    if s1 == isz and s0 % isz == 0 and s0 // isz >= d1 and s0 // isz <= GEMM_INT_MAX:
        ld[0] = s0 // isz
        return RTX_NO_TRANS
    if s0 == isz and s1 % isz == 0 and s1 // isz >= d0 and s1 // isz <= GEMM_INT_MAX:
        ld[0] = s1 // isz
        return RTX_TRANS
    return -1


cdef inline void _gemm(void* fn, int ilp64, int ta, int tb, Py_ssize_t m, Py_ssize_t n,
                       Py_ssize_t k, const real* A, Py_ssize_t lda, const real* B,
                       Py_ssize_t ldb, real* C, Py_ssize_t ldc) noexcept nogil:
    if real is float:
        rtx_sgemm(fn, ilp64, ta, tb, m, n, k, A, lda, B, ldb, C, ldc)
    else:
        rtx_dgemm(fn, ilp64, ta, tb, m, n, k, A, lda, B, ldb, C, ldc)


def gemm_split(const real[:, :] a not None, const real[:, :] b not None,
               real[:, :] out not None, parts, int pieces, bint inner, int num_threads):
    #: parts: npt.NDArray[Any] | None
    #: -> bool
    """``a @ b`` in ``pieces`` GEMMs run by ``num_threads`` OpenMP threads, each on
    one BLAS thread (the caller holds BLAS at one thread), piece ``p`` covering
    ``[L * p // pieces, L * (p + 1) // pieces)`` of L = the rows of ``a`` (the
    piece's rows of ``out``) or, with ``inner``, of ``a``'s columns (its partial
    product into ``out`` for the first piece, ``parts[p - 1]`` for the others, a
    ``[pieces - 1, m, n]`` C-contiguous array of a's dtype; the caller adds them in
    order).  Each piece's bits are np.matmul's on that piece.  False, with nothing
    written, where numpy would not call ?gemm on a piece (a piece with a size of 1:
    one row, one column or an inner length of one; a side with no BLAS layout;
    ``a`` times its own transpose; a size past a 32-bit int; ``out`` overlapping an
    input) or no BLAS is bound; ValueError for shapes that do not match."""
    cdef Py_ssize_t m = a.shape[0], k = a.shape[1], n = b.shape[1]
    cdef Py_ssize_t isz = sizeof(real)
    cdef Py_ssize_t lda = 0, ldb = 0, ldc, L, p, lo, hi
    cdef Py_ssize_t os0 = out.strides[0]
    cdef Py_ssize_t as0 = a.strides[0], as1 = a.strides[1]
    cdef Py_ssize_t bs0 = b.strides[0], bs1 = b.strides[1]
    cdef int ta, tb, T
    cdef real[:, :, ::1] pv
    cdef real* pbase = NULL
    cdef const real* A = NULL
    cdef const real* B = NULL
    cdef real* C = NULL
    cdef char* olo
    cdef char* ohi
    # the BLAS as bound now (a private copy: nothing another thread does to the
    # binding reaches the loop below)
    cdef void* fn = rtx_gemm_fn(0 if real is float else 1)
    cdef int ilp64 = rtx_gemm_is_ilp64()
    if b.shape[0] != k or out.shape[0] != m or out.shape[1] != n:
        raise ValueError(f"gemm_split: shapes ({m}, {k}) @ ({b.shape[0]}, {n}) -> "
                         f"({out.shape[0]}, {out.shape[1]}) do not match")
    if pieces < 1 or pieces > GEMM_MAX_PIECES:
        raise ValueError(f"gemm_split: pieces must be 1 to {GEMM_MAX_PIECES}, got {pieces}")
    L = k if inner else m
    if pieces > L:
        raise ValueError(f"gemm_split: {pieces} pieces of {L}")
    if inner and pieces > 1:
        if parts is None:
            raise ValueError("gemm_split: an inner split needs parts")
        pv = parts
        if pv.shape[0] != pieces - 1 or pv.shape[1] != m or pv.shape[2] != n:
            raise ValueError(f"gemm_split: parts must be ({pieces - 1}, {m}, {n})")
        pbase = &pv[0, 0, 0]
    if fn == NULL:
        return False
    # numpy calls ?gemm on a piece only when none of its three sizes is 1 (else gemv,
    # dot or its own loop), and every size fits a 32-bit int (what both integer
    # widths take); the smallest piece has L // pieces of the split size
    if (m < 2 or n < 2 or k < 2 or m > GEMM_INT_MAX or n > GEMM_INT_MAX
            or k > GEMM_INT_MAX or L // pieces < 2):
        return False
    ta = _gemm_side(as0, as1, k, m, isz, &lda)
    tb = _gemm_side(bs0, bs1, n, k, isz, &ldb)
    if ta < 0 or tb < 0:
        return False
    ldc = os0 // isz
    if out.strides[1] != isz or os0 % isz != 0 or ldc < n or ldc > GEMM_INT_MAX:
        return False
    A = &a[0, 0]
    B = &b[0, 0]
    C = &out[0, 0]
    # numpy's syrk case: a matrix times its own transpose, on the same data
    if (<const void*>A == <const void*>B and as0 == bs1 and as1 == bs0 and ta != tb):
        return False
    # out (and parts) must not overlap an input: np.matmul would copy first
    olo = <char*>C
    ohi = olo + ((m - 1) * os0 + n * isz)
    if (_gemm_overlaps(olo, ohi, <const char*>A, m, k, as0, as1, isz)
            or _gemm_overlaps(olo, ohi, <const char*>B, k, n, bs0, bs1, isz)):
        return False
    if pbase != NULL:
        olo = <char*>pbase
        ohi = olo + (pieces - 1) * m * n * isz
        if (_gemm_overlaps(olo, ohi, <const char*>A, m, k, as0, as1, isz)
                or _gemm_overlaps(olo, ohi, <const char*>B, k, n, bs0, bs1, isz)):
            return False
    T = _team_size(_clamp_threads(num_threads), pieces)
    _reset_seen()
    with nogil:
        for p in prange(pieces, num_threads=T, schedule="static", chunksize=1):
            _mark_seen()
            lo = L * p // pieces
            hi = L * (p + 1) // pieces
            if inner:
                _gemm(fn, ilp64, ta, tb, m, n, hi - lo,
                      <const real*>(<const char*>A + lo * as1), lda,
                      <const real*>(<const char*>B + lo * bs0), ldb,
                      C if p == 0 else pbase + (p - 1) * m * n, ldc if p == 0 else n)
            else:
                _gemm(fn, ilp64, ta, tb, hi - lo, n, k,
                      <const real*>(<const char*>A + lo * as0), lda, B, ldb,
                      <real*>(<char*>C + lo * os0), ldc)
    return True


cdef bint _gemm_overlaps(const char* lo, const char* hi, const char* base, Py_ssize_t d0,
                         Py_ssize_t d1, Py_ssize_t s0, Py_ssize_t s1,
                         Py_ssize_t isz) noexcept:
    """Whether [lo, hi) meets the bytes spanned by a (d0, d1) array at ``base``
    with (non-negative) strides s0, s1."""
    cdef const char* e = base + (d0 - 1) * s0 + (d1 - 1) * s1 + isz
    return lo < e and base < hi
