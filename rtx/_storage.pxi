# Owned storage and the caching allocator.
#
# One ``Storage`` owns exactly one aligned C allocation and gives it back
# exactly once, in ``__dealloc__``.  Everything else that looks at the memory
# (numpy views through the buffer protocol, rtx views, DLPack capsules) holds a
# strong reference to the Storage and never owns the pointer.
#
# Freed blocks go to a size-bucketed cache, bounded by ``_cache_limit`` bytes,
# and are handed to the next allocation of the same size class (or, above
# 4 KiB, of one of the next ``BEST_FIT_CLASSES`` classes: a sampled batch's
# shapes vary from step to step by a few percent): training loops allocate
# the same shapes every step and a fresh large buffer costs page faults.  The
# cache is least-recently-used by size class: a freed block that does not fit
# under the limit evicts the blocks of the classes touched longest ago (a
# one-off build's temporaries) instead of going to the system itself, so the
# cache follows the loop's working set.  The cache is plain C (a stack of
# addresses per class and a list of the non-empty classes in the order they
# were touched): a cached allocation and a free create no Python object, so no
# garbage collection can run inside them.  Blocks of ``HUGE_THRESHOLD`` bytes or
# more are 2 MiB aligned and ``madvise(MADV_HUGEPAGE)``d where the platform
# has it.

from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES
from cpython.object cimport PyObject
from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdint cimport uintptr_t
from libc.math cimport INFINITY
from libc.string cimport memset

cimport cython
cimport numpy as cnp
from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_INCREF


cdef extern from "numpy/arrayobject.h":
    # (numpy's __init__.pxd leaves PyArray_NewFromDescr out: it steals the descriptor)
    PyTypeObject PyArray_Type
    # (and PyArray_MatrixProduct2, np.dot's own implementation, which takes ``out``)
    object PyArray_MatrixProduct2(object a, object b, cnp.ndarray out)
    object PyArray_NewFromDescr(PyTypeObject* subtype, cnp.dtype descr, int nd,
                                cnp.npy_intp* dims, cnp.npy_intp* strides, void* data,
                                int flags, PyObject* obj)


