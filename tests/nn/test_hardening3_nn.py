"""Issue 17 (hardening 3), nn / graph part: GATConv and HetGAT shared by threads,
GATConv's bipartite output size, copy / pickle of modules and checked plans,
gradients of another dtype reaching a rule, and tests that make single-line
bugs in HeteroConv(aggr="mean"), the CSR segment softmax, all_reduce(op="mean")
and AdamW observable on their own."""

from __future__ import annotations

import copy
import copyreg
import pickle
import sys
import threading

import numpy as np
import pytest
from _gat_reference import gat_conv_ref
from conftest import tol

import rtx
from rtx.backend.index_plan import as_edge_index
from rtx.datasets import synthetic_hetgraph
from rtx.nn import GATConv, HeteroConv, HetGAT


@pytest.fixture
def fast_switching():
    """Switch Python threads every microsecond: races show within a few passes."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def _run_threads(work, n):
    errors: list[BaseException] = []

    def wrap(k):
        try:
            work(k)
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    ts = [threading.Thread(target=wrap, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


# --------------------------------------------------- 1. caches shared by threads
@pytest.mark.parametrize("kind", ["ndarray", "EdgeIndex"])
def test_one_gatconv_in_four_threads_uses_each_threads_own_edges(kind, fast_switching):
    """Each thread its own graph of the same size (same N, same E): every output
    is the one computed on that thread's edges, bit for bit.  The edge cache used
    to compare arrays while numpy had released the GIL, then return whatever
    plan another thread had stored meanwhile."""
    rng = np.random.default_rng(0)
    N, E, T, ITERS = 120, 1500, 4, 60
    rtx.manual_seed(0)
    conv = GATConv(8, 4, heads=2).eval()
    x = rtx.tensor(rng.standard_normal((N, 8)).astype(np.float32))
    graphs = [rng.integers(0, N, (2, E)) for _ in range(T)]
    inputs = graphs if kind == "ndarray" else [rtx.EdgeIndex(g, N) for g in graphs]
    with rtx.no_grad():
        refs = [GATConv(8, 4, heads=2).eval() for _ in range(T)]
        for r in refs:
            r.load_state_dict(conv.state_dict())
        want = [r(x, g).numpy() for r, g in zip(refs, inputs, strict=True)]
    assert all(not np.array_equal(want[0], w) for w in want[1:])  # distinguishable
    wrong: list[tuple[int, int]] = []

    def work(k):
        for it in range(ITERS):
            with rtx.no_grad():
                out = conv(x, inputs[k]).numpy()
            if not np.array_equal(out, want[k]):
                wrong.append((k, it))

    _run_threads(work, T)
    assert wrong == [], f"outputs computed on another thread's edges: {wrong[:5]}"


def test_one_hetgat_in_threads_uses_each_threads_own_edges(fast_switching):
    T, ITERS = 3, 15
    gs = [synthetic_hetgraph(120, seed=s) for s in range(T)]
    # same sizes, different edges
    assert all(g.x_dict["paper"].shape == gs[0].x_dict["paper"].shape for g in gs)
    rtx.manual_seed(0)
    m = HetGAT(gs[0].metadata(), gs[0].num_features_dict, 16, gs[0].num_classes, heads=4).eval()
    xs = [{k: rtx.tensor(v) for k, v in g.x_dict.items()} for g in gs]
    x0 = xs[0]  # one set of features: only the edges differ between threads
    with rtx.no_grad():
        want = [copy.deepcopy(m)(x0, g.edge_index_dict).numpy() for g in gs]
    assert not np.array_equal(want[0], want[1])
    wrong: list[tuple[int, int]] = []

    def work(k):
        for it in range(ITERS):
            with rtx.no_grad():
                out = m(x0, gs[k].edge_index_dict).numpy()
            if not np.array_equal(out, want[k]):
                wrong.append((k, it))

    _run_threads(work, T)
    assert wrong == []


def test_edge_cache_follows_in_place_edits_and_keeps_a_private_copy():
    """The raw-edge cache (``as_edge_index``, which GATConv and HetGAT use) compares
    by value with the cached plan's private read-only copy, and builds everything
    from that copy."""
    rng = np.random.default_rng(1)
    conv = GATConv(3, 2).double()
    x = rtx.tensor(rng.standard_normal((6, 3)))
    ei = rng.integers(0, 6, (2, 20))
    a = conv(x, ei).numpy()
    plan = as_edge_index(ei, 6, 6, "test")     # the plan conv used: a hit
    assert as_edge_index(ei, 6, 6, "test") is plan
    for p in (plan.src, plan.dst):
        assert not p._idx.flags.writeable and not np.shares_memory(p._idx, ei)
    ei[1, :5] = (ei[1, :5] + 1) % 6            # changed in place: noticed
    b = conv(x, ei).numpy()
    fresh = GATConv(3, 2).double()
    fresh.load_state_dict(conv.state_dict())
    np.testing.assert_array_equal(b, fresh(x, ei).numpy())
    assert not np.array_equal(a, b)
    again = as_edge_index(ei, 6, 6, "test")
    assert again is not plan                   # a plan of the new edges, replaced as a whole
    np.testing.assert_array_equal(again.dst.indices, ei[1])


def _racing_compare(plan_mod, during):
    """The cache's comparison (``memeq`` without the GIL), except that it first
    lets "another thread" run ``during()`` (once): what can happen while the
    cached edges are compared."""
    compare = plan_mod._same_values
    pending = [during]

    def racing(row, idx):
        if pending:
            pending.pop()()
        return compare(row, idx)
    return racing


def test_edge_cache_hit_returns_the_entry_it_compared(monkeypatch):
    """Deterministic form of the race: while the cached edges are compared,
    another caller stores its own entry under the same fingerprint.  The hit must
    return the plan of the entry that was compared (read once), not whatever is
    stored by then."""
    import rtx.backend.index_plan as plan_mod

    rng = np.random.default_rng(13)
    g1 = rng.integers(0, 9, (2, 30))
    g2 = g1.copy()
    g2[0, 1] = (g2[0, 1] + 1) % 9              # not a sampled position: same fingerprint
    cache = plan_mod._RawEdgeCache()
    assert cache._key(g1, 9, 9) == cache._key(g2, 9, 9)
    ei1 = cache.get(g1, 9, 9, "test")
    monkeypatch.setattr(plan_mod, "_same_values",
                        _racing_compare(plan_mod, lambda: cache.get(g2, 9, 9, "test")))
    assert cache.get(g1, 9, 9, "test") is ei1
    entries = cache._entries[cache._key(g1, 9, 9)]
    assert len(entries) == 2 and entries[0][1] is ei1   # the other caller's entry stays
    np.testing.assert_array_equal(entries[1][1].src.indices, g2[0])


def test_hetgat_edges_hit_returns_the_entry_it_compared(monkeypatch):
    import rtx.backend.index_plan as plan_mod

    g = synthetic_hetgraph(60, seed=6)
    x = {k: rtx.tensor(v) for k, v in g.x_dict.items()}
    rtx.manual_seed(0)
    m = HetGAT(g.metadata(), g.num_features_dict, 8, g.num_classes, heads=2)
    et = g.edge_types[0]
    e1 = g.edge_index_dict[et]
    n_src, n_dst = x[et[0]].shape[0], x[et[2]].shape[0]
    e2 = e1.copy()
    e2[0, 1] = (e2[0, 1] + 1) % n_src        # not a sampled position: the same fingerprint
    key = plan_mod._RAW_EDGES._key
    assert key(e1, n_src, n_dst) == key(e2, n_src, n_dst)
    first = m._edges(et, {et: e1}, x)
    monkeypatch.setattr(plan_mod, "_same_values",
                        _racing_compare(plan_mod, lambda: m._edges(et, {et: e2}, x)))
    assert m._edges(et, {et: e1}, x) is first
    np.testing.assert_array_equal(m._edges(et, {et: e2}, x).src.indices, e2[0])


def test_edge_cache_entries_die_with_their_arrays_and_are_bounded():
    """An entry lives while the array it was made from does, and the cache keeps
    at most MAX entries (the oldest go first): it never holds edges nobody uses."""
    import gc

    import rtx.backend.index_plan as plan_mod

    cache = plan_mod._RawEdgeCache()
    rng = np.random.default_rng(3)
    a = rng.integers(0, 5, (2, 12))
    cache.get(a, 5, 5, "test")
    assert len(cache) == 1
    del a
    gc.collect()
    assert len(cache) == 0 and not cache._entries
    keep = [rng.integers(0, 5, (2, 12)) for _ in range(cache.MAX + 5)]
    plans = [cache.get(k, 5, 5, "test") for k in keep]
    assert len(cache) == cache.MAX
    assert cache.get(keep[-1], 5, 5, "test") is plans[-1]      # the newest are kept
    assert cache.get(keep[0], 5, 5, "test") is not plans[0]     # the oldest went first
    # lists cannot be weakly referenced: checked each time, never cached
    lst = keep[1].tolist()
    assert cache.get(lst, 5, 5, "test") is not cache.get(lst, 5, 5, "test")


# --------------------------------------------- 4. bipartite output size as PyG
def test_bipartite_without_x_dst_has_size1_rows():
    """``(x_src, None)`` with ``size=(N_src, N_dst)``: N_dst rows (PyG); without
    ``size``: N_src rows (PyG's default)."""
    rng = np.random.default_rng(2)
    xs = rtx.tensor(rng.standard_normal((4, 8)))
    ei = np.array([[0, 1, 2, 3], [0, 1, 1, 0]])
    for kw in (dict(), dict(residual=True), dict(concat=False)):
        conv = GATConv((8, 16), 32, heads=2, add_self_loops=False, **kw).double()
        out = conv((xs, None), ei, size=(4, 2))
        assert out.shape == (2, 64 if kw.get("concat", True) else 32)
        assert conv((xs, None), ei).shape[0] == 4
        # the 2 target rows equal a run with N_dst given through an EdgeIndex
        out_ei = conv((xs, None), rtx.EdgeIndex(ei, 4, 2), size=(4, 2))
        np.testing.assert_array_equal(out.numpy(), out_ei.numpy())
    homog = GATConv(8, 5, heads=2, add_self_loops=False).double()
    assert homog((xs, None), ei, size=(4, 2)).shape == (2, 10)
    with pytest.raises(ValueError, match="does not match"):
        conv((xs, None), ei, size=(5, 2))


def test_bipartite_without_x_dst_matches_pyg():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((6, 8))
    ei = np.stack([rng.integers(0, 6, 15), rng.integers(0, 3, 15)])
    for in_ch, kw in (((8, 16), dict(add_self_loops=False)),
                      ((8, 16), dict(add_self_loops=False, residual=True, concat=False)),
                      (8, dict(add_self_loops=False))):
        ref = pyg.GATConv(in_ch, 5, heads=2, **kw).double()
        conv = GATConv(in_ch, 5, heads=2, **kw).double()
        conv.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
        for size in ((6, 3), None):
            want = ref((torch.from_numpy(xs), None), torch.from_numpy(ei), size=size)
            got = conv((rtx.tensor(xs), None), ei, size=size)
            assert got.shape == tuple(want.shape), (in_ch, kw, size)
            np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-10,
                                       atol=1e-12)


