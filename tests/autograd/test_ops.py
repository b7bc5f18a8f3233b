"""The op suite: every op on every backend configuration x dtype against numpy.

The per-op tables (calls, references, sample domains, bad inputs) come from
``tests/op_db.py``; the tests here add the cases an entry cannot express."""

from __future__ import annotations

import numpy as np
import op_db
import pytest
from conftest import tol

import rtx

RNG = np.random.default_rng(0)


def arr(shape, dtype, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape).astype(dtype)


def check(t, ref, dtype=None):
    assert isinstance(t, rtx.Tensor)
    ref = np.asarray(ref)
    got = t.numpy()
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    np.testing.assert_allclose(got, ref, **tol(dtype or ref.dtype), equal_nan=True)


BINARY = {op.name: (op.call, op.ref) for op in op_db.ops("binary")}
SHAPES = op_db.BROADCAST_SHAPES


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_broadcasting(backend, dtype, name, sa, sb):
    a, b = arr(sa, dtype), arr(sb, dtype, 0.5, 2.0)
    f, ref = BINARY[name]
    with np.errstate(invalid="ignore"):   # pow: a negative base to a fractional power is nan
        check(f(rtx.tensor(a), rtx.tensor(b)), ref(a, b))
        check(f(rtx.tensor(b), rtx.tensor(a)), ref(b, a))


@pytest.mark.parametrize("name", [op.name for op in op_db.ops("binary") if op.scalar is not None])
def test_binary_with_python_scalars(backend, dtype, name):
    a = arr((3, 2), dtype, 0.5, 2)
    f, ref = BINARY[name]
    t = rtx.tensor(a)
    check(f(t, 1.5), ref(a, dtype.type(1.5)))
    check(f(2.0, t), ref(dtype.type(2.0), a))


def test_pow(backend, dtype):
    a = arr((4, 3), dtype, 0.5, 2.0)
    b = arr((3,), dtype, -1.0, 2.0)
    t = rtx.tensor(a)
    check(t ** 2, a ** dtype.type(2))
    check(t ** rtx.tensor(b), a ** b)
    check(2.0 ** t, dtype.type(2.0) ** a)
    check(rtx.pow(t, 0.5), np.power(a, dtype.type(0.5)))


@pytest.mark.parametrize("name", op_db.names("unary"))
@pytest.mark.parametrize("shape", op_db.UNARY_SHAPES)
def test_unary(backend, dtype, name, shape):
    op = op_db.OP_DB[name]
    a = arr(shape, dtype, *op.domain)
    check(op.call(rtx.tensor(a)), np.asarray(op.ref(a)).astype(dtype))


def test_sign_zero_and_nan(backend, dtype):
    a = np.array([-2.0, -0.0, 0.0, 3.0, np.nan, np.inf, -np.inf], dtype=dtype)
    s = rtx.sign(rtx.tensor(a)).numpy()
    np.testing.assert_array_equal(s[:4], [-1, 0, 0, 1])
    assert np.isnan(s[4]) and s[5] == 1 and s[6] == -1


def test_nan_inf_propagation(backend, dtype):
    a = np.array([np.nan, np.inf, -np.inf, 1.0], dtype=dtype)
    t = rtx.tensor(a)
    with np.errstate(all="ignore"):
        check(t + 1, a + 1)
        check(t * 0, a * 0)
        check(rtx.exp(t), np.exp(a))
        check(rtx.sigmoid(t)[1:], np.array([1.0, 0.0, 1 / (1 + np.exp(-1.0))], dtype=dtype))
        assert np.isnan(rtx.sigmoid(t).numpy()[0])
        assert np.isnan(t.sum().item())
        assert np.isnan(rtx.softmax(t, 0).numpy()).all()


def test_extreme_sigmoid_is_stable(backend, dtype):
    a = np.array([-1000.0, 1000.0, 0.0], dtype=dtype)
    np.testing.assert_array_equal(rtx.sigmoid(rtx.tensor(a)).numpy(), [0.0, 1.0, 0.5])


CMP = {op.name: (op.call, op.ref) for op in op_db.ops("compare")}


@pytest.mark.parametrize("name", list(CMP))
def test_comparisons(backend, dtype, name):
    a = np.array([[1, 2, 3], [3, 2, 1]], dtype=dtype)
    b = np.array([2, 2, 2], dtype=dtype)
    f, ref = CMP[name]
    r = f(rtx.tensor(a), rtx.tensor(b))
    assert r.dtype == rtx.bool
    np.testing.assert_array_equal(r.numpy(), ref(a, b))
    np.testing.assert_array_equal(f(rtx.tensor(a), 2).numpy(), ref(a, 2))


@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", op_db.names("reduction"))
def test_reductions(backend, dtype, dim, keepdim, op):
    a = arr((3, 4, 5), dtype)
    ref = op_db.OP_DB[op].ref
    got = getattr(rtx.tensor(a), op)(dim, keepdim)
    check(got, ref(a, axis=dim, keepdims=keepdim))


