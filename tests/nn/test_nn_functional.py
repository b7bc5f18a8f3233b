"""rtx.nn.functional: values against numpy formulas, float64 gradchecks, errors, torch parity."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import tol
from hypothesis import given, settings
from hypothesis import strategies as st

import rtx
import rtx.nn as nn
import rtx.nn.functional as F
from rtx.autograd import gradcheck


def _np_ce_rows(x, t, w=None, ignore_index=-100):
    """Per-row weighted cross-entropy and row weights (numpy reference, float64)."""
    x = x.astype(np.float64)
    m = x.max(1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(1, keepdims=True)))[:, 0]
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    wr = np.where(valid, 1.0 if w is None else w[safe], 0.0)
    return wr * (lse - x[np.arange(len(t)), safe]), wr


def _np_nll_rows(x, t, w=None, ignore_index=-100):
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    wr = np.where(valid, 1.0 if w is None else w[safe], 0.0)
    return -wr * x.astype(np.float64)[np.arange(len(t)), safe], wr


def _reduce(rows, wr, reduction):
    if reduction == "none":
        return rows
    if reduction == "sum":
        return rows.sum()
    with np.errstate(invalid="ignore"):
        return np.float64(rows.sum()) / wr.sum()


REDUCTIONS = ["none", "mean", "sum"]


# ----------------------------------------------------------- activations
def test_activations_values_and_gradcheck(backend, dtype):
    a = np.random.default_rng(0).standard_normal((4, 5)).astype(dtype)
    a[0, 0] = 0.0
    x = rtx.tensor(a)
    t = tol(dtype)
    np.testing.assert_allclose(F.relu(x).numpy(), np.maximum(a, 0), **t)
    np.testing.assert_allclose(F.leaky_relu(x).numpy(), np.where(a > 0, a, 0.01 * a), **t)
    np.testing.assert_allclose(F.leaky_relu(x, negative_slope=0.2).numpy(),
                               np.where(a > 0, a, 0.2 * a), **t)
    np.testing.assert_allclose(F.elu(x).numpy(), np.where(a > 0, a, np.expm1(a)), **t)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(F.softmax(x, 1).numpy(), e / e.sum(1, keepdims=True), **t)
    np.testing.assert_allclose(F.log_softmax(x, dim=-1).numpy(),
                               np.log(e / e.sum(1, keepdims=True)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(nn.ReLU()(x).numpy(), F.relu(x).numpy())
    np.testing.assert_allclose(nn.LeakyReLU(0.3)(x).numpy(), F.leaky_relu(x, 0.3).numpy())
    np.testing.assert_allclose(nn.ELU(0.5)(x).numpy(), F.elu(x, 0.5).numpy())
    np.testing.assert_allclose(nn.Softmax(0)(x).numpy(), F.softmax(x, 0).numpy())
    np.testing.assert_allclose(nn.LogSoftmax(0)(x).numpy(), F.log_softmax(x, 0).numpy())


@pytest.mark.parametrize("fused", [False, True], ids=["cpu", "fusion"])
def test_elu_float32_is_within_a_few_ulp_of_exact_everywhere(fused):
    # the CPU kernel and Fusion compute float32 expm1 with their own vectorised
    # polynomial (rtx/_fused.pxi); checked against float64 expm1 on a dense grid,
    # tiny / subnormal values and the special values
    rng = np.random.default_rng(7)
    a = np.concatenate([
        rng.uniform(-1, 0, 200_000), rng.uniform(-45, 5, 200_000),
        -np.logspace(-45, 2, 20_000), np.linspace(-0.36, 0.0, 20_000),
        [0.0, -0.0, -1e-45, -1e-38, -30.0, -30.5, -1e4, -np.inf, np.inf, np.nan, 7.0],
    ]).astype(np.float32)
    be = rtx.fusion.Fusion(rtx.CpuBackend(), min_elements=0) if fused else rtx.CpuBackend()
    with rtx.use_backend(be):
        for alpha in (1.0, 0.3):
            got = F.elu(rtx.tensor(a), alpha).numpy()
            exact = np.where(a > 0, a, alpha * np.expm1(np.minimum(a, 0).astype(np.float64)))
            want = exact.astype(np.float32)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(a))
            np.testing.assert_array_equal(got[np.isinf(a)], want[np.isinf(a)])   # inf, -alpha
            ok = np.isfinite(a)
            ulp = np.spacing(np.maximum(np.abs(want[ok]), np.float32(1e-38))).astype(np.float64)
            err = np.abs(got[ok].astype(np.float64) - exact[ok]) / ulp
            # expm1 within 1.3 ulp; alpha != 1 adds the product's rounding and
            # float32(alpha)'s own error
            assert err.max() <= (1.5 if alpha == 1.0 else 2.5), (a[ok][err.argmax()], err.max())
            zeros = a == 0
            np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(a[zeros]))  # -0.0
            if alpha == 1.0:
                assert np.mean(got[ok] == want[ok]) > 0.9         # mostly correctly rounded


def test_elu_float32_bits_do_not_depend_on_where_an_element_sits():
    """The float32 ELU kernel runs vector lanes (an AVX2 copy where the CPU has it)
    and a scalar tail: every element gets the same bits whichever it falls in
    (shifted starts, odd lengths, the fused evaluator's 2,048-element blocks)."""
    rng = np.random.default_rng(11)
    a = np.concatenate([rng.uniform(-40, 3, 5000), [0.0, -0.0, -1e-45, np.nan, -np.inf]])
    a = a.astype(np.float32)
    B = rtx.CpuBackend()
    for alpha in (1.0, 0.3):
        whole = B.elu(a, alpha)
        for start in range(9):
            for stop in (len(a), len(a) - 3, 2048 + 5, start + 1):
                part = B.elu(a[start:stop].copy(), alpha)
                np.testing.assert_array_equal(part, whole[start:stop])


@pytest.mark.parametrize("fused", [False, True], ids=["cpu", "fusion"])
def test_sigmoid_float32_is_within_a_few_ulp_of_exact_everywhere(fused):
    # float32 sigmoid's exp is rtx's vectorised expf (rtx/_vmath.pxi), in the CPU
    # kernel and in Fusion; checked against float64 on a dense grid, the range
    # where the result is subnormal (0 there) and the special values
    rng = np.random.default_rng(8)
    a = np.concatenate([
        rng.uniform(-1, 1, 200_000), rng.normal(0, 20, 400_000), np.linspace(-87.3, 88, 50_000),
        [0.0, -0.0, 1e-45, -1e-45, 87.33, -87.33, -87.4, -88.0, -104.0, -1e4, 1e4,
         -np.inf, np.inf, np.nan],
    ]).astype(np.float32)
    be = rtx.fusion.Fusion(rtx.CpuBackend(), min_elements=0) if fused else rtx.CpuBackend()
    with rtx.use_backend(be):
        got = rtx.tensor(a).sigmoid().numpy()
    exact = 1.0 / (1.0 + np.exp(-a.astype(np.float64)))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(a))
    np.testing.assert_array_equal(got[np.isinf(a)], [0.0 if v < 0 else 1.0 for v in a[np.isinf(a)]])
    normal = np.isfinite(a) & (a > -87.33)
    ulp = np.spacing(exact[normal].astype(np.float32)).astype(np.float64)
    err = np.abs(got[normal].astype(np.float64) - exact[normal]) / ulp
    # as with libm's expf (measured on these points: at most 2.07 ulp, 72.8% correctly
    # rounded, 96.7% within 1 ulp; the division's rounding dominates)
    assert err.max() <= 2.5, (a[normal][err.argmax()], err.max())
    assert np.mean(err <= 0.5) > 0.7 and np.mean(err <= 1.0) > 0.95
    tiny = np.isfinite(a) & (a < -87.34)                 # exact value below FLT_MIN: 0
    assert (got[tiny] == 0).all() and (exact[tiny] < np.finfo(np.float32).tiny).all()


