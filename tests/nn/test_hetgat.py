"""HeteroConv and HetGAT: values against a numpy composition of the GATConv
reference, gradchecks, training on a separable graph, state dicts, errors."""

from __future__ import annotations

import numpy as np
import pytest
from _gat_reference import gat_conv_ref, gradcheck_module

import rtx
from rtx.datasets import synthetic_hetgraph
from rtx.nn import GATConv, HeteroConv, HetGAT, Linear
from rtx.nn.functional import cross_entropy
from rtx.nn.training import train_epoch
from rtx.optim import Adam

EDGE_TYPES = [("user", "buys", "item"), ("item", "similar", "item"),
              ("item", "bought_by", "user"), ("user", "follows", "user")]


def _tiny(seed=0, n_item=5, n_user=4, dtype=np.float64):
    rng = np.random.default_rng(seed)
    x = {"item": rng.standard_normal((n_item, 3)).astype(dtype),
         "user": rng.standard_normal((n_user, 2)).astype(dtype)}
    buys = np.stack([rng.integers(0, n_user, 8), rng.integers(0, n_item, 8)])
    ei = {("user", "buys", "item"): buys,
          ("item", "similar", "item"): rng.integers(0, n_item, size=(2, 6)),
          ("item", "bought_by", "user"): buys[::-1].copy(),
          ("user", "follows", "user"): rng.integers(0, n_user, size=(2, 5))}
    return x, ei


def _hetgat_ref(model, x, ei, layer_ei=None):
    """HetGAT from the numpy GATConv reference: per layer, sum the relations into
    each type, ELU; then the linear head (``layer_ei``: one edge dict per layer)."""
    sd = model.state_dict()
    h = dict(x)
    for layer, rels in enumerate(model.layer_edge_types):
        out = {}
        if layer_ei is not None:
            ei = layer_ei[layer]
        for s, r, d in rels:
            pre = f"convs.{layer}.convs.<{s}___{r}___{d}>."
            p = {k[len(pre):]: v for k, v in sd.items() if k.startswith(pre)}
            xin = h[s] if s == d else (h[s], h[d])
            o, _, _ = gat_conv_ref(xin, ei[(s, r, d)], p, model.heads,
                                   model.hidden_channels // model.heads,
                                   add_self_loops=(s == d))
            out[d] = out.get(d, 0) + o
        h = {k: np.where(v > 0, v, np.expm1(np.minimum(v, 0))) for k, v in out.items()}
    return h[model.target] @ sd["lin.weight"].T + sd["lin.bias"]


def _t(x):
    return {k: rtx.tensor(v) for k, v in x.items()}


def test_hetgat_structure_and_pyg_names():
    rtx.manual_seed(0)
    m = HetGAT((["item", "user"], EDGE_TYPES), {"item": 3, "user": 2}, 8, 4, heads=2,
               target="item")
    # the last layer keeps only relations into the target; self-loops only within a type
    assert m.layer_edge_types == [EDGE_TYPES, [("user", "buys", "item"),
                                               ("item", "similar", "item")]]
    c0 = m.convs[0].convs["<user___buys___item>"]
    assert isinstance(c0, GATConv) and not c0.add_self_loops and c0.in_channels == (2, 3)
    assert c0.heads == 2 and c0.out_channels == 4 and c0.concat
    c1 = m.convs[1].convs["<item___similar___item>"]
    assert c1.add_self_loops and c1.in_channels == 8
    keys = list(m.state_dict())
    assert "convs.0.convs.<user___buys___item>.lin_src.weight" in keys
    assert "convs.1.convs.<item___similar___item>.lin.weight" in keys
    assert keys[-2:] == ["lin.weight", "lin.bias"]
    assert isinstance(m.lin, Linear) and m.lin.weight.shape == (4, 8)
    assert "HeteroConv(num_relations=4)" in repr(m)


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_hetgat_values_match_reference(layers):
    x, ei = _tiny(seed=layers)
    rtx.manual_seed(layers)
    m = HetGAT((["item", "user"], EDGE_TYPES), {"item": 3, "user": 2}, 8, 3, heads=2,
               num_layers=layers, target="item").double()
    out = m(_t(x), ei)
    np.testing.assert_allclose(out.numpy(), _hetgat_ref(m, x, ei), rtol=1e-12, atol=1e-12)


