"""GATConv: values against a numpy reference of the formula, PyG-shaped state
dicts, float64 gradchecks, self-loops, edge features, bipartite input, edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from _gat_reference import add_self_loops_ref, gat_conv_ref, gradcheck_module
from conftest import tol

import rtx
from rtx.nn import GATConv, HeteroConv

# Parameter names and shapes of torch_geometric 2.8.1's GATConv (read off its state_dict).
PYG_KEYS = {
    "homogeneous": ["att_src", "att_dst", "bias", "lin.weight"],
    "bipartite": ["att_src", "att_dst", "bias", "lin_src.weight", "lin_dst.weight"],
    "edge+res": ["att_src", "att_dst", "att_edge", "bias", "lin.weight", "lin_edge.weight",
                 "res.weight"],
}


def _graph(n=7, e=24, seed=0, loops=True):
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, size=(2, e))
    if loops:
        ei[:, :3] = [[1, 2, 2], [1, 2, 2]]  # existing (and repeated) self-loops
    return rng, ei


CONFIGS = {
    "concat": dict(heads=2),
    "mean": dict(heads=3, concat=False),
    "no-loops": dict(heads=2, add_self_loops=False),
    "slope": dict(heads=1, negative_slope=0.5),
    "no-bias": dict(heads=2, bias=False),
    "edge-mean": dict(heads=2, edge_dim=3),
    "edge-add-res": dict(heads=2, edge_dim=3, fill_value="add", residual=True),
    "edge-const-mean-res": dict(heads=2, edge_dim=3, fill_value=0.5, concat=False,
                                residual=True),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_values_match_reference(name, backend, dtype):
    kw = CONFIGS[name]
    rng, ei = _graph()
    x = rng.standard_normal((7, 5)).astype(dtype)
    rtx.manual_seed(1)
    conv = GATConv(5, 4, **kw).to(dtype)
    attr = rng.standard_normal((ei.shape[1], 3)).astype(dtype) if "edge_dim" in kw else None
    out, (used, alpha) = conv(rtx.tensor(x), ei, None if attr is None else rtx.tensor(attr),
                              return_attention_weights=True)
    ref, ref_ei, ref_alpha = gat_conv_ref(
        x, ei, conv.state_dict(), kw["heads"], 4, kw.get("concat", True),
        kw.get("negative_slope", 0.2), kw.get("add_self_loops", True), attr,
        kw.get("fill_value", "mean"))
    assert out.dtype == dtype and out.shape == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, **tol(dtype))
    np.testing.assert_array_equal(used, ref_ei)
    np.testing.assert_allclose(alpha.numpy(), ref_alpha, **tol(dtype))


def test_self_loops_replace_existing_ones():
    rng, ei = _graph()
    conv = GATConv(5, 4, heads=2)
    _, (used, alpha) = conv(rtx.tensor(rng.standard_normal((7, 5)).astype(np.float32)), ei,
                            return_attention_weights=True)
    loops = used[0] == used[1]
    assert loops.sum() == 7 and (used[:, loops] == np.arange(7)).all()  # one per node, last
    assert (used[:, -7:] == np.arange(7)).all()
    assert used.shape[1] == (ei[0] != ei[1]).sum() + 7
    # attention sums to one over each node's incoming edges, for each head
    s = np.zeros((7, 2))
    np.add.at(s, used[1], alpha.numpy())
    np.testing.assert_allclose(s, 1.0, rtol=1e-5)


@pytest.mark.parametrize("with_dst", [True, False])
def test_bipartite_values(with_dst, dtype):
    rng = np.random.default_rng(2)
    xs, xd = rng.standard_normal((6, 5)).astype(dtype), rng.standard_normal((4, 3)).astype(dtype)
    ei = np.stack([rng.integers(0, 6, 15), rng.integers(0, 4, 15)])
    conv = GATConv((5, 3), 4, heads=2, add_self_loops=False, residual=True).to(dtype)
    assert [k for k in conv.state_dict()] == PYG_KEYS["bipartite"] + ["res.weight"]
    if with_dst:
        out = conv((rtx.tensor(xs), rtx.tensor(xd)), ei)
        ref, _, _ = gat_conv_ref((xs, xd), ei, conv.state_dict(), 2, 4, add_self_loops=False)
    else:  # (x_src, None): no target term, PyG sizes the output by x_src (or size=)
        ei = ei[:, ei[1] < 4]
        out = conv((rtx.tensor(xs), None), ei)
        ref, _, _ = gat_conv_ref((xs, None), ei, conv.state_dict(), 2, 4, add_self_loops=False)
        assert conv((rtx.tensor(xs), None), ei, size=(6, 4)).shape == (4, 8)
    np.testing.assert_allclose(out.numpy(), ref, **tol(dtype))


def test_shared_weights_on_bipartite_pair():
    """An int in_channels with a (x_src, x_dst) pair uses ``lin`` on both, as PyG."""
    rng = np.random.default_rng(3)
    xs, xd = rng.standard_normal((6, 5)), rng.standard_normal((4, 5))
    ei = np.stack([rng.integers(0, 6, 12), rng.integers(0, 4, 12)])
    conv = GATConv(5, 3, heads=2, add_self_loops=False).double()
    out = conv((rtx.tensor(xs), rtx.tensor(xd)), ei)
    ref, _, _ = gat_conv_ref((xs, xd), ei, conv.state_dict(), 2, 3, add_self_loops=False)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sizes", [(7, 4), (4, 7), (6, 6)], ids=["dst<src", "src<dst", "equal"])
def test_bipartite_self_loops_over_the_shared_prefix(sizes, dtype):
    """PyG's rule for bipartite input with add_self_loops: existing loops removed,
    one loop i -> i per node i < min(N_src, N_dst); edge features of the loops by
    fill_value over the kept edges into i."""
    n_src, n_dst = sizes
    rng = np.random.default_rng(11)
    xs, xd = rng.standard_normal((n_src, 5)).astype(dtype), rng.standard_normal((n_dst, 3))
    xd = xd.astype(dtype)
    ei = np.stack([rng.integers(0, n_src, 20), rng.integers(0, n_dst, 20)])
    ei[:, :3] = [[0, 1, 2], [0, 1, 2]]                  # existing loops (removed, then added)
    conv = GATConv((5, 3), 4, heads=2).to(dtype)
    out, (used, _) = conv((rtx.tensor(xs), rtx.tensor(xd)), ei, return_attention_weights=True)
    ref, ref_ei, _ = gat_conv_ref((xs, xd), ei, conv.state_dict(), 2, 4)
    np.testing.assert_array_equal(used, ref_ei)
    assert (used[0, used[0] == used[1]] < min(sizes)).all()
    assert int((used[0] == used[1]).sum()) == min(sizes)
    np.testing.assert_allclose(out.numpy(), ref, **tol(dtype))
    # edge features: the loops' rows by fill_value over the kept edges into each node
    attr = rng.standard_normal((20, 2)).astype(dtype)
    for fill in ("mean", "add", 0.5):
        c = GATConv((5, 3), 4, heads=2, edge_dim=2, fill_value=fill).to(dtype)
        got = c((rtx.tensor(xs), rtx.tensor(xd)), ei, rtx.tensor(attr)).numpy()
        n = min(sizes)
        keep = ei[0] != ei[1]
        want_ei = np.concatenate([ei[:, keep], np.stack([np.arange(n)] * 2)], axis=1)
        if isinstance(fill, str):
            s = np.zeros((n_dst, 2), dtype)
            np.add.at(s, ei[1, keep], attr[keep])
            if fill == "mean":
                s = s / np.maximum(np.bincount(ei[1, keep], minlength=n_dst), 1)[:, None]
            loop_attr = s[:n]
        else:
            loop_attr = np.full((n, 2), fill, dtype)
        want, _, _ = gat_conv_ref((xs, xd), want_ei, c.state_dict(), 2, 4, add_self_loops=False,
                                  edge_attr=np.concatenate([attr[keep], loop_attr]))
        np.testing.assert_allclose(got, want, **tol(dtype))


def test_prefix_pair_equals_the_full_graph_rows():
    """The targets as the first sources (a sampled batch's next-layer nodes): the
    pair (x, x[:n]) gives the first n rows of the full forward on x, over the
    edges into those rows: what lets a model trim each layer's targets."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((9, 5))
    ei = np.stack([rng.integers(0, 9, 40), rng.integers(0, 9, 40)])
    conv = GATConv(5, 3, heads=2, residual=True).double()
    full = conv(rtx.tensor(x), ei).numpy()
    n = 4
    into = ei[:, ei[1] < n]
    part = conv((rtx.tensor(x), rtx.tensor(x[:n])), into).numpy()
    np.testing.assert_allclose(part, full[:n], rtol=1e-12, atol=1e-12)
    assert gradcheck_module(conv, [rtx.tensor(x)], lambda m, a: m((a, a[:n]), into))


@pytest.mark.parametrize("bipartite", [False, True], ids=["homogeneous", "bipartite"])
def test_logits_from_the_projection_when_it_is_narrower(bipartite, dtype):
    """Inputs wider than heads * out_channels take the attention logits from the
    transformed rows (rtx.head_dot) instead of the folded weights: the same values
    and gradients (reference, float64 gradcheck), with the residual and edge terms."""
    rng = np.random.default_rng(13)
    n, F = 7, 12                                        # 12 > heads * out = 6
    x = rng.standard_normal((n, F)).astype(dtype)
    ei = np.stack([rng.integers(0, n, 20), rng.integers(0, n, 20)])
    attr = rng.standard_normal((20, 2)).astype(dtype)
    if bipartite:
        conv = GATConv((F, 4), 3, heads=2, edge_dim=2, residual=True).to(dtype)
        xd = rng.standard_normal((5, 4)).astype(dtype)
        e = ei[:, ei[1] < 5]
        a = attr[: e.shape[1]]
        out = conv((rtx.tensor(x), rtx.tensor(xd)), e, rtx.tensor(a))
        ref, _, _ = gat_conv_ref((x, xd), e, conv.state_dict(), 2, 3, edge_attr=a)
    else:
        conv = GATConv(F, 3, heads=2, edge_dim=2, residual=True).to(dtype)
        out = conv(rtx.tensor(x), ei, rtx.tensor(attr))
        ref, _, _ = gat_conv_ref(x, ei, conv.state_dict(), 2, 3, edge_attr=attr)
    np.testing.assert_allclose(out.numpy(), ref, **tol(dtype))
    if dtype == np.float64:
        if bipartite:
            assert gradcheck_module(conv, [rtx.tensor(x), rtx.tensor(xd), rtx.tensor(a)],
                                    lambda m, u, v, w: m((u, v), e, w))
        else:
            assert gradcheck_module(conv, [rtx.tensor(x), rtx.tensor(attr)],
                                    lambda m, u, w: m(u, ei, w))


@pytest.mark.parametrize("loops", [True, False])
@pytest.mark.parametrize("edge_dim", [None, 3])
def test_only_the_sources_the_edges_read_are_transformed(loops, edge_dim, dtype, monkeypatch):
    """A bipartite layer whose edges read few of many wide sources transforms only
    those rows (EdgeIndex.compact_sources): the reference's values, and gradients
    equal to the path that transforms every row (float64 gradcheck too)."""
    import rtx.nn.conv.gat_conv as gat_mod

    rng = np.random.default_rng(17)
    ns, nd, F, E = 400, 30, 96, 60                      # 60 edges < 0.7 * 400 sources
    x = rng.standard_normal((ns, F)).astype(dtype)
    xd = rng.standard_normal((nd, F)).astype(dtype)
    ei = np.stack([rng.integers(0, ns, E), rng.integers(0, nd, E)])
    attr = None if edge_dim is None else rng.standard_normal((E, edge_dim)).astype(dtype)
    rtx.manual_seed(3)
    conv = GATConv((F, F), 16, heads=4, add_self_loops=loops, edge_dim=edge_dim).to(dtype)
    calls = []
    real = gat_mod._compact
    monkeypatch.setattr(gat_mod, "_compact", lambda *a: calls.append(real(*a)) or calls[-1])

    def run(compact):
        monkeypatch.setattr(gat_mod, "_compact",
                            (lambda *a: calls.append(real(*a)) or calls[-1]) if compact
                            else (lambda *a: False))
        xs, xt = rtx.tensor(x, requires_grad=True), rtx.tensor(xd, requires_grad=True)
        conv.zero_grad()
        out = conv((xs, xt), ei, None if attr is None else rtx.tensor(attr))
        (out * rtx.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape)
                          .astype(dtype))).sum().backward()
        return out.numpy(), xs.grad.numpy(), xt.grad.numpy(), {
            k: p.grad.numpy() for k, p in conv.named_parameters()}

    got, want = run(True), run(False)
    assert calls and all(calls)                          # the compact path ran
    ref, _, _ = gat_conv_ref((x, xd), ei, conv.state_dict(), 4, 16, edge_attr=attr,
                             add_self_loops=loops)
    np.testing.assert_allclose(got[0], ref, **tol(dtype))
    # the same rows, transformed alike: to the GEMM's rounding (BLAS may round a
    # 60-row product differently from a 400-row one: OpenBLAS's float32 kernels on
    # AMD EPYC do, by up to ~6 ulp)
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got[0], want[0], rtol=16 * eps, atol=16 * eps)
    for a, b in zip(got[1:3], want[1:3], strict=True):
        np.testing.assert_allclose(a, b, **tol(dtype))
    read = np.union1d(ei[0], np.arange(min(ns, nd)) if loops else [])
    assert not got[1][np.setdiff1d(np.arange(ns), read)].any()   # unread rows: no gradient
    for k in got[3]:
        # a weight gradient sums over the rows transformed (60 here, 400 there): its
        # rounding scales with the terms' size, as the GEMM's blocking differs
        t = tol(dtype)
        t["atol"] *= max(1.0, float(np.abs(want[3][k]).max()))
        np.testing.assert_allclose(got[3][k], want[3][k], **t, err_msg=k)
    if dtype == np.float64:                              # a small case the rule still takes
        monkeypatch.setattr(gat_mod, "_compact", lambda *a: calls.append(real(*a)) or calls[-1])
        ns, nd, E = 40, 6, 8
        x, xd = rng.standard_normal((ns, 64)), rng.standard_normal((nd, 64))
        ei = np.stack([rng.integers(0, ns, E), rng.integers(0, nd, E)])
        conv = GATConv((64, 64), 16, heads=4, add_self_loops=loops, edge_dim=edge_dim).double()
        args = [rtx.tensor(x), rtx.tensor(xd)] + (
            [] if attr is None else [rtx.tensor(rng.standard_normal((E, edge_dim)))])
        calls.clear()
        # w.r.t. the inputs (the parameters' gradients are compared above)
        leaves = [a.requires_grad_() for a in args]
        assert rtx.autograd.gradcheck(lambda u, v, *w: conv((u, v), ei, *w), leaves,
                                      eps=1e-6, atol=1e-6, rtol=1e-4)
        assert calls and all(calls)


