"""``HeteroConv(path="grouped")`` / ``HetGAT(path="grouped")``: the relations into
one node type as one attention pass (issue 22 item 1) give the per-relation
path's outputs and gradients to rounding, on full graphs, sampled and trimmed
batches and featureless types; layers that cannot be grouped fall back."""

from __future__ import annotations

import numpy as np
import pytest
from _gat_reference import gradcheck_module

import rtx
from rtx.datasets import synthetic_hetgraph
from rtx.loader import NeighborLoader
from rtx.nn import GATConv, HeteroConv, HetGAT
from rtx.nn.conv.gat_conv import gat_groupable
from rtx.nn.functional import cross_entropy

TOL = {"float64": dict(rtol=1e-11, atol=1e-13), "float32": dict(rtol=2e-4, atol=2e-5)}


def _grads(m):
    return {n: p.grad.numpy().copy() for n, p in m.named_parameters() if p.grad is not None}


def _both(make, call):
    """(output, gradients) of the same model on each path."""
    res = {}
    for path in ("per-relation", "grouped"):
        rtx.manual_seed(0)
        m = make(path)
        out = call(m)
        (out * out).sum().backward()
        res[path] = (out.numpy(), _grads(m))
    return res["per-relation"], res["grouped"]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_hetgat_grouped_equals_per_relation(dtype):
    g = synthetic_hetgraph(400, seed=2)
    x = {k: rtx.tensor(np.asarray(v)).to(getattr(rtx, dtype)) for k, v in g.x_dict.items()}

    def make(path):
        m = HetGAT(g.metadata(), g.num_features_dict, 16, g.num_classes, heads=4, path=path)
        return m.double() if dtype == "float64" else m

    (a, ga), (b, gb) = _both(make, lambda m: m(x, g.edge_index_dict))
    np.testing.assert_allclose(b, a, **TOL[dtype])
    assert ga.keys() == gb.keys() and len(ga) == len(list(make("grouped").parameters()))
    for n in ga:
        np.testing.assert_allclose(gb[n], ga[n], err_msg=n, **TOL[dtype])


def test_auto_groups_full_graphs_and_runs_sampled_batches_per_relation():
    """HetGAT's default ``path="auto"``: bit for bit the grouped path on a full
    graph, the per-relation path on a sampled batch; no state_dict name changes."""
    g = synthetic_hetgraph(100, seed=0)
    x = {k: rtx.tensor(np.asarray(v)) for k, v in g.x_dict.items()}
    outs = {}
    for path in ("auto", "grouped", "per-relation"):
        rtx.manual_seed(0)
        m = HetGAT(g.metadata(), g.num_features_dict, 8, g.num_classes, heads=2, path=path)
        outs[path] = (m(x, g.edge_index_dict).numpy(), list(m.state_dict()))
    np.testing.assert_array_equal(outs["auto"][0], outs["grouped"][0])
    assert outs["auto"][1] == outs["grouped"][1] == outs["per-relation"][1]
    assert not np.array_equal(outs["grouped"][0], outs["per-relation"][0])  # another order

    data = rtx.datasets.synthetic_mag(0.002, seed=2)
    train = np.flatnonzero(data["paper"].train_mask.numpy())
    b = next(iter(NeighborLoader(data, [3, 3], input_nodes=("paper", train), batch_size=16)))
    kw = dict(num_sampled_nodes_dict=b.num_sampled_nodes_dict,
              num_sampled_edges_dict=b.num_sampled_edges_dict)
    for trim in ({}, kw):
        got = {}
        for path in ("auto", "per-relation"):
            rtx.manual_seed(0)
            m = HetGAT(data.metadata(), {"paper": 128, "author": None, "institution": None,
                                         "field_of_study": None}, 8, data.num_classes,
                       heads=2, num_nodes_dict=data.num_nodes_dict, path=path)
            got[path] = m(b.x_dict, b.edge_index_dict, b.n_id_dict, **trim).numpy()
        np.testing.assert_array_equal(got["auto"], got["per-relation"])


