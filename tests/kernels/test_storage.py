"""Owned storage and the caching allocator."""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

import rtx
from rtx import _kernels


def current():
    gc.collect()
    return rtx.memory_stats()["current_bytes"]


def test_stats_keys():
    s = rtx.memory_stats()
    for k in ("current_bytes", "peak_bytes", "allocations", "frees", "cache_hits",
              "cached_bytes", "cache_limit"):
        assert isinstance(s[k], int)


def test_storage_is_aligned_and_counted():
    base = current()
    st = rtx.Storage(1000)
    assert st.address % 64 == 0
    assert st.nbytes == 1000
    assert current() >= base + 1000
    del st
    assert current() == base


def test_large_storage_is_2mib_aligned_and_hinted():
    before = rtx.memory_stats()["hugepage_hints"]
    rtx.empty_cache()
    st = rtx.Storage(8 << 20)
    assert st.address % (2 << 20) == 0
    # madvise(MADV_HUGEPAGE) succeeds on Linux with THP compiled in.
    import sys
    if sys.platform.startswith("linux"):
        assert rtx.memory_stats()["hugepage_hints"] == before + 1
    del st


def test_negative_size_rejected():
    with pytest.raises(ValueError):
        rtx.Storage(-1)


def test_huge_allocation_is_memory_error():
    base = current()
    with pytest.raises(MemoryError):
        rtx.Storage(1 << 60)
    assert current() == base


def test_numpy_view_outlives_tensor():
    base = current()
    t = rtx.arange(10, dtype=rtx.float64)
    a = np.asarray(t)
    del t
    gc.collect()
    a[3] = 42.0
    assert a.sum() == sum(range(10)) - 3 + 42
    assert current() > base
    del a
    assert current() == base


def test_tensor_outlives_views_and_view_chains():
    base = current()
    t = rtx.randn(6, 8, seed=0)
    ref = t.numpy().copy()
    v = t[1:5:2].T.reshape(-1)[::3]
    n = np.asarray(t.T[2:])
    del t
    gc.collect()
    np.testing.assert_array_equal(v.numpy(), ref[1:5:2].T.reshape(-1)[::3])
    np.testing.assert_array_equal(n, ref.T[2:])
    del v
    gc.collect()
    np.testing.assert_array_equal(n, ref.T[2:])
    del n
    assert current() == base


def test_views_share_memory_with_their_tensor():
    t = rtx.zeros(4, 4)
    v = t[1]
    np.asarray(v)[:] = 7.0
    assert t.numpy()[1].tolist() == [7.0] * 4
    assert np.shares_memory(np.asarray(t.T), np.asarray(t))


def test_memory_returns_to_baseline_after_10000_tensors_and_views():
    base = current()
    for i in range(10_000):
        t = rtx.ones(8, 4) * float(i)
        v = t.T[1:].reshape(-1)
        _ = np.asarray(v)
        w = t.sum(0)
        del t, v, w, _
    assert current() == base


def test_same_shape_allocation_served_from_cache():
    rtx.empty_cache()
    t = rtx.empty(256, 1024)
    del t
    s0 = rtx.memory_stats()
    t = rtx.empty(256, 1024)
    s1 = rtx.memory_stats()
    assert s1["cache_hits"] == s0["cache_hits"] + 1
    assert s1["system_allocations"] == s0["system_allocations"]
    del t


def _class_of(nbytes):
    """The size class a fresh block of ``nbytes`` gets (cache empty)."""
    rtx.empty_cache()
    before = current()
    st = rtx.Storage(nbytes)
    used = current() - before
    del st
    rtx.empty_cache()
    return used


MIB = 1 << 20


