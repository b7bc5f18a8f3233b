"""Hardening 3 (issue 17), interop part: what rtx hands out of its checked
objects, DLPack export of what consumers cannot take, expand/broadcast_to as
views, and two leaks (backends kept alive, a block lost to a re-entrant free).

The regression tests failed before their fixes (checked once each, fix stashed);
the others guard the edges of the fixes (backends without views, a finaliser
that empties the cache, ops reading stride-0 inputs)."""

from __future__ import annotations

import gc
import threading
import tracemalloc
import warnings
import weakref

import numpy as np
import pytest
from conftest import run_child
from hypothesis import given, settings
from hypothesis import strategies as st

import rtx
from rtx import _kernels
from rtx.backend.index import is_index_snapshot

try:
    import torch
except ImportError:  # torch is optional: the torch routes are skipped without it
    torch = None

BIG = 10**12


def _bad(a) -> int:
    """An index far out of range that fits ``a``'s dtype (10**12 for int64)."""
    return min(BIG, int(np.iinfo(np.asarray(a).dtype).max))


# --------------------------------------------------------------------------
# 1. nothing a kernel trusts is reachable writable from Python
# --------------------------------------------------------------------------
def _plan_private(plan: rtx.IndexPlan) -> list[np.ndarray]:
    """Copies of what the kernels read from a plan (its indices, its grouping)."""
    ptr, perm = plan._grouping()
    return [np.array(plan._idx), np.array(ptr), np.array(perm)]


def _exposed_arrays(plan: rtx.IndexPlan) -> dict[str, np.ndarray]:
    """Every array a plan's public API returns."""
    ptr, perm = plan.csr()
    return {"indices": plan.indices, "csr ptr": ptr, "csr perm": perm,
            "counts": plan.counts()}


def _write_routes() -> dict[str, object]:
    """Ways a user gets a writable view of an array's memory and writes ``BIG``
    (each returns whether the write happened; refusing is fine)."""

    def numpy_setflags(a):
        v = np.asarray(a)
        try:
            v.setflags(write=True)
        except ValueError:
            return False
        v.reshape(-1)[0] = _bad(v)
        return True

    def memoryview_route(a):
        m = memoryview(a)
        if m.readonly:
            return False
        m.cast("B")[0] = 0xFF
        return True

    def numpy_from_dlpack(a):
        v = np.from_dlpack(a)
        if not v.flags.writeable:
            return False
        v.reshape(-1)[0] = _bad(v)
        return True

    routes = {"np.asarray().setflags": numpy_setflags, "memoryview": memoryview_route,
              "np.from_dlpack": numpy_from_dlpack}
    if torch is not None:
        def torch_route(fn):
            def write(a):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # "not writable" warning
                    t = fn(a)
                t.view(-1)[0] = _bad(a)   # torch ignores numpy's read-only flag
                return True
            return write

        routes["torch.from_dlpack"] = torch_route(torch.from_dlpack)
        routes["torch.from_numpy"] = torch_route(torch.from_numpy)
        routes["torch.as_tensor"] = torch_route(torch.as_tensor)
    return routes


@pytest.mark.parametrize("route", sorted(_write_routes()))
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_plan_arrays_handed_out_never_reach_the_plan(route, idx_dtype):
    write = _write_routes()[route]
    plan = rtx.IndexPlan(np.array([3, 0, 3, 1], dtype=idx_dtype), 5)
    before = _plan_private(plan)
    for name, arr in _exposed_arrays(plan).items():
        assert not is_index_snapshot(arr), name  # the backends would trust it uncopied
        write(arr)
        for got, want in zip(_plan_private(plan), before, strict=True):
            np.testing.assert_array_equal(got, want, err_msg=f"{route} via {name}")
    assert plan.indices.tolist() == [3, 0, 3, 1]
    assert plan.csr()[1].tolist() == [1, 3, 0, 2]


@pytest.mark.parametrize("route", sorted(_write_routes()))
def test_edge_index_arrays_handed_out_never_reach_the_plans(route):
    write = _write_routes()[route]
    edges = rtx.EdgeIndex(np.array([[0, 1, 2, 2], [1, 0, 0, 2]]), 3)
    before = [_plan_private(edges.src), _plan_private(edges.dst)]
    for plan in (edges.src, edges.dst):
        for arr in _exposed_arrays(plan).values():
            write(arr)
    for plan, want in zip((edges.src, edges.dst), before, strict=True):
        for g, w in zip(_plan_private(plan), want, strict=True):
            np.testing.assert_array_equal(g, w)
    x = np.arange(6.0).reshape(3, 2)
    want = np.zeros((3, 2))
    np.add.at(want, [1, 0, 0, 2], x[[0, 1, 2, 2]])
    np.testing.assert_array_equal(rtx.message_passing(rtx.tensor(x), edges, 3).numpy(), want)