def test_max_with_dim_returns_values_and_indices(backend, dtype):
    a = arr((4, 6), dtype)
    t = rtx.tensor(a)
    values, indices = t.max(1)
    check(values, a.max(1))
    np.testing.assert_array_equal(indices.numpy(), a.argmax(1))
    v, i = rtx.min(t, 0, keepdim=True)
    check(v, a.min(0, keepdims=True))
    np.testing.assert_array_equal(i.numpy(), a.argmin(0)[None])
    check(t.max(), a.max())


@pytest.mark.parametrize("dim", [None, 0, 1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax(backend, dtype, dim, keepdim):
    a = arr((5, 7), dtype)
    got = rtx.argmax(rtx.tensor(a), dim, keepdim)
    ref = np.argmax(a, axis=dim, keepdims=keepdim) if dim is not None else np.argmax(a)
    if dim is None and keepdim:
        ref = np.reshape(ref, (1, 1))
    assert got.dtype == rtx.int64
    np.testing.assert_array_equal(got.numpy(), ref)


def test_reductions_on_empty(backend, dtype):
    a = np.zeros((0, 3), dtype)
    check(rtx.tensor(a).sum(0), a.sum(0))
    check(rtx.tensor(a).sum(), a.sum())
    with pytest.raises(ValueError):
        rtx.tensor(a).max()


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)),
                                   ((1, 3, 4), (2, 4, 2)), ((4,), (4, 3)), ((3, 4), (4,)),
                                   ((4,), (4,)), ((0, 4), (4, 2)), ((3, 0), (0, 2))])
def test_matmul(backend, dtype, sa, sb):
    a, b = arr(sa, dtype), arr(sb, dtype)
    check(rtx.tensor(a) @ rtx.tensor(b), a @ b)
    check(rtx.matmul(a, rtx.tensor(b)), np.matmul(a, b))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("fn", op_db.names("softmax"))
def test_softmax(backend, dtype, dim, fn):
    a = arr((4, 5), dtype, -30, 30)
    a[0, 0] = 1000.0 if dtype == np.float64 else 80.0  # stability: no overflow
    op = op_db.OP_DB[fn]
    ref = op.ref(a, dim)
    got = op.call(rtx.tensor(a), dim)
    check(got, ref.astype(dtype))
    assert np.isfinite(got.numpy()).all()


def test_shape_ops(backend, dtype):
    a = arr((2, 3, 4), dtype)
    t = rtx.tensor(a)
    check(t.reshape(6, 4), a.reshape(6, 4))
    check(t.reshape(-1), a.reshape(-1))
    check(t.transpose(0, 2), a.transpose(2, 1, 0))
    check(t.permute(1, 2, 0), a.transpose(1, 2, 0))
    check(t.T, a.T)
    check(t.unsqueeze(1), a[:, None])
    check(t[:, :1].squeeze(1), a[:, 0])
    check(t[1], a[1])
    check(t[:, ::2, 1:3], a[:, ::2, 1:3])
    check(t[..., -1], a[..., -1])
    check(t[None, 0], a[None, 0])
    check(t[[1, 0, 1]], a[[1, 0, 1]])
    check(t[rtx.tensor([0, 1]), 2], a[[0, 1], 2])
    check(t.expand(5, 2, 3, 4), np.broadcast_to(a, (5, 2, 3, 4)))
    check(t.transpose(0, 1).reshape(3, 8), a.transpose(1, 0, 2).reshape(3, 8))


def test_reshape_errors(backend, dtype):
    t = rtx.tensor(arr((2, 3), dtype))
    with pytest.raises(ValueError):
        t.reshape(4, 2)
    with pytest.raises(ValueError):
        t.reshape(-1, -1)
    with pytest.raises(ValueError):
        t.permute(0, 0)
    with pytest.raises(IndexError):
        t.sum(2)


def test_concat_stack(backend, dtype):
    a, b = arr((2, 3), dtype), arr((4, 3), dtype)
    check(rtx.concat([rtx.tensor(a), rtx.tensor(b)], 0), np.concatenate([a, b], 0))
    check(rtx.cat([rtx.tensor(a.T), rtx.tensor(b.T)], dim=-1), np.concatenate([a.T, b.T], -1))
    check(rtx.stack([rtx.tensor(a), rtx.tensor(a)], 1), np.stack([a, a], 1))
    with pytest.raises(ValueError):
        rtx.concat([rtx.tensor(a), rtx.tensor(b)], 1)
    with pytest.raises(ValueError):
        rtx.stack([rtx.tensor(a), rtx.tensor(b)])
    with pytest.raises(ValueError):
        rtx.concat([])


def test_where(backend, dtype):
    a, b = arr((3, 4), dtype), arr((4,), dtype)
    c = a > 0
    check(rtx.where(rtx.tensor(c), rtx.tensor(a), rtx.tensor(b)), np.where(c, a, b))
    check(rtx.where(rtx.tensor(a) > 0, rtx.tensor(a), 0.0), np.where(c, a, dtype.type(0)))
    with pytest.raises(TypeError):
        rtx.where(rtx.tensor(a), rtx.tensor(a), rtx.tensor(a))