@pytest.mark.valgrind
def test_a_block_up_to_two_classes_larger_serves_from_the_cache():
    c1, c2, c3 = _class_of(MIB + 1), _class_of(_class_of(MIB + 1) + 1), None
    c3 = _class_of(c2 + 1)
    assert MIB < c1 < c2 < c3 <= MIB + MIB // 2
    for cached, served in ((c1, True), (c2, True), (c3, False)):
        rtx.empty_cache()
        st = rtx.Storage(cached)
        del st
        s0 = rtx.memory_stats()
        before = current()
        st = rtx.Storage(MIB)            # class MIB: the cached block is 1-3 classes up
        s1 = rtx.memory_stats()
        if served:
            assert s1["cache_hits"] == s0["cache_hits"] + 1
            assert s1["system_allocations"] == s0["system_allocations"]
            assert current() - before == cached      # counted as the block handed out
            assert st.nbytes == MIB
        else:
            assert s1["cache_hits"] == s0["cache_hits"]
            assert s1["system_allocations"] == s0["system_allocations"] + 1
            assert current() - before == MIB
        del st
        gc.collect()
        # freed as the class it was handed out as: the next request of it hits
        s2 = rtx.memory_stats()
        st = rtx.Storage(cached if served else MIB)
        assert rtx.memory_stats()["cache_hits"] == s2["cache_hits"] + 1
        del st
    # small requests use their own class only
    rtx.empty_cache()
    st = rtx.Storage(4096 + 64)
    del st
    s0 = rtx.memory_stats()
    st = rtx.Storage(4096)
    assert rtx.memory_stats()["cache_hits"] == s0["cache_hits"]
    del st
    rtx.empty_cache()


