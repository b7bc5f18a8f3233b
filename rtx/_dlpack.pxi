# DLPack interop (https://dmlc.github.io/dlpack/latest/python_spec.html).
#
# Export: ``dlpack_export(arr, ...)`` hands a numpy array's memory (on the CPU
# backend: memory owned by an rtx ``Storage``, or by the user's own array for
# ``rtx.from_numpy``) to a consumer as a PyCapsule named ``"dltensor"``
# (``DLManagedTensor``, DLPack < 1.0) or ``"dltensor_versioned"``
# (``DLManagedTensorVersioned``, DLPack 1.x, which can say "read-only").
#
# Ownership, exactly:
# - ``manager_ctx`` holds ONE strong reference to the exported array; its base
#   chain reaches the owning Storage, so the memory lives while a consumer holds
#   it, even after every rtx Tensor that used it is gone.
# - The deleter frees the one malloc'd block (struct + shape + strides) and drops
#   that reference.  It runs exactly once: called by the consumer, which first
#   renames the capsule to ``"used_dltensor[_versioned]"``, or else by the
#   capsule's destructor when nobody consumed it.  A consumed capsule's
#   destructor does nothing.
# - A capsule can be consumed once: consumers refuse a renamed capsule.
#
# Import (``rtx.from_dlpack``) lives in ``rtx/creation.py`` (the kernel layer
# imports nothing above it): ``numpy.from_dlpack`` (which speaks both capsule
# versions and honours the read-only flag), then ``rtx.from_numpy``: zero-copy
# whenever the memory is C-contiguous in a supported dtype.

from cpython.pycapsule cimport PyCapsule_Destructor, PyCapsule_IsValid, PyCapsule_New
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport malloc


