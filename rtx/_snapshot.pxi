# Private, immutable snapshots of index arrays.
#
# A kernel that runs without the GIL must not read memory another Python
# thread can rewrite after validation: bounds-checked user indices rewritten
# between the check and the kernel made the kernel write out of bounds.  So the
# Python boundary (rtx/backend/index.py) copies user index arrays into an
# ``IndexSnapshot`` and checks the COPY: one fused pass (block copy, then a
# branch-free range test of the block just copied, still in L1).
#
# ``IndexSnapshot`` owns an rtx ``Storage`` and exports it read-only: a
# writable buffer request raises ``BufferError``, so numpy cannot set the
# ``writeable`` flag of an array over it.  Nobody can change a snapshot after it
# was made, which is what lets the boundary reuse one (the tape keeps the
# forward's snapshot for backward) and only re-run the bounds check.

from cpython.buffer cimport PyBUF_WRITABLE
from libc.string cimport memcmp

import numpy as _np_snap

cdef enum:
    SNAP_BLOCK = 4096


cdef class IndexSnapshot:
    """Read-only bytes in an rtx-owned Storage (the memory of index snapshots)."""

    cdef Storage _st
    cdef Py_ssize_t _shape[1]
    cdef Py_ssize_t _strides[1]

    def __cinit__(self, Py_ssize_t nbytes):
        self._st = Storage(nbytes)

    @property
    def nbytes(self):
        #: -> int
        return self._st.nbytes

    def __getbuffer__(self, Py_buffer* buf, int flags):
        if (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE:
            raise BufferError("rtx index snapshots are read-only")
        self._shape[0] = self._st.nbytes
        self._strides[0] = 1
        buf.buf = self._st.ptr
        buf.obj = self
        buf.len = self._st.nbytes
        buf.readonly = 1
        buf.itemsize = 1
        if flags & PyBUF_FORMAT:
            buf.format = b"B"
        else:
            buf.format = NULL
        buf.ndim = 1
        buf.shape = self._shape if (flags & PyBUF_ND) else NULL
        buf.strides = self._strides if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        buf.suboffsets = NULL
        buf.internal = NULL

    def __releasebuffer__(self, Py_buffer* buf):
        pass


cdef Py_ssize_t _copy_check(const index_t* src, index_t* dst, Py_ssize_t m,
                            uint64_t un, bint check) noexcept nogil:
    """Copy all ``m`` indices; when ``check``, return the first position whose
    COPIED value is outside ``[0, un)`` (-1 when none, or when not checking)."""
    cdef Py_ssize_t b = 0, i, end
    cdef Py_ssize_t bad = -1
    cdef int anybad
    while b < m:
        end = b + SNAP_BLOCK if b + SNAP_BLOCK < m else m
        memcpy(dst + b, src + b, <size_t>(end - b) * sizeof(index_t))
        if check and bad < 0:
            anybad = 0
            for i in range(b, end):
                anybad |= <int>(<uint64_t><int64_t>dst[i] >= un)
            if anybad:
                for i in range(b, end):
                    if <uint64_t><int64_t>dst[i] >= un:
                        bad = i
                        break
        b = end
    return bad


cdef Py_ssize_t _copy_check_parts(const index_t* src, index_t* dst, Py_ssize_t m,
                                  uint64_t un, bint check, int threads) noexcept nogil:
    """``_copy_check`` in ``threads`` consecutive parts, one per thread: the same
    copy and the same answer (the first part with a bad index holds the first
    one).  -2 when the parts' results cannot be allocated (nothing done)."""
    cdef Py_ssize_t t, a
    cdef Py_ssize_t* res = <Py_ssize_t*>malloc(<size_t>threads * sizeof(Py_ssize_t))
    if res == NULL:
        return -2
    for t in prange(threads, num_threads=threads, schedule="static"):
        a = m * t // threads
        res[t] = _copy_check(src + a, dst + a, m * (t + 1) // threads - a, un, check)
    a = -1
    for t in range(threads):
        if res[t] >= 0:
            a = m * t // threads + res[t]
            break
    free(res)
    return a


def snapshot_indices(const index_t[::1] idx, Py_ssize_t n, int threads=1):
    #: -> tuple[_Index, int]
    #: threads: int
    """``(snap, bad)``: a private read-only copy of ``idx`` (a numpy array over an
    ``IndexSnapshot``) and the first position of the copy outside ``[0, n)``,
    or -1.  The check reads the copy, never ``idx`` again.  ``n < 0``: copy
    only (``bad`` is -1).  ``threads``: how many threads share the work, one
    part each (the same result; the caller decides when it pays:
    ``rtx.backend._index_check.snapshot_threads``)."""
    cdef Py_ssize_t m = idx.shape[0]
    cdef Py_ssize_t bad = -2
    cdef uint64_t un = <uint64_t>n if n > 0 else 0
    cdef IndexSnapshot mem = IndexSnapshot(m * <Py_ssize_t>sizeof(index_t))
    cdef index_t* dst = <index_t*>mem._st.ptr
    if threads > MAX_KERNEL_THREADS:
        threads = MAX_KERNEL_THREADS
    if m > 0:
        with nogil:
            if threads > 1 and m >= threads:
                bad = _copy_check_parts(&idx[0], dst, m, un, n >= 0, threads)
            if bad == -2:
                bad = _copy_check(&idx[0], dst, m, un, n >= 0)
    else:
        bad = -1
    if index_t is int32_t:
        dt = _np_snap.int32
    else:
        dt = _np_snap.int64
    # np.ndarray(buffer=) keeps ``mem`` itself as the base (frombuffer would
    # put a memoryview in between); the buffer is read-only, so is the array.
    return _np_snap.ndarray((m,), dt, mem), bad


def is_index_snapshot(arr):
    #: -> bool
    #: arr: object
    """True when ``arr`` is a C-contiguous int32/int64 numpy array whose memory
    is an ``IndexSnapshot`` (immutable: safe to read without copying)."""
    if type(arr) is not _np_snap.ndarray or arr.ndim != 1 or not arr.flags.c_contiguous:
        return False
    base = arr.base
    while type(base) is _np_snap.ndarray:   # views of a snapshot (slices)
        base = base.base
    return type(base) is IndexSnapshot and not arr.flags.writeable


def memeq(a, b):
    #: -> bool
    #: a: npt.NDArray[Any]
    #: b: npt.NDArray[Any]
    """Whether two C-contiguous numpy arrays of one dtype and shape hold the same
    bytes (``memcmp`` without the GIL; for index arrays: value equality).

    No temporaries (``np.array_equal`` builds a bool array).  A buffer another
    thread writes meanwhile gives an unspecified answer, never a bad read."""
    cdef const unsigned char[::1] x
    cdef const unsigned char[::1] y
    cdef Py_ssize_t n
    cdef int r = 0
    if type(a) is not _np_snap.ndarray or type(b) is not _np_snap.ndarray:
        raise TypeError("memeq: numpy arrays expected")
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if not (a.flags.c_contiguous and b.flags.c_contiguous):
        raise ValueError("memeq: the arrays must be C-contiguous")
    if a.nbytes == 0:
        return True
    x = a.reshape(-1).view(_np_snap.uint8)
    y = b.reshape(-1).view(_np_snap.uint8)
    n = x.shape[0]
    if y.shape[0] != n:
        return False
    with nogil:
        r = memcmp(&x[0], &y[0], <size_t>n)
    return r == 0