@pytest.mark.valgrind
def test_a_freed_block_evicts_the_least_recently_used_classes():
    old = rtx.get_cache_limit()
    a, b, c = MIB, 3 * MIB // 2, 2 * MIB     # classes of their own, > 2 classes apart
    assert (_class_of(a), _class_of(b), _class_of(c)) == (a, b, c)
    try:
        rtx.set_cache_limit(7 * MIB // 2)
        rtx.empty_cache()
        sa, sb = rtx.Storage(a), rtx.Storage(b)
        del sa, sb                                    # cached: a, then b (a + b <= limit)
        assert rtx.memory_stats()["cached_bytes"] == a + b
        sa = rtx.Storage(a)                           # a is touched: b is now the oldest
        del sa
        s0 = rtx.memory_stats()
        sc = rtx.Storage(c)
        del sc                                        # a + b + c > limit: b goes
        s1 = rtx.memory_stats()
        assert s1["cached_bytes"] == a + c
        assert s1["system_frees"] == s0["system_frees"] + 1
        for n in (a, c):                              # both still served from the cache
            h = rtx.memory_stats()["cache_hits"]
            st = rtx.Storage(n)
            assert rtx.memory_stats()["cache_hits"] == h + 1
            del st
        h = rtx.memory_stats()
        st = rtx.Storage(b)                           # b was given back to the system
        assert rtx.memory_stats()["system_allocations"] == h["system_allocations"] + 1
        del st
        # a block larger than the whole limit never empties the cache
        before = rtx.memory_stats()["cached_bytes"]
        st = rtx.Storage(4 * MIB)
        del st
        assert rtx.memory_stats()["cached_bytes"] == before
    finally:
        rtx.set_cache_limit(old)
        rtx.empty_cache()


def _size_class(n):
    """The allocator's size classes (rtx/_storage.pxi's ``_size_class``)."""
    if n <= 4096:
        return max(64, (n + 63) // 64 * 64)
    p = 1
    while p < n:
        p <<= 1
    step = p >> 4
    return (n + step - 1) // step * step


class _CacheModel:
    """The cache's documented behaviour in Python: a stack of blocks per size
    class, the classes least recently touched first, a byte limit."""

    def __init__(self, limit):
        self.limit, self.cached, self.buckets = limit, 0, {}   # class -> count (ordered)
        self.hits = self.sys_allocs = self.sys_frees = 0

    def alloc(self, n):
        c = _size_class(n)
        for _ in range(3 if c > 4096 else 1):
            if self.buckets.get(c):
                k = self.buckets.pop(c) - 1
                if k:
                    self.buckets[c] = k                         # touched: most recent
                self.cached -= c
                self.hits += 1
                return c
            c = _size_class(c + 1)
        self.sys_allocs += 1
        return _size_class(n)

    def free(self, c):
        if c <= self.limit:
            while self.buckets and c > self.limit - self.cached:
                oldest = next(iter(self.buckets))
                while self.buckets[oldest] and c > self.limit - self.cached:
                    self.buckets[oldest] -= 1
                    self.cached -= oldest
                    self.sys_frees += 1
                if not self.buckets[oldest]:
                    del self.buckets[oldest]
            if c <= self.limit - self.cached:
                self.buckets[c] = self.buckets.pop(c, 0) + 1
                self.cached += c
                return
        self.sys_frees += 1


@settings(max_examples=60, deadline=None)
@given(st_.lists(st_.tuples(st_.booleans(), st_.integers(1, 40_000)), max_size=60),
       st_.sampled_from([0, 4096, 50_000, 200_000]))
def test_the_cache_follows_its_model(ops, limit):
    # allocations and frees of many size classes (small, and across powers of
    # two with the best fit) against _CacheModel: the same hits, system calls
    # and cached bytes after every step
    old = rtx.get_cache_limit()
    gc.collect()
    try:
        rtx.empty_cache()
        rtx.set_cache_limit(limit)
        model, live, classes = _CacheModel(limit), [], []
        s0 = rtx.memory_stats()
        for is_alloc, n in ops:
            if is_alloc or not live:
                before = rtx.memory_stats()["current_bytes"]
                live.append(rtx.Storage(n))
                classes.append(model.alloc(n))
                assert rtx.memory_stats()["current_bytes"] - before == classes[-1]
            else:
                i = n % len(live)
                del live[i]
                model.free(classes.pop(i))
            s = rtx.memory_stats()
            assert (s["cached_bytes"], s["cache_hits"] - s0["cache_hits"],
                    s["system_allocations"] - s0["system_allocations"],
                    s["system_frees"] - s0["system_frees"]) == (
                model.cached, model.hits, model.sys_allocs, model.sys_frees)
        del live
    finally:
        rtx.set_cache_limit(old)
        rtx.empty_cache()


def test_cache_limit_and_empty_cache():
    old = rtx.get_cache_limit()
    try:
        rtx.set_cache_limit(0)
        assert rtx.memory_stats()["cached_bytes"] == 0
        s0 = rtx.memory_stats()
        t = rtx.empty(1000)
        del t
        s1 = rtx.memory_stats()
        assert s1["cached_bytes"] == 0
        assert s1["system_frees"] == s0["system_frees"] + 1
        rtx.set_cache_limit(1 << 20)
        t = rtx.empty(1000)
        del t
        assert rtx.memory_stats()["cached_bytes"] > 0
        rtx.empty_cache()
        assert rtx.memory_stats()["cached_bytes"] == 0
        with pytest.raises(ValueError):
            rtx.set_cache_limit(-1)
    finally:
        rtx.set_cache_limit(old)


def test_peak_and_reset():
    rtx.reset_peak_memory_stats()
    base = rtx.memory_stats()["peak_bytes"]
    t = rtx.empty(1 << 20)
    assert rtx.memory_stats()["peak_bytes"] >= base + (4 << 20)
    del t
    rtx.reset_peak_memory_stats()
    assert rtx.memory_stats()["peak_bytes"] == rtx.memory_stats()["current_bytes"]


def test_size_classes_waste_at_most_an_eighth():
    rtx.empty_cache()
    for n in (1, 63, 64, 65, 4095, 4097, 10_000, 1_000_001, 3 << 20):
        before = current()
        st = rtx.Storage(n)
        used = current() - before
        assert n <= used <= max(64, n + n // 8 + 64), (n, used)
        del st


def test_buffer_protocol_export_keeps_owner():
    st = rtx.Storage(64)
    m = memoryview(st)
    assert st.exports == 1
    del st
    gc.collect()
    m[0] = 5  # still valid memory
    assert m[0] == 5
    m.release()


def test_zeroed_storage():
    st = _kernels.Storage(1 << 16, True)
    assert not np.frombuffer(st, dtype=np.uint8).any()


# -------------------------------------------------- arrays made over a Storage
@pytest.mark.parametrize("dt", ["float32", "float64", "int32", "int64", "bool", "uint8",
                                "float16", "complex64", ">f4"])
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (7,), (16, 16), (2, 3, 4, 5)])
def test_storage_array_is_an_owned_c_contiguous_array(dt, shape):
    dtype = np.dtype(dt)
    base = current()
    a = _kernels.storage_array(shape, dtype)
    assert a.shape == shape and a.dtype == dtype
    assert type(a.base) is _kernels.Storage and a.base.exports == 0   # no second owner
    assert a.base.nbytes == a.nbytes == int(np.prod(shape)) * dtype.itemsize
    assert a.flags.c_contiguous and a.flags.writeable and not a.flags.owndata
    assert a.base.address == a.__array_interface__["data"][0]
    assert a.base.address % 64 == 0
    a[...] = 1
    assert (a == 1).all()
    z = _kernels.storage_array(shape, dtype, True)
    assert not z.any()
    del a, z
    assert current() == base                  # both blocks given back once


def test_storage_array_memory_outlives_the_array_through_its_views():
    base = current()
    a = _kernels.storage_array((4, 8), np.dtype(np.float64))
    a[...] = np.arange(32.0).reshape(4, 8)
    v = a[1:, ::2].T
    del a
    gc.collect()
    assert current() > base
    np.testing.assert_array_equal(v, np.arange(32.0).reshape(4, 8)[1:, ::2].T)
    del v
    assert current() == base


@pytest.mark.parametrize("shape,dt,exc", [
    ((-1,), "float32", ValueError),
    ((2, -3), "float32", ValueError),
    ((-1, -1), "float32", ValueError),       # (a positive product: each dim is checked)
    ((1 << 31, 1 << 31), "float32", MemoryError),
    ((1 << 61, 4), "uint8", MemoryError),
    ((1 << 62,), "float64", MemoryError),
    ((1 << 70,), "float32", OverflowError),  # (rtx's empty turns it into MemoryError)
    ((1.5,), "float32", TypeError),
    ((1,) * 65, "float32", ValueError),
    ((3,), "object", TypeError),             # uninitialised pointers: never
    ((3,), "V8", TypeError),
    ((3,), [("a", "f4")], TypeError),
    ((3,), "U4", TypeError),
])
def test_storage_array_rejects_bad_arguments_before_allocating(shape, dt, exc):
    base = current()
    allocs = rtx.memory_stats()["allocations"]
    with pytest.raises(exc):
        _kernels.storage_array(shape, np.dtype(dt))
    assert current() == base and rtx.memory_stats()["allocations"] == allocs


def _bits(x):
    return np.ascontiguousarray(x).reshape(-1).view(np.uint8)


@pytest.mark.valgrind
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 7), (2, 3, 4)])
def test_owned_binary_and_unary_are_numpys_bits_in_an_owned_array(dt, shape):
    rng = np.random.default_rng(3)
    a = np.asarray(rng.standard_normal(shape), dtype=dt)
    b = np.asarray(rng.standard_normal(shape) + 2, dtype=dt)
    strided = np.asarray(rng.standard_normal(shape[::-1]), dtype=dt).T   # (any strides)
    a0, b0 = a.copy(), b.copy()
    base = current()
    if a.size:    # signed zeros, a NaN and an infinity through the arithmetic loops
        a.flat[0], b.flat[0] = -0.0, 0.0
        a.flat[-1] = np.nan if a.size > 1 else np.inf
        a0, b0 = a.copy(), b.copy()
    cases = [(np.add, a, b), (np.true_divide, a, b), (np.multiply, a, 0.5),
             (np.subtract, a, 3), (np.maximum, strided, b), (np.power, b, 2),
             # the arithmetic loops: every op, either operand a scalar; numpy's path
             # for strided operands and for scalars its cast rounds or warns on
             (np.subtract, a, b), (np.multiply, a, b), (np.add, a, -0.0),
             (np.true_divide, a, 3.7), (np.subtract, 2.5, a), (np.true_divide, 1, b),
             (np.add, -7, a), (np.multiply, 0.1, a), (np.add, strided, strided),
             (np.subtract, strided, 1.5), (np.multiply, a, 2 ** 30), (np.add, a, 1e300)]
    for uf, x, y in cases:
        with np.errstate(all="ignore"):   # (x / 0, NaN; 1e300 in float32: the cast warns)
            out = _kernels.owned_binary(uf, x, y, 1 << 20)
            ref = uf(x, y)
        assert type(out.base) is _kernels.Storage and out.flags.c_contiguous
        assert out.dtype == dt and out.shape == shape
        np.testing.assert_array_equal(_bits(out), _bits(ref))
    for uf in (np.tanh, np.exp, np.negative):
        for x in (a, strided):
            out = _kernels.owned_unary(uf, x)
            assert type(out.base) is _kernels.Storage and out.dtype == dt
            np.testing.assert_array_equal(_bits(out), _bits(uf(x)))
    np.testing.assert_array_equal(_bits(a), _bits(a0))
    np.testing.assert_array_equal(_bits(b), _bits(b0))
    del out
    assert current() == base


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_owned_binary_arithmetic_raises_no_floating_point_warning(dt):
    """The arithmetic loops run no ufunc: ``x / 0`` and overflow give numpy's
    values without numpy's RuntimeWarnings (as PyTorch and the threaded path)."""
    x = np.array([1.0, -1.0, 0.0, 3e38], dt)
    z = np.zeros(4, dt)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            outs = [_kernels.owned_binary(np.true_divide, x, z, 1 << 20),
                    _kernels.owned_binary(np.true_divide, x, 0.0, 1 << 20),
                    _kernels.owned_binary(np.true_divide, 1, z, 1 << 20),
                    _kernels.owned_binary(np.multiply, x, 1e10, 1 << 20)]
    with np.errstate(all="ignore"):
        refs = [x / z, x / dt(0), dt(1) / z, x * dt(1e10)]
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_array_equal(_bits(out), _bits(ref))


