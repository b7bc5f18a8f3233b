"""Finite-difference gradchecks (float64) of every differentiable op, on every
backend configuration (the ``backend`` fixture: cpu and minimal).

The unary / binary / reduction tables come from ``tests/op_db.py``."""

from __future__ import annotations

import numpy as np
import op_db
import pytest

import rtx
from rtx.autograd import gradcheck

pytestmark = pytest.mark.usefixtures("backend")


def rnd(shape, seed=0, low=-2.0, high=2.0, away=0.0):
    """float64 values in [low, high), at least ``away`` from 0 (avoids kinks)."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(low, high, size=shape)
    if away:
        a = np.where(np.abs(a) < away, np.copysign(away, a) + a, a)
    return a


def leaf(a):
    return rtx.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def distinct(shape, seed=0):
    """Values with no ties (so max/min/maximum have a unique winner)."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.37 - n * 0.15).reshape(shape).astype(np.float64)


# ------------------------------------------------------------------- matmul
@pytest.mark.parametrize(
    "sa,sb",
    [
        ((3, 4), (4, 5)),          # 2-D
        ((2, 3, 4), (2, 4, 5)),    # batched
        ((2, 1, 3, 4), (3, 4, 2)),  # broadcast batch dims both ways
        ((3, 4), (2, 4, 5)),       # 2-D @ batched
        ((2, 3, 4), (4, 2)),       # batched @ 2-D
        ((4,), (4, 3)),            # 1-D @ 2-D
        ((3, 4), (4,)),            # 2-D @ 1-D
        ((4,), (4,)),              # dot
        ((4,), (2, 4, 3)),         # 1-D @ batched
    ],
)
def test_matmul(sa, sb):
    a, b = leaf(rnd(sa, 1)), leaf(rnd(sb, 2))
    assert gradcheck(lambda x, y: x @ y, (a, b))


def test_matmul_one_side_needs_grad():
    a = leaf(rnd((3, 4), 1))
    b = rtx.tensor(rnd((4, 2), 2))
    assert gradcheck(lambda x: x @ b, (a,))
    assert gradcheck(lambda y: b.T @ y, (leaf(rnd((4, 5), 3)),))


# -------------------------------------------------------------- elementwise
UNARY = {op.name: (op.call, op.grad_domain) for op in op_db.gradcheck_ops("unary")}
for _op in op_db.gradcheck_ops("unary") + op_db.gradcheck_ops("binary"):
    UNARY.update(_op.grad_variants)   # compositions exercising the op's rule (t ** 2, ...)


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name):
    f, kw = UNARY[name]
    assert gradcheck(f, (leaf(rnd((3, 4), 3, **kw)),))


# grad_domain None: tie-free samples (maximum/minimum have a kink at a == b)
BINARY = {op.name: (op.call, op.grad_domain) for op in op_db.gradcheck_ops("binary")}
BSHAPES = op_db.GRAD_BROADCAST_SHAPES


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("sa,sb", BSHAPES)
def test_binary_broadcasting(name, sa, sb):
    f, kw = BINARY[name]
    if kw is None:  # no ties between a and b
        a, b = distinct(sa, 4), distinct(sb, 5) + 0.11
    else:
        a, b = rnd(sa, 4, **kw), rnd(sb, 5, **kw)
    assert gradcheck(f, (leaf(a), leaf(b)))


SCALAR_CASES = {
    f"{op.name}-{side}": (lambda t, op=op: op.call(t, op.scalar)) if side == "right" else
                         (lambda t, op=op: op.call(op.scalar, t))
    for op in op_db.gradcheck_ops("binary") if op.scalar is not None
    for side in ("right", "left")
}


@pytest.mark.parametrize("f", list(SCALAR_CASES.values()), ids=list(SCALAR_CASES))
def test_binary_with_python_scalars(f):
    assert gradcheck(f, (leaf(rnd((2, 3), 6, away=0.4)),))


