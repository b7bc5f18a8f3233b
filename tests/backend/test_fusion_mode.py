"""``rtx.fusion.enabled()`` as a mode (issue 22 item 3): inside the block the
elementwise ops on tensors made before it (model parameters, inputs) are fused like
those on tensors made inside it; tensors of the Fusion and of its inner backend mix
anywhere; the tape runs each rule on its forward's backend and every leaf gets its
gradient on its own backend.  Every check compares values with the unfused CPU
backend's (the same ops: bitwise for IEEE-exact chains)."""

from __future__ import annotations

import threading
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rtx
from rtx.fusion import Fusion, Lazy

N = 1 << 15          # above Fusion's default min_elements: the ops are recorded
CPU = rtx.CpuBackend


def _leaves(dtype, n=N, k=4, seed=0, rg=True):
    rng = np.random.default_rng(seed)
    return [rtx.tensor(rng.standard_normal(n).astype(dtype), requires_grad=rg)
            for _ in range(k)]


def _chain4(a, b, c, d):
    return rtx.leaky_relu(a + b, 0.1) * c - d


def _chain8(a, b, c, d):
    return rtx.minimum(rtx.relu(_chain4(a, b, c, d)) * 0.5 + a, b)


def _calls(f):
    return f.cache_info()["kernel_calls"]


def _grads(ts):
    out = [t.grad.numpy().copy() for t in ts]
    for t in ts:
        t.grad = None
    return out


@pytest.fixture
def base():
    """The default backend outside the block (the CPU backend, unless RTX_FUSION=1)."""
    b = rtx.get_default_backend()
    return b.inner if isinstance(b, Fusion) else b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chain", [_chain4, _chain8])
def test_inputs_made_before_the_block_are_fused(dtype, chain, base):
    ts = _leaves(dtype, rg=False)
    ref = chain(*ts).numpy().copy()
    with rtx.fusion.enabled() as f:
        n0 = _calls(f)
        y = chain(*ts)
        assert isinstance(y._value, Lazy) and y.backend is f
        assert y._value.pending                    # recorded, not run yet
        got = y.numpy()
        assert _calls(f) == n0 + 1                 # the whole chain: one pass
    np.testing.assert_array_equal(got, ref)
    assert all(t.backend is base for t in ts)       # the inputs did not move


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("backward_inside", [True, False])
def test_gradients_reach_leaves_made_before_on_their_backend(dtype, backward_inside, base):
    ts = _leaves(dtype)
    _chain8(*ts).sum().backward()
    ref = _grads(ts)
    with rtx.fusion.enabled() as f:
        n0 = _calls(f)
        loss = _chain8(*ts).sum()
        if backward_inside:
            loss.backward()
    if not backward_inside:
        loss.backward()
    assert _calls(f) > n0
    for t, r in zip(ts, ref, strict=True):
        assert t.grad.backend is base and not isinstance(t.grad._value, Lazy)
        np.testing.assert_array_equal(t.grad.numpy(), r)


def test_the_block_materialises_its_results_at_the_end():
    a, b = _leaves(np.float32, k=2, rg=False)
    with rtx.fusion.enabled():
        y = rtx.leaky_relu(a * b + 1.0)
        assert y._value.pending
    assert not y._value.pending                    # computed when the block closed
    np.testing.assert_array_equal(y.numpy(), rtx.leaky_relu(a * b + 1.0).numpy())


def test_non_elementwise_ops_stay_on_their_backend(base):
    rng = np.random.default_rng(1)
    x = rtx.tensor(rng.standard_normal((256, 128)).astype(np.float32))
    w = rtx.tensor(rng.standard_normal((128, 128)).astype(np.float32), requires_grad=True)
    bias = rtx.tensor(rng.standard_normal(128).astype(np.float32), requires_grad=True)
    ref_loss = rtx.leaky_relu(x @ w + bias, 0.2).sum()
    ref_loss.backward()
    ref = _grads([w, bias])
    with rtx.fusion.enabled() as f:
        h = x @ w
        assert h.backend is base                   # a matmul is not redirected
        z = rtx.leaky_relu(h + bias, 0.2)
        assert z.backend is f
        loss = z.sum()
        loss.backward()
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-6)
    for t, r in zip([w, bias], ref, strict=True):
        assert t.grad.backend is base
        np.testing.assert_allclose(t.grad.numpy(), r, rtol=1e-5, atol=1e-5)


