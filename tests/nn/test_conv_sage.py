"""SAGEConv: values against a numpy reference of PyG's formula and against PyG
itself (values and every gradient, copied weights), PyG-shaped state dicts,
float64 gradchecks, bipartite input, lazy sizes, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from _gat_reference import gradcheck_module
from _layers_reference import sage_ref
from conftest import tol

import rtx
from rtx.nn import SAGEConv

# torch_geometric 2.8's SAGEConv state_dict keys (read off PyG).
PYG_KEYS = {
    "default": ["lin_l.weight", "lin_l.bias", "lin_r.weight"],
    "project": ["lin.weight", "lin.bias", "lin_l.weight", "lin_l.bias", "lin_r.weight"],
    "no-root-no-bias": ["lin_l.weight"],
}

CONFIGS = {
    "mean": dict(aggr="mean"),
    "sum": dict(aggr="sum"),
    "add": dict(aggr="add"),
    "max": dict(aggr="max"),
    "min": dict(aggr="min"),
    "normalize": dict(aggr="mean", normalize=True),
    "no-root": dict(aggr="sum", root_weight=False),
    "project": dict(aggr="mean", project=True),
    "no-bias-max": dict(aggr="max", bias=False),
}


def _graph(n=9, e=30, seed=0):
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, size=(2, e))
    ei[1, ei[1] == n - 1] = 0  # node n-1 has no incoming edge
    return rng, ei


@pytest.mark.parametrize("out", [3, 8])  # narrower / wider than the input (two sum paths)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_values_match_reference(name, out, backend, dtype):
    kw = CONFIGS[name]
    rng, ei = _graph()
    x = rng.standard_normal((9, 5)).astype(dtype)
    rtx.manual_seed(1)
    conv = SAGEConv(5, out, **kw).to(dtype)
    got = conv(rtx.tensor(x), ei)
    ref = sage_ref(x, ei, conv.state_dict(), kw["aggr"], kw.get("normalize", False))
    assert got.dtype == dtype and got.shape == (9, out)
    np.testing.assert_allclose(got.numpy(), ref, **tol(dtype))


def test_isolated_targets_aggregate_to_zero():
    """A node without incoming edges gets lin_l's bias (+ root), for every aggr."""
    rng, ei = _graph()
    x = rtx.tensor(rng.standard_normal((9, 5)))
    for aggr in ("mean", "sum", "max", "min"):
        conv = SAGEConv(5, 4, aggr=aggr, root_weight=False).double()
        out = conv(x, ei).numpy()
        np.testing.assert_allclose(out[8], conv.lin_l.bias.numpy(), rtol=0, atol=0)


@pytest.mark.parametrize("with_dst", [True, False])
def test_bipartite_values(with_dst, dtype):
    rng = np.random.default_rng(2)
    xs, xd = rng.standard_normal((6, 5)).astype(dtype), rng.standard_normal((4, 3)).astype(dtype)
    ei = np.stack([rng.integers(0, 6, 15), rng.integers(0, 4, 15)])
    conv = SAGEConv((5, 3), 7).to(dtype)
    assert list(conv.state_dict()) == PYG_KEYS["default"]
    assert conv.lin_r.weight.shape == (7, 3)
    if with_dst:
        got = conv((rtx.tensor(xs), rtx.tensor(xd)), ei)
        ref = sage_ref((xs, xd), ei, conv.state_dict())
    else:  # (x_src, None): no root term; N_src rows, or size[1]
        got = conv((rtx.tensor(xs), None), ei, size=(6, 4))
        ref = sage_ref((xs, None), ei, conv.state_dict(), n_dst=4)
        assert conv((rtx.tensor(xs), None), ei).shape == (6, 7)
    np.testing.assert_allclose(got.numpy(), ref, **tol(dtype))


