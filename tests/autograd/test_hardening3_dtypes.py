"""Issue 17 (hardening 3): dtype inference from Python and numpy scalars,
PyTorch's rules.  ``rtx.tensor(np.float64(1/3))`` and
``rtx.tensor([np.float64(a), np.float64(b)])`` were float32 (torch: float64);
numpy scalars as operands promoted like numpy arrays (float32 * np.float64(2)
was float64); ``full`` with a numpy integer fill and ``arange(True)`` gave
float32.

Two tables: EXPECTED, hard-coded (runs without torch; read off torch 2.13,
with rtx's widening of the dtypes it lacks: float16 -> float32, other integers
-> int64), and a differential test against the installed torch (skipped without
it) over the same cases and every pair of leaf kinds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import rtx

f64, f32, f16 = np.float64, np.float32, np.float16
i64, i32, i16, i8, u8, u16, u32, u64 = (np.int64, np.int32, np.int16, np.int8, np.uint8,
                                         np.uint16, np.uint32, np.uint64)
b_ = np.bool_

CASES = {
    # Python scalars and lists
    "1/3": lambda: 1 / 3, "3": lambda: 3, "True": lambda: True,
    "[1.0, 2.0]": lambda: [1.0, 2.0], "[1, 2]": lambda: [1, 2],
    "[True, False]": lambda: [True, False],
    "[1, 2.0]": lambda: [1, 2.0], "[True, 2]": lambda: [True, 2],
    "[True, 2.5]": lambda: [True, 2.5],
    "[]": lambda: [], "[[], []]": lambda: [[], []], "(1, 2.0)": lambda: (1, 2.0),
    "[[1, 2], [3, 4.0]]": lambda: [[1, 2], [3, 4.0]],
    # numpy scalars alone
    "f64(1/3)": lambda: f64(1 / 3), "f32(1/3)": lambda: f32(1 / 3), "f16(1.5)": lambda: f16(1.5),
    "i64(3)": lambda: i64(3), "i32(3)": lambda: i32(3), "i16(3)": lambda: i16(3),
    "i8(3)": lambda: i8(3), "u8(3)": lambda: u8(3), "u16(3)": lambda: u16(3),
    "u32(3)": lambda: u32(3), "bool_(True)": lambda: b_(True),
    "f64(arr.mean())": lambda: np.arange(4.0).mean(),
    # 0-d arrays
    "0-d f64": lambda: np.array(1 / 3), "0-d f32": lambda: np.array(1.5, f32),
    "0-d i32": lambda: np.array(3, i32), "0-d bool": lambda: np.array(True),
    # lists of numpy scalars
    "[f64, f64]": lambda: [f64(1), f64(2)], "[f32, f32]": lambda: [f32(1), f32(2)],
    "[f16, f16]": lambda: [f16(1), f16(2)], "[i32, i32]": lambda: [i32(1), i32(2)],
    "[i16, i16]": lambda: [i16(1), i16(2)], "[u8, u8]": lambda: [u8(1), u8(2)],
    "[bool_, bool_]": lambda: [b_(True), b_(False)],
    # mixed with Python numbers
    "[1.0, f64]": lambda: [1.0, f64(2)], "[f64, 1.0]": lambda: [f64(2), 1.0],
    "[1, f64]": lambda: [1, f64(2)], "[True, f64]": lambda: [True, f64(2)],
    "[1.0, f32]": lambda: [1.0, f32(2)], "[1, f32]": lambda: [1, f32(2)],
    "[1.0, f16]": lambda: [1.0, f16(2)], "[1, f16]": lambda: [1, f16(2)],
    "[1.0, i64]": lambda: [1.0, i64(2)], "[1, i32]": lambda: [1, i32(2)],
    "[1.0, i32]": lambda: [1.0, i32(2)], "[True, i32]": lambda: [True, i32(2)],
    "[True, i16]": lambda: [True, i16(2)], "[1, i8]": lambda: [1, i8(2)],
    "[1.0, bool_]": lambda: [1.0, b_(True)], "[True, bool_]": lambda: [True, b_(False)],
    "[1.0, u8]": lambda: [1.0, u8(2)], "[True, u8]": lambda: [True, u8(2)],
    # numpy with numpy
    "[f32, f64]": lambda: [f32(1), f64(2)], "[i32, f32]": lambda: [i32(1), f32(2)],
    "[i64, f32]": lambda: [i64(1), f32(2)], "[i32, i64]": lambda: [i32(1), i64(2)],
    "[u8, i8]": lambda: [u8(1), i8(2)], "[f16, i32]": lambda: [f16(1), i32(2)],
    "[f16, f32]": lambda: [f16(1), f32(2)], "[bool_, i32]": lambda: [b_(True), i32(2)],
    "[i64(2**62), f32]": lambda: [i64(2**62), f32(1)],
    # nested
    "[[f64], [1.0]]": lambda: [[f64(1)], [1.0]], "[[1.0], [f64]]": lambda: [[1.0], [f64(1)]],
    "[[f64, 1], [2, 3]]": lambda: [[f64(1), 1], [2, 3]],
    "[[i32, 1], [2, 3]]": lambda: [[i32(1), 1], [2, 3]],
    "[[i32(1), i32(2)], [i32(3), i32(4)]]": lambda: [[i32(1), i32(2)], [i32(3), i32(4)]],
    "((f64,), (f32,))": lambda: ((f64(1),), (f32(2),)),
    # arrays inside lists
    "[arr f64]": lambda: [np.array([1.0, 2.0])], "[arr i32]": lambda: [np.array([1, 2], i32)],
    "[arr f32, arr f32]": lambda: [np.ones(2, f32), np.zeros(2, f32)],
    "[arr i32, [1.0, 2.0]]": lambda: [np.array([1, 2], i32), [1.0, 2.0]],
    "[arr f64, [1, 2]]": lambda: [np.array([1.0, 2.0]), [1, 2]],
    "[arr bool, [1, 2]]": lambda: [np.array([True, False]), [1, 2]],
    "[arr f16]": lambda: [np.ones(2, f16)],
    # Python ints past float32's exact range with a float: float32 (no overflow)
    "[2**62, 1.5]": lambda: [2**62, 1.5], "[2**70, 1.0]": lambda: [2**70, 1.0],
    "[2**63, 1.0]": lambda: [2**63, 1.0],
}


# rtx.tensor(data).dtype; where torch raises instead, the comment says so
EXPECTED = {
    "1/3": "float32", "3": "int64", "True": "bool",
    "[1.0, 2.0]": "float32", "[1, 2]": "int64", "[True, False]": "bool",
    "[1, 2.0]": "float32", "[True, 2]": "int64", "[True, 2.5]": "float32",
    "[]": "float32", "[[], []]": "float32", "(1, 2.0)": "float32",
    "[[1, 2], [3, 4.0]]": "float32",
    "f64(1/3)": "float64", "f32(1/3)": "float32", "f16(1.5)": "float32",
    "i64(3)": "int64", "i32(3)": "int32", "i16(3)": "int64", "i8(3)": "int64",
    "u8(3)": "int64", "u16(3)": "int64", "u32(3)": "int64", "bool_(True)": "bool",
    "f64(arr.mean())": "float64",
    "0-d f64": "float64", "0-d f32": "float32", "0-d i32": "int32", "0-d bool": "bool",
    "[f64, f64]": "float64", "[f32, f32]": "float32", "[f16, f16]": "float32",
    "[i32, i32]": "int32", "[i16, i16]": "int64", "[u8, u8]": "int64",
    "[bool_, bool_]": "bool",
    "[1.0, f64]": "float64", "[f64, 1.0]": "float64", "[1, f64]": "float64",
    "[True, f64]": "float64", "[1.0, f32]": "float32", "[1, f32]": "float32",
    "[1.0, f16]": "float32", "[1, f16]": "float32", "[1.0, i64]": "float32",
    "[1, i32]": "int64", "[1.0, i32]": "float32", "[True, i32]": "int32",
    "[True, i16]": "int64", "[1, i8]": "int64", "[1.0, bool_]": "float32",
    "[True, bool_]": "bool", "[1.0, u8]": "float32", "[True, u8]": "int64",
    "[f32, f64]": "float64", "[i32, f32]": "float32", "[i64, f32]": "float32",
    "[i32, i64]": "int64", "[u8, i8]": "int64", "[f16, i32]": "float32",
    "[f16, f32]": "float32",
    "[bool_, i32]": "int32",            # torch: TypeError (np.bool_ is no integer there)
    "[i64(2**62), f32]": "float32",
    "[[f64], [1.0]]": "float64", "[[1.0], [f64]]": "float64",
    "[[f64, 1], [2, 3]]": "float64", "[[i32, 1], [2, 3]]": "int64",
    "[[i32(1), i32(2)], [i32(3), i32(4)]]": "int32", "((f64,), (f32,))": "float64",
    "[arr f64]": "float64", "[arr i32]": "int32", "[arr f32, arr f32]": "float32",
    "[arr i32, [1.0, 2.0]]": "float32", "[arr f64, [1, 2]]": "float64",
    "[arr bool, [1, 2]]": "int64",       # torch: TypeError
    "[arr f16]": "float32",
    "[2**62, 1.5]": "float32", "[2**70, 1.0]": "float32", "[2**63, 1.0]": "float32",
}
TORCH_RAISES = {"[bool_, i32]", "[arr bool, [1, 2]]"}


def _widen(torch_dtype) -> str:
    """The rtx dtype torch's result maps to (rtx has no float16 / small ints)."""
    name = str(torch_dtype).replace("torch.", "")
    if name == "float16":
        return "float32"
    if name in ("int8", "int16", "uint8", "uint16", "uint32"):
        return "int64"
    return name