def test_compact_sources_renumbers_and_shares_the_target_grouping():
    rng = np.random.default_rng(2)
    ei = np.stack([rng.integers(0, 50, 40) * 3, rng.integers(0, 9, 40)])   # sources < 150
    e = rtx.EdgeIndex(ei, 150, 9).with_self_loops()
    rows, c = e.compact_sources()
    assert e.compact_sources()[1] is c                   # cached
    r = rows.indices
    np.testing.assert_array_equal(r, np.unique(e.src.indices))
    np.testing.assert_array_equal(r[c.src.indices], e.src.indices)
    assert c.dst is e.dst and c.num_src == len(r) and c.num_dst == 9
    assert c.self_loop_info is e.self_loop_info
    empty = rtx.EdgeIndex(np.zeros((2, 0), np.int64), 5, 3)
    rows, c = empty.compact_sources()
    assert len(rows) == 0 and c.num_edges == 0 and c.num_src == 0


def test_pyg_state_dict_loads_and_gives_reference_outputs():
    """numpy arrays under PyG's names and shapes load strictly, and the layer then
    computes the reference formula with them."""
    rng, ei = _graph(seed=4)
    H, C, F, D = 3, 4, 5, 2
    sd = {"att_src": rng.standard_normal((1, H, C)), "att_dst": rng.standard_normal((1, H, C)),
          "att_edge": rng.standard_normal((1, H, C)), "bias": rng.standard_normal(H * C),
          "lin.weight": rng.standard_normal((H * C, F)),
          "lin_edge.weight": rng.standard_normal((H * C, D)),
          "res.weight": rng.standard_normal((H * C, F))}
    conv = GATConv(F, C, heads=H, edge_dim=D, residual=True).double()
    assert list(conv.state_dict()) == PYG_KEYS["edge+res"]
    conv.load_state_dict(sd)
    x, attr = rng.standard_normal((7, F)), rng.standard_normal((ei.shape[1], D))
    out = conv(rtx.tensor(x), ei, rtx.tensor(attr))
    ref, _, _ = gat_conv_ref(x, ei, sd, H, C, edge_attr=attr)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)
    # a wrongly shaped PyG array is refused, naming the key
    bad = dict(sd, **{"att_src": np.zeros((1, H, C + 1))})
    with pytest.raises(RuntimeError, match="size mismatch for att_src"):
        conv.load_state_dict(bad)
    plain = GATConv(F, C, heads=H)
    assert list(plain.state_dict()) == PYG_KEYS["homogeneous"]
    assert plain.lin.weight.shape == (H * C, F) and plain.bias.shape == (H * C,)
    assert GATConv(F, C, heads=H, concat=False).bias.shape == (C,)