# ------------------------------------------------- 8. deepcopy / pickle after forward
def _trained_gat():
    rng = np.random.default_rng(4)
    rtx.manual_seed(2)
    conv = GATConv(5, 3, heads=2, edge_dim=2).double()
    x = rtx.tensor(rng.standard_normal((7, 5)))
    ei = rng.integers(0, 7, (2, 18))
    attr = rtx.tensor(rng.standard_normal((18, 2)))
    return conv, (x, ei, attr)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_gatconv_copies_after_forward_give_identical_outputs(how):
    conv, (x, ei, attr) = _trained_gat()
    want = conv(x, ei, attr).numpy()
    plan_input = rtx.EdgeIndex(ei, 7)
    conv(x, plan_input, attr)                   # the cache now holds a plan key
    dup = copy.deepcopy(conv) if how == "deepcopy" else pickle.loads(pickle.dumps(conv))
    assert "_edges" not in vars(dup)            # no edge cache in the module to travel
    assert isinstance(dup.att_src, rtx.nn.Parameter)
    np.testing.assert_array_equal(dup(x, ei, attr).numpy(), want)
    np.testing.assert_array_equal(dup(x, plan_input, attr).numpy(), want)
    np.testing.assert_array_equal(conv(x, ei, attr).numpy(), want)   # original unchanged


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_hetgat_copies_after_forward_give_identical_outputs(how):
    g = synthetic_hetgraph(80, seed=5)
    x = {k: rtx.tensor(v) for k, v in g.x_dict.items()}
    rtx.manual_seed(0)
    m = HetGAT(g.metadata(), g.num_features_dict, 8, g.num_classes, heads=2)
    want = m(x, g.edge_index_dict).numpy()
    dup = copy.deepcopy(m) if how == "deepcopy" else pickle.loads(pickle.dumps(m))
    assert "_edge_cache" not in vars(dup)       # no edge cache in the module to travel
    np.testing.assert_array_equal(dup(x, g.edge_index_dict).numpy(), want)
    with_plans = {et: rtx.EdgeIndex(e, x[et[0]].shape[0], x[et[2]].shape[0])
                  for et, e in g.edge_index_dict.items()}
    np.testing.assert_array_equal(dup(x, with_plans).numpy(), want)


