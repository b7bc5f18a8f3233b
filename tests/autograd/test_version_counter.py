"""Version counters: in-place writes to a tensor saved for backward are detected
(PyTorch semantics), on every backend."""

from __future__ import annotations

import numpy as np
import op_db
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rtx

MSG = "modified by an inplace operation"


def _leaf(backend, dtype, shape=(2, 3), seed=0):
    return rtx.randn(*shape, dtype=dtype, requires_grad=True, seed=seed)


def test_every_inplace_write_bumps_the_version(backend, dtype):
    t = rtx.zeros(3, dtype=dtype)
    assert t._version == 0
    with rtx.no_grad():
        t.add_(1)
        t.sub_(rtx.ones(3, dtype=dtype))
        t.mul_(2)
        t.div_(2)
        t.copy_(rtx.ones(3, dtype=dtype))
        t.zero_()
        t.fill_(3)
        t += 1
        t -= 1
        t *= 2
        t /= 2
    assert t._version == 11
    np.testing.assert_array_equal(t.numpy(), [3, 3, 3])


def test_modified_under_no_grad_raises_in_backward(backend, dtype):
    x = _leaf(backend, dtype)
    w = rtx.randn(2, 3, dtype=dtype, seed=1)
    y = (x * w).sum()                     # mul saves w (at version 0)
    with rtx.no_grad():
        w.add_(1.0)
    with pytest.raises(RuntimeError, match=MSG) as exc:
        y.backward()
    assert "is at version 1; expected version 0" in str(exc.value)
    assert x.grad is None                 # raised before any .grad was written


def test_augmented_assignment_of_a_saved_tensor_raises(backend, dtype):
    x = _leaf(backend, dtype)
    w = rtx.randn(2, 3, dtype=dtype, seed=1)
    y = (x * w).sum()
    w *= 2                                # w does not require grad: in place, bumped
    with pytest.raises(RuntimeError, match=MSG):
        y.backward()


def test_optimiser_step_between_forward_and_backward_raises(backend, dtype):
    w = _leaf(backend, dtype, (3, 3))
    x = rtx.randn(4, 3, dtype=dtype, seed=2)
    opt = rtx.optim.SGD([w], lr=0.1)
    loss = (x @ w).tanh().sum()           # matmul saves w
    (x @ w).sum().backward()              # some earlier gradient
    opt.step()                            # w.sub_(...) bumps w's version
    with pytest.raises(RuntimeError, match=MSG):
        loss.backward()


def test_write_through_a_view_raises(backend, dtype):
    x = _leaf(backend, dtype)
    w = rtx.randn(2, 3, dtype=dtype, seed=1)
    v = w[0]                              # a view on the CPU backend
    y = (x * w).sum()
    with rtx.no_grad():
        v.mul_(2.0)
    if getattr(backend, "inner", backend).name == "cpu":   # (fusion<cpu> aliases like cpu)
        assert v._vc is w._vc             # views share one counter
        with pytest.raises(RuntimeError, match=MSG):
            y.backward()
    else:                                 # the minimal backend copies: w is unchanged
        y.backward()
        np.testing.assert_allclose(x.grad.numpy(), w.numpy())


def test_saved_output_modified_raises(backend, dtype):
    x = _leaf(backend, dtype)
    y = x.exp()                           # exp saves its output
    z = y.detach()                        # an alias of y's buffer
    s = y.sum()
    with rtx.no_grad():
        z.mul_(0.0)
    with pytest.raises(RuntimeError, match=MSG) as exc:
        s.backward()
    assert "its output" in str(exc.value)


def test_function_saved_tensor_modified_raises(backend, dtype):
    class Cube(rtx.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    x = _leaf(backend, dtype)
    y = Cube.apply(x).sum()
    with rtx.no_grad():
        x.add_(1.0)
    with pytest.raises(RuntimeError, match="its saved tensor 0"):
        y.backward()


def test_unsaved_inputs_may_change(backend, dtype):
    """add saves no input: changing one is fine (PyTorch agrees)."""
    x = _leaf(backend, dtype)
    b = rtx.randn(2, 3, dtype=dtype, seed=1)
    y = (x + b).sum()
    with rtx.no_grad():
        b.add_(1.0)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((2, 3)))


def test_modification_after_backward_is_fine(backend, dtype):
    w = _leaf(backend, dtype, (3, 3))
    x = rtx.randn(4, 3, dtype=dtype, seed=2)
    opt = rtx.optim.Adam([w], lr=0.1)
    for _ in range(3):                    # the ordinary loop never trips the check
        opt.zero_grad()
        (x @ w).tanh().sum().backward()
        opt.step()
    assert w._version == 3


def test_retained_graph_checks_again(backend, dtype):
    x = _leaf(backend, dtype)
    w = rtx.randn(2, 3, dtype=dtype, seed=1)
    y = (x * w).sum()
    y.backward(retain_graph=True)
    with rtx.no_grad():
        w.fill_(0.0)
    with pytest.raises(RuntimeError, match=MSG):
        y.backward()


