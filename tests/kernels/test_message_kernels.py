"""The message-passing kernels' per-head dot products (``rtx/_message.pxi``).

``sddmm_dot`` and ``message_backward_csr``'s ``grad_weight`` compute
``<g[dst[e], h-block], x[src[e], h-block]>`` in one fixed order (``_dot`` of
``rtx/_common.pxi``: eight lane sums, lane l taking j = l, l + 8, ... from
``p = 0``, added as ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)), then the tail); float32
rows whose head width is a multiple of 8 take ``rtx_dot_heads_f32`` (four heads'
final additions as vector adds).  Both must give exactly the bits of that order,
written out here in numpy (each step rounded to the dtype, as C does without
contraction), for every head count (the groups of four and the rest) and width.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import bits

from rtx import _kernels


def ref_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``_dot``'s order over the last axis, in the arrays' dtype."""
    n = a.shape[-1]
    m = n - n % 8
    zero = np.zeros(a.shape[:-1], a.dtype)
    p = [zero.copy() for _ in range(8)]
    for j in range(0, m, 8):
        for lane in range(8):
            p[lane] = p[lane] + a[..., j + lane] * b[..., j + lane]
    s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))
    for j in range(m, n):
        s = s + a[..., j] * b[..., j]
    return s


def _case(rng, dtype, H, C, N=37, E=400, zeros=False):
    x = rng.standard_normal((N, H * C)).astype(dtype)
    g = rng.standard_normal((N, H * C)).astype(dtype)
    if zeros:
        # products of -0.0 and +0.0: _dot starts each lane at +0.0, so a lane of
        # only -0.0 products sums to +0.0 (a kernel that skipped the start value
        # would give -0.0)
        x[:, : H * C // 2] = -0.0
        g[:, : H * C // 2] = 0.0
        x[::3] *= 1e-30          # tiny products too
    src = rng.integers(0, N, E)
    dst = rng.integers(0, N, E)
    return x, g, src, dst


def _expected(x, g, src, dst, H, C):
    E = len(src)
    return ref_dot(g[dst].reshape(E, H, C), x[src].reshape(E, H, C))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("H", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("C", [1, 5, 8, 16, 24, 40])
@pytest.mark.parametrize("zeros", [False, True], ids=["random", "signed-zeros"])
def test_sddmm_dot_bitwise(dtype, H, C, zeros):
    rng = np.random.default_rng(H * 100 + C)
    x, g, src, dst = _case(rng, dtype, H, C, zeros=zeros)
    out = np.empty((len(src), H), dtype)
    for T in (1, 2):
        _kernels.sddmm_dot(g, x, src, dst, out, T)
        np.testing.assert_array_equal(bits(out), bits(_expected(x, g, src, dst, H, C)))


# float32 rows whose head width is a multiple of 8 run C row loops (rtx/_message.pxi),
# in an SSE2 copy and, on a CPU with AVX2, an AVX2 copy; both must give the bits of
# one in-order sum per output row (np.add.at: each product and each add rounded to
# float32, edges in increasing position, as the stable grouping visits them)
SIMD = [False, True] if _kernels.message_avx2_available() else [False]


@pytest.fixture(params=SIMD, ids=lambda v: "avx2" if v else "sse2")
def simd(request):
    old = _kernels.message_avx2(request.param)
    yield request.param
    _kernels.message_avx2(old)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("H,C", [(1, 8), (3, 16), (4, 16), (5, 8), (4, 5), (8, 24)])
def test_message_backward_weight_grad_bitwise(simd, dtype, H, C):
    """The fused backward's grad_weight has _dot's order's bits (sddmm_dot's);
    its grad_x matches numpy's scatter of w * g[dst] to the sources."""
    rng = np.random.default_rng(7 + H + C)
    N, E = 50, 600
    x, g, src, dst = _case(rng, dtype, H, C, N=N, E=E)
    w = rng.standard_normal((E, H)).astype(dtype)
    gx = np.empty_like(x)
    gw = np.empty((E, H), dtype)
    order = np.argsort(src, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=N))]).astype(np.int64)
    _kernels.message_backward_csr(g, x, dst, w, True, True, order.astype(np.int64), ptr,
                                  gx, gw, H, 2)
    np.testing.assert_array_equal(bits(gw), bits(_expected(x, g, src, dst, H, C)))
    ref_gx = np.zeros_like(x)
    np.add.at(ref_gx.reshape(N, H, C), src,
              w[:, :, None] * g[dst].reshape(E, H, C))
    np.testing.assert_allclose(gx, ref_gx, rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5 if dtype == np.float32 else 1e-12)