def test_plans_pickle_round_trip_and_copies_share_the_immutable_plan():
    ei = np.array([[0, 1, 2, 4], [1, 1, 3, 0]], dtype=np.int32)
    plan = rtx.EdgeIndex(ei, 5, 4)
    plan.dst.csr()                              # a cached grouping and a lock inside
    back = pickle.loads(pickle.dumps(plan))
    assert (back.num_src, back.num_dst, back.num_edges) == (5, 4, 4)
    for a, b in ((back.src, plan.src), (back.dst, plan.dst)):
        assert a.dtype == b.dtype == np.int32
        np.testing.assert_array_equal(a.indices, b.indices)
        assert not a.indices.flags.writeable
    assert not back.dst.is_grouped              # rebuilt when needed
    np.testing.assert_array_equal(back.dst.csr()[0], plan.dst.csr()[0])
    x = rtx.randn(5, 3)
    np.testing.assert_array_equal(rtx.message_passing(x, back, 4).numpy(),
                                  rtx.message_passing(x, plan, 4).numpy())
    assert copy.deepcopy(plan) is plan and copy.copy(plan.src) is plan.src
    single = pickle.loads(pickle.dumps(plan.src))
    assert type(single) is rtx.IndexPlan and single.num_rows == 5


class _Crafted:
    """Pickles as whatever ``__reduce__`` says (a crafted payload)."""

    def __init__(self, reduce):
        self._reduce = reduce

    def __reduce__(self):
        return self._reduce