def test_sigmoid_float32_bits_do_not_depend_on_where_an_element_sits():
    """Vector lanes (an AVX2 copy where the CPU has it) and the scalar tail give
    every element the same bits (shifted starts, odd lengths, blocks)."""
    rng = np.random.default_rng(12)
    a = np.concatenate([rng.normal(0, 15, 5000), [0.0, -0.0, -90.0, np.nan, -np.inf, np.inf]])
    a = a.astype(np.float32)
    B = rtx.CpuBackend()
    whole = B.sigmoid(a)
    for start in range(9):
        for stop in (len(a), len(a) - 3, 2048 + 5, start + 1):
            np.testing.assert_array_equal(B.sigmoid(a[start:stop].copy()), whole[start:stop])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("alpha", [1.0, 0.3, 1e-50, -0.5])
def test_elu_backward_from_the_output_selects_as_the_input_does(dt, alpha):
    """With alpha > 0 the CPU backend's ELU backward tests out <= 0 instead of
    a <= 0 (no read of a): the same selection, so the same bits as the rule
    written on the input (run here through the backend's default body)."""
    rng = np.random.default_rng(12)
    a = np.concatenate([rng.uniform(-40, 3, 3000), [0.0, -0.0, -1e-45, -1e-300,
                                                    np.nan, -np.inf, np.inf]]).astype(dt)
    g = rng.standard_normal(a.shape).astype(dt)
    B = rtx.CpuBackend()
    out = B.elu(a, alpha)
    got = B.elu_backward(a, out, g, alpha)
    want = np.where(a <= 0, g * (out + dt(alpha)), g).astype(dt)
    assert got.tobytes() == want.tobytes()