def test_matches_pyg_when_installed():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    rng, ei = _graph(seed=5)
    attr = rng.standard_normal((ei.shape[1], 3))
    for F, kw in ((5, dict(heads=2)), (5, dict(heads=2, concat=False, edge_dim=3, residual=True)),
                  (12, dict(heads=2)), (12, dict(heads=2, edge_dim=3))):  # 12 > H*C: head_dot
        x = rng.standard_normal((7, F))
        ref = pyg.GATConv(F, 4, **kw).double()
        conv = GATConv(F, 4, **kw).double()
        conv.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
        a = attr if "edge_dim" in kw else None
        r_out, (r_ei, r_alpha) = ref(torch.from_numpy(x), torch.from_numpy(ei),
                                     None if a is None else torch.from_numpy(a),
                                     return_attention_weights=True)
        out, (used, alpha) = conv(rtx.tensor(x), ei, None if a is None else rtx.tensor(a),
                                  return_attention_weights=True)
        np.testing.assert_allclose(out.numpy(), r_out.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(used, r_ei.numpy())
        np.testing.assert_allclose(alpha.numpy(), r_alpha.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
        assert repr(conv) == repr(ref)
    # bipartite with self-loops (one per node below min(N_src, N_dst)), both orders
    for n_src, n_dst in ((7, 4), (4, 7)):
        xs, xd = rng.standard_normal((n_src, 5)), rng.standard_normal((n_dst, 3))
        e = np.stack([rng.integers(0, n_src, 15), rng.integers(0, n_dst, 15)])
        e[:, 0] = 1                                       # an existing loop
        ref = pyg.GATConv((5, 3), 4, heads=2).double()
        conv = GATConv((5, 3), 4, heads=2).double()
        conv.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
        r_out, (r_ei, r_alpha) = ref((torch.from_numpy(xs), torch.from_numpy(xd)),
                                     torch.from_numpy(e), return_attention_weights=True)
        out, (used, alpha) = conv((rtx.tensor(xs), rtx.tensor(xd)), e,
                                  return_attention_weights=True)
        np.testing.assert_allclose(out.numpy(), r_out.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(used, r_ei.numpy())
        np.testing.assert_allclose(alpha.numpy(), r_alpha.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)


# ---------------------------------------------------------------- gradchecks
def _homog_case(seed=6):
    rng, ei = _graph(n=5, e=12, seed=seed)
    return rng, ei, rtx.tensor(rng.standard_normal((5, 3)))


@pytest.mark.parametrize("concat", [True, False], ids=["concat", "mean"])
def test_gradcheck_homogeneous(concat):
    rng, ei, x = _homog_case()
    rtx.manual_seed(0)
    conv = GATConv(3, 2, heads=2, concat=concat).double()
    with rtx.no_grad():  # a non-zero bias and sharper attention than the init
        conv.att_src.mul_(3.0)
    assert gradcheck_module(conv, [x], lambda m, x: m(x, ei))


def test_gradcheck_bipartite():
    rng = np.random.default_rng(7)
    xs, xd = rtx.tensor(rng.standard_normal((4, 3))), rtx.tensor(rng.standard_normal((3, 2)))
    ei = np.stack([rng.integers(0, 4, 9), rng.integers(0, 3, 9)])
    rtx.manual_seed(0)
    conv = GATConv((3, 2), 2, heads=2, add_self_loops=False).double()
    assert gradcheck_module(conv, [xs, xd], lambda m, a, b: m((a, b), ei))
    conv = GATConv((3, 2), 2, heads=2, concat=False, add_self_loops=False).double()
    assert gradcheck_module(conv, [xs, xd], lambda m, a, b: m((a, b), ei))


def test_gradcheck_edge_features_and_residual():
    rng, ei, x = _homog_case(seed=8)
    attr = rtx.tensor(rng.standard_normal((ei.shape[1], 2)))
    rtx.manual_seed(0)
    conv = GATConv(3, 2, heads=2, edge_dim=2, residual=True).double()
    assert gradcheck_module(conv, [x, attr], lambda m, x, a: m(x, ei, a))


def test_gradcheck_attention_weights_output():
    rng, ei, x = _homog_case(seed=9)
    conv = GATConv(3, 2, heads=2).double()
    assert gradcheck_module(conv, [x],
                             lambda m, x: m(x, ei, return_attention_weights=True)[1][1])


# --------------------------------------------------------------- edge cases
def test_empty_edges_and_zero_nodes(dtype):
    conv = GATConv(5, 3, heads=2, add_self_loops=False, residual=True).to(dtype)
    with rtx.no_grad():
        conv.bias.add_(1.0)
    x = rtx.tensor(np.ones((4, 5), dtype=dtype), requires_grad=True)
    out = conv(x, np.zeros((2, 0), dtype=np.int64))
    np.testing.assert_allclose(out.numpy(), 1.0 + x.numpy() @ conv.res.weight.numpy().T,
                               **tol(dtype))
    out.sum().backward()
    assert conv.lin.weight.grad is None or not conv.lin.weight.grad.numpy().any()
    # zero nodes, with and without self-loops
    for loops in (True, False):
        c = GATConv(5, 3, heads=2, add_self_loops=loops).to(dtype)
        z = rtx.tensor(np.zeros((0, 5), dtype=dtype), requires_grad=True)
        o = c(z, np.zeros((2, 0), dtype=np.int64))
        assert o.shape == (0, 6)
        o.sum().backward()
    # no edges but self-loops: each node attends only to itself
    c = GATConv(5, 3, heads=2).double()
    xv = np.random.default_rng(0).standard_normal((4, 5))
    o = c(rtx.tensor(xv), np.zeros((2, 0), dtype=np.int64))
    np.testing.assert_allclose(o.numpy(), xv @ c.lin.weight.numpy().T, rtol=1e-12, atol=1e-12)


def test_edge_index_forms_and_cache():
    rng, ei = _graph(seed=10)
    x = rtx.tensor(rng.standard_normal((7, 5)))
    conv = GATConv(5, 4, heads=2).double()
    ref = conv(x, ei).numpy()
    np.testing.assert_array_equal(conv(x, rtx.tensor(ei)).numpy(), ref)
    np.testing.assert_array_equal(conv(x, ei.astype(np.int32)).numpy(), ref)
    np.testing.assert_array_equal(conv(x, ei.tolist()).numpy(), ref)
    np.testing.assert_array_equal(conv(x, rtx.EdgeIndex(ei, 7)).numpy(), ref)
    # the layer reuses its checked edges while they are equal, and notices a change
    ei2 = ei.copy()
    conv(x, ei2)
    ei2[0, 5] = (ei2[0, 5] + 1) % 7
    expect, _, _ = gat_conv_ref(x.numpy(), ei2, conv.state_dict(), 2, 4)
    np.testing.assert_allclose(conv(x, ei2).numpy(), expect, rtol=1e-12, atol=1e-12)
    nl = GATConv(5, 4, heads=2, add_self_loops=False).double()
    plan = rtx.EdgeIndex(ei, 7)
    np.testing.assert_array_equal(nl(x, plan).numpy(), nl(x, ei).numpy())
    with pytest.raises(ValueError, match="EdgeIndex was built for"):
        nl(rtx.tensor(rng.standard_normal((8, 5))), plan)


def test_dropout_on_attention():
    rng, ei = _graph(seed=11)
    x = rtx.tensor(rng.standard_normal((7, 5)))
    conv = GATConv(5, 4, heads=2, dropout=0.5).double()
    plain = GATConv(5, 4, heads=2).double()
    plain.load_state_dict(conv.state_dict())
    conv.eval()
    np.testing.assert_array_equal(conv(x, ei).numpy(), plain(x, ei).numpy())
    conv.train()
    rtx.manual_seed(3)
    a = conv(x, ei, return_attention_weights=True)[1][1].numpy()
    rtx.manual_seed(3)
    b = conv(x, ei, return_attention_weights=True)[1][1].numpy()
    np.testing.assert_array_equal(a, b)  # seeded through rtx's generator
    assert (a == 0).any() and set(np.unique(a[a > 0] > 0)) == {True}


def test_repr_like_pyg():
    assert repr(GATConv(8, 32, heads=2)) == "GATConv(8, 32, heads=2)"
    assert repr(GATConv((8, 6), 4, add_self_loops=False)) == "GATConv((8, 6), 4, heads=1)"


def test_bad_input_is_a_clear_error():
    rng, ei = _graph(seed=12)
    x = rtx.tensor(rng.standard_normal((7, 5)).astype(np.float32))
    conv = GATConv(5, 4, heads=2)
    with pytest.raises(ValueError, match=r"x must have shape \[num_nodes, 5\]"):
        conv(rtx.zeros(7, 6), ei)
    with pytest.raises(TypeError, match="rtx.Tensor"):
        conv(np.zeros((7, 5)), ei)
    with pytest.raises(IndexError):
        conv(x, np.array([[0, 7], [1, 2]]))
    with pytest.raises(IndexError):
        conv(x, np.array([[0, -1], [1, 2]]))
    with pytest.raises(ValueError, match=r"\[2, E\]"):
        conv(x, np.zeros((3, 4), dtype=np.int64))
    with pytest.raises(TypeError, match="integer"):
        conv(x, np.zeros((2, 4)))
    with pytest.raises(ValueError, match="bipartite"):
        GATConv((5, 3), 4)(x, ei)                    # two sizes need an (x_src, x_dst) pair
    with pytest.raises(ValueError, match="pair"):
        conv((x, x, x), ei)
    with pytest.raises(ValueError, match="edge_attr"):
        GATConv(5, 4, edge_dim=2)(x, ei)
    with pytest.raises(ValueError, match="edge_attr must have shape"):
        GATConv(5, 4, edge_dim=2)(x, ei, rtx.zeros(ei.shape[1] - 1, 2))
    for bad in (dict(heads=0), dict(dropout=1.0), dict(fill_value="median"),
                dict(edge_dim=0)):
        with pytest.raises(ValueError):
            GATConv(5, 4, **bad)
    with pytest.raises(ValueError):
        GATConv((5, 3, 2), 4)
    with pytest.raises(ValueError, match="bipartite edge type"):
        HeteroConv({("a", "to", "b"): GATConv((5, 3), 4)})


def test_reference_self_loop_helper():
    """The reference's own self-loop rule (PyG's: remove, then one per node)."""
    ei = np.array([[0, 1, 1, 2], [1, 1, 0, 2]])
    out, attr = add_self_loops_ref(ei, 3, np.array([[1.0], [5.0], [3.0], [7.0]]), "mean")
    np.testing.assert_array_equal(out, [[0, 1, 0, 1, 2], [1, 0, 0, 1, 2]])
    np.testing.assert_allclose(attr[:, 0], [1.0, 3.0, 3.0, 1.0, 0.0])


def test_working_memory_is_not_per_edge_and_channel():
    """Peak rtx memory of a forward+backward stays well below one [E, H, C] tensor
    (the size of the message tensor an unfused implementation forms)."""
    rng = np.random.default_rng(13)
    n, e, H, C = 2000, 60000, 4, 16
    ei = rng.integers(0, n, size=(2, e))
    x = rtx.tensor(rng.standard_normal((n, 16)).astype(np.float32))
    conv = GATConv(16, C, heads=H)
    conv(x, ei).sum().backward()  # warm the edge cache and the allocator
    conv.zero_grad()
    rtx.empty_cache()
    base = rtx.memory_stats()["current_bytes"]
    rtx.reset_peak_memory_stats()
    conv(x, ei).sum().backward()
    peak = rtx.memory_stats()["peak_bytes"] - base
    message_tensor = e * H * C * 4
    assert peak < 0.5 * message_tensor, (peak, message_tensor)