def test_autograd_grad_checks_versions(backend, dtype):
    x = _leaf(backend, dtype)
    w = rtx.randn(2, 3, dtype=dtype, seed=1)
    y = (x * w).sum()
    with rtx.no_grad():
        w.zero_()
    with pytest.raises(RuntimeError, match=MSG):
        rtx.autograd.grad(y, x)


def test_write_through_numpy_view_is_not_seen():
    """Documented limit: writes rtx does not perform (a numpy view) are invisible."""
    x = rtx.randn(3, requires_grad=True, seed=0)
    w = rtx.randn(3, seed=1)
    y = (x * w).sum()
    w.numpy()[:] = 5.0                    # the user's own numpy view of the buffer
    assert w._version == 0
    y.backward()                          # no error: the gradient uses the new values
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0, 5.0])


@pytest.mark.parametrize("how", ["index_select", "index_add", "getitem"])
def test_index_arrays_are_snapshotted_for_backward(backend, dtype, how):
    """Indices kept for backward are private copies: rewriting the caller's array
    (or index tensor) after the forward cannot change the gradient."""
    x = rtx.randn(4, 2, dtype=dtype, requires_grad=True, seed=0)
    idx = np.array([0, 0, 3])
    if how == "index_select":
        y = rtx.index_select(x, idx)
    elif how == "index_add":
        y = rtx.index_add(x[:3], idx, 4)
    else:
        y = x[idx]
    g = rtx.tensor(np.arange(y.numel(), dtype=dtype).reshape(y.shape))
    idx[:] = [1, 2, 2]                    # the caller reuses its buffer
    y.backward(g)
    want = np.zeros((4, 2), dtype)
    gn = g.numpy()
    if how == "index_add":                # grad of src rows = g[idx] with the old idx
        want[:3] = gn[[0, 0, 3]]
    else:
        np.add.at(want, [0, 0, 3], gn)
    np.testing.assert_array_equal(x.grad.numpy(), want)


def _op_calls():
    a = lambda: rtx.tensor([[0.5, 1.5], [2.0, 0.25]], requires_grad=True)  # noqa: E731
    return {
        "add": lambda: a() + a(), "sub": lambda: a() - a(), "mul": lambda: a() * a(),
        "div": lambda: a() / a(), "pow": lambda: a() ** a(), "pow_scalar": lambda: a() ** 2,
        "rpow_scalar": lambda: 2.0 ** a(), "maximum": lambda: rtx.maximum(a(), a()),
        "minimum": lambda: rtx.minimum(a(), a()), "neg": lambda: -a(), "exp": lambda: a().exp(),
        "log": lambda: a().log(), "sqrt": lambda: a().sqrt(), "abs": lambda: a().abs(),
        "sign": lambda: a().sign(), "relu": lambda: a().relu(),
        "leaky_relu": lambda: a().leaky_relu(0.1), "elu": lambda: a().elu(),
        "sigmoid": lambda: a().sigmoid(), "tanh": lambda: a().tanh(),
        "erf": lambda: a().erf(), "gelu": lambda: a().gelu(),
        "softmax": lambda: a().softmax(-1), "log_softmax": lambda: a().log_softmax(0),
        "where": lambda: rtx.where(rtx.tensor([[True, False], [False, True]]), a(), a()),
        "cast": lambda: a().double(), "copy": lambda: a().clone(), "sum": lambda: a().sum(1),
        "mean": lambda: a().mean(), "max": lambda: a().amax(1), "min": lambda: a().amin(),
        "matmul": lambda: a() @ a(), "reshape": lambda: a().reshape(4),
        "permute": lambda: a().T, "broadcast_to": lambda: a().expand(3, 2, 2),
        "getitem": lambda: a()[0], "getitem_adv": lambda: a()[[0, 0]],
        "concat": lambda: rtx.cat([a(), a()]), "stack": lambda: rtx.stack([a(), a()]),
        "index_select": lambda: rtx.index_select(a(), [1, 0, 1]),
        "index_add": lambda: rtx.index_add(a(), [1, 1], 3),
        "cross_entropy": lambda: rtx.nn.functional.cross_entropy(a(), np.array([1, 0])),
        "nll_loss": lambda: rtx.nn.functional.nll_loss(a(), np.array([1, 0])),
        "segment_softmax": lambda: rtx.segment_softmax(a(), [1, 1], 3),
        "segment_mean": lambda: rtx.segment_mean(a(), [1, 1], 3),
        "segment_max": lambda: rtx.segment_max(a(), [1, 0], 2),
        "message_passing": lambda: rtx.message_passing(
            a(), np.array([[0, 1], [1, 1]]), 2, weight=rtx.tensor([0.5, 2.0], requires_grad=True)),
        "gatv2_scores": lambda: rtx.gatv2_scores(
            a().reshape(2, 1, 2), a().reshape(2, 1, 2), a()[0].reshape(1, 2),
            np.array([[0, 1], [1, 1]]), 0.2, a().reshape(2, 1, 2)),
    }


