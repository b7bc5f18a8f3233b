"""Honest layout semantics: ``contiguous()`` gives a contiguous tensor, ``view()``
never copies (it raises where PyTorch's does), ``reshape`` copies when it must."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
from rtx.autograd import gradcheck


def _arr(shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape)


def test_contiguous_of_a_contiguous_tensor_is_itself(backend, dtype):
    t = rtx.tensor(_arr((3, 4)).astype(dtype))
    assert t.is_contiguous()
    assert t.contiguous() is t


def test_contiguous_after_transpose_copies(backend, dtype):
    a = _arr((3, 4)).astype(dtype)
    tt = rtx.tensor(a).T
    c = tt.contiguous()
    assert c.is_contiguous()
    np.testing.assert_array_equal(c.numpy(), a.T)
    assert c.dtype == tt.dtype and c.shape == (4, 3)
    if tt.is_contiguous():       # a backend without strided views: already contiguous
        assert c is tt
    else:
        assert c is not tt
        assert c.numpy().flags.c_contiguous
        assert not np.shares_memory(c.numpy(), tt.numpy())


def test_contiguous_keeps_the_gradient_path(backend):
    x = rtx.tensor(_arr((3, 4), 1), requires_grad=True)
    w = rtx.tensor(_arr((4, 3), 2))
    assert gradcheck(lambda t: t.T.contiguous() * w, (x,))
    assert gradcheck(lambda t: t.contiguous() * 2.0, (x,))
    y = x.T.contiguous()
    assert y.requires_grad


def test_view_shares_memory_and_sees_writes():
    t = rtx.tensor(np.arange(6.0))
    v = t.view(2, 3)
    assert np.shares_memory(v.numpy(), t.numpy())
    with rtx.no_grad():
        t.add_(1.0)
    np.testing.assert_array_equal(v.numpy(), np.arange(6.0).reshape(2, 3) + 1)


def test_view_of_a_transposed_tensor_raises_and_reshape_copies():
    a = np.arange(12.0).reshape(3, 4)
    tt = rtx.tensor(a).T
    with pytest.raises(ValueError, match="use .reshape"):
        tt.view(12)
    with pytest.raises(ValueError, match="use .reshape"):
        tt.view(-1)
    r = tt.reshape(12)
    np.testing.assert_array_equal(r.numpy(), a.T.reshape(12))
    assert not np.shares_memory(r.numpy(), tt.numpy())
    x = rtx.tensor(a, requires_grad=True)
    with pytest.raises(ValueError):       # refused before anything is recorded
        x.T.view(12)


@pytest.mark.parametrize("shape,ok", [((4, 3, 1), True), ((2, 2, 3), True), ((12,), False),
                                      ((4, 3), True), ((3, 4), False)])
def test_view_of_a_strided_tensor_follows_pytorchs_rule(shape, ok):
    """A column slice (strides (6, 1)): splitting dim 0 or adding unit dims is a
    view in PyTorch too; merging the rows is not."""
    base = rtx.tensor(np.arange(24.0).reshape(4, 6))
    s = base[:, :3]
    assert not s.is_contiguous()
    ref = np.arange(24.0).reshape(4, 6)[:, :3].reshape(shape)
    if ok:
        v = s.view(*shape)
        np.testing.assert_array_equal(v.numpy(), ref)
        assert np.shares_memory(v.numpy(), base.numpy())
        r = s.reshape(*shape)     # reshape takes the view too when there is one
        assert np.shares_memory(r.numpy(), base.numpy())
    else:
        with pytest.raises(ValueError):
            s.view(*shape)
        np.testing.assert_array_equal(s.reshape(*shape).numpy(), ref)


def test_view_on_every_backend_matches_reshape(backend, dtype):
    a = _arr((2, 3, 4)).astype(dtype)
    t = rtx.tensor(a)
    np.testing.assert_array_equal(t.view(6, 4).numpy(), a.reshape(6, 4))
    np.testing.assert_array_equal(t.view(-1).numpy(), a.reshape(-1))
    with pytest.raises(ValueError):
        t.view(5, 5)
    x = rtx.tensor(a.astype(np.float64), requires_grad=True)
    assert gradcheck(lambda u: u.view(4, 6) * 3.0, (x,))


def test_layout_queries_of_the_backends():
    cpu, mini = rtx.CpuBackend(), rtx.MinimalBackend()
    p = cpu.from_numpy(np.arange(6.0).reshape(2, 3))
    assert cpu.is_contiguous(p) and not cpu.is_contiguous(cpu.permute(p, (1, 0)))
    assert cpu.can_view(p, (3, 2)) and not cpu.can_view(cpu.permute(p, (1, 0)), (6,))
    q = mini.from_numpy(np.arange(6.0).reshape(2, 3))
    assert mini.is_contiguous(mini.permute(q, (1, 0)))      # the defaults copy: contiguous
    assert mini.can_view(q, (6,))