def test_heteroconv_path_per_call():
    x, ei = _tiny(seed=8)
    rtx.manual_seed(1)
    conv = HeteroConv(_convs()).double()
    assert conv.path == "grouped"
    grouped = conv(x, ei)["item"].numpy()
    per = conv(x, ei, path="per-relation")["item"].numpy()
    np.testing.assert_allclose(grouped, per, rtol=1e-12, atol=1e-14)
    conv.path = "per-relation"
    np.testing.assert_array_equal(conv(x, ei)["item"].numpy(), per)
    np.testing.assert_array_equal(conv(x, ei, path="grouped")["item"].numpy(), grouped)
    with pytest.raises(ValueError, match="path"):
        conv(x, ei, path="typed")


@pytest.mark.parametrize("trim", [False, True])
def test_sampled_batches_with_embeddings(trim):
    """Sampled (and trimmed) batches of a graph with featureless types."""
    data = rtx.datasets.synthetic_mag(0.002, seed=1)
    train = np.flatnonzero(data["paper"].train_mask.numpy())
    b = next(iter(NeighborLoader(data, [4, 4], input_nodes=("paper", train), batch_size=32)))
    k = b["paper"].batch_size
    kw = (dict(num_sampled_nodes_dict=b.num_sampled_nodes_dict,
               num_sampled_edges_dict=b.num_sampled_edges_dict) if trim else {})
    x = {"paper": b["paper"].x.double()}

    def make(path):
        return HetGAT(data.metadata(), {"paper": 128, "author": None, "institution": None,
                                        "field_of_study": None}, 8, data.num_classes,
                      heads=2, num_nodes_dict=data.num_nodes_dict, path=path).double()

    def call(m):
        return m(x, b.edge_index_dict, b.n_id_dict, **kw)[:k]

    (a, ga), (bb, gb) = _both(make, call)
    np.testing.assert_allclose(bb, a, **TOL["float64"])
    for n in ga:
        np.testing.assert_allclose(gb[n], ga[n], err_msg=n, **TOL["float64"])


def test_loss_and_training_step_agree():
    g = synthetic_hetgraph(300, seed=4)
    x = {k: rtx.tensor(np.asarray(v)) for k, v in g.x_dict.items()}
    losses = {}
    for path in ("per-relation", "grouped"):
        rtx.manual_seed(0)
        m = HetGAT(g.metadata(), g.num_features_dict, 16, g.num_classes, heads=4, path=path)
        opt = rtx.optim.Adam(m.parameters(), lr=0.01)
        ls = []
        for _ in range(3):
            opt.zero_grad()
            loss = cross_entropy(m(x, g.edge_index_dict), rtx.tensor(g.y))
            loss.backward()
            opt.step()
            ls.append(loss.item())
        losses[path] = ls
    np.testing.assert_allclose(losses["grouped"], losses["per-relation"], rtol=1e-5)


def _tiny(seed=0):
    rng = np.random.default_rng(seed)
    x = {"item": rtx.tensor(rng.standard_normal((4, 3))),
         "user": rtx.tensor(rng.standard_normal((3, 2)))}
    ei = {("user", "buys", "item"): np.stack([rng.integers(0, 3, 7), rng.integers(0, 4, 7)]),
          ("item", "similar", "item"): rng.integers(0, 4, size=(2, 6)),
          ("user", "likes", "item"): np.stack([rng.integers(0, 3, 5), rng.integers(0, 4, 5)])}
    return x, ei


def _convs(**kw):
    return {("user", "buys", "item"): GATConv((2, 3), 2, heads=2, add_self_loops=False, **kw),
            ("item", "similar", "item"): GATConv(3, 2, heads=2, **kw),
            ("user", "likes", "item"): GATConv((2, 3), 2, heads=2, add_self_loops=False, **kw)}


def test_gradcheck_grouped_heteroconv():
    x, ei = _tiny(seed=3)
    rtx.manual_seed(1)
    conv = HeteroConv(_convs()).double()
    assert conv.path == "grouped" and gat_groupable(list(conv.convs.values()))
    assert gradcheck_module(conv, [x["item"], x["user"]],
                            lambda mod, a, b: mod({"item": a, "user": b}, ei)["item"])


