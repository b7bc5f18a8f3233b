"""Fused message passing (issue 11 item 4): values and gradients against
``index_add(index_select(x, src) * w, dst)``, bitwise determinism across thread
counts and EdgeIndex vs raw edge_index (one head; four: test_graph_ops_db.py),
and bad input rejected before anything is written.  Values against numpy and
torch, gradchecks, the adjoint identity and properties: the op_db entry
(tests/op_db.py), run by test_ops.py, test_autograd.py, test_graph_ops_db.py."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_both_threads_run, bits, tol

import rtx
from rtx import _kernels


def graph(rng, E=30, n_src=8, n_dst=6, idx_dtype=np.int64):
    ei = np.stack([rng.integers(0, n_src, E), rng.integers(0, n_dst, E)]).astype(idx_dtype)
    ei[1][ei[1] == 2] = 3  # target 2 receives nothing
    return ei


def chain(x, ei, n_dst, w):
    """The unfused reference from rtx's own primitives."""
    msg = rtx.index_select(x, ei[0])
    if w is not None:
        msg = msg * (w.reshape(w.shape + (1,) * (x.ndim - w.ndim)))
    return rtx.index_add(msg, ei[1], n_dst)


CASES = [((8, 5), None), ((8, 5), (30,)), ((8, 3, 4), (30, 3)), ((8, 3, 4), None)]
IDS = ["F-noweight", "F-w", "HC-w", "HC-noweight"]


@pytest.mark.valgrind
@pytest.mark.parametrize("xshape,wshape", CASES, ids=IDS)
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64], ids=["i32", "i64"])
def test_values_match_chain(backend, dtype, xshape, wshape, idx_dtype):
    rng = np.random.default_rng(0)
    ei = graph(rng, idx_dtype=idx_dtype)
    x = rtx.tensor(rng.standard_normal(xshape).astype(dtype))
    w = None if wshape is None else rtx.tensor(rng.standard_normal(wshape).astype(dtype))
    out = rtx.message_passing(x, ei, 6, w)
    assert out.shape == (6,) + xshape[1:] and out.dtype == dtype
    np.testing.assert_allclose(out.numpy(), chain(x, ei, 6, w).numpy(), **tol(dtype))
    assert np.all(out.numpy()[2] == 0)


def test_gradients_match_chain(backend, dtype):
    rng = np.random.default_rng(2)
    ei = graph(rng)
    xs = rng.standard_normal((8, 3, 4)).astype(dtype)
    ws = rng.standard_normal((30, 3)).astype(dtype)
    g = rtx.tensor(rng.standard_normal((6, 3, 4)).astype(dtype))
    grads = []
    for f in (lambda x, w: rtx.message_passing(x, ei, 6, w), lambda x, w: chain(x, ei, 6, w)):
        x = rtx.tensor(xs, requires_grad=True)
        w = rtx.tensor(ws, requires_grad=True)
        f(x, w).backward(g)
        grads.append((x.grad.numpy(), w.grad.numpy()))
    for a, b in zip(grads[0], grads[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4 if dtype == np.float32 else 1e-12,
                                   atol=1e-5 if dtype == np.float32 else 1e-12)


def test_only_weight_requires_grad(backend):
    rng = np.random.default_rng(4)
    ei = graph(rng)
    x = rtx.tensor(rng.standard_normal((8, 5)))
    w = rtx.tensor(rng.standard_normal(30), requires_grad=True)
    rtx.message_passing(x, ei, 6, w).sum().backward()
    expect = (x.numpy()[ei[0]]).sum(axis=1)  # grad_out = 1
    np.testing.assert_allclose(w.grad.numpy(), expect, rtol=1e-12)
    assert x.grad is None


def test_no_edges(backend):
    x = rtx.tensor(np.ones((3, 2)), requires_grad=True)
    out = rtx.message_passing(x, np.zeros((2, 0), np.int64), 4)
    np.testing.assert_array_equal(out.numpy(), np.zeros((4, 2)))
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((3, 2)))


