"""``rtx.gat_scores`` below its op_db entry (values, float64 gradchecks, bad inputs:
tests/op_db.py): the composed ops' bits, forward and backward, at any thread
count and slope; the kernel's argument checks before anything is written; and
GATConv's output with it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_both_threads_run, bits

import rtx
from rtx import _kernels
from rtx.nn import functional as F


def _inputs(dtype, n_src=300, n_dst=200, E=40_000, H=4, seed=0):
    rng = np.random.default_rng(seed)
    a_src = rng.standard_normal((n_src, H)).astype(dtype)
    a_dst = rng.standard_normal((n_dst, H)).astype(dtype)
    a_src[0, 0], a_dst[1, 1] = np.nan, -0.0            # a NaN and a signed zero travel
    src = rng.integers(0, n_src, E)
    dst = rng.integers(0, n_dst, E)
    return a_src, a_dst, src, dst


@pytest.mark.parametrize("slope", [0.2, 0.0, -0.5, 1.7])
@pytest.mark.parametrize("threads", [1, 2])
def test_forward_and_backward_are_the_composed_ops_bits(dtype, slope, threads,
                                                        force_parallel):
    a_src, a_dst, src, dst = _inputs(dtype)
    g = np.random.default_rng(1).standard_normal((len(src), 4)).astype(dtype)
    old = rtx.get_num_threads()
    rtx.set_num_threads(threads)
    try:
        results = []
        for fused in (True, False):
            s = rtx.tensor(a_src, requires_grad=True)
            d = rtx.tensor(a_dst, requires_grad=True)
            if fused:
                out = rtx.gat_scores(s, d, src, dst, slope)
                assert out.grad_fn.name() == "gat_scores"
            else:
                out = F.leaky_relu(rtx.index_select(s, src) + rtx.index_select(d, dst), slope)
            out.backward(rtx.tensor(g))
            results.append((out.numpy(), s.grad.numpy(), d.grad.numpy()))
    finally:
        rtx.set_num_threads(old)
    for got, want in zip(results[0], results[1], strict=True):
        np.testing.assert_array_equal(bits(got), bits(want))


def test_the_kernel_runs_on_both_threads(force_parallel):
    a_src, a_dst, src, dst = _inputs(np.float32, E=200_000)
    out = np.empty((len(src), 4), np.float32)
    assert_both_threads_run(lambda: _kernels.gat_scores_rows(a_src, a_dst, src, dst, 0.2,
                                                             out, 2))


@pytest.mark.valgrind
def test_kernel_shape_checks_write_nothing():
    a_src, a_dst, src, dst = _inputs(np.float32, E=10)
    out = np.full((10, 4), 7, np.float32)
    for args in [(a_src, a_dst, src[:9], dst), (a_src, a_dst[:, :3], src, dst),
                 (a_src, a_dst, src, dst[:9])]:
        with pytest.raises(ValueError):
            _kernels.gat_scores_rows(*args, 0.2, out, 1)
    with pytest.raises(ValueError):
        _kernels.gat_scores_rows(a_src, a_dst, src, dst, 0.2, out[:9], 1)
    with pytest.raises(IndexError):
        _kernels.gat_scores_rows(a_src[:0], a_dst, src, dst, 0.2, out, 1)
    assert (out == 7).all()


@pytest.mark.valgrind
def test_backend_wants_checked_plans_of_the_logits_rows():
    B = rtx.CpuBackend()
    a = np.zeros((3, 2), np.float32)
    p3, p2 = rtx.IndexPlan(np.array([0, 2]), 3), rtx.IndexPlan(np.array([1, 0]), 2)
    with pytest.raises(TypeError, match="IndexPlan"):
        B.gat_scores(a, a[:2], np.array([0, 2]), p2, 0.2)
    with pytest.raises(ValueError, match="src_index was checked against 2 rows"):
        B.gat_scores(a, a[:2], p2, p3, 0.2)
    with pytest.raises(ValueError, match="one length"):
        B.gat_scores(a, a[:2], p3, rtx.IndexPlan(np.array([1]), 2), 0.2)
    np.testing.assert_array_equal(B.gat_scores(a + 1, a[:2] - 2, p3, p2, 0.5), -0.5)


@pytest.mark.valgrind
def test_gatconv_uses_it_and_keeps_its_output():
    rng = np.random.default_rng(3)
    x = rtx.tensor(rng.standard_normal((30, 8)).astype(np.float32))
    ei = np.stack([rng.integers(0, 30, 200), rng.integers(0, 30, 200)])
    rtx.manual_seed(0)
    conv = rtx.nn.GATConv(8, 4, heads=2)
    out = conv(x, ei)
    names = set()
    stack = [out.grad_fn]
    while stack:                     # the recorded graph holds the fused node
        n = stack.pop()
        if n is None or not hasattr(n, "name"):
            continue
        names.add(n.name())
        stack.extend(p for p in n.next_functions if hasattr(p, "next_functions"))
    assert "gat_scores" in names and "leaky_relu" not in names
