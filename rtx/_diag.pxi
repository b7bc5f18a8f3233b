# Diagnostics, kept out of the production kernels: thread-id probes (tests
# prove parallelism with them instead of timing) and a bandwidth reference
# kernel for the benchmarks.  Included after _common.pxi and before the kernel
# families, which call ``_reset_seen`` / ``_mark_seen``.

# Which OpenMP thread ids ran the last index/segment/message kernel call.  Not
# meaningful when several Python threads call kernels at once.
cdef unsigned char _seen[256]


cdef inline void _reset_seen() noexcept nogil:
    memset(_seen, 0, sizeof(_seen))


cdef inline void _mark_seen() noexcept nogil:
    cdef int tid = rtx_omp_thread_num()
    if 0 <= tid < 256:
        _seen[tid] = 1


def last_kernel_thread_ids():
    #: -> list[int]
    """Sorted OpenMP thread ids that worked in the last gather/scatter kernel call."""
    return [i for i in range(256) if _seen[i]]


def parallel_thread_ids(Py_ssize_t n, int num_threads):
    #: -> int
    """Distinct OpenMP thread ids seen by a ``prange`` over ``n`` items.

    Proves parallelism without timing: with OpenMP on and ``num_threads > 1``
    a long enough loop is shared by more than one thread.
    """
    cdef Py_ssize_t i
    cdef int[::1] seen
    import numpy as _np
    num_threads = _clamp_threads(num_threads)
    arr = _np.zeros(num_threads, dtype=_np.intc)
    seen = arr
    with nogil:
        for i in prange(n, num_threads=num_threads, schedule="static"):
            seen[rtx_omp_thread_num()] = 1
    return int(arr.sum())


def copy_bandwidth_kernel(const unsigned char[::1] src, unsigned char[::1] dst,
                          int num_threads):
    """Parallel memcpy in ``num_threads`` contiguous blocks (benchmark reference)."""
    cdef Py_ssize_t n = src.shape[0]
    cdef Py_ssize_t t, chunk, a, b
    cdef int T = _clamp_threads(num_threads)
    if dst.shape[0] != n:
        raise ValueError("copy_bandwidth_kernel: sizes differ")
    if n == 0:
        return
    chunk = (n + T - 1) // T
    chunk = (chunk + 4095) // 4096 * 4096
    with nogil:
        for t in prange(T, num_threads=T, schedule="static", chunksize=1):
            a = t * chunk
            b = a + chunk
            if b > n:
                b = n
            if a < b:
                memcpy(&dst[a], &src[a], <size_t>(b - a))