def test_crafted_plan_pickles_are_checked_again():
    bad = np.array([0, 10**12], dtype=np.int64)
    # through the constructor (what __reduce__ writes)
    with pytest.raises(IndexError):
        pickle.loads(pickle.dumps(_Crafted((rtx.IndexPlan, (bad, 5)))))
    # object created empty, then its slots set from a state (pickle's BUILD)
    payload = _Crafted((copyreg._reconstructor, (rtx.IndexPlan, object, None),
                        (None, {"_idx": bad, "_num_rows": 5})))
    with pytest.raises(IndexError):
        pickle.loads(pickle.dumps(payload))
    with pytest.raises(TypeError):
        pickle.loads(pickle.dumps(_Crafted((copyreg._reconstructor,
                                            (rtx.IndexPlan, object, None),
                                            (None, {"_csr": None})))))
    good = rtx.IndexPlan(np.array([0, 1]), 5)
    for parts in ((good, "not a plan"), (good, rtx.IndexPlan(np.array([0]), 5))):
        with pytest.raises(TypeError):
            pickle.loads(pickle.dumps(_Crafted((rtx.EdgeIndex._restore, parts))))
    state = (None, {"src": good, "dst": "x"})
    with pytest.raises(TypeError):
        pickle.loads(pickle.dumps(_Crafted((copyreg._reconstructor,
                                            (rtx.EdgeIndex, object, None), state))))


