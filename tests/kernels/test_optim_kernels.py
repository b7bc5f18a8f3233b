"""The fused optimiser updates of rtx/_optim.pxi: SparseAdam's row step (``adam_rows``,
``Backend.adam_rows``) and Adam's dense step (``adam_step``, ``Backend.adam_step``),
against torch.optim's arithmetic transcribed in numpy."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
from rtx import _kernels
from rtx.backend import CpuBackend
from rtx.backend.index import snapshot

B1, B2, EPS, STEP = 0.8, 0.95, 1e-6, 0.03


def _ref(p, m, v, rows, g):
    """torch/optim/sparse_adam.py's update, in numpy (same dtype throughout)."""
    p, m, v = p.copy(), m.copy(), v.copy()
    om, ov = m[rows], v[rows]
    um = (g - om) * (1 - B1)
    uv = (g * g - ov) * (1 - B2)
    m[rows] += um
    v[rows] += uv
    p[rows] += (um + om) / (np.sqrt(uv + ov) + EPS) * (-STEP)
    return p, m, v


def _case(dtype, n=50, d=7, k=20, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.normal(size=(n, d)).astype(dtype)
    m = (rng.normal(size=(n, d)) * 0.1).astype(dtype)
    v = rng.uniform(0, 0.2, (n, d)).astype(dtype)
    rows = rng.permutation(n)[:k]                       # distinct, unsorted
    g = rng.normal(size=(k, d)).astype(dtype)
    return p, m, v, rows, g


@pytest.mark.valgrind
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 7, 64])
def test_matches_torch_arithmetic_and_leaves_other_rows_alone(dtype, d):
    p, m, v, rows, g = _case(dtype, d=d)
    want = _ref(p, m, v, rows, g)
    got = [a.copy() for a in (p, m, v)]
    out = CpuBackend().adam_rows(*got, rtx.IndexPlan(rows, len(p)), g, B1, B2, EPS, STEP)
    assert all(o is a for o, a in zip(out, got, strict=True))     # in place
    tol = 1e-6 if dtype == np.float32 else 1e-14
    for a, w in zip(got, want, strict=True):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, w, rtol=tol, atol=tol)
    rest = np.setdiff1d(np.arange(len(p)), rows)
    for a, orig in zip(got, (p, m, v), strict=True):
        np.testing.assert_array_equal(a[rest], orig[rest])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_same_bits_at_any_thread_count(dtype):
    p, m, v, rows, g = _case(dtype, n=20000, d=32, k=9000, seed=3)   # above the serial cut
    snap = snapshot(rows.astype(np.int64), len(p), "t")
    _same_at_every_thread_count((p, m, v),
                                lambda a, t: _kernels.adam_rows(*a, snap, g, B1, B2, EPS, STEP, t))


def _same_at_every_thread_count(state, step):
    """``step(copies of state, threads)`` at 1-4 threads writes the same bits."""
    outs = []
    for t in (1, 2, 3, 4):
        a = [x.copy() for x in state]
        step(a, t)
        outs.append(a)
    for o in outs[1:]:
        for x, y in zip(o, outs[0], strict=True):
            np.testing.assert_array_equal(x, y)


@pytest.mark.valgrind
def test_int32_rows_and_1d_parameters():
    p, m, v, rows, g = _case(np.float64, d=1)
    want = _ref(p[:, 0], m[:, 0], v[:, 0], rows, g[:, 0])
    got = [a[:, 0].copy() for a in (p, m, v)]
    CpuBackend().adam_rows(*got, rtx.IndexPlan(rows.astype(np.int32), len(p)), g[:, 0].copy(),
                           B1, B2, EPS, STEP)
    for a, w in zip(got, want, strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-14)


@pytest.mark.valgrind
def test_read_only_buffers_are_copied_not_written():
    p, m, v, rows, g = _case(np.float64)
    want = _ref(p, m, v, rows, g)
    ro = [a.copy() for a in (p, m, v)]
    for a in ro:
        a.flags.writeable = False
    out = CpuBackend().adam_rows(*ro, rtx.IndexPlan(rows, len(p)), g, B1, B2, EPS, STEP)
    for o, a, orig, w in zip(out, ro, (p, m, v), want, strict=True):
        assert o is not a
        np.testing.assert_array_equal(a, orig)
        np.testing.assert_allclose(o, w, rtol=1e-14)