cdef extern from *:
    """
    #include <stdlib.h>
    #if defined(_WIN32)
    #include <malloc.h>
    static void* rtx_aligned_alloc(size_t align, size_t n) { return _aligned_malloc(n, align); }
    static void rtx_aligned_free(void* p) { _aligned_free(p); }
    static int rtx_hint_hugepage(void* p, size_t n) { (void)p; (void)n; return 0; }
    #else
    #include <sys/mman.h>
    static void* rtx_aligned_alloc(size_t align, size_t n) {
        void* p = NULL;
        if (posix_memalign(&p, align, n) != 0) return NULL;
        return p;
    }
    static void rtx_aligned_free(void* p) { free(p); }
    static int rtx_hint_hugepage(void* p, size_t n) {
    #ifdef MADV_HUGEPAGE
        return madvise(p, n, MADV_HUGEPAGE) == 0;
    #else
        (void)p; (void)n; return 0;
    #endif
    }
    #endif
    /* The cache of freed blocks: per size class a stack of addresses, and the
       non-empty classes in a doubly linked list, least recently touched first.
       Classes are indexed 0..RTX_NCLASSES-1: 64-byte steps up to 4 KiB (0..63),
       then 8 per power of two, (p/2, p] in steps of p/16, up to 2^62 bytes.
       Only called with the GIL held (as every Storage is made and freed). */
    #define RTX_NCLASSES 464
    typedef struct { void** ptrs; Py_ssize_t count, cap, bytes; int prev, next; } rtx_bucket;
    static rtx_bucket rtx_buckets[RTX_NCLASSES];
    static int rtx_lru_head = -1, rtx_lru_tail = -1;
    static int rtx_class_index(Py_ssize_t c) {      /* c: a size class */
        Py_ssize_t p = 8192;
        int e = 13;
        if (c <= 4096) return (int)(c / 64) - 1;
        while (p < c) { p <<= 1; e++; }
        return 64 + (e - 13) * 8 + (int)(c / (p >> 4)) - 9;
    }
    static void rtx_lru_unlink(int i) {
        rtx_bucket* b = &rtx_buckets[i];
        if (b->prev >= 0) rtx_buckets[b->prev].next = b->next; else rtx_lru_head = b->next;
        if (b->next >= 0) rtx_buckets[b->next].prev = b->prev; else rtx_lru_tail = b->prev;
        b->prev = b->next = -1;
    }
    static void rtx_lru_append(int i) {               /* the most recently touched */
        rtx_bucket* b = &rtx_buckets[i];
        b->prev = rtx_lru_tail;
        b->next = -1;
        if (rtx_lru_tail >= 0) rtx_buckets[rtx_lru_tail].next = i; else rtx_lru_head = i;
        rtx_lru_tail = i;
    }
    static void rtx_cache_init(void) {
        for (int i = 0; i < RTX_NCLASSES; i++) {
            rtx_buckets[i].ptrs = NULL;
            rtx_buckets[i].count = rtx_buckets[i].cap = rtx_buckets[i].bytes = 0;
            rtx_buckets[i].prev = rtx_buckets[i].next = -1;
        }
    }
    /* a cached block of size class cls (NULL: none); the class becomes the
       most recently touched, or leaves the list when this was its last block */
    static void* rtx_cache_pop(Py_ssize_t cls) {
        int i = rtx_class_index(cls);
        rtx_bucket* b = &rtx_buckets[i];
        void* p;
        if (b->count == 0) return NULL;
        p = b->ptrs[--b->count];
        rtx_lru_unlink(i);
        if (b->count) rtx_lru_append(i);
        return p;
    }
    /* the least recently touched class's most recently cached block, for
       eviction (NULL: the cache is empty); the class keeps its place in the
       list until its last block goes.  *cls_bytes: its size class */
    static void* rtx_cache_pop_oldest(Py_ssize_t* cls_bytes) {
        int i = rtx_lru_head;
        rtx_bucket* b;
        void* p;
        if (i < 0) return NULL;
        b = &rtx_buckets[i];
        p = b->ptrs[--b->count];
        if (b->count == 0) rtx_lru_unlink(i);
        *cls_bytes = b->bytes;
        return p;
    }
    /* cache p, a block of size class cls (now the most recently touched); 0
       when the stack could not grow (p is then not cached) */
    static int rtx_cache_push(Py_ssize_t cls, void* p) {
        int i = rtx_class_index(cls);
        rtx_bucket* b = &rtx_buckets[i];
        if (b->count == b->cap) {
            Py_ssize_t cap = b->cap ? 2 * b->cap : 8;
            void** grown = (void**)realloc(b->ptrs, (size_t)cap * sizeof(void*));
            if (grown == NULL) return 0;
            b->ptrs = grown;
            b->cap = cap;
        }
        b->ptrs[b->count++] = p;
        b->bytes = cls;
        if (b->count > 1) rtx_lru_unlink(i);
        rtx_lru_append(i);
        return 1;
    }
    /* free the stacks themselves (the cache must be empty) */
    static void rtx_cache_shrink(void) {
        for (int i = 0; i < RTX_NCLASSES; i++) {
            if (rtx_buckets[i].count == 0) {
                free(rtx_buckets[i].ptrs);
                rtx_buckets[i].ptrs = NULL;
                rtx_buckets[i].cap = 0;
            }
        }
    }
    """
    void* rtx_aligned_alloc(size_t align, size_t n) nogil
    void rtx_aligned_free(void* p) nogil
    int rtx_hint_hugepage(void* p, size_t n) nogil
    void rtx_cache_init()
    void* rtx_cache_pop(Py_ssize_t cls)
    void* rtx_cache_pop_oldest(Py_ssize_t* cls_bytes)
    int rtx_cache_push(Py_ssize_t cls, void* p)
    void rtx_cache_shrink()