def test_hetgat_takes_one_edge_dict_per_layer():
    """A list of edge dicts, one per layer (a graph trimmed per layer): each layer
    runs its own edges; [ei] * layers is the plain forward, bit for bit, dropout
    included (the same draws)."""
    x, ei = _tiny(seed=7)
    rtx.manual_seed(7)
    m = HetGAT((["item", "user"], EDGE_TYPES), {"item": 3, "user": 2}, 8, 3, heads=2,
               num_layers=2, target="item").double()
    np.testing.assert_array_equal(m(_t(x), [ei, ei]).numpy(), m(_t(x), ei).numpy())
    # the last layer: only the in-edges of items 0 and 1 (its rows 0, 1 stay exact)
    last = {et: e[:, e[1] < 2] for et, e in ei.items() if et[2] == "item"}
    out = m(_t(x), [ei, last]).numpy()
    want = _hetgat_ref(m, x, ei, layer_ei=[ei, last])
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out[:2], m(_t(x), ei).numpy()[:2], rtol=1e-12, atol=1e-12)
    assert not np.allclose(out[2:], m(_t(x), ei).numpy()[2:])
    drop = HetGAT((["item", "user"], EDGE_TYPES), {"item": 3, "user": 2}, 8, 3, heads=2,
                  target="item", dropout=0.4).double()
    rtx.manual_seed(1)
    a = drop(_t(x), ei).numpy()
    rtx.manual_seed(1)
    np.testing.assert_array_equal(drop(_t(x), [ei, ei]).numpy(), a)
    with pytest.raises(ValueError, match="one per layer"):
        m(_t(x), [ei])
    with pytest.raises(TypeError, match=r"edge_index_dict\[1\] must be a dict"):
        m(_t(x), [ei, list(ei.values())])
    with pytest.raises(ValueError, match="no edges for edge type"):
        m(_t(x), [ei, {}])