@pytest.mark.parametrize("case", ["residual", "edge_dim", "not_concat", "mixed_heads",
                                  "no_targets", "mean", "mixed_dtypes"])
def test_layers_that_cannot_be_grouped_fall_back(case):
    """Any difference among the layers (or an aggregation other than the sum, or a
    relation without target features) runs the layers one by one: the same
    result as per-relation, whatever the path."""
    x, ei = _tiny(seed=5)
    kw, aggr = {}, "sum"
    if case == "residual":
        kw = dict(residual=True)
    elif case == "edge_dim":
        kw = dict(edge_dim=2)
    elif case == "not_concat":
        kw = dict(concat=False)
    elif case == "mean":
        aggr = "mean"
    outs = []
    for path in ("per-relation", "grouped"):
        rtx.manual_seed(2)
        convs = _convs(**kw)
        if case == "mixed_heads":
            convs[("user", "likes", "item")] = GATConv((2, 3), 4, heads=1, add_self_loops=False)
        if case == "no_targets":   # bipartite relations only, targets = the first sources
            del convs[("item", "similar", "item")]
        conv = HeteroConv(convs, aggr=aggr, path=path).double()
        args = {}
        if case == "edge_dim":
            rng = np.random.default_rng(0)
            args = {"edge_attr_dict": {et: rtx.tensor(rng.standard_normal((e.shape[1], 2)))
                                       for et, e in ei.items()}}
        xin, edges = x, ei
        if case == "no_targets":
            xin = (x, {"user": x["user"]})
            edges = {et: e[:, e[1] < 3] for et, e in ei.items() if et[0] == "user"}
        if case == "mixed_dtypes":   # float64 users, float32 items and layers
            conv = conv.float()
            xin = {"user": x["user"], "item": x["item"].float()}
        outs.append(conv(xin, edges, **args)["item"].numpy())
    if case in ("residual", "edge_dim", "not_concat", "mixed_heads", "mean"):
        np.testing.assert_array_equal(outs[1], outs[0])   # literally the per-relation path
    elif case == "mixed_dtypes":
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-12, atol=1e-14)


def test_dropout_on_the_grouped_attention():
    """Training-mode dropout acts on the grouped attention weights: outputs change
    with the generator's state, eval mode gives the per-relation result."""
    x, ei = _tiny(seed=6)
    rtx.manual_seed(3)
    conv = HeteroConv(_convs(dropout=0.5)).double()
    rtx.manual_seed(4)
    a = conv(x, ei)["item"].numpy()
    b = conv(x, ei)["item"].numpy()
    assert not np.array_equal(a, b)
    conv.eval()
    got = conv(x, ei)["item"].numpy()
    conv.path = "per-relation"
    np.testing.assert_allclose(got, conv(x, ei)["item"].numpy(), rtol=1e-12, atol=1e-14)


def test_bad_path_is_a_value_error():
    with pytest.raises(ValueError, match="path"):
        HeteroConv(_convs(), path="typed")
    g = synthetic_hetgraph(50, seed=0)
    for bad in (None, "typed"):
        with pytest.raises(ValueError, match="path"):
            HetGAT(g.metadata(), g.num_features_dict, 8, g.num_classes, path=bad)