def test_activation_gradchecks(backend):
    a = np.random.default_rng(1).standard_normal((3, 4))
    a[np.abs(a) < 0.05] = 0.3  # stay away from the kinks at 0
    x = rtx.tensor(a, dtype=rtx.float64, requires_grad=True)
    for fn in (F.relu, lambda v: F.leaky_relu(v, 0.1), lambda v: F.elu(v, 0.7),
               lambda v: F.softmax(v, 0), lambda v: F.log_softmax(v, 1)):
        assert gradcheck(fn, (x,))


# ---------------------------------------------------------- cross entropy
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_values(backend, dtype, reduction, weighted):
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((7, 5)) * 3).astype(dtype)
    t = np.array([0, 4, -100, 2, 1, -100, 3])
    w = rng.uniform(0.5, 2.0, 5) if weighted else None
    got = F.cross_entropy(rtx.tensor(a), rtx.tensor(t), weight=None if w is None else
                          rtx.tensor(w, dtype=dtype), reduction=reduction)
    rows, wr = _np_ce_rows(a, t, w)
    want = _reduce(rows, wr, reduction)
    assert got.dtype == dtype and got.shape == np.shape(want)
    np.testing.assert_allclose(got.numpy(), want, **tol(dtype))
    if reduction == "none":
        assert got.numpy()[2] == 0 and got.numpy()[5] == 0


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_values(backend, dtype, reduction):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 4)).astype(dtype)
    t = np.array([1, 3, 0, 7, 2, 2])
    w = rng.uniform(0.5, 2.0, 4)
    for weight in (None, w):
        got = F.nll_loss(rtx.tensor(a), t, weight=weight, ignore_index=7, reduction=reduction)
        rows, wr = _np_nll_rows(a, t, weight, ignore_index=7)
        np.testing.assert_allclose(got.numpy(), _reduce(rows, wr, reduction), **tol(dtype))


def test_cross_entropy_equals_nll_of_log_softmax(backend):
    x = rtx.randn(6, 5, dtype=rtx.float64, seed=4)
    t = np.array([0, 1, 2, 3, 4, 0])
    np.testing.assert_allclose(F.cross_entropy(x, t).numpy(),
                               F.nll_loss(F.log_softmax(x, 1), t).numpy(), rtol=1e-12)