@pytest.mark.filterwarnings("ignore:There exist node types")  # PyG's note on the last layer
def test_hetgat_matches_pyg_when_installed():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    g = synthetic_hetgraph(200, seed=1).astype(np.float64)
    rtx.manual_seed(0)
    m = HetGAT(g.metadata(), g.num_features_dict, 16, 8, heads=4).double()

    class Ref(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList()
            for layer, rels in enumerate(m.layer_edge_types):
                d = {}
                for s, r, t in rels:
                    cs = g.num_features_dict[s] if layer == 0 else 16
                    ct = g.num_features_dict[t] if layer == 0 else 16
                    d[(s, r, t)] = (pyg.GATConv(cs, 4, heads=4) if s == t else
                                    pyg.GATConv((cs, ct), 4, heads=4, add_self_loops=False))
                self.convs.append(pyg.HeteroConv(d, aggr="sum"))
            self.lin = torch.nn.Linear(16, 8)

        def forward(self, xd, ed):
            for c in self.convs:
                xd = {k: torch.nn.functional.elu(v) for k, v in c(xd, ed).items()}
            return self.lin(xd["paper"])

    ref = Ref().double()
    assert list(ref.state_dict()) == list(m.state_dict())  # same names, same order
    ref.load_state_dict({k: torch.from_numpy(v) for k, v in m.state_dict().items()})
    want = ref({k: torch.from_numpy(v) for k, v in g.x_dict.items()},
               {k: torch.from_numpy(v) for k, v in g.edge_index_dict.items()})
    got = m(_t(g.x_dict), g.edge_index_dict)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_gradcheck_hetgat_tiny():
    x, ei = _tiny(seed=7, n_item=3, n_user=3)
    rtx.manual_seed(2)
    m = HetGAT((["item", "user"], EDGE_TYPES), {"item": 3, "user": 2}, 4, 2, heads=2,
               target="item").double()
    xi, xu = rtx.tensor(x["item"]), rtx.tensor(x["user"])
    assert gradcheck_module(m, [xi, xu], lambda mod, a, b: mod({"item": a, "user": b}, ei))


def test_gradcheck_heteroconv_mean_aggr():
    x, ei = _tiny(seed=8, n_item=3, n_user=3)
    rtx.manual_seed(3)
    conv = HeteroConv({("user", "buys", "item"): GATConv((2, 3), 2, add_self_loops=False),
                       ("item", "similar", "item"): GATConv(3, 2, heads=2, concat=False)},
                      aggr="mean").double()
    xi, xu = rtx.tensor(x["item"]), rtx.tensor(x["user"])
    assert gradcheck_module(conv, [xi, xu],
                             lambda mod, a, b: mod({"item": a, "user": b}, ei)["item"])


@pytest.mark.parametrize("aggr", ["sum", "mean", "max", "min", "cat"])
def test_heteroconv_aggregations(aggr):
    x, ei = _tiny(seed=9)
    rtx.manual_seed(4)
    a = GATConv((2, 3), 2, heads=2, add_self_loops=False).double()
    b = GATConv(3, 2, heads=2).double()
    conv = HeteroConv({("user", "buys", "item"): a, ("item", "similar", "item"): b}, aggr=aggr)
    xt = _t(x)
    out = conv(xt, ei)
    assert set(out) == {"item"}  # only destination types come back
    ra = a((xt["user"], xt["item"]), ei[("user", "buys", "item")]).numpy()
    rb = b(xt["item"], ei[("item", "similar", "item")]).numpy()
    want = {"sum": ra + rb, "mean": (ra + rb) / 2, "max": np.maximum(ra, rb),
            "min": np.minimum(ra, rb), "cat": np.concatenate([ra, rb], 1)}[aggr]
    np.testing.assert_allclose(out["item"].numpy(), want, rtol=1e-12, atol=1e-12)
    # relations absent from edge_index_dict are skipped
    only = conv(xt, {("item", "similar", "item"): ei[("item", "similar", "item")]})
    np.testing.assert_allclose(only["item"].numpy(), rb, rtol=1e-12, atol=1e-12)


def test_heteroconv_pair_input_gives_each_relation_sources_and_targets():
    """x_dict as (x_src_dict, x_dst_dict), DGL's block input: every relation, a
    same-type one included, gets (sources, targets); with the targets the first
    rows of the sources the result is the full forward's first rows."""
    x, ei = _tiny(seed=11)
    rtx.manual_seed(5)
    a = GATConv((2, 3), 2, heads=2, add_self_loops=False).double()
    b = GATConv(3, 2, heads=2).double()
    conv = HeteroConv({("user", "buys", "item"): a, ("item", "similar", "item"): b})
    xt = _t(x)
    n = 3
    into = {et: e[:, e[1] < n] for et, e in ei.items()}
    out = conv((xt, {"item": xt["item"][:n]}), into)
    ra = a((xt["user"], xt["item"][:n]), into[("user", "buys", "item")]).numpy()
    rb = b((xt["item"], xt["item"][:n]), into[("item", "similar", "item")]).numpy()
    np.testing.assert_allclose(out["item"].numpy(), ra + rb, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["item"].numpy(), conv(xt, ei)["item"].numpy()[:n],
                               rtol=1e-12, atol=1e-12)
    for bad in ((xt,), (xt, xt, xt), (xt, [1])):
        with pytest.raises(TypeError, match="pair of such dicts"):
            conv(bad, ei)


def test_heteroconv_passes_edge_level_arguments():
    rng = np.random.default_rng(10)
    x, ei = _tiny(seed=10)
    et = ("item", "similar", "item")
    conv = HeteroConv({et: GATConv(3, 2, heads=2, edge_dim=4)}).double()
    attr = rtx.tensor(rng.standard_normal((ei[et].shape[1], 4)))
    out = conv(_t(x), ei, edge_attr_dict={et: attr})["item"]
    direct = conv.convs["<item___similar___item>"](rtx.tensor(x["item"]), ei[et], attr)
    np.testing.assert_array_equal(out.numpy(), direct.numpy())
    with pytest.raises(ValueError, match="_dict"):
        conv(_t(x), ei, edge_attr={et: attr})


def _separable(n_per=40, seed=0):
    """Two classes of papers; paper features are pure noise, each paper's authors
    all share its class and carry a clean class feature: only the graph tells."""
    rng = np.random.default_rng(seed)
    n = 2 * n_per
    y = np.repeat([0, 1], n_per)
    n_auth = 20
    y_a = np.arange(n_auth) % 2
    src = np.concatenate([rng.choice(np.flatnonzero(y_a == c), size=2) for c in y])
    dst = np.repeat(np.arange(n), 2)
    writes = np.stack([src, dst])
    x = {"paper": rng.standard_normal((n, 4)).astype(np.float32),
         "author": (np.eye(2)[y_a] + 0.1 * rng.standard_normal((n_auth, 2))).astype(np.float32)}
    ei = {("author", "writes", "paper"): writes, ("paper", "written_by", "author"): writes[::-1]}
    return x, ei, y


def test_hetgat_learns_a_separable_graph():
    x, ei, y = _separable()
    rtx.manual_seed(0)
    m = HetGAT((["paper", "author"], list(ei)), {"paper": 4, "author": 2}, 8, 2, heads=2)
    opt = Adam(m.parameters(), lr=0.05)
    xt, yt = _t(x), rtx.tensor(y)
    for _ in range(60):
        train_epoch(lambda: m(xt, ei), lambda logits: cross_entropy(logits, yt), opt)
    with rtx.no_grad():
        acc = (m(xt, ei).argmax(-1).numpy() == y).mean()
    assert acc == 1.0, acc


def test_state_dict_round_trip_gives_identical_outputs(tmp_path):
    g = synthetic_hetgraph(150, seed=2)
    x = _t(g.x_dict)
    rtx.manual_seed(0)
    a = HetGAT(g.metadata(), g.num_features_dict, 16, g.num_classes, heads=4)
    opt = Adam(a.parameters(), lr=0.01)
    for _ in range(2):  # move away from the initialisation
        train_epoch(lambda: a(x, g.edge_index_dict),
                    lambda logits: cross_entropy(logits, rtx.tensor(g.y)), opt)
    rtx.save(a.state_dict(), tmp_path / "m.npz")
    rtx.manual_seed(123)
    b = HetGAT(g.metadata(), g.num_features_dict, 16, g.num_classes, heads=4)
    assert not np.array_equal(a(x, g.edge_index_dict).numpy(), b(x, g.edge_index_dict).numpy())
    b.load_state_dict(rtx.load(tmp_path / "m.npz"))
    np.testing.assert_array_equal(a(x, g.edge_index_dict).numpy(),
                                  b(x, g.edge_index_dict).numpy())


def test_edges_are_checked_once_and_shared_across_layers():
    x, ei = _tiny(seed=11)
    m = HetGAT((["item", "user"], EDGE_TYPES), {"item": 3, "user": 2}, 8, 3, heads=2,
               target="item").double()
    xt = _t(x)
    first = m(xt, ei).numpy()
    plans = {et: m._edges(et, ei, xt) for et in EDGE_TYPES}  # the plans the forward used
    copies = {k: v.copy() for k, v in ei.items()}
    again = m(xt, copies)                                 # equal values: same plans
    np.testing.assert_array_equal(again.numpy(), first)
    assert all(m._edges(et, copies, xt) is plans[et] for et in EDGE_TYPES)
    # every layer's GATConv of a relation takes its self-loops from that one plan
    assert plans[("item", "similar", "item")].with_self_loops() is plans[
        ("item", "similar", "item")].with_self_loops()
    # an array changed in place is noticed
    changed = {k: v.copy() for k, v in ei.items()}
    changed[("user", "buys", "item")][1, 0] = (changed[("user", "buys", "item")][1, 0] + 1) % 5
    np.testing.assert_allclose(m(xt, changed).numpy(), _hetgat_ref(m, x, changed),
                               rtol=1e-12, atol=1e-12)
    # rtx.EdgeIndex objects are taken as they are
    given = {et: rtx.EdgeIndex(v, x[et[0]].shape[0], x[et[2]].shape[0]) for et, v in ei.items()}
    np.testing.assert_array_equal(m(xt, given).numpy(), first)


def test_same_bits_at_any_thread_count():
    g = synthetic_hetgraph(300, seed=3)
    x = _t(g.x_dict)
    res = []
    for threads in (1, 2):
        rtx.set_num_threads(threads)
        rtx.manual_seed(0)
        m = HetGAT(g.metadata(), g.num_features_dict, 16, g.num_classes, heads=4)
        out = m(x, g.edge_index_dict)
        cross_entropy(out, rtx.tensor(g.y)).backward()
        res.append((out.numpy(), [p.grad.numpy() for p in m.parameters()]))
    np.testing.assert_array_equal(res[0][0], res[1][0])
    for a, b in zip(res[0][1], res[1][1], strict=True):
        np.testing.assert_array_equal(a, b)


def test_bad_metadata_and_inputs_name_the_type():
    meta = (["item", "user"], EDGE_TYPES)
    ch = {"item": 3, "user": 2}
    with pytest.raises(ValueError, match="'shop'"):
        HetGAT((["item", "user"], [*EDGE_TYPES, ("shop", "sells", "item")]), ch, 8, 2,
               target="item")
    with pytest.raises(ValueError, match="no size for node type 'user'"):
        HetGAT(meta, {"item": 3}, 8, 2, target="item")
    with pytest.raises(ValueError, match="'venue'"):
        HetGAT(meta, {**ch, "venue": 4}, 8, 2, target="item")
    with pytest.raises(ValueError, match="target node type 'paper'"):
        HetGAT(meta, ch, 8, 2)
    with pytest.raises(ValueError, match="divisible"):
        HetGAT(meta, ch, 10, 2, heads=4, target="item")
    with pytest.raises(ValueError, match="metadata"):
        HetGAT(["item"], ch, 8, 2, target="item")
    with pytest.raises(ValueError, match="must be a"):
        HetGAT((["item", "user"], [("user", "item")]), ch, 8, 2, target="item")
    with pytest.raises(ValueError, match="no edge type ends at the target node type 'user'"):
        HetGAT((["item", "user"], [("user", "buys", "item")]), ch, 8, 2, target="user")
    with pytest.raises(ValueError, match=r"in_channels\['item'\]"):
        HetGAT(meta, {"item": 0, "user": 2}, 8, 2, target="item")

    m = HetGAT(meta, ch, 8, 2, heads=2, target="item")
    x, ei = _tiny(dtype=np.float32)
    xt = _t(x)
    with pytest.raises(ValueError, match="no features for node type 'user'"):
        m({"item": xt["item"]}, ei)
    with pytest.raises(ValueError, match=r"node type 'user' must have shape \[num_nodes, 2\]"):
        m({"item": xt["item"], "user": rtx.zeros(4, 5)}, ei)
    with pytest.raises(TypeError, match="node type 'item'"):
        m({"item": x["item"], "user": xt["user"]}, ei)
    missing = {k: v for k, v in ei.items() if k != ("item", "similar", "item")}
    with pytest.raises(ValueError, match=r"\('item', 'similar', 'item'\)"):
        m(xt, missing)
    bad = dict(ei)
    bad[("user", "buys", "item")] = np.array([[0], [9]])
    with pytest.raises(IndexError, match=r"\('user', 'buys', 'item'\)"):
        m(xt, bad)
    with pytest.raises(ValueError, match="no features for node type 'user'"):
        HeteroConv({("user", "buys", "item"): GATConv((2, 3), 2, add_self_loops=False)})(
            {"item": xt["item"]}, ei)
    with pytest.raises(ValueError, match="aggr"):
        HeteroConv({("user", "buys", "item"): GATConv((2, 3), 2, add_self_loops=False)},
                   aggr="prod")
