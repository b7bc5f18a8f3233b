"""The Backend interface: a core-only backend is complete through the defaults."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import rtx
from rtx.backend import Backend, CpuBackend, MinimalBackend

CORE = {"from_numpy", "to_numpy", "shape", "dtype"}


def test_backend_is_abstract_over_the_core():
    with pytest.raises(TypeError):
        Backend()  # type: ignore[abstract]
    assert set(Backend.__abstractmethods__) == CORE

    class Partial(Backend):
        def from_numpy(self, a):
            return a

    with pytest.raises(TypeError):
        Partial()  # type: ignore[abstract]


def test_minimal_backend_implements_only_the_core():
    own = {n for n, v in vars(MinimalBackend).items() if callable(v) and not n.startswith("__")}
    assert own <= CORE | {"is_prim"}


def _public_ops():
    return sorted(
        n for n, v in inspect.getmembers(Backend, inspect.isfunction)
        if not n.startswith("_") and n not in CORE | {"is_prim"}
    )


RNG = np.random.default_rng(1)
X = RNG.uniform(0.5, 2.0, (3, 4))
Y = RNG.uniform(0.5, 2.0, (4,))
M = RNG.uniform(-1, 1, (4, 2))
IDX = np.array([2, 0, 2], dtype=np.int64)
X4 = RNG.uniform(-1, 1, (4, 4))  # one row per segment of IDX over 4 segments
EI = np.array([[0, 2, 1, 2], [1, 0, 1, 1]], dtype=np.int64)  # 3 sources -> 2 targets
W = RNG.uniform(-1, 1, (4,))


def _mp_backward(B, f):
    gx, gw = B.message_passing_backward(f(X[:2]), f(X), EI, f(W))
    return B.concat([B.reshape(gx, (12,)), gw], 0)

# One call per op on (backend, from_numpy) -> primitive.
CALLS = {
    "add": lambda B, f: B.add(f(X), f(Y)),
    "sub": lambda B, f: B.sub(f(X), 2.0),
    "mul": lambda B, f: B.mul(f(X), f(Y)),
    "div": lambda B, f: B.div(1.0, f(X)),
    "pow": lambda B, f: B.pow(f(X), f(Y)),
    "maximum": lambda B, f: B.maximum(f(X), f(Y)),
    "minimum": lambda B, f: B.minimum(f(X), f(Y)),
    "neg": lambda B, f: B.neg(f(X)),
    "exp": lambda B, f: B.exp(f(X)),
    "log": lambda B, f: B.log(f(X)),
    "sqrt": lambda B, f: B.sqrt(f(X)),
    "abs": lambda B, f: B.abs(f(X - 1)),
    "sign": lambda B, f: B.sign(f(np.array([-1.0, 0.0, 2.0, np.nan]))),
    "eq": lambda B, f: B.eq(f(X), f(X)),
    "ne": lambda B, f: B.ne(f(X), 1.0),
    "lt": lambda B, f: B.lt(f(X), f(Y)),
    "le": lambda B, f: B.le(f(X), f(Y)),
    "gt": lambda B, f: B.gt(f(X), f(Y)),
    "ge": lambda B, f: B.ge(f(X), f(Y)),
    "where": lambda B, f: B.where(f(X > 1), f(X), f(Y)),
    "cast": lambda B, f: B.cast(f(X), np.dtype(np.float32)),
    "copy": lambda B, f: B.copy(f(X)),
    "relu": lambda B, f: B.relu(f(X - 1)),
    "leaky_relu": lambda B, f: B.leaky_relu(f(X - 1), 0.1),
    "elu": lambda B, f: B.elu(f(X - 1), 0.5),
    "sigmoid": lambda B, f: B.sigmoid(f(X - 1)),
    "tanh": lambda B, f: B.tanh(f(X)),
    "softmax": lambda B, f: B.softmax(f(X), 1),
    "log_softmax": lambda B, f: B.log_softmax(f(X), 0),
    "sum": lambda B, f: B.sum(f(X), 1, True),
    "mean": lambda B, f: B.mean(f(X), (0, 1), False),
    "max": lambda B, f: B.max(f(X), 0, False),
    "min": lambda B, f: B.min(f(X), None, False),
    "argmax": lambda B, f: B.argmax(f(X), 1, False),
    "matmul": lambda B, f: B.matmul(f(X), f(M)),
    "reshape": lambda B, f: B.reshape(f(X), (2, 6)),
    "permute": lambda B, f: B.permute(f(X), (1, 0)),
    "broadcast_to": lambda B, f: B.broadcast_to(f(Y), (2, 4)),
    "getitem": lambda B, f: B.getitem(f(X), (slice(None), [1, 1])),
    "slice_backward": lambda B, f: B.slice_backward(f(X[:, :2]), (3, 4), (slice(None), [1, 1])),
    "concat": lambda B, f: B.concat([f(X), f(X)], 1),
    "stack": lambda B, f: B.stack([f(X), f(X)], 0),
    "index_select": lambda B, f: B.index_select(f(X), IDX),
    "index_add": lambda B, f: B.index_add(f(X), IDX, 5),
    "segment_softmax": lambda B, f: B.segment_softmax(f(X), IDX, 4),
    "segment_softmax_backward": lambda B, f: B.segment_softmax_backward(
        B.segment_softmax(f(X), IDX, 4), f(X - 1), IDX, 4),
    "segment_mean": lambda B, f: B.segment_mean(f(X), IDX, 4),
    "segment_mean_backward": lambda B, f: B.segment_mean_backward(f(X4), IDX, 4),
    "segment_max": lambda B, f: B.segment_max(f(X), IDX, 4)[0],
    "segment_max_backward": lambda B, f: B.segment_max_backward(
        f(X4), B.segment_max(f(X), IDX, 4)[1], IDX, 3),
    "message_passing": lambda B, f: B.message_passing(f(X), EI, 2, f(W)),
    "message_passing_backward": _mp_backward,
    "empty": lambda B, f: B.zeros((2, 3), np.dtype(np.float64)),
    "zeros": lambda B, f: B.zeros((2, 3), np.dtype(np.float64)),
    "full": lambda B, f: B.full((2,), 3.5, np.dtype(np.float64)),
    "inplace": lambda B, f: B.inplace("add", f(X), f(Y)),
    # loss family: the (loss, stats) pair side by side, and the backward rules
    "cross_entropy_forward": lambda B, f: B.concat(
        [B.reshape(B.cross_entropy_forward(f(X), IDX)[0], (3, 1)),
         B.cross_entropy_forward(f(X), IDX)[1]], 1),
    "cross_entropy_backward": lambda B, f: B.cross_entropy_backward(
        f(X), B.cross_entropy_forward(f(X), IDX)[1], IDX, f(np.array([0.5, 0.0, 2.0]))),
    "nll_forward": lambda B, f: B.nll_forward(f(X), IDX),
    "nll_backward": lambda B, f: B.nll_backward(f(np.array([0.5, 0.0, 2.0])), IDX, (3, 4)),
}


def test_every_op_is_covered():
    assert set(_public_ops()) == set(CALLS), set(_public_ops()) ^ set(CALLS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_minimal_defaults_match_cpu_kernels(name):
    cpu, mini = CpuBackend(), MinimalBackend()
    want = cpu.to_numpy(CALLS[name](cpu, lambda a: np.array(a)))
    got_prim = CALLS[name](mini, mini.from_numpy)
    assert mini.is_prim(got_prim)
    got = mini.to_numpy(got_prim)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13, equal_nan=True)


def test_tensor_level_on_minimal_backend():
    with rtx.use_backend(MinimalBackend()) as b:
        t = rtx.tensor([[1.0, 2.0], [3.0, 4.0]])
        assert t.backend is b
        assert ((t @ t).softmax(-1).sum(0) * 2).tolist() == pytest.approx(
            (np.ones(2) * 2 * (np.exp([[7, 10], [15, 22]]) /
                               np.exp([[7, 10], [15, 22]]).sum(1, keepdims=True))).sum(0)
            .tolist())