def test_one_operand_needs_grad():
    a = leaf(rnd((3, 4), 1, away=0.3))
    b = rtx.tensor(rnd((4,), 2, away=0.3))
    for f in (lambda x: x * b, lambda x: b / x, lambda x: x / b, lambda x: b - x,
              lambda x: rtx.maximum(x, b + 0.01), lambda x: (b + 2.5) ** x):
        assert gradcheck(f, (a,))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_softmax(dim):
    x = leaf(rnd((2, 3, 4), 7))
    assert gradcheck(lambda t: rtx.softmax(t, dim) * rtx.tensor(rnd((2, 3, 4), 8)), (x,))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_log_softmax(dim):
    x = leaf(rnd((2, 3, 4), 9))
    assert gradcheck(lambda t: rtx.log_softmax(t, dim) * rtx.tensor(rnd((2, 3, 4), 10)), (x,))


def test_softmax_of_1d_and_sum_is_flat():
    x = leaf(rnd((5,), 11))
    assert gradcheck(lambda t: t.softmax(0), (x,))
    # sum(softmax) == 1, so its gradient is ~0 everywhere
    y = x.softmax(0).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 0, atol=1e-15)


def test_where():
    cond = rtx.tensor(np.array([[True, False, True, False]] * 3))
    a, b = leaf(rnd((3, 4), 12)), leaf(rnd((4,), 13))
    assert gradcheck(lambda x, y: rtx.where(cond, x, y), (a, b))
    assert gradcheck(lambda x: rtx.where(cond, x, 0.5), (a,))
    assert gradcheck(lambda y: rtx.where(cond, 2.0, y), (b,))


def test_clone_and_casts():
    x = leaf(rnd((3, 2), 14))
    assert gradcheck(lambda t: t.clone() * t, (x,))
    assert gradcheck(lambda t: t.to(rtx.float64).exp(), (x,))
    # float64 -> float32 -> float64: the gradient comes back cast to the leaf's dtype
    y = (x.float() * 2).double().sum()
    y.backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 2), 2.0))


# --------------------------------------------------------------- reductions
@pytest.mark.parametrize("name", [op.name for op in op_db.gradcheck_ops("reduction")])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 2), (2, 0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions(name, dim, keepdim):
    x = leaf(distinct((2, 3, 4), 15))
    assert gradcheck(lambda t: getattr(t, name)(dim, keepdim), (x,))


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_full_and_dim(name):
    x = leaf(distinct((3, 4), 16))
    assert gradcheck(lambda t: getattr(t, name)(), (x,))
    assert gradcheck(lambda t: getattr(t, name)(1).values, (x,))
    assert gradcheck(lambda t: getattr(t, name)(0, keepdim=True).values, (x,))
    assert gradcheck(lambda t: getattr(rtx, name)(t), (x,))


def test_extremum_ties_share_gradient():
    x = leaf([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])
    x.amax(1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0.5, 0.5], [1, 0, 0]])
    y = leaf([4.0, 4.0, 1.0])
    z = leaf([4.0, 2.0, 5.0])
    rtx.maximum(y, z).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [0.5, 1, 0])
    np.testing.assert_array_equal(z.grad.numpy(), [0.5, 0, 1])


# -------------------------------------------------------------------- shape
@pytest.mark.parametrize(
    "f",
    [
        lambda t: t.reshape(4, 6),
        lambda t: t.reshape(-1),
        lambda t: t.view(2, 12),
        lambda t: t.flatten(),
        lambda t: t.unsqueeze(1),
        lambda t: t.unsqueeze(-1).squeeze(-1),
        lambda t: t.permute(2, 0, 1),
        lambda t: t.transpose(0, 2),
        lambda t: t.reshape(6, 4).T,
        lambda t: t[:, :1].expand(2, 5, 4),
        lambda t: t[0].broadcast_to((2, 3, 4)),
        lambda t: t.permute(1, 0, 2).reshape(3, 8),  # reshape of a non-contiguous view
    ],
)
def test_shape_ops(f):
    assert gradcheck(f, (leaf(rnd((2, 3, 4), 17)),))


@pytest.mark.parametrize(
    "key",
    [
        (0,),
        (slice(None), 1),
        (slice(1, None), slice(None, None, -1)),
        (Ellipsis, 2),
        (slice(None), None, slice(0, 3, 2)),
        (-1, slice(-3, None)),
        (np.array([0, 2, 2, 1, 0]),),                        # advanced, repeated
        (slice(None), np.array([3, 3, 0])),                  # advanced in a later dim
        (np.array([1, 1, 0]), np.array([2, 2, 3])),          # paired advanced, repeated pairs
        (np.array([[True, False, True, True], [False, False, True, False],
                   [True, True, True, False]]),),             # boolean mask
        (np.array([2, 0]), slice(1, 3)),
    ],
)
def test_getitem(key):
    x = leaf(rnd((3, 4), 18))
    assert gradcheck(lambda t: t[key if len(key) > 1 else key[0]], (x,))


