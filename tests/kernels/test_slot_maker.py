"""``SlotMaker`` (rtx/_record.pxi): ``Tensor._make`` in C -- ``object.__new__`` and
the slot stores, checked against what the Python version gives: the same fields,
the same references (no leak, no stolen reference), the same class."""

from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

import rtx
from rtx import _kernels
from rtx.nn import Parameter
from rtx.tensor import Tensor

FIELDS = ("_value", "_ad", "_rg", "_node", "grad", "_vc")


class Rec:
    __slots__ = ("a", "b", "c", "d", "e", "__weakref__")
    plain = None

    @property
    def prop(self):
        return 1


class RecChild(Rec):
    pass                               # (a __dict__: object.__new__ sets it up)


class Other:
    __slots__ = ("a", "b", "c", "d")


@pytest.mark.valgrind
def test_make_sets_every_slot_and_holds_one_reference_each():
    m = _kernels.SlotMaker(Rec, ("a", "b", "c", "d", "e"), (False, None, None))
    va, vb = object(), [1, 2]
    ra, rb = sys.getrefcount(va), sys.getrefcount(vb)
    r = m.make(Rec, va, vb)
    assert type(r) is Rec
    assert (r.a, r.b, r.c, r.d, r.e) == (va, vb, False, None, None)
    assert sys.getrefcount(va) == ra + 1 and sys.getrefcount(vb) == rb + 1
    assert weakref.ref(r)() is r
    assert va in gc.get_referents(r)                 # the collector sees the slots
    r.a = 5                                          # the descriptors still work
    assert sys.getrefcount(va) == ra
    del r
    assert sys.getrefcount(vb) == rb
    r = m.make(Rec, va, vb, 3, "d")
    assert (r.c, r.d) == (3, "d")


def test_a_subclass_keeps_its_dict_and_a_cycle_is_collected():
    m = _kernels.SlotMaker(Rec, ("a", "b", "c", "d"), (False, None))
    c = m.make(RecChild, 1, 2)
    assert type(c) is RecChild and (c.a, c.b, c.c, c.d) == (1, 2, False, None)
    c.extra = 7
    assert c.__dict__ == {"extra": 7}
    with pytest.raises(AttributeError):
        assert c.e is None                           # not named: left empty
    probe = m.make(Rec, None, None)
    ref = weakref.ref(probe)
    probe.a = probe                                  # a cycle through a slot
    del probe
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("owner,names,defaults,exc", [
    (Rec, (), (), ValueError),                       # no slot
    (Rec, ("a",) * 13, (None,) * 13, ValueError),    # more than twelve
    (Rec, ("a",) * 10, (), ValueError),              # make() passes at most eight values
    (Rec, ("a", "b"), (1, 2, 3), ValueError),        # more defaults than slots
    (Rec, ("a", "b", "c", "zz"), (), TypeError),     # no such slot
    (Rec, ("a", "b", "c", "plain"), (), TypeError),  # a class attribute
    (Rec, ("a", "b", "c", "prop"), (), TypeError),   # a property
    (RecChild, ("a", "b", "c", "d"), (), TypeError),  # slots of a base, not its own
    (Rec, ("a", "b", "c", 4), (), TypeError),
    (Rec(), ("a", "b", "c", "d"), (), TypeError),    # not a class
])
def test_bad_owners_and_names_are_refused(owner, names, defaults, exc):
    with pytest.raises(exc):
        _kernels.SlotMaker(owner, names, defaults)


def test_make_takes_the_values_as_a_function_of_the_slots_would():
    m = _kernels.SlotMaker(Rec, ("a", "b", "c", "d"), (False, None))
    for cls in (Other, int, object, "Rec", None):
        with pytest.raises(TypeError):
            m.make(cls, 1, 2)
    for values in [(), (1,), (1, 2, 3, 4, 5)]:      # 2 to 4 values
        with pytest.raises(TypeError):
            m.make(Rec, *values)
    with pytest.raises(TypeError):
        m.make(Rec, 1, 2, d=4)                       # a gap: c not given
    r = m.make(Rec, 1, b=2, c=3)                     # (keywords, in order: as positions)
    assert (r.a, r.b, r.c, r.d) == (1, 2, 3, None)
    full = _kernels.SlotMaker(Rec, ("a", "b", "c", "d", "e"))
    assert [getattr(full.make(Rec, 1, 2, 3, 4, 5), n) for n in "abcde"] == [1, 2, 3, 4, 5]


@pytest.mark.valgrind
def test_tensor_make_matches_the_python_construction():
    x = np.arange(6.0).reshape(2, 3)
    ad = rtx.tensor(x)._ad
    for cls in (Tensor, Parameter):
        t = cls._make(x, ad, True)
        assert type(t) is cls
        assert [getattr(t, f) for f in FIELDS] == [x, ad, True, None, None, None]
        assert t._value is x
    u = Tensor._make(x, ad)
    assert u._rg is False and u._node is None
    np.testing.assert_array_equal(u.numpy(), x)
    w = Tensor._make(x, ad, False, "node")
    assert w._node == "node"
