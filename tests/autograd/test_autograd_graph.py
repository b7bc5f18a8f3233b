"""The tape itself: fan-out sums, accumulation, graph release, errors, grad mode,
``rtx.autograd.grad`` / ``backward`` -- on every backend configuration."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import rtx
from rtx.autograd import gradcheck

pytestmark = pytest.mark.usefixtures("backend")


def rnd(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1.5, 1.5, size=shape)


def leaf(a):
    return rtx.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


@pytest.fixture
def no_gc():
    """Objects must be freed by reference counting alone (no cycles to collect)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# ------------------------------------------------------------------ fan-out
def test_fan_out_mul_and_add_sum_all_paths():
    a = np.array([1.5, -2.0, 3.0])
    x = leaf(a)
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 2 * a)
    x.grad = None
    (x + x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    x.grad = None
    (x * x * x + x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * a ** 2 + 1, rtol=1e-15)
    assert gradcheck(lambda t: t * t + t + t * 2.0, (leaf(a),))


def test_shared_weight_in_two_branches():
    x1, x2 = leaf(rnd((3, 4), 1)), leaf(rnd((2, 4), 2))
    w = leaf(rnd((4, 5), 3))

    def f(x1, x2, w):
        return (x1 @ w).tanh().sum() + (x2 @ w).sigmoid().mean()

    assert gradcheck(f, (x1, x2, w))
    f(x1, x2, w).backward()
    # dL/dw is the sum of the two branches' gradients
    g1 = (1 - np.tanh(x1.numpy() @ w.numpy()) ** 2)
    s = 1 / (1 + np.exp(-(x2.numpy() @ w.numpy())))
    g2 = s * (1 - s) / s.size
    np.testing.assert_allclose(w.grad.numpy(), x1.numpy().T @ g1 + x2.numpy().T @ g2,
                               rtol=1e-12)


def test_residual_connection():
    x = leaf(rnd((3, 4), 4))
    w = leaf(rnd((4, 4), 5))
    assert gradcheck(lambda x, w: (x + (x @ w).relu()) * x, (x, w))


def test_qkv_from_one_input():
    x = leaf(rnd((4, 3), 6))
    wq, wk, wv = leaf(rnd((3, 2), 7)), leaf(rnd((3, 2), 8)), leaf(rnd((3, 2), 9))

    def attention(x, wq, wk, wv):
        q, k, v = x @ wq, x @ wk, x @ wv
        a = (q @ k.T / np.sqrt(2.0)).softmax(-1)
        return a @ v + x[:, :2]

    assert gradcheck(attention, (x, wq, wk, wv))


def test_views_and_copies_do_not_split_identity():
    a = rnd((2, 3), 10)
    x = leaf(a)
    y = x.reshape(3, 2)
    z = x.clone()
    (y.reshape(2, 3) * z + x.T.T + z).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * a + 2, rtol=1e-15)


def test_one_output_used_by_many_consumers():
    x = leaf(rnd((5,), 11))
    h = x.exp()  # one intermediate, five consumers

    def f(t):
        h = t.exp()
        return h * h + h.tanh() + h.sum() + h[1:].sum() + h.reshape(5, 1).squeeze(1)

    assert gradcheck(f, (x,))
    (h * 2 + h * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 5 * np.exp(x.numpy()), rtol=1e-14)


# ------------------------------------------------------------ accumulation
def test_gradients_accumulate_across_backward_calls():
    a = rnd((3,), 12)
    x = leaf(a)
    (x * x).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * a + 3, rtol=1e-15)
    x.grad = None  # what zero_grad(set_to_none=True) does
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 3.0])


def test_retain_graph_allows_a_second_backward():
    x = leaf(rnd((3,), 13))
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-15)


def test_second_backward_through_released_graph_raises():
    x = leaf(rnd((3,), 14))
    y = (x.tanh() * 2).sum()
    y.backward()
    before = x.grad.numpy().copy()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), before)  # nothing half-accumulated


