"""SimpleHGNConv against a numpy transcription of HGB's myGATConv (values and
gradients by float64 gradcheck), residual attention, parameter names, bad input."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
from rtx.nn import SimpleHGNConv


def _softmax_by(e, dst, n):
    out = np.empty_like(e)
    for v in range(n):
        m = dst == v
        if m.any():
            z = np.exp(e[m] - e[m].max(0))
            out[m] = z / z.sum(0)
    return out


def _reference(m, x, ei, et, res_attn=None):
    """HGB's myGATConv.forward (feat_drop = attn_drop = 0), in numpy."""
    p = {k: v for k, v in m.state_dict().items()}
    N, H, C, De = x.shape[0], m.heads, m.out_channels, m.edge_dim
    feat = (x @ p["fc.weight"].T).reshape(N, H, C)
    ef = (p["edge_emb.weight"][et] @ p["fc_e.weight"].T).reshape(-1, H, De)
    ee = (ef * p["attn_e"]).sum(-1)
    el = (feat * p["attn_l"]).sum(-1)
    er = (feat * p["attn_r"]).sum(-1)
    e = el[ei[0]] + er[ei[1]] + ee
    e = np.where(e > 0, e, m.negative_slope * e)
    a = _softmax_by(e, ei[1], N)
    if res_attn is not None:
        a = a * (1 - m.beta) + res_attn * m.beta
    out = np.zeros((N, H, C))
    np.add.at(out, ei[1], feat[ei[0]] * a[:, :, None])
    if m.residual:
        res = x @ p["res_fc.weight"].T if "res_fc.weight" in p else x
        out = out + res.reshape(N, H, C)
    if "bias_param" in p:
        out = out + p["bias_param"]
    return out, a


def _graph(rng, N=9, E=30, T=4):
    ei = np.stack([rng.integers(0, N, E), rng.integers(0, N, E)])
    ei = np.concatenate([ei, np.stack([np.arange(N), np.arange(N)])], 1)  # self-loops
    et = np.concatenate([rng.integers(0, T - 1, E), np.full(N, T - 1)])   # their own type
    return ei, et


@pytest.mark.parametrize("in_channels,heads", [(5, 2), (6, 3)], ids=["res_fc", "identity"])
def test_matches_hgbs_layer(in_channels, heads):
    rng = np.random.default_rng(0)
    ei, et = _graph(rng)
    m = SimpleHGNConv(in_channels, 2, 4, 3, heads=heads, negative_slope=0.05, beta=0.3).double()
    with rtx.no_grad():
        m.bias_param.copy_(rtx.tensor(rng.standard_normal((1, heads, 2))))
    x = rng.standard_normal((9, in_channels))
    out, a = m(rtx.tensor(x), ei, et)
    want, wa = _reference(m, x, ei, et)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.numpy(), wa, rtol=1e-10, atol=1e-12)
    assert not a.requires_grad                     # detached, as HGB's layer returns it
    res = rng.uniform(0, 1, wa.shape)
    out2, a2 = m(rtx.tensor(x), ei, et, res_attn=rtx.tensor(res))
    want2, wa2 = _reference(m, x, ei, et, res)
    np.testing.assert_allclose(out2.numpy(), want2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a2.numpy(), wa2, rtol=1e-10, atol=1e-12)


def test_gradcheck_inputs_and_parameters():
    rng = np.random.default_rng(1)
    ei, et = _graph(rng, N=6, E=14)
    m = SimpleHGNConv(4, 2, 4, 3, heads=2, beta=0.2, activation=rtx.elu).double()
    x = rtx.tensor(rng.standard_normal((6, 4)), requires_grad=True)
    res = rtx.tensor(rng.uniform(0, 1, (20, 2)), requires_grad=True)
    assert rtx.autograd.gradcheck(lambda x_, r_: m(x_, ei, et, res_attn=r_)[0].tanh().sum(),
                                  [x, res])
    # every parameter gets the gradient of the same loss by finite differences
    loss = m(x, ei, et, res_attn=res)[0].tanh().sum()
    loss.backward()
    for name, p in m.named_parameters():
        base = p.numpy().copy()
        flat = base.reshape(-1)
        j = int(np.argmax(np.abs(p.grad.numpy()).reshape(-1)))
        eps = 1e-6
        vals = []
        for s in (eps, -eps):
            w = base.copy().reshape(-1)
            w[j] += s
            with rtx.no_grad():
                p.copy_(rtx.tensor(w.reshape(base.shape)))
                vals.append(float(m(x, ei, et, res_attn=res)[0].tanh().sum().item()))
        with rtx.no_grad():
            p.copy_(rtx.tensor(base))
        fd = (vals[0] - vals[1]) / (2 * eps)
        assert abs(fd - p.grad.numpy().reshape(-1)[j]) < 1e-6 * max(1.0, abs(fd)), name
        assert flat.shape  # (the parameter was read)


def test_parameter_names_are_hgbs_and_bad_input_is_refused():
    m = SimpleHGNConv(5, 2, 4, 3, heads=2)
    assert set(m.state_dict()) == {"edge_emb.weight", "fc.weight", "fc_e.weight", "attn_l",
                                   "attn_r", "attn_e", "res_fc.weight", "bias_param"}
    assert "res_fc.weight" not in SimpleHGNConv(4, 2, 4, 3, heads=2).state_dict()
    rng = np.random.default_rng(2)
    ei, et = _graph(rng)
    x = rtx.tensor(rng.standard_normal((9, 5)).astype(np.float32))
    with pytest.raises(IndexError):
        m(x, ei, np.where(et == 3, 4, et))               # an edge type >= num_edge_types
    with pytest.raises(ValueError, match="len"):
        m(x, ei, et[:-1])
    with pytest.raises(ValueError, match=r"\[N, 5\]"):
        m(rtx.zeros(9, 4), ei, et)
    with pytest.raises(ValueError, match="res_attn"):
        m(x, ei, et, res_attn=rtx.zeros(3, 2))
    with pytest.raises(ValueError, match="beta"):
        SimpleHGNConv(5, 2, 4, 3, beta=1.5)