def _grouping(idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(idx, kind="stable").astype(np.int64)
    ptr = np.concatenate([[0], np.cumsum(np.bincount(idx, minlength=n))]).astype(np.int64)
    return order, ptr


@pytest.mark.valgrind
@pytest.mark.parametrize("H,C", [(1, 8), (2, 8), (3, 16), (4, 16), (5, 8), (6, 8), (4, 24),
                                 (2, 5)])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_message_rows_bitwise_in_order_sums(simd, H, C, weighted, idx_dtype):
    rng = np.random.default_rng(H * 10 + C)
    N, E, F = 60, 900, H * C
    x = rng.standard_normal((N, F)).astype(np.float32)
    g = rng.standard_normal((N, F)).astype(np.float32)
    src = rng.integers(0, N, E).astype(idx_dtype)
    dst = rng.integers(0, N, E).astype(idx_dtype)
    w = rng.standard_normal((E, H)).astype(np.float32)
    msg = (w[:, :, None] * x[src].reshape(E, H, C) if weighted
           else x[src].reshape(E, H, C)).reshape(E, F)
    want = np.zeros((N, F), np.float32)
    np.add.at(want, dst, msg)
    order, ptr = _grouping(dst, N)
    for T in (1, 2):
        out = np.full((N, F), np.nan, np.float32)
        _kernels.message_csr(x, src, w, weighted, order, ptr, out, H, T)
        np.testing.assert_array_equal(bits(out), bits(want))
    # the backward over the source grouping: grad_x in order, grad_weight _dot's bits
    back = (w[:, :, None] * g[dst].reshape(E, H, C) if weighted
            else g[dst].reshape(E, H, C)).reshape(E, F)
    want_gx = np.zeros((N, F), np.float32)
    np.add.at(want_gx, src, back)
    order, ptr = _grouping(src, N)
    for T in (1, 2):
        gx = np.full((N, F), np.nan, np.float32)
        gw = np.full((E, H), np.nan, np.float32)
        _kernels.message_backward_csr(g, x, dst, w, weighted, True, order, ptr, gx, gw, H, T)
        np.testing.assert_array_equal(bits(gx), bits(want_gx))
        if weighted:
            np.testing.assert_array_equal(bits(gw), bits(_expected(x, g, src, dst, H, C)))
        else:
            assert np.isnan(gw).all()       # unweighted: no weight, nothing written


@pytest.mark.valgrind
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("H,C", [(1, 8), (4, 16), (2, 5)])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_message_in_group_order_has_the_same_bits(simd, dtype, H, C, weighted, idx_dtype):
    """``in_group_order``: the other side's indices given in the grouping's order
    (``other[perm]``, EdgeIndex._in_group_order's copy) read in order instead of
    through ``perm``: the same output bits forward and backward (C and Cython
    loops, both index widths, 1 and 2 threads), nothing written outside them."""
    rng = np.random.default_rng(H * 7 + C)
    N, E, F = 40, 700, H * C
    x = rng.standard_normal((N, F)).astype(dtype)
    g = rng.standard_normal((N, F)).astype(dtype)
    src = rng.integers(0, N, E).astype(idx_dtype)
    dst = rng.integers(0, N, E).astype(idx_dtype)
    w = rng.standard_normal((E, H)).astype(dtype)
    by_dst, ptr_d = _grouping(dst, N)
    by_src, ptr_s = _grouping(src, N)
    src_k = np.ascontiguousarray(src[by_dst])
    dst_k = np.ascontiguousarray(dst[by_src])
    for T in (1, 2):
        outs = []
        for other, flag in ((src, False), (src_k, True)):
            out = np.full((N + 1, F), np.nan, dtype)     # a spare row: nothing past N
            _kernels.message_csr(x, other, w, weighted, by_dst, ptr_d, out[:N], H, T, flag)
            assert np.isnan(out[N]).all()
            outs.append(out[:N])
        np.testing.assert_array_equal(bits(outs[1]), bits(outs[0]))
        grads = []
        for d, flag in ((dst, False), (dst_k, True)):
            gx = np.full((N, F), np.nan, dtype)
            gw = np.full((E + 1, H), np.nan, dtype)
            _kernels.message_backward_csr(g, x, d, w, weighted, True, by_src, ptr_s, gx,
                                          gw[:E], H, T, flag)
            assert np.isnan(gw[E]).all()
            grads.append((gx, gw[:E]))
        for a, b in zip(grads[1], grads[0], strict=True):
            np.testing.assert_array_equal(bits(a), bits(b))
    assert not np.isnan(outs[0]).any() and not np.isnan(grads[0][0]).any()


def test_message_avx2_switch_round_trips():
    old = _kernels.message_avx2()
    try:
        assert _kernels.message_avx2(False) == old
        assert _kernels.message_avx2() is False
        assert _kernels.message_avx2(True) is False
        assert _kernels.message_avx2() is True
    finally:
        _kernels.message_avx2(old)
