"""Result dtypes follow PyTorch's promotion rule on every backend (issue 18).

The backend that allocates an op's output decides its dtype with the one rule,
``rtx._dtypes.result_type`` / ``float_type`` (ints -> float32, as PyTorch): the
CPU backend, the default bodies (MinimalBackend) and Fusion (recorded or
eager) give the dtype torch gives for the same operands.  Before, the backends
used numpy's rule (``int64 * 1.5``, ``int / int``, ``where(c, 1.5, 2.5)``,
``float32 * float64 zero-dim``: float64)."""

from __future__ import annotations

import itertools
import operator

import numpy as np
import pytest

import rtx

torch = pytest.importorskip("torch")

_DT = {np.dtype(np.int64): torch.int64, np.dtype(np.int32): torch.int32,
       np.dtype(np.bool_): torch.bool, np.dtype(np.float32): torch.float32,
       np.dtype(np.float64): torch.float64}
_BACK = {v: k for k, v in _DT.items()}


def _arrays():
    out = []
    for dt in _DT:
        v = np.array([True, False, True]) if dt == np.bool_ else np.array([1, 2, 3])
        out.append(v.astype(dt))
        out.append(np.asarray(v[1]).astype(dt))      # zero-dim
    return out


ARRAYS = _arrays()
SCALARS = [True, 2, 1.5, np.int64(2), np.float64(1.5), np.float32(1.5)]
OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
       "div": operator.truediv, "pow": operator.pow}


def _rtx(x):
    return rtx.tensor(x) if isinstance(x, np.ndarray) else x


def _torch(x):
    return torch.from_numpy(np.array(x)) if isinstance(x, np.ndarray) else x


def _name(x):
    if isinstance(x, np.ndarray):
        return f"{x.dtype}{list(x.shape)}"
    return f"{type(x).__name__}"


def _cases():
    for a, b in itertools.chain(itertools.product(ARRAYS, ARRAYS),
                                itertools.product(ARRAYS, SCALARS),
                                itertools.product(SCALARS, ARRAYS)):
        yield pytest.param(a, b, id=f"{_name(a)}-{_name(b)}")


def _expected(fn, a, b):
    try:
        return fn(_torch(a), _torch(b)).dtype
    except (RuntimeError, TypeError):
        return None      # torch refuses the combination (e.g. bool - bool)


def _check(a, b):
    checked = 0
    fns = dict(OPS)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        fns["maximum"] = lambda x, y: (rtx.maximum if isinstance(x, rtx.Tensor)
                                       else torch.maximum)(x, y)
        fns["minimum"] = lambda x, y: (rtx.minimum if isinstance(x, rtx.Tensor)
                                       else torch.minimum)(x, y)
    if np.asarray(a).dtype == np.bool_ and np.asarray(b).dtype == np.bool_:
        del fns["pow"]   # numpy has no bool power loop: rtx refuses bool ** bool (TypeError)
    for name, fn in fns.items():
        want = _expected(fn, a, b)
        if want is None:
            continue
        got = fn(_rtx(a), _rtx(b))
        assert got.dtype == _BACK[want], (name, _name(a), _name(b), got.dtype, want)
        checked += 1
    cond = np.array([True, False, True])
    want = torch.where(torch.from_numpy(cond), _torch(a), _torch(b)).dtype
    got = rtx.where(rtx.tensor(cond), _rtx(a), _rtx(b))
    assert got.dtype == _BACK[want], ("where", _name(a), _name(b), got.dtype, want)
    return checked + 1


@pytest.mark.parametrize("a,b", list(_cases()))
def test_binary_and_where_dtypes_match_torch(backend, a, b):
    assert _check(a, b) >= 1


@pytest.mark.parametrize("a,b", [c for c in _cases() if c.id.startswith(("int64[3]",
                                                                        "float32[3]"))])
def test_binary_and_where_dtypes_match_torch_under_fusion(a, b):
    with rtx.fusion.enabled(rtx.CpuBackend()) as f:
        f.min_elements = 0
        assert _check(a, b) >= 1


@pytest.mark.parametrize("dt", [np.int64, np.int32, np.bool_])
def test_float_valued_ops_on_ints_give_float32(backend, dt):
    x = rtx.tensor(np.array([1, 0, 1]).astype(dt))
    for name in ("exp", "log", "sqrt", "tanh", "sigmoid"):
        y = getattr(x, name)()
        assert y.dtype == np.float32, (name, y.dtype)
        want = getattr(torch, name)(torch.from_numpy(np.array([1, 0, 1]).astype(dt)))
        np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-6)
    B = rtx.get_default_backend()
    p = B.from_numpy(np.array([[1, 2], [3, 4]]).astype(dt))
    assert np.dtype(B.dtype(B.softmax(p, 1))) == np.float32
    assert np.dtype(B.dtype(B.log_softmax(p, 1))) == np.float32
    assert np.dtype(B.dtype(B.mean(p))) == np.float32


def test_promoted_values_are_computed_in_the_result_dtype(backend):
    """int64 * 1.1 is the float32 product of float32(int) and float32(1.1), as torch."""
    v = np.array([16777217, 3, -7])             # 2**24 + 1: not a float32
    got = (rtx.tensor(v) * 1.1).numpy()
    want = (torch.from_numpy(v) * 1.1).numpy()
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    got = (rtx.tensor(v) / 3).numpy()
    np.testing.assert_array_equal(got, (torch.from_numpy(v) / 3).numpy())