def test_cross_entropy_is_one_fused_node():
    x = rtx.randn(4, 3, requires_grad=True, seed=0)
    loss = F.cross_entropy(x, [0, 1, 2, 0])
    assert loss.grad_fn.name() == "cross_entropy"
    assert loss.grad_fn.next_functions[0] is x  # straight to the leaf: no log_softmax node
    assert F.nll_loss(x, [0, 1, 2, 0]).grad_fn.name() == "nll_loss"


def test_cross_entropy_stable_for_huge_logits(backend, dtype):
    a = np.array([[1e4, 0.0, -1e4], [-3e4, 3e4, 3e4]], dtype=dtype)
    x = rtx.tensor(a, requires_grad=True)
    loss = F.cross_entropy(x, [1, 2], reduction="none")
    np.testing.assert_allclose(loss.numpy(), [1e4, np.log(2)], rtol=1e-6)
    loss.sum().backward()
    g = x.grad.numpy()
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g, [[1, -1, 0], [0, 0.5, -0.5]], atol=1e-6)


def test_cross_entropy_all_ignored(backend, dtype):
    x = rtx.randn(3, 4, dtype=dtype, requires_grad=True, seed=5)
    t = [-100, -100, -100]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy 0/0 warning: NaN on purpose, like torch
        loss = F.cross_entropy(x, t)
    assert np.isnan(loss.item())
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), 0)  # torch: NaN loss, zero gradient
    assert F.cross_entropy(x, t, reduction="sum").item() == 0
    np.testing.assert_array_equal(F.cross_entropy(x, t, reduction="none").numpy(), 0)
    assert np.isnan(F.nll_loss(x, t).item())


