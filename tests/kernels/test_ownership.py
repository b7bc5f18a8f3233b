"""Ownership torture tests: who keeps which memory alive, and for how long.

One rtx ``Storage`` owns each allocation; numpy views (buffer protocol), rtx
views, tape-saved tensors and DLPack capsules only *reference* it.  Each test
drops the objects in awkward orders (views outliving their tensor and the
reverse, long view chains, captured-by-the-tape-then-released, exported and
re-imported), checks the values survive exactly, checks copy-vs-share by
writing through one side, and -- through the autouse ``baseline`` fixture --
that ``rtx.memory_stats()['current_bytes']`` is back where it started.

All of these are marked ``valgrind``: ``tools/valgrind_job.py`` runs them under
memcheck (a dangling read through a numpy view is invisible to ASan, which sees
only instrumented code, but not to valgrind), and ``tools/asan_job.py`` runs
them with the rest of the suite.
"""

from __future__ import annotations

import gc
import itertools
import weakref

import numpy as np
import pytest

import rtx
from rtx import _kernels

pytestmark = pytest.mark.valgrind

DTYPES = [np.float32, np.float64]


def current() -> int:
    gc.collect()
    return rtx.memory_stats()["current_bytes"]


@pytest.fixture(autouse=True)
def baseline():
    """Every test must give back every byte it allocated through rtx."""
    base = current()
    yield
    assert current() == base, "rtx memory not returned to its baseline"


def ref_array(shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ------------------------------------------------------- views vs their tensor
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("make_view", [
    lambda t: t.numpy(),
    lambda t: np.asarray(t),
    lambda t: np.asarray(t)[1:, ::2],
    lambda t: t.numpy().T,
    lambda t: np.asarray(t).reshape(-1)[3:17],
    lambda t: memoryview(t.numpy()),
], ids=["numpy", "asarray", "slice", "T", "flat-slice", "memoryview"])
def test_numpy_view_outlives_its_tensor(dtype, make_view):
    ref = ref_array((6, 5), dtype)
    t = rtx.tensor(ref)
    v = make_view(t)
    expect = np.array(v, copy=True)
    del t
    gc.collect()
    _ = rtx.randn(6, 5, dtype=dtype, seed=1)  # would reuse a freed block from the cache
    np.testing.assert_array_equal(np.asarray(v), expect)
    arr = np.asarray(v)
    arr[...] = 3.0                            # still writable, still ours
    assert np.all(np.asarray(v) == 3.0)
    del v, arr, _


@pytest.mark.parametrize("dtype", DTYPES)
def test_rtx_views_outlive_their_base_in_every_order(dtype):
    ref = ref_array((8, 6), dtype)
    for order in itertools.permutations(range(3)):
        t = rtx.tensor(ref)
        objs = [t, t[2:7].T, t[1:7:2].T[1:]]
        expect = [np.array(o.numpy(), copy=True) for o in objs]
        alive = dict(enumerate(objs))
        del t, objs
        for k in order:
            del alive[k]
            gc.collect()
            for j, o in alive.items():
                np.testing.assert_array_equal(o.numpy(), expect[j])
        assert not alive


def test_tensor_outlives_its_numpy_views():
    t = rtx.arange(24, dtype=rtx.float64).reshape(4, 6)
    views = [t.numpy(), np.asarray(t)[::2], memoryview(t.numpy())]
    del views
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(24.0).reshape(4, 6))
    t.add_(1)
    np.testing.assert_array_equal(t.numpy(), np.arange(1.0, 25.0).reshape(4, 6))


@pytest.mark.parametrize("dtype", DTYPES)
def test_view_chains_reshape_of_transpose_of_slice(dtype):
    ref = ref_array((10, 4, 3), dtype)
    t = rtx.tensor(ref)
    s = t[2:9:3]                     # slice: a view
    p = s.transpose(0, 2)            # transpose: a view
    r = p.reshape(-1, 2)             # reshape of a non-contiguous view: a copy
    q = r[1:].T.reshape(-1)[::2]     # and on, through more views
    want_r = ref[2:9:3].transpose(2, 1, 0).reshape(-1, 2)
    want_q = want_r[1:].T.reshape(-1)[::2]
    del t, s, p
    gc.collect()
    np.testing.assert_array_equal(r.numpy(), want_r)
    np.testing.assert_array_equal(q.numpy(), want_q)
    del r
    gc.collect()
    np.testing.assert_array_equal(q.numpy(), want_q)