cdef enum:
    ALIGNMENT = 64
    HUGE_ALIGNMENT = 2097152          # 2 MiB
    HUGE_THRESHOLD = 4194304          # 4 MiB
    BEST_FIT_CLASSES = 2              # a cached block up to 2 classes larger serves (> 4 KiB)

# Allocator statistics (guarded by the GIL: Storage is created and freed with it).
cdef Py_ssize_t _current_bytes = 0
cdef Py_ssize_t _peak_bytes = 0
cdef Py_ssize_t _allocations = 0     # blocks handed to a Storage (fresh or cached)
cdef Py_ssize_t _frees = 0           # blocks given back by a Storage
cdef Py_ssize_t _system_allocs = 0   # blocks obtained from the system
cdef Py_ssize_t _system_frees = 0    # blocks returned to the system
cdef Py_ssize_t _cache_hits = 0
cdef Py_ssize_t _cached_bytes = 0
cdef Py_ssize_t _cache_limit = 1 << 29     # 512 MiB: docs/performance.md (allocator)
cdef Py_ssize_t _hugepage_hints = 0
rtx_cache_init()                     # the cache itself: rtx_buckets (C, above)
cdef bint _shutting_down = False     # after exit starts, freed blocks bypass the cache
# An ``uncached_frees()`` block: what its thread frees inside goes to the system
cdef unsigned long _uncached_owner = 0
cdef int _uncached_depth = 0


cdef Py_ssize_t MAX_STORAGE_BYTES = (<Py_ssize_t>1) << 62


cdef inline Py_ssize_t _size_class(Py_ssize_t nbytes) noexcept:
    """Round a request up to its size class.

    Small requests round to 64 bytes; from 4 KiB on, every power of two is
    split into 8 classes, so a class wastes at most 12.5%.
    """
    cdef Py_ssize_t step, p
    if nbytes <= 0:
        return ALIGNMENT
    if nbytes <= 4096:
        return (nbytes + ALIGNMENT - 1) & ~(<Py_ssize_t>ALIGNMENT - 1)
    p = 1
    while p < nbytes:
        p <<= 1
    step = p >> 4              # (p/2) / 8
    return (nbytes + step - 1) // step * step


cdef void* _system_alloc(Py_ssize_t nbytes):
    cdef void* ptr
    global _system_allocs, _hugepage_hints
    if nbytes >= HUGE_THRESHOLD:
        ptr = rtx_aligned_alloc(HUGE_ALIGNMENT, <size_t>nbytes)
        if ptr != NULL and rtx_hint_hugepage(ptr, <size_t>nbytes):
            _hugepage_hints += 1
    else:
        ptr = rtx_aligned_alloc(ALIGNMENT, <size_t>nbytes)
    if ptr != NULL:
        _system_allocs += 1
    return ptr


cdef void* _alloc(Py_ssize_t* cls) except NULL:
    """A block of ``cls[0]`` bytes (a size class), from the cache or the system.

    Above 4 KiB a cached block of one of the next ``BEST_FIT_CLASSES`` classes
    serves too (at most about 25% larger); ``cls[0]`` becomes the class of the
    block handed out, which is what the caller frees it as.
    """
    global _current_bytes, _peak_bytes, _allocations, _cache_hits, _cached_bytes
    cdef void* ptr = NULL
    cdef Py_ssize_t c = cls[0]
    cdef int k
    # (classes past MAX_STORAGE_BYTES / 4 are never computed: _size_class would
    # overflow on them; no block that large is ever cached anyway)
    cdef int tries = 1 + (BEST_FIT_CLASSES if 4096 < c <= (MAX_STORAGE_BYTES >> 2) else 0)
    if _cached_bytes:
        for k in range(tries):
            ptr = rtx_cache_pop(c)
            if ptr != NULL:
                _cached_bytes -= c
                _cache_hits += 1
                cls[0] = c
                break
            if k + 1 < tries:
                c = _size_class(c + 1)
    if ptr == NULL:
        c = cls[0]
        ptr = _system_alloc(c)
        if ptr == NULL:
            # Give the cache back and try once more before failing.
            _release_cache()
            ptr = _system_alloc(c)
        if ptr == NULL:
            raise MemoryError(f"rtx: cannot allocate {c} bytes")
    _allocations += 1
    _current_bytes += cls[0]
    if _current_bytes > _peak_bytes:
        _peak_bytes = _current_bytes
    return ptr