def test_backward_on_non_scalar_needs_grad():
    x = leaf(rnd((2, 3), 15))
    y = x * 2
    with pytest.raises(RuntimeError, match="scalar"):
        y.backward()
    y.backward(rtx.tensor(np.ones((2, 3)) * 0.5))
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((2, 3)))
    with pytest.raises(ValueError, match="shape"):
        (x * 2).backward(rtx.tensor(np.ones((3, 2))))


def test_backward_on_tensor_without_grad_raises():
    x = rtx.tensor(rnd((2,), 16))
    with pytest.raises(RuntimeError, match="does not require grad"):
        (x * 2).sum().backward()


def test_backward_on_a_leaf():
    x = leaf([1.0, 2.0])
    x.backward(rtx.tensor(np.array([3.0, 4.0])))
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])


# ------------------------------------------------------- gradient aliasing
def test_leaf_grads_never_alias_each_other():
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (x + y).sum().backward()  # add hands the same gradient to both inputs
    with rtx.no_grad():
        x.grad.mul_(10.0)
    np.testing.assert_array_equal(x.grad.numpy(), [10.0, 10.0])
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 1.0])


def test_leaf_grad_never_aliases_the_users_gradient():
    x = leaf([1.0, 2.0])
    g = rtx.tensor(np.array([5.0, 6.0]))
    (x.reshape(2, 1).reshape(2) + 0.0).backward(g)
    with rtx.no_grad():
        x.grad.zero_()
    np.testing.assert_array_equal(g.numpy(), [5.0, 6.0])


# -------------------------------------------------------------- release
def test_graph_freed_after_backward_when_output_dropped(no_gc):
    x = leaf(rnd((3, 4), 17))
    w = leaf(rnd((4, 2), 18))
    h1 = x @ w
    h2 = h1.tanh()
    h3 = h2 * h1
    loss = h3.sum()
    refs = [weakref.ref(t) for t in (h1, h2, h3)]
    nodes = [weakref.ref(t.grad_fn) for t in (h1, h2, h3, loss)]
    del h1, h2, h3
    loss.backward()
    assert all(n().ctx is None for n in nodes)  # saved state released by backward
    assert all(r() is None for r in refs)  # intermediates were only held by the user
    del loss
    assert all(n() is None for n in nodes), "graph nodes kept alive after the output was dropped"
    assert x.grad is not None and w.grad is not None


def test_graph_freed_without_backward(no_gc):
    x = leaf(rnd((3,), 19))
    y = (x.exp() * x).softmax(0)
    node = weakref.ref(y.grad_fn)
    del y
    assert node() is None


def test_retained_graph_keeps_saved_state_until_dropped(no_gc):
    x = leaf(rnd((3,), 20))
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    node = weakref.ref(y.grad_fn)
    assert y.grad_fn.ctx is not None
    del y
    assert node() is None


def test_leaf_is_not_kept_alive_by_its_grad(no_gc):
    x = leaf(rnd((3,), 21))
    (x * 2).sum().backward()
    r = weakref.ref(x)
    del x
    assert r() is None


# ------------------------------------------------------------ grad mode
def test_no_grad_context_manager():
    x = leaf(rnd((2,), 22))
    with rtx.no_grad():
        y = x * 2
        assert not rtx.is_grad_enabled()
        with rtx.enable_grad():
            z = x * 3
    assert rtx.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None


def test_no_grad_decorator_with_and_without_parentheses():
    x = leaf(rnd((2,), 23))

    @rtx.no_grad()
    def f(t):
        return t * 2

    @rtx.no_grad
    def g(t):
        return t * 2

    @rtx.enable_grad()
    def h(t):
        return t * 2

    assert not f(x).requires_grad
    assert not g(x).requires_grad
    assert rtx.is_grad_enabled()
    with rtx.no_grad():
        assert h(x).requires_grad
        assert not rtx.is_grad_enabled()


def test_no_grad_restores_mode_after_exception():
    with pytest.raises(ValueError), rtx.no_grad():
        raise ValueError("boom")
    assert rtx.is_grad_enabled()