def test_getitem_repeated_indices_accumulate():
    x = leaf(np.arange(4.0))
    x[np.array([1, 1, 3, 1])].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 3, 0, 1])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_concat(dim):
    a, b, c = leaf(rnd((2, 3), 19)), leaf(rnd((2, 3), 20)), leaf(rnd((2, 3), 21))
    assert gradcheck(lambda x, y, z: rtx.concat([x, y, z], dim), (a, b, c))
    d = rtx.tensor(rnd((2, 3), 22))  # one input without grad
    assert gradcheck(lambda x: rtx.cat([d, x], dim), (a,))


def test_concat_unequal_sizes():
    a, b = leaf(rnd((2, 3), 23)), leaf(rnd((2, 5), 24))
    assert gradcheck(lambda x, y: rtx.concat([x, y], 1), (a, b))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stack(dim):
    a, b = leaf(rnd((2, 3), 25)), leaf(rnd((2, 3), 26))
    assert gradcheck(lambda x, y: rtx.stack([x, y, x], dim), (a, b))


# -------------------------------------------------------------------- index
def test_index_select_repeated_indices_accumulate():
    idx = np.array([0, 2, 2, 4, 2, 0])
    x = leaf(rnd((6, 3), 27))
    assert gradcheck(lambda t: rtx.index_select(t, idx) * rtx.tensor(rnd((6, 3), 28)), (x,))
    x.grad = None
    rtx.index_select(x, idx).sum().backward()
    g = x.grad.numpy()
    counts = np.bincount(idx, minlength=6)
    np.testing.assert_array_equal(g, np.repeat(counts[:, None], 3, axis=1).astype(float))
    # rows 1, 3 and 5 are never selected: exactly zero gradient, not merely small
    assert np.all(g[[1, 3, 5]] == 0.0)


@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_index_add(idx_dtype):
    idx = np.array([3, 0, 3, 1, 3], dtype=idx_dtype)
    src = leaf(rnd((5, 2), 29))
    assert gradcheck(lambda t: rtx.index_add(t, idx, 5) * rtx.tensor(rnd((5, 2), 30)), (src,))


def test_index_select_add_are_a_transpose_pair():
    idx = np.array([4, 0, 0, 2, 4, 4, 1])
    assert rtx.autograd.check_adjoint(
        lambda x: rtx.index_select(x, idx),
        lambda y: rtx.index_add(y, idx, 5),
        (5, 3), (7, 3),
    )


def test_bias_tiling_by_index_select():
    e, f = 7, 4
    b = leaf(rnd((1, f), 31))
    w = rtx.tensor(rnd((e, f), 32))
    zeros = np.zeros(e, dtype=np.int64)
    assert gradcheck(lambda t: rtx.index_select(t, zeros) * w, (b,))
    (rtx.index_select(b, zeros) * w).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), w.numpy().sum(0, keepdims=True), rtol=1e-14)


def _segment_softmax(x, seg, num_segments):
    """softmax of x's rows within each segment, composed from index ops."""
    with rtx.no_grad():  # the shift is a constant: softmax is invariant to it
        xs = x.numpy()
        m = np.full((num_segments,) + xs.shape[1:], -np.inf)
        np.maximum.at(m, seg, xs)
        shift = rtx.tensor(m)
    z = x - rtx.index_select(shift, seg)
    e = z.exp()
    s = rtx.index_add(e, seg, num_segments)
    return e / rtx.index_select(s, seg)