cdef void _evict_for(Py_ssize_t cls) noexcept:
    """Free cached blocks, least recently touched class first, until a block of
    ``cls`` bytes fits under the limit (or the cache is empty)."""
    global _cached_bytes, _system_frees
    cdef Py_ssize_t c = 0
    cdef void* ptr
    while cls > _cache_limit - _cached_bytes:
        ptr = rtx_cache_pop_oldest(&c)
        if ptr == NULL:
            return
        rtx_aligned_free(ptr)
        _cached_bytes -= c
        _system_frees += 1


cdef inline bint _in_uncached_block() noexcept:
    """Whether this thread is inside an ``uncached_frees()`` block (the GIL is held:
    every free runs from a Storage's ``__dealloc__``)."""
    return _uncached_depth > 0 and PyThread_get_thread_ident() == _uncached_owner


cdef void _free(void* ptr, Py_ssize_t cls) noexcept:
    """Give a block back: to the cache (evicting the least recently touched
    classes to make room under the limit), else to the system.  Creates no
    Python object, so no garbage collection (and no other free) runs inside."""
    global _current_bytes, _frees, _cached_bytes, _system_frees
    _current_bytes -= cls
    _frees += 1
    if not _shutting_down and cls <= _cache_limit and not _in_uncached_block():
        _evict_for(cls)                    # now cls <= _cache_limit - _cached_bytes
        if rtx_cache_push(cls, ptr):
            _cached_bytes += cls
            return
    rtx_aligned_free(ptr)
    _system_frees += 1


cdef void _release_cache() noexcept:
    """Return every cached block to the system (and the cache's own stacks)."""
    global _cached_bytes, _system_frees
    cdef Py_ssize_t c = 0
    cdef void* ptr = rtx_cache_pop_oldest(&c)
    while ptr != NULL:
        rtx_aligned_free(ptr)
        _system_frees += 1
        ptr = rtx_cache_pop_oldest(&c)
    _cached_bytes = 0
    rtx_cache_shrink()


def _release_cache_at_exit():
    """Free the cache when the interpreter exits and stop caching from then on.

    (Every cached block would otherwise stay allocated until the process
    ends, reported by leak checkers as still reachable.)
    """
    global _shutting_down
    _shutting_down = True
    _release_cache()


import atexit as _atexit  # noqa: E402

_atexit.register(_release_cache_at_exit)


#: stub
#: class _MemoryStats(TypedDict):
#:     current_bytes: int
#:     peak_bytes: int
#:     allocations: int
#:     frees: int
#:     cache_hits: int
#:     cached_bytes: int
#:     cache_limit: int
#:     system_allocations: int
#:     system_frees: int
#:     hugepage_hints: int
def memory_stats():
    #: -> _MemoryStats
    """Counters of rtx's allocator.

    ``current_bytes`` / ``peak_bytes`` count bytes held by live storages
    (rounded to their size class); ``allocations`` / ``frees`` count storages
    created and destroyed; ``cache_hits`` counts allocations served from the
    cache of freed blocks, which holds ``cached_bytes`` (at most
    ``cache_limit``).
    """
    return {
        "current_bytes": _current_bytes,
        "peak_bytes": _peak_bytes,
        "allocations": _allocations,
        "frees": _frees,
        "cache_hits": _cache_hits,
        "cached_bytes": _cached_bytes,
        "cache_limit": _cache_limit,
        "system_allocations": _system_allocs,
        "system_frees": _system_frees,
        "hugepage_hints": _hugepage_hints,
    }