def test_the_issue_reproducer_no_longer_crashes():
    """``torch.from_dlpack(edges.src.indices)``, write 10**12, message_passing:
    a segfault before (the write reached the plan's private copy)."""
    pytest.importorskip("torch")
    code = """
import numpy as np, torch, rtx
ei = np.array([[0, 1, 2], [1, 2, 0]])
for pick in (lambda e: e.src.indices, lambda e: e.dst.indices, lambda e: e.dst.csr()[1],
             lambda e: e.src.csr()[1]):
    edges = rtx.EdgeIndex(ei, 3)
    torch.from_dlpack(pick(edges))[0] = 10**12   # a segfault below, before the fix
    x = rtx.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    out = rtx.message_passing(x, edges, 3)
    out.sum().backward()
    assert out.numpy().tolist() == [[4.0, 5.0], [0.0, 1.0], [2.0, 3.0]], out
    assert x.grad.numpy().tolist() == [[1.0, 1.0]] * 3
print("ok")
"""
    r = run_child(code)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


def _public_values(obj):
    """Every value reachable from ``obj``'s public attributes (tuples, lists and
    dicts walked; plans and edge indices walked through their public API)."""
    out = []
    stack = [obj]
    seen = set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        out.append(v)
        if isinstance(v, (tuple, list)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, rtx.EdgeIndex):
            stack.extend([v.src, v.dst])
        elif isinstance(v, rtx.IndexPlan):
            stack.extend(_exposed_arrays(v).values())
        elif hasattr(v, "__dict__") and not isinstance(v, (np.ndarray, type)):
            stack.extend(val for k, val in vars(v).items() if not k.startswith("_"))
    return out


def _graph_calls():
    x = lambda: rtx.tensor([[0.5, 1.5], [2.0, 0.25], [1.0, -1.0]], requires_grad=True)  # noqa: E731
    return {
        "index_select": lambda: rtx.index_select(x(), np.array([1, 0, 2, 2])),
        "index_select plan": lambda: rtx.index_select(x(), rtx.IndexPlan([1, 0, 2], 3)),
        "Tensor.index_select": lambda: x().index_select(0, [2, 2, 0]),
        "index_add": lambda: rtx.index_add(x(), [1, 1, 0], 2),
        "segment_softmax": lambda: rtx.segment_softmax(x(), [1, 1, 0], 2),
        "segment_mean": lambda: rtx.segment_mean(x(), [1, 1, 0], 2),
        "segment_max": lambda: rtx.segment_max(x(), [1, 0, 0], 2),
        "message_passing": lambda: rtx.message_passing(
            x(), np.array([[0, 1, 2], [1, 1, 0]]), 2,
            weight=rtx.tensor([0.5, 2.0, 1.0], requires_grad=True)),
        "cross_entropy": lambda: rtx.nn.functional.cross_entropy(x(), np.array([1, 0, 1])),
        "getitem": lambda: x()[np.array([2, 0])],
    }


@pytest.mark.parametrize("name", sorted(_graph_calls()))
def test_saved_state_exposes_no_trusted_index_memory(name):
    """``grad_fn.ctx`` is public: nothing under its public names may be memory the
    backends trust without copying (an ``IndexSnapshot``) or the live
    ``IndexPlan`` arrays."""
    y = _graph_calls()[name]()
    node = y.grad_fn
    found = [v for v in _public_values(node.ctx) if isinstance(v, np.ndarray)]
    for v in found:
        assert not is_index_snapshot(v), (name, v)
        base = v
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        assert type(base) is not _kernels.IndexSnapshot, (name, v)
    y.sum().backward()  # the saved state still works


# --------------------------------------------------------------------------
# 2. DLPack: negative strides are refused (BufferError), unless copy=True
# --------------------------------------------------------------------------
def _reversed_views():
    x = rtx.arange(24, dtype=rtx.float64).reshape(4, 6)
    return {"[:, ::-1]": x[:, ::-1], "[::-1]": x[::-1], "1-D [::-2]": x.reshape(-1)[::-2],
            "T[::-1]": x.T[::-1], "int [:, ::-1]": rtx.arange(6).reshape(2, 3)[:, ::-1]}