def test_set_grad_enabled():
    x = leaf(rnd((2,), 24))
    with rtx.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad
    rtx.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        rtx.set_grad_enabled(True)
    assert rtx.is_grad_enabled()


def test_untracked_ops_record_nothing():
    x = rtx.tensor(rnd((3,), 25))  # requires_grad False: the untracked path
    for y in (x.exp(), x.abs().sqrt(), x.softmax(0), x.tanh(), x.sigmoid(), x * x,
              x.log_softmax(0), x.relu(), x.elu(), x.amax(0)):
        assert y.grad_fn is None and not y.requires_grad


def test_detach_cuts_the_tape():
    x = leaf([1.0, 2.0])
    y = x * 3
    d = y.detach()
    assert d.grad_fn is None and not d.requires_grad
    (y * d).sum().backward()  # d is a constant
    np.testing.assert_array_equal(x.grad.numpy(), 3 * d.numpy())


def test_requires_grad_only_on_leaves_and_floats():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2).requires_grad_(False)
    with pytest.raises(RuntimeError, match="floating point"):
        rtx.tensor(np.array([1, 2])).requires_grad_()


# ------------------------------------------------------ grad() / backward()
def test_autograd_grad_returns_without_touching_dot_grad():
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    z = leaf([5.0])
    out = (x * y).sum()
    gx, gy = rtx.autograd.grad(out, (x, y), retain_graph=True)
    np.testing.assert_array_equal(gx.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(gy.numpy(), [1.0, 2.0])
    assert x.grad is None and y.grad is None
    with pytest.raises(RuntimeError, match="not used"):
        rtx.autograd.grad(out, (x, z), retain_graph=True)
    gx, gz = rtx.autograd.grad(out, (x, z), allow_unused=True)
    assert gz is None


def test_autograd_grad_of_an_intermediate():
    x = leaf([1.0, 2.0])
    h = x * 3
    out = (h * h).sum()
    (gh,) = rtx.autograd.grad(out, h)
    np.testing.assert_array_equal(gh.numpy(), 2 * h.numpy())


def test_autograd_backward_several_roots():
    x = leaf([1.0, 2.0])
    a, b = x * 2, (x * x).sum()
    rtx.autograd.backward([a, b], [rtx.tensor(np.array([1.0, 1.0])), None])
    np.testing.assert_array_equal(x.grad.numpy(), [2 + 2.0, 2 + 4.0])


def test_non_leaf_requires_grad_true_is_a_no_op():
    x = leaf([1.0])
    y = x * 2
    assert y.requires_grad_() is y and y.requires_grad


def test_tensors_from_another_backend_are_refused(backend):
    other = rtx.CpuBackend() if backend.name == "minimal" else rtx.MinimalBackend()
    x = leaf([1.0, 2.0])
    with rtx.use_backend(other):
        g = rtx.tensor(np.array([1.0, 1.0]))
        z = rtx.tensor(np.array([1.0, 1.0]), requires_grad=True)
    with pytest.raises(TypeError, match="different backend"):
        (x * 2).backward(g)
    with pytest.raises(TypeError, match="different backends"):
        x * z


def test_float32_gradients_match_float64_and_keep_the_leaf_dtype():
    a, w = rnd((3, 4), 26), rnd((4, 2), 27)
    grads = {}
    for dt in (np.float32, np.float64):
        x = rtx.tensor(a.astype(dt), requires_grad=True)
        v = rtx.tensor(w.astype(dt), requires_grad=True)
        ((x @ v).tanh().log_softmax(-1) * 0.5).sum().backward()
        assert x.grad.dtype == dt and v.grad.dtype == dt
        grads[dt] = (x.grad.numpy(), v.grad.numpy())
    for g32, g64 in zip(grads[np.float32], grads[np.float64], strict=True):
        np.testing.assert_allclose(g32, g64, rtol=1e-5, atol=1e-6)


def test_mixed_precision_gradient_is_cast_to_each_leaf():
    x = rtx.tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = leaf([3.0, 4.0])
    z = x * y  # float64 result
    assert z.dtype == np.float64
    z.sum().backward()
    assert x.grad.dtype == np.float32 and y.grad.dtype == np.float64
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])


