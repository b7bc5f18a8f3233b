# cython: language_level=3, boundscheck=False, wraparound=False
"""Deliberate memory bugs: proof that the ASan/UBSan, LeakSanitizer and
valgrind jobs bite.

TEST-ONLY.  This module lives outside the ``rtx`` package, is never installed
and is built at ``-O0`` by ``tools/selftest/build.sh`` (gcc -O3 deletes
some of these bugs).  ``tools/selftest/run.py`` calls each function in its own
process under each tool and requires a non-zero exit *with* a report.

The buffer-export bug mirrors ``rtx.Storage`` minus one line: its
``__getbuffer__`` leaves ``buf.obj`` empty, so a view does not keep the owner
alive and reads freed memory once the owner is gone.
"""

from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES
from cython.parallel cimport prange
from libc.stdlib cimport free, malloc


def clean(Py_ssize_t n=1000):
    """Control: correct code, must run clean under every tool."""
    cdef double* p = <double*>malloc(n * sizeof(double))
    cdef Py_ssize_t i
    cdef double s = 0
    with nogil:
        for i in prange(n, num_threads=2, schedule="static"):
            p[i] = i
    for i in range(n):
        s += p[i]
    free(p)
    return s


def double_free(Py_ssize_t n=64):
    cdef char* p = <char*>malloc(n)
    p[0] = 1
    free(p)
    free(p)                       # BUG: second free of the same block


def heap_overflow(Py_ssize_t n=16):
    cdef double* p = <double*>malloc(n * sizeof(double))
    cdef Py_ssize_t i
    for i in range(n + 1):        # BUG: writes p[n], one past the end
        p[i] = i
    free(p)


def use_after_free(Py_ssize_t n=16):
    cdef double* p = <double*>malloc(n * sizeof(double))
    cdef Py_ssize_t i
    cdef double s
    for i in range(n):
        p[i] = i
    free(p)
    s = p[n // 2]                 # BUG: reads a freed block
    return s


def prange_overflow(Py_ssize_t n=100000, int num_threads=2):
    cdef double* p = <double*>malloc(n * sizeof(double))
    cdef Py_ssize_t i
    with nogil:
        for i in prange(n + 1, num_threads=num_threads, schedule="static"):
            p[i] = i              # BUG: the last thread writes p[n]
    free(p)


def leak(Py_ssize_t n=4096):
    cdef char* p = <char*>malloc(n)
    p[0] = 1
    p = NULL                      # BUG: the only pointer to the block is gone


cdef class DanglingExporter:
    """Owns a malloc'd block of doubles and exports it WITHOUT keeping itself alive."""

    cdef double* data
    cdef Py_ssize_t n
    cdef Py_ssize_t _shape[1]
    cdef Py_ssize_t _strides[1]

    def __cinit__(self, Py_ssize_t n):
        cdef Py_ssize_t i
        self.data = <double*>malloc(n * sizeof(double))
        self.n = n
        for i in range(n):
            self.data[i] = i

    def __dealloc__(self):
        free(self.data)

    def __getbuffer__(self, Py_buffer* buf, int flags):
        self._shape[0] = self.n
        self._strides[0] = sizeof(double)
        buf.buf = self.data
        buf.obj = None            # BUG: rtx.Storage sets buf.obj = self here
        buf.len = self.n * sizeof(double)
        buf.readonly = 0
        buf.itemsize = sizeof(double)
        if flags & PyBUF_FORMAT:
            buf.format = b"d"
        else:
            buf.format = NULL
        buf.ndim = 1
        buf.shape = self._shape if flags & PyBUF_ND else NULL
        buf.strides = self._strides if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        buf.suboffsets = NULL
        buf.internal = NULL

    def __releasebuffer__(self, Py_buffer* buf):
        pass


def checksum(const double[::1] v):
    """Sum of a buffer's doubles, read by instrumented code (ASan sees the reads)."""
    cdef Py_ssize_t i
    cdef double s = 0
    for i in range(v.shape[0]):
        s += v[i]
    return s


def dangling_export(Py_ssize_t n=1024):
    m = memoryview(DanglingExporter(n))   # the exporter dies right here
    return checksum(m)                     # BUG: reads the freed block


def dangling_export_numpy(Py_ssize_t n=1024):
    """The same bug, read by numpy (uninstrumented): valgrind sees it, ASan cannot."""
    import numpy as np
    a = np.asarray(memoryview(DanglingExporter(n))).view(np.float64)
    return float(a.sum())                  # BUG: numpy reads the freed block


def owned_export(Py_ssize_t n=1024):
    """Control: the same access pattern through rtx.Storage must run clean."""
    import rtx
    m = memoryview(rtx.Storage(n * sizeof(double))).cast("d")
    for i in range(n):
        m[i] = i
    return checksum(m)