def test_cross_entropy_shapes_1d_and_kdim(backend):
    rng = np.random.default_rng(6)
    v = rng.standard_normal(5)
    got = F.cross_entropy(rtx.tensor(v, dtype=rtx.float64), np.array(3))
    assert got.shape == ()
    np.testing.assert_allclose(got.item(), _np_ce_rows(v[None], np.array([3]))[0][0])
    a = rng.standard_normal((2, 4, 3, 5))  # [N, C, d1, d2]
    t = rng.integers(0, 4, (2, 3, 5))
    t[0, 1, 2] = -100
    x = rtx.tensor(a, dtype=rtx.float64, requires_grad=True)
    none = F.cross_entropy(x, t, reduction="none")
    assert none.shape == (2, 3, 5)
    rows, wr = _np_ce_rows(np.moveaxis(a, 1, -1).reshape(-1, 4), t.reshape(-1))
    np.testing.assert_allclose(none.numpy(), rows.reshape(2, 3, 5), rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(x, t).item(), rows.sum() / wr.sum(), rtol=1e-12)
    assert gradcheck(lambda x: F.cross_entropy(x, t), (x,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_loss_gradchecks(backend, reduction):
    rng = np.random.default_rng(7)
    x = rtx.tensor(rng.standard_normal((5, 4)), dtype=rtx.float64, requires_grad=True)
    t = np.array([3, -100, 0, 2, 1])
    w = rtx.tensor(rng.uniform(0.5, 2, 4), dtype=rtx.float64)
    assert gradcheck(lambda x: F.cross_entropy(x, t, reduction=reduction), (x,))
    assert gradcheck(lambda x: F.cross_entropy(x, t, weight=w, reduction=reduction), (x,))
    assert gradcheck(lambda x: F.nll_loss(x, t, weight=w, reduction=reduction), (x,))
    assert gradcheck(lambda x: F.cross_entropy(x, [3, 5, 0, 2, 1], ignore_index=5,
                                               reduction=reduction), (x,))
    y = rtx.tensor(rng.standard_normal((5, 4)), dtype=rtx.float64, requires_grad=True)
    assert gradcheck(lambda x, y: F.mse_loss(x, y, reduction=reduction), (x, y))
    assert gradcheck(lambda x, y: F.l1_loss(x, y, reduction=reduction), (x, y))


def test_loss_used_twice_sums_gradients():
    x = rtx.randn(3, 4, dtype=rtx.float64, requires_grad=True, seed=8)
    t = [0, 1, 2]
    (F.cross_entropy(x, t) + 2 * F.cross_entropy(x, t)).backward()
    g = x.grad.numpy().copy()
    x.grad = None
    (3 * F.cross_entropy(x, t)).backward()
    np.testing.assert_allclose(g, x.grad.numpy(), rtol=1e-12)


# ------------------------------------------------------------ l1 / mse
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_l1_mse_values(backend, dtype, reduction):
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((2, 3, 4)).astype(dtype)
    b[0, 0] = a[0, 0]  # |x|'(0) = 0
    x, y = rtx.tensor(a, requires_grad=True), rtx.tensor(b)
    red = {"none": lambda v: v, "sum": np.sum, "mean": np.mean}[reduction]
    np.testing.assert_allclose(F.l1_loss(x, y, reduction=reduction).numpy(),
                               red(np.abs(a - b)), **tol(dtype))
    np.testing.assert_allclose(F.mse_loss(x, y, reduction=reduction).numpy(),
                               red((a - b) ** 2), **tol(dtype))
    F.l1_loss(x, y, reduction="sum").backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.sign(a - b))
    assert x.grad.numpy()[0, 0] == 0
    # a numpy target is accepted and modules match the functions
    np.testing.assert_allclose(nn.MSELoss(reduction)(x, b).numpy(),
                               F.mse_loss(x, y, reduction=reduction).numpy())
    np.testing.assert_allclose(nn.L1Loss(reduction)(x, y).numpy(),
                               F.l1_loss(x, y, reduction=reduction).numpy())


def test_pointwise_loss_broadcast_warns():
    x = rtx.ones(3, 1)
    with pytest.warns(UserWarning, match="different to the input size"):
        v = F.mse_loss(x, rtx.zeros(3))
    assert v.item() == 1.0


# --------------------------------------------------------------- errors
def test_loss_errors_raise_before_anything():
    x = rtx.randn(3, 4, requires_grad=True, seed=0)
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(x, [0, 4, 1])
    with pytest.raises(IndexError, match="Target -1 is out of bounds"):
        F.nll_loss(x, [0, -1, 1])
    with pytest.raises(TypeError, match="integer class indices"):
        F.cross_entropy(x, [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="expected target of shape"):
        F.cross_entropy(x, [0, 1])
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.cross_entropy(x, [0, 1, 2], reduction="avg")
    with pytest.raises(ValueError, match="weight"):
        F.cross_entropy(x, [0, 1, 2], weight=rtx.ones(3))
    with pytest.raises(TypeError, match="floating point"):
        F.cross_entropy(rtx.tensor([[1, 2]]), [0])
    with pytest.raises(ValueError, match="no classes"):
        F.cross_entropy(rtx.zeros(2, 0), [-100, -100])
    with pytest.raises(ValueError):
        F.cross_entropy(rtx.tensor(1.0), 0)
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(x, x, reduction="mea")
    with pytest.raises(ValueError, match="reduction"):
        nn.CrossEntropyLoss(reduction="x")
    assert x.grad is None


def test_loss_modules():
    x = rtx.randn(4, 3, seed=1)
    t = [0, 2, -100, 1]
    w = rtx.tensor([1.0, 2.0, 0.5])
    m = nn.CrossEntropyLoss(weight=w, reduction="sum")
    np.testing.assert_allclose(m(x, t).numpy(), F.cross_entropy(x, t, w, reduction="sum").numpy())
    assert "weight" in m.state_dict()
    np.testing.assert_allclose(nn.NLLLoss()(x, t).numpy(), F.nll_loss(x, t).numpy())


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 6), c=st.integers(1, 5), seed=st.integers(0, 2**31 - 1),
       scale=st.sampled_from([1e-3, 1.0, 30.0]))