def reset_peak_memory_stats():
    """Reset ``peak_bytes`` to the current number of bytes in use."""
    global _peak_bytes
    _peak_bytes = _current_bytes


def empty_cache():
    """Return every cached free block to the system."""
    _release_cache()


@cython.auto_pickle(False)      # (a context manager: nothing to pickle)
cdef class uncached_frees:
    """A block whose frees (this thread's) go to the system, not the cache.

    ``with uncached_frees():`` -- other threads' frees are cached as usual.  For
    one-off work whose temporaries no later step reuses (building a
    sampler's adjacency): left in the cache, they would hold memory until the
    least-recently-used eviction reached them.  Nests; a block another thread
    has open makes this one a no-op (it is a memory hint, never a correctness
    matter)."""

    cdef bint _active

    def __enter__(self):
        #: -> uncached_frees
        global _uncached_owner, _uncached_depth
        cdef unsigned long me = PyThread_get_thread_ident()
        if self._active:
            raise RuntimeError("uncached_frees: this block is already open")
        self._active = _uncached_depth == 0 or _uncached_owner == me
        if self._active:
            _uncached_owner = me
            _uncached_depth += 1
        return self

    def __exit__(self, *exc):
        #: *exc: object
        #: -> bool
        global _uncached_depth
        if self._active:
            self._active = False
            _uncached_depth -= 1
        return False


def set_cache_limit(Py_ssize_t nbytes):
    """Bound the cache of freed blocks to ``nbytes`` (0 disables caching)."""
    global _cache_limit
    if nbytes < 0:
        raise ValueError(f"cache limit must be >= 0 bytes, got {nbytes}")
    _cache_limit = nbytes
    if _cached_bytes > _cache_limit:
        _release_cache()


def get_cache_limit():
    #: -> int
    return _cache_limit


cdef class Storage:
    """One owned, 64-byte aligned (2 MiB for large blocks) C allocation.

    Exported through the buffer protocol as writable bytes; every exported
    view references this object (``buf.obj``), so the memory lives as long as
    any view does and is freed exactly once, when the last reference goes.
    """

    cdef void* ptr
    cdef readonly Py_ssize_t nbytes
    cdef Py_ssize_t capacity
    cdef Py_ssize_t _shape[1]
    cdef Py_ssize_t _strides[1]
    cdef readonly Py_ssize_t exports

    def __cinit__(self, Py_ssize_t nbytes, bint zero=False):
        if nbytes < 0:
            raise ValueError(f"Storage size must be >= 0, got {nbytes}")
        if nbytes > MAX_STORAGE_BYTES:
            # Beyond any address space (and _size_class would overflow on it).
            raise MemoryError(f"rtx: cannot allocate {nbytes} bytes")
        self.ptr = NULL
        self.capacity = _size_class(nbytes)
        self.ptr = _alloc(&self.capacity)   # may hand out a larger cached class
        self.nbytes = nbytes
        self.exports = 0
        if zero and nbytes > 0:
            with nogil:
                memset(self.ptr, 0, <size_t>nbytes)

    def __dealloc__(self):
        if self.ptr != NULL:
            _free(self.ptr, self.capacity)
            self.ptr = NULL

    @property
    def address(self):
        #: -> int
        """The block's address (for tests and DLPack; never free it)."""
        return <uintptr_t>self.ptr

    def __getbuffer__(self, Py_buffer* buf, int flags):
        self._shape[0] = self.nbytes
        self._strides[0] = 1
        buf.buf = self.ptr
        buf.obj = self            # the view keeps its owner alive
        buf.len = self.nbytes
        buf.readonly = 0
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
        self.exports += 1

    def __releasebuffer__(self, Py_buffer* buf):
        self.exports -= 1

    def __repr__(self):
        return f"<rtx Storage {self.nbytes} bytes at {hex(<uintptr_t>self.ptr)}>"


cdef enum:
    _SA_MAX_DIMS = 64                 # numpy's NPY_MAXDIMS


