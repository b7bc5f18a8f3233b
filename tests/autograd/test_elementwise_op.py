"""``Backend.elementwise(name, *operands, imm=None)``: any op of the fused
evaluator (``rtx._kernels.FUSED_OPS``) on any backend, so an op the evaluator
has needs no backend body of its own (issue 18's 3-file target for an
elementwise op: evaluator entry, declaration with its rule, op_db entry).  The
default body runs one ``fused_eval`` pass over host copies, the CPU backend
runs it on its own memory and threads, Fusion records it lazily."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import bits

import rtx
from rtx import _kernels
from rtx.backend import CpuBackend, MinimalBackend
from rtx.fusion import Fusion

OPS = _kernels.FUSED_OPS
RNG = np.random.default_rng(0)
A = RNG.uniform(-3, 3, (5, 4))
B_ = RNG.uniform(0.5, 3, (4,))
C = RNG.uniform(-3, 3, (5, 4))


def _operands(name, dtype):
    spec = OPS[name]
    if name == "where":
        return (A > 0, A.astype(dtype), C.astype(dtype))
    if spec.arity == 1:
        return (np.abs(A).astype(dtype) if name in ("log", "sqrt") else A.astype(dtype),)
    return (np.abs(A).astype(dtype) if name == "pow" else A.astype(dtype), B_.astype(dtype))


def _ref(name, xs, imm):
    a = xs[0]
    named = {"copy": lambda: a.copy(), "sigmoid": lambda: 1 / (1 + np.exp(-a)),
             "relu": lambda: np.maximum(a, 0), "sign": lambda: np.sign(a),
             "leaky_relu": lambda: np.where(a > 0, a, a * imm),
             "elu": lambda: np.where(a > 0, a, imm * np.expm1(a)),
             "where": lambda: np.where(*xs), "div": lambda: np.true_divide(*xs),
             "sub": lambda: np.subtract(*xs), "mul": lambda: np.multiply(*xs),
             "neg": lambda: -a, "pow": lambda: np.power(*xs),
             "eq": lambda: np.equal(*xs), "ne": lambda: np.not_equal(*xs),
             "lt": lambda: np.less(*xs), "le": lambda: np.less_equal(*xs),
             "gt": lambda: np.greater(*xs), "ge": lambda: np.greater_equal(*xs),
             "erf": lambda: np.vectorize(math.erf, otypes=[a.dtype])(a)}
    return named[name]() if name in named else getattr(np, name)(*xs)


BACKENDS = {"cpu": CpuBackend, "minimal": MinimalBackend,
            "fusion": lambda: Fusion(CpuBackend(), min_elements=0)}


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_evaluator_op_on_every_backend(name, dtype):
    xs = _operands(name, dtype)
    imm = 0.3 if OPS[name].immediate else None
    want = _ref(name, xs, imm)
    got = {}
    for bname, make in BACKENDS.items():
        B = make()
        r = B.to_numpy(B.elementwise(name, *[B.from_numpy(x) for x in xs], imm=imm))
        assert r.dtype == (np.bool_ if OPS[name].predicate else dtype), (bname, r.dtype)
        assert r.shape == np.broadcast_shapes(*(x.shape for x in xs))
        np.testing.assert_allclose(r, want, rtol=2e-6 if dtype == np.float32 else 1e-14,
                                   atol=1e-6 if dtype == np.float32 else 1e-14)
        got[bname] = r
    # one evaluator everywhere: the same bits on every backend
    for bname in ("minimal", "fusion"):
        if OPS[name].predicate:
            np.testing.assert_array_equal(got[bname], got["cpu"])
        else:
            np.testing.assert_array_equal(bits(got[bname]), bits(got["cpu"]))


def test_scalars_ints_and_errors():
    B = CpuBackend()
    x = np.array([1, 2, 3])
    r = B.elementwise("mul", x, 1.5)
    assert r.dtype == np.float32 and r.tolist() == [1.5, 3.0, 4.5]      # PyTorch's rule
    r = B.elementwise("add", 2.0, np.array([1.0, 2.0]))
    assert r.dtype == np.float64 and r.tolist() == [3.0, 4.0]
    assert B.elementwise("le", x, 2).dtype == np.bool_
    assert type(B.elementwise("exp", x).base) is _kernels.Storage           # owned memory
    with pytest.raises(ValueError, match="not an op of the fused evaluator"):
        B.elementwise("softmax", x)
    with pytest.raises(TypeError, match="takes 2 operands"):
        B.elementwise("add", x)
    with pytest.raises(TypeError, match="an immediate"):
        B.elementwise("leaky_relu", x)
    with pytest.raises(TypeError, match="no immediate"):
        B.elementwise("exp", x, imm=1.0)
    with pytest.raises(TypeError, match="array operand"):
        B.elementwise("add", 1.0, 2.0)
    with pytest.raises(ValueError):
        B.elementwise("add", np.ones(3), np.ones(4))


def test_fusion_records_it_and_fuses_it_with_its_neighbours():
    fz = Fusion(CpuBackend(), min_elements=0)
    a0 = RNG.standard_normal(1000)
    a = fz.from_numpy(a0)
    y = fz.elementwise("leaky_relu", fz.mul(a, 2.0), imm=0.2)
    assert y.pending
    z = fz.add(y, 1.0)
    out = fz.to_numpy(z)
    assert fz.cache_info()["kernel_calls"] == 1 and fz.cache_info()["nodes_fused"] == 3
    np.testing.assert_array_equal(out, np.where(a0 * 2 > 0, a0 * 2, a0 * 2 * 0.2) + 1.0)
    # not fusable (an int operand, a numpy parameter): run by the inner backend at once
    i = fz.from_numpy(np.array([1, 2]))
    assert not fz.elementwise("exp", i).pending
    r = fz.elementwise("leaky_relu", a, imm=np.float64(0.5))
    assert not r.pending


def test_an_unfused_fallback_runs_ops_without_a_method_of_their_own(monkeypatch):
    """The fallback of a refused fused pass evaluates each node on the inner backend:
    an evaluator op recorded by name goes through its elementwise."""
    from rtx.fusion import backend as fb
    fz = Fusion(CpuBackend(), min_elements=0)
    monkeypatch.setattr(fb, "fused_eval", lambda *a: (_ for _ in ()).throw(ValueError("no")))
    a0 = RNG.standard_normal(100)
    with rtx.use_backend(fz):
        a = fz.from_numpy(a0)
        y = fz.to_numpy(fz.elementwise("elu", fz.mul(a, 3.0), imm=1.0))
    assert fz.cache_info()["unfused_fallbacks"] == 1
    np.testing.assert_allclose(y, np.where(a0 * 3 > 0, a0 * 3, np.expm1(a0 * 3)), rtol=1e-12)
