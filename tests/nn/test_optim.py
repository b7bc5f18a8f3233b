"""Optimisers against numpy reference updates, and the demo's training run."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
from rtx.optim import SGD, Adam


def _quadratic_grads(p0, target, steps, make_opt):
    p = rtx.tensor(p0, requires_grad=True)
    opt = make_opt([p])
    for _ in range(steps):
        opt.zero_grad()
        loss = ((p - rtx.tensor(target)) ** 2).sum()
        loss.backward()
        opt.step()
    return p.numpy()


def test_sgd_matches_reference(backend):
    p0 = np.array([1.0, -2.0, 3.0])
    t = np.array([0.5, 0.5, 0.5])
    got = _quadratic_grads(p0, t, 5, lambda ps: SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01))
    p, buf = p0.copy(), None
    for _ in range(5):
        g = 2 * (p - t) + 0.01 * p
        buf = g.copy() if buf is None else 0.9 * buf + g
        p = p - 0.1 * buf
    np.testing.assert_allclose(got, p, rtol=1e-12)


def test_adam_matches_reference(backend):
    p0 = np.array([1.0, -2.0, 3.0])
    t = np.array([0.5, 0.5, 0.5])
    got = _quadratic_grads(p0, t, 7, lambda ps: Adam(ps, lr=0.05, weight_decay=0.1))
    p, m, v = p0.copy(), 0.0, 0.0
    for k in range(1, 8):
        g = 2 * (p - t) + 0.1 * p
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        p = p - 0.05 / (1 - 0.9**k) * m / (np.sqrt(v / (1 - 0.999**k)) + 1e-8)
    np.testing.assert_allclose(got, p, rtol=1e-10)


def test_optimizer_validation():
    with pytest.raises(ValueError):
        SGD([], lr=0.1)
    with pytest.raises(ValueError):
        SGD([rtx.ones(2)], lr=0.1)
    with pytest.raises(ValueError):
        Adam([rtx.ones(2, requires_grad=True)], lr=-1)


def test_zero_grad_clears():
    p = rtx.ones(2, requires_grad=True)
    (p * 2).sum().backward()
    opt = SGD([p], lr=0.1)
    assert p.grad is not None
    opt.zero_grad()
    assert p.grad is None


def test_demo_trains_karate_club(capsys):
    from rtx.examples.karate import main

    acc = main(["--epochs", "80"])
    out = capsys.readouterr().out
    assert "karate club: 34 nodes" in out
    losses = [float(line.split("loss")[1].split()[0]) for line in out.splitlines()
              if line.startswith("epoch")]
    assert losses[-1] < losses[0] * 0.2
    assert acc >= 0.8


# ------------------------------------------------------------------ AdamW
from rtx.optim import AdamW, Optimizer  # noqa: E402
from rtx.optim.lr_scheduler import CosineAnnealingLR, StepLR  # noqa: E402


def test_adamw_matches_reference(backend):
    p0 = np.array([1.0, -2.0, 3.0])
    t = np.array([0.5, 0.5, 0.5])
    got = _quadratic_grads(p0, t, 7, lambda ps: AdamW(ps, lr=0.05, weight_decay=0.1))
    p, m, v = p0.copy(), 0.0, 0.0
    for k in range(1, 8):
        g = 2 * (p - t)  # decoupled: the decay never enters the moments
        p = p * (1 - 0.05 * 0.1)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        p = p - 0.05 / (1 - 0.9**k) * m / (np.sqrt(v) / np.sqrt(1 - 0.999**k) + 1e-8)
    np.testing.assert_allclose(got, p, rtol=1e-10)
    assert AdamW([rtx.ones(1, requires_grad=True)]).param_groups[0]["weight_decay"] == 1e-2


def _torch_run(torch_opt, rtx_opt, steps=6, shape=(3, 4)):
    """The same quadratic problem through torch and rtx; returns both parameters."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    p0, tgt = rng.standard_normal(shape), rng.standard_normal(shape)
    tp = torch.tensor(p0, requires_grad=True)
    rp = rtx.tensor(p0, dtype=rtx.float64, requires_grad=True)
    topt, ropt = torch_opt([tp]), rtx_opt([rp])
    for k in range(steps):
        topt.zero_grad()
        ropt.zero_grad()
        ((tp - torch.tensor(tgt)) ** 4 * (k + 1)).sum().backward()
        ((rp - rtx.tensor(tgt, dtype=rtx.float64)) ** 4 * (k + 1)).sum().backward()
        topt.step()
        ropt.step()
    return tp.detach().numpy(), rp.numpy()


