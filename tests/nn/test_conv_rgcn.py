"""``RGCNConv`` against PyG's with copied weights (values, input and every
parameter gradient), gradchecks, the pair structure's reuse and bad input;
``rtx.nn.models.RGCN`` trains."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
from rtx.autograd import gradcheck
from rtx.nn import RGCNConv

# PyG 2.8's RGCNConv state_dict keys
PYG_KEYS = {
    "plain": ["weight", "root", "bias"],
    "bases": ["weight", "comp", "root", "bias"],
    "blocks": ["weight", "root", "bias"],
    "no-root": ["weight", "bias"],
}

CONFIGS = {
    "plain": {},
    "bases": {"num_bases": 2},
    "blocks": {"num_blocks": 2},
    "no-root": {"root_weight": False},
    "add": {"aggr": "add"},
    "max": {"aggr": "max"},
    "no-bias": {"bias": False},
}


def _graph(rng, n=12, e=60, R=4):
    ei = rng.integers(0, n, (2, e))
    et = rng.integers(0, R, e)
    et[et == 2] = 1  # relation 2 has no edges
    return ei, et


def _pyg_pair(name, kw, torch, pyg, in_ch=6, out=4, R=4):
    torch.manual_seed(0)
    ref = pyg.RGCNConv(in_ch, out, R, **kw).double()
    m = RGCNConv(in_ch, out, R, **kw).double()
    sd = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    if name in PYG_KEYS:
        assert list(sd) == PYG_KEYS[name]
    assert list(m.state_dict()) == list(sd)
    m.load_state_dict(sd)
    return ref, m


@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_pyg_values_and_gradients(name):
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    rng = np.random.default_rng(0)
    ei, et = _graph(rng)
    x = rng.standard_normal((12, 6))
    ref, m = _pyg_pair(name, CONFIGS[name], torch, pyg)
    xt = torch.from_numpy(x).requires_grad_()
    want = ref(xt, torch.from_numpy(ei), torch.from_numpy(et))
    xr = rtx.tensor(x, requires_grad=True)
    got = m(xr, ei, et)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(tuple(want.shape))
    (want * torch.from_numpy(g)).sum().backward()
    (got * rtx.tensor(g)).sum().backward()
    np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    params = dict(m.named_parameters())
    for k, p in ref.named_parameters():
        np.testing.assert_allclose(params[k].grad.numpy(), p.grad.numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=k)


def test_bipartite_matches_pyg():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    rng = np.random.default_rng(1)
    xs, xd = rng.standard_normal((9, 5)), rng.standard_normal((4, 3))
    ei = np.stack([rng.integers(0, 9, 30), rng.integers(0, 4, 30)])
    et = rng.integers(0, 3, 30)
    torch.manual_seed(0)
    ref = pyg.RGCNConv((5, 3), 2, 3).double()
    m = RGCNConv((5, 3), 2, 3).double()
    m.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    want = ref((torch.from_numpy(xs), torch.from_numpy(xd)), torch.from_numpy(ei),
               torch.from_numpy(et))
    got = m((rtx.tensor(xs), rtx.tensor(xd)), ei, et)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kw", [{}, {"num_bases": 2}, {"num_blocks": 3}, {"aggr": "max"}])
def test_gradcheck(kw):
    rng = np.random.default_rng(2)
    ei, et = _graph(rng, n=6, e=20, R=3)
    et = et % 3
    m = RGCNConv(6, 3, 3, **kw).double()
    x = rtx.tensor(rng.standard_normal((6, 6)), requires_grad=True)
    params = [p for p in m.parameters()]
    assert gradcheck(lambda a, *ps: m(a, ei, et), [x, *params])


def test_pair_structure_is_reused_for_the_same_plans():
    rng = np.random.default_rng(3)
    ei, et = _graph(rng)
    edges, types = rtx.EdgeIndex(ei, 12), rtx.IndexPlan(et, 4)
    m = RGCNConv(6, 4, 4).double()
    x = rtx.tensor(rng.standard_normal((12, 6)))
    a = m(x, edges, types)
    first = m._pairs[2]
    b = m(x, edges, types)
    assert m._pairs[2] is first
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    et2 = et.copy()
    et2[0] = (et2[0] + 1) % 4  # a new plan: a new structure, new values
    c = m(x, edges, rtx.IndexPlan(et2, 4))
    assert m._pairs[2] is not first
    np.testing.assert_array_equal(m(x, ei, et2).numpy(), c.numpy())


def test_empty_graph_and_bad_input():
    m = RGCNConv(3, 2, 2).double()
    x = rtx.tensor(np.ones((4, 3)))
    out = m(x, np.zeros((2, 0), np.int64), np.zeros(0, np.int64))
    np.testing.assert_allclose(out.numpy(), (x.numpy() @ m.root.numpy()) + m.bias.numpy())
    ei = np.array([[0, 1], [1, 2]])
    with pytest.raises(IndexError):
        m(x, ei, [0, 2])
    with pytest.raises(ValueError, match="len"):
        m(x, ei, [0])
    with pytest.raises(ValueError, match="edge_type is required"):
        m(x, ei, None)
    with pytest.raises(ValueError, match=r"x must have shape \[num_nodes, 3\]"):
        m(rtx.ones(4, 2), ei, [0, 1])
    with pytest.raises(IndexError):
        m(x, np.array([[0, 4], [1, 2]]), [0, 1])
    with pytest.raises(ValueError, match="both basis"):
        RGCNConv(4, 4, 2, num_bases=2, num_blocks=2)
    with pytest.raises(ValueError, match="must divide"):
        RGCNConv(5, 4, 2, num_blocks=2)
    with pytest.raises(ValueError, match="aggr"):
        RGCNConv(4, 4, 2, aggr="lstm")
    with pytest.raises(ValueError, match="num_relations"):
        RGCNConv(4, 4, 0)


def test_initialisation_is_pygs():
    rtx.manual_seed(0)
    m = RGCNConv(200, 100, 3, num_bases=4)
    assert m.weight.shape == (4, 200, 100) and m.comp.shape == (3, 4)
    b = np.sqrt(6 / 300)
    assert 0.9 * b < np.abs(m.weight.numpy()).max() <= b
    assert np.abs(m.comp.numpy()).max() <= np.sqrt(6 / 7)
    np.testing.assert_array_equal(m.bias.numpy(), 0)


# ------------------------------------------------------------------ the model
def _t(d):
    return {k: rtx.tensor(v) for k, v in d.items()}


def test_rgcn_model_matches_the_same_model_written_with_pyg():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    from rtx.datasets import synthetic_hetgraph
    from rtx.nn.models import RGCN

    g = synthetic_hetgraph(120, seed=1).astype(np.float64)
    node_types, edge_types = g.metadata()
    m = RGCN(g.metadata(), g.num_features_dict, 8, 5, num_layers=2, num_bases=3).double()
    torch.manual_seed(0)
    lin_in = pyg.HeteroDictLinear(g.num_features_dict, 8).double()
    convs = torch.nn.ModuleList([pyg.RGCNConv(8, 8, len(edge_types), num_bases=3)
                                 for _ in range(2)]).double()
    lin = torch.nn.Linear(8, 5).double()
    sd = {f"lin_in.{k}": v for k, v in lin_in.state_dict().items()}
    sd |= {f"convs.{k}": v for k, v in convs.state_dict().items()}
    sd |= {f"lin.{k}": v for k, v in lin.state_dict().items()}
    sd = {k: v.detach().numpy() for k, v in sd.items()}
    assert sorted(m.state_dict()) == sorted(sd)
    m.load_state_dict(sd)
    sizes = [g.x_dict[nt].shape[0] for nt in node_types]
    off = dict(zip(node_types, np.cumsum([0, *sizes[:-1]]), strict=True))
    ei = np.concatenate([g.edge_index_dict[et] + np.array([[off[et[0]]], [off[et[2]]]])
                         for et in edge_types], axis=1)
    et_vec = np.concatenate([np.full(g.edge_index_dict[et].shape[1], r)
                             for r, et in enumerate(edge_types)])
    xt = {k: torch.from_numpy(v) for k, v in g.x_dict.items()}
    h_dict = lin_in(xt)
    h = torch.cat([h_dict[nt] for nt in node_types])
    e_t, t_t = torch.from_numpy(ei), torch.from_numpy(et_vec)
    h = convs[1](convs[0](h, e_t, t_t).relu(), e_t, t_t)
    s = off["paper"]
    want = lin(h[s:s + sizes[node_types.index("paper")]])
    got = m(_t(g.x_dict), g.edge_index_dict)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    graph = m._graph
    m(_t(g.x_dict), g.edge_index_dict)
    assert m._graph is graph  # the homogeneous graph is reused for the same edges


def test_rgcn_model_trains_on_the_built_in_graph():
    from rtx.datasets import synthetic_hetgraph
    from rtx.nn.functional import cross_entropy
    from rtx.nn.models import RGCN

    g = synthetic_hetgraph(300, seed=3)
    x = _t(g.x_dict)
    rtx.manual_seed(0)
    m = RGCN(g.metadata(), g.num_features_dict, 16, g.num_classes, num_bases=4)
    opt = rtx.optim.Adam(m.parameters(), lr=0.02)
    y = rtx.tensor(g.y)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = cross_entropy(m(x, g.edge_index_dict), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    with pytest.raises(ValueError, match="in_channels"):
        RGCN(g.metadata(), {"paper": 64}, 16, 3)
    with pytest.raises(ValueError, match="target"):
        RGCN(g.metadata(), g.num_features_dict, 16, 3, target="venue")