# H = 4 (weighted, 8 channels): also test_graph_ops_db.py::test_bitwise_across_threads_and_forms;
# here the plan is used three times, so its later calls read the edge index's in-order
# copies (EdgeIndex._in_group_order, built on the second call) and must keep the bits
@pytest.mark.parametrize("H", [1, 4])
def test_bitwise_across_threads_and_plan(dtype, H):
    rng = np.random.default_rng(5)
    E, N = 30000, 500
    ei = np.stack([rng.integers(0, N, E), rng.integers(0, N, E)])
    plan = rtx.EdgeIndex(ei, N, N)
    xs = rng.standard_normal((N, H, 8)).astype(dtype)
    ws = rng.standard_normal((E, H)).astype(dtype)
    g = rtx.tensor(rng.standard_normal((N, H, 8)).astype(dtype))
    old = _kernels.set_segment_parallel_min(0)
    try:
        res = []
        for T in (1, 2, 2):
            for edge in (ei, plan):
                rtx.set_num_threads(T)
                x = rtx.tensor(xs, requires_grad=True)
                w = rtx.tensor(ws, requires_grad=True)
                out = rtx.message_passing(x, edge, N, w)
                out.backward(g)
                res.append([bits(a) for a in (out.numpy(), x.grad.numpy(), w.grad.numpy())])
        for r in res[1:]:
            for a, b in zip(r, res[0], strict=True):
                np.testing.assert_array_equal(a, b)
        if _kernels.openmp_enabled():
            rtx.set_num_threads(2)
            assert_both_threads_run(
                lambda: rtx.message_passing(rtx.tensor(xs), plan, N, rtx.tensor(ws)))
    finally:
        _kernels.set_segment_parallel_min(old)
    assert plan.dst.is_grouped and plan.src.is_grouped
    assert set(plan._order) == {"src", "dst"}     # the in-order copies ran


def test_bad_input(backend):
    rng = np.random.default_rng(6)
    ei = graph(rng)
    x = rtx.tensor(rng.standard_normal((8, 3, 4)))
    w = rtx.tensor(rng.standard_normal((30, 3)))
    snapshot = (x.numpy().copy(), w.numpy().copy(), ei.copy())
    bad = ei.copy()
    bad[0, 5] = 8
    with pytest.raises(IndexError, match=r"sources.*indices\[5\]"):
        rtx.message_passing(x, bad, 6, w)
    bad = ei.copy()
    bad[1, 7] = -1
    with pytest.raises(IndexError):
        rtx.message_passing(x, bad, 6, w)
    with pytest.raises(ValueError, match="edges"):
        rtx.message_passing(x, ei[:, :29], 6, w)
    with pytest.raises(ValueError, match="weight"):
        rtx.message_passing(x, ei, 6, rtx.tensor(np.ones(30)))
    with pytest.raises(ValueError, match="weight"):
        rtx.message_passing(rtx.tensor(np.ones((8, 5))), ei, 6, w)
    with pytest.raises(ValueError, match="2 rows"):
        rtx.message_passing(x, np.concatenate([ei, ei]), 6, w)
    with pytest.raises(TypeError, match="2-D"):
        rtx.message_passing(x, ei[0], 6, w)
    with pytest.raises(TypeError):
        rtx.message_passing(x, ei.astype(np.float64), 6, w)
    with pytest.raises(ValueError, match=">= 0"):
        rtx.message_passing(x, ei, -1, w)
    with pytest.raises(TypeError, match="float"):
        rtx.message_passing(rtx.tensor(np.ones((8, 5), np.int64)), ei, 6)
    with pytest.raises(TypeError, match="dtype"):
        rtx.message_passing(x, ei, 6, rtx.tensor(np.ones((30, 3), np.float32)))
    with pytest.raises(ValueError, match="EdgeIndex"):
        rtx.message_passing(x, rtx.EdgeIndex(ei, 8, 7), 6, w)
    with pytest.raises(ValueError):
        rtx.message_passing(rtx.tensor(np.ones(8)), ei, 6)
    for a, b in zip((x.numpy(), w.numpy(), ei), snapshot, strict=True):
        np.testing.assert_array_equal(a, b)