def test_a_graph_spanning_before_inside_and_after_the_block(base):
    """Nodes recorded on the CPU backend before the block, on the Fusion inside it
    and on either after it: one backward, each rule on its own backend."""
    a, b, c, d = _leaves(np.float64)

    def model(inside):
        u = a * 2.0 + b                            # before: CPU nodes
        with rtx.fusion.enabled() if inside else _null():
            v = rtx.tanh(u * c) - d                # inside: Fusion nodes over CPU leaves
        w = v * a + u                              # after: a Fusion tensor times CPU ones
        return (w * w).sum() + (a * v).sum()      # a * v: the CPU tensor on the left

    model(False).backward()
    ref = _grads([a, b, c, d])
    loss = model(True)
    loss.backward()
    for t, r in zip([a, b, c, d], ref, strict=True):
        assert t.grad.backend is base
        np.testing.assert_allclose(t.grad.numpy(), r, rtol=1e-12, atol=1e-12)


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_the_mode_is_per_thread(base):
    a, b = _leaves(np.float32, k=2, rg=False)
    seen = {}
    entered, release = threading.Event(), threading.Event()

    def other():
        entered.wait()
        seen["backend"] = (a + b).backend          # while the main thread is inside
        release.set()

    th = threading.Thread(target=other)
    th.start()
    with rtx.fusion.enabled() as f:
        entered.set()
        release.wait(30)
        assert (a + b).backend is f
    th.join()
    assert seen["backend"] is base
    assert (a + b).backend is base                 # and after the block


def test_an_error_inside_the_block_leaves_no_mode_behind(base):
    a, b = _leaves(np.float32, k=2, rg=False)
    with pytest.raises(ValueError, match="boom"), rtx.fusion.enabled():
        y = a * b + 1.0
        raise ValueError("boom")
    assert not y._value.pending
    assert (a * b).backend is base and rtx.get_default_backend() is not None
    np.testing.assert_array_equal(y.numpy(), (a * b + 1.0).numpy())


def test_nested_blocks(base):
    a, b = _leaves(np.float32, k=2, rg=False)
    with rtx.fusion.enabled() as f:
        with rtx.fusion.enabled() as g:
            assert g is f and (a + b).backend is f
        assert (a + b).backend is f                # the outer block still fuses
    assert (a + b).backend is base


def test_inplace_updates_and_an_optimiser_step_inside_the_block(base):
    rng = np.random.default_rng(3)
    x = rtx.tensor(rng.standard_normal((512, 64)).astype(np.float32))
    w0 = rng.standard_normal((64, 64)).astype(np.float32)

    def train(inside):
        w = rtx.nn.Parameter(rtx.tensor(w0.copy()))
        opt = rtx.optim.Adam([w], lr=0.01)
        for _ in range(3):
            with rtx.fusion.enabled() if inside else _null():
                opt.zero_grad()
                loss = (rtx.leaky_relu(x @ w, 0.1) * 0.5 - 0.25).abs().mean()
                loss.backward()
                opt.step()
                with rtx.no_grad():
                    w.mul_(rtx.ones(64, 64) * 0.999)   # an in-place update by a Fusion tensor
        return w

    ref, got = train(False), train(True)
    assert got.backend is base and not isinstance(got._value, Lazy)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)


def test_inplace_updates_by_fused_results_of_tensors_made_before(base):
    a, b = _leaves(np.float32, k=2, rg=False)
    idx = np.arange(N) % 7
    want = np.abs(a.numpy() * 2.0 - b.numpy()) ** 1.5
    want_rows = np.zeros(7, np.float32)
    np.add.at(want_rows, idx, want * 0.5)
    t, rows = a.clone(), rtx.zeros(7)
    with rtx.fusion.enabled() as f:
        t.mul_(2.0).sub_(b)
        t.copy_(rtx.abs(t))                # a Fusion result written into t
        t.pow_(1.5)
        half = t * 0.5
        assert half.backend is f
        rows.index_add_(0, idx, half)      # a Fusion source into a tensor made before
    assert t.backend is base and not isinstance(t._value, Lazy)
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(rows.numpy(), want_rows, rtol=1e-4)


