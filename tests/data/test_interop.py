"""Interop: DLPack both ways (numpy, PyTorch, JAX), zero-copy numpy views, threadpoolctl.

Ownership rules under test (see rtx/_dlpack.pxi and docs/interop.md): an exported
capsule's deleter runs exactly once, the producer's memory stays alive while a
consumer holds it, and a capsule can be consumed once.  Zero-copy is checked by
equal data pointers *and* by writing through one side and reading the other.
PyTorch, JAX and threadpoolctl are optional: their tests skip when absent.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys

import numpy as np
import pytest

import rtx
from rtx import _kernels

ALL_DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]


def ptr(a) -> int:
    return np.asarray(a).__array_interface__["data"][0]


def sample(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    return (rng.standard_normal(shape) * 10).astype(dt)


def deltas(before: dict) -> tuple[int, int]:
    now = _kernels.dlpack_stats()
    return now["exported"] - before["exported"], now["deleted"] - before["deleted"]


class Capsule:
    """Hands out one fixed capsule, whatever the consumer asks for."""

    def __init__(self, capsule) -> None:
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


class LegacyProducer:
    """An old-style producer: calls rtx's ``__dlpack__`` without ``max_version``."""

    def __init__(self, t, copy=None) -> None:
        self.t, self.copy = t, copy

    def __dlpack__(self, **kwargs):
        return self.t.__dlpack__(copy=self.copy)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


# ------------------------------------------------------------- rtx -> numpy
@pytest.mark.valgrind
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_consumes_rtx_zero_copy(dtype):
    t = rtx.from_numpy(sample((3, 5), dtype))
    expected = t.numpy().copy()
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(dtype) and a.shape == (3, 5)
    assert ptr(a) == ptr(t.numpy())
    np.testing.assert_array_equal(a, expected)
    # Write through the consumer, read through rtx, and the other way round.
    a[1, 2] = 1
    assert t.numpy()[1, 2] == 1
    t.numpy()[2, 4] = 0
    assert a[2, 4] == 0


@pytest.mark.valgrind
def test_capsule_names_follow_max_version():
    t = rtx.ones(2, 2)
    assert "dltensor" in repr(t.__dlpack__()) and "versioned" not in repr(t.__dlpack__())
    assert '"dltensor_versioned"' in repr(t.__dlpack__(max_version=(1, 0)))
    assert '"dltensor_versioned"' in repr(t.__dlpack__(max_version=(1, 3)))
    assert "versioned" not in repr(t.__dlpack__(max_version=(0, 8)))


@pytest.mark.valgrind
@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_unconsumed_capsule_runs_deleter_once(max_version):
    t = rtx.randn(4, 3, seed=1)
    owner = t.numpy()
    refs = sys.getrefcount(owner)
    before = _kernels.dlpack_stats()
    cap = t.__dlpack__(max_version=max_version)
    assert _kernels.dlpack_capsule_state(cap) == "unused"
    assert sys.getrefcount(owner) == refs + 1          # the capsule holds the owner
    assert deltas(before) == (1, 0)
    del cap
    gc.collect()
    assert deltas(before) == (1, 1)                   # destructor -> deleter, once
    assert sys.getrefcount(owner) == refs


@pytest.mark.valgrind
@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_consumed_capsule_deleter_runs_once_and_only_via_consumer(max_version):
    t = rtx.randn(4, 3, seed=2)
    owner = t.numpy()
    refs = sys.getrefcount(owner)
    before = _kernels.dlpack_stats()
    holder = Capsule(t.__dlpack__(max_version=max_version))
    a = np.from_dlpack(holder)
    assert _kernels.dlpack_capsule_state(holder.capsule) == "used"
    # A capsule can be consumed once.
    with pytest.raises(ValueError):
        np.from_dlpack(holder)
    # Dropping the used capsule must not call the deleter: the consumer owns it now.
    del holder
    gc.collect()
    assert deltas(before) == (1, 0)
    np.testing.assert_array_equal(a, owner)
    del a
    gc.collect()
    assert deltas(before) == (1, 1)
    assert sys.getrefcount(owner) == refs