def test_the_table_covers_every_case():
    assert set(EXPECTED) == set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_tensor_dtype_inference_table(name):
    data = CASES[name]()
    t = rtx.tensor(data)
    assert str(t.dtype) == EXPECTED[name], (name, t.dtype)
    # values: what numpy holds, in that dtype (nothing rounded through float32 first)
    ref = np.asarray(np.asarray(data, dtype=object).tolist() if not isinstance(
        data, np.ndarray) else data)
    np.testing.assert_array_equal(t.numpy(), np.asarray(ref, dtype=EXPECTED[name]))


def test_float64_values_keep_their_precision():
    a = np.random.default_rng(0).standard_normal(7)
    for data in (a.mean(), [a.mean(), a.std()], [[a[0]], [a[1]]], np.float64(1 / 3)):
        t = rtx.tensor(data)
        assert t.dtype == rtx.float64
        np.testing.assert_array_equal(t.numpy(), np.asarray(data, dtype=np.float64))


@pytest.mark.filterwarnings("ignore:Creating a tensor from a list of numpy.ndarrays")
@pytest.mark.parametrize("name", list(CASES))
def test_tensor_dtype_inference_matches_torch(name):
    torch = pytest.importorskip("torch")
    data = CASES[name]()
    if name in TORCH_RAISES:
        with pytest.raises(TypeError):
            torch.tensor(data)
        return
    want = torch.tensor(data)
    got = rtx.tensor(data)
    assert str(got.dtype) == _widen(want.dtype) == EXPECTED[name]
    np.testing.assert_array_equal(got.numpy(), want.numpy().astype(got.dtype))