@pytest.mark.parametrize("name", sorted(_reversed_views()))
@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_negative_strides_raise_buffer_error_before_exporting(name, max_version):
    v = _reversed_views()[name]
    before = _kernels.dlpack_stats()
    for copy in (None, False):
        with pytest.raises(BufferError, match="negative strides"):
            v.__dlpack__(max_version=max_version, copy=copy)
    assert _kernels.dlpack_stats() == before  # nothing exported, nothing to delete
    with pytest.raises(BufferError, match="negative strides"):
        np.from_dlpack(v)
    a = np.from_dlpack(v, copy=True)    # a copy is fine: it is C-contiguous
    np.testing.assert_array_equal(a, v.numpy())
    assert not np.shares_memory(a, v.numpy())
    t = rtx.from_dlpack(v)              # rtx's own import: copy=None copies then
    np.testing.assert_array_equal(t.numpy(), v.numpy())
    with pytest.raises(BufferError):
        rtx.from_dlpack(v, copy=False)


def test_negative_strides_do_not_abort_torch():
    """torch 2.13's from_dlpack threw a C++ exception on negative strides and the
    process died (rc 134); now every torch entry point gets a BufferError."""
    pytest.importorskip("torch")
    code = """
import numpy as np, torch, rtx
v = rtx.arange(6).reshape(2, 3)[:, ::-1]
for f in (torch.from_dlpack, torch.as_tensor, torch.tensor, torch.asarray,
          torch.utils.dlpack.from_dlpack):
    try:
        f(v)
    except BufferError as exc:
        assert "negative strides" in str(exc)
    else:
        raise AssertionError(f"{f.__name__} took a negative-stride view")
t = torch.from_dlpack(v, copy=True)
assert t.tolist() == [[2, 1, 0], [5, 4, 3]] and t.stride() == (3, 1)
one = rtx.arange(3)[::-1][:1]         # a negative stride on an extent-1 dim moves nothing
assert torch.from_dlpack(one).tolist() == [2]
empty = rtx.zeros(0, 3)[:, ::-1]
assert torch.from_dlpack(empty).shape == (0, 3)
print("ok")
"""
    r = run_child(code)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


