"""``rtx.head_dot`` below its op_db entry (values, float64 gradchecks, bad inputs:
tests/op_db.py): the kernels' bits at any thread count, their argument checks
before anything is written, and the grad_att reduction in float64."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_both_threads_run, bits

import rtx
from rtx import _kernels


def _run(x, att, g, T):
    N, H, C = x.shape
    out = np.full((N, H), np.nan, x.dtype)
    _kernels.head_dot_rows(x.reshape(N, H * C), att, out, T)
    gx = np.full((N, H * C), np.nan, x.dtype)
    part = np.full((_kernels.head_dot_chunks(N), H * C), np.nan)
    _kernels.head_dot_backward(g, x.reshape(N, H * C), att, gx, True, part, True, T)
    return out, gx, part


def test_bitwise_for_any_thread_count(dtype, force_parallel):
    rng = np.random.default_rng(0)
    N, H, C = 9000, 4, 16                                # five chunks of rows
    x = rng.standard_normal((N, H, C)).astype(dtype)
    att = rng.standard_normal((H, C)).astype(dtype)
    g = rng.standard_normal((N, H)).astype(dtype)
    ref = _run(x, att, g, 1)
    np.testing.assert_allclose(ref[0], (x * att).sum(-1), rtol=1e-5 if dtype == np.float32
                               else 1e-12, atol=1e-5 if dtype == np.float32 else 1e-12)
    np.testing.assert_array_equal(ref[1].reshape(N, H, C), g[:, :, None] * att)
    want_att = (g.astype(np.float64)[:, :, None] * x.astype(np.float64)).sum(0)
    np.testing.assert_allclose(ref[2].sum(0).reshape(H, C), want_att, rtol=1e-10, atol=1e-9)
    for T in (2, 3, 4):
        for a, b in zip(_run(x, att, g, T), ref, strict=True):
            np.testing.assert_array_equal(bits(a), bits(b))
    if _kernels.openmp_enabled():
        out = np.empty((N, H), dtype)
        assert_both_threads_run(lambda: _kernels.head_dot_rows(x.reshape(N, -1), att, out, 2))


def _dot_order(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """_common.pxi's _dot over the last axis: eight lane sums (lane l: j = l, l + 8,
    ...), added ((0+1)+(2+3))+((4+5)+(6+7)), then the tail in order."""
    n = a.shape[-1]
    m = n - n % 8
    p = np.zeros(a.shape[:-1] + (8,), a.dtype)
    for j in range(0, m, 8):
        p = p + a[..., j:j + 8] * b[..., j:j + 8]
    s = ((p[..., 0] + p[..., 1]) + (p[..., 2] + p[..., 3])) + \
        ((p[..., 4] + p[..., 5]) + (p[..., 6] + p[..., 7]))
    for j in range(m, n):
        s = s + a[..., j] * b[..., j]
    return s


@pytest.mark.valgrind
@pytest.mark.parametrize("H, C", [(4, 16), (3, 16), (1, 32), (2, 48), (2, 8), (3, 5), (1, 1)])
def test_bits_of_each_loop(H, C, dtype, force_parallel):
    """Each head's dot in _dot's order, grad_x one product per value and grad_att's
    chunk sums in increasing row order, bit for bit, on every loop the kernels
    pick: heads of 16k channels (two blocks of 16 at a time, a lone last block
    when the blocks are odd: H=3, C=16), 8k channels (four heads' dots at once)
    and the rest."""
    rng = np.random.default_rng(H * 100 + C)
    N = 5000                                             # three chunks, the last short
    x = rng.standard_normal((N, H, C)).astype(dtype)
    att = rng.standard_normal((H, C)).astype(dtype)
    g = rng.standard_normal((N, H)).astype(dtype)
    for T in (1, 2):
        out, gx, part = _run(x, att, g, T)
        np.testing.assert_array_equal(bits(out), bits(_dot_order(x, att)))
        np.testing.assert_array_equal(bits(gx.reshape(N, H, C)), bits(g[:, :, None] * att))
        prod = g.astype(np.float64)[:, :, None] * x.astype(np.float64)
        rows = 2048                                      # HEAD_DOT_CHUNK_ROWS
        assert _kernels.head_dot_chunks(N) == -(-N // rows)
        want = np.stack([np.cumsum(prod[c:c + rows], axis=0)[-1].reshape(H * C)
                         for c in range(0, N, rows)])   # cumsum: in row order
        np.testing.assert_array_equal(bits(part), bits(want))


def test_grad_att_is_the_same_through_the_tape_at_any_thread_count(force_parallel):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5000, 2, 8)).astype(np.float32)
    att = rng.standard_normal((2, 8)).astype(np.float32)
    grads = []
    old = rtx.get_num_threads()
    for T in (1, 2):
        rtx.set_num_threads(T)
        try:
            a = rtx.tensor(att, requires_grad=True)
            t = rtx.tensor(x, requires_grad=True)
            (rtx.head_dot(t, a) * rtx.tensor(x[:, :, 0])).sum().backward()
            grads.append((a.grad.numpy(), t.grad.numpy()))
        finally:
            rtx.set_num_threads(old)
    for u, v in zip(*grads, strict=True):
        np.testing.assert_array_equal(bits(u), bits(v))


def test_kernels_refuse_bad_arguments_before_writing():
    x, att = np.ones((3, 6)), np.ones((2, 3))
    out = np.full((3, 2), 7.0)
    for bad_x, bad_att, bad_out in ((np.ones((3, 5)), att, out), (x, np.ones((3, 2)), out),
                                    (x, att, np.full((2, 2), 7.0)),
                                    (x, att, np.full((3, 3), 7.0))):
        with pytest.raises(ValueError, match="head_dot_rows"):
            _kernels.head_dot_rows(bad_x, bad_att, bad_out, 1)
    assert (out == 7).all()
    gx = np.full((3, 6), 7.0)
    part = np.full((1, 6), 7.0)
    g = np.ones((3, 2))
    for args in ((np.ones((3, 3)), x, att, gx, True, part, True),
                 (g, x, att, np.full((3, 5), 7.0), True, part, True),
                 (g, x, att, gx, True, np.full((2, 6), 7.0), True),
                 (g, np.ones((4, 6)), att, gx, True, part, True)):
        with pytest.raises(ValueError, match="head_dot_backward"):
            _kernels.head_dot_backward(*args, 1)
    assert (gx == 7).all() and (part == 7).all()
    with pytest.raises(ValueError):                      # float32 grad, float64 x
        _kernels.head_dot_backward(np.ones((3, 2), np.float32), x, att, gx, True, part, True, 1)


def test_empty_inputs():
    out = rtx.head_dot(rtx.zeros(0, 2, 3), rtx.zeros(2, 3))
    assert out.shape == (0, 2)
    a = rtx.zeros(2, 3, requires_grad=True)
    rtx.head_dot(rtx.zeros(0, 2, 3), a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros((2, 3)))
    z = rtx.head_dot(rtx.ones(4, 2, 0), rtx.ones(2, 0))
    np.testing.assert_array_equal(z.numpy(), np.zeros((4, 2)))
