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
    static int rtx_omp_num_threads(void) { return omp_get_num_threads(); }
    /* an orphaned barrier: binds to the parallel region the caller runs in */
    static void rtx_omp_barrier(void) { _Pragma("omp barrier") }
    #else
    #define RTX_OPENMP_ENABLED 0
    static int rtx_omp_max_threads(void) { return 1; }
    static int rtx_omp_thread_num(void) { return 0; }
    static int rtx_omp_num_threads(void) { return 1; }
    static void rtx_omp_barrier(void) { }
    #endif
    #ifndef RTX_BUILD_CFLAGS
    #define RTX_BUILD_CFLAGS "unknown"
    #endif
    """
    int RTX_OPENMP_ENABLED
    const char* RTX_BUILD_CFLAGS
    int rtx_omp_max_threads() nogil
    int rtx_omp_thread_num() nogil
    int rtx_omp_num_threads() nogil
    void rtx_omp_barrier() nogil


def openmp_enabled():
    #: -> bool
    """True when the extension was compiled with OpenMP."""
    return bool(RTX_OPENMP_ENABLED)


def omp_max_threads():
    #: -> int
    """OpenMP's own default team size (1 in the serial build)."""
    return rtx_omp_max_threads()


def build_cflags():
    #: -> str
    """The compiler flags the extension was built with."""
    return RTX_BUILD_CFLAGS.decode()