def test_view_chain_of_contiguous_reshapes_shares_to_the_root():
    t = rtx.zeros(4, 6, dtype=rtx.float64)
    v = t.reshape(2, 12).reshape(24)[5:].reshape(19, 1)
    del t
    gc.collect()
    v.fill_(2.0)
    root = v.numpy()
    while root.base is not None and isinstance(root.base, np.ndarray):
        root = root.base
    whole = np.asarray(root).reshape(-1)
    assert whole[:5].tolist() == [0.0] * 5 and whole[5:].tolist() == [2.0] * 19


def test_many_views_across_gc_collect():
    t = rtx.randn(50, 8, dtype=rtx.float64, seed=3)
    ref = t.numpy().copy()
    views = [t[i:i + 3] for i in range(0, 48, 2)] + [t.T[j] for j in range(8)]
    del t
    for _ in range(3):
        gc.collect()
    for i, v in enumerate(views[:24]):
        np.testing.assert_array_equal(v.numpy(), ref[2 * i:2 * i + 3])
    for j, v in enumerate(views[24:]):
        np.testing.assert_array_equal(v.numpy(), ref.T[j])


# -------------------------------------------------------- copies versus shares
SHARES = {
    "numpy()": lambda t: t.numpy(),
    "basic slice": lambda t: t[1:3],
    "row": lambda t: t[2],
    "T": lambda t: t.T,
    "permute": lambda t: t.permute(1, 0),
    "contiguous reshape": lambda t: t.reshape(-1),
    "view": lambda t: t.view(3, 8),
    "detach": lambda t: t.detach(),
    "same-dtype to()": lambda t: t.to(t.dtype),
    "contiguous()": lambda t: t.contiguous(),
    "broadcast_to": lambda t: t[:1].broadcast_to((4, 6)),   # a view, as in PyTorch
    "expand": lambda t: t[:, :1].expand(4, 6),
}
COPIES = {
    "clone": lambda t: t.clone(),
    "rtx.tensor": lambda t: rtx.tensor(t),
    "rtx.tensor(numpy)": lambda t: rtx.tensor(t.numpy()),
    "other-dtype to()": lambda t: t.to(rtx.float32),
    "fancy index": lambda t: t[[0, 2]],
    "bool mask": lambda t: t[t.numpy()[:, 0] > -100],
    "reshape of transpose": lambda t: t.T.reshape(-1),
    "index_select": lambda t: rtx.index_select(t, [0, 1, 2, 3]),
    "t + 0": lambda t: t + 0,
}


def _first_element(x) -> float:
    return float(np.asarray(x.numpy() if isinstance(x, rtx.Tensor) else x).reshape(-1)[0])


def _write_first(x, value) -> None:
    a = x.numpy() if isinstance(x, rtx.Tensor) else x
    a[(0,) * a.ndim] = value


@pytest.mark.parametrize("name", list(SHARES))
def test_views_share_memory_both_ways(name):
    t = rtx.arange(24, dtype=rtx.float64).reshape(4, 6)
    v = SHARES[name](t)
    # a write through the view shows in the tensor ...
    _write_first(v, -5.0)
    assert -5.0 in t.numpy()
    # ... and a write through the tensor shows in the view (and the view outlives it)
    t.fill_(9.0)
    assert _first_element(v) == 9.0
    del t
    gc.collect()
    assert _first_element(v) == 9.0


@pytest.mark.parametrize("name", list(COPIES))
def test_copies_are_independent_both_ways(name):
    t = rtx.arange(24, dtype=rtx.float64).reshape(4, 6)
    ref = t.numpy().copy()
    c = COPIES[name](t)
    snapshot = np.array(c.numpy(), copy=True)
    _write_first(c, -5.0)
    np.testing.assert_array_equal(t.numpy(), ref)
    t.fill_(9.0)
    got = np.array(c.numpy(), copy=True)
    got.reshape(-1)[0] = snapshot.reshape(-1)[0]
    np.testing.assert_array_equal(got, snapshot)


