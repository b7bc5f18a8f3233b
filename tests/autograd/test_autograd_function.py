"""``rtx.autograd.Function`` (custom gradients) and the gradient checkers
themselves (``gradcheck`` / ``check_adjoint`` must catch wrong gradients), on
every backend configuration."""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
import pytest

import rtx
from rtx.autograd import Function, GradcheckError, check_adjoint, gradcheck

pytestmark = pytest.mark.usefixtures("backend")


def rnd(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1.5, 1.5, size=shape)


def leaf(a):
    return rtx.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g


class WrongCube(Cube):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g * 1.01  # 1% off


class ScaledMatmul(Function):
    """out = s * (a @ b) with a non-tensor argument ``s``; saves an output."""

    @staticmethod
    def forward(ctx, a, s, b):
        out = (a @ b) * s
        ctx.s = s
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        assert out.grad_fn is None and not out.requires_grad  # saved: detached
        ga = (g @ b.T) * ctx.s if ctx.needs_input_grad[0] else None
        gb = (a.T @ g) * ctx.s if ctx.needs_input_grad[2] else None
        return ga, None, gb


class SplitMinMax(Function):
    """Two outputs plus a non-differentiable integer one."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        idx = x.argmax(0)
        ctx.mark_non_differentiable(idx)
        return x.exp(), x * 2, idx

    @staticmethod
    def backward(ctx, g_exp, g_double, g_idx):
        (x,) = ctx.saved_tensors
        return g_exp * x.exp() + g_double * 2


def test_custom_function_gradcheck():
    x = leaf(rnd((3, 2), 1))
    assert gradcheck(Cube.apply, (x,))
    y = Cube.apply(x)
    assert y.grad_fn is not None and "Cube" in repr(y.grad_fn)
    np.testing.assert_allclose(y.numpy(), x.numpy() ** 3, rtol=1e-15)


def test_custom_function_composes_with_builtin_ops_and_fan_out():
    x = leaf(rnd((4,), 2))
    assert gradcheck(lambda t: Cube.apply(t.tanh()) * t + Cube.apply(t), (x,))


def test_needs_input_grad_and_non_tensor_args():
    a, b = leaf(rnd((2, 3), 3)), leaf(rnd((3, 4), 4))
    assert gradcheck(lambda a, b: ScaledMatmul.apply(a, 0.5, b), (a, b))
    seen = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, p, q):
            seen["needs"] = ctx.needs_input_grad
            return p * q

        @staticmethod
        def backward(ctx, g):
            return g, None

    c = rtx.tensor(rnd((2, 3), 5))
    Probe.apply(a, c).sum().backward()
    assert seen["needs"] == (True, False)
    np.testing.assert_array_equal(a.grad.numpy(), np.ones((2, 3)))


def test_multiple_outputs_and_non_differentiable_output():
    x = leaf(rnd((3, 2), 6))
    e, d, idx = SplitMinMax.apply(x)
    assert not idx.requires_grad and idx.grad_fn is None
    assert e.grad_fn is d.grad_fn is not None
    assert gradcheck(lambda t: SplitMinMax.apply(t)[:2], (x,))
    # only one output used: the other's gradient is materialised as zeros
    assert gradcheck(lambda t: SplitMinMax.apply(t)[1] * 3, (x,))
    (d * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 2), 6.0))


def test_function_under_no_grad_records_nothing():
    x = leaf(rnd((2,), 7))
    with rtx.no_grad():
        y = Cube.apply(x)
    assert y.grad_fn is None and not y.requires_grad


def test_saved_output_makes_no_reference_cycle():
    x, w = leaf(rnd((3, 3), 8)), leaf(rnd((3, 3), 9))
    gc.collect()
    gc.disable()
    try:
        y = ScaledMatmul.apply(x, 2.0, w)  # saves its own output
        node = weakref.ref(y.grad_fn)
        out = weakref.ref(y)
        del y
        assert out() is None and node() is None
    finally:
        gc.enable()


def test_function_backward_errors():
    class TooMany(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    class BadShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.reshape(-1)[:1]

    class NotATensor(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return 1.0

    x = leaf(rnd((2, 2), 10))
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        TooMany.apply(x).sum().backward()
    with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
        BadShape.apply(x).sum().backward()
    with pytest.raises(TypeError, match="expected a Tensor or None"):
        NotATensor.apply(x).sum().backward()
    with pytest.raises(TypeError, match="tensors or None"):
        Cube.forward(rtx.autograd.FunctionCtx(), 3.0)


def test_function_gradient_may_be_broadcast_shaped():
    class AddRow(Function):
        @staticmethod
        def forward(ctx, x, b):
            return x + b

        @staticmethod
        def backward(ctx, g):
            return g, g  # b's gradient has x's shape: summed back like PyTorch

    x, b = leaf(rnd((3, 2), 11)), leaf(rnd((2,), 12))
    assert gradcheck(AddRow.apply, (x, b))


# --------------------------------------------------------- gradcheck itself
def test_gradcheck_catches_a_wrong_gradient_and_names_the_input():
    a, x = leaf(rnd((2,), 13)), leaf(rnd((2, 3), 14))
    pattern = r"(?s)input 1 .*Worst.*input 1 element \(\d, \d\)"
    with pytest.raises(GradcheckError, match=pattern) as ei:
        gradcheck(lambda a, x: a.sum() * WrongCube.apply(x), (a, x))
    assert "analytical" in str(ei.value) and "numerical" in str(ei.value)
    assert gradcheck(lambda a, x: a.sum() * WrongCube.apply(x), (a, x),
                     raise_exception=False) is False


def test_gradcheck_fast_mode_catches_a_wrong_gradient():
    x = leaf(rnd((4, 3), 15))
    assert gradcheck(Cube.apply, (x,), fast_mode=True)
    with pytest.raises(GradcheckError, match="input 0"):
        gradcheck(WrongCube.apply, (x,), fast_mode=True)


def test_gradcheck_catches_a_missing_fan_out_path():
    class DropsHalf(Function):  # the bug class this project's tape must never have
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g * 0.0 + 1.0 * g * 0.0 + g * 1.0  # d(x*x)/dx is 2x, not 1

    with pytest.raises(GradcheckError):
        gradcheck(DropsHalf.apply, (leaf(rnd((3,), 16)),))


def test_gradcheck_detects_nondeterministic_backward():
    rng = np.random.default_rng(0)

    class Noisy(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2 + rtx.tensor(rng.normal(size=g.shape) * 1e-12)

    with pytest.raises(GradcheckError, match="not deterministic"):
        gradcheck(Noisy.apply, (leaf(rnd((3,), 17)),))
    assert gradcheck(Noisy.apply, (leaf(rnd((3,), 17)),), nondet_tol=1e-9)


def test_gradcheck_warns_on_float32_and_needs_a_grad_input():
    x32 = rtx.tensor(rnd((3,), 18).astype(np.float32), requires_grad=True)
    with pytest.warns(UserWarning, match="not a double precision"):
        gradcheck(lambda t: t * 2, (x32,), atol=1e-2, rtol=1e-2)
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradcheck(lambda t: t * 2, (rtx.tensor(rnd((3,), 19)),))


def test_gradcheck_leaves_the_inputs_alone():
    x = leaf(rnd((3,), 20))
    before = x.numpy().copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gradcheck(lambda t: (t * t).sum(), (x,))
    assert x.grad is None
    np.testing.assert_array_equal(x.numpy(), before)


def test_gradcheck_with_non_tensor_and_constant_inputs():
    x = leaf(rnd((2, 2), 21))
    c = rtx.tensor(rnd((2, 2), 22))
    assert gradcheck(lambda t, k, s: (t * k) ** s, (x, c, 2))


def test_check_adjoint_accepts_adjoints_and_rejects_non_adjoints():
    idx = np.array([1, 1, 0, 3])
    assert check_adjoint(lambda x: x.T, lambda y: y.T, (2, 3), (3, 2))
    w = rtx.tensor(rnd((3, 4), 23))
    assert check_adjoint(lambda x: x @ w, lambda y: y @ w.T, (2, 3), (2, 4))
    with pytest.raises(GradcheckError, match="<f\\(x\\), y>"):
        check_adjoint(lambda x: rtx.index_select(x, idx),
                      lambda y: rtx.index_add(y, idx[::-1].copy(), 4), (4, 2), (4, 2))
    with pytest.raises(GradcheckError, match="shape"):
        check_adjoint(lambda x: x, lambda y: y, (2, 3), (3, 2))


def test_set_materialize_grads_false_passes_none():
    seen = []

    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g2, g3):
            seen.append((g2 is None, g3 is None))
            return (g2 * 2 if g2 is not None else 0) + (g3 * 3 if g3 is not None else 0)

    x = leaf(rnd((2,), 24))
    Two.apply(x)[1].sum().backward()
    assert seen == [(True, False)]
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_function_returning_saved_state_as_gradient_is_not_aliased():
    class Scale(Function):  # y = c * x with the constant c saved; dy/dx = c
        @staticmethod
        def forward(ctx, x, c):
            ctx.save_for_backward(c)
            return x * c

        @staticmethod
        def backward(ctx, g):
            (c,) = ctx.saved_tensors
            return c, None  # the saved tensor itself (valid since g is all ones here)

    x = leaf([1.0, 2.0])
    c = rtx.tensor(np.array([3.0, 4.0]))
    y = Scale.apply(x, c).sum()
    y.backward(retain_graph=True)
    with rtx.no_grad():
        x.grad.mul_(0.0)  # must not zero the saved c
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(c.numpy(), [3.0, 4.0])