@pytest.mark.parametrize("name", ["mean", "sum", "max", "normalize", "project", "no-root"])
def test_gradcheck(name):
    kw = CONFIGS[name]
    rng, ei = _graph(n=6, e=14, seed=3)
    conv = SAGEConv(4, 3, **kw).double()
    x = rtx.tensor(rng.standard_normal((6, 4)))
    assert gradcheck_module(conv, [x], lambda m, x: m(x, ei))


def test_gradcheck_bipartite():
    rng = np.random.default_rng(4)
    xs, xd = rtx.tensor(rng.standard_normal((5, 3))), rtx.tensor(rng.standard_normal((4, 2)))
    ei = np.stack([rng.integers(0, 5, 12), rng.integers(0, 4, 12)])
    for aggr in ("mean", "max"):
        conv = SAGEConv((3, 2), 4, aggr=aggr, normalize=True).double()
        assert gradcheck_module(conv, [xs, xd], lambda m, a, b: m((a, b), ei))


def test_state_dict_keys_and_numpy_load():
    assert list(SAGEConv(5, 3).state_dict()) == PYG_KEYS["default"]
    assert list(SAGEConv(5, 3, project=True).state_dict()) == PYG_KEYS["project"]
    assert list(SAGEConv(5, 3, root_weight=False, bias=False).state_dict()) == \
        PYG_KEYS["no-root-no-bias"]
    rng, ei = _graph(seed=5)
    sd = {"lin.weight": rng.standard_normal((5, 5)), "lin.bias": rng.standard_normal(5),
          "lin_l.weight": rng.standard_normal((3, 5)), "lin_l.bias": rng.standard_normal(3),
          "lin_r.weight": rng.standard_normal((3, 5))}
    conv = SAGEConv(5, 3, project=True).double()
    conv.load_state_dict(sd)
    x = rng.standard_normal((9, 5))
    np.testing.assert_allclose(conv(rtx.tensor(x), ei).numpy(), sage_ref(x, ei, sd),
                               rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match="size mismatch for lin_l.weight"):
        conv.load_state_dict({**sd, "lin_l.weight": np.zeros((3, 4))})


def test_default_init_is_pytorch_linear():
    rtx.manual_seed(0)
    conv = SAGEConv(400, 300)
    b = 1 / np.sqrt(400)
    for w in (conv.lin_l.weight.numpy(), conv.lin_l.bias.numpy(), conv.lin_r.weight.numpy()):
        assert np.abs(w).max() <= b and np.abs(w).max() > 0.9 * b


def test_edge_index_forms_and_cache():
    rng, ei = _graph(seed=6)
    x = rtx.tensor(rng.standard_normal((9, 5)))
    conv = SAGEConv(5, 3).double()
    want = conv(x, ei).numpy()
    for form in (rtx.tensor(ei), ei.tolist(), ei.astype(np.int32), rtx.EdgeIndex(ei, 9, 9)):
        np.testing.assert_array_equal(conv(x, form).numpy(), want)
    ei2 = ei.copy()
    conv(x, ei2)
    ei2[0, 0] = (ei2[0, 0] + 1) % 9  # changed in place: noticed
    np.testing.assert_allclose(conv(x, ei2).numpy(),
                               sage_ref(x.numpy(), ei2, conv.state_dict()), rtol=1e-12)
    empty = conv(x, np.zeros((2, 0), np.int64)).numpy()
    np.testing.assert_allclose(empty, sage_ref(x.numpy(), np.zeros((2, 0), np.int64),
                                               conv.state_dict()), rtol=1e-12, atol=1e-15)


def test_repr_is_pygs():
    assert repr(SAGEConv(16, 32)) == "SAGEConv(16, 32, aggr=mean)"
    assert repr(SAGEConv((-1, -1), 8, aggr="max")) == "SAGEConv((-1, -1), 8, aggr=max)"