def test_non_contiguous_inputs(backend, dtype):
    a = arr((6, 8), dtype)[::2, 1::3]
    b = arr((8, 6), dtype).T[::2, 1::3]
    assert not a.flags.c_contiguous and not b.flags.c_contiguous
    check(rtx.tensor(a) + rtx.tensor(b), a + b)
    ta = rtx.tensor(arr((6, 8), dtype))
    va = ta.T[1::2]  # a strided view on the CPU backend
    ref = ta.numpy().T[1::2]
    check(va.exp(), np.exp(ref))
    check(va.sum(1), ref.sum(1))
    check(va @ ta[:, :3], ref @ ta.numpy()[:, :3])
    check(va.softmax(0), np.exp(ref) / np.exp(ref).sum(0))
    check(va.reshape(-1), ref.reshape(-1))


def test_dtype_promotion(backend):
    a = rtx.tensor(np.ones(3, np.float32))
    b = rtx.tensor(np.ones(3, np.float64))
    assert (a + b).dtype == rtx.float64
    assert (a + 1.5).dtype == rtx.float32
    assert (rtx.tensor([1, 2]) + 1).dtype == rtx.int64
    assert (rtx.tensor([1, 2]) / 2).dtype == rtx.float32      # PyTorch's rule: ints -> float32
    assert (rtx.tensor([1, 2]) * 1.5).dtype == rtx.float32
    assert (a * rtx.tensor(np.float64(2.0))).dtype == rtx.float32  # a zero-dim float64 is weak


def test_casts(backend, dtype):
    a = arr((3,), dtype)
    t = rtx.tensor(a)
    check(t.double(), a.astype(np.float64))
    check(t.float(), a.astype(np.float32))
    check(t.long(), a.astype(np.int64))
    check(t.int(), a.astype(np.int32))


def test_ops_do_not_modify_inputs(backend, dtype):
    a, b = arr((3, 4), dtype), arr((4,), dtype)
    a0, b0 = a.copy(), b.copy()
    ta, tb = rtx.from_numpy(a), rtx.from_numpy(b)
    for r in (ta + tb, ta * tb, ta.softmax(1), ta.log_softmax(0), ta.exp(), ta @ tb,
              ta.sum(0), ta.relu(), -ta, rtx.index_select(ta, [0, 0]),
              rtx.index_add(ta, [1, 1, 0], 2)):
        assert isinstance(r, rtx.Tensor)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("op,case", [(op, e) for _, op, e in op_db.error_inputs()],
                         ids=[i for i, _, _ in op_db.error_inputs()])
def test_bad_input_raises_and_leaves_inputs(backend, dtype, op, case):
    a = arr((2, 3), dtype)
    a0 = a.copy()
    t = rtx.from_numpy(a)
    with pytest.raises(case.exc, match=case.match):
        case.call(t)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(t.numpy(), a0)


# -------------------------------------------------------- sampled (op_db)
SAMPLED = op_db.names("sampled")


@pytest.mark.parametrize("form", op_db.INDEX_FORMS)
@pytest.mark.parametrize("name", SAMPLED)
def test_sampled_values(backend, dtype, name, form):
    """Every case of a sampled op against its numpy reference, with its indices given
    raw, as an rtx tensor and as a checked plan; the inputs are left untouched."""
    op = op_db.OP_DB[name]
    for s in op.samples(np.random.default_rng(7), dtype):
        args = op_db.sample_args(s, form)
        before = [a.numpy().copy() if isinstance(a, rtx.Tensor) else None for a in args]
        with np.errstate(invalid="ignore"):
            got = op.call(*args, **s.kwargs)
            want = op.ref(*op_db.sample_ref_args(s), **s.kwargs)
        check(got, want, dtype)
        if op.exact:  # a selection (index_select, segment_max / min): exactly the reference
            np.testing.assert_array_equal(got.numpy(), want)
        for a, b in zip(args, before, strict=True):
            if b is not None:
                np.testing.assert_array_equal(a.numpy(), b)


def _inplace_faces():
    from rtx._autodiff.ops import OPS
    out = []
    for name in SAMPLED:
        if name not in OPS:  # an alias's entry (segment_sum: index_add's rule)
            continue
        faces = OPS[name].faces
        if "inplace" in faces:
            method = next(f.partition(":")[2] or name for f in faces if f.startswith("method"))
            out.append((name, method))
    return out


@pytest.mark.parametrize("name,method", _inplace_faces())
def test_sampled_inplace_face(backend, dtype, name, method):
    """A declared in-place face (``Tensor.<method>_``) writes the out-of-place
    result into the tensor (same object, version bumped) and refuses a result of
    a higher kind."""
    op = op_db.OP_DB[name]
    for s in op.samples(np.random.default_rng(8), dtype):
        args = op_db.sample_args(s)
        want = op.ref(*op_db.sample_ref_args(s), **s.kwargs)
        t = args[0]
        v = t._version
        assert getattr(t, method + "_")(*args[1:], **s.kwargs) is t
        check(t, want, dtype)
        assert t._version == v + 1