# --------------------------------------- 5. a gradient of another dtype reaches a rule
def _graph_ops():
    rng = np.random.default_rng(6)
    idx = np.array([0, 0, 1, 3, 3, 3, 2])
    ei = rtx.EdgeIndex(np.array([[0, 1, 2, 3, 4, 6], [1, 2, 0, 0, 3, 3]]), 7, 4)
    w = rng.standard_normal(6)
    wh = np.abs(rng.standard_normal((6, 2)))
    return {
        "segment_softmax": (lambda x: rtx.segment_softmax(x, idx, 4), (7, 3)),
        "segment_sum": (lambda x: rtx.segment_sum(x, idx, 4), (7, 3)),
        "segment_mean": (lambda x: rtx.segment_mean(x, idx, 4), (7, 3)),
        "segment_max": (lambda x: rtx.segment_max(x, idx, 4), (7, 3)),
        "index_add": (lambda x: rtx.index_add(x, idx, 4), (7, 3)),
        "index_select": (lambda x: rtx.index_select(x, idx), (7, 3)),
        "message_passing": (lambda x: rtx.message_passing(x, ei, 4), (7, 3)),
        "message_passing(weight)": (
            lambda x: rtx.message_passing(x, ei, 4, rtx.tensor(w.astype(x.dtype))), (7, 3)),
        "message_passing(grad of weight)": (
            lambda x: rtx.message_passing(rtx.ones(7, 3, dtype=x.dtype), ei, 4, x), (6,)),
        "message_passing(heads)": (
            lambda x: rtx.message_passing(x, ei, 4, rtx.tensor(wh.astype(x.dtype))), (7, 2, 3)),
    }


@pytest.mark.parametrize("name", list(_graph_ops()))
def test_graph_op_backward_takes_a_float64_gradient_into_float32(name, backend):
    """``f32_out * w_f64``: the gradient reaching the float32 op is float64; the
    engine casts it to the op's output dtype first (PyTorch), so every rule
    runs and the leaf gets float32 values equal to the float64 computation's."""
    fn, shape = _graph_ops()[name]
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal(shape)
    x32 = rtx.tensor(x0.astype(np.float32), requires_grad=True)
    out = fn(x32)
    assert out.dtype == np.float32
    w = rtx.tensor(rng.standard_normal(out.shape))           # float64
    (out * w).sum().backward()
    x64 = rtx.tensor(x0.astype(np.float32).astype(np.float64), requires_grad=True)
    (fn(x64) * w).sum().backward()
    assert x32.grad.dtype == np.float32
    np.testing.assert_allclose(x32.grad.numpy(), x64.grad.numpy(), rtol=2e-5, atol=2e-5)


def test_gatconv_float32_then_float64_weights_backward():
    rng = np.random.default_rng(8)
    rtx.manual_seed(3)
    conv = GATConv(4, 3, heads=2)
    x = rtx.tensor(rng.standard_normal((6, 4)).astype(np.float32), requires_grad=True)
    ei = rng.integers(0, 6, (2, 15))
    w = rtx.tensor(rng.standard_normal((6, 6)))
    ref = copy.deepcopy(conv).double()
    (conv(x, ei) * w).sum().backward()
    assert x.grad.dtype == np.float32 and conv.att_src.grad.dtype == np.float32
    x64 = rtx.tensor(x.numpy().astype(np.float64), requires_grad=True)
    (ref(x64, ei) * w).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x64.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(conv.att_src.grad.numpy(), ref.att_src.grad.numpy(),
                               rtol=1e-4, atol=1e-5)


def test_every_rule_receives_its_outputs_dtype():
    """A custom Function's rule sees its output's dtype too, single and multiple
    outputs, and autograd.grad of a float32 intermediate returns float32."""
    seen = []

    class Twice(rtx.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2.0, a * 3.0

        @staticmethod
        def backward(ctx, ga, gb):
            seen.append((ga.dtype, gb.dtype))
            return ga * 2.0 + gb * 3.0

    x = rtx.tensor([1.0, 2.0], requires_grad=True)
    a, b = Twice.apply(x)
    w = rtx.tensor([1.0, 1.0], dtype=rtx.float64)
    (a * w + b * w).sum().backward()
    assert seen == [(np.float32, np.float32)]
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])
    h = x * 4.0
    (g,) = rtx.autograd.grad((h * w).sum(), [h])
    assert g.dtype == np.float32