cdef object _array_over_storage(cnp.dtype descr, int nd, cnp.npy_intp* dims,
                                Py_ssize_t nbytes, bint zero):
    """A C-contiguous, writable array of ``nd`` dims ``dims`` and dtype ``descr``
    over a fresh ``Storage`` of ``nbytes`` (the callers checked all three)."""
    cdef Storage st = Storage.__new__(Storage, nbytes, zero)   # (tp_new: no type call)
    Py_INCREF(descr)              # PyArray_NewFromDescr steals the descriptor
    arr = PyArray_NewFromDescr(
        &PyArray_Type, descr, nd, dims, NULL, st.ptr,
        cnp.NPY_ARRAY_C_CONTIGUOUS | cnp.NPY_ARRAY_ALIGNED | cnp.NPY_ARRAY_WRITEABLE, NULL)
    cnp.set_array_base(arr, st)   # the array references its owner (a strong reference)
    return arr


cdef cnp.ndarray _storage_like(cnp.ndarray a):
    """A new C-contiguous array of ``a``'s shape and dtype (a number dtype, checked
    by the caller) over a fresh ``Storage``: ``storage_array(a.shape, a.dtype)``
    for the kernels' own calls, without the Python call and the shape's parsing
    (``a``'s dims are valid and its byte count exists)."""
    return _array_over_storage(<cnp.dtype>cnp.PyArray_DESCR(a), cnp.PyArray_NDIM(a),
                               cnp.PyArray_DIMS(a), cnp.PyArray_NBYTES(a), False)


def storage_array(tuple shape, dtype, bint zero=False):
    #: shape: tuple[int, ...]
    #: dtype: np.dtype[Any]
    #: -> npt.NDArray[Any]
    """A C-contiguous, writable array of ``shape`` and ``dtype`` over a fresh
    ``Storage`` (its ``base``): what ``np.ndarray(shape, dtype, Storage(n))`` makes,
    without its buffer export and argument parsing.  Numbers and
    bools only (uninitialised memory must never be read as object pointers).
    Before anything is allocated: ``MemoryError`` when the byte count passes 2**62,
    ``ValueError`` for a negative dimension or more than 64, ``TypeError`` for a
    non-integer one or another dtype, ``OverflowError`` for a dimension past 2**63."""
    cdef cnp.npy_intp dims[_SA_MAX_DIMS]
    cdef cnp.dtype descr = dtype      # TypeError unless an np.dtype
    cdef Py_ssize_t nd = len(shape), i, nbytes, d
    cdef int t = descr.type_num
    if not (0 <= t <= cnp.NPY_CLONGDOUBLE or t == cnp.NPY_FLOAT16) or descr.hasobject:
        raise TypeError(f"storage_array: {dtype} is not a number or bool dtype")
    if nd > _SA_MAX_DIMS:
        raise ValueError(f"storage_array: {nd} dimensions (numpy allows {_SA_MAX_DIMS})")
    nbytes = descr.itemsize
    for i in range(nd):
        d = shape[i]              # TypeError / OverflowError for a non-integer or huge one
        if d < 0:
            raise ValueError("negative dimensions are not allowed")
        dims[i] = d
    for i in range(nd):
        if dims[i] == 0:
            nbytes = 0
            break
    if nbytes:
        for i in range(nd):
            if dims[i] > MAX_STORAGE_BYTES // nbytes:
                raise MemoryError(f"rtx: an array of shape {shape} is too large")
            nbytes *= dims[i]
    return _array_over_storage(descr, <int>nd, dims, nbytes, zero)


import numpy as _np_st

# The float dtypes the small-op paths below answer (numpy's own descriptors: an
# array whose descriptor is another object, a byte-swapped one say, takes the
# caller's general path).
cdef object _ST_F32 = _np_st.dtype(_np_st.float32)
cdef object _ST_F64 = _np_st.dtype(_np_st.float64)


cdef object _ST_ADD = _np_st.add
cdef object _ST_SUB = _np_st.subtract
cdef object _ST_MUL = _np_st.multiply
cdef object _ST_DIV = _np_st.true_divide
cdef double _ST_FLT_MAX = 3.4028234663852886e38