def test_cross_entropy_property(n, c, seed, scale):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, c)) * scale
    t = rng.integers(0, c, n)
    rows, _ = _np_ce_rows(a, t)
    x = rtx.tensor(a, dtype=rtx.float64, requires_grad=True)
    loss = F.cross_entropy(x, t, reduction="sum")
    np.testing.assert_allclose(loss.item(), rows.sum(), rtol=1e-10, atol=1e-12)
    loss.backward()
    e = np.exp(a - a.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    p[np.arange(n), t] -= 1
    np.testing.assert_allclose(x.grad.numpy(), p, rtol=1e-10, atol=1e-12)
    assert np.all(rows >= -1e-12)


# ---------------------------------------------------------------- torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_losses_match_torch(reduction):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    rng = np.random.default_rng(10)
    a = rng.standard_normal((6, 5))
    t = np.array([4, 0, -100, 2, 3, 1])
    w = rng.uniform(0.5, 2.0, 5)
    b = rng.standard_normal((6, 5))
    cases = [
        (lambda x: F.cross_entropy(x, t, reduction=reduction),
         lambda x: tf.cross_entropy(x, torch.tensor(t), reduction=reduction)),
        (lambda x: F.cross_entropy(x, t, rtx.tensor(w, dtype=rtx.float64), reduction=reduction),
         lambda x: tf.cross_entropy(x, torch.tensor(t), torch.tensor(w), reduction=reduction)),
        (lambda x: F.nll_loss(x, t, rtx.tensor(w, dtype=rtx.float64), reduction=reduction),
         lambda x: tf.nll_loss(x, torch.tensor(t), torch.tensor(w), reduction=reduction)),
        (lambda x: F.mse_loss(x, rtx.tensor(b, dtype=rtx.float64), reduction=reduction),
         lambda x: tf.mse_loss(x, torch.tensor(b), reduction=reduction)),
        (lambda x: F.l1_loss(x, rtx.tensor(b, dtype=rtx.float64), reduction=reduction),
         lambda x: tf.l1_loss(x, torch.tensor(b), reduction=reduction)),
    ]
    for rf, tfn in cases:
        x = rtx.tensor(a, dtype=rtx.float64, requires_grad=True)
        tx = torch.tensor(a, requires_grad=True)
        r, q = rf(x), tfn(tx)
        np.testing.assert_allclose(r.numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-14)
        r.sum().backward()
        q.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_inplace_change_of_saved_logits_is_caught():
    x = rtx.randn(3, 4, requires_grad=True, seed=0)
    y = x * 1.0
    loss = F.cross_entropy(y, [0, 1, 2])
    with rtx.no_grad():
        y.add_(1.0)  # the fused node saved y's buffer for its backward
    with pytest.raises(RuntimeError, match="modified"):
        loss.backward()


# ------------------------------------------- backend-level validation
def test_loss_backend_ops_validate_targets_first(backend):
    x = backend.from_numpy(np.zeros((3, 4)))
    with pytest.raises(IndexError, match=r"indices\[1\] = 4 is out of range"):
        backend.cross_entropy_forward(x, np.array([0, 4, 1]))
    with pytest.raises(IndexError):
        backend.nll_forward(x, np.array([0, -1, 1]))
    with pytest.raises(ValueError, match="target must have shape"):
        backend.cross_entropy_forward(x, np.array([0, 1]))
    with pytest.raises(ValueError, match=r"\[N, C\]"):
        backend.cross_entropy_forward(backend.from_numpy(np.zeros(3)), np.array([0, 1, 2]))
    _, st = backend.cross_entropy_forward(x, np.array([0, 1, 2]))
    with pytest.raises(IndexError):
        backend.cross_entropy_backward(x, st, np.array([0, 9, 2]),
                                       backend.from_numpy(np.ones(3)))
    with pytest.raises(IndexError):
        backend.nll_backward(backend.from_numpy(np.ones(3)), np.array([0, 9, 2]), (3, 4))