@pytest.mark.valgrind
def test_producer_memory_outlives_the_tensor():
    t = rtx.randn(64, 16, seed=3)
    expected = t.numpy().copy()
    frees = rtx.memory_stats()["frees"]
    a = np.from_dlpack(t)
    del t
    gc.collect()
    assert rtx.memory_stats()["frees"] == frees          # the Storage is still alive
    # Churn the caching allocator with blocks of the same size class.
    junk = [rtx.zeros(64, 16) for _ in range(4)]
    np.testing.assert_array_equal(a, expected)
    del junk
    gc.collect()
    frees = rtx.memory_stats()["frees"]
    del a
    gc.collect()
    assert rtx.memory_stats()["frees"] == frees + 1       # freed once, by the last user


@pytest.mark.valgrind
def test_copy_true_exports_a_private_copy():
    t = rtx.arange(6, dtype=rtx.float64)
    a = np.from_dlpack(t, copy=True)
    assert ptr(a) != ptr(t.numpy())
    np.testing.assert_array_equal(a, np.arange(6.0))
    a[0] = 100
    assert t.numpy()[0] == 0


@pytest.mark.valgrind
def test_read_only_memory_is_exported_read_only():
    src = np.arange(8.0)
    src.flags.writeable = False
    t = rtx.from_numpy(src)
    a = np.from_dlpack(t)                       # numpy asks for a versioned capsule
    assert ptr(a) == ptr(src)
    assert not a.flags.writeable
    # A DLPack < 1.0 consumer cannot be told "read-only": it gets a copy, or an error.
    before = _kernels.dlpack_stats()
    b = np.from_dlpack(LegacyProducer(t))      # (numpy marks legacy imports read-only)
    assert not np.shares_memory(b, src)
    np.testing.assert_array_equal(b, src)
    with pytest.raises(BufferError):
        np.from_dlpack(LegacyProducer(t, copy=False))
    del b
    gc.collect()
    assert deltas(before) == (1, 1)


def test_strided_and_edge_shapes_export():
    x = rtx.arange(12, dtype=rtx.float32).reshape(3, 4)
    for t in (x.T, x[:, 1:3], x[::2], rtx.tensor(3.5), rtx.zeros(0, 3)):
        a = np.from_dlpack(t)
        np.testing.assert_array_equal(a, t.numpy())
        assert a.shape == t.shape
        if t.numel():
            assert np.shares_memory(a, t.numpy())