_LEAVES = {
    **{f"np.{t.__name__}": (lambda t=t: t(1)) for t in
       (f64, f32, f16, i64, i32, i16, i8, u8, u16, u32, b_)},
    "1.5": lambda: 1.5, "2": lambda: 2, "True": lambda: True,
}


def test_every_pair_of_leaf_kinds_matches_torch():
    """Lists and nested lists of every ordered pair of leaf kinds (numpy scalars
    of 11 dtypes, Python float / int / bool): rtx's dtype is torch's (widened)
    wherever torch gives one."""
    torch = pytest.importorskip("torch")
    compared = 0
    for a, b in itertools.product(_LEAVES, repeat=2):
        for data in ([_LEAVES[a](), _LEAVES[b]()], [[_LEAVES[a]()], [_LEAVES[b]()]],
                     (_LEAVES[a](), _LEAVES[b]())):
            try:
                want = _widen(torch.tensor(data).dtype)
            except (TypeError, RuntimeError):
                continue                # torch refuses (uint16+ promotion, np.bool_ as int)
            assert str(rtx.tensor(data).dtype) == want, (a, b, data)
            compared += 1
    assert compared > 300


# ------------------------------------------------------------- refusals, ranges
@pytest.mark.parametrize("data, exc", [
    (np.complex64(1), TypeError), ([1j, 2.0], TypeError), (["a"], TypeError),
    ([True, None], TypeError), (np.array([1, 2], np.int16), TypeError),  # an array keeps
    ([2**63, 1], OverflowError), ([1, 2**70], OverflowError),          # its dtype or fails
    ([2**70, False], OverflowError),     # was float32: the bool hid the int from the check
    ([2**70, np.int8(1)], OverflowError), (np.uint64(2**63), OverflowError),
    ([np.uint64(2**63)], OverflowError),
])
def test_refused_data(data, exc):
    with pytest.raises(exc):
        rtx.tensor(data)