@pytest.mark.parametrize("kind", ["sgd", "sgd_nesterov", "sgd_damp", "adam", "adam_ams",
                                  "adamw", "adamw_ams"])
def test_optimizers_match_torch(kind):
    torch = pytest.importorskip("torch")
    cfg = {
        "sgd": (torch.optim.SGD, SGD, dict(lr=0.01, momentum=0.9, weight_decay=0.1)),
        "sgd_nesterov": (torch.optim.SGD, SGD, dict(lr=0.01, momentum=0.8, nesterov=True)),
        "sgd_damp": (torch.optim.SGD, SGD, dict(lr=0.01, momentum=0.8, dampening=0.3)),
        "adam": (torch.optim.Adam, Adam, dict(lr=0.05, weight_decay=0.1)),
        "adam_ams": (torch.optim.Adam, Adam, dict(lr=0.05, amsgrad=True)),
        "adamw": (torch.optim.AdamW, AdamW, dict(lr=0.05)),
        "adamw_ams": (torch.optim.AdamW, AdamW, dict(lr=0.05, weight_decay=0.3, amsgrad=True)),
    }[kind]
    tcls, rcls, kw = cfg
    want, got = _torch_run(lambda ps: tcls(ps, **kw), lambda ps: rcls(ps, **kw))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_steps_update_parameters_in_place():
    m = rtx.nn.Linear(3, 2)
    w = m.weight
    buf = w.numpy()
    for opt in (SGD(m.parameters(), lr=0.1, momentum=0.9), AdamW(m.parameters(), lr=0.1)):
        m(rtx.ones(4, 3)).sum().backward()
        before, version = buf.copy(), w._version
        opt.step()
        assert w._version > version  # writes went through the in-place methods
        opt.zero_grad()
        assert m.weight is w and w.numpy() is buf  # the same object and the same buffer
        assert not np.array_equal(buf, before)


def test_param_groups_and_validation():
    a = rtx.ones(2, requires_grad=True)
    b = rtx.ones(2, requires_grad=True)
    opt = SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    (a.sum() + b.sum()).backward()
    opt.step()
    np.testing.assert_allclose(a.numpy(), 0.9)
    np.testing.assert_allclose(b.numpy(), 0.5)
    opt.lr = 0.2
    assert [g["lr"] for g in opt.param_groups] == [0.2, 0.2] and opt.lr == 0.2
    assert opt.params == [a, b]
    with pytest.raises(ValueError, match="more than once"):
        SGD([a, a])
    with pytest.raises(ValueError, match="more than once"):
        opt.add_param_group({"params": [b]})
    with pytest.raises(TypeError, match="ordered"):
        SGD({a}, lr=0.1)
    with pytest.raises(TypeError):
        SGD(a, lr=0.1)
    with pytest.raises(ValueError, match="beta"):
        Adam([a], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="epsilon"):
        AdamW([a], eps=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        SGD([a], nesterov=True)
    with pytest.raises(ValueError, match="weight_decay"):
        AdamW([a], weight_decay=-0.1)
    assert "Parameter Group 1" in repr(opt) and "lr: 0.2" in repr(opt)


def test_zero_grad_set_to_none_false():
    p = rtx.ones(2, requires_grad=True)
    (p * 3).sum().backward()
    opt = Adam([p])
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), 0)


# ---------------------------------------------------------- state dicts
def _make(seed):
    rtx.manual_seed(seed)
    return rtx.nn.Sequential(rtx.nn.Linear(4, 8), rtx.nn.ELU(), rtx.nn.Linear(8, 3))