cdef extern from *:
    """
    #include <stdint.h>
    #include <stdlib.h>

    typedef struct { uint32_t major; uint32_t minor; } rtx_DLPackVersion;
    typedef struct { int32_t device_type; int32_t device_id; } rtx_DLDevice;
    typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } rtx_DLDataType;
    typedef struct {
        void* data;
        rtx_DLDevice device;
        int32_t ndim;
        rtx_DLDataType dtype;
        int64_t* shape;
        int64_t* strides;
        uint64_t byte_offset;
    } rtx_DLTensor;
    typedef struct rtx_DLManagedTensor {
        rtx_DLTensor dl_tensor;
        void* manager_ctx;
        void (*deleter)(struct rtx_DLManagedTensor* self);
    } rtx_DLManagedTensor;
    typedef struct rtx_DLManagedTensorVersioned {
        rtx_DLPackVersion version;
        void* manager_ctx;
        void (*deleter)(struct rtx_DLManagedTensorVersioned* self);
        uint64_t flags;
        rtx_DLTensor dl_tensor;
    } rtx_DLManagedTensorVersioned;

    #define RTX_DLPACK_FLAG_READ_ONLY ((uint64_t)1 << 0)
    #define RTX_DLPACK_FLAG_IS_COPIED ((uint64_t)1 << 1)

    /* Counters for tests (changed with the GIL held). */
    static Py_ssize_t rtx_dlpack_exported = 0;
    static Py_ssize_t rtx_dlpack_deleted = 0;

    /* Drop the owner reference.  A consumer may call the deleter from any
       thread, with or without the GIL; during interpreter shutdown the
       reference is leaked rather than touching a dying interpreter. */
    static void rtx_dlpack_release_owner(void* owner) {
        PyGILState_STATE st;
    #if PY_VERSION_HEX >= 0x030d0000
        if (Py_IsFinalizing()) return;
    #else
        if (_Py_IsFinalizing()) return;
    #endif
        st = PyGILState_Ensure();
        rtx_dlpack_deleted++;
        Py_XDECREF((PyObject*)owner);
        PyGILState_Release(st);
    }

    static void rtx_dlpack_deleter(rtx_DLManagedTensor* self) {
        void* owner;
        if (self == NULL) return;
        owner = self->manager_ctx;
        free(self);                       /* one block: struct + shape + strides */
        rtx_dlpack_release_owner(owner);
    }

    static void rtx_dlpack_deleter_versioned(rtx_DLManagedTensorVersioned* self) {
        void* owner;
        if (self == NULL) return;
        owner = self->manager_ctx;
        free(self);
        rtx_dlpack_release_owner(owner);
    }

    /* Capsule destructors: call the deleter only if nobody consumed the capsule
       (a consumer renames it "used_..." and becomes responsible for the deleter). */
    static void rtx_dlpack_capsule_destructor(PyObject* capsule) {
        PyObject *et, *ev, *tb;
        rtx_DLManagedTensor* m;
        if (PyCapsule_IsValid(capsule, "used_dltensor")) return;
        PyErr_Fetch(&et, &ev, &tb);
        m = (rtx_DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
        if (m == NULL) PyErr_WriteUnraisable(capsule);
        else if (m->deleter != NULL) m->deleter(m);
        PyErr_Restore(et, ev, tb);
    }

    static void rtx_dlpack_capsule_destructor_versioned(PyObject* capsule) {
        PyObject *et, *ev, *tb;
        rtx_DLManagedTensorVersioned* m;
        if (PyCapsule_IsValid(capsule, "used_dltensor_versioned")) return;
        PyErr_Fetch(&et, &ev, &tb);
        m = (rtx_DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (m == NULL) PyErr_WriteUnraisable(capsule);
        else if (m->deleter != NULL) m->deleter(m);
        PyErr_Restore(et, ev, tb);
    }
    """
    ctypedef struct rtx_DLPackVersion:
        uint32_t major
        uint32_t minor
    ctypedef struct rtx_DLDevice:
        int32_t device_type
        int32_t device_id
    ctypedef struct rtx_DLDataType:
        uint8_t code
        uint8_t bits
        uint16_t lanes
    ctypedef struct rtx_DLTensor:
        void* data
        rtx_DLDevice device
        int32_t ndim
        rtx_DLDataType dtype
        int64_t* shape
        int64_t* strides
        uint64_t byte_offset
    ctypedef struct rtx_DLManagedTensor:
        rtx_DLTensor dl_tensor
        void* manager_ctx
        void (*deleter)(rtx_DLManagedTensor*) noexcept
    ctypedef struct rtx_DLManagedTensorVersioned:
        rtx_DLPackVersion version
        void* manager_ctx
        void (*deleter)(rtx_DLManagedTensorVersioned*) noexcept
        uint64_t flags
        rtx_DLTensor dl_tensor
    uint64_t RTX_DLPACK_FLAG_READ_ONLY
    uint64_t RTX_DLPACK_FLAG_IS_COPIED
    Py_ssize_t rtx_dlpack_exported
    Py_ssize_t rtx_dlpack_deleted
    void rtx_dlpack_deleter(rtx_DLManagedTensor*) noexcept
    void rtx_dlpack_deleter_versioned(rtx_DLManagedTensorVersioned*) noexcept
    void rtx_dlpack_capsule_destructor(object) noexcept
    void rtx_dlpack_capsule_destructor_versioned(object) noexcept


cdef enum:
    kDLCPU = 1
    kDLInt = 0
    kDLUInt = 1
    kDLFloat = 2
    kDLComplex = 5
    kDLBool = 6

# The DLPack version this module produces (1.0: versioned capsules, read-only
# and is-copied flags).  The export reads the C constants: the module globals
# are for reading only (a user can rebind them).
cdef enum:
    DLPACK_MAJOR = 1
    DLPACK_MINOR = 0
#: Final[tuple[int, int]]
DLPACK_VERSION = (DLPACK_MAJOR, DLPACK_MINOR)
#: Final[tuple[int, int]]
DLPACK_CPU_DEVICE = (1, 0)    # (kDLCPU, device 0)


#: stub
#: class _DLPackStats(TypedDict):
#:     exported: int
#:     deleted: int
def dlpack_stats():
    #: -> _DLPackStats
    """Capsules exported so far and deleter calls so far (for ownership tests).

    ``exported - deleted`` is the number of exports whose memory a consumer
    (or an unconsumed capsule) still holds.
    """
    return {"exported": rtx_dlpack_exported, "deleted": rtx_dlpack_deleted}


cdef rtx_DLDataType _dl_dtype(dt) except *:
    cdef rtx_DLDataType out
    kind = dt.kind
    if not dt.isnative and dt.itemsize > 1:
        raise BufferError(f"DLPack cannot export non-native byte order ({dt})")
    if kind == "f":
        out.code = kDLFloat
    elif kind == "i":
        out.code = kDLInt
    elif kind == "u":
        out.code = kDLUInt
    elif kind == "b":
        out.code = kDLBool
    elif kind == "c":
        out.code = kDLComplex
    else:
        raise BufferError(f"DLPack cannot export dtype {dt}")
    out.bits = <uint8_t>(dt.itemsize * 8)
    out.lanes = 1
    return out