@pytest.mark.parametrize("ufunc", [np.maximum, np.minimum, np.add, np.subtract,
                                   np.multiply, np.true_divide, np.power, np.arctan2])
@pytest.mark.parametrize("b_kind", ["array", "float", "strided"])
def test_owned_binary_calls_the_ufunc_without_deprecated_arguments(ufunc, b_kind):
    """Operands the loops do not take go to the ufunc with ``out=`` as a keyword:
    numpy 2 deprecates a third positional argument of ``maximum`` / ``minimum``
    (``rtx.minimum(a, b)`` warned)."""
    x = np.array([[1.0, -2.0, 0.5], [3.0, -0.25, 2.0]], np.float32)
    b = {"array": x[::-1].copy(), "float": 1.5, "strided": x[:, ::-1]}[b_kind]
    x_in = x if b_kind != "strided" else x[::-1]     # also a non-contiguous first operand
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="ignore"):
            out = _kernels.owned_binary(ufunc, x_in, b, 1 << 20)
            ref = ufunc(x_in, b)
    assert out is not None      # (same-shape operands: the fallback, never a refusal)
    np.testing.assert_array_equal(_bits(out), _bits(ref))


def test_minimum_and_maximum_faces_do_not_warn():
    a, b = rtx.randn(3, 4, seed=0), rtx.randn(3, 4, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lo, hi = rtx.minimum(a, b).numpy(), rtx.maximum(a, b).numpy()
    np.testing.assert_array_equal(lo, np.minimum(a.numpy(), b.numpy()))
    np.testing.assert_array_equal(hi, np.maximum(a.numpy(), b.numpy()))


class _Sub(np.ndarray):
    pass


@pytest.mark.valgrind
def test_owned_binary_and_unary_leave_the_rest_to_the_general_path():
    f, d = np.ones((2, 3), np.float32), np.ones((2, 3))
    allocs = rtx.memory_stats()["allocations"]
    for a, b in [(f, d),                                  # dtypes differ: promotion
                 (f, np.ones(3, np.float32)),             # shapes differ: broadcasting
                 (f, np.ones((3, 2), np.float32)),
                 (f, True), (f, np.float32(2)), (f, [1.0]), (f, None),   # not float / int
                 (np.ones(3, np.int64), np.ones(3, np.int64)),
                 (np.ones(3, np.float16), 1.0),
                 (np.ones(3, ">f4"), np.ones(3, ">f4")),  # not numpy's own descriptor
                 (f.view(_Sub), f), ([1.0, 2.0], 1.0), (2.0, f.T), (2.0, f.view(_Sub)),
                 (2 ** 30, f), (True, f), (1.0, 2.0), (2.0, d.astype(np.int64))]:
        assert _kernels.owned_binary(np.add, a, b, 1 << 20) is None
    # a number first: only the four arithmetic loops (the reflected operators)
    assert _kernels.owned_binary(np.maximum, 2.0, f, 1 << 20) is None
    assert _kernels.owned_binary(np.add, f, f, f.size) is None           # max_size reached
    assert _kernels.owned_binary(np.add, f, f, f.size + 1) is not None
    for a in [np.ones(3, np.int32), np.ones(3, ">f8"), f.view(_Sub), [1.0], 1.0]:
        assert _kernels.owned_unary(np.exp, a) is None
    assert rtx.memory_stats()["allocations"] == allocs + 1


@pytest.mark.valgrind
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", [(16, 16, 16), (3, 5, 7), (1, 1, 1), (0, 4, 3), (4, 0, 3),
                                 (4, 3, 0)])