def test_bad_input_is_rejected():
    rng, ei = _graph()
    x = rtx.tensor(rng.standard_normal((9, 5)).astype(np.float32))
    with pytest.raises(ValueError, match="aggr must be one of"):
        SAGEConv(5, 3, aggr="lstm")
    with pytest.raises(ValueError, match="in_channels must be an int >= 1 or -1"):
        SAGEConv(0, 3)
    with pytest.raises(ValueError, match="in_channels"):
        SAGEConv((5, 3, 2), 3)
    with pytest.raises(ValueError, match="out_channels"):
        SAGEConv(5, 0)
    with pytest.raises(ValueError, match="lazy initialization with `project=True`"):
        SAGEConv(-1, 3, project=True)
    conv = SAGEConv(5, 3)
    with pytest.raises(ValueError, match=r"x must have shape \[num_nodes, 5\]"):
        conv(rtx.ones(9, 4), ei)
    with pytest.raises(TypeError, match="rtx.Tensor"):
        conv(np.ones((9, 5), np.float32), ei)
    with pytest.raises(TypeError, match="float32 or float64"):
        conv(rtx.ones(9, 5, dtype=rtx.int64), ei)
    with pytest.raises(TypeError, match=r"2-D \[2, E\]"):  # main's as_edge_index contract
        conv(x, ei[0])
    with pytest.raises(TypeError, match="integer"):
        conv(x, ei.astype(np.float64))
    with pytest.raises(IndexError):
        conv(x, np.array([[0, 9], [1, 2]]))
    with pytest.raises(ValueError, match="pair"):
        conv((x, x, x), ei)
    with pytest.raises(ValueError, match="size="):
        conv(x, ei, size=(9, 4))
    with pytest.raises(ValueError, match=r"x_dst must have shape \[num_nodes, 3\]"):
        SAGEConv((5, 3), 2)((x, x), ei)
    with pytest.raises(ValueError, match="target features"):
        SAGEConv((5, 3), 2)(x, ei)  # a tensor is (x, x): the root map wants 3 columns
    with pytest.raises(ValueError, match="EdgeIndex was built for"):
        conv(x, rtx.EdgeIndex(ei, 9, 10))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_pyg_values_and_gradients(name):
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    kw = CONFIGS[name]
    rng, ei = _graph(seed=7)
    x = rng.standard_normal((9, 5))
    for out in (3, 8):
        torch.manual_seed(0)
        ref = pyg.SAGEConv(5, out, **kw).double()
        sd = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
        conv = SAGEConv(5, out, **kw).double()
        assert list(conv.state_dict()) == list(sd)
        conv.load_state_dict(sd)
        xt = torch.tensor(x, requires_grad=True)
        yt = ref(xt, torch.from_numpy(ei))
        w = rng.standard_normal(yt.shape)
        (yt * torch.from_numpy(w)).sum().backward()
        xr = rtx.tensor(x, requires_grad=True)
        yr = conv(xr, ei)
        (yr * rtx.tensor(w)).sum().backward()
        np.testing.assert_allclose(yr.numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
        params = dict(conv.named_parameters())
        for n, p in ref.named_parameters():
            np.testing.assert_allclose(params[n].grad.numpy(), p.grad.numpy(), rtol=1e-10,
                                       atol=1e-12, err_msg=n)


def test_matches_pyg_bipartite():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    rng = np.random.default_rng(8)
    xs, xd = rng.standard_normal((6, 5)), rng.standard_normal((4, 3))
    ei = np.stack([rng.integers(0, 6, 15), rng.integers(0, 4, 15)])
    for aggr in ("mean", "max"):
        ref = pyg.SAGEConv((5, 3), 7, aggr=aggr, normalize=True).double()
        conv = SAGEConv((5, 3), 7, aggr=aggr, normalize=True).double()
        conv.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
        a, b = torch.tensor(xs, requires_grad=True), torch.tensor(xd, requires_grad=True)
        yt = ref((a, b), torch.from_numpy(ei))
        yt.pow(2).sum().backward()
        ra, rb = rtx.tensor(xs, requires_grad=True), rtx.tensor(xd, requires_grad=True)
        yr = conv((ra, rb), ei)
        (yr * yr).sum().backward()
        np.testing.assert_allclose(yr.numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ra.grad.numpy(), a.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(rb.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)
