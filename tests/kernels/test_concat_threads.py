"""``concat`` of large C-contiguous arrays laid end to end runs on rtx's threads
(``concat_bytes``, rtx/_index.pxi; rtx/backend/cpu/shape.py): numpy's bytes,
whatever the thread count, and numpy's path for every other case."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import spy_calls

import rtx
from rtx import _kernels
from rtx.backend.cpu import shape as cpu_shape


@pytest.fixture
def calls(monkeypatch):
    """The calls the CPU backend's concat made to the threaded copy."""
    return spy_calls(monkeypatch, cpu_shape, "concat_bytes")


def _special(rng, shape, dt):
    a = rng.standard_normal(shape).astype(dt) if np.dtype(dt).kind == "f" else \
        rng.integers(-1000, 1000, shape).astype(dt)
    if np.dtype(dt).kind == "f" and a.size >= 3:
        flat = a.reshape(-1)
        flat[:3] = [-0.0, np.nan, np.inf]
    return a


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("shapes,dim", [
    ([(100000, 4, 4), (50000, 4, 4), (0, 4, 4), (1000, 4, 4)], 0),
    ([(1, 300000), (1, 7), (1, 100000)], 1),                 # leading dim of size 1
    ([(70000, 3), (70001, 3)], -2),
])
def test_large_concats_are_numpys_bytes_on_any_thread_count(dt, shapes, dim, calls):
    rng = np.random.default_rng(len(shapes))
    xs = [_special(rng, s, dt) for s in shapes]
    want = np.concatenate(xs, axis=dim)
    B = rtx.CpuBackend()
    for t in (1, 2, 3):
        rtx.set_num_threads(t)
        got = B.concat(xs, dim)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()          # bitwise: NaN payloads, -0.0
    assert len(calls) == 2                               # threads 2 and 3


@pytest.mark.parametrize("case", ["strided input", "mixed dtypes", "inner dim", "small"])
def test_other_concats_keep_numpy(case, calls):
    rtx.set_num_threads(2)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((100000, 8)).astype(np.float32)
    b = rng.standard_normal((100000, 8)).astype(np.float32)
    dim = 0
    if case == "strided input":
        b = rng.standard_normal((100000, 16)).astype(np.float32)[:, ::2]
    elif case == "mixed dtypes":
        b = b.astype(np.float64)
    elif case == "inner dim":
        dim = 1
    else:
        a, b = a[:1000], b[:1000]
    got = rtx.CpuBackend().concat([a, b], dim)
    assert calls == []
    want = np.concatenate([a, b], axis=dim)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_the_tensor_face_and_its_gradient():
    rtx.set_num_threads(2)
    rng = np.random.default_rng(5)
    parts = [rtx.tensor(rng.standard_normal((n, 64)), requires_grad=True)
             for n in (3000, 1, 2000)]
    y = rtx.concat(parts, 0)
    np.testing.assert_array_equal(y.numpy(), np.concatenate([p.numpy() for p in parts]))
    g = rng.standard_normal((5001, 64))
    y.backward(rtx.tensor(g))
    np.testing.assert_array_equal(parts[0].grad.numpy(), g[:3000])
    np.testing.assert_array_equal(parts[2].grad.numpy(), g[3001:])


# ------------------------------------------------------------ the kernel itself
def test_kernel_splits_any_layout_of_sources():
    rng = np.random.default_rng(6)
    sizes = [0, 1, (1 << 20) - 1, 3, 5 << 20, 0, 777]   # across chunk boundaries
    srcs = [rng.integers(0, 256, n).astype(np.uint8) for n in sizes]
    want = np.concatenate(srcs)
    for t in (1, 2, 3, 8):
        out = np.zeros(len(want), np.uint8)
        _kernels.concat_bytes(srcs, out, t)
        np.testing.assert_array_equal(out, want)
    out = np.zeros(0, np.uint8)
    _kernels.concat_bytes([np.zeros(0, np.uint8)], out, 2)
    _kernels.concat_bytes([], out, 2)


def test_kernel_checks_before_writing():
    out = np.full(10, 7, np.uint8)
    with pytest.raises(ValueError, match="bytes"):
        _kernels.concat_bytes([np.zeros(4, np.uint8), np.zeros(5, np.uint8)], out, 2)
    with pytest.raises(ValueError, match="bytes"):
        _kernels.concat_bytes([np.zeros(11, np.uint8)], out, 2)
    with pytest.raises((ValueError, TypeError)):
        _kernels.concat_bytes([np.zeros(20, np.uint8)[::2]], out, 2)    # not contiguous
    with pytest.raises((ValueError, TypeError)):
        _kernels.concat_bytes([np.zeros(10, np.float32)], out, 2)       # not bytes
    with pytest.raises(TypeError):
        _kernels.concat_bytes([None], out, 2)
    with pytest.raises(TypeError):
        _kernels.concat_bytes([], None, 2)
    with pytest.raises(TypeError):
        _kernels.concat_bytes((np.zeros(10, np.uint8),), out, 2)         # a list only
    assert (out == 7).all()