def test_owned_matmul_is_np_dots_bits_in_an_owned_array(dt, mkn):
    m, k, n = mkn
    rng = np.random.default_rng(5)
    a = np.asarray(rng.standard_normal((m, k)), dtype=dt)
    b = np.asarray(rng.standard_normal((k, n)), dtype=dt)
    at = np.asarray(rng.standard_normal((k, m)), dtype=dt).T        # transposed: any strides
    bs = np.asarray(rng.standard_normal((k, 2 * n)), dtype=dt)[:, ::2]
    a0, b0 = a.copy(), b.copy()
    base = current()
    for x, y in [(a, b), (at, b), (a, bs), (at, bs)]:
        out = _kernels.owned_matmul(x, y, 1 << 20)
        assert type(out.base) is _kernels.Storage and out.flags.c_contiguous
        assert out.dtype == dt and out.shape == (m, n)
        np.testing.assert_array_equal(_bits(out), _bits(np.dot(x, y)))
    np.testing.assert_array_equal(_bits(a), _bits(a0))
    np.testing.assert_array_equal(_bits(b), _bits(b0))
    del out
    assert current() == base


@pytest.mark.valgrind
def test_owned_matmul_leaves_the_rest_to_the_general_path():
    f = np.ones((2, 3), np.float32)
    g = np.ones((3, 4), np.float32)
    allocs = rtx.memory_stats()["allocations"]
    for a, b in [(f, g.astype(np.float64)),              # dtypes differ: promotion
                 (f, f),                                  # misaligned: the general path raises
                 (f, np.ones(3, np.float32)),             # 1-D: not the 2-D case
                 (np.ones((2, 2, 3), np.float32), g),     # batched
                 (np.ones((2, 3), np.int64), np.ones((3, 4), np.int64)),
                 (np.ones((2, 3), np.float16), np.ones((3, 4), np.float16)),
                 (np.ones((2, 3), ">f4"), np.ones((3, 4), ">f4")),   # not numpy's descriptor
                 (f.view(_Sub), g), (f, g.view(_Sub)), (f.tolist(), g), (f, 2.0)]:
        assert _kernels.owned_matmul(a, b, 1 << 20) is None
    assert _kernels.owned_matmul(f, g, 2 * 3 * 4) is None       # max_size reached
    # k = 0: m * n * k is 0, but the output is m x n (here 2**62 elements: a wrapped
    # byte count would have been a tiny buffer for it)
    huge_a = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (2**31, 0), (0, 4))
    huge_b = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (0, 2**31), (4, 0))
    assert _kernels.owned_matmul(huge_a, huge_b, 1 << 20) is None
    assert _kernels.owned_matmul(np.ones((4, 0), np.float32), np.ones((0, 5), np.float32),
                                 20) is None                      # m * n reached
    assert _kernels.owned_matmul(np.ones((4, 0), np.float32), np.ones((0, 5), np.float32),
                                 21) is not None
    assert _kernels.owned_matmul(f, g, 2 * 3 * 4 + 1) is not None
    assert rtx.memory_stats()["allocations"] == allocs + 2