def test_segment_softmax_from_index_ops():
    g, k, h = 4, 3, 2  # 4 equal-sized segments of 3 rows, 2 heads
    rng = np.random.default_rng(33)
    perm = rng.permutation(g * k)
    seg = (np.arange(g * k) // k)[perm]  # segments interleaved, not contiguous
    x = leaf(rnd((g * k, h), 34))
    weight = rtx.tensor(rnd((g * k, h), 35))
    assert gradcheck(lambda t: _segment_softmax(t, seg, g) * weight, (x,))

    # against dense softmax on the equal-sized groups: values and gradients
    out = _segment_softmax(x, seg, g)
    (out * weight).sum().backward()
    order = np.argsort(seg, kind="stable")
    dense_in = rtx.tensor(x.numpy()[order].reshape(g, k, h), requires_grad=True)
    dense = dense_in.softmax(1)
    np.testing.assert_allclose(out.numpy()[order].reshape(g, k, h), dense.numpy(), rtol=1e-13)
    (dense * rtx.tensor(weight.numpy()[order].reshape(g, k, h))).sum().backward()
    np.testing.assert_allclose(
        x.grad.numpy()[order].reshape(g, k, h), dense_in.grad.numpy(), rtol=1e-12, atol=1e-15
    )


# ------------------------------------------------------------- regressions
def test_l1_loss_with_exact_zero_residual_has_finite_grads():
    pred = leaf([0.5, -1.0, 2.0, 3.0])
    target = rtx.tensor(np.array([1.0, -1.0, 0.0, 3.5]))  # element 1: residual exactly 0
    loss = (pred - target).abs().mean()
    loss.backward()
    g = pred.grad.numpy()
    assert np.all(np.isfinite(g))
    np.testing.assert_array_equal(g, [-0.25, 0.0, 0.25, -0.25])
    # the zero must not poison upstream gradients either
    w = leaf([2.0, 3.0, 4.0, 5.0])
    loss = ((w * pred).sub(target * w).abs()).sum()
    loss.backward()
    assert np.all(np.isfinite(w.grad.numpy()))
    assert np.all(np.isfinite(pred.grad.numpy()))


def test_abs_and_sign_at_zero():
    x = leaf([0.0, -0.0, 1.0])
    (x.abs() + x.sign()).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 1.0])


def test_pow_gradient_wrt_exponent_at_zero_base():
    a = leaf([0.0, 2.0])
    b = leaf([2.0, 3.0])
    (a ** b).sum().backward()
    assert np.all(np.isfinite(b.grad.numpy()))
    np.testing.assert_allclose(b.grad.numpy(), [0.0, 8.0 * np.log(2.0)], rtol=1e-15)
    np.testing.assert_allclose(a.grad.numpy(), [0.0, 12.0], rtol=1e-15)


def test_deep_chain_10000_ops():
    x = leaf([0.5, -0.25])
    h = x
    for i in range(10_000):
        h = h * 1.0001 if i % 2 else h + 0.5
    h.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 5000] * 2, rtol=1e-12)


def test_composite_mlp_gradcheck_fast_and_slow():
    x = leaf(rnd((4, 3), 36))
    w1, w2 = leaf(rnd((3, 5), 37)), leaf(rnd((5, 2), 38))
    b1 = leaf(rnd((5,), 39))

    def f(x, w1, b1, w2):
        h = (x @ w1 + b1).tanh()
        return (h @ w2).log_softmax(-1).mean()

    assert gradcheck(f, (x, w1, b1, w2))
    assert gradcheck(f, (x, w1, b1, w2), fast_mode=True)


# under valgrind too (tools/valgrind_job.py): the segment and message backward kernels
_VALGRIND = {"segment_mean", "segment_max", "segment_softmax", "message_passing"}


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.valgrind) if n in _VALGRIND else n
    for n in op_db.names("sampled", differentiable=True)])
def test_sampled(backend, name):
    """float64 gradchecks of every case of a sampled op (op_db), indices given as
    raw arrays and as checked plans, on every backend."""
    op = op_db.OP_DB[name]
    for s in op.samples(np.random.default_rng(3), np.dtype(np.float64)):
        if not s.grad:
            continue
        for form in ("raw", "plan"):
            args = op_db.sample_args(s, form, requires_grad=True)
            assert gradcheck(lambda *a, s=s: op.call(*a, **s.kwargs), args), (name, s)


def test_every_rule_has_an_op_db_entry():
    """An op rule added without its op_db entry would have no value, gradient or
    fuzz test: fail here instead (and the differentiability flags must agree)."""
    from rtx.autograd.ops import OPS

    missing = sorted(set(OPS) - set(op_db.OP_DB))
    assert not missing, f"add tests/op_db.py entries for {missing}"
    for name, rule in OPS.items():
        assert rule.differentiable == op_db.OP_DB[name].differentiable, name