def test_big_ints_with_a_float_become_float32_like_torch():
    t = rtx.tensor([2**70, np.float16(1.5)])
    assert t.dtype == rtx.float32
    np.testing.assert_array_equal(t.numpy(), np.array([2.0**70, 1.5], np.float32))


def test_explicit_dtype_still_wins():
    assert rtx.tensor(np.float64(0.5), dtype=rtx.float32).dtype == rtx.float32
    assert rtx.tensor([np.int32(1), 2.5], dtype=rtx.float64).dtype == rtx.float64
    assert rtx.tensor([np.float16(1)], dtype=rtx.int32).dtype == rtx.int32


# ------------------------------------------------------------------ operands
_C = np.array([True, False, True])


def _t(mod, dt):
    return mod.tensor([1, 2, 3], dtype=getattr(mod, dt))


# (rtx dtype, and whether torch gives the same: False = a documented difference)
OPERANDS = {
    "f32 * f64(2)": (lambda m: _t(m, "float32") * np.float64(2), "float32", True),
    "f64(2) * f32": (lambda m: np.float64(2) * _t(m, "float32"), "float32", True),
    "f32 / f64(3)": (lambda m: _t(m, "float32") / np.float64(3), "float32", True),
    "f32 - f64(0.1)": (lambda m: _t(m, "float32") - np.float64(0.1), "float32", True),
    "f32 ** f64(2)": (lambda m: _t(m, "float32") ** np.float64(2), "float32", True),
    "f64(2) ** f32": (lambda m: np.float64(2) ** _t(m, "float32"), "float32", True),
    "f64 * f32(2)": (lambda m: _t(m, "float64") * np.float32(2), "float64", True),
    "f32 * i64(2)": (lambda m: _t(m, "float32") * np.int64(2), "float32", True),
    "f32 + bool_(True)": (lambda m: _t(m, "float32") + np.bool_(True), "float32", True),
    "i32 + i64(5)": (lambda m: _t(m, "int32") + np.int64(5), "int32", True),
    "i64 + i32(5)": (lambda m: _t(m, "int64") + np.int32(5), "int64", True),
    "i32 * i8(3)": (lambda m: _t(m, "int32") * np.int8(3), "int32", True),
    "f32 == f64(2)": (lambda m: _t(m, "float32") == np.float64(2), "bool", True),
    "where(c, f32, f64(2.5))": (lambda m: m.where(m.tensor(_C), _t(m, "float32"),
                                                  np.float64(2.5)), "float32", True),
    "where(c, f64(2.5), f32)": (lambda m: m.where(m.tensor(_C), np.float64(2.5),
                                                  _t(m, "float32")), "float32", True),
    # PyTorch's promotion in the backends (issue 18; these were float64, numpy's rule)
    "i64 * 2.5": (lambda m: _t(m, "int64") * 2.5, "float32", True),
    "i64 * f64(2.5)": (lambda m: _t(m, "int64") * np.float64(2.5), "float32", True),
    "where(c, 1.5, 2.5)": (lambda m: m.where(m.tensor(_C), 1.5, 2.5), "float32", True),
    "i64 / 2": (lambda m: _t(m, "int64") / 2, "float32", True),
}