def test_cpu_empty_raises_memory_error_for_any_oversized_shape():
    from rtx.backend.cpu._alloc import empty
    for shape in [(1 << 70,), (1 << 40, 1 << 40), (1 << 62,)]:
        with pytest.raises(MemoryError):
            empty(shape, np.float32)
    assert empty([2, 3], np.float32).shape == (2, 3)         # a list: the general path
    assert empty((2,), "datetime64[s]").dtype == np.dtype("datetime64[s]")


# ------------------------------------------------------ uncached_frees blocks
def _cached():
    gc.collect()
    return rtx.memory_stats()["cached_bytes"]


def test_frees_inside_an_uncached_block_go_to_the_system():
    rtx.empty_cache()
    kept = rtx.Storage(1 << 16)
    st = rtx.Storage(1 << 20)
    before = rtx.memory_stats()
    with _kernels.uncached_frees():
        del st
        gc.collect()
        tmp = rtx.Storage(3 << 20)      # made and freed inside: not cached either
        del tmp
        gc.collect()
        with _kernels.uncached_frees():  # nests
            pass
        one_more = rtx.Storage(1 << 18)
    after = rtx.memory_stats()
    assert after["cached_bytes"] == before["cached_bytes"] == 0
    assert after["system_frees"] - before["system_frees"] == 2
    del one_more, kept                  # outside the block: cached as usual
    assert _cached() > 0
    rtx.empty_cache()


