# OpenMP shim: the same source builds with and without OpenMP.  Without it,
# ``prange`` degrades to a plain loop by itself; the API calls below get
# serial fallbacks.

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define RTX_OPENMP_ENABLED 1
    static int rtx_omp_max_threads(void) { return omp_get_max_threads(); }
    static int rtx_omp_thread_num(void) { return omp_get_thread_num(); }
    #else
    #define RTX_OPENMP_ENABLED 0
    static int rtx_omp_max_threads(void) { return 1; }
    static int rtx_omp_thread_num(void) { return 0; }
    #endif
    #ifndef RTX_BUILD_CFLAGS
    #define RTX_BUILD_CFLAGS "unknown"
    #endif
    """
    int RTX_OPENMP_ENABLED
    const char* RTX_BUILD_CFLAGS
    int rtx_omp_max_threads() nogil
    int rtx_omp_thread_num() nogil


def openmp_enabled():
    """True when the extension was compiled with OpenMP."""
    return bool(RTX_OPENMP_ENABLED)


def omp_max_threads():
    """OpenMP's own default team size (1 in the serial build)."""
    return rtx_omp_max_threads()


def build_cflags():
    """The compiler flags the extension was built with."""
    return RTX_BUILD_CFLAGS.decode()


def parallel_thread_ids(Py_ssize_t n, int num_threads):
    """Distinct OpenMP thread ids seen by a ``prange`` over ``n`` items.

    Proves parallelism without timing: with OpenMP on and ``num_threads > 1``
    a long enough loop is shared by more than one thread.
    """
    cdef Py_ssize_t i
    cdef int[::1] seen
    import numpy as _np
    if num_threads < 1:
        num_threads = 1
    if num_threads > 256:   # libgomp crashes on absurd team sizes
        num_threads = 256
    arr = _np.zeros(num_threads, dtype=_np.intc)
    seen = arr
    with nogil:
        for i in prange(n, num_threads=num_threads, schedule="static"):
            seen[rtx_omp_thread_num()] = 1
    return int(arr.sum())