cdef tuple _int_pair(value, str what):
    """``value`` as a pair of Python ints, or TypeError.

    The extension is built with ``boundscheck=False``: ``value[1]`` on a
    1-tuple reads past its end, so never index, unpack (which checks the
    length) and accept only real integers (``operator.index``).
    """
    import operator as _op
    if isinstance(value, (str, bytes, bytearray, dict)):
        raise TypeError(f"{what} must be a pair of ints, got {value!r}")
    try:
        a, b = value
        if isinstance(a, bool) or isinstance(b, bool):
            raise TypeError("bools are not ints here")
        return (_op.index(a), _op.index(b))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be a pair of ints, got {value!r}") from exc


cdef object _check_request(stream, max_version, dl_device, copy):
    """Validate ``__dlpack__``'s arguments; return whether to produce a versioned capsule."""
    if stream is not None:
        raise ValueError(
            f"rtx tensors live on the CPU: __dlpack__ needs stream=None, got {stream!r}"
        )
    if dl_device is not None:
        dev = _int_pair(dl_device, "dl_device (device_type, device_id)")
        if dev != (kDLCPU, 0):
            raise BufferError(
                f"rtx can export to the CPU only (dl_device (1, 0)), requested {dl_device!r}"
            )
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"copy must be True, False or None, got {copy!r}")
    if max_version is None:
        return False
    major, _minor = _int_pair(max_version, "max_version (major, minor)")
    return major >= 1


cdef object _owned_copy(arr):
    """A C-contiguous copy of ``arr`` in memory owned by an rtx Storage."""
    import numpy as _np
    n = arr.size
    st = Storage(n * arr.dtype.itemsize)
    out = _np.frombuffer(st, dtype=arr.dtype, count=n).reshape(arr.shape)
    _np.copyto(out, arr)
    return out


cdef bint _reversed(arr):
    """Whether ``arr`` walks its memory backwards: a negative stride on a dim of
    extent > 1, in an array with elements (elsewhere a stride moves nothing)."""
    if arr.size == 0:
        return False
    for n, s in zip(arr.shape, arr.strides):
        if s < 0 and n > 1:
            return True
    return False