cdef inline int _arith_code(object ufunc):
    """RTX_ARITH_* for numpy's add / subtract / multiply / true_divide, else -1."""
    if ufunc is _ST_ADD:
        return RTX_ARITH_ADD
    if ufunc is _ST_SUB:
        return RTX_ARITH_SUB
    if ufunc is _ST_MUL:
        return RTX_ARITH_MUL
    if ufunc is _ST_DIV:
        return RTX_ARITH_DIV
    return -1


cdef bint _scalar_value(object s, bint single, double* v) except -1:
    """Whether the Python ``float`` / ``int`` ``s`` is one numpy casts to the
    array's dtype (float32 when ``single``) without a warning and without a
    rounding of its own: a float (within float32's range, or not finite, for
    float32) or an int of at most 2**24 in magnitude; its value in ``v``."""
    cdef object t = type(s)
    if t is float:
        v[0] = <double>s
        return not single or not (_ST_FLT_MAX < v[0] < INFINITY
                                  or -INFINITY < v[0] < -_ST_FLT_MAX)
    if t is int and -16777216 <= s <= 16777216:
        v[0] = <double>s
        return True
    return False


def owned_binary(ufunc, a, b, Py_ssize_t max_size):
    #: ufunc: Any
    #: a: object
    #: b: object
    #: -> npt.NDArray[Any] | None
    """``ufunc(a, b, out=new)`` into a new owned array (``storage_array``) of the
    array operand's shape and dtype, for the CPU backend's common case, asked in
    C: ``a`` a float32 / float64 numpy array (exactly ``np.ndarray``) and ``b``
    one of the same dtype and shape with fewer than ``max_size`` elements, or a
    Python ``float`` / ``int``.  None for anything else (the caller's general
    path: promotion, broadcasting, threads).  numpy computes it (numpy's bits),
    except add / subtract / multiply / true_divide over C-contiguous operands
    (and ``a`` a Python number, ``b`` such an array: ``2 - x``), which run
    ``_vmath.pxi``'s loops without the ufunc call: one IEEE operation per
    element, the same bits, and no floating-point warnings (as PyTorch and the
    threaded path: numpy warns on ``x / 0``).  A scalar takes the loops only
    where numpy's cast to the array's dtype is exact or warning-free
    (``_scalar_value``)."""
    cdef cnp.ndarray x
    cdef cnp.ndarray y = None      # the second array (None: a scalar operand)
    cdef object d
    cdef int op = _arith_code(ufunc)
    cdef bint rev = False, loops
    cdef double v = 0.0
    cdef Py_ssize_t n
    tb = type(b)
    if type(a) is not cnp.ndarray:
        # a Python number first (the reflected operators: 2 - x, 1 / x): loops only
        if op < 0 or tb is not cnp.ndarray:
            return None
        x = <cnp.ndarray>b
        d = <object>cnp.PyArray_DESCR(x)
        if ((d is not _ST_F32 and d is not _ST_F64) or not cnp.PyArray_IS_C_CONTIGUOUS(x)
                or not _scalar_value(a, d is _ST_F32, &v)):
            return None
        rev = True
    else:
        x = <cnp.ndarray>a
        d = <object>cnp.PyArray_DESCR(x)
        if d is not _ST_F32 and d is not _ST_F64:
            return None
        if tb is cnp.ndarray:
            y = <cnp.ndarray>b
            if (<object>cnp.PyArray_DESCR(y) is not d or not cnp.PyArray_SAMESHAPE(x, y)
                    or cnp.PyArray_SIZE(x) >= max_size):
                return None
            loops = op >= 0 and cnp.PyArray_IS_C_CONTIGUOUS(y)
        elif tb is float or tb is int:
            loops = op >= 0 and _scalar_value(b, d is _ST_F32, &v)
        else:
            return None
        if not (loops and cnp.PyArray_IS_C_CONTIGUOUS(x)):
            out = _storage_like(x)
            # (out a keyword: numpy 2 deprecates maximum's third positional argument)
            ufunc(a, b, out=out)
            return out
    out = _storage_like(x)
    n = cnp.PyArray_SIZE(x)
    with nogil:   # (out is private; the operands' pointers and size read above)
        if d is _ST_F32:
            if y is None:
                rtx_arith_scalar_f32(op, rev, <float*>cnp.PyArray_DATA(out),
                                     <const float*>cnp.PyArray_DATA(x), <float>v, n)
            else:
                rtx_arith_f32(op, <float*>cnp.PyArray_DATA(out),
                              <const float*>cnp.PyArray_DATA(x),
                              <const float*>cnp.PyArray_DATA(y), n)
        elif y is None:
            rtx_arith_scalar_f64(op, rev, <double*>cnp.PyArray_DATA(out),
                                 <const double*>cnp.PyArray_DATA(x), v, n)
        else:
            rtx_arith_f64(op, <double*>cnp.PyArray_DATA(out),
                          <const double*>cnp.PyArray_DATA(x),
                          <const double*>cnp.PyArray_DATA(y), n)
    return out