def test_bad_requests_raise_before_exporting():
    t = rtx.ones(3)
    before = _kernels.dlpack_stats()
    with pytest.raises(ValueError, match="stream"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="CPU"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(TypeError):
        t.__dlpack__(max_version="1.0")
    with pytest.raises(TypeError):
        t.__dlpack__(copy="yes")
    with pytest.raises(RuntimeError, match="detach"):
        rtx.ones(3, requires_grad=True).__dlpack__()
    assert deltas(before) == (0, 0)
    assert np.from_dlpack(rtx.ones(3, requires_grad=True).detach()).sum() == 3


def test_non_numpy_backend_exports_a_copy():
    with rtx.use_backend(rtx.MinimalBackend()):
        t = rtx.tensor([[1.0, 2.0], [3.0, 4.0]])
        np.testing.assert_array_equal(np.from_dlpack(t), [[1.0, 2.0], [3.0, 4.0]])
        with pytest.raises(BufferError, match="copy"):
            t.__dlpack__(max_version=(1, 0), copy=False)
        r = rtx.from_dlpack(np.arange(4.0))
        assert r.backend.name == "minimal"
        np.testing.assert_array_equal(r.numpy(), np.arange(4.0))


# ------------------------------------------------------------- numpy -> rtx
@pytest.mark.valgrind
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_from_dlpack_numpy_zero_copy(dtype):
    a = sample((4, 3), dtype, seed=4)
    t = rtx.from_dlpack(a)
    assert isinstance(t, rtx.Tensor) and t.dtype == np.dtype(dtype) and not t.requires_grad
    assert ptr(t.numpy()) == ptr(a)
    a[0, 0] = 1
    assert t.numpy()[0, 0] == 1
    t.numpy()[3, 2] = 0
    assert a[3, 2] == 0


def test_from_dlpack_keeps_the_producer_alive():
    a = np.arange(1000.0)
    t = rtx.from_dlpack(a)
    del a
    gc.collect()
    junk = [np.full(1000, -1.0) for _ in range(8)]
    np.testing.assert_array_equal(t.numpy(), np.arange(1000.0))
    del junk


def test_from_dlpack_read_only_source_is_never_written():
    a = np.arange(5.0)
    a.flags.writeable = False
    t = rtx.from_dlpack(a)
    assert ptr(t.numpy()) == ptr(a)
    t.add_(1)                       # in-place on read-only memory computes into new memory
    np.testing.assert_array_equal(a, np.arange(5.0))
    np.testing.assert_array_equal(t.numpy(), np.arange(5.0) + 1)


def test_from_dlpack_strided_copy_and_copy_flags():
    a = np.arange(24.0).reshape(4, 6)
    v = a[:, ::2]
    t = rtx.from_dlpack(v)                 # rtx views need C-contiguous memory: copied
    np.testing.assert_array_equal(t.numpy(), v)
    assert not np.shares_memory(t.numpy(), a)
    with pytest.raises(BufferError, match="copy"):
        rtx.from_dlpack(v, copy=False)
    c = rtx.from_dlpack(a, copy=True)
    assert not np.shares_memory(c.numpy(), a)
    np.testing.assert_array_equal(c.numpy(), a)
    assert np.shares_memory(rtx.from_dlpack(a, copy=False).numpy(), a)


def test_from_dlpack_errors():
    with pytest.raises(TypeError, match="__dlpack__"):
        rtx.from_dlpack([1.0, 2.0])
    with pytest.raises(TypeError, match="dtype"):
        rtx.from_dlpack(np.ones(3, dtype=np.float16))
    with pytest.raises(ValueError, match="CPU"):
        rtx.from_dlpack(np.ones(3), device="cuda")
    with pytest.raises(TypeError):
        rtx.from_dlpack(np.ones(3), copy=1)


def test_rtx_round_trip_through_dlpack():
    t = rtx.randn(5, 2, seed=5)
    u = rtx.from_dlpack(t)
    assert ptr(u.numpy()) == ptr(t.numpy())
    u.mul_(2)
    np.testing.assert_array_equal(t.numpy(), u.numpy())


@pytest.mark.valgrind
def test_numpy_views_both_ways_share_memory():
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    t = rtx.from_numpy(a)
    a[0, 1] = -7
    assert t[0, 1].item() == -7
    t.add_(1)
    assert a[0, 1] == -6
    v = np.asarray(t)
    assert ptr(v) == ptr(a)
    u = rtx.zeros(4)
    w = np.asarray(u)
    w[2] = 9
    assert u.tolist() == [0, 0, 9, 0]


# ------------------------------------------------------------------- torch
def test_torch_round_trip_zero_copy():
    torch = pytest.importorskip("torch")
    t = rtx.randn(8, 4, seed=6)
    x = torch.from_dlpack(t)
    assert x.data_ptr() == ptr(t.numpy())
    assert x.dtype == torch.float32 and tuple(x.shape) == (8, 4)
    x[0, 0] = 123.0
    assert t[0, 0].item() == 123.0
    back = rtx.from_dlpack(x)
    assert ptr(back.numpy()) == x.data_ptr() == ptr(t.numpy())
    back.numpy()[7, 3] = -1.0
    assert x[7, 3].item() == -1.0
    # The torch tensor keeps rtx's memory alive after every rtx tensor is gone.
    expected = x.clone()
    del t, back
    gc.collect()
    _ = [rtx.zeros(8, 4) for _ in range(4)]
    assert torch.equal(x, expected)


@pytest.mark.parametrize("name", ["float32", "float64", "int32", "int64", "bool"])
def test_torch_to_rtx_dtypes(name):
    torch = pytest.importorskip("torch")
    x = torch.arange(10).reshape(2, 5).to(getattr(torch, name))
    t = rtx.from_dlpack(x)
    assert t.dtype == np.dtype(name)
    assert ptr(t.numpy()) == x.data_ptr()
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    # and back
    y = torch.from_dlpack(rtx.from_numpy(sample((3,), name)))
    assert y.dtype == getattr(torch, name)


def test_torch_strided_and_capsule_consumed_once():
    torch = pytest.importorskip("torch")
    x = torch.arange(12.0).reshape(3, 4)
    t = rtx.from_dlpack(x.T)
    np.testing.assert_array_equal(t.numpy(), x.T.numpy())
    before = _kernels.dlpack_stats()
    cap = rtx.ones(3).__dlpack__()
    y = torch.utils.dlpack.from_dlpack(cap)
    assert _kernels.dlpack_capsule_state(cap) == "used"
    with pytest.raises(RuntimeError):
        torch.utils.dlpack.from_dlpack(cap)
    del cap
    gc.collect()
    assert deltas(before) == (1, 0)
    del y
    gc.collect()
    assert deltas(before) == (1, 1)


def test_torch_legacy_consumer_gets_a_copy_of_read_only_memory():
    torch = pytest.importorskip("torch")
    src = np.arange(4.0)
    src.flags.writeable = False
    y = torch.utils.dlpack.from_dlpack(rtx.from_numpy(src).__dlpack__())   # DLPack 0.x
    assert y.data_ptr() != ptr(src)
    y[0] = 42.0
    np.testing.assert_array_equal(src, np.arange(4.0))


# --------------------------------------------------------------------- jax
def test_jax_round_trip():
    pytest.importorskip("jax")
    import jax.numpy as jnp

    t = rtx.arange(16, dtype=rtx.float32)
    j = jnp.from_dlpack(t)
    np.testing.assert_array_equal(np.asarray(j), t.numpy())
    if j.unsafe_buffer_pointer() != ptr(t.numpy()):
        pytest.fail("jax copied an rtx buffer (64-byte aligned memory should be imported as is)")
    src = jnp.arange(6.0, dtype=jnp.float32) * 2
    r = rtx.from_dlpack(src)
    assert ptr(r.numpy()) == src.unsafe_buffer_pointer()
    # JAX arrays are immutable: rtx must not write into them.
    r.add_(1)
    np.testing.assert_array_equal(np.asarray(src), np.arange(6.0) * 2)
    np.testing.assert_array_equal(r.numpy(), np.arange(6.0) * 2 + 1)


# ------------------------------------------------------------ threadpoolctl
def _openmp_library_of_rtx() -> str:
    """The OpenMP runtime rtx's extension actually resolved (dlsym + dladdr)."""

    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    ext = ctypes.CDLL(_kernels.__file__)
    addr = ctypes.cast(ext.omp_get_max_threads, ctypes.c_void_p)
    info = DlInfo()
    assert ctypes.CDLL(None).dladdr(addr, ctypes.byref(info)) != 0
    return os.path.realpath(info.dli_fname.decode())


@pytest.mark.skipif(not _kernels.openmp_enabled(), reason="serial build: no OpenMP pool")
@pytest.mark.skipif(sys.platform == "win32", reason="dladdr is POSIX")
def test_threadpoolctl_sees_and_limits_rtx_openmp():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    lib = _openmp_library_of_rtx()
    pools = [p for p in threadpoolctl.threadpool_info() if p["internal_api"] == "openmp"]
    assert lib in {os.path.realpath(p["filepath"]) for p in pools}, (lib, pools)
    rtx.set_num_threads(None)
    default = rtx.get_num_threads()
    with threadpoolctl.threadpool_limits(limits=1, user_api="openmp"):
        assert _kernels.omp_max_threads() == 1
        assert rtx.get_num_threads() == 1
        assert _kernels.parallel_thread_ids(1 << 16, rtx.get_num_threads()) == 1
    assert rtx.get_num_threads() == default
    if default > 1:
        with threadpoolctl.threadpool_limits(limits=2, user_api="openmp"):
            assert rtx.get_num_threads() == 2