def dlpack_export(arr, stream=None, max_version=None, dl_device=None, copy=None,
                  bint copied=False):
    #: -> Any
    #: arr: npt.NDArray[Any]
    #: max_version: tuple[int, int] | None
    #: dl_device: tuple[int, int] | None
    #: copy: bool | None
    """A DLPack capsule for the numpy array ``arr`` (the body of ``Tensor.__dlpack__``).

    ``copied`` says that ``arr`` is already a private copy (a backend whose
    data is not numpy memory exports through ``to_numpy``): then ``copy=False``
    is refused and a versioned capsule carries the is-copied flag.

    Zero-copy unless ``copy=True``, or the array is read-only and the consumer
    only speaks DLPack < 1.0 (which cannot say "read-only"): then a copy is
    exported when ``copy`` is None and ``BufferError`` raised when it is False.
    A view with negative strides raises ``BufferError`` unless ``copy=True``
    (consumers abort on them: torch's from_dlpack throws a C++ exception).
    """
    global rtx_dlpack_exported
    import numpy as _np
    cdef bint versioned = _check_request(stream, max_version, dl_device, copy)
    cdef rtx_DLDataType dtype
    cdef rtx_DLManagedTensor* m = NULL
    cdef rtx_DLManagedTensorVersioned* mv = NULL
    cdef rtx_DLTensor* t
    cdef int64_t* dims
    cdef Py_ssize_t ndim, i, itemsize
    cdef size_t head
    cdef uint64_t flags = 0
    cdef uintptr_t data

    if type(arr) is not _np.ndarray:
        raise TypeError(f"dlpack_export expects a numpy.ndarray, got {type(arr).__name__}")
    if copied and copy is False:
        raise BufferError(
            "this tensor's backend keeps its data outside numpy memory: exporting it "
            "needs a copy, and copy=False forbids one"
        )
    dtype = _dl_dtype(arr.dtype)
    ro = not arr.flags.writeable
    if copy is not True and _reversed(arr):
        # DLPack has no rule for negative strides and consumers do not take them:
        # torch's from_dlpack throws a C++ exception that aborts the process.
        # The array API's rule: BufferError for what cannot be exported as is.
        raise BufferError(
            f"DLPack cannot export a view with negative strides (strides {arr.strides}, "
            f"shape {arr.shape}): most consumers (PyTorch) cannot take them. Pass "
            "copy=True (e.g. torch.from_dlpack(t, copy=True)) or export t.contiguous()"
        )
    if copy is True or (ro and not versioned):
        if copy is False:
            raise BufferError(
                "cannot export a read-only tensor to a DLPack < 1.0 consumer without a copy "
                "(pass copy=None/True, or a max_version >= (1, 0))"
            )
        arr = _owned_copy(arr)
        ro = False
        copied = True
    itemsize = arr.dtype.itemsize
    for s in arr.strides:
        if s % itemsize:
            raise BufferError(
                f"DLPack strides count elements: byte strides {arr.strides} are not "
                f"multiples of the item size {itemsize}"
            )
    iface = arr.__array_interface__
    data = <uintptr_t>iface["data"][0]
    ndim = arr.ndim

    if versioned:
        head = sizeof(rtx_DLManagedTensorVersioned)
        mv = <rtx_DLManagedTensorVersioned*>malloc(head + 2 * <size_t>ndim * sizeof(int64_t))
        if mv == NULL:
            raise MemoryError("rtx: cannot allocate a DLPack tensor descriptor")
        mv.version.major = DLPACK_MAJOR
        mv.version.minor = DLPACK_MINOR
        if ro:
            flags |= RTX_DLPACK_FLAG_READ_ONLY
        if copied:
            flags |= RTX_DLPACK_FLAG_IS_COPIED
        mv.flags = flags
        mv.deleter = rtx_dlpack_deleter_versioned
        t = &mv.dl_tensor
        dims = <int64_t*>(<char*>mv + head)
    else:
        head = sizeof(rtx_DLManagedTensor)
        m = <rtx_DLManagedTensor*>malloc(head + 2 * <size_t>ndim * sizeof(int64_t))
        if m == NULL:
            raise MemoryError("rtx: cannot allocate a DLPack tensor descriptor")
        m.deleter = rtx_dlpack_deleter
        t = &m.dl_tensor
        dims = <int64_t*>(<char*>m + head)

    t.data = <void*>data
    t.device.device_type = kDLCPU
    t.device.device_id = 0
    t.ndim = <int32_t>ndim
    t.dtype = dtype
    t.shape = dims
    t.strides = dims + ndim
    t.byte_offset = 0
    for i in range(ndim):
        dims[i] = arr.shape[i]
        # a negative stride left here is on a dim of extent <= 1, or the array is
        # empty (_reversed): it never moves an address, so export it positive
        dims[ndim + i] = abs(arr.strides[i]) // itemsize

    # The capsule's strong reference to the owner, dropped by the deleter.
    Py_INCREF(arr)
    if versioned:
        mv.manager_ctx = <void*>arr
    else:
        m.manager_ctx = <void*>arr
    rtx_dlpack_exported += 1
    try:
        if versioned:
            return PyCapsule_New(<void*>mv, b"dltensor_versioned",
                                 <PyCapsule_Destructor>rtx_dlpack_capsule_destructor_versioned)
        return PyCapsule_New(<void*>m, b"dltensor",
                             <PyCapsule_Destructor>rtx_dlpack_capsule_destructor)
    except BaseException:
        # No capsule: nobody else will ever call the deleter.
        if versioned:
            rtx_dlpack_deleter_versioned(mv)
        else:
            rtx_dlpack_deleter(m)
        raise


def dlpack_capsule_state(capsule):
    #: -> Literal["unused", "used", "other"]
    #: capsule: object
    """``"unused"``, ``"used"`` or ``"other"``: whether a consumer took ``capsule`` (tests)."""
    for name in (b"dltensor", b"dltensor_versioned"):
        if PyCapsule_IsValid(capsule, name):
            return "unused"
    for name in (b"used_dltensor", b"used_dltensor_versioned"):
        if PyCapsule_IsValid(capsule, name):
            return "used"
    return "other"