def owned_matmul(a, b, Py_ssize_t max_size):
    #: a: object
    #: b: object
    #: -> npt.NDArray[Any] | None
    """``a @ b`` into a new owned array for the CPU backend's small 2-D case, asked
    in C: ``a`` and ``b`` float32 / float64 numpy arrays (exactly ``np.ndarray``, any
    strides) of one dtype, 2-D, their inner dims equal, ``m * n`` and ``m * n * k``
    below ``max_size``.  numpy's ``PyArray_MatrixProduct2`` computes it, the function
    ``np.dot(a, b, out=out)`` calls (its bits), without ``np.dot``'s Python
    dispatcher.  None for anything else (the caller's general path, which raises
    for misaligned shapes)."""
    cdef cnp.ndarray x, y
    cdef object d
    cdef cnp.npy_intp dims[2]
    if type(a) is not cnp.ndarray or type(b) is not cnp.ndarray:
        return None
    x = <cnp.ndarray>a
    y = <cnp.ndarray>b
    d = <object>cnp.PyArray_DESCR(x)
    if (d is not _ST_F32 and d is not _ST_F64) or <object>cnp.PyArray_DESCR(y) is not d:
        return None
    if cnp.PyArray_NDIM(x) != 2 or cnp.PyArray_NDIM(y) != 2:
        return None
    dims[0] = cnp.PyArray_DIM(x, 0)
    dims[1] = cnp.PyArray_DIM(y, 1)
    if cnp.PyArray_DIM(x, 1) != cnp.PyArray_DIM(y, 0):
        return None
    # (the output's size too: with k = 0 the product says nothing about m * n, which
    # could pass 2**63 bytes)
    if (<double>dims[0] * <double>dims[1] >= <double>max_size
            or <double>dims[0] * <double>dims[1] * <double>cnp.PyArray_DIM(x, 1)
            >= <double>max_size):
        return None
    out = _array_over_storage(<cnp.dtype>d, 2, dims,
                              dims[0] * dims[1] * cnp.PyArray_ITEMSIZE(x), False)
    PyArray_MatrixProduct2(x, y, <cnp.ndarray>out)
    return out


def owned_unary(ufunc, a):
    #: ufunc: Any
    #: a: object
    #: -> npt.NDArray[Any] | None
    """``ufunc(a, out=new)`` into a new owned array of ``a``'s shape and dtype,
    for a float32 / float64 numpy array (exactly ``np.ndarray``); None for
    anything else (the caller's general path)."""
    cdef object d
    if type(a) is not cnp.ndarray:
        return None
    d = <object>cnp.PyArray_DESCR(<cnp.ndarray>a)
    if d is not _ST_F32 and d is not _ST_F64:
        return None
    out = _storage_like(<cnp.ndarray>a)
    ufunc(a, out)     # (out positional: a keyword costs the call a dict)
    return out