@pytest.mark.valgrind
def test_bad_arguments_raise_before_anything_is_written():
    p, m, v, rows, g = _case(np.float64)
    B = CpuBackend()
    plan = rtx.IndexPlan(rows, len(p))
    keep = [a.copy() for a in (p, m, v)]

    def untouched():
        for a, k in zip((p, m, v), keep, strict=True):
            np.testing.assert_array_equal(a, k)

    dup = rows.copy()
    dup[1] = dup[0]
    with pytest.raises(ValueError, match="distinct"):
        B.adam_rows(p, m, v, rtx.IndexPlan(dup, len(p)), g, B1, B2, EPS, STEP)
    untouched()
    with pytest.raises(ValueError, match="exp_avg"):
        B.adam_rows(p, m[:-1], v, plan, g, B1, B2, EPS, STEP)
    with pytest.raises(TypeError, match="dtype"):
        B.adam_rows(p, m, v, plan, g.astype(np.float32), B1, B2, EPS, STEP)
    with pytest.raises(ValueError, match="grad"):
        B.adam_rows(p, m, v, plan, g[:, :3], B1, B2, EPS, STEP)
    with pytest.raises(ValueError, match="len"):
        B.adam_rows(p, m, v, plan, g[:-1], B1, B2, EPS, STEP)
    with pytest.raises(TypeError):
        B.adam_rows(p, m, v, rows, g, B1, B2, EPS, STEP)          # raw indices: no plan
    untouched()
    # the kernel itself: rows must be an immutable snapshot, in bounds, shapes must agree
    with pytest.raises(TypeError, match="snapshot"):
        _kernels.adam_rows(p, m, v, rows.astype(np.int64), g, B1, B2, EPS, STEP, 2)
    bad = rows.astype(np.int64).copy()
    bad[-1] = len(p)
    snap, _ = _kernels.snapshot_indices(bad, -1)
    with pytest.raises(IndexError, match=r"rows\[19\]"):
        _kernels.adam_rows(p, m, v, snap, g, B1, B2, EPS, STEP, 2)
    with pytest.raises(ValueError, match="grad"):
        _kernels.adam_rows(p, m, v, snapshot(rows.astype(np.int64), len(p), "t"), g[:-1],
                           B1, B2, EPS, STEP, 2)
    untouched()


def test_sparse_adam_steps_only_the_batch_rows_in_place():
    rtx.manual_seed(0)
    e = rtx.nn.Embedding(1000, 16, sparse=True)
    o = rtx.optim.SparseAdam(e.parameters(), lr=0.01)
    w0 = e.weight.detach().numpy().copy()
    addr = e.weight.detach().numpy().__array_interface__["data"][0]
    idx = np.array([5, 7, 5, 900])
    e(idx).sum().backward()
    o.step()
    w = e.weight.detach().numpy()
    assert w.__array_interface__["data"][0] == addr       # the same buffer
    moved = np.flatnonzero((w != w0).any(1))
    np.testing.assert_array_equal(moved, [5, 7, 900])


# ------------------------------------------------------------------ adam_step
LR = 0.05


def _ref_dense(p, m, v, vmax, g, t, wd, decoupled):
    """torch.optim.Adam / AdamW's single-tensor step, in numpy (same dtype)."""
    p, m, v = p.copy(), m.copy(), v.copy()
    dt = p.dtype.type
    if decoupled:
        p = p * dt(1 - LR * wd)
    elif wd:
        g = g + p * dt(wd)
    m = m * dt(B1) + g * dt(1 - B1)
    v = v * dt(B2) + (g * g) * dt(1 - B2)
    use = v
    if vmax is not None:
        vmax = np.maximum(vmax, v)
        use = vmax
    denom = np.sqrt(use) / dt(np.sqrt(1 - B2 ** t)) + dt(EPS)
    p = p - (m / denom) * dt(LR / (1 - B1 ** t))
    return p, m, v, vmax


