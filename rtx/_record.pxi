# Records: new instances of a class with ``__slots__``, every named slot set in C.
#
# rtx.Tensor makes one instance per op (``Tensor._make``).  In Python that is
# ``object.__new__`` and then one slot store per field, each a descriptor call:
# about a third of a microsecond, as much as a 16x16 op's numpy work.
# ``SlotMaker`` reads the slots' offsets once, from the class's member
# descriptors (checked to be writable object slots of that class), and
# ``make`` allocates as ``object.__new__`` does (``object``'s ``tp_new``:
# the same checks and initialisation) and stores the values at those offsets,
# as the descriptors' setters would (a new reference each; every slot of a
# fresh object is empty, so nothing is released).  A subclass (``Parameter``)
# has its base's slots at the same offsets.

from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
        int flags
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    PyTypeObject PyBaseObject_Type
    int PyType_IsSubtype(PyTypeObject* a, PyTypeObject* b)


cdef extern from "structmember.h":
    int T_OBJECT_EX         # a slot's member type
    int READONLY


cdef enum:
    _SLOTS_MAX = 12         # the slots one maker sets
    _VALUES_MAX = 8         # the values one make() call passes (the rest: defaults)


class _OneSlot:
    __slots__ = ("x",)


_MEMBER_DESCRIPTOR = type(_OneSlot.__dict__["x"])
cdef tuple _NO_ARGS = ()
cdef object _UNSET = object()     # make()'s "not passed"


cdef class SlotMaker:
    """Makes instances of ``owner`` (or of a subclass) with slots set in C.

    ``names``: at most 12 writable object slots defined by ``owner`` itself,
    filled as a function of those parameters would: ``make(cls, *values)`` (at most 8)
    sets the slots in order, the last ``len(defaults)`` ones to their default
    when not given -- what ``object.__new__(cls)`` and one ``setattr`` per slot
    give, without the calls."""

    cdef type cls
    cdef Py_ssize_t offsets[_SLOTS_MAX]
    cdef tuple defaults
    cdef Py_ssize_t n, required

    def __cinit__(self, owner, tuple names, tuple defaults=()):
        #: owner: type[Any]
        cdef PyMemberDef* m
        cdef Py_ssize_t i
        if not isinstance(owner, type):
            raise TypeError(f"SlotMaker: owner must be a class, got {type(owner).__name__}")
        cls = owner
        if not 1 <= len(names) <= _SLOTS_MAX:
            raise ValueError(f"SlotMaker: 1 to {_SLOTS_MAX} slot names, got {len(names)}")
        if not len(names) - _VALUES_MAX <= len(defaults) <= len(names):
            raise ValueError(f"SlotMaker: {len(defaults)} defaults for {len(names)} slots "
                             f"(make() passes at most {_VALUES_MAX} values)")
        for i, name in enumerate(names):
            d = cls.__dict__.get(name) if isinstance(name, str) else None
            if type(d) is not _MEMBER_DESCRIPTOR:
                raise TypeError(f"SlotMaker: {cls.__name__} defines no slot {name!r}")
            m = (<PyMemberDescrObject*><PyObject*>d).d_member
            if m.type != T_OBJECT_EX or m.flags & READONLY:
                raise TypeError(f"SlotMaker: {cls.__name__}.{name} is not a writable "
                                "object slot")
            self.offsets[i] = m.offset
        self.cls = cls
        self.n = len(names)
        self.required = self.n - len(defaults)
        # (one entry per slot: the leading required ones are never read)
        self.defaults = (None,) * self.required + defaults

    def make(self, cls, a=_UNSET, b=_UNSET, c=_UNSET, d=_UNSET, e=_UNSET, f=_UNSET,
             g=_UNSET, h=_UNSET):
        #: cls: type[Any]
        #: a: Any
        #: b: Any
        #: c: Any
        #: d: Any
        #: e: Any
        #: f: Any
        #: g: Any
        #: h: Any
        #: -> Any
        """A new ``cls`` (``self``'s class or a subclass of it) with the slots set
        to the values given, in order, and the rest to their defaults."""
        cdef PyObject* vals[_VALUES_MAX]
        cdef Py_ssize_t i, k = 0
        cdef PyObject* o
        if cls is not self.cls and not (
                isinstance(cls, type)
                and PyType_IsSubtype(<PyTypeObject*>cls, <PyTypeObject*>self.cls)):
            raise TypeError(f"SlotMaker.make: {cls!r} is not {self.cls.__name__} or a "
                            "subclass of it")
        vals[0], vals[1], vals[2], vals[3] = <PyObject*>a, <PyObject*>b, <PyObject*>c, \
            <PyObject*>d
        vals[4], vals[5], vals[6], vals[7] = <PyObject*>e, <PyObject*>f, <PyObject*>g, \
            <PyObject*>h
        while k < _VALUES_MAX and vals[k] != <PyObject*>_UNSET:
            k += 1
        for i in range(k, _VALUES_MAX):
            if vals[i] != <PyObject*>_UNSET:
                raise TypeError("SlotMaker.make: values must be passed in order, without gaps")
        if not self.required <= k <= self.n:
            raise TypeError(f"SlotMaker.make: {self.required} to "
                            f"{min(self.n, _VALUES_MAX)} values, got {k}")
        obj = PyBaseObject_Type.tp_new(cls, <PyObject*>_NO_ARGS, NULL)   # object.__new__
        o = <PyObject*>obj
        for i in range(self.n):
            if i < k:
                _set_slot(o, self.offsets[i], <object>vals[i])
            else:
                _set_slot(o, self.offsets[i], self.defaults[i])
        return obj


cdef inline void _set_slot(PyObject* o, Py_ssize_t offset, object v):
    """What a slot's setter does: the slot holds a new reference to ``v`` (and
    releases what it held: nothing, on a fresh object)."""
    cdef PyObject** slot = <PyObject**>(<char*>o + offset)
    cdef PyObject* old = slot[0]
    Py_INCREF(v)
    slot[0] = <PyObject*>v
    Py_XDECREF(old)
