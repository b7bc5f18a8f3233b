"""rtx.IndexPlan / rtx.EdgeIndex (issue 10 item 4): a private, checked copy of
the indices with a lazily cached CSR grouping; index_select / index_add and
their gradients accept it and give the same bits as raw indices."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import bits
from hypothesis import given, settings
from hypothesis import strategies as st

import rtx
from rtx import _kernels
from rtx.autograd import gradcheck


@pytest.mark.valgrind
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_plan_is_a_private_checked_copy(idx_dtype):
    idx = np.array([3, 0, 3, 1], dtype=idx_dtype)
    plan = rtx.IndexPlan(idx, 5)
    idx[0] = 99  # the user's array changes: the plan does not
    assert plan.indices.tolist() == [3, 0, 3, 1]
    assert plan.dtype == idx_dtype and len(plan) == 4 and plan.num_rows == 5
    assert not plan.indices.flags.writeable
    with pytest.raises(ValueError):
        plan.indices[0] = 1
    assert not plan.is_grouped
    ptr, perm = plan.csr()
    assert plan.is_grouped
    assert ptr.tolist() == [0, 1, 2, 2, 4, 4]
    assert perm.tolist() == [1, 3, 0, 2]  # stable: positions in increasing order per row
    assert plan.counts().tolist() == [1, 1, 0, 2, 0]
    assert plan._grouping()[0] is plan._grouping()[0]  # cached (the public csr() copies it)
    assert "IndexPlan" in repr(plan)


def test_plan_from_tensor_list_and_plan():
    a = rtx.IndexPlan(rtx.tensor(np.array([1, 0])), 2)
    b = rtx.IndexPlan([1, 0], 2)
    c = rtx.IndexPlan(a, 2)
    assert a.indices.tolist() == b.indices.tolist() == c.indices.tolist() == [1, 0]
    empty = rtx.IndexPlan([], 0)
    assert len(empty) == 0 and empty.csr()[0].tolist() == [0]


def test_plan_rejects_bad_input():
    with pytest.raises(IndexError, match=r"indices\[1\] = 5"):
        rtx.IndexPlan(np.array([0, 5]), 5)
    with pytest.raises(IndexError):
        rtx.IndexPlan(np.array([0, -1]), 5)
    with pytest.raises(ValueError, match=">= 0"):
        rtx.IndexPlan(np.array([0]), -1)
    with pytest.raises(TypeError):
        rtx.IndexPlan(np.array([0.0]), 3)
    with pytest.raises(TypeError):
        rtx.IndexPlan(np.array([[0]]), 3)
    with pytest.raises(TypeError):
        rtx.IndexPlan(np.array([0]), 2.0)


def test_lazy_grouping_is_thread_safe():
    rng = np.random.default_rng(0)
    plan = rtx.IndexPlan(rng.integers(0, 1000, 200000), 1000)
    got = []
    barrier = threading.Barrier(4)

    def work():
        barrier.wait()
        got.append(plan._grouping())

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(g[0] is got[0][0] and g[1] is got[0][1] for g in got)
    ptr, perm = got[0]
    idx = plan.indices
    np.testing.assert_array_equal(perm, np.argsort(idx, kind="stable"))
    np.testing.assert_array_equal(np.diff(ptr), np.bincount(idx, minlength=1000))


@pytest.mark.valgrind
@pytest.mark.parametrize("shape", [(9,), (9, 3), (9, 2, 2)])
def test_index_ops_with_plan_match_raw(backend, dtype, shape):
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 6, 9)
    plan = rtx.IndexPlan(idx, 6)
    src = rtx.tensor(rng.standard_normal(shape).astype(dtype))
    np.testing.assert_array_equal(bits(rtx.index_add(src, plan, 6).numpy()),
                                  bits(rtx.index_add(src, idx, 6).numpy()))
    x = rtx.tensor(rng.standard_normal((6,) + shape[1:]).astype(dtype))
    np.testing.assert_array_equal(rtx.index_select(x, plan).numpy(),
                                  rtx.index_select(x, idx).numpy())


def test_index_ops_with_plan_gradcheck(backend):
    rng = np.random.default_rng(2)
    idx = rng.integers(0, 5, 8)
    plan = rtx.IndexPlan(idx, 5)
    src = rtx.tensor(rng.standard_normal((8, 3)), requires_grad=True)
    x = rtx.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    assert gradcheck(lambda a: rtx.index_add(a, plan, 5), (src,))
    assert gradcheck(lambda a: rtx.index_select(a, plan), (x,))


def test_plan_row_count_must_match(backend):
    plan = rtx.IndexPlan(np.array([0, 1, 2]), 3)
    with pytest.raises(ValueError, match="IndexPlan"):
        rtx.index_add(rtx.tensor(np.ones((3, 2))), plan, 4)
    with pytest.raises(ValueError, match="IndexPlan"):
        rtx.index_select(rtx.tensor(np.ones((4, 2))), plan)
    with pytest.raises(ValueError, match="len"):
        rtx.index_add(rtx.tensor(np.ones((2, 2))), plan, 3)


@pytest.mark.parametrize("F", [1, 4, 8, 16, 64])
def test_warm_plan_scatter_bitwise_cold_any_threads(dtype, F):
    rng = np.random.default_rng(3)
    E, N = 50000, 2000
    idx = rng.integers(0, N, E)
    src = rtx.tensor(rng.standard_normal((E, F)).astype(dtype))
    plan = rtx.IndexPlan(idx, N)
    old = _kernels.set_parallel_thresholds(gather=0, scatter=0, scatter_min_row_bytes=0)
    try:
        ref = None
        for T in (1, 2):
            rtx.set_num_threads(T)
            for index in (idx, plan, plan):
                b = bits(rtx.index_add(src, index, N).numpy())
                if ref is None:
                    ref = b
                np.testing.assert_array_equal(b, ref)
    finally:
        _kernels.set_parallel_thresholds(**old)


@pytest.mark.valgrind
@pytest.mark.parametrize("F", [1, 4, 8])
def test_plan_scatter_of_narrow_rows_keeps_signed_zeros_and_empty_rows(dtype, F):
    """The grouped sum's narrow rows (GAT's [E, heads] gradients: sums kept in
    registers): -0.0 sums to +0.0 and a row with no entry is +0.0, as numpy's
    np.add.at into zeros gives, bit for bit."""
    idx = np.array([0, 0, 2, 2, 2, 5])
    src = np.full((6, F), -0.0, dtype)
    src[2:5, F // 2] = [1.5, -2.25, 3.0]
    src[5, 0] = np.nan
    src[5, F - 1] = np.inf
    want = np.zeros((7, F), dtype)
    np.add.at(want, idx, src)
    got = rtx.index_add(rtx.tensor(src), rtx.IndexPlan(idx, 7), 7).numpy()
    assert not np.signbit(got[0]).any()                  # -0.0 + -0.0 -> +0.0
    np.testing.assert_array_equal(bits(got), bits(want))


def test_edge_index_trim_is_a_prefix_without_copies():
    """EdgeIndex.trim(m, ns, nd): the first m edges over the first ns sources and
    nd targets; what did not shrink is this plan itself, a target plan over every
    edge keeps the grouping (its first nd + 1 pointers), a kept edge beyond the
    kept nodes is a ValueError naming it, and the result is what a fresh EdgeIndex
    of those edges gives."""
    ei = rtx.EdgeIndex(np.array([[0, 3, 1, 4, 2, 5, 6], [0, 0, 1, 1, 2, 3, 4]]), 7, 5)
    ptr, perm = ei.dst._grouping()
    assert ei.trim(7, 7, 5) is ei                     # nothing trimmed: itself
    t = ei.trim(5, 5, 3)
    fresh = rtx.EdgeIndex(np.array([[0, 3, 1, 4, 2], [0, 0, 1, 1, 2]]), 5, 3)
    for a, b in ((t.src, fresh.src), (t.dst, fresh.dst)):
        np.testing.assert_array_equal(a.indices, b.indices)
        assert a.num_rows == b.num_rows
        np.testing.assert_array_equal(a.csr()[0], b.csr()[0])
        np.testing.assert_array_equal(a.csr()[1], b.csr()[1])
    same_src = rtx.EdgeIndex(np.array([[0, 1, 2], [0, 0, 1]]), 3, 4)
    same_src.dst._grouping()
    cut = same_src.trim(3, 3, 2)
    assert cut.src is same_src.src                    # nothing shrank: the same plan
    assert cut.dst.is_grouped                         # the grouping, cut to 2 rows
    np.testing.assert_array_equal(cut.dst.csr()[0], [0, 2, 3])
    np.testing.assert_array_equal(cut.dst.csr()[0],
                                  rtx.IndexPlan(np.array([0, 0, 1]), 2).csr()[0])
    assert np.shares_memory(cut.dst._idx, same_src.dst._idx)       # no copy
    with pytest.raises(ValueError, match="edge 5 has target 3, beyond the 3 kept targets"):
        ei.trim(7, 7, 3)
    with pytest.raises(ValueError, match="source 5, beyond"):
        ei.trim(6, 5, 4)
    with pytest.raises(ValueError, match="exceeds"):
        ei.trim(8, 7, 5)
    with pytest.raises(ValueError, match="exceeds"):
        ei.trim(7, 7, 6)
    with pytest.raises(ValueError):
        ei.trim(-1, 7, 5)
    # the trimmed plans run the ops as fresh ones do
    x = rtx.tensor(np.arange(10.0).reshape(5, 2))
    np.testing.assert_array_equal(rtx.message_passing(x, t, 3).numpy(),
                                  rtx.message_passing(x, fresh, 3).numpy())


def test_edge_index():
    ei = np.array([[0, 2, 1, 2], [1, 0, 1, 3]])
    e = rtx.EdgeIndex(ei, 3, 4)
    assert (e.num_edges, e.num_src, e.num_dst) == (4, 3, 4)
    assert e.src.indices.tolist() == [0, 2, 1, 2] and e.dst.indices.tolist() == [1, 0, 1, 3]
    ei[0, 0] = 2
    assert e.src.indices[0] == 0  # private copy
    assert e.dst.csr()[0].tolist() == [0, 1, 3, 3, 4]
    assert rtx.EdgeIndex(ei[:, :3], 3).num_dst == 3
    assert "EdgeIndex" in repr(e)
    with pytest.raises(IndexError, match="targets"):
        rtx.EdgeIndex(ei, 3, 3)
    with pytest.raises(ValueError, match="2 rows"):
        rtx.EdgeIndex(ei[:1], 3)
    with pytest.raises(TypeError):
        rtx.EdgeIndex(ei[0], 3)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 300), st.integers(1, 40), st.integers(0, 2**31))
def test_property_csr_is_a_stable_sort(E, N, seed):
    idx = np.random.default_rng(seed).integers(0, N, E).astype(np.int32)
    ptr, perm = rtx.IndexPlan(idx, N).csr()
    np.testing.assert_array_equal(perm, np.argsort(idx, kind="stable"))
    counts = np.bincount(idx, minlength=N)
    np.testing.assert_array_equal(ptr, np.concatenate([[0], np.cumsum(counts)]))


def test_narrow_indices_are_a_cached_int32_snapshot():
    """_narrow_idx: an int64 plan's indices as int32 (cached, immutable, the same
    values); int32 plans, plans past 2**31 rows and one call's transient plans
    keep their own array."""
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 1000, 5000)
    plan = rtx.IndexPlan(idx, 1000)
    n = plan._narrow_idx()
    assert n.dtype == np.int32 and plan._narrow_idx() is n
    np.testing.assert_array_equal(n, idx)
    with pytest.raises(ValueError):
        n[0] = 1
    assert plan._idx.dtype == np.int64 and plan.dtype == np.int64   # the plan's own
    p32 = rtx.IndexPlan(idx.astype(np.int32), 1000)
    assert p32._narrow_idx() is p32._idx
    wide = rtx.IndexPlan(np.array([0, 5]), 2**31 + 1)
    assert wide._narrow_idx() is wide._idx
    fresh = rtx.IndexPlan(idx, 1000)
    fresh._transient = True
    assert fresh._narrow_idx() is fresh._idx


def test_edge_index_in_group_order_is_cached_from_the_second_request():
    """EdgeIndex._in_group_order(side): the other side's indices in side's grouping
    order (an immutable int32 snapshot), built on the second request (a graph
    used once never pays for it) and cached; None for sorted or transient plans;
    the plans it came from cannot be replaced."""
    rng = np.random.default_rng(4)
    N, E = 300, 4000
    src, dst = rng.integers(0, N, E), rng.integers(0, 2 * N, E)
    ei = rtx.EdgeIndex(np.stack([src, dst]), N, 2 * N)
    for side, plan, other in (("dst", ei.dst, src), ("src", ei.src, dst)):
        assert ei._in_group_order(side) is None                  # first request
        arr = ei._in_group_order(side)
        _, perm = plan.csr()
        assert arr.dtype == np.int32
        np.testing.assert_array_equal(arr, other[perm])
        assert ei._in_group_order(side) is arr                   # cached
        with pytest.raises(ValueError):
            arr[0] = 1
    order = np.argsort(dst, kind="stable")
    srt = rtx.EdgeIndex(np.stack([src[order], dst[order]]), N, 2 * N)
    for _ in range(3):
        assert srt._in_group_order("dst") is None                # perm is the identity
    assert srt._in_group_order("src") is None
    assert srt._in_group_order("src") is not None
    once = rtx.EdgeIndex(np.stack([src, dst]), N, 2 * N)
    once.dst._transient = True
    for _ in range(3):
        assert once._in_group_order("dst") is None
    # the plans the copies came from never change (read-only attributes)
    for name in ("src", "dst"):
        with pytest.raises(AttributeError):
            setattr(ei, name, rtx.IndexPlan(rng.integers(0, 10, E), 10))
    assert ei.num_src == N and ei._in_group_order("dst") is not None
    big = rtx.EdgeIndex(np.stack([np.array([2**31 + 5, 0, 7]), np.array([2, 0, 1])]),
                        2**31 + 6, 3)
    big._in_group_order("dst")
    wide = big._in_group_order("dst")
    assert wide.dtype == np.int64
    np.testing.assert_array_equal(wide, [0, 7, 2**31 + 5])


@pytest.mark.parametrize("H", [1, 2])
@pytest.mark.parametrize("ordered", [False, True], ids=["random", "sorted"])
def test_softmax_on_narrowed_indices_has_the_int64_bits(H, ordered, force_parallel):
    """segment_softmax through a plan (its int32 copy) and through the raw int64
    array (a transient plan: the int64 kernels), forward and backward: the same bits."""
    rng = np.random.default_rng(H)
    E, N = 40_000, 3_000
    idx = rng.integers(0, N, E)
    if ordered:
        idx = np.sort(idx)
    s = rng.standard_normal((E, H)).astype(np.float32)
    g = rng.standard_normal((E, H)).astype(np.float32)
    plan = rtx.IndexPlan(idx, N)
    got = []
    for index in (plan, idx):
        t = rtx.tensor(s, requires_grad=True)
        y = rtx.segment_softmax(t, index, N)
        y.backward(rtx.tensor(g))
        got.append((y.numpy(), t.grad.numpy()))
    assert plan._idx32 is not None                       # the plan took the int32 copy
    for a, b in zip(*got, strict=True):
        np.testing.assert_array_equal(bits(a), bits(b))