def _sampled_calls():
    """op_db's sampled ops: their first case, every float input requiring grad."""
    out = {}
    for info in op_db.ops("sampled", differentiable=True):
        s = info.samples(np.random.default_rng(0), np.dtype(np.float64))[0]
        out[info.name] = (lambda info=info, s=s: info.call(
            *op_db.sample_args(s, requires_grad=True), **s.kwargs))
    return out


def _all_calls():
    return {**_op_calls(), **_sampled_calls()}


@pytest.mark.parametrize("name", sorted(_all_calls()))
def test_declared_saves_match_what_the_forward_saves(name, monkeypatch):
    """Each op's static ``saves`` equals what inspecting its ctx finds (the
    declaration is a fast path; a wrong one would miss a modified buffer)."""
    from rtx.autograd.ops import OPS

    call = _all_calls()[name]
    declared = call()._node.versions or []
    for op in OPS.values():
        monkeypatch.setattr(op, "saves", None)
    inspected = call()._node.versions or []
    assert [v[2] for v in declared] == [v[2] for v in inspected]
    # every recorded rule is covered (comparisons are never recorded: they save nothing)
    recorded = {n for n, op in OPS.items() if op.differentiable}
    assert recorded <= {k.split("_scalar")[0].replace("rpow", "pow").replace("_adv", "")
                        for k in _all_calls()}


def test_where_mask_modified_after_forward_raises(backend, dtype):
    x = _leaf(backend, dtype)
    mask = rtx.tensor([[True, False, True], [False, True, False]])
    y = rtx.where(mask, x, 0.0).sum()
    mask.fill_(True)                      # the backward would route g by the new mask
    with pytest.raises(RuntimeError, match=MSG):
        y.backward()


_STEPS = st.lists(st.tuples(st.sampled_from(["add_", "sub_", "mul_", "div_", "fill_", "zero_",
                                             "+=", "-=", "*=", "/=", "copy_"]),
                            st.sampled_from(["base", "row", "flat", "T"]),
                            st.floats(0.5, 2.0)), max_size=12)


@settings(max_examples=60, deadline=None)
@given(steps=_STEPS)
def test_inplace_sequences_on_views_match_numpy_and_count_versions(steps):
    """Random in-place writes through the tensor and its views (CPU backend): the
    values match numpy's, every write bumps the shared counter once, and a
    recorded product that saved the tensor raises iff something was written."""
    base = rtx.tensor(np.arange(1.0, 7.0).reshape(2, 3), dtype=rtx.float64)
    views = {"base": base, "row": base[1], "flat": base.reshape(6), "T": base.T}
    ref = np.arange(1.0, 7.0).reshape(2, 3)
    rviews = {"base": ref, "row": ref[1], "flat": ref.reshape(6), "T": ref.T}
    x = rtx.ones(2, 3, dtype=rtx.float64, requires_grad=True)
    y = (x * base).sum()
    for op, where, v in steps:
        t, r = views[where], rviews[where]
        if op in ("+=", "-=", "*=", "/="):
            ns = {"t": t, "v": v}
            exec(f"t {op} v", ns)
            assert ns["t"] is t
            r[...] = {"+=": r + v, "-=": r - v, "*=": r * v, "/=": r / v}[op]
        elif op == "zero_":
            t.zero_()
            r[...] = 0
        elif op == "copy_":
            t.copy_(rtx.full(t.shape, v, dtype=rtx.float64))
            r[...] = v
        else:
            getattr(t, op)(v)
            r[...] = {"add_": r + v, "sub_": r - v, "mul_": r * v, "div_": r / v,
                      "fill_": v}[op]
    np.testing.assert_allclose(base.numpy(), ref)
    assert all(w._version == len(steps) for w in views.values())
    if steps:
        with pytest.raises(RuntimeError, match=MSG):
            y.backward()
    else:
        y.backward()
        np.testing.assert_array_equal(x.grad.numpy(), ref)


def test_write_through_a_view_of_a_view_raises():
    x = rtx.randn(2, 6, requires_grad=True, seed=0)
    w = rtx.randn(12, seed=1)
    w2 = w.reshape(2, 6)                  # a view
    v = w2[1]                             # a view of the view (numpy: base is w's array)
    y = (x * w2).sum()
    with rtx.no_grad():
        v.add_(1.0)
    assert w._version == w2._version == v._version == 1
    with pytest.raises(RuntimeError, match=MSG):
        y.backward()


def test_function_saved_tensors_alias_the_saved_buffer(backend, dtype):
    class Scale(rtx.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    x = _leaf(backend, dtype)
    y = Scale.apply(x)
    (s,) = y.grad_fn.ctx.saved_tensors
    with rtx.no_grad():
        s.mul_(3.0)                       # through the saved alias: x's counter moves
    assert x._version == 1
    with pytest.raises(RuntimeError, match=MSG):
        y.sum().backward()