def test_inplace_update_through_a_slice_view_writes_the_base():
    t = rtx.zeros(5, 3, dtype=rtx.float64)
    v = t[1:4]
    v.add_(2.0)
    v.mul_(3.0)
    v.sub_(1.0)
    v.div_(5.0)
    want = np.zeros((5, 3))
    want[1:4] = ((0 + 2.0) * 3.0 - 1.0) / 5.0
    np.testing.assert_array_equal(t.numpy(), want)


# --------------------------------------------------------------- from_numpy
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_from_numpy_shares_and_keeps_the_array_alive(dtype):
    a = np.zeros(12, dtype=dtype)
    wr = weakref.ref(a)
    t = rtx.from_numpy(a)
    a[3] = 1
    assert t.numpy()[3] == 1                      # shares: numpy -> rtx
    del a
    gc.collect()
    assert wr() is not None                       # rtx keeps the array alive
    t.numpy()[5] = 1
    assert wr()[5] == 1                           # shares: rtx -> numpy
    v = t[2:8]
    del t
    gc.collect()
    assert wr() is not None                       # ... and so does a view of the tensor
    assert v.numpy().tolist() == [0, 1, 0, 1, 0, 0]
    del v
    gc.collect()
    assert wr() is None                           # the last reference went: freed


def test_from_numpy_array_cannot_be_resized_under_rtx():
    a = np.arange(10.0)
    t = rtx.from_numpy(a)
    with pytest.raises(ValueError):
        a.resize(1000)            # numpy refuses: another object references a's data
    with pytest.raises(ValueError):
        a.resize(1000, refcheck=True)
    np.testing.assert_array_equal(t.numpy(), np.arange(10.0))
    del t
    gc.collect()
    a.resize(20)                  # once rtx let go, numpy may resize again
    assert a.shape == (20,)


def test_rtx_owned_array_cannot_be_resized():
    t = rtx.arange(10, dtype=rtx.float64)
    a = t.numpy()
    with pytest.raises(ValueError):
        a.resize(1000)            # the data is owned by an rtx Storage, not by the array
    with pytest.raises(ValueError):
        a.resize(1000, refcheck=False)
    np.testing.assert_array_equal(t.numpy(), np.arange(10.0))


@pytest.mark.parametrize("make", [
    lambda: np.arange(24.0).reshape(4, 6)[:, ::2],                 # non-contiguous
    lambda: np.arange(12.0).astype(">f8"),                         # big-endian
    lambda: np.frombuffer(b"\0" + np.arange(6.0).tobytes(), dtype=np.float64, offset=1),
    lambda: np.arange(6, dtype=np.int16),                          # unsupported: converted
    lambda: np.arange(6, dtype=np.float16),
])
def test_from_numpy_copies_what_it_cannot_share(make):
    a = make()
    ref = np.array(a, copy=True)
    try:
        t = rtx.from_numpy(a)
    except TypeError:
        assert a.dtype in (np.int16, np.float16)   # refused cleanly is fine too
        np.testing.assert_array_equal(a, ref)
        return
    if a.flags.writeable:
        a[...] = 0
        np.testing.assert_array_equal(t.numpy(), ref.astype(t.dtype))
    del a
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), ref.astype(t.dtype))


def test_from_numpy_read_only_array_is_never_written():
    a = np.arange(6.0)
    a.flags.writeable = False
    t = rtx.from_numpy(a)
    t2 = t * 2
    with rtx.no_grad():
        try:
            t.add_(1)           # either refused, or computed into a new buffer
        except (ValueError, RuntimeError, TypeError):
            pass
    np.testing.assert_array_equal(a, np.arange(6.0))
    np.testing.assert_array_equal(t2.numpy(), 2 * np.arange(6.0))