def _train(model, opt, sched, x, t, steps):
    for _ in range(steps):
        opt.zero_grad()
        rtx.nn.functional.cross_entropy(model(x), t).backward()
        opt.step()
        if sched is not None:
            sched.step()


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw_ams"])
def test_state_dict_round_trip_continues_identically(tmp_path, kind, backend):
    make_opt = {
        "sgd": lambda ps: SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
        "adam": lambda ps: Adam(ps, lr=0.01, weight_decay=1e-3),
        "adamw_ams": lambda ps: AdamW(ps, lr=0.01, amsgrad=True),
    }[kind]
    x = rtx.randn(10, 4, seed=1)
    t = np.random.default_rng(2).integers(0, 3, 10)
    # uninterrupted: 7 steps
    ref = _make(0)
    ref_opt = make_opt(ref.parameters())
    ref_s = StepLR(ref_opt, step_size=2, gamma=0.5)
    _train(ref, ref_opt, ref_s, x, t, 7)
    # 4 steps, save everything, rebuild from other seeds, load, 3 more steps
    a = _make(0)
    a_opt = make_opt(a.parameters())
    a_s = StepLR(a_opt, step_size=2, gamma=0.5)
    _train(a, a_opt, a_s, x, t, 4)
    path = tmp_path / "ckpt.npz"
    rtx.save({"model": a.state_dict(), "optim": a_opt.state_dict(),
              "sched": a_s.state_dict()}, path)
    ck = rtx.load(path)
    b = _make(5)
    b_opt = make_opt(b.parameters())
    b_s = StepLR(b_opt, step_size=2, gamma=0.5)
    b.load_state_dict(ck["model"])
    b_opt.load_state_dict(ck["optim"])
    b_s.load_state_dict(ck["sched"])
    assert b_opt.param_groups[0]["lr"] == a_opt.param_groups[0]["lr"]
    _train(b, b_opt, b_s, x, t, 3)
    for (n, p), (_, q) in zip(ref.named_parameters(), b.named_parameters(), strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=n)
    assert b_s.get_last_lr() == ref_s.get_last_lr()


def test_optimizer_state_dict_layout_and_errors():
    m = _make(0)
    opt = Adam(m.parameters(), lr=0.01)
    _train(m, opt, None, rtx.randn(5, 4, seed=0), [0, 1, 2, 0, 1], 2)
    sd = opt.state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert sd["param_groups"][0]["params"] == [0, 1, 2, 3]
    assert sd["param_groups"][0]["betas"] == (0.9, 0.999)
    assert sd["state"][0]["step"] == 2 and sorted(sd["state"][0]) == [
        "exp_avg", "exp_avg_sq", "step"]
    assert isinstance(sd["state"][1]["exp_avg"], np.ndarray)
    sd["state"][1]["exp_avg"][:] = 99  # a copy
    assert not (opt.state_dict()["state"][1]["exp_avg"] == 99).any()
    other = Adam(_make(1).parameters())
    before = other.state_dict()
    bad = opt.state_dict()
    bad["state"][3]["exp_avg"] = np.zeros(7)
    with pytest.raises(ValueError, match="shape"):
        other.load_state_dict(bad)
    assert other.state_dict()["state"] == before["state"] == {}  # nothing changed
    assert other.param_groups[0]["lr"] == 1e-3
    with pytest.raises(ValueError, match="number of parameter groups"):
        other.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="size"):
        Adam([rtx.ones(1, requires_grad=True)]).load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match="keys"):
        other.load_state_dict({"state": {}})


def test_custom_optimizer_subclass():
    class Halve(Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.0})

        def step(self):
            with rtx.no_grad():
                for p in self.params:
                    p.mul_(0.5)

    p = rtx.ones(2, requires_grad=True)
    Halve([p]).step()
    np.testing.assert_array_equal(p.numpy(), 0.5)


def test_schedulers_drive_the_optimizer_lr():
    p = rtx.ones(1, requires_grad=True)
    opt = SGD([p], lr=1.0)
    s = CosineAnnealingLR(opt, T_max=4)
    lrs = []
    for _ in range(4):
        (p * 1.0).sum().backward()
        opt.step()
        opt.zero_grad()
        lrs.append(opt.param_groups[0]["lr"])
        s.step()
    # p -= lr_k each step: the sum of the lrs used
    np.testing.assert_allclose(p.numpy(), 1 - sum(lrs), rtol=1e-6)
    assert lrs[0] == 1.0 and lrs[1] == pytest.approx((1 + np.cos(np.pi / 4)) / 2)
