"""Lazy sizes (``-1``): ``Linear(-1, out)``, ``LazyLinear``, ``SAGEConv`` /
``GATv2Conv`` / ``GATConv`` with ``-1`` / ``(-1, -1)`` in_channels, inside ``HeteroConv``.

Materialised at the first forward with the initialisation of a non-lazy layer
of that size; ``load_state_dict`` into a lazy module sizes it from the
checkpoint (PyG); placeholders refuse to be read; an optimiser built before
the first forward holds the parameters that get sized (same objects)."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import rtx
from rtx.nn import (
    GATConv,
    GATv2Conv,
    HeteroConv,
    LazyLinear,
    Linear,
    RGCNConv,
    SAGEConv,
    SimpleHGNConv,
    UninitializedParameter,
)
from rtx.nn.lazy import check_lazy_channels, has_uninitialized_params


# ------------------------------------------------------------------ Linear
@pytest.mark.parametrize("make", [lambda: Linear(-1, 4), lambda: LazyLinear(4)])
def test_linear_is_sized_and_initialised_at_the_first_forward(make, backend):
    x = rtx.randn(3, 5, seed=0)
    lazy = make()
    assert isinstance(lazy.weight, UninitializedParameter) and lazy.in_features == -1
    assert has_uninitialized_params(lazy)
    np.testing.assert_array_equal(lazy.bias.numpy(), 0)  # exists, drawn when sized
    rtx.manual_seed(7)
    y = lazy(x)
    rtx.manual_seed(7)
    eager = Linear(5, 4)  # the same draws at the same generator state
    assert type(lazy.weight) is rtx.nn.Parameter and lazy.in_features == 5
    assert not has_uninitialized_params(lazy)
    np.testing.assert_array_equal(lazy.weight.numpy(), eager.weight.numpy())
    np.testing.assert_array_equal(lazy.bias.numpy(), eager.bias.numpy())
    np.testing.assert_allclose(y.numpy(), eager(x).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="in_features=5"):
        lazy(rtx.randn(3, 6))  # sized once, like any Linear afterwards


def test_linear_lazy_generator_dtype_and_initializers():
    g1, g2 = rtx.Generator().manual_seed(3), rtx.Generator().manual_seed(3)
    lazy = Linear(-1, 4, generator=g1, dtype=rtx.float64)
    lazy(rtx.randn(2, 6, dtype=rtx.float64))
    eager = Linear(6, 4, generator=g2, dtype=rtx.float64)
    np.testing.assert_array_equal(lazy.weight.numpy(), eager.weight.numpy())
    assert lazy.weight.dtype == np.float64
    m = Linear(-1, 3).double()  # .double() before the first forward: sized as float64
    m(rtx.randn(2, 4, dtype=rtx.float64))
    assert m.weight.dtype == np.float64 and m.weight.shape == (3, 4)
    rtx.manual_seed(0)
    g = Linear(-1, 300, weight_initializer="glorot", bias_initializer="zeros")
    g(rtx.randn(2, 200))
    bound = np.sqrt(6 / 500)
    assert 0.9 * bound < np.abs(g.weight.numpy()).max() <= bound
    np.testing.assert_array_equal(g.bias.numpy(), 0)
    with pytest.raises(ValueError, match="weight_initializer"):
        Linear(3, 4, weight_initializer="orthogonal")
    with pytest.raises(ValueError, match="bias_initializer"):
        Linear(3, 4, bias_initializer="ones")


def test_placeholders_refuse_to_be_read():
    m = Linear(-1, 4)
    p = m.weight
    assert repr(p) == "<UninitializedParameter>" and p.template == (4, -1)
    with pytest.raises(RuntimeError, match="uninitialized .lazy. parameter"):
        _ = p.shape
    with pytest.raises(RuntimeError, match="uninitialized .lazy. parameter"):
        p.numpy()
    with pytest.raises(RuntimeError, match="state_dict.*weight is an uninitialized"):
        m.state_dict()
    assert "in_features=-1" in repr(m)
    with pytest.raises(ValueError, match=r"expected a shape \[4, \*\]"):
        p.materialize((5, 3))
    with pytest.raises(ValueError, match="in_features"):
        m.materialize(-3)
    with pytest.raises(ValueError, match="-1"):
        Linear(-2, 4)
    with pytest.raises(ValueError, match=r"-1 \(lazy"):
        check_lazy_channels(0, "in_channels", "X")
    with pytest.raises(TypeError, match="template"):
        UninitializedParameter(("a",))


def test_copy_and_pickle_keep_a_lazy_module_lazy():
    m = Linear(-1, 4)
    for c in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert isinstance(c.weight, UninitializedParameter) and c.weight.template == (4, -1)
        c(rtx.randn(2, 3))
        assert c.weight.shape == (4, 3)
    assert isinstance(m.weight, UninitializedParameter)  # the original is untouched


# --------------------------------------------------------- load_state_dict
def test_load_state_dict_sizes_a_lazy_module():
    """PyG's Linear._load_from_state_dict: a lazy weight takes the checkpoint's shape."""
    src = Linear(3, 4)
    m = Linear(-1, 4)
    m.load_state_dict(src.state_dict())
    assert m.in_features == 3 and type(m.weight) is rtx.nn.Parameter
    np.testing.assert_array_equal(m.weight.numpy(), src.weight.numpy())
    np.testing.assert_array_equal(m.bias.numpy(), src.bias.numpy())
    x = rtx.randn(2, 3)
    np.testing.assert_array_equal(m(x).numpy(), src(x).numpy())
    # sized now: an ordinary shape check (PyG: size mismatch after the first forward)
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        m.load_state_dict(Linear(5, 4).state_dict())


def test_load_state_dict_checks_lazy_shapes_before_writing():
    m = Linear(-1, 4)
    bad = {"weight": np.zeros((5, 3), np.float32), "bias": np.ones(4, np.float32)}
    with pytest.raises(RuntimeError, match=r"size mismatch for weight.*\[4, \*\]"):
        m.load_state_dict(bad)
    assert isinstance(m.weight, UninitializedParameter)  # nothing written
    np.testing.assert_array_equal(m.bias.numpy(), 0)
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        m.load_state_dict({"weight": np.zeros(4, np.float32), "bias": np.ones(4, np.float32)})
    m.load_state_dict({"bias": np.ones(4)}, strict=False)  # no weight key: stays lazy
    assert isinstance(m.weight, UninitializedParameter)


def test_a_shared_lazy_parameter_gets_one_shape():
    conv = GATv2Conv(-1, 2, share_weights=True)  # lin_r is lin_l: one lazy weight, two keys
    src = GATv2Conv(3, 2, share_weights=True)
    sd = src.state_dict()
    conv.load_state_dict(sd)
    assert conv.lin_l.weight.shape == (2, 3) and conv.lin_r is conv.lin_l
    lazy = GATv2Conv(-1, 2, share_weights=True)
    with pytest.raises(RuntimeError, match="same lazy parameter"):
        lazy.load_state_dict({**sd, "lin_r.weight": np.zeros((2, 4), np.float32)})
    assert isinstance(lazy.lin_l.weight, UninitializedParameter)


def test_pygs_linear_loads_the_same_way():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    torch.manual_seed(0)
    ref = pyg.Linear(3, 4)
    sd = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    p_lazy = pyg.Linear(-1, 4)
    p_lazy.load_state_dict(ref.state_dict())  # PyG materialises on load
    m = Linear(-1, 4)
    m.load_state_dict(sd)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(m(rtx.tensor(x)).numpy(),
                               p_lazy(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-6, atol=1e-6)  # float32 sums of 3 terms near 0
    assert m.weight.shape == tuple(p_lazy.weight.shape)


# -------------------------------------------------------------- optimisers
def test_optimiser_built_before_the_first_forward():
    """rtx's optimisers create their state at the first step, and the lazy
    parameter is the same object once sized: no dry run is needed."""
    x, y = rtx.randn(8, 5, seed=1), rtx.randn(8, 3, seed=2)

    def train(dry_run_first):
        rtx.manual_seed(0)
        m = Linear(-1, 3)
        if dry_run_first:
            with rtx.no_grad():
                m(x)
        opt = rtx.optim.Adam(m.parameters(), lr=0.1)
        if not dry_run_first:
            rtx.manual_seed(0)  # the draws happen at the first forward instead
        for _ in range(5):
            opt.zero_grad()
            ((m(x) - y) ** 2).mean().backward()
            opt.step()
        return m

    a, b = train(True), train(False)
    assert len(list(b.parameters())) == 2
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    np.testing.assert_array_equal(a.bias.numpy(), b.bias.numpy())


# -------------------------------------------------------------- conv layers
def _graph(rng, n=8, e=25):
    return rng.integers(0, n, (2, e))


@pytest.mark.parametrize("make,eager", [
    (lambda: SAGEConv(-1, 6), lambda: SAGEConv(5, 6)),
    (lambda: SAGEConv((-1, -1), 6, aggr="max"), lambda: SAGEConv((5, 5), 6, aggr="max")),
    (lambda: GATv2Conv(-1, 3, heads=2), lambda: GATv2Conv(5, 3, heads=2)),
    (lambda: GATv2Conv((-1, -1), 3, heads=2, residual=True),
     lambda: GATv2Conv((5, 5), 3, heads=2, residual=True)),
    (lambda: GATv2Conv(-1, 3, share_weights=True, edge_dim=2),
     lambda: GATv2Conv(5, 3, share_weights=True, edge_dim=2)),
    (lambda: GATConv(-1, 3, heads=2), lambda: GATConv(5, 3, heads=2)),
    (lambda: GATConv((-1, -1), 3, heads=2, residual=True, edge_dim=2),
     lambda: GATConv((5, 5), 3, heads=2, residual=True, edge_dim=2)),
    (lambda: GATConv(-1, 3, concat=False, residual=True),
     lambda: GATConv(5, 3, concat=False, residual=True)),
])
def test_lazy_convs_match_eager_ones(make, eager):
    rng = np.random.default_rng(0)
    ei = _graph(rng)
    x = rtx.tensor(rng.standard_normal((8, 5)))
    extra = ((rtx.tensor(rng.standard_normal((25, 2))),)
             if getattr(eager(), "edge_dim", None) else ())
    lazy = make().double()
    assert has_uninitialized_params(lazy)
    with rtx.no_grad():
        lazy(x, ei, *extra)
    assert not has_uninitialized_params(lazy)
    ref = eager().double()
    assert list(lazy.state_dict()) == list(ref.state_dict())
    ref.load_state_dict(lazy.state_dict())
    np.testing.assert_array_equal(lazy(x, ei, *extra).numpy(), ref(x, ei, *extra).numpy())
    # and a fresh lazy layer loads the eager one's checkpoint (sized by it)
    fresh = make().double()
    fresh.load_state_dict(ref.state_dict())
    np.testing.assert_array_equal(fresh(x, ei, *extra).numpy(), ref(x, ei, *extra).numpy())


@pytest.mark.parametrize("width", [5, 6])
@pytest.mark.parametrize("make", [
    lambda n, w: RGCNConv(n, 6, 3),
    lambda n, w: RGCNConv(n, 6, 3, num_bases=2, aggr="max"),
    lambda n, w: RGCNConv(n, 6, 3, num_blocks=2 if w % 2 == 0 else 1, aggr="sum"),
    lambda n, w: RGCNConv(n, 6, 3, root_weight=False),
    lambda n, w: SimpleHGNConv(n, 3, 3, 4, heads=2),
    lambda n, w: SimpleHGNConv(n, 3, 3, 4, heads=2, residual=False),
])
def test_lazy_typed_convs_match_eager_ones(make, width):
    """RGCNConv and SimpleHGNConv (an edge type per edge): a lazy layer sized by
    the first input equals the eager one, state dict keys included (SimpleHGNConv
    keeps its identity residual when the width is heads * out_channels)."""
    rng = np.random.default_rng(3)
    ei, et = _graph(rng), rng.integers(0, 3, 25)
    x = rtx.tensor(rng.standard_normal((8, width)))

    def out(m):
        y = m(x, ei, et)
        return (y[0] if isinstance(y, tuple) else y).numpy()

    lazy = make(-1, width).double()
    assert has_uninitialized_params(lazy)
    with rtx.no_grad():
        out(lazy)
    assert not has_uninitialized_params(lazy)
    ref = make(width, width).double()
    assert list(lazy.state_dict()) == list(ref.state_dict())
    assert repr(lazy) == repr(ref)
    ref.load_state_dict(lazy.state_dict())
    np.testing.assert_array_equal(out(lazy), out(ref))
    fresh = make(-1, width).double()
    if not (isinstance(fresh, SimpleHGNConv) and width == 6):  # no res_fc.weight to size it
        fresh.load_state_dict(ref.state_dict())
        np.testing.assert_array_equal(out(fresh), out(ref))
    # gradients reach the lazily created parameters
    lazy2 = make(-1, width).double()
    y = lazy2(x, ei, et)
    (y[0] if isinstance(y, tuple) else y).sum().backward()
    assert all(p.grad is not None for n, p in lazy2.named_parameters()
               if not n.startswith("edge_emb") and n != "bias")


def test_lazy_rgcn_bipartite_and_errors():
    rng = np.random.default_rng(4)
    xs, xd = rtx.tensor(rng.standard_normal((6, 4))), rtx.tensor(rng.standard_normal((5, 3)))
    ei = np.stack([rng.integers(0, 6, 12), rng.integers(0, 5, 12)])
    conv = RGCNConv((-1, -1), 2, 2).double()
    conv((xs, xd), ei, rng.integers(0, 2, 12))
    assert conv.weight.shape == (2, 4, 2) and conv.root.shape == (3, 2)
    assert conv.in_channels == (4, 3)
    with pytest.raises(ValueError, match=r"x_dst must have shape \[num_nodes, 3\]"):
        conv((xs, xs), ei, rng.integers(0, 2, 12))
    blocks = RGCNConv(-1, 4, 2, num_blocks=4).double()
    with pytest.raises(ValueError, match="num_blocks=4 must divide the input size"):
        blocks(xd, ei[:, :0], np.zeros(0, np.int64))
    assert has_uninitialized_params(blocks)  # nothing was sized by the refused input
    with pytest.raises(ValueError, match="must divide out_channels"):
        RGCNConv(-1, 5, 2, num_blocks=2)
    with pytest.raises(ValueError, match=r"in_channels must be an int >= 1 or -1"):
        RGCNConv(-3, 5, 2)
    with pytest.raises(ValueError, match=r"in_channels must be an int >= 1 or -1"):
        SimpleHGNConv(0, 5, 2, 2)


def test_lazy_bipartite_sizes_come_from_each_side():
    rng = np.random.default_rng(1)
    xs, xd = rtx.tensor(rng.standard_normal((6, 5))), rtx.tensor(rng.standard_normal((4, 3)))
    ei = np.stack([rng.integers(0, 6, 12), rng.integers(0, 4, 12)])
    sage = SAGEConv((-1, -1), 7).double()
    sage((xs, xd), ei)
    assert sage.lin_l.weight.shape == (7, 5) and sage.lin_r.weight.shape == (7, 3)
    gat = GATv2Conv((-1, 3), 2, heads=2, add_self_loops=False, residual=True).double()
    gat((xs, xd), ei)
    assert gat.lin_l.weight.shape == (4, 5) and gat.lin_r.weight.shape == (4, 3)
    assert gat.res.weight.shape == (4, 3)
    gat1 = GATConv((-1, -1), 2, heads=2, add_self_loops=False, residual=True).double()
    gat1((xs, xd), ei)
    assert gat1.lin_src.weight.shape == (4, 5) and gat1.lin_dst.weight.shape == (4, 3)
    assert gat1.res.weight.shape == (4, 3)
    half = GATConv((-1, -1), 2, add_self_loops=False).double()
    half((xs, None), ei, size=(6, 4))  # no target features: lin_dst stays lazy (PyG)
    assert half.lin_src.weight.shape == (2, 5) and has_uninitialized_params(half)
    with pytest.raises(ValueError, match=r"x_dst must have shape \[num_nodes, 3\]"):
        gat1((xs, xs), ei)  # sized by the first input
    with pytest.raises(ValueError, match=r"in_channels must be an int >= 1 or -1"):
        GATConv(-2, 3)
    rtx.manual_seed(0)
    g1 = GATConv(-1, 50, heads=2)
    g1(rtx.tensor(rng.standard_normal((8, 200)).astype(np.float32)), _graph(rng))
    assert 0.9 * np.sqrt(6 / 300) < np.abs(g1.lin.weight.numpy()).max() <= np.sqrt(6 / 300)
    rtx.manual_seed(0)
    g = GATv2Conv(-1, 50, heads=2)
    g(rtx.tensor(rng.standard_normal((8, 200)).astype(np.float32)), _graph(rng))
    bound = np.sqrt(6 / 300)  # glorot, as a GATv2Conv(200, 50, heads=2)
    assert 0.9 * bound < np.abs(g.lin_l.weight.numpy()).max() <= bound
    assert np.abs(g.lin_l.bias.numpy()).max() <= 1 / np.sqrt(200)


def _hetero_data(rng):
    x = {"paper": rtx.tensor(rng.standard_normal((10, 6))),
         "author": rtx.tensor(rng.standard_normal((7, 4)))}
    ei = {("author", "writes", "paper"): np.stack([rng.integers(0, 7, 20),
                                                   rng.integers(0, 10, 20)]),
          ("paper", "cites", "paper"): rng.integers(0, 10, (2, 30)),
          ("paper", "rev_writes", "author"): np.stack([rng.integers(0, 10, 20),
                                                       rng.integers(0, 7, 20)])}
    return x, ei


def _lazy_hetero():
    return rtx.nn.ModuleList([
        HeteroConv({("author", "writes", "paper"): SAGEConv((-1, -1), 8),
                    ("paper", "cites", "paper"): GATv2Conv((-1, -1), 4, heads=2),
                    ("paper", "rev_writes", "author"): GATv2Conv((-1, -1), 8,
                                                                 add_self_loops=False)},
                   aggr="sum"),
        HeteroConv({("author", "writes", "paper"): SAGEConv((-1, -1), 3, aggr="max"),
                    ("paper", "cites", "paper"): SAGEConv(-1, 3),
                    ("paper", "rev_writes", "author"): SAGEConv((-1, -1), 3)}, aggr="mean"),
    ]).double()


def _run(model, x, ei):
    h = model[0](x, ei)
    h = {k: v.relu() for k, v in h.items()}
    return model[1](h, ei)


def test_lazy_sizes_inside_hetero_conv_train():
    """PyG's pattern: build, one no-grad forward to size, then the optimiser."""
    rng = np.random.default_rng(2)
    x, ei = _hetero_data(rng)
    model = _lazy_hetero()
    with rtx.no_grad():
        _run(model, x, ei)
    assert not has_uninitialized_params(model)
    conv = model[0].convs["<author___writes___paper>"]
    assert conv.lin_l.weight.shape == (8, 4) and conv.lin_r.weight.shape == (8, 6)
    opt = rtx.optim.Adam(model.parameters(), lr=0.01)
    y = rtx.tensor(rng.standard_normal((10, 3)))
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = ((_run(model, x, ei)["paper"] - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


def test_pyg_lazy_hetero_model_state_dict_loads_into_a_lazy_rtx_model():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    rng = np.random.default_rng(3)
    x, ei = _hetero_data(rng)
    torch.manual_seed(0)
    ref = torch.nn.ModuleList([
        pyg.HeteroConv({("author", "writes", "paper"): pyg.SAGEConv((-1, -1), 8),
                        ("paper", "cites", "paper"): pyg.GATv2Conv((-1, -1), 4, heads=2),
                        ("paper", "rev_writes", "author"): pyg.GATv2Conv(
                            (-1, -1), 8, add_self_loops=False)}, aggr="sum"),
        pyg.HeteroConv({("author", "writes", "paper"): pyg.SAGEConv((-1, -1), 3, aggr="max"),
                        ("paper", "cites", "paper"): pyg.SAGEConv(-1, 3),
                        ("paper", "rev_writes", "author"): pyg.SAGEConv((-1, -1), 3)},
                       aggr="mean"),
    ]).double()
    xt = {k: torch.from_numpy(v.numpy()) for k, v in x.items()}
    et = {k: torch.from_numpy(v) for k, v in ei.items()}
    with torch.no_grad():
        h = ref[0](xt, et)
        want = ref[1]({k: v.relu() for k, v in h.items()}, et)
    sd = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    model = _lazy_hetero()
    model.load_state_dict(sd)  # sizes every lazy weight from the checkpoint
    assert not has_uninitialized_params(model)
    assert list(model.state_dict()) == list(sd)
    got = _run(model, x, ei)
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-12, atol=1e-12)


def test_pyg_lazy_gatconv_state_dict_loads_into_a_lazy_rtx_gatconv():
    """PyG's heterogeneous recipe ``GATConv((-1, -1), 64, add_self_loops=False)`` in
    HeteroConv: run once in PyG, saved, loaded into the rtx model built with -1
    (sized by the checkpoint); values and gradients agree."""
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    rng = np.random.default_rng(4)
    x, ei = _hetero_data(rng)
    types = list(ei)
    torch.manual_seed(0)
    ref = pyg.HeteroConv({t: pyg.GATConv((-1, -1), 4, heads=2, add_self_loops=False)
                          for t in types[::2]}
                         | {types[1]: pyg.GATConv(-1, 4, heads=2)}, aggr="sum").double()
    xt = {k: torch.from_numpy(v.numpy()).requires_grad_() for k, v in x.items()}
    et = {k: torch.from_numpy(v) for k, v in ei.items()}
    want = ref(xt, et)
    sd = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    model = HeteroConv({t: GATConv((-1, -1), 4, heads=2, add_self_loops=False)
                        for t in types[::2]} | {types[1]: GATConv(-1, 4, heads=2)},
                       aggr="sum").double()
    assert has_uninitialized_params(model)
    model.load_state_dict(sd)
    assert not has_uninitialized_params(model)
    assert sorted(model.state_dict()) == sorted(sd)
    xr = {k: rtx.tensor(v.numpy(), requires_grad=True) for k, v in x.items()}
    got = model(xr, ei)
    w = {k: rng.standard_normal(tuple(v.shape)) for k, v in want.items()}
    sum((want[k] * torch.from_numpy(w[k])).sum() for k in want).backward()
    sum(((got[k] * rtx.tensor(w[k])).sum() for k in got), rtx.tensor(0.0)).backward()
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].detach().numpy(),
                                   rtol=1e-12, atol=1e-12)
    for k in x:
        np.testing.assert_allclose(xr[k].grad.numpy(), xt[k].grad.numpy(),
                                   rtol=1e-10, atol=1e-12)