def test_lazy_layers_group_from_the_first_call():
    """Lazy (-1) sizes are unknown before the first call: the targets' logits then
    come per relation (stacked), afterwards from the one joint GEMM; both equal
    the per-relation path."""
    x, ei = _tiny(seed=7)
    outs = {}
    for path in ("per-relation", "grouped"):
        rtx.manual_seed(4)
        conv = HeteroConv({et: GATConv((-1, -1), 2, heads=2, add_self_loops=False)
                           for et in ei if et[0] == "user"}, path=path).double()
        outs[path] = [conv(x, ei)["item"].numpy() for _ in range(2)]
    for a, b in zip(outs["per-relation"], outs["grouped"], strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


# --------------------- one GEMM per wide input that several projections read
def _wide(seed=0, f_item=40):
    """Wide item features (f_item columns) that two projections read: the targets'
    logits of the relations into items (a group of two) and the source projection
    of the item -> user relation (a lone GATConv)."""
    rng = np.random.default_rng(seed)
    x = {"item": rtx.tensor(rng.standard_normal((9, f_item))),
         "user": rtx.tensor(rng.standard_normal((6, 3)))}
    ei = {("user", "buys", "item"): np.stack([rng.integers(0, 6, 14), rng.integers(0, 9, 14)]),
          ("user", "likes", "item"): np.stack([rng.integers(0, 6, 10), rng.integers(0, 9, 10)]),
          ("item", "rated_by", "user"): np.stack([rng.integers(0, 9, 12),
                                                  rng.integers(0, 6, 12)])}
    convs = {("user", "buys", "item"): GATConv((3, f_item), 2, heads=2, add_self_loops=False),
             ("user", "likes", "item"): GATConv((3, f_item), 2, heads=2, add_self_loops=False),
             ("item", "rated_by", "user"): GATConv((f_item, 3), 2, heads=2,
                                                   add_self_loops=False)}
    return x, ei, convs


def _spy_shared(monkeypatch):
    import rtx.nn.conv.hetero_conv as hetero_conv

    seen = []
    real = hetero_conv.shared_projections

    def spy(groups):
        out = real(groups)
        seen.append(sorted(k[0] for k in out))
        return out

    monkeypatch.setattr(hetero_conv, "shared_projections", spy)
    return seen


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_projections_of_one_wide_input_share_one_gemm(dtype, monkeypatch):
    seen = _spy_shared(monkeypatch)
    res = {}
    for path in ("per-relation", "grouped"):
        rtx.manual_seed(0)                    # the same initial weights on each path
        x, ei, convs = _wide(seed=1)
        conv = HeteroConv(convs, path=path)
        conv = conv.double() if dtype == "float64" else conv
        xin = {k: v.to(getattr(rtx, dtype)).requires_grad_() for k, v in x.items()}
        out = conv(xin, ei)
        loss = (out["item"] * out["item"]).sum() + (out["user"] * out["user"]).sum()
        loss.backward()
        res[path] = ({k: v.numpy() for k, v in out.items()}, _grads(conv),
                     {k: v.grad.numpy() for k, v in xin.items()})
    assert seen == [["dst", "src"]]          # the grouped call shared the item GEMM
    (oa, ga, xa), (ob, gb, xb) = res["per-relation"], res["grouped"]
    for d in (("out", oa, ob), ("param", ga, gb), ("input", xa, xb)):
        assert d[1].keys() == d[2].keys()
        for k in d[1]:
            np.testing.assert_allclose(d[2][k], d[1][k], err_msg=f"{d[0]} {k}", **TOL[dtype])


def test_narrow_inputs_and_single_readers_are_not_shared(monkeypatch):
    import rtx.nn.conv.gat_conv as gat_conv

    seen = _spy_shared(monkeypatch)
    built = []                                # joint target weights built
    real_joint = gat_conv._joint_att_weight
    monkeypatch.setattr(gat_conv, "_joint_att_weight",
                        lambda *a: built.append(1) or real_joint(*a))
    x, ei, convs = _wide(seed=2, f_item=10)   # 10 columns < 2 x (4 + 4) outputs
    HeteroConv(convs).double()(x, ei)         # (float64, as x: the targets' logits joint)
    assert built == [1]                       # by the grouped attention only, not twice
    x, ei = _tiny(seed=2)                     # no input read by two projections
    HeteroConv(_convs())(x, ei)
    assert seen == [[], []]


def test_gradcheck_shared_projections(monkeypatch):
    seen = _spy_shared(monkeypatch)
    x, ei, convs = _wide(seed=3, f_item=24)
    rtx.manual_seed(1)
    conv = HeteroConv(convs).double()

    def f(mod, a, b):
        out = mod({"item": a, "user": b}, ei)
        return rtx.concat([out["item"].reshape(-1), out["user"].reshape(-1)], 0)

    assert gradcheck_module(conv, [x["item"], x["user"]], f)
    assert seen and seen[0] == ["dst", "src"]