def test_a_model_made_before_the_block(base):
    """What users write: a model whose parameters exist, its call wrapped."""
    rng = np.random.default_rng(4)
    rtx.manual_seed(0)
    model = rtx.nn.Sequential(rtx.nn.Linear(32, 64), rtx.nn.LeakyReLU(0.2),
                              rtx.nn.Linear(64, 64), rtx.nn.ELU(), rtx.nn.Linear(64, 4))
    model.to(rtx.float64)
    x = rtx.tensor(rng.standard_normal((2048, 32)))
    y = rtx.tensor(rng.integers(0, 4, 2048))
    params = list(model.parameters())

    rtx.nn.functional.cross_entropy(model(x), y).backward()
    ref = _grads(params)
    with rtx.fusion.enabled() as f:
        n0 = _calls(f)
        out = model(x)
    loss = rtx.nn.functional.cross_entropy(out, y)   # after the block
    loss.backward()
    assert _calls(f) > n0
    for p, r in zip(params, ref, strict=True):
        assert p.grad.backend is base
        np.testing.assert_allclose(p.grad.numpy(), r, rtol=1e-10, atol=1e-12)


def test_sparse_embedding_gradients_inside_the_block(base):
    emb = rtx.nn.Embedding(1000, 64, sparse=True)
    idx = np.random.default_rng(5).integers(0, 1000, 4096)
    (rtx.leaky_relu(emb(idx) * 2.0, 0.2).sum()).backward()
    ref = emb.weight.grad.to_dense().numpy().copy()
    emb.weight.grad = None
    with rtx.fusion.enabled():
        rtx.leaky_relu(emb(idx) * 2.0, 0.2).sum().backward()
    g = emb.weight.grad
    assert g.is_sparse
    np.testing.assert_array_equal(g.to_dense().numpy(), ref)
    assert g.to_dense().backend is base


def test_autograd_grad_root_gradients_and_functions_across_the_pair(base):
    a, b = _leaves(np.float64, k=2)
    with rtx.fusion.enabled():
        y = rtx.exp(a * b) - a
    gy = rtx.tensor(np.linspace(-1, 1, N))          # a CPU tensor for a Fusion output
    ga, gb = rtx.autograd.grad(y, [a, b], gy, retain_graph=True)
    with rtx.no_grad():
        e = np.exp(a.numpy() * b.numpy())
    np.testing.assert_allclose(ga.numpy(), gy.numpy() * (e * b.numpy() - 1), rtol=1e-12)
    np.testing.assert_allclose(gb.numpy(), gy.numpy() * e * a.numpy(), rtol=1e-12)
    assert ga.backend is base and gb.backend is base
    y.backward(gy)
    np.testing.assert_allclose(a.grad.numpy(), ga.numpy(), rtol=1e-12)

    class Square(rtx.autograd.Function):
        @staticmethod
        def forward(ctx, x, z):
            ctx.save_for_backward(x)
            return x * x + z

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2.0 * x, g

    a.grad = b.grad = None
    with rtx.fusion.enabled() as f:
        z = b * 3.0                                 # a Fusion tensor beside a CPU one
        assert z.backend is f
        out = Square.apply(a, z)
        out.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * a.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), np.full(N, 3.0), rtol=1e-12)
    assert rtx.concat([z, a]).shape == (2 * N,)     # concat mixes the pair too


def test_unrelated_backends_still_do_not_mix():
    a = _leaves(np.float64, k=1, rg=False)[0]
    with rtx.use_backend(rtx.MinimalBackend()):
        m = rtx.tensor(np.ones(N))
    with rtx.fusion.enabled():
        with pytest.raises(TypeError, match="different backends"):
            a + m
        with pytest.raises(TypeError, match="different backends"):
            rtx.concat([a, m])


