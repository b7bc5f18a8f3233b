"""rtx._dtypes: the one promotion rule (PyTorch's), dtype parsing, the row-count check."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest

import rtx
from rtx import _dtypes as D

torch = pytest.importorskip("torch")

DTYPES = [D.float32, D.float64, D.int32, D.int64, D.bool_]
TORCH = {D.float32: torch.float32, D.float64: torch.float64, D.int32: torch.int32,
         D.int64: torch.int64, D.bool_: torch.bool}


def _operands():
    """(rtx-side operand, torch-side operand, label): dimensioned and zero-dim
    arrays of every dtype, Python scalars, numpy scalars."""
    out = []
    for d in DTYPES:
        out.append((np.zeros(2, d), torch.zeros(2, dtype=TORCH[d]), f"{d}[2]"))
        out.append((np.zeros((), d), torch.zeros((), dtype=TORCH[d]), f"{d}[]"))
    for s in (True, 2, 1.5):
        out.append((s, s, type(s).__name__))
    out.append((np.float64(2.0), 2.0, "np.float64"))
    out.append((np.int32(3), 3, "np.int32"))
    out.append((np.bool_(True), True, "np.bool_"))
    return out


OPERANDS = _operands()


@pytest.mark.parametrize("a, b", list(itertools.product(OPERANDS, repeat=2)),
                         ids=lambda o: o[2])
def test_result_type_is_torchs(a, b):
    assert TORCH[D.result_type(a[0], b[0])] == torch.result_type(a[1], b[1])


@pytest.mark.parametrize("a, b", list(itertools.product(DTYPES, repeat=2)), ids=str)
def test_promote_types_is_torchs(a, b):
    assert TORCH[D.promote_types(a, b)] == torch.promote_types(TORCH[a], TORCH[b])


def test_result_type_of_three_classes():
    """Scalars change a zero-dim result only by kind, zero-dim tensors a dimensioned
    one only by kind (torch.where picks the dtype of its two values this way)."""
    i32, f64_0d = np.zeros(3, np.int32), np.zeros((), np.float64)
    assert D.result_type(i32, f64_0d, 1.5) == D.float64
    assert D.result_type(np.zeros(3, np.float32), f64_0d, 2) == D.float32
    assert D.result_type(np.zeros(3, np.bool_), np.zeros((), np.int32), 1.5) == D.float32
    assert D.result_type(np.zeros(3, np.bool_), np.zeros((), np.int32), 7) == D.int32
    # the operand forms a backend passes: np.dtype and objects with .dtype and .shape
    class Buf:
        dtype, shape = np.dtype(np.int64), (4,)
    assert D.result_type(Buf(), 0.5) == D.float32
    assert D.result_type(np.dtype(np.int32), 2) == D.int32
    with pytest.raises(TypeError):
        D.result_type()


def test_float_type():
    assert [D.float_type(d) for d in DTYPES] == [D.float32, D.float64, D.float32, D.float32,
                                                 D.float32]


def test_tensor_float_ops_promote_to_float32():
    """Float-valued ops on integer tensors: float32, as PyTorch (the faces own these)."""
    i = rtx.tensor([1, 2, 3])
    for f in (rtx.exp, rtx.log, rtx.sqrt, rtx.sigmoid, rtx.tanh, rtx.leaky_relu, rtx.elu):
        assert f(i).dtype == rtx.float32, f
    assert rtx.tensor([True, False]).exp().dtype == rtx.float32


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("dst, other", [
    (D.int64, 1.5), (D.int32, np.zeros(3, np.float64)), (D.bool_, 2), (D.int64, "div"),
    (D.float32, np.zeros(3, np.float64)), (D.int32, np.zeros((), np.int64)), (D.bool_, True),
])
def test_inplace_rule_is_torchs(name, dst, other):
    """In-place arithmetic refuses a result of a higher kind than the written tensor,
    exactly where PyTorch does (the rule is result_type's)."""
    if isinstance(other, str):
        other = 2
    t = rtx.zeros(3, dtype=dst) if dst != D.bool_ else rtx.tensor([True, False, True])
    tt = torch.zeros(3, dtype=TORCH[dst]) if dst != D.bool_ else torch.tensor([True, False,
                                                                             True])
    o = rtx.from_numpy(other) if isinstance(other, np.ndarray) else other
    ot = torch.from_numpy(other) if isinstance(other, np.ndarray) else other
    try:
        getattr(tt, name + "_")(ot)
        torch_ok = True
    except RuntimeError as exc:
        if "can't be cast" not in str(exc):
            return  # bool - bool: torch refuses the op itself, not the cast
        torch_ok = False
    if torch_ok:
        getattr(t, name + "_")(o)
    else:
        with pytest.raises(RuntimeError, match="can't be cast"):
            getattr(t, name + "_")(o)


def test_check_dtype():
    assert D.check_dtype("float64") == D.float64
    assert D.check_dtype(rtx.int32) == D.int32
    for bad in ("f4,(", "complex64", np.float16, object()):
        with pytest.raises(TypeError):
            D.check_dtype(bad)


def test_check_rows_is_the_one_row_count_rule():
    assert D.check_rows(np.int64(5), "op") == 5
    assert D.check_rows(0, "op") == 0
    with pytest.raises(TypeError, match="got bool"):
        D.check_rows(True, "op")
    with pytest.raises(TypeError, match="got float"):
        D.check_rows(2.0, "op")
    with pytest.raises(ValueError, match=">= 0"):
        D.check_rows(-1, "op", "num_nodes")
    with pytest.raises(MemoryError):
        D.check_rows(sys.maxsize + 1, "op")


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_inplace_with_a_0d_operand_of_another_dtype_is_torchs_bitwise(op, dt):
    """``x.mul_(zero_dim)``: computed in PyTorch's result dtype (a float32 tensor
    times a float64 0-d tensor is a float32 product), not numpy's float64 then cast
    (which differed in the last bit in about half the draws)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    for _ in range(200):
        a = rng.standard_normal(5).astype(dt)
        o = np.array(rng.standard_normal()).astype(np.float64 if dt == np.float32 else np.float32)
        t, tt = rtx.tensor(a), torch.tensor(a)
        with rtx.no_grad():
            getattr(t, op)(rtx.tensor(o))
        getattr(tt, op)(torch.tensor(o))
        np.testing.assert_array_equal(t.numpy(), tt.numpy())
