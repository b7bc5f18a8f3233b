"""binary_cross_entropy_with_logits / BCEWithLogitsLoss against torch and references.

The op_db entry (tests/op_db.py) covers values against a numpy reference on every
backend, float64 gradchecks of every input and the saved-buffer declaration; these
tests add torch's own values and gradients, stability at extreme logits, the
parallel kernel path and the module."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rtx
from rtx.backend.loss import np_bce_with_logits_backward, np_bce_with_logits_forward
from rtx.nn import functional as F

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")

CASES = [  # (input shape, weight shape or None, pos_weight shape or None)
    ((7,), None, None),
    ((4, 3), None, (3,)),
    ((4, 3), (3,), None),
    ((4, 3), (4, 1), (3,)),
    ((2, 3, 4), (3, 1), (4,)),
    ((2, 3, 4), (2, 3, 4), (2, 3, 4)),
    ((5, 1), None, (1,)),
]


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape,wshape,pshape", CASES)
def test_matches_torch(shape, wshape, pshape, reduction, dtype):
    rng = np.random.default_rng(hash((shape, wshape, pshape)) % 2**32)
    x = (rng.normal(size=shape) * 6).astype(dtype)
    y = rng.uniform(size=shape).astype(dtype)
    w = None if wshape is None else rng.uniform(0.1, 2, wshape).astype(dtype)
    p = None if pshape is None else rng.uniform(0.2, 4, pshape).astype(dtype)
    tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    tl = torch.nn.functional.binary_cross_entropy_with_logits(
        tx, ty, None if w is None else torch.tensor(w), reduction=reduction,
        pos_weight=None if p is None else torch.tensor(p))
    rx, ry = rtx.tensor(x, requires_grad=True), rtx.tensor(y, requires_grad=True)
    rl = F.binary_cross_entropy_with_logits(
        rx, ry, None if w is None else rtx.tensor(w), reduction=reduction,
        pos_weight=None if p is None else rtx.tensor(p))
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    assert rl.dtype == dtype and rl.shape == tuple(tl.shape)
    np.testing.assert_allclose(rl.numpy(), tl.detach().numpy(), **tol)
    gt = torch.tensor(rng.normal(size=tuple(tl.shape)).astype(dtype))
    tl.backward(gt)
    rl.backward(rtx.tensor(gt.numpy()))
    np.testing.assert_allclose(rx.grad.numpy(), tx.grad.numpy(), **tol)
    np.testing.assert_allclose(ry.grad.numpy(), ty.grad.numpy(), **tol)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_extreme_logits_are_stable_like_torch(dtype):
    x = np.array([-1e4, -100, -30, -1e-8, 0, 1e-8, 30, 100, 1e4], dtype)
    for y in (np.zeros_like(x), np.ones_like(x), np.full_like(x, 0.25)):
        for p in (None, np.full(x.shape, 3.0, dtype)):
            r = F.binary_cross_entropy_with_logits(
                rtx.tensor(x, requires_grad=True), rtx.tensor(y), reduction="none",
                pos_weight=None if p is None else rtx.tensor(p))
            t = torch.nn.functional.binary_cross_entropy_with_logits(
                torch.tensor(x), torch.tensor(y), reduction="none",
                pos_weight=None if p is None else torch.tensor(p))
            assert np.isfinite(r.numpy()).all()
            np.testing.assert_allclose(r.numpy(), t.numpy(), rtol=1e-6, atol=1e-7)
            r.sum().backward()


def test_small_losses_keep_their_digits():
    # x = -30, y = 0: the loss is log1p(e^-30) ~ 9.4e-14, not 0 (no x + (-x) cancellation)
    for p in (None, rtx.tensor([2.0], dtype=rtx.float64)):
        v = F.binary_cross_entropy_with_logits(rtx.tensor([-30.0], dtype=rtx.float64),
                                               rtx.tensor([0.0], dtype=rtx.float64),
                                               pos_weight=p).item()
        assert v == pytest.approx(np.log1p(np.exp(-30.0)), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-50, 50), min_size=1, max_size=30), st.floats(0.05, 5),
       st.integers(0, 2**31))
def test_against_reference_hypothesis(xs, pw, seed):
    x = np.array(xs)
    y = np.random.default_rng(seed).uniform(size=x.shape)
    got = F.binary_cross_entropy_with_logits(rtx.tensor(x), rtx.tensor(y), reduction="none",
                                             pos_weight=rtx.tensor([pw], dtype=rtx.float64))
    ref = pw * y * np.logaddexp(0, -x) + (1 - y) * np.logaddexp(0, x)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10, atol=1e-12)


def test_large_input_against_the_reference():
    n = (1 << 15) * 3 + 7
    rng = np.random.default_rng(3)
    x, y, p, g = (rng.normal(size=n) * 4, rng.uniform(size=n), rng.uniform(0.2, 3, n),
                  rng.normal(size=n))
    loss = np_bce_with_logits_forward(x, y, p)
    ref = p * y * np.logaddexp(0, -x) + (1 - y) * np.logaddexp(0, x)
    np.testing.assert_allclose(loss, ref, rtol=1e-12, atol=1e-13)
    gx, gy, gp = np_bce_with_logits_backward(x, y, p, g, True, True)
    sig = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(gx, g * ((1 - y) * sig - p * y * (1 - sig)), rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_allclose(gy, g * (p * np.logaddexp(0, -x) - np.logaddexp(0, x)),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gp, g * y * np.logaddexp(0, -x), rtol=1e-9, atol=1e-12)
    x32 = x.astype(np.float32)
    assert np_bce_with_logits_forward(x32, y.astype(np.float32), None).dtype == np.float32


def test_backend_body_checks_its_inputs():
    x = np.zeros(4)
    with pytest.raises(ValueError, match="target must be float64 of shape"):
        np_bce_with_logits_forward(x, np.zeros(3), None)
    with pytest.raises(ValueError, match="pos_weight"):
        np_bce_with_logits_forward(x, x, np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="no pos_weight"):
        np_bce_with_logits_backward(x, x, None, x, False, True)
    with pytest.raises(TypeError, match="float"):
        np_bce_with_logits_forward(np.zeros(4, np.int64), x, None)


def test_errors_leave_inputs_untouched():
    x = rtx.zeros(2, 3)
    with pytest.raises(ValueError, match=r"Target size \(rtx.Size\(\[3\]\)\)"):
        F.binary_cross_entropy_with_logits(x, rtx.zeros(3))
    with pytest.raises(ValueError, match="pos_weight"):
        F.binary_cross_entropy_with_logits(x, x, pos_weight=rtx.ones(2))
    with pytest.raises(ValueError, match="weight"):
        F.binary_cross_entropy_with_logits(x, x, weight=rtx.ones(2, 3, 1))
    with pytest.raises(TypeError, match="floating point"):
        F.binary_cross_entropy_with_logits(rtx.zeros(2, dtype=rtx.int64), rtx.zeros(2))
    with pytest.raises(ValueError, match="reduction"):
        F.binary_cross_entropy_with_logits(x, x, reduction="batchmean")
    assert (x.numpy() == 0).all()


def test_targets_weights_of_other_dtypes_and_arrays():
    x = rtx.tensor([[0.5, -1.0]])
    a = F.binary_cross_entropy_with_logits(x, np.array([[1, 0]]))   # ints become x's dtype
    b = F.binary_cross_entropy_with_logits(x, rtx.tensor([[1.0, 0.0]], dtype=rtx.float64))
    assert a.dtype == np.float32 and a.item() == pytest.approx(b.item())


def test_empty_input_mean_is_nan_sum_zero():
    e = rtx.zeros(0, 3, requires_grad=True)
    assert np.isnan(F.binary_cross_entropy_with_logits(e, rtx.zeros(0, 3)).item())
    s = F.binary_cross_entropy_with_logits(e, rtx.zeros(0, 3), reduction="sum")
    assert s.item() == 0.0
    s.backward()
    assert e.grad.shape == (0, 3)


@needs_torch
def test_module_and_legacy_arguments_match_torch():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(6, 3)), (rng.uniform(size=(6, 3)) > 0.5).astype(float)
    p, w = rng.uniform(0.5, 2, 3), rng.uniform(0.5, 2, 3)
    for kw in ({}, {"reduction": "sum"}, {"reduction": "none"}):
        ours = rtx.nn.BCEWithLogitsLoss(weight=rtx.tensor(w), pos_weight=rtx.tensor(p), **kw)
        theirs = torch.nn.BCEWithLogitsLoss(weight=torch.tensor(w), pos_weight=torch.tensor(p),
                                            **kw)
        np.testing.assert_allclose(ours(rtx.tensor(x), rtx.tensor(y)).numpy(),
                                   theirs(torch.tensor(x), torch.tensor(y)).numpy(), rtol=1e-12)
    m = rtx.nn.BCEWithLogitsLoss(pos_weight=rtx.tensor(p))
    assert "pos_weight" in dict(m.named_buffers())
    for legacy, red in (({"size_average": False}, "sum"), ({"reduce": False}, "none")):
        with pytest.warns(UserWarning, match="deprecated"):
            got = F.binary_cross_entropy_with_logits(rtx.tensor(x), rtx.tensor(y), **legacy)
        with pytest.warns(UserWarning):
            want = torch.nn.functional.binary_cross_entropy_with_logits(
                torch.tensor(x), torch.tensor(y), **legacy)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
        assert got.shape == F.binary_cross_entropy_with_logits(
            rtx.tensor(x), rtx.tensor(y), reduction=red).shape


def test_one_recorded_node():
    x = rtx.randn(4, 3, requires_grad=True, seed=0)
    loss = F.binary_cross_entropy_with_logits(x, rtx.rand(4, 3, seed=1),
                                              pos_weight=rtx.ones(3))
    assert loss.grad_fn.op.name == "binary_cross_entropy_with_logits"
    assert loss.grad_fn.parents[0] is x          # straight from the leaf: one fused node
