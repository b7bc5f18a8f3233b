"""LayerNorm, BatchNorm1d (PyTorch's) and GraphLayerNorm (PyG's LayerNorm):
values against numpy references of the formulas and against torch / PyG with
copied weights (values, every gradient, running statistics), float64
gradchecks, train / eval, state dicts, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from _gat_reference import gradcheck_module
from conftest import tol

import rtx
from rtx.nn import BatchNorm1d, GraphLayerNorm, LayerNorm


def _affine(m, rng):
    """Random affine parameters (ones / zeros would hide a swapped weight and bias)."""
    with rtx.no_grad():
        for p in m.parameters():
            p.copy_(rng.uniform(-1.5, 1.5, p.shape).astype(p.dtype))
    return m


def layer_norm_ref(x, k, w, b, eps):
    dims = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(dims, keepdims=True)
    var = ((x - mu) ** 2).mean(dims, keepdims=True)
    out = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    return out


def batch_norm_ref(x, mean, var, w, b, eps):
    shape = (1, -1) if x.ndim == 2 else (1, -1, 1)
    out = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if w is not None:
        out = out * w.reshape(shape) + b.reshape(shape)
    return out


# -------------------------------------------------------------- LayerNorm
LN_CONFIGS = {"last": (5, {}), "two-dims": ((4, 5), {}), "no-bias": (5, dict(bias=False)),
              "no-affine": (5, dict(elementwise_affine=False)), "eps": (5, dict(eps=0.1))}


@pytest.mark.parametrize("name", list(LN_CONFIGS))
def test_layer_norm_values(name, backend, dtype):
    ns, kw = LN_CONFIGS[name]
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 4, 5)) * 3 + 2).astype(dtype)
    m = _affine(LayerNorm(ns, **kw).to(dtype), rng)
    sd = m.state_dict()
    k = 1 if isinstance(ns, int) else len(ns)
    ref = layer_norm_ref(x, k, sd.get("weight"), sd.get("bias"), kw.get("eps", 1e-5))
    got = m(rtx.tensor(x))
    assert got.dtype == dtype
    np.testing.assert_allclose(got.numpy(), ref, **tol(dtype))


@pytest.mark.parametrize("name", ["last", "two-dims", "no-bias", "no-affine"])
def test_layer_norm_gradcheck(name):
    ns, kw = LN_CONFIGS[name]
    rng = np.random.default_rng(1)
    m = _affine(LayerNorm(ns, **kw).double(), rng)
    x = rtx.tensor(rng.standard_normal((3, 4, 5)))
    assert gradcheck_module(m, [x], lambda m, x: m(x))


def test_layer_norm_state_and_errors():
    m = LayerNorm(5)
    assert list(m.state_dict()) == ["weight", "bias"]
    np.testing.assert_array_equal(m.weight.numpy(), 1)
    np.testing.assert_array_equal(m.bias.numpy(), 0)
    assert list(LayerNorm(5, bias=False).state_dict()) == ["weight"]
    assert list(LayerNorm(5, elementwise_affine=False).state_dict()) == []
    assert repr(m) == "LayerNorm((5,), eps=1e-05, elementwise_affine=True)"
    with pytest.raises(ValueError, match=r"shape \[\*, 5\]"):
        m(rtx.ones(3, 4))
    with pytest.raises(ValueError, match=r"shape \[\*, 4, 5\]"):
        LayerNorm((4, 5))(rtx.ones(5, 4))
    with pytest.raises(ValueError, match="normalized_shape"):
        LayerNorm(0)
    with pytest.raises(ValueError, match="normalized_shape"):
        LayerNorm(())
    with pytest.raises(ValueError, match="eps"):
        LayerNorm(5, eps=-1.0)
    with pytest.raises(TypeError, match="float32 or float64"):
        m(rtx.ones(2, 5, dtype=rtx.int64))
    with pytest.raises(TypeError, match="rtx.Tensor"):
        m(np.ones((2, 5)))


@pytest.mark.parametrize("name", list(LN_CONFIGS))
def test_layer_norm_matches_torch(name):
    torch = pytest.importorskip("torch")
    ns, kw = LN_CONFIGS[name]
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 4, 5)) * 2 + 1
    t = torch.nn.LayerNorm(ns, **kw).double()
    with torch.no_grad():
        for p in t.parameters():
            p.uniform_(-1, 1)
    m = LayerNorm(ns, **kw).double()
    sd = {k: v.numpy() for k, v in t.state_dict().items()}
    assert list(m.state_dict()) == list(sd)
    m.load_state_dict(sd)
    w = rng.standard_normal(x.shape)
    xt = torch.tensor(x, requires_grad=True)
    (t(xt) * torch.from_numpy(w)).sum().backward()
    xr = rtx.tensor(x, requires_grad=True)
    y = m(xr)
    (y * rtx.tensor(w)).sum().backward()
    np.testing.assert_allclose(y.numpy(), t(xt).detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    params = dict(m.named_parameters())
    for n, p in t.named_parameters():
        np.testing.assert_allclose(params[n].grad.numpy(), p.grad.numpy(), rtol=1e-10,
                                   atol=1e-12)


# ------------------------------------------------------------ BatchNorm1d
BN_CONFIGS = {"default": {}, "cumulative": dict(momentum=None), "momentum": dict(momentum=0.3),
              "no-affine": dict(affine=False), "untracked": dict(track_running_stats=False)}


@pytest.mark.parametrize("shape", [(8, 4), (5, 4, 3)])
@pytest.mark.parametrize("name", list(BN_CONFIGS))
def test_batch_norm_train_eval_and_running_stats(name, shape, backend, dtype):
    kw = BN_CONFIGS[name]
    rng = np.random.default_rng(3)
    m = BatchNorm1d(4, **kw).to(dtype)
    _affine(m, rng)
    sd0 = m.state_dict()
    w, b = sd0.get("weight"), sd0.get("bias")
    rm, rv, nb = np.zeros(4), np.ones(4), 0
    dims = (0,) if len(shape) == 2 else (0, 2)
    n = shape[0] * (1 if len(shape) == 2 else shape[2])
    for _ in range(3):
        x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
        mean, var = x.mean(dims), x.var(dims)
        got = m(rtx.tensor(x))
        np.testing.assert_allclose(got.numpy(), batch_norm_ref(x, mean, var, w, b, 1e-5),
                                   **tol(dtype))
        nb += 1
        f = kw.get("momentum", 0.1)
        f = 1.0 / nb if f is None else f
        rm = (1 - f) * rm + f * mean
        rv = (1 - f) * rv + f * var * n / (n - 1)  # the unbiased variance
    sd = m.state_dict()
    if kw.get("track_running_stats", True):
        assert list(sd)[-3:] == ["running_mean", "running_var", "num_batches_tracked"]
        np.testing.assert_allclose(sd["running_mean"], rm, **tol(dtype))
        np.testing.assert_allclose(sd["running_var"], rv, **tol(dtype))
        assert sd["num_batches_tracked"].dtype == np.int64 and int(sd["num_batches_tracked"]) == 3
    else:
        assert "running_mean" not in sd
    m.eval()
    x = rng.standard_normal(shape).astype(dtype)
    got = m(rtx.tensor(x)).numpy()
    if kw.get("track_running_stats", True):
        want = batch_norm_ref(x, rm, rv, w, b, 1e-5)
    else:  # no running statistics: the batch's, in eval mode too
        want = batch_norm_ref(x, x.mean(dims), x.var(dims), w, b, 1e-5)
    np.testing.assert_allclose(got, want, **tol(dtype))
    if kw.get("track_running_stats", True):  # eval does not touch the statistics
        np.testing.assert_array_equal(m.state_dict()["running_mean"], sd["running_mean"])


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 2)])
def test_batch_norm_gradcheck(train, shape):
    rng = np.random.default_rng(4)
    m = _affine(BatchNorm1d(3, momentum=None).double(), rng)
    with rtx.no_grad():
        m.running_mean.copy_(rng.standard_normal(3))
        m.running_var.copy_(rng.uniform(0.5, 2.0, 3))
    m.train(train)
    x = rtx.tensor(rng.standard_normal(shape))
    assert gradcheck_module(m, [x], lambda m, x: m(x))


def test_batch_norm_state_and_errors():
    m = BatchNorm1d(4)
    assert list(m.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                    "num_batches_tracked"]
    assert m.state_dict()["num_batches_tracked"].shape == ()
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    assert repr(m) == ("BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, "
                       "track_running_stats=True)")
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        m(rtx.ones(1, 4))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        m(rtx.ones(1, 4, 1))
    m.eval()
    assert m(rtx.ones(1, 4)).shape == (1, 4)  # fine in eval
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        m(rtx.ones(4))
    with pytest.raises(ValueError, match="expected 4 channels"):
        m(rtx.ones(3, 5))
    with pytest.raises(ValueError, match="num_features"):
        BatchNorm1d(0)
    with pytest.raises(ValueError, match="momentum"):
        BatchNorm1d(4, momentum=-0.1)
    m.train()
    x = rtx.ones(3, 4)
    with pytest.raises(ValueError):
        m(rtx.ones(3, 5))
    assert int(m.num_batches_tracked.item()) == 0  # nothing was updated by a bad call
    m(x)
    m.reset_running_stats()
    assert int(m.num_batches_tracked.item()) == 0


@pytest.mark.parametrize("shape", [(8, 4), (5, 4, 3)])
@pytest.mark.parametrize("name", list(BN_CONFIGS))
def test_batch_norm_matches_torch(name, shape):
    torch = pytest.importorskip("torch")
    kw = BN_CONFIGS[name]
    rng = np.random.default_rng(5)
    t = torch.nn.BatchNorm1d(4, **kw).double()
    if t.weight is not None:
        with torch.no_grad():
            t.weight.uniform_(-1, 1)
            t.bias.uniform_(-1, 1)
    m = BatchNorm1d(4, **kw).double()
    sd = {k: v.numpy() for k, v in t.state_dict().items()}
    assert list(m.state_dict()) == list(sd)
    m.load_state_dict(sd)
    for mode in ("train", "train", "train", "eval"):
        t.train(mode == "train")
        m.train(mode == "train")
        x = rng.standard_normal(shape) * 2 + 1
        w = rng.standard_normal(shape)
        xt = torch.tensor(x, requires_grad=True)
        yt = t(xt)
        (yt * torch.from_numpy(w)).sum().backward()
        xr = rtx.tensor(x, requires_grad=True)
        yr = m(xr)
        (yr * rtx.tensor(w)).sum().backward()
        np.testing.assert_allclose(yr.numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
        params = dict(m.named_parameters())
        for n, p in t.named_parameters():
            np.testing.assert_allclose(params[n].grad.numpy(), p.grad.numpy(), rtol=1e-10,
                                       atol=1e-12)
            p.grad = None
            params[n].grad = None
    for k, v in t.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-12, atol=1e-12,
                                   err_msg=k)


# --------------------------------------------------------- GraphLayerNorm
def graph_layer_norm_ref(x, batch, w, b, eps, mode):
    if mode == "node":
        return layer_norm_ref(x, 1, w, b, eps)
    if batch is None:
        xc = x - x.mean()
        out = xc / (xc.std() + eps)
    else:
        out = np.empty_like(x)
        for g in np.unique(batch):
            xs = x[batch == g]
            xc = xs - xs.mean()
            out[batch == g] = xc / np.sqrt((xc ** 2).mean() + eps)
    return out * w + b


BATCH = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])


@pytest.mark.parametrize("mode,batch", [("graph", None), ("graph", BATCH), ("node", None)])
def test_graph_layer_norm_values_and_gradcheck(mode, batch, backend, dtype):
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((9, 4)) * 2 + 1).astype(dtype)
    m = _affine(GraphLayerNorm(4, mode=mode).to(dtype), rng)
    sd = m.state_dict()
    got = m(rtx.tensor(x), batch)
    np.testing.assert_allclose(got.numpy(), graph_layer_norm_ref(x, batch, sd["weight"],
                                                                 sd["bias"], 1e-5, mode),
                               **tol(dtype))
    if dtype == np.float64:
        assert gradcheck_module(m, [rtx.tensor(x)], lambda m, x: m(x, batch))


def test_graph_layer_norm_errors():
    m = GraphLayerNorm(4)
    assert list(m.state_dict()) == ["weight", "bias"]
    with pytest.raises(ValueError, match="mode"):
        GraphLayerNorm(4, mode="batch")
    with pytest.raises(ValueError, match=r"\[N, 4\]"):
        m(rtx.ones(3, 5))
    with pytest.raises(ValueError, match="batch must be"):
        m(rtx.ones(3, 4), np.array([0, 1]))
    with pytest.raises(IndexError, match="batch_size"):
        m(rtx.ones(3, 4), np.array([0, 1, 3]), batch_size=2)


@pytest.mark.parametrize("mode,batch", [("graph", None), ("graph", BATCH), ("node", None)])
def test_graph_layer_norm_matches_pyg(mode, batch):
    torch = pytest.importorskip("torch")
    norm = pytest.importorskip("torch_geometric.nn.norm")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((9, 4)) * 2 + 1
    p = norm.LayerNorm(4, mode=mode).double()
    with torch.no_grad():
        for q in p.parameters():
            q.uniform_(-1, 1)
    m = GraphLayerNorm(4, mode=mode).double()
    m.load_state_dict({k: v.numpy() for k, v in p.state_dict().items()})
    xt, xr = torch.tensor(x, requires_grad=True), rtx.tensor(x, requires_grad=True)
    yt = p(xt, None if batch is None else torch.from_numpy(batch))
    yr = m(xr, batch)
    w = rng.standard_normal(x.shape)
    (yt * torch.from_numpy(w)).sum().backward()
    (yr * rtx.tensor(w)).sum().backward()
    np.testing.assert_allclose(yr.numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
