"""rtx.nn.training.train_epoch, the one epoch loop of the HetGAT example, the
distributed trainer, the benchmark and the tests: bitwise the loop written out
(zero_grad, forward, loss, backward, predictions and state before the step, step)."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
from rtx.datasets import synthetic_hetgraph
from rtx.nn import HetGAT
from rtx.nn.functional import cross_entropy
from rtx.nn.training import Epoch, train_epoch
from rtx.optim import Adam


def _model(g):
    rtx.manual_seed(0)
    m = HetGAT(g.metadata(), g.num_features_dict, 8, g.num_classes, heads=2)
    return m, Adam(m.parameters(), lr=0.02, weight_decay=5e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_train_epoch_is_the_written_out_loop_bitwise(dtype):
    g = synthetic_hetgraph(120, seed=3, dtype=dtype)
    x = {nt: rtx.tensor(a) for nt, a in g.x_dict.items()}
    tr = np.flatnonzero(g.train_mask)
    y = rtx.tensor(g.y[tr])

    ref, opt = _model(g)
    want = []
    for _ in range(4):
        opt.zero_grad()
        logits = ref(x, g.edge_index_dict)
        loss = cross_entropy(rtx.index_select(logits, tr), y)
        loss.backward()
        pred = logits.detach().argmax(-1).numpy()
        state = {k: np.array(v, copy=True) for k, v in ref.state_dict().items()}
        opt.step()
        want.append((float(loss.item()), pred, state))

    m, opt = _model(g)
    for i in range(4):
        ep = train_epoch(lambda: m(x, g.edge_index_dict),
                         lambda logits: cross_entropy(rtx.index_select(logits, tr), y),
                         opt, state_of=m)
        assert isinstance(ep, Epoch)
        w_loss, w_pred, w_state = want[i]
        assert float(ep.loss.item()) == w_loss
        np.testing.assert_array_equal(ep.pred, w_pred)
        assert ep.state is not None and ep.state.keys() == w_state.keys()
        for k, v in ep.state.items():  # the parameters that forward used: before the step
            np.testing.assert_array_equal(np.asarray(v), w_state[k])
    for k, v in m.state_dict().items():  # and the step was taken
        np.testing.assert_array_equal(np.asarray(v), np.asarray(ref.state_dict()[k]))
        assert not np.array_equal(np.asarray(v), want[-1][2][k])


def test_train_epoch_without_state_and_order_of_calls():
    calls = []
    w = rtx.tensor(np.array([[1.0, -2.0], [0.5, 3.0]]), requires_grad=True)

    class Opt(rtx.optim.SGD):
        def zero_grad(self, *a, **k):
            calls.append("zero_grad")
            return super().zero_grad(*a, **k)

        def step(self, *a, **k):
            calls.append(("step", None if w.grad is None else w.grad.numpy().copy()))
            return super().step(*a, **k)

    opt = Opt([w], lr=0.1)

    def forward():
        calls.append("forward")
        return w * 1.0

    def loss_fn(out):
        calls.append("loss")
        return (out * rtx.tensor(np.array([[1.0, 2.0], [3.0, 4.0]]))).sum()

    ep = train_epoch(forward, loss_fn, opt)
    assert ep.state is None
    np.testing.assert_array_equal(ep.pred, [0, 1])  # argmax(-1) before the step
    assert calls[:3] == ["zero_grad", "forward", "loss"]
    assert calls[3][0] == "step"
    np.testing.assert_array_equal(calls[3][1], [[1.0, 2.0], [3.0, 4.0]])  # after backward
    np.testing.assert_allclose(w.detach().numpy(), [[0.9, -2.2], [0.2, 2.6]])