_IEEE = {
    "add": lambda u, v: u + v, "sub": lambda u, v: u - v, "mul": lambda u, v: u * v,
    "maximum": rtx.maximum, "minimum": rtx.minimum,
    "relu": lambda u, v: rtx.relu(u), "lrelu": lambda u, v: rtx.leaky_relu(u, 0.3),
    "neg": lambda u, v: -u, "abs": lambda u, v: rtx.abs(u) * v,
}


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(sorted(_IEEE)), st.integers(0, 3),
                              st.booleans()), min_size=1, max_size=8),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_random_chains_over_inputs_made_before_and_inside_match_unfused(ops, dtype):
    """Each op's second operand is one of four leaves made before the block, or a
    copy of it made inside: values and the gradients bitwise the unfused ones
    (IEEE-exact ops)."""
    host = [np.random.default_rng(i).standard_normal(N).astype(dtype) for i in range(4)]

    def run(fused):
        before = [rtx.tensor(h, requires_grad=True) for h in host]
        with rtx.fusion.enabled() if fused else _null():
            h = before[0] * 1.0
            for name, k, inside in ops:
                v = before[k] * 1.0 if inside else before[k]   # made inside: a Fusion tensor
                h = _IEEE[name](h, v)
            loss = (h * before[3]).sum()
        loss.backward()
        return h.numpy().copy(), [None if t.grad is None else t.grad.numpy().copy()
                                  for t in before]

    (v0, g0), (v1, g1) = run(False), run(True)
    np.testing.assert_array_equal(v1, v0)
    for a, b in zip(g1, g0, strict=True):
        assert (a is None) == (b is None)          # (a leaf the chain never read)
        if a is not None:
            np.testing.assert_array_equal(a, b)


def test_a_shared_gradient_is_copied_in_the_same_pass_and_never_aliased(base):
    """add's backward hands one buffer to both inputs: each leaf made before the block
    gets its own copy, made by the backward's one fused pass."""
    a, b = _leaves(np.float32, k=2)
    with rtx.fusion.enabled() as f:
        y = rtx.leaky_relu(a * b, 0.1)
        z = y + y * 0.0            # (a pending y; the add's gradient goes to y twice)
        loss_in = (z + a).sum()
        n0 = _calls(f)
        loss_in.backward()
        assert _calls(f) - n0 <= 2  # the forward's rest and the backward: no per-leaf pass
    assert a.grad.backend is base and b.grad.backend is base
    ga = a.grad.numpy().copy()
    with rtx.no_grad():
        b.grad.zero_()
    np.testing.assert_array_equal(a.grad.numpy(), ga)     # a's gradient is its own
    c, d, e = _leaves(np.float32, k=3, seed=9)
    with rtx.fusion.enabled() as f:
        loss = (c + d + e).sum()
        n0, out0 = _calls(f), f.stats["outputs"]
        loss.backward()
        # one pass writes the three leaves' gradients, the shared one itself stored by
        # none (not one pass, then copies on the CPU)
        assert (_calls(f) - n0, f.stats["outputs"] - out0) == (1, 3)
    with rtx.no_grad():
        c.grad.mul_(3.0)
    for t, want in ((c, 3.0), (d, 1.0), (e, 1.0)):
        np.testing.assert_array_equal(t.grad.numpy(), np.full(N, want, np.float32))


# ------------------------------------------- in-place writes to what a pending node reads
@pytest.mark.parametrize("write", ["add_", "copy_", "pow_", "mul_op", "sgd", "adam"])
def test_a_write_to_a_tensor_made_before_the_block_finishes_its_pending_readers(write, base):
    # y is pending over x, a tensor of the inner backend; rtx's in-place write to x
    # (x.add_(), an optimiser's step) must not change what y reads: the write hook
    # (rtx._backend_state.before_write) materialises it first
    x0 = np.random.default_rng(3).standard_normal(N).astype(np.float32)
    x = rtx.tensor(x0.copy(), requires_grad=write in ("sgd", "adam"))
    opt = (rtx.optim.SGD([x], lr=0.5) if write == "sgd"
           else rtx.optim.Adam([x], lr=0.5) if write == "adam" else None)
    if opt is not None:
        (x * 3.0).sum().backward()
    with rtx.fusion.enabled():
        y = x * 2.0 + 1.0
        assert y._value.pending
        with rtx.no_grad():
            if write == "add_":
                x.add_(1.0)
            elif write == "copy_":
                x.copy_(np.zeros(N, np.float32))
            elif write == "pow_":
                x.pow_(2.0)
            elif write == "mul_op":
                x *= 4.0
            else:
                opt.step()
        assert not y._value.pending                 # finished before the write
        assert not np.array_equal(x.numpy(), x0)    # (the write happened)
        np.testing.assert_array_equal(y.numpy(), x0 * np.float32(2.0) + np.float32(1.0))
    assert x.backend is base


