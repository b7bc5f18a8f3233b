"""Large float arithmetic on the CPU backend runs on rtx's threads
(``rtx/backend/cpu/elementwise.py``: ``binary`` hands add / sub / mul / div of
at least ``THREADED_MIN`` elements, both operands arrays of the result dtype,
to one fused-evaluator pass): exactly numpy's bits (the same IEEE operation per
element, broadcast as numpy does) at any thread count, for contiguous,
strided, reversed and broadcast operands; promoted, scalar and small operands
keep numpy's ufunc."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import bits

import rtx
from rtx.backend.cpu import elementwise as ew

N = 2 * ew.THREADED_MIN // 64 + 3  # rows of 64: every case over the threshold
OPS = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.true_divide)]


def _operands(rng, dtype):
    a = rng.standard_normal((N, 64)).astype(dtype)
    b = rng.standard_normal((64, N)).astype(dtype)
    a[0, :8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-300, 3.0]
    b[:8, 0] = [-0.0, 0.0, np.inf, 2.0, 1.0, 0.0, -0.0, 0.0]
    return {
        "same shape": (a, a[::-1] * np.asarray(0.5, dtype)),
        "row vector": (a, b[:, 0].copy()),
        "column": (a[:, :1], a[:1, :].copy()),
        "transposed view": (a, b.T),
        "reversed views": (a[::-1], b.T[:, ::-1]),
        "strided rows": (a[::2], b.T[::2]),
    }


@pytest.fixture
def spy(monkeypatch):
    calls = []
    real = ew.evaluate

    def counting(*args, **kw):
        calls.append(args[0])
        return real(*args, **kw)

    monkeypatch.setattr(ew, "evaluate", counting)
    return calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,ufunc", OPS, ids=[n for n, _ in OPS])
def test_threaded_binary_bitwise(spy, dtype, name, ufunc):
    rng = np.random.default_rng(1)
    with np.errstate(all="ignore"):
        for case, (x, y) in _operands(rng, dtype).items():
            want = ufunc(x, y)
            for T in (1, 2, 3):
                rtx.set_num_threads(T)
                spy.clear()
                got = ew.binary(ufunc, x, y)
                assert got.dtype == want.dtype and got.shape == want.shape, case
                np.testing.assert_array_equal(bits(got), bits(want), err_msg=f"{case} T={T}")
                assert spy == ([name] if T > 1 else []), case


def test_tensor_ops_take_it(spy):
    """Through the public ops (forward and the engine's gradient sum)."""
    rng = np.random.default_rng(2)
    rtx.set_num_threads(2)
    xa = rng.standard_normal((N, 64)).astype(np.float32)
    ba = rng.standard_normal(64).astype(np.float32)
    x = rtx.tensor(xa, requires_grad=True)
    b = rtx.tensor(ba)
    y = x + b
    np.testing.assert_array_equal(bits(y.numpy()), bits(xa + ba))
    assert spy == ["add"]
    spy.clear()
    ((y * y).sum() + y.sum()).backward()        # y gets the sum of two paths
    np.testing.assert_allclose(x.grad.numpy(), 2 * (xa + ba) + 1, rtol=1e-6, atol=1e-6)
    assert "add" in spy                         # the engine's sum of y's gradients


def test_numpy_keeps_the_rest(spy):
    rng = np.random.default_rng(3)
    rtx.set_num_threads(2)
    a = rng.standard_normal((N, 64)).astype(np.float32)
    small = a[: ew.THREADED_MIN // 64 - 1]
    cases = [
        (np.add, small, small),                              # under the threshold
        (np.add, a, a.astype(np.float64)),                   # promoted
        (np.multiply, a, 2.0),                               # a Python number
        (np.maximum, a, a[::-1]),                            # not add / sub / mul / div
        (np.add, a.astype(np.int64), a.astype(np.int64)),    # integers
    ]
    for ufunc, x, y in cases:
        got = ew.binary(ufunc, x, y)
        want = ufunc(x, y)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert spy == []