def _dense_case(dtype, shape=(37, 5), seed=0):
    rng = np.random.default_rng(seed)
    p = rng.normal(size=shape).astype(dtype)
    m = (rng.normal(size=shape) * 0.1).astype(dtype)
    v = rng.uniform(0, 0.2, shape).astype(dtype)
    vmax = (v + rng.uniform(-0.05, 0.05, shape)).clip(0).astype(dtype)
    g = rng.normal(size=shape).astype(dtype)
    return p, m, v, vmax, g


@pytest.mark.valgrind
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("wd,decoupled", [(0.0, False), (0.1, False), (0.3, True)])
@pytest.mark.parametrize("ams", [False, True])
def test_dense_step_matches_torch_arithmetic(dtype, wd, decoupled, ams):
    p, m, v, vmax, g = _dense_case(dtype)
    if not ams:
        vmax = None
    want = _ref_dense(p, m, v, vmax, g, 4, wd, decoupled)
    got = [None if a is None else a.copy() for a in (p, m, v, vmax)]
    out = CpuBackend().adam_step(*got, g, B1, B2, EPS, LR, 4, wd, decoupled)
    assert all(o is a for o, a in zip(out, got, strict=True))     # in place
    tol = 2e-6 if dtype == np.float32 else 1e-14
    for a, w in zip(out, want, strict=True):
        if w is None:
            assert a is None
            continue
        assert a.dtype == dtype
        np.testing.assert_allclose(a, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dense_step_same_bits_at_any_thread_count(dtype):
    p, m, v, vmax, g = _dense_case(dtype, shape=(300_000,), seed=4)   # above the serial cut
    _same_at_every_thread_count(
        (p, m, v, vmax),
        lambda a, t: _kernels.adam_step(a[0], a[1], a[2], g, B1, B2, EPS, 0.01, 0.5, 0.1, False,
                                        LR, t, a[3]))


@pytest.mark.valgrind
def test_dense_amsgrad_max_propagates_nan_as_numpy():
    p, m, v, vmax, g = _dense_case(np.float64, shape=(4,))
    vmax[1] = np.nan
    g[2] = np.nan
    want = _ref_dense(p, m, v, vmax, g, 2, 0.0, False)
    got = [a.copy() for a in (p, m, v, vmax)]
    CpuBackend().adam_step(*got, g, B1, B2, EPS, LR, 2)
    for a, w in zip(got, want, strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-14, equal_nan=True)
    assert np.isnan(got[3][1]) and np.isnan(got[3][2])


@pytest.mark.valgrind
def test_dense_step_bad_arguments_raise_before_anything_is_written():
    p, m, v, vmax, g = _dense_case(np.float64)
    keep = [a.copy() for a in (p, m, v, vmax)]
    B = CpuBackend()
    with pytest.raises(ValueError, match="exp_avg_sq"):
        B.adam_step(p, m, v[:-1], None, g, B1, B2, EPS, LR, 1)
    with pytest.raises(ValueError, match="max_exp_avg_sq"):
        B.adam_step(p, m, v, vmax[:, :2], g, B1, B2, EPS, LR, 1)
    with pytest.raises(TypeError, match="dtype"):
        B.adam_step(p, m, v, None, g.astype(np.float32), B1, B2, EPS, LR, 1)
    with pytest.raises(ValueError, match="step"):
        B.adam_step(p, m, v, None, g, B1, B2, EPS, LR, 0)
    with pytest.raises(ValueError, match="one length"):
        _kernels.adam_step(p.reshape(-1), m.reshape(-1), v.reshape(-1)[:-1], g.reshape(-1),
                           B1, B2, EPS, 0.1, 0.5, 0.0, False, LR, 2)
    for a, k in zip((p, m, v, vmax), keep, strict=True):
        np.testing.assert_array_equal(a, k)
    ro = [a.copy() for a in (p, m, v)]
    for a in ro:
        a.flags.writeable = False
    out = B.adam_step(*ro, None, g, B1, B2, EPS, LR, 1)
    assert out[3] is None
    for o, a, k in zip(out[:3], ro, keep[:3], strict=True):
        assert o is not a
        np.testing.assert_array_equal(a, k)