# ------------------------------------------------------------ buffer protocol
def test_storage_memoryview_keeps_its_owner_and_counts_exports():
    base = current()
    st = rtx.Storage(256)
    m1 = memoryview(st)
    m2 = memoryview(st)
    assert st.exports == 2
    assert m1.obj is st
    del st
    gc.collect()
    assert current() == base + 256              # the views keep the block alive
    m1[:] = b"\x07" * 256
    assert m2.tobytes() == b"\x07" * 256
    owner = m2.obj
    m1.release()
    assert owner.exports == 1
    with pytest.raises(ValueError):
        m1[0]
    m2.release()
    assert owner.exports == 0
    del owner
    assert current() == base                    # the last reference went: freed


def test_storage_numpy_frombuffer_and_nested_views():
    base = current()
    st = rtx.Storage(8 * 96)                     # a whole size class: 768 bytes
    a = np.frombuffer(st, dtype=np.float64)
    a[:] = np.arange(96.0)
    b = np.frombuffer(memoryview(st).cast("d")[10:20], dtype=np.float64)
    c = a[:90].reshape(9, 10).T[::3]
    d = np.asarray(memoryview(c.copy()))
    del st
    gc.collect()
    assert current() == base + 768
    np.testing.assert_array_equal(b, np.arange(10.0, 20.0))
    np.testing.assert_array_equal(c, np.arange(90.0).reshape(9, 10).T[::3])
    del a, b
    gc.collect()
    assert current() == base + 768              # c still holds it
    del c
    assert current() == base                    # d was a copy: it does not hold the storage
    assert d.shape == (4, 9)


def test_zero_size_storage_exports():
    st = rtx.Storage(0)
    a = np.frombuffer(st, dtype=np.float32)
    assert a.shape == (0,)
    m = memoryview(st)
    assert m.nbytes == 0
    del st, a, m
    t = rtx.zeros(0, 5)
    assert t.numpy().shape == (0, 5)
    z = rtx.index_select(t, np.zeros(0, dtype=np.int64))
    assert z.shape == (0, 5)


def test_memoryview_of_a_tensor_view_survives_everything():
    t = rtx.randn(6, 4, dtype=rtx.float64, seed=4)
    ref = t.numpy().copy()
    m = memoryview(t[2:5].numpy())
    del t
    gc.collect()
    np.testing.assert_array_equal(np.asarray(m), ref[2:5])


# ------------------------------------------------------------- autograd tape
def test_tensors_captured_by_the_tape_survive_their_python_objects():
    w_ref = ref_array((4, 3))
    x = rtx.tensor(ref_array((5, 4), seed=1), requires_grad=True)
    w = rtx.tensor(w_ref, requires_grad=True)
    idx = np.array([0, 2, 2, 4, 1], dtype=np.int64)
    h = rtx.index_select(x, idx) * 2.0          # the tape saves intermediates
    y = (h @ w).tanh()
    out = rtx.index_add(y, idx, 5).sum()
    gx_w = weakref.ref(h)
    del h, y                                    # python objects gone; tape still holds data
    gc.collect()
    assert gx_w() is None
    out.backward()
    # reference gradients by hand (numpy)
    xn = x.numpy()
    hn = xn[idx] * 2.0
    yn = np.tanh(hn @ w_ref)
    g_y = 1.0 - yn ** 2
    g_w = hn.T @ g_y
    g_h = g_y @ w_ref.T
    g_x = np.zeros_like(xn)
    np.add.at(g_x, idx, g_h * 2.0)
    np.testing.assert_allclose(w.grad.numpy(), g_w, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), g_x, rtol=1e-12)


def test_dropping_the_output_frees_the_graph_without_gc():
    x = rtx.randn(64, 16, dtype=rtx.float64, requires_grad=True, seed=5)
    before = current()
    gc.disable()
    try:
        y = (x * 3.0).exp().sum(0)
        node = weakref.ref(y.grad_fn)
        assert rtx.memory_stats()["current_bytes"] > before
        del y                                   # refcounting alone frees it: no cycles
        assert node() is None
        assert rtx.memory_stats()["current_bytes"] == before
    finally:
        gc.enable()


