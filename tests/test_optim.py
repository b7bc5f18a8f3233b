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