@pytest.mark.parametrize("name", list(OPERANDS))
def test_numpy_scalar_operands_act_as_python_numbers(name, backend):
    fn, want, _ = OPERANDS[name]
    r = fn(rtx)
    assert str(r.dtype) == want


@pytest.mark.parametrize("name", [k for k, v in OPERANDS.items() if v[2]])
def test_numpy_scalar_operands_match_torch(name):
    torch = pytest.importorskip("torch")
    fn, want, _ = OPERANDS[name]
    t, r = fn(torch), fn(rtx)
    assert str(t.dtype).replace("torch.", "") == want
    np.testing.assert_array_equal(r.numpy(), t.numpy())


def test_numpy_int_operand_out_of_range_still_refused():
    with pytest.raises(OverflowError):
        rtx.ones(2, dtype=rtx.int64) + np.uint64(2**63)
    t = rtx.ones(2, dtype=rtx.int64)
    with pytest.raises(RuntimeError, match="can't be cast"):
        t.add_(np.float64(1.5))          # in place: float into int (PyTorch's rule)
    np.testing.assert_array_equal(t.numpy(), [1, 1])


# ------------------------------------------------------------------ creation
@pytest.mark.parametrize("fill, want", [
    (1.5, "float32"), (3, "int64"), (True, "bool"), (np.float64(1.5), "float32"),
    (np.float32(1.5), "float32"), (np.int32(3), "int64"), (np.int64(3), "int64"),
    (np.uint8(3), "int64"), (np.bool_(True), "float32"),
])
def test_full_infers_like_torch(fill, want):
    t = rtx.full((2,), fill)
    assert str(t.dtype) == want
    np.testing.assert_array_equal(t.numpy(), np.full(2, fill).astype(want))


@pytest.mark.parametrize("args, want", [
    ((3,), "int64"), ((3.0,), "float32"), ((True,), "int64"), ((0, 3, True), "int64"),
    ((np.int32(3),), "int64"), ((np.float64(3),), "float32"), ((np.bool_(True),), "float32"),
    ((0, 2, 0.5), "float32"),
])
def test_arange_infers_like_torch(args, want):
    t = rtx.arange(*args)
    assert str(t.dtype) == want


def test_creation_matches_torch():
    torch = pytest.importorskip("torch")
    for fill in (1.5, 3, True, np.float64(1.5), np.int32(3), np.uint8(3), np.bool_(True)):
        assert str(rtx.full((2,), fill).dtype) == _widen(torch.full((2,), fill).dtype), fill
    for args in ((3,), (True,), (0, 3, True), (np.int32(3),), (np.float64(3),),
                 (np.bool_(True),), (0, 2, 0.5)):
        r, t = rtx.arange(*args), torch.arange(*args)
        assert str(r.dtype) == _widen(t.dtype), args
        np.testing.assert_array_equal(r.numpy(), t.numpy())


def test_full_refuses_a_numpy_int_past_int64():
    with pytest.raises(OverflowError):
        rtx.full((2,), np.uint64(2**63))