# --------------------------------------------------------------- 9. mutation gaps
def test_heteroconv_mean_divides_by_the_relations_reaching_each_type():
    """Two destination types reached by 2 and 1 relations: 'item' is the mean
    of two outputs, 'user' its single output (dividing by the layer's 3
    relations would be wrong for both)."""
    rng = np.random.default_rng(9)
    x = {"item": rtx.tensor(rng.standard_normal((5, 3))),
         "user": rtx.tensor(rng.standard_normal((4, 2)))}
    ei = {("user", "buys", "item"): np.stack([rng.integers(0, 4, 8), rng.integers(0, 5, 8)]),
          ("item", "similar", "item"): rng.integers(0, 5, (2, 9)),
          ("item", "bought_by", "user"): np.stack([rng.integers(0, 5, 7),
                                                   rng.integers(0, 4, 7)])}
    rtx.manual_seed(5)
    a = GATConv((2, 3), 2, heads=2, add_self_loops=False).double()
    b = GATConv(3, 2, heads=2).double()
    c = GATConv((3, 2), 2, heads=2, add_self_loops=False).double()
    conv = HeteroConv({("user", "buys", "item"): a, ("item", "similar", "item"): b,
                       ("item", "bought_by", "user"): c}, aggr="mean")
    out = conv(x, ei)
    ra = a((x["user"], x["item"]), ei[("user", "buys", "item")]).numpy()
    rb = b(x["item"], ei[("item", "similar", "item")]).numpy()
    rc = c((x["item"], x["user"]), ei[("item", "bought_by", "user")]).numpy()
    np.testing.assert_allclose(out["item"].numpy(), (ra + rb) / 2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["user"].numpy(), rc, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("heads", [2, 16], ids=["entry-order", "csr"])
def test_segment_softmax_float32_wide_rows_logits_near_1000(heads, backend):
    """float32 logits around +-1000 in wide segments (thousands of entries each):
    exp overflows without the '- max' shift.  Values against a float64 numpy
    reference, not one kernel against the other.  16 heads of float32 (64-byte
    rows) take the CPU backend's CSR kernel, 2 heads its entry-order kernel."""
    from rtx._kernels import softmax_entry_mode

    rtx.set_num_threads(2)                      # (conftest restores the default)
    assert softmax_entry_mode(heads, 4, 2, False) == (heads == 2)
    rng = np.random.default_rng(10)
    n_seg, width = 6, 3000
    idx = np.repeat(np.arange(n_seg), width)
    rng.shuffle(idx)
    s = (1000.0 + rng.standard_normal((idx.size, heads)) * 3).astype(np.float32)
    s[idx == 2] -= 2000.0                       # a segment near -1000 too
    got = rtx.segment_softmax(rtx.tensor(s), idx, n_seg).numpy()
    s64 = s.astype(np.float64)
    m = np.full((n_seg, heads), -np.inf)
    np.maximum.at(m, idx, s64)
    e = np.exp(s64 - m[idx])
    z = np.zeros((n_seg, heads))
    np.add.at(z, idx, e)
    want = e / z[idx]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-9)
    sums = np.zeros((n_seg, heads))
    np.add.at(sums, idx, got.astype(np.float64))
    np.testing.assert_allclose(sums, 1.0, rtol=1e-4)


class _FakeMPI:
    """What all_reduce takes from mpi4py: constants and Request.Testall."""

    IN_PLACE = object()
    SUM = "sum"
    MAX = "max"
    MIN, LOR, LAND = "min", "lor", "land"

    class Request:
        @staticmethod
        def Testall(reqs):
            return True                         # the fake's requests complete at once