def test_autograd_grad_runs_only_what_the_inputs_need():
    x = leaf([1.0, 2.0])
    h = x.exp()
    out = (h * h).sum()
    (gh,) = rtx.autograd.grad(out, h)  # does not go below h ...
    np.testing.assert_allclose(gh.numpy(), 2 * np.exp([1.0, 2.0]), rtol=1e-15)
    (h * 3).sum().backward()  # ... so h's own graph is intact
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp([1.0, 2.0]), rtol=1e-15)
    y = leaf([0.5])
    g = x * 2
    gx, gg = rtx.autograd.grad((g * y).sum(), (x, g))  # a target below another
    np.testing.assert_array_equal(gx.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(gg.numpy(), [0.5, 0.5])
    assert y.grad is None


# ------------------------------------------- sums of gradient paths in place
def test_gradient_sums_in_place_never_touch_a_buffer_they_do_not_own(backend):
    """The engine adds a node's later gradient paths into the first one's buffer
    only when it owns that buffer: a user's gradient, a gradient one rule sends
    to two inputs, a broadcast view and a captured gradient stay as they were,
    and every sum is the reference's."""
    rng = np.random.default_rng(20)
    xv = rng.standard_normal((4, 3))
    # a user's gradient, passed through a view rule, into a node with two consumers
    x = rtx.tensor(xv, requires_grad=True)
    y = (x * 2.0).reshape(12)
    g = rtx.tensor(rng.standard_normal(12))
    g0 = g.numpy().copy()
    (y * 1.0 + y.exp()).backward(g)
    np.testing.assert_array_equal(g.numpy(), g0)
    want = 2.0 * (g0 + g0 * np.exp(2.0 * xv.reshape(12))).reshape(4, 3)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)
    # one buffer sent to two inputs (h + h) and a broadcast view (sum's backward)
    x = rtx.tensor(xv, requires_grad=True)
    h = x * 1.0
    ((h + h).sum() + h.sum(0).sum() + (h * h).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2.0 + 1.0 + 2.0 * xv, rtol=1e-12)
    # autograd.grad captures an intermediate's gradient that a rule passes on
    x = rtx.tensor(xv, requires_grad=True)
    h = x * 3.0
    v = h.reshape(12)
    gh, gx = rtx.autograd.grad((v * v).sum() + v.sum(), [h, x])
    np.testing.assert_allclose(gh.numpy(), 6.0 * xv + 1.0, rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), 3.0 * (6.0 * xv + 1.0), rtol=1e-12)
    # ... and passes on to a node whose other path arrives after it
    x = rtx.tensor(xv, requires_grad=True)
    h = x * 3.0
    u = (h * h).sum()                      # runs last in the backward
    v = h.reshape(12)                      # its gradient reaches h first (a view)
    gv, gx = rtx.autograd.grad(u + (v * v).sum() + v.sum(), [v, x])
    np.testing.assert_allclose(gv.numpy(), (6.0 * xv + 1.0).reshape(12), rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), 3.0 * (12.0 * xv + 1.0), rtol=1e-12)


def test_a_node_with_many_consumers_sums_every_path(dtype):
    """A node read by six consumers gets the sum of the six gradients (summed in
    the first one's buffer)."""
    rng = np.random.default_rng(21)
    xv = rng.standard_normal((256, 64)).astype(dtype)
    ws = [rng.standard_normal((64, 64)).astype(dtype) for _ in range(6)]
    x = rtx.tensor(xv, requires_grad=True)
    h = x * 1.0
    loss = (h @ rtx.tensor(ws[0])).sum()
    for w in ws[1:]:
        loss = loss + (h @ rtx.tensor(w)).sum()
    loss.backward()
    paths = [np.ones((256, 64), dtype) @ w.T for w in ws]
    want = paths[-1]          # the engine meets the paths from the last consumer back
    for p in paths[-2::-1]:
        want = want + p
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5 if dtype == np.float32
                               else 1e-12)
