"""rtx.nn: Parameter, Module, containers, Linear, Dropout, init, state dicts, rtx.save/load."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import rtx
import rtx.nn as nn
from rtx.autograd import gradcheck
from rtx.nn import init


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ELU()
        self.fc2 = nn.Linear(8, 3)
        self.register_buffer("steps", rtx.zeros(1))
        self.register_buffer("scratch", rtx.zeros(2), persistent=False)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


# ------------------------------------------------------------------ Parameter
def test_parameter_is_a_leaf_tensor_sharing_data(backend):
    t = rtx.tensor([1.0, 2.0, 3.0])
    p = nn.Parameter(t)
    assert isinstance(p, rtx.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad is None
    np.testing.assert_array_equal(p.numpy(), [1.0, 2.0, 3.0])
    q = nn.Parameter(rtx.ones(2), requires_grad=False)
    assert not q.requires_grad
    # ops on a Parameter return plain tensors, and backward reaches it
    y = (p * p).sum()
    assert type(y) is rtx.Tensor
    y.backward()
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 4.0, 6.0])
    assert type(p.detach()) is rtx.Tensor


def test_parameter_survives_inplace_updates(backend):
    p = nn.Parameter(rtx.tensor([1.0, 2.0]))
    (p * 3).sum().backward()
    ident = id(p)
    with rtx.no_grad():
        p.sub_(p.grad * 0.5)
        p.mul_(2.0)
    assert id(p) == ident and isinstance(p, nn.Parameter) and p.requires_grad
    assert p._version == 2  # the in-place writes are counted
    np.testing.assert_allclose(p.numpy(), [-1.0, 1.0])
    with pytest.raises(RuntimeError, match="in place"):
        p.add_(1.0)


def test_parameter_shares_the_version_counter_of_its_data():
    t = rtx.ones(2)
    p = nn.Parameter(t)
    with rtx.no_grad():
        p.add_(1.0)
    assert p._version == t._version == 1
    np.testing.assert_array_equal(t.numpy(), [2.0, 2.0])  # one buffer


def test_parameter_validation_and_repr():
    with pytest.raises(TypeError, match="rtx.Tensor"):
        nn.Parameter(np.ones(2))
    with pytest.raises(TypeError, match="floating point"):
        nn.Parameter(rtx.tensor([1, 2]))
    assert nn.Parameter(rtx.tensor([1, 2]), requires_grad=False).dtype == np.int64
    assert repr(nn.Parameter(rtx.tensor([1.0, 2.0]))) == (
        "Parameter containing:\ntensor([1., 2.], requires_grad=True)")


# ------------------------------------------------------------------- Module
def test_registration_and_walks():
    m = TwoLayer()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [p.shape for p in m.parameters()] == [(8, 4), (8,), (3, 8), (3,)]
    assert [n for n, _ in m.named_children()] == ["fc1", "act", "fc2"]
    assert list(m.children()) == [m.fc1, m.act, m.fc2]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "act", "fc2"]
    assert [n for n, _ in m.named_buffers()] == ["steps", "scratch"]
    assert [n for n, _ in m.named_parameters(recurse=False)] == []
    assert isinstance(m.fc1.weight, nn.Parameter)
    assert "fc1" in dir(m)


def test_shared_parameters_and_modules_listed_once():
    lin = nn.Linear(3, 3)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.modules())) == 3
    # the state dict still names every path (like PyTorch)
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_setattr_rules():
    m = nn.Module()
    m.w = nn.Parameter(rtx.ones(2))
    with pytest.raises(TypeError, match="Parameter or None expected"):
        m.w = rtx.ones(2)
    m.w = None
    assert m.w is None and list(m.parameters()) == []
    m.w = nn.Parameter(rtx.ones(3))
    m.sub = nn.ReLU()
    with pytest.raises(TypeError, match="Module or None expected"):
        m.sub = 3
    m.register_buffer("b", rtx.zeros(2))
    with pytest.raises(TypeError, match="buffer"):
        m.b = 3.0
    m.b = rtx.ones(2)
    np.testing.assert_array_equal(m.b.numpy(), [1, 1])
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("w", rtx.zeros(1))
    with pytest.raises(KeyError):
        m.register_parameter("a.b", None)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = m.nope
    del m.sub
    assert "sub" not in dict(m.named_children())

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(rtx.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1)


def test_train_eval_propagate():
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5)))
    assert m.training and m[1][0].training
    assert m.eval() is m
    assert not any(x.training for x in m.modules())
    m.train()
    assert all(x.training for x in m.modules())
    with pytest.raises(ValueError):
        m.train("yes")


def test_zero_grad_modes():
    m = nn.Linear(3, 2)
    m(rtx.ones(4, 3)).sum().backward()
    m.zero_grad(set_to_none=False)
    assert m.weight.grad is not None and not m.weight.grad.numpy().any()
    m.zero_grad()
    assert m.weight.grad is None and m.bias.grad is None


def test_to_dtype_keeps_parameter_objects(backend):
    m = TwoLayer()
    before = list(m.parameters())
    m(rtx.ones(2, 4)).sum().backward()
    assert m.double() is m
    assert list(m.parameters()) == before
    assert all(p.dtype == np.float64 and p.grad.dtype == np.float64 for p in m.parameters())
    assert m.steps.dtype == np.float64
    y = m(rtx.ones(2, 4, dtype=rtx.float64))
    assert y.dtype == np.float64
    m.float()
    assert all(p.dtype == np.float32 for p in m.parameters())
    with pytest.raises(TypeError, match="floating point"):
        m.to(rtx.int64)


def test_apply_and_requires_grad_and_get_submodule():
    m = TwoLayer()
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "ELU", "Linear", "TwoLayer"]
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    assert m.get_submodule("fc2") is m.fc2
    with pytest.raises(AttributeError):
        m.get_submodule("fc9")


# --------------------------------------------------------------- state dict
def test_state_dict_copies_and_round_trips(backend):
    rtx.manual_seed(1)
    a = TwoLayer()
    rtx.manual_seed(2)
    b = TwoLayer()
    sd = a.state_dict()
    # PyTorch's order: a module's own parameters and buffers, then its children's
    assert list(sd) == ["steps", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert all(isinstance(v, np.ndarray) for v in sd.values())
    sd["fc1.bias"][:] = 7.0  # a copy: the module is untouched
    assert not np.any(a.fc1.bias.numpy() == 7.0)
    res = b.load_state_dict(a.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    x = rtx.randn(5, 4, seed=3)
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())
    # tensors are accepted too, and values are cast to the parameter's dtype
    b.load_state_dict({k: rtx.tensor(v.astype(np.float64)) for k, v in sd.items()})
    assert b.fc1.bias.dtype == np.float32
    np.testing.assert_array_equal(b.fc1.bias.numpy(), np.full(8, 7.0, np.float32))


def test_load_state_dict_errors_name_every_key_and_write_nothing():
    m = TwoLayer()
    before = {k: v.copy() for k, v in m.state_dict().items()}
    sd = m.state_dict()
    sd["fc1.weight"] = np.zeros((8, 4), np.float32)
    del sd["fc2.bias"]
    sd["extra"] = np.zeros(1)
    sd["fc1.bias"] = np.zeros(9, np.float32)
    with pytest.raises(RuntimeError) as ei:
        m.load_state_dict(sd)
    msg = str(ei.value)
    assert msg.startswith("Error(s) in loading state_dict for TwoLayer:")
    assert 'Unexpected key(s) in state_dict: "extra".' in msg
    assert 'Missing key(s) in state_dict: "fc2.bias".' in msg
    assert ("size mismatch for fc1.bias: copying a param with shape rtx.Size([9]) from "
            "checkpoint, the shape in current model is rtx.Size([8]).") in msg
    for k, v in m.state_dict().items():  # nothing written, not even fc1.weight
        np.testing.assert_array_equal(v, before[k])
    # strict=False: missing / unexpected are returned, a size mismatch is still an error
    with pytest.raises(RuntimeError, match="size mismatch"):
        m.load_state_dict(sd, strict=False)
    sd["fc1.bias"] = np.zeros(8, np.float32)
    res = m.load_state_dict(sd, strict=False)
    assert res == nn.IncompatibleKeys(["fc2.bias"], ["extra"])
    assert repr(res) == str(res) == (
        "IncompatibleKeys(missing_keys=['fc2.bias'], unexpected_keys=['extra'])")
    assert not m.fc1.weight.numpy().any()
    with pytest.raises(TypeError):
        m.load_state_dict([("fc1.weight", 1)])
    with pytest.raises(RuntimeError, match="numeric"):
        m.load_state_dict({**m.state_dict(), "steps": np.array(["a"])})


def test_load_state_dict_result_prints_like_pytorch():
    # torch: `model.load_state_dict(sd)` at the prompt shows <All keys matched successfully>
    m = nn.Linear(3, 2)
    res = m.load_state_dict(m.state_dict())
    assert res == nn.IncompatibleKeys([], [])
    assert repr(res) == str(res) == "<All keys matched successfully>"
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert "<All keys matched successfully>" in f"{res}"
    # one list empty, the other not: the lists are shown
    only_missing = m.load_state_dict({"weight": m.weight.detach()}, strict=False)
    assert repr(only_missing) == "IncompatibleKeys(missing_keys=['bias'], unexpected_keys=[])"
    only_unexpected = m.load_state_dict({**m.state_dict(), "x": np.zeros(1)}, strict=False)
    assert str(only_unexpected) == "IncompatibleKeys(missing_keys=[], unexpected_keys=['x'])"


# --------------------------------------------------------------------- repr
def test_repr_like_pytorch():
    m = nn.Sequential(
        nn.Linear(4, 3),
        nn.ModuleList([nn.ReLU(), nn.LeakyReLU(0.2)]),
        nn.ModuleDict({"drop": nn.Dropout(0.25), "elu": nn.ELU()}),
        nn.Linear(3, 1, bias=False),
    )
    assert repr(m) == (
        "Sequential(\n"
        "  (0): Linear(in_features=4, out_features=3, bias=True)\n"
        "  (1): ModuleList(\n"
        "    (0): ReLU()\n"
        "    (1): LeakyReLU(negative_slope=0.2)\n"
        "  )\n"
        "  (2): ModuleDict(\n"
        "    (drop): Dropout(p=0.25, inplace=False)\n"
        "    (elu): ELU(alpha=1.0)\n"
        "  )\n"
        "  (3): Linear(in_features=3, out_features=1, bias=False)\n"
        ")"
    )
    assert repr(nn.Module()) == "Module()"


def test_repr_matches_torch():
    torch = pytest.importorskip("torch")
    tm = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ELU(),
                             torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Dropout(0.5)]))
    rm = nn.Sequential(nn.Linear(4, 3), nn.ELU(), nn.ModuleList([nn.ReLU(), nn.Dropout(0.5)]))
    assert repr(rm) == repr(tm)


# --------------------------------------------------------------- containers
def test_sequential():
    rtx.manual_seed(0)
    a, b = nn.Linear(3, 4), nn.Linear(4, 2)
    seq = nn.Sequential(a, nn.ReLU(), b)
    x = rtx.randn(5, 3, seed=1)
    np.testing.assert_allclose(seq(x).numpy(), b(a(x).relu()).numpy())
    assert len(seq) == 3 and seq[0] is a and seq[-1] is b
    assert isinstance(seq[1:], nn.Sequential) and len(seq[1:]) == 2
    named = nn.Sequential(OrderedDict([("inp", a), ("out", b)]))
    assert [n for n, _ in named.named_children()] == ["inp", "out"]
    assert named.inp is a
    seq.append(nn.ELU())
    del seq[1]
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2"]
    assert seq[1] is b
    with pytest.raises(IndexError):
        seq[5]
    seq[0] = nn.ReLU()
    assert isinstance(seq[0], nn.ReLU)


def test_module_list_and_dict():
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(ml) == 3 and len(list(ml.parameters())) == 6
    ml.append(nn.ReLU())
    ml.insert(0, nn.ELU())
    assert [type(m).__name__ for m in ml] == ["ELU", "Linear", "Linear", "Linear", "ReLU"]
    del ml[0]
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2", "3"]
    ml += [nn.ELU()]
    assert len(ml) == 5 and isinstance(ml[1:3], nn.ModuleList)
    with pytest.raises(TypeError):
        ml.insert(0, 3)
    with pytest.raises(TypeError):
        ml.append("x")
    md = nn.ModuleDict({"a": nn.Linear(2, 3)})
    md["b"] = nn.ReLU()
    md.update([("c", nn.ELU())])
    assert list(md) == ["a", "b", "c"] and "b" in md and len(md) == 3
    assert [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias"]
    assert isinstance(md.pop("b"), nn.ReLU) and md.keys() == ["a", "c"]
    with pytest.raises(KeyError):
        md["zz"]


# ------------------------------------------------------------------- Linear
def test_linear_forward_and_gradcheck(backend):
    m = nn.Linear(4, 3, dtype=rtx.float64)
    x = rtx.randn(6, 4, dtype=rtx.float64, seed=0)
    w, b = m.weight.numpy(), m.bias.numpy()
    np.testing.assert_allclose(m(x).numpy(), x.numpy() @ w.T + b, rtol=1e-12)
    x3 = rtx.randn(2, 5, 4, dtype=rtx.float64, seed=1)
    np.testing.assert_allclose(m(x3).numpy(), x3.numpy() @ w.T + b, rtol=1e-12)
    xr = x.detach().requires_grad_()
    assert gradcheck(lambda x, w, b: x @ w.T + b, (xr, m.weight, m.bias))
    out = m(xr).sum()
    out.backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), np.tile(x.numpy().sum(0), (3, 1)))
    np.testing.assert_allclose(m.bias.grad.numpy(), np.full(3, 6.0))
    with pytest.raises(ValueError, match="in_features=4"):
        m(rtx.ones(2, 5, dtype=rtx.float64))
    with pytest.raises(ValueError):
        nn.Linear(-2, 2)  # -1 is a lazy size (PyG's Linear(-1, out): tests/nn/test_lazy.py)


def test_linear_init_bounds_distribution_and_determinism():
    rtx.manual_seed(123)
    m = nn.Linear(400, 300)
    w, b = m.weight.numpy(), m.bias.numpy()
    assert w.shape == (300, 400) and b.shape == (300,) and w.dtype == np.float32
    bound = 1 / math.sqrt(400)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    # U(-bound, bound): mean 0, variance bound^2 / 3, and it fills the interval
    assert abs(w.mean()) < 0.01 * bound
    assert abs(w.var() / (bound**2 / 3) - 1) < 0.01
    assert np.abs(w).max() > 0.999 * bound
    rtx.manual_seed(123)
    m2 = nn.Linear(400, 300)
    np.testing.assert_array_equal(m2.weight.numpy(), w)
    np.testing.assert_array_equal(m2.bias.numpy(), b)
    g1 = nn.Linear(5, 2, generator=rtx.Generator(7))
    g2 = nn.Linear(5, 2, generator=rtx.Generator(7))
    np.testing.assert_array_equal(g1.weight.numpy(), g2.weight.numpy())
    assert not np.array_equal(m2.weight.numpy()[:2, :5], g1.weight.numpy())


def test_linear_without_bias_and_empty():
    m = nn.Linear(3, 2, bias=False)
    assert m.bias is None and [n for n, _ in m.named_parameters()] == ["weight"]
    np.testing.assert_allclose(m(rtx.ones(1, 3)).numpy(), m.weight.numpy().sum(1)[None])
    z = nn.Linear(0, 2)
    np.testing.assert_array_equal(z.bias.numpy(), 0)


# ------------------------------------------------------------------ Dropout
def test_dropout_statistics_scaling_and_gradient(backend):
    rtx.manual_seed(0)
    x = rtx.ones(200, 250, requires_grad=True)
    d = nn.Dropout(0.3)
    y = d(x)
    a = y.numpy()
    kept = a != 0
    # each element kept with probability 0.7: the fraction is within 5 sigma
    n = a.size
    assert abs(kept.mean() - 0.7) < 5 * math.sqrt(0.7 * 0.3 / n)
    np.testing.assert_allclose(a[kept], 1 / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), a, rtol=1e-6)  # grad = mask / (1 - p)
    d.eval()
    assert d(x) is x


def test_dropout_determinism_and_edges(dtype):
    x = rtx.ones(1000, dtype=dtype)
    rtx.manual_seed(5)
    a = nn.functional.dropout(x, 0.5).numpy()
    rtx.manual_seed(5)
    b = nn.functional.dropout(x, 0.5).numpy()
    np.testing.assert_array_equal(a, b)
    c = nn.functional.dropout(x, 0.5, generator=rtx.Generator(5)).numpy()
    e = nn.Dropout(0.5, generator=rtx.Generator(5))(x).numpy()
    np.testing.assert_array_equal(c, e)
    assert a.dtype == dtype
    assert nn.functional.dropout(x, 0.0) is x
    assert nn.functional.dropout(x, 0.9, training=False) is x
    assert not nn.functional.dropout(x, 1.0).numpy().any()
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="between 0 and 1"):
            nn.Dropout(bad)
    with pytest.raises(TypeError):
        nn.functional.dropout(x, "0.5")


def test_dropout_gradcheck():
    x = rtx.randn(4, 5, dtype=rtx.float64, seed=0).requires_grad_()
    assert gradcheck(lambda x: nn.functional.dropout(x, 0.4, generator=rtx.Generator(3)), (x,))


# --------------------------------------------------------------------- init
def test_init_functions(dtype):
    rtx.manual_seed(0)
    t = rtx.empty(200, 100, dtype=dtype, requires_grad=True)
    assert init.xavier_uniform_(t) is t
    a = math.sqrt(6 / 300)
    assert np.abs(t.numpy()).max() <= a * (1 + 1e-6) and t.dtype == dtype
    assert abs(t.numpy().var() / (a * a / 3) - 1) < 0.03
    init.xavier_uniform_(t, gain=2.0)
    assert np.abs(t.numpy()).max() > a * 1.5
    init.kaiming_uniform_(t, a=0, nonlinearity="relu")
    bound = math.sqrt(2) * math.sqrt(3 / 100)
    assert np.abs(t.numpy()).max() <= bound * (1 + 1e-6)
    init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu")
    assert np.abs(t.numpy()).max() <= math.sqrt(6 / 200) * (1 + 1e-6)
    init.normal_(t, 1.0, 0.5)
    assert abs(t.numpy().mean() - 1) < 0.02 and abs(t.numpy().std() - 0.5) < 0.02
    init.uniform_(t, -2, 3)
    assert t.numpy().min() >= -2 and t.numpy().max() <= 3
    init.zeros_(t)
    assert not t.numpy().any()
    init.ones_(t)
    assert (t.numpy() == 1).all()
    assert t.requires_grad and t.is_leaf
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(rtx.empty(3))
    with pytest.raises(ValueError, match="Mode"):
        init.kaiming_uniform_(t, mode="fan")
    with pytest.raises(TypeError):
        init.zeros_(np.zeros(3))
    g1 = init.normal_(rtx.empty(5), generator=rtx.Generator(9)).numpy()
    g2 = init.normal_(rtx.empty(5), generator=rtx.Generator(9)).numpy()
    np.testing.assert_array_equal(g1, g2)


@pytest.mark.parametrize("shape", [(3000, 700), (2_100_000,), (5, 300_000), (1, 2, 3)])
def test_init_fills_in_blocks_with_the_values_of_one_draw(shape):
    # a large weight is filled a block of rows at a time (no float64 copy of all
    # of it); the generator's stream is consumed in order: the values (and the
    # generator's state after) are those of one draw of the whole shape
    for fill, draw in ((lambda t, g: init.normal_(t, 0.5, 2.0, generator=g),
                        lambda r: r.normal(0.5, 2.0, shape)),
                       (lambda t, g: init.uniform_(t, -1.0, 3.0, generator=g),
                        lambda r: r.uniform(-1.0, 3.0, shape))):
        g = rtx.Generator(11)
        t = fill(rtx.empty(*shape), g)
        ref = np.random.Generator(np.random.PCG64(0))
        ref.bit_generator.state = rtx.Generator(11)._rng.bit_generator.state
        np.testing.assert_array_equal(t.numpy(), draw(ref).astype(np.float32))
        assert g._rng.bit_generator.state == ref.bit_generator.state


def test_calculate_gain_matches_torch():
    torch = pytest.importorskip("torch")
    for nl, p in [("linear", None), ("relu", None), ("tanh", None), ("leaky_relu", None),
                  ("leaky_relu", 0.2), ("selu", None), ("sigmoid", None)]:
        assert init.calculate_gain(nl, p) == pytest.approx(torch.nn.init.calculate_gain(nl, p))


# ------------------------------------------------------------- save / load
def test_save_load_module_state_dict(tmp_path, backend):
    m = TwoLayer()
    path = tmp_path / "model.npz"
    rtx.save(m.state_dict(), path)
    loaded = rtx.load(path)
    assert list(loaded) == list(m.state_dict())
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(loaded[k], v)
        assert loaded[k].dtype == v.dtype
    with np.load(path, allow_pickle=False) as z:  # plain numpy reads the same members
        np.testing.assert_array_equal(z["fc1.weight"], m.fc1.weight.numpy())
    m2 = TwoLayer()
    m2.load_state_dict(loaded)
    x = rtx.randn(3, 4, seed=0)
    np.testing.assert_array_equal(m(x).numpy(), m2(x).numpy())


def test_save_load_nested_tree(tmp_path):
    obj = {
        "model": {"w": np.arange(6.0).reshape(2, 3)},
        "optim": {"state": {0: {"step": 3, "exp_avg": rtx.ones(2)}, 1: {}},
                  "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 1],
                                    "nesterov": False, "name": "a/b%c", "x": None,
                                    "inf": math.inf}]},
        "a/b": np.float64(2.5),
    }
    p = tmp_path / "ck.npz"
    rtx.save(obj, p)
    back = rtx.load(p)
    assert back["optim"]["state"][0]["step"] == 3
    np.testing.assert_array_equal(back["optim"]["state"][0]["exp_avg"], np.ones(2, np.float32))
    assert back["optim"]["state"][1] == {}
    g = back["optim"]["param_groups"][0]
    assert g["betas"] == (0.9, 0.999) and g["params"] == [0, 1] and g["x"] is None
    assert g["name"] == "a/b%c" and g["inf"] == math.inf and g["nesterov"] is False
    np.testing.assert_array_equal(back["model"]["w"], obj["model"]["w"])
    assert float(back["a/b"]) == 2.5
    with np.load(p, allow_pickle=False) as z:
        assert "optim/state/0/exp_avg" in z.files and "a%2Fb" in z.files


def test_save_refuses_code_and_objects(tmp_path):
    with pytest.raises(TypeError, match="no pickled objects"):
        rtx.save({"f": lambda: 1}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="numeric arrays"):
        rtx.save({"o": np.array([object()])}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="keys"):
        rtx.save({(1, 2): np.ones(1)}, tmp_path / "x.npz")
    # an .npz holding an object array is refused on load (allow_pickle=False)
    np.savez(tmp_path / "evil.npz", a=np.array([object()], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle"):
        rtx.load(tmp_path / "evil.npz")
    # a plain .npz of arrays loads as a flat dict
    np.savez(tmp_path / "plain.npz", w=np.ones(3))
    assert list(rtx.load(tmp_path / "plain.npz")) == ["w"]


def test_deepcopy_of_a_model(backend):
    import copy

    lin = nn.Linear(3, 3)
    m = nn.Sequential(lin, nn.ReLU(), lin)  # a shared layer stays shared in the copy
    m(rtx.ones(1, 3)).sum().backward()
    c = copy.deepcopy(m)
    assert c[0] is c[2] and c[0] is not lin
    assert isinstance(c[0].weight, nn.Parameter) and c[0].weight.requires_grad
    assert c[0].weight.backend is lin.weight.backend
    np.testing.assert_array_equal(c[0].weight.numpy(), lin.weight.numpy())
    np.testing.assert_array_equal(c[0].weight.grad.numpy(), lin.weight.grad.numpy())
    with rtx.no_grad():
        c[0].weight.add_(1.0)  # independent values
    assert not np.array_equal(c[0].weight.numpy(), lin.weight.numpy())
    c(rtx.ones(2, 3)).sum().backward()  # the copy trains on its own
    with pytest.raises(RuntimeError, match="leaf"):
        copy.deepcopy(lin.weight * 2)


# a tree of what rtx.save keeps: arrays, numbers, strings, None, in dicts / lists / tuples
_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-2**62, 2**62), st.text(max_size=5),
    st.floats(allow_nan=True, allow_infinity=True),
    hnp.arrays(st.sampled_from([np.float32, np.float64, np.int64, np.int32, np.bool_]),
               hnp.array_shapes(min_dims=0, max_dims=3, max_side=3)),
)
_trees = st.recursive(
    _leaves,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3),
        st.lists(kids, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=4), kids, max_size=3),
        st.dictionaries(st.integers(-5, 5), kids, max_size=3),
    ),
    max_leaves=8,
)


def _same(a, b):
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return (type(b) is dict and list(a) == list(b)
                and all(_same(a[k], b[k]) for k in a))
    return type(a) is type(b) and a == b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=_trees)
def test_save_load_round_trips_any_tree(tree, tmp_path_factory):
    path = tmp_path_factory.mktemp("save") / "t.npz"
    rtx.save(tree, path)  # any tree, even a bare leaf or an empty-string key
    assert _same(tree, rtx.load(path))


def test_save_int_and_str_keys_do_not_collide(tmp_path):
    # was refused ("two values map to the same key"); the member naming is injective now
    # (a str key reading as an int has its first character escaped: "1" -> %31)
    tree = {1: np.ones(1), "1": np.zeros(1), -2: np.full(1, 2.0), "-2": np.full(1, 3.0)}
    rtx.save(tree, tmp_path / "c.npz")
    back = rtx.load(tmp_path / "c.npz")
    assert _same(tree, back)
    with np.load(tmp_path / "c.npz", allow_pickle=False) as z:
        assert {"1", "%31", "-2", "%2D2"} <= set(z.files)


def test_pickle_of_a_model_keeps_parameters():
    import pickle

    m = TwoLayer()
    m(rtx.ones(2, 4)).sum().backward()
    c = pickle.loads(pickle.dumps(m))
    assert [n for n, _ in c.named_parameters()] == [n for n, _ in m.named_parameters()]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in c.parameters())
    for (_, p), (_, q) in zip(m.named_parameters(), c.named_parameters(), strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    x = rtx.randn(3, 4, seed=0)
    np.testing.assert_array_equal(m(x).numpy(), c(x).numpy())


def test_save_load_keys_zip_names_cannot_hold(tmp_path):
    """Keys with NUL / control characters, ``/``, ``%`` and ``\\`` (found by the
    hypothesis round trip: a NUL ended the zip member's name and the key was lost)."""
    tree = {"\x00": np.ones(2), "a/\x00%\\": np.arange(3.0), "a": {"b": np.zeros(1)},
            "%2F": np.full(1, 7.0), "\x7f\n": [np.ones(1)]}
    path = tmp_path / "keys.npz"
    rtx.save(tree, path)
    back = rtx.load(path)
    assert set(back) == set(tree)
    for k in ("\x00", "a/\x00%\\", "%2F"):
        np.testing.assert_array_equal(back[k], tree[k])
    np.testing.assert_array_equal(back["a"]["b"], tree["a"]["b"])
    np.testing.assert_array_equal(back["\x7f\n"][0], tree["\x7f\n"][0])