class _TwoRankComm:
    """Rank 0 of a fake world of two: the other rank holds ``other``."""

    def __init__(self, other):
        self.other = np.asarray(other)
        self.calls = []

    def Get_size(self):
        return 2

    def Get_rank(self):
        return 0

    def Iallgather(self, sendbuf, recvbuf):
        recvbuf[...] = sendbuf                  # the other rank agrees on the call
        return None

    def Iallreduce(self, sendbuf, recvbuf, op):
        assert sendbuf is _FakeMPI.IN_PLACE
        self.calls.append(op)
        if op == "sum":
            recvbuf += self.other.astype(recvbuf.dtype)
        else:
            np.maximum(recvbuf, self.other.astype(recvbuf.dtype), out=recvbuf)
        return None


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_all_reduce_mean_with_a_fake_two_rank_world(monkeypatch, dt):
    """No MPI needed: a fake communicator (rank 0 of 2) through init(comm=...)."""
    from rtx.distributed import _comm

    monkeypatch.setattr(_comm, "_MPI", _FakeMPI)
    monkeypatch.setattr(_comm, "_COMM", None)
    mine, other = np.array([1.0, -2.0, 6.0], dt), np.array([3.0, 4.0, -1.0], dt)
    comm = _TwoRankComm(other)
    rtx.distributed.init(comm=comm)
    t = rtx.tensor(mine)
    assert rtx.distributed.all_reduce(t, op="mean") is t
    np.testing.assert_array_equal(t.numpy(), (mine + other) / 2)
    t = rtx.tensor(mine)
    rtx.distributed.all_reduce(t, op="sum")
    np.testing.assert_array_equal(t.numpy(), mine + other)
    t = rtx.tensor(mine)
    rtx.distributed.all_reduce(t, op="max")
    np.testing.assert_array_equal(t.numpy(), np.maximum(mine, other))
    assert comm.calls == ["sum", "sum", "max"]


def test_adamw_against_a_numpy_reference_without_torch():
    """AdamW, lr != default and weight decay != default, several parameters of
    two dtypes, amsgrad on and off: a plain numpy re-implementation of
    PyTorch's algorithm (no torch needed)."""
    rng = np.random.default_rng(11)
    for amsgrad in (False, True):
        p0 = [rng.standard_normal((3, 2)), rng.standard_normal(4).astype(np.float32)]
        target = [rng.standard_normal((3, 2)), rng.standard_normal(4).astype(np.float32)]
        ps = [rtx.tensor(p, requires_grad=True) for p in p0]
        lr, wd, b1, b2, eps = 0.03, 0.25, 0.8, 0.95, 1e-6
        opt = rtx.optim.AdamW(ps, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd,
                              amsgrad=amsgrad)
        ref = [p.astype(np.float64) for p in p0]
        m = [np.zeros_like(p) for p in ref]
        v = [np.zeros_like(p) for p in ref]
        vmax = [np.zeros_like(p) for p in ref]
        for step in range(1, 9):
            opt.zero_grad()
            loss = sum(((p - rtx.tensor(t)) ** 3).abs().sum() for p, t in zip(ps, target,
                                                                               strict=True))
            loss.backward()
            opt.step()
            for i in range(2):
                d = ref[i] - target[i]
                g = 3 * d * np.abs(d)
                ref[i] = ref[i] * (1 - lr * wd)
                m[i] = b1 * m[i] + (1 - b1) * g
                v[i] = b2 * v[i] + (1 - b2) * g * g
                vmax[i] = np.maximum(vmax[i], v[i])
                vv = vmax[i] if amsgrad else v[i]
                denom = np.sqrt(vv) / np.sqrt(1 - b2**step) + eps
                ref[i] = ref[i] - lr / (1 - b1**step) * m[i] / denom
        np.testing.assert_allclose(ps[0].numpy(), ref[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ps[1].numpy(), ref[1], **tol(np.float32))
        assert ps[1].dtype == np.float32


def test_gat_reference_helper_agrees_for_bipartite_size():
    """The numpy reference of tests/_gat_reference.py with N_dst given: the
    rows computed by GATConv((x_src, None), size=...) are its targets."""
    rng = np.random.default_rng(12)
    xs = rng.standard_normal((5, 3))
    ei = np.stack([rng.integers(0, 5, 10), rng.integers(0, 3, 10)])
    rtx.manual_seed(6)
    conv = GATConv((3, 4), 2, heads=2, add_self_loops=False).double()
    got = conv((rtx.tensor(xs), None), ei, size=(5, 3)).numpy()
    # x_dst absent: no destination term in the logits, as a zero x_dst would give
    sd = dict(conv.state_dict())
    sd["att_dst"] = np.zeros_like(sd["att_dst"])
    ref, _, _ = gat_conv_ref((xs, np.zeros((3, 4))), ei, sd, 2, 2, add_self_loops=False)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