def test_backward_releases_saved_tensors_and_retain_graph_keeps_them():
    x = rtx.randn(32, 8, dtype=rtx.float64, requires_grad=True, seed=6)
    y = (x * x).sigmoid().sum()
    held = current()
    y.backward(retain_graph=True)
    g1 = x.grad.numpy().copy()
    y.backward()                                # second pass allowed, then released
    np.testing.assert_allclose(x.grad.numpy(), 2 * g1, rtol=1e-12)
    with pytest.raises(RuntimeError):
        y.backward()                            # released: a clear error, not a crash
    x.grad = None
    assert current() < held                     # saved tensors went with the graph
    del y


def test_grads_and_graph_go_away_with_the_leaves():
    x = rtx.randn(16, 4, dtype=rtx.float64, requires_grad=True, seed=7)
    w = rtx.randn(4, 4, dtype=rtx.float64, requires_grad=True, seed=8)
    for _ in range(3):
        loss = (x @ w).relu().mean()
        loss.backward()
    grads = (weakref.ref(x.grad), weakref.ref(w.grad))
    del x, w, loss
    gc.collect()
    assert grads[0]() is None and grads[1]() is None


def test_no_grad_records_nothing():
    x = rtx.randn(8, 8, requires_grad=True, seed=9)
    with rtx.no_grad():
        y = (x * 2).exp()
    assert y.grad_fn is None and not y.requires_grad


def test_exception_inside_an_op_leaks_nothing():
    x = rtx.randn(10, 3, dtype=rtx.float64, requires_grad=True, seed=10)
    for bad in ([0, 10], [-1], np.array([1.5]), np.array([[0]])):
        with pytest.raises((IndexError, TypeError)):
            rtx.index_select(x * 2, bad)
    with pytest.raises(ValueError):
        rtx.index_add(x * 2, [0, 1], 4)
    with pytest.raises(ValueError):
        x @ rtx.randn(4, 2, dtype=rtx.float64)


# --------------------------------------------------------------------- DLPack
needs_dlpack = pytest.mark.skipif(not hasattr(rtx, "from_dlpack"), reason="no rtx.from_dlpack")


@needs_dlpack
@pytest.mark.parametrize("dtype", DTYPES)
def test_dlpack_consumer_outlives_every_rtx_object(dtype):
    t = rtx.tensor(ref_array((5, 4), dtype))
    ref = t.numpy().copy()
    v = t[1:4]
    a = np.from_dlpack(v)                 # numpy consumes rtx's capsule
    del t, v
    gc.collect()
    _ = rtx.randn(5, 4, dtype=dtype, seed=2)
    np.testing.assert_array_equal(a, ref[1:4])
    a[0, 0] = 42.0                        # zero-copy and writable
    b = rtx.from_dlpack(a)                # and back again
    assert b.numpy()[0, 0] == 42.0
    del a
    gc.collect()
    np.testing.assert_array_equal(b.numpy()[1:], ref[2:4])
    del b, _


@needs_dlpack
def test_dlpack_round_trip_chains_and_unconsumed_capsules():
    before = _kernels.dlpack_stats() if hasattr(_kernels, "dlpack_stats") else None
    t = rtx.arange(20, dtype=rtx.float64).reshape(4, 5)
    x = t
    for _ in range(5):                    # rtx -> numpy -> rtx -> ... all one buffer
        x = rtx.from_dlpack(np.from_dlpack(x))
    x.numpy()[0, 0] = -1.0
    assert t.numpy()[0, 0] == -1.0
    y = rtx.from_dlpack(np.from_dlpack(t.T))   # strided: imported as a copy
    y.numpy()[0, 1] = -2.0
    assert t.numpy()[1, 0] == 5.0
    np.testing.assert_array_equal(y.numpy()[1:], t.numpy().T[1:])
    caps = [t.__dlpack__() for _ in range(3)]   # exported, never consumed
    del caps
    del t, x, y
    gc.collect()
    if before is not None:                # every capsule's deleter ran, exactly once
        now = _kernels.dlpack_stats()
        assert now["exported"] - before["exported"] == 9
        assert now["deleted"] - before["deleted"] == 9