class _Exporter:
    """A producer exporting a given numpy array through rtx's DLPack export."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return _kernels.dlpack_export(self.a, kw.get("stream"), kw.get("max_version"),
                                      kw.get("dl_device"), kw.get("copy"))

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_harmless_negative_strides_still_export_zero_copy(max_version):
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    # extent-1 dims and empty arrays: a negative stride there moves no address
    for v in (base[::-1][:1], base[:, ::-1][:, :1], base[:, ::-1][:0],
              base[::-1][2:3, ::-1][:, 1:2]):
        assert any(s < 0 for s in v.strides)
        a = np.from_dlpack(_Exporter(v))
        np.testing.assert_array_equal(a, v)
        assert a.shape == v.shape and all(s >= 0 for s in a.strides)
        if v.size:
            assert np.shares_memory(a, v)
    t = rtx.arange(12, dtype=rtx.float32).reshape(3, 4)[::-1][:1]   # the same from rtx
    assert t.numpy().strides[0] < 0
    assert np.shares_memory(np.from_dlpack(t), t.numpy())
    with pytest.raises(BufferError, match="negative strides"):
        _kernels.dlpack_export(base[:, ::-1][:2], None, max_version)


# --------------------------------------------------------------------------
# 4a. a backend passed to use_backend (or fused) is not kept alive by rtx
# --------------------------------------------------------------------------
def test_use_backend_does_not_keep_the_backend_alive():
    b = rtx.fusion.Fusion(rtx.CpuBackend())
    inner = weakref.ref(b.inner)
    ref = weakref.ref(b)
    with rtx.use_backend(b):
        t = rtx.ones(3) * 2.0
    assert t.backend is b
    del b
    gc.collect()
    assert ref() is not None  # the tensor still uses it
    del t
    gc.collect()
    assert ref() is None and inner() is None


def test_use_backend_memory_does_not_grow():
    def loop(n):
        for _ in range(n):
            with rtx.use_backend(rtx.fusion.Fusion(rtx.CpuBackend())):
                pass

    loop(50)   # warm up (first-use caches, free lists)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        loop(1000)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 100_000, grown   # was ~3.5 KB per iteration: 3.5 MB


def test_fusion_for_does_not_keep_the_inner_backend_alive():
    inner = rtx.CpuBackend()
    ref = weakref.ref(inner)
    f = rtx.fusion.fusion_for(inner)
    assert rtx.fusion.fusion_for(inner) is f  # one Fusion per inner while it lives
    with rtx.fusion.enabled(inner) as g:
        assert g is f
        t = rtx.ones(2) + 1.0
    del f, g, inner
    gc.collect()
    assert ref() is not None      # t's backend is the Fusion over it
    del t
    gc.collect()
    assert ref() is None


def test_autodiff_is_shared_while_tensors_live_and_threads_agree():
    b = rtx.CpuBackend()
    with rtx.use_backend(b):
        a = rtx.ones(2)
    got = []
    barrier = threading.Barrier(4)

    def work():
        barrier.wait()
        with rtx.use_backend(b):
            got.append(rtx.ones(2))

    ts = [threading.Thread(target=work) for _ in range(4)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    assert all(x._ad is a._ad for x in got)
    np.testing.assert_array_equal((a + got[0]).numpy(), [2.0, 2.0])  # mixable


def test_unpickling_finds_a_live_backend_of_the_class():
    import pickle

    from rtx.backend.reference import MinimalBackend

    b = MinimalBackend()
    with rtx.use_backend(b):
        t = rtx.tensor([1.0, 2.0])
    u = pickle.loads(pickle.dumps(t))
    assert u.backend is b and (u + t).tolist() == [2.0, 4.0]


# --------------------------------------------------------------------------
# 4b. a Storage freed by a collection in the window of another free
# --------------------------------------------------------------------------
# The cache's free path once allocated a list (a new bucket), which could run a
# collection whose finalisers freed other Storages -- of the same class too --
# inside the outer free: blocks were lost and the limit passed.  The cache is C
# now and a free creates no Python object, so no collection can start inside
# one.  Each test below opens that window as before (gc armed to collect on the
# next tracked allocation, CPython's list free list drained) and checks that
# the finaliser runs only after the outer free has finished, and that every
# block is accounted for when it does.
def _held_blocks() -> int:
    st = _kernels.memory_stats()
    return st["system_allocations"] - st["system_frees"]


def _drain_list_free_list() -> list:
    """Live lists enough to empty CPython's free list of list objects (80): the
    next ``[]`` is then a fresh tracked allocation, which can start a collection
    (a list taken from the free list never does)."""
    return [[] for _ in range(256)]


def _free_in_the_window(outer_size: int, holder: type) -> tuple[dict, dict]:
    """Free a Storage of ``outer_size`` with a collection armed and a cyclic
    ``holder()`` waiting to be collected; returns the stats before and right
    after the free (gc is off again, the holder not yet collected)."""
    was_enabled, threshold = gc.isenabled(), gc.get_threshold()
    gc.disable()
    try:
        gc.collect()
        _kernels.empty_cache()
        outer = _kernels.Storage(outer_size)
        h = holder()
        del h                            # cyclic garbage, uncollected (gc is off)
        base = _kernels.memory_stats()
        keep = _drain_list_free_list()
        gc.set_threshold(1)              # the next tracked allocation collects
        gc.enable()
        del outer                        # ... none happens inside the free
        gc.disable()
        after = _kernels.memory_stats()
        del keep
    finally:
        gc.set_threshold(*threshold)
        if was_enabled:
            gc.enable()
    return base, after


def _class_bytes(n: int) -> int:
    """The size class (bytes counted) of a Storage of ``n`` bytes."""
    before = _kernels.memory_stats()["current_bytes"]
    st = _kernels.Storage(n)
    cls = _kernels.memory_stats()["current_bytes"] - before
    del st
    _kernels.empty_cache()
    return cls


def test_reentrant_free_during_bucket_creation_loses_no_block():
    """The outer free caches its block with no collection inside; the finaliser's
    free of a Storage of the same class comes after and is cached beside it."""
    n = 3 * 1024 * 1024 + 777           # a size class no other test uses
    cls = _class_bytes(n)
    events = []

    class Holder:
        def __init__(self):
            self.me = self               # cyclic: only a collection frees it
            self.st = _kernels.Storage(n)

        def __del__(self):
            s = _kernels.memory_stats()
            events.append((s["frees"], s["cached_bytes"]))
            self.st = None               # the inner free, right here

    base, after = _free_in_the_window(n, Holder)
    assert events == []                  # nothing ran inside the outer free
    assert (after["frees"], after["cached_bytes"]) == (base["frees"] + 1,
                                                       base["cached_bytes"] + cls)
    gc.collect()                         # now the finaliser and its free
    assert events == [(base["frees"] + 1, base["cached_bytes"] + cls)]
    assert _kernels.memory_stats()["cached_bytes"] == base["cached_bytes"] + 2 * cls
    _kernels.empty_cache()
    assert _kernels.memory_stats()["cached_bytes"] == 0
    # both blocks (held when the window opened) back with the system
    assert _held_blocks() == base["system_allocations"] - base["system_frees"] - 2


def test_reentrant_free_keeps_the_cache_under_its_limit():
    """The cache holds one block of the class: the outer block takes the room;
    the finaliser's block, freed after, evicts it (the older) and stays: never
    over the limit."""
    n = 3 * 1024 * 1024 + 2333
    cls = _class_bytes(n)
    ran = []

    class Holder:
        def __init__(self):
            self.me = self
            self.st = _kernels.Storage(n)

        def __del__(self):
            ran.append(_kernels.memory_stats()["cached_bytes"])
            self.st = None

    limit = _kernels.get_cache_limit()
    try:
        _kernels.set_cache_limit(cls)
        base, after = _free_in_the_window(n, Holder)
        assert ran == []                    # nothing ran inside the outer free
        assert after["cached_bytes"] == cls
        gc.collect()
        s = _kernels.memory_stats()
        assert ran == [cls]                 # after the outer free had cached its block
        assert s["cached_bytes"] == cls <= s["cache_limit"]
        assert s["system_frees"] == after["system_frees"] + 1     # the outer block
    finally:
        _kernels.set_cache_limit(limit)
        _kernels.empty_cache()


def test_reentrant_free_that_empties_the_cache_loses_no_block():
    """Same window, but the finaliser calls empty_cache(): it runs after the outer
    free, and gives back the block that free cached."""
    n = 3 * 1024 * 1024 + 1555
    cls = _class_bytes(n)
    ran = []

    class Holder:
        def __init__(self):
            self.me = self

        def __del__(self):
            ran.append(1)
            _kernels.empty_cache()

    base, after = _free_in_the_window(n, Holder)
    assert ran == []                        # nothing ran inside the outer free
    assert after["cached_bytes"] == base["cached_bytes"] + cls
    gc.collect()
    assert ran == [1]
    assert _kernels.memory_stats()["cached_bytes"] == 0
    # the outer block (held when the window opened) back with the system
    assert _held_blocks() == base["system_allocations"] - base["system_frees"] - 1


# --------------------------------------------------------------------------
# 3. expand / broadcast_to are views (as in PyTorch)
# --------------------------------------------------------------------------
VIEW_BACKENDS = {
    "cpu": rtx.CpuBackend,
    "fusion": lambda: rtx.fusion.Fusion(rtx.CpuBackend(), min_elements=0),
}
OVERLAP = "more than one element of the written-to tensor refers to a single memory location"


@pytest.fixture(params=sorted(VIEW_BACKENDS))
def view_backend(request):
    """The backends with strided views (the CPU backend, and Fusion over it)."""
    b = VIEW_BACKENDS[request.param]()
    with rtx.use_backend(b):
        yield b


def test_expand_is_a_view_that_sees_writes_to_its_base(view_backend, dtype):
    x = rtx.tensor(np.arange(4, dtype=dtype))
    b = x.expand(3, 4)                              # the issue's reproducer
    c = x.reshape(4, 1).broadcast_to((2, 4, 3))
    x.add_(1)
    np.testing.assert_array_equal(b.numpy(), np.broadcast_to(np.arange(1, 5, dtype=dtype), (3, 4)))
    np.testing.assert_array_equal(c.numpy()[1, :, 2], np.arange(1, 5, dtype=dtype))
    assert b._version == c._version == x._version == 1    # one storage, one counter
    assert np.shares_memory(b.numpy(), x.numpy())
    assert b.numpy().strides[0] == 0


def test_writes_into_an_expanded_tensor_raise_before_anything_is_written(view_backend):
    x = rtx.tensor([1.0, 2.0, 3.0])
    b = x.expand(2, 3)
    writes = {
        "add_": lambda: b.add_(1), "sub_": lambda: b.sub_(1.0), "mul_": lambda: b.mul_(b),
        "div_": lambda: b.div_(2), "pow_": lambda: b.pow_(2), "copy_": lambda: b.copy_(b + 1),
        "fill_": lambda: b.fill_(0.0), "zero_": lambda: b.zero_(),
        "+=": lambda: b.__iadd__(1.0), "*=": lambda: b.__imul__(2.0),
    }
    for name, write in writes.items():
        with pytest.raises(RuntimeError, match=OVERLAP):
            write()
        assert x.tolist() == [1.0, 2.0, 3.0], name
        assert x._version == 0, name
    with rtx.no_grad():   # also under no_grad, on a parameter's expansion
        p = rtx.nn.Parameter(rtx.ones(3))
        with pytest.raises(RuntimeError, match=OVERLAP):
            p.expand(4, 3).add_(1)
    assert p.tolist() == [1.0, 1.0, 1.0]
    rtx.zeros(1, 0).expand(2, 0).add_(1)   # no elements: nothing overlaps (PyTorch agrees)
    b.clone().add_(1)                   # a copy is fine
    b.contiguous().add_(1)
    x.expand(1, 3).add_(1)              # nothing overlaps: writes x (as in PyTorch)
    b[0].mul_(10)                       # one row of the expansion: writes x too
    assert x.tolist() == [20.0, 30.0, 40.0]


def test_an_expanded_input_saved_for_backward_sees_its_base_modified(view_backend):
    w = rtx.tensor([1.0, 2.0])
    p = rtx.ones(3, 2, requires_grad=True)
    y = (p * w.expand(3, 2)).sum()      # mul saves its inputs: the expansion
    w.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_a_large_expand_allocates_nothing(view_backend):
    x = rtx.zeros(1, 1, dtype=rtx.float64) + 1.0
    x.numpy()
    rtx.reset_peak_memory_stats()
    before = rtx.memory_stats()["peak_bytes"]
    big = x.expand(8000, 8000)          # 512 MB as a copy
    assert big.shape == (8000, 8000) and big[7345, 777].item() == 1.0
    assert big[:3, :5].sum().item() == 15.0
    assert rtx.memory_stats()["peak_bytes"] - before < 4096   # (Fusion: once materialised)


def test_expand_values_and_gradients_on_every_backend(backend, dtype):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 1, 2)).astype(dtype)
    x = rtx.tensor(a, requires_grad=True)
    y = x.expand(4, 3, 5, 2)
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(a, (4, 3, 5, 2)))
    w = rng.standard_normal((4, 3, 5, 2)).astype(dtype)
    (y * rtx.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), w.sum(axis=(0, 2), keepdims=True)[0],
                               rtol=1e-5 if dtype == np.float32 else 1e-12)
    if dtype == np.float64:
        for f in (lambda t: t.expand(2, 3, 4, 2), lambda t: t[:, :, :1].broadcast_to((3, 3, 2)),
                  lambda t: t.expand(3, 2, 2) * t.expand(3, 2, 2)):
            assert rtx.autograd.gradcheck(f, (rtx.tensor(a, requires_grad=True),))
    # aliasing is reported honestly: a view shares its base's counter, a copy does not
    z = rtx.tensor(a.copy())
    v = z.expand(2, 3, 4, 2)
    z.mul_(2.0)
    if rtx.get_default_backend().aliases(v._value, z._value):
        np.testing.assert_array_equal(v.numpy(), np.broadcast_to(2 * a, (2, 3, 4, 2)))
        assert v._version == 1
    else:
        np.testing.assert_array_equal(v.numpy(), np.broadcast_to(a, (2, 3, 4, 2)))
        assert v._version == 0


def _expanded_op_calls():
    """Ops reading an expanded (stride-0) input: the result must equal the same op
    on a contiguous copy."""
    F = rtx.nn.functional
    return {
        "add": lambda e: e + 1.0, "mul": lambda e: e * e, "exp": lambda e: e.exp(),
        "leaky_relu": lambda e: rtx.leaky_relu(e, 0.2), "sum": lambda e: e.sum(0),
        "mean": lambda e: e.mean(1), "amax": lambda e: e.amax(0),
        "softmax": lambda e: e.softmax(-1), "matmul": lambda e: e @ e.T,
        "matmul2": lambda e: e.T @ e, "reshape": lambda e: e.reshape(-1),
        "permute": lambda e: e.T.clone(), "getitem": lambda e: e[1:, ::2],
        "cat": lambda e: rtx.cat([e, e], 1), "where": lambda e: rtx.where(e > 0.5, e, -e),
        "index_select": lambda e: rtx.index_select(e, [3, 0, 0]),
        "index_add": lambda e: rtx.index_add(e, [1, 1, 0, 2], 3),
        "segment_softmax": lambda e: rtx.segment_softmax(e, [1, 1, 0, 2], 3),
        "segment_max": lambda e: rtx.segment_max(e, [1, 1, 0, 2], 3),
        "message_passing": lambda e: rtx.message_passing(e, np.array([[0, 1, 3], [1, 1, 0]]), 2),
        "cross_entropy": lambda e: F.cross_entropy(e, np.array([0, 2, 1, 0])),
        "dlpack": lambda e: rtx.from_dlpack(np.from_dlpack(e)),
    }


@pytest.mark.parametrize("name", sorted(_expanded_op_calls()))
def test_ops_read_expanded_inputs_right(backend, name):
    op = _expanded_op_calls()[name]
    x = rtx.tensor(np.array([0.25, 1.5, -0.5], dtype=np.float64))
    e = x.expand(4, 3)
    np.testing.assert_allclose(op(e).numpy(), op(e.clone()).numpy(), rtol=1e-13, atol=0)


def test_expanded_tensors_through_dlpack_share_memory():
    x = rtx.arange(3, dtype=rtx.float32)
    e = x.expand(2, 3)
    a = np.from_dlpack(e)
    assert np.shares_memory(a, x.numpy()) and a.strides == (0, 4)
    x.add_(1)
    assert a.tolist() == [[1.0, 2.0, 3.0]] * 2
    if torch is not None:
        t = torch.from_dlpack(e)
        assert t.stride() == (0, 1) and t.data_ptr() == x.numpy().ctypes.data
        with pytest.raises(RuntimeError, match="single memory location"):
            t.add_(1)      # torch refuses the same write rtx refuses


def test_minimal_backend_expand_is_a_copy_and_says_so():
    from rtx.backend.reference import MinimalBackend

    with rtx.use_backend(MinimalBackend()):
        x = rtx.tensor([1.0, 2.0])
        b = x.expand(3, 2)
        x.add_(1)
        assert b.tolist() == [[1.0, 2.0]] * 3 and b._version == 0
        b.add_(1)              # a copy has no overlapping elements
        assert b.tolist() == [[2.0, 3.0]] * 3 and x.tolist() == [2.0, 3.0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=0, max_size=3), st.integers(0, 2**31),
       st.integers(0, 2))
def test_property_expand_views_match_numpy(shape, seed, lead):
    rng = np.random.default_rng(seed)
    ones = rng.random(len(shape)) < 0.5
    src_shape = tuple(1 if o else n for n, o in zip(shape, ones, strict=True))
    out_shape = tuple(rng.integers(1, 4, lead)) + tuple(shape)
    a = rng.standard_normal(src_shape)
    x = rtx.tensor(a)
    e = x.expand(*out_shape)
    np.testing.assert_array_equal(e.numpy(), np.broadcast_to(a, out_shape))
    assert np.shares_memory(e.numpy(), x.numpy())
    overlaps = any(s == 0 and n > 1 for n, s in zip(e.shape, e.numpy().strides, strict=True))
    if overlaps:
        with pytest.raises(RuntimeError, match=OVERLAP):
            e.add_(1.0)
        np.testing.assert_array_equal(x.numpy(), a)
    else:
        e.add_(1.0)
        np.testing.assert_array_equal(x.numpy(), a + 1.0)


# --------------------------------------------------------------------------
# 5. relatives: the other export path (numpy's __array__ protocol)
# --------------------------------------------------------------------------
def test_array_protocol_never_copies_silently_under_copy_false():
    t = rtx.ones(3)
    with pytest.raises(ValueError, match="avoid copy"):
        np.asarray(t, dtype=np.float64, copy=False)   # numpy's own rule for arrays
    a = np.asarray(t, copy=False)
    assert np.shares_memory(a, t.numpy())
    assert np.asarray(t, dtype=np.float64).dtype == np.float64          # copy=None: converts
    assert not np.shares_memory(np.array(t, copy=True), t.numpy())