def test_an_uncached_block_is_closed_by_an_exception_and_is_not_reentrant():
    rtx.empty_cache()
    blk = _kernels.uncached_frees()
    with pytest.raises(KeyError):
        with blk:
            raise KeyError("x")
    st = rtx.Storage(1 << 16)
    del st
    assert _cached() > 0                # the block closed: caching again
    rtx.empty_cache()
    with blk:
        with pytest.raises(RuntimeError, match="already open"):
            blk.__enter__()
    st = rtx.Storage(1 << 16)
    del st
    assert _cached() > 0
    rtx.empty_cache()


def test_another_threads_frees_are_cached_during_an_uncached_block():
    import threading
    rtx.empty_cache()
    inside, done = threading.Event(), threading.Event()

    def other():
        inside.wait()
        s = rtx.Storage(1 << 16)
        del s
        with _kernels.uncached_frees():   # another thread's block while one is open:
            s = rtx.Storage(1 << 17)      # a no-op (it is only a hint), never an error
            del s
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with _kernels.uncached_frees():
        inside.set()
        done.wait()
        t.join()
        assert rtx.memory_stats()["cached_bytes"] == (1 << 16) + (1 << 17)
    rtx.empty_cache()


def test_building_a_sampler_leaves_nothing_in_the_cache():
    from rtx.loader import NeighborSampler
    rng = np.random.default_rng(0)

    class G:
        num_nodes_dict = {"a": 5000, "b": 3000}
        edge_index_dict = {("a", "to", "b"): np.stack([rng.integers(0, 5000, 200_000),
                                                        rng.integers(0, 3000, 200_000)]),
                           ("b", "back", "a"): np.stack([rng.integers(0, 3000, 100_000),
                                                          rng.integers(0, 5000, 100_000)])}

    rtx.empty_cache()
    before = rtx.memory_stats()
    s = NeighborSampler(G(), [5, 3])
    after = rtx.memory_stats()
    assert after["cached_bytes"] == 0 and after["frees"] > before["frees"]
    assert after["current_bytes"] - before["current_bytes"] >= s.nbytes
    out = s.sample({"b": np.arange(10)})          # and it samples
    assert out.n_id_dict["b"][:10].tolist() == list(range(10))