@needs_dlpack
def test_dlpack_capsules_freed_once_whatever_the_order():
    for order in itertools.permutations(range(3)):
        t = rtx.randn(6, 3, dtype=rtx.float64, seed=11)
        ref = t.numpy().copy()
        objs = [t, np.from_dlpack(t), rtx.from_dlpack(np.from_dlpack(t[2:]))]
        alive = dict(enumerate(objs))
        del t, objs
        for k in order:
            del alive[k]
            gc.collect()
            for j, o in alive.items():
                arr = o.numpy() if isinstance(o, rtx.Tensor) else o
                np.testing.assert_array_equal(arr, ref if j < 2 else ref[2:])


# --------------------------------------- kernels at their edges (memcheck them)
@pytest.fixture
def parallel_everywhere():
    """Every index kernel takes its parallel path, even on tiny inputs."""
    old = _kernels.set_parallel_thresholds(gather=0, scatter=0, scatter_min_row_bytes=0)
    old_stream = (_kernels.set_gather_stream_min(0)
                  if hasattr(_kernels, "set_gather_stream_min") else None)
    yield
    _kernels.set_parallel_thresholds(**old)
    if old_stream is not None:
        _kernels.set_gather_stream_min(old_stream)
    rtx.set_num_threads(None)


STRATEGIES = sorted(getattr(_kernels, "SCATTER_STRATEGIES", {"auto": 0}))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("F", [1, 3, 4, 8, 9, 33])
def test_gather_edges_every_path(dtype, itype, F, parallel_everywhere):
    rng = np.random.default_rng(F)
    for n, e in [(1, 0), (1, 5), (7, 1), (7, 37), (40, 200)]:
        x = rng.standard_normal((n, F)).astype(dtype)
        idx = rng.integers(0, n, e).astype(itype)
        if e:
            idx[-1] = n - 1                       # the last row: the edge of the buffer
        for threads in (1, 2, 3):
            rtx.set_num_threads(threads)
            got = rtx.index_select(rtx.tensor(x), idx).numpy()
            np.testing.assert_array_equal(got, x[idx])
            out = np.full((e, F), -7, dtype=dtype)
            _kernels.gather_rows(x, idx, out, threads)
            np.testing.assert_array_equal(out, x[idx])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_scatter_edges_every_strategy(dtype, itype, strategy, parallel_everywhere):
    rng = np.random.default_rng(len(strategy))
    code = _kernels.SCATTER_STRATEGIES[strategy] if hasattr(_kernels, "SCATTER_STRATEGIES") \
        else 0
    for n, e, F in [(1, 0, 3), (1, 6, 1), (5, 1, 9), (9, 40, 3), (33, 120, 17), (3, 50, 8)]:
        src = rng.standard_normal((e, F)).astype(dtype)
        for pattern in ("uniform", "one-row", "last-row"):
            if pattern == "uniform":
                idx = rng.integers(0, n, e).astype(itype)
            elif pattern == "one-row":
                idx = np.zeros(e, dtype=itype)
            else:
                idx = np.full(e, n - 1, dtype=itype)
            want = np.zeros((n + 2, F), dtype=dtype)
            np.add.at(want, idx, src)
            for threads in (1, 2, 3):
                out = np.full((n + 2, F), np.nan, dtype=dtype)   # the kernel zero-fills
                _kernels.scatter_add_rows(src, idx, out, threads, code)
                np.testing.assert_array_equal(out, want)
                rtx.set_num_threads(threads)
                got = rtx.index_add(rtx.tensor(src), idx, n + 2).numpy()
                np.testing.assert_array_equal(got, want)


def test_bounds_check_edges():
    for itype in (np.int32, np.int64):
        for n in (0, 1, 5):
            idx = np.array([0, n - 1, n, -1, np.iinfo(itype).max, np.iinfo(itype).min],
                           dtype=itype)
            for k in range(len(idx) + 1):
                sub = np.ascontiguousarray(idx[:k])
                bad = [i for i, v in enumerate(sub.tolist()) if not 0 <= v < n]
                assert _kernels.first_out_of_bounds(sub, n) == (bad[0] if bad else -1)