def test_a_write_before_backward_leaves_the_saved_values_as_they_were(base):
    ts = _leaves(np.float32)
    ref_loss = _chain4(*ts).sum()
    ref_loss.backward()
    ref = _grads(ts)
    with rtx.fusion.enabled():
        loss = _chain4(*ts).sum()      # a + b is saved by the tape, pending
        with rtx.no_grad():
            ts[3].add_(1.0)            # d: not saved, but the pending nodes read a..c
        loss.backward()
    # the pending loss and the leaky_relu's input were materialised before d
    # changed; the loss and the gradients are those of the values at the forward
    assert loss.numpy().tobytes() == ref_loss.numpy().tobytes()
    for g, want in zip(_grads(ts), ref, strict=True):
        np.testing.assert_array_equal(g, want)


# ----------------------------- tape-saved values recomputed in the backward, not stored
def _outputs(f):
    return f.cache_info()["outputs"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chain", [_chain4, _chain8])
def test_values_only_the_tape_holds_are_recomputed_not_stored(dtype, chain, base):
    # a + b and leaky_relu(a + b) are saved for backward (leaky_relu's input,
    # mul's operand), and the leaves are the user's tensors: nothing is stored
    # but the gradients; the backward's pass computes them again in registers
    # (and sums the pending loss)
    ts = _leaves(dtype)
    ref_loss = chain(*ts).sum()
    ref_loss.backward()
    ref = _grads(ts)
    with rtx.fusion.enabled() as f:
        y = chain(*ts)
        o0, n0 = _outputs(f), _calls(f)
        loss = y.sum()                             # a pending total: no pass yet
        assert (_calls(f) - n0, _outputs(f) - o0) == (0, 0)
        assert y._value.pending and loss._value.pending
        del y
        loss.backward()                            # the leaves' home: one flush
        assert (_calls(f) - n0, _outputs(f) - o0) == (1, 4)   # the four gradients
        assert not loss._value.pending
    assert loss.numpy().tobytes() == ref_loss.numpy().tobytes()
    got = _grads(ts)
    for g, want in zip(got, ref, strict=True):
        np.testing.assert_array_equal(g, want)     # the same bits as unfused


def test_a_value_the_user_also_holds_is_stored(base):
    ts = _leaves(np.float32)
    with rtx.fusion.enabled() as f:
        s = ts[0] + ts[1]                          # saved by leaky_relu, held by the user
        z = rtx.leaky_relu(s, 0.1) * ts[2]         # held by its total alone
        zr = weakref.ref(z._value)
        loss = z.sum()
        del z
        o0, n0 = _outputs(f), _calls(f)
        loss.backward()                            # one pass: the loss, s, 3 gradients
        assert (_calls(f) - n0, _outputs(f) - o0) == (1, 4)
        assert not s._value.pending and zr() is None
        y = rtx.leaky_relu(s.detach(), 0.1) * ts[3]   # held by the user
        loss = y.sum()
        loss.backward()                            # one pass: the loss, y, 1 gradient
        assert (_calls(f) - n0, _outputs(f) - o0) == (2, 6)
        assert not y._value.pending


def test_a_value_over_a_temporary_is_stored(base):
    # recomputing a + b from a temporary (the reshape's result, held by nothing
    # else) would keep that buffer alive in its place: it is stored as before, and
    # leaky_relu(a + b) is recomputed from it
    a, b, c = _leaves(np.float32, k=3)
    with rtx.fusion.enabled() as f:
        loss = (rtx.leaky_relu(a.reshape(N // 2, 2).reshape(N) + b, 0.1) * c).sum()
        o0, n0 = _outputs(f), _calls(f)
        f.lower(loss._value)                       # the loss's own pass
        assert (_calls(f) - n0, _outputs(f) - o0) == (1, 1)   # a + b; the product summed
        loss.backward()
    an, bn, cn = (t.numpy() for t in (a, b, c))
    s = an + bn
    np.testing.assert_allclose(a.grad.numpy(), np.where(s > 0, cn, cn * np.float32(0.1)),
                               rtol=1e-6)


def test_saved_marks_count_the_tapes_references():
    ts = _leaves(np.float32, k=2)
    with rtx.fusion.enabled():
        s = ts[0] + ts[1]
        assert s._value.saved == 0                 # add saves nothing
        y = s * s                                  # mul saves both operands
        # ctx.a, ctx.b and the two version entries
        assert s._value.saved == 4
        z = s + 2.0                                # add saves nothing
        z.sum().backward(retain_graph=True)        # (y is not on this graph)
        assert s._value.saved == 4
        y.sum().backward()                         # releases mul's saved state
        assert s._value.saved == 0
        del y, z


def test_a_flush_stores_the_tapes_values_in_its_one_pass(base):
    ts = _leaves(np.float32)
    with rtx.fusion.enabled() as f:
        y = _chain4(*ts)                           # a + b, leaky_relu(a + b) saved
        o0, n0 = _outputs(f), _calls(f)
        f.flush()
        assert (_calls(f) - n0, _outputs(f) - o0) == (1, 3)
        assert not y._value.pending


# ------------------------------------- a loss summed inside the pass that computes it
def _sums(f):
    return f.cache_info()["sums_fused"]


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chain", [_chain4, _chain8])
def test_a_loss_sum_is_fused_into_its_chains_pass_with_the_unfused_bits(reduce, dtype, chain,
                                                                        base):
    ts = _leaves(dtype, n=3 * N + 17)
    ref_loss = getattr(chain(*ts), reduce)()
    ref_loss.backward()
    ref = _grads(ts)
    with rtx.fusion.enabled() as f:
        s0, o0, n0 = _sums(f), _outputs(f), _calls(f)
        loss = getattr(chain(*ts), reduce)()
        assert (_sums(f) - s0, _calls(f) - n0, _outputs(f) - o0) == (0, 0, 0)
        loss.backward()
        # the forward and the backward in one pass: the loss summed, the four
        # gradients stored
        assert (_sums(f) - s0, _calls(f) - n0, _outputs(f) - o0) == (1, 1, 4)
    assert loss.numpy().tobytes() == ref_loss.numpy().tobytes()
    for g, want in zip(_grads(ts), ref, strict=True):
        np.testing.assert_array_equal(g, want)


def test_a_summed_value_read_later_is_computed_with_the_unfused_bits(base):
    ts = _leaves(np.float32, rg=False)
    want_y = _chain4(*ts).numpy()
    with rtx.fusion.enabled() as f:
        y = _chain4(*ts)
        s = y.sum()
        assert y._value.pending                     # not stored by the summing pass
        n0 = _calls(f)
        got_y = y.numpy()                           # one more pass computes it
        assert _calls(f) - n0 == 1
    np.testing.assert_array_equal(got_y, want_y)
    assert s.numpy().tobytes() == np.add.reduce(want_y).tobytes()


def test_a_write_after_the_sum_finishes_the_summed_value_first(base):
    x0 = np.random.default_rng(5).standard_normal(N).astype(np.float32)
    x = rtx.tensor(x0.copy())
    with rtx.fusion.enabled():
        y = x * 2.0 + 1.0
        s = y.sum()
        assert y._value.pending
        with rtx.no_grad():
            x.add_(1.0)                             # the write hook computes y first
        want = x0 * np.float32(2.0) + np.float32(1.0)
        np.testing.assert_array_equal(y.numpy(), want)
        assert s.numpy().tobytes() == np.add.reduce(want).tobytes()


def test_a_summed_value_only_the_tape_holds_is_recomputed_not_stored(base):
    ts = _leaves(np.float32)
    y = _chain4(*ts)
    (y.sum() + (y * ts[0]).sum()).backward()
    ref = _grads(ts)
    with rtx.fusion.enabled() as f:
        y = _chain4(*ts)
        w = y * ts[0]                               # saves y for its backward
        s = y.sum()
        yr = weakref.ref(y._value)
        del y
        o0, n0 = _outputs(f), _calls(f)
        f.lower(w._value)                           # w's pass sums y (same shape)
        assert (_calls(f) - n0, _outputs(f) - o0) == (1, 1)   # w
        assert not s._value.pending
        assert yr() is not None and yr().pending    # the tape's: recomputed by backward
        (s + w.sum()).backward()
    for g, want in zip(_grads(ts), ref, strict=True):
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("kwargs", [dict(dim=0), dict(dim=(0, 1)), dict(keepdim=True)])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_other_sums_are_forwarded(kwargs, reduce, base):
    x = rtx.tensor(np.random.default_rng(6).standard_normal((256, 129)).astype(np.float32))
    want = getattr(x * 3.0 - 1.0, reduce)(**kwargs).numpy()
    with rtx.fusion.enabled() as f:
        s0 = _sums(f)
        got = getattr(x * 3.0 - 1.0, reduce)(**kwargs).numpy()
        assert _sums(f) == s0
    np.testing.assert_array_equal(got, want)


def test_an_inner_backend_with_its_own_sum_keeps_it():
    class PairwiseNot(CPU):                         # a sum in another order
        def sum(self, a, dim=None, keepdim=False):
            return np.asarray(np.cumsum(a.reshape(-1))[-1] if dim is None else a.sum(dim))

    fz = Fusion(PairwiseNot(), min_elements=0)
    x = np.random.default_rng(7).standard_normal(N).astype(np.float32)
    with rtx.use_backend(fz):
        got = (rtx.tensor(x) * 2.0).sum().numpy()
    assert fz.cache_info()["sums_fused"] == 0
    assert got.tobytes() == np.cumsum(x * np.float32(2.0))[-1].tobytes()


def test_a_summing_pass_the_kernel_refuses_falls_back_unfused(monkeypatch, base):
    import rtx.fusion.backend as fusion_backend

    real = fusion_backend.fused_eval

    def no_sums(*args, **kwargs):
        if kwargs.get("sum_out") is not None:
            raise ValueError("fused_eval: refused (injected)")
        return real(*args, **kwargs)

    monkeypatch.setattr(fusion_backend, "fused_eval", no_sums)
    ts = _leaves(np.float32, rg=False)
    want = _chain4(*ts).sum().numpy()
    with rtx.fusion.enabled() as f:
        u0 = f.cache_info()["unfused_fallbacks"]
        got = _chain4(*ts).sum().numpy()
        assert f.cache_info()["unfused_fallbacks"] == u0 + 1
    assert got.tobytes() == want.tobytes()


def test_a_loss_nothing_holds_is_never_computed(base):
    ts = _leaves(np.float32, rg=False)
    with rtx.fusion.enabled() as f:
        n0 = _calls(f)
        _chain4(*ts).sum()                         # dropped at once
        f.flush()
        assert _calls(f) == n0


def test_a_loss_read_before_backward_keeps_the_bits(base):
    ts = _leaves(np.float64)
    ref_loss = _chain8(*ts).mean()
    ref_loss.backward()
    ref = _grads(ts)
    with rtx.fusion.enabled():
        loss = _chain8(*ts).mean()
        got = loss.item()                          # its own pass (and the flush)
        loss.backward()
    assert np.float64(got).tobytes() == ref_loss.numpy().tobytes()
    for g, want in zip(_grads(ts), ref, strict=True):
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("min_elements", [0, None])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_an_expression_that_reads_its_own_total(reduce, min_elements, base):
    # y - y.mean(): the pass over y's shape reads the total, which runs its own
    # pass first (collect); nothing is computed twice and the bits are unfused
    x = rtx.tensor(np.random.default_rng(3).standard_normal(N).astype(np.float32),
                   requires_grad=True)
    y = x * 3.0 + 1.0
    z = y - getattr(y, reduce)()
    want = z.numpy()
    (z * z).sum().backward()
    want_g = x.grad.numpy().copy()
    x.grad = None
    fz = Fusion(base) if min_elements is None else Fusion(base, min_elements=0)
    with rtx.use_backend(fz):
        y = x * 3.0 + 1.0
        z = y - getattr(y, reduce)()
        got = z.numpy()
        (z * z).sum().backward()
    assert fz.cache_info()["unfused_fallbacks"] == 0
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(x.grad.numpy(), want_g)


def test_a_total_whose_operand_was_stored_meanwhile(base):
    x = rtx.tensor(np.random.default_rng(4).standard_normal(N).astype(np.float32))
    want = x.numpy() * np.float32(2.0) - np.float32(0.5)
    with rtx.fusion.enabled() as f:
        y = x * 2.0 - 0.5
        t1, t2 = y.sum(), y.mean()
        n0 = _calls(f)
        y.reshape(N // 2, 2)                       # forwarded: y's pass, summing t1
        assert _calls(f) - n0 == 1
        assert not t1._value.pending and t2._value.pending
        got = t2.item()                            # from the stored y, no pass
        assert _calls(f) - n0 == 1
    assert t1.numpy().tobytes() == np.add.reduce(want).tobytes()
    assert np.float32(got).tobytes() == np.mean(want).tobytes()
