"""rtx.optim.lr_scheduler: StepLR and CosineAnnealingLR against closed forms and torch."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtx
from rtx.optim import SGD, Adam
from rtx.optim.lr_scheduler import CosineAnnealingLR, LRScheduler, StepLR


def _opt(lr=0.1, groups=1):
    ps = [rtx.ones(1, requires_grad=True) for _ in range(groups)]
    return SGD([{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(ps)], lr=lr)


def _run(sched, n):
    lrs = [sched.get_last_lr()]
    for _ in range(n):
        sched.optimizer.step()
        sched.step()
        lrs.append(sched.get_last_lr())
    return lrs


def test_step_lr_closed_form():
    opt = _opt(0.1, groups=2)
    s = StepLR(opt, step_size=3, gamma=0.5)
    assert s.last_epoch == 0 and s.get_last_lr() == [0.1, 0.2]
    lrs = _run(s, 10)
    for e, got in enumerate(lrs):
        want = [b * 0.5 ** (e // 3) for b in (0.1, 0.2)]
        assert got == pytest.approx(want, rel=1e-15)
    assert [g["lr"] for g in opt.param_groups] == lrs[-1]
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.2]


@pytest.mark.parametrize("eta_min", [0.0, 0.01])
def test_cosine_closed_form_within_t_max(eta_min):
    opt = _opt(0.1)
    s = CosineAnnealingLR(opt, T_max=10, eta_min=eta_min)
    lrs = _run(s, 10)
    for e, (got,) in enumerate(lrs):
        want = eta_min + (0.1 - eta_min) * (1 + math.cos(math.pi * e / 10)) / 2
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15)
    assert lrs[-1][0] == pytest.approx(eta_min, abs=1e-15)
    # past T_max the rate rises again along the same cosine (PyTorch's recursive form)
    more = _run(s, 10)
    for k, (got,) in enumerate(more[1:], start=11):
        want = eta_min + (0.1 - eta_min) * (1 + math.cos(math.pi * k / 10)) / 2
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_resume_with_last_epoch():
    opt = _opt(0.1)
    with pytest.raises(KeyError, match="initial_lr"):
        StepLR(opt, step_size=2, last_epoch=5)
    opt.param_groups[0]["initial_lr"] = 0.1
    s = StepLR(opt, step_size=2, gamma=0.5, last_epoch=5)
    assert s.last_epoch == 6
    # chainable: epoch 6 is a multiple of step_size, so the current lr is decayed
    assert s.get_last_lr() == [pytest.approx(0.05)]
    c_opt = _opt(0.1)
    c_opt.param_groups[0]["initial_lr"] = 0.1
    c = CosineAnnealingLR(c_opt, T_max=8, last_epoch=2)
    assert c.last_epoch == 3
    assert c.get_last_lr()[0] == pytest.approx(0.05 * (1 + math.cos(math.pi * 3 / 8)))


def test_state_dict_round_trip():
    a = CosineAnnealingLR(_opt(0.1), T_max=7, eta_min=0.001)
    _run(a, 4)
    sd = a.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 4 and sd["T_max"] == 7
    b_opt = _opt(0.1)
    b = CosineAnnealingLR(b_opt, T_max=7, eta_min=0.001)
    b.load_state_dict(sd)
    b_opt.param_groups[0]["lr"] = a.optimizer.param_groups[0]["lr"]
    assert _run(b, 5) == _run(a, 5)


def test_validation_and_base_class():
    with pytest.raises(ValueError, match="step_size"):
        StepLR(_opt(), step_size=0)
    with pytest.raises(ValueError, match="T_max"):
        CosineAnnealingLR(_opt(), T_max=0)
    with pytest.raises(TypeError, match="not an Optimizer"):
        StepLR(object(), step_size=1)
    with pytest.raises(NotImplementedError):
        LRScheduler(_opt())


@pytest.mark.parametrize("kind", ["step", "cosine", "cosine_eta", "step_adam"])
def test_schedulers_match_torch(kind):
    torch = pytest.importorskip("torch")
    tp = [torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))]
    rp = [rtx.ones(1, requires_grad=True), rtx.ones(1, requires_grad=True)]

    def groups(ps):
        return [{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.03}]

    if kind == "step_adam":
        topt, ropt = torch.optim.Adam(groups(tp), lr=0.2), Adam(groups(rp), lr=0.2)
    else:
        topt, ropt = torch.optim.SGD(groups(tp), lr=0.2), SGD(groups(rp), lr=0.2)
    make = {
        "step": lambda m, o: m.StepLR(o, step_size=4, gamma=0.3),
        "step_adam": lambda m, o: m.StepLR(o, step_size=1, gamma=0.9),
        "cosine": lambda m, o: m.CosineAnnealingLR(o, T_max=6),
        "cosine_eta": lambda m, o: m.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
    }[kind]
    ts, rs = make(torch.optim.lr_scheduler, topt), make(rtx.optim.lr_scheduler, ropt)
    for _ in range(25):
        np.testing.assert_allclose(rs.get_last_lr(), ts.get_last_lr(), rtol=1e-13, atol=1e-16)
        assert rs.last_epoch == ts.last_epoch
        topt.step()
        ropt.step()
        ts.step()
        rs.step()
