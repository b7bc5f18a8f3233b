"""HGTConv against a numpy transcription of PyG's math and, where PyTorch Geometric is
installed (an optional anchor), against PyG's with the same weights (values and every
gradient); float64 gradchecks, parameter names / state_dict round trip, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtx
from rtx.nn import HGTConv

NODES = {"paper": 7, "author": 5, "term": 3}
EDGES = [("author", "writes", "paper"), ("paper", "rev_writes", "author"),
         ("paper", "cites", "paper"), ("term", "of", "paper")]
META = (list(NODES), EDGES)


def _graph(rng, feat=None, E=12):
    feat = feat or {"paper": 6, "author": 4, "term": 5}
    x = {t: rng.standard_normal((n, feat[t])) for t, n in NODES.items()}
    ei = {}
    for s, r, d in EDGES:
        ei[(s, r, d)] = np.stack([rng.integers(0, NODES[s], E), rng.integers(0, NODES[d], E)])
    return x, ei


def _pyg():
    """(torch, torch_geometric.nn), or the test is skipped."""
    return pytest.importorskip("torch"), pytest.importorskip("torch_geometric.nn")


def _pair(in_channels, out, heads, dtype, seed=0):
    torch, pyg_nn = _pyg()
    torch.manual_seed(seed)
    ref = pyg_nn.HGTConv(in_channels, out, META, heads=heads).to(getattr(torch, dtype))
    with torch.no_grad():   # non-trivial skip / p_rel (PyG initialises them to 1)
        for p in list(ref.skip.values()) + list(ref.p_rel.values()):
            p.uniform_(-1.5, 1.5)
    m = HGTConv(in_channels, out, META, heads=heads)
    if dtype == "float64":
        m.double()
    sd = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    assert set(sd) == set(m.state_dict()), set(sd) ^ set(m.state_dict())
    m.load_state_dict({k: rtx.tensor(v) for k, v in sd.items()})
    return ref, m


def _erf(v: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(v)


def _reference(m: HGTConv, x: dict, ei: dict) -> dict:
    """PyG's HGTConv math in numpy, from the layer's own parameters (float64)."""
    sd = {k: np.asarray(v, dtype=np.float64) for k, v in m.state_dict().items()}
    H, C = m.heads, m.out_channels
    D, R = C // H, len(m.edge_types)
    kqv = {t: x[t] @ sd[f"kqv_lin.lins.{t}.weight"].T + sd[f"kqv_lin.lins.{t}.bias"]
           for t in x}
    k = {t: v[:, :C].reshape(-1, H, D) for t, v in kqv.items()}
    q = {t: v[:, C:2 * C].reshape(-1, H, D) for t, v in kqv.items()}
    v_ = {t: v[:, 2 * C:].reshape(-1, H, D) for t, v in kqv.items()}
    logits, msgs, dsts = {}, {}, {}
    for i, et in enumerate(m.edge_types):
        if et not in ei:
            continue
        s, _, d = et
        src, dst = ei[et]
        wk = sd["k_rel.weight"][np.arange(H) * R + i]                 # [H, D, D]
        wv = sd["v_rel.weight"][np.arange(H) * R + i]
        kr = np.einsum("nhd,hde->nhe", k[s], wk)
        vr = np.einsum("nhd,hde->nhe", v_[s], wv)
        a = (q[d][dst] * kr[src]).sum(-1) * sd["p_rel." + "__".join(et)] / math.sqrt(D)
        logits.setdefault(d, []).append(a)
        msgs.setdefault(d, []).append(vr[src])
        dsts.setdefault(d, []).append(dst)
    out = {}
    for d in logits:
        a, msg, dst = (np.concatenate(logits[d]), np.concatenate(msgs[d]),
                       np.concatenate(dsts[d]))
        n = x[d].shape[0]
        mx = np.full((n, H), -np.inf)
        np.maximum.at(mx, dst, a)
        e = np.exp(a - mx[dst])
        den = np.zeros((n, H))
        np.add.at(den, dst, e)
        alpha = e / den[dst]
        agg = np.zeros((n, H, D))
        np.add.at(agg, dst, alpha[:, :, None] * msg)
        g = agg.reshape(n, C)
        g = 0.5 * g * (1 + _erf(g / math.sqrt(2)))
        o = g @ sd[f"out_lin.lins.{d}.weight"].T + sd[f"out_lin.lins.{d}.bias"]
        if o.shape[1] == x[d].shape[1]:
            sk = 1 / (1 + np.exp(-sd[f"skip.{d}"]))
            o = sk * o + (1 - sk) * x[d]
        out[d] = o
    return out


@pytest.mark.parametrize("heads", [1, 2])
@pytest.mark.parametrize("same_size", [False, True], ids=["sizes", "skip"])
def test_matches_numpy_reference(heads, same_size):
    rng = np.random.default_rng(3)
    feat = {"paper": 8, "author": 8, "term": 8} if same_size else None
    x, ei = _graph(rng, feat)
    in_ch = 8 if same_size else {"paper": 6, "author": 4, "term": 5}
    m = HGTConv(in_ch, 8, META, heads=heads).double()
    with rtx.no_grad():   # non-trivial skip / p_rel (initialised to 1)
        for p in m.parameters():
            if p.shape in ((1,), (1, heads)):
                p.copy_(rtx.tensor(rng.uniform(-1.5, 1.5, p.shape)))
    got = m({t: rtx.tensor(v) for t, v in x.items()}, ei)
    want = _reference(m, x, ei)
    assert set(got) == set(want) == {"paper", "author"}
    for t in want:
        np.testing.assert_allclose(got[t].numpy(), want[t], rtol=1e-10, atol=1e-12)
    # one relation only: a type that receives nothing is left out
    one = {EDGES[0]: ei[EDGES[0]]}
    got1 = m({t: rtx.tensor(v) for t, v in x.items()}, one)
    assert set(got1) == {"paper"}
    np.testing.assert_allclose(got1["paper"].numpy(), _reference(m, x, one)["paper"],
                               rtol=1e-10, atol=1e-12)


def test_the_joined_edges_are_built_once_per_graph():
    """The per-target joined EdgeIndex is reused while the relations' edges are the
    same; edges written in place build it again (and change the output)."""
    rng = np.random.default_rng(6)
    x, ei = _graph(rng)
    m = HGTConv({"paper": 6, "author": 4, "term": 5}, 8, META, heads=2).double()
    xr = {t: rtx.tensor(v) for t, v in x.items()}
    out1 = m(xr, ei)["paper"].numpy()
    joined = m._joined_cache["paper"][1]
    m(xr, {k: v.copy() for k, v in ei.items()})
    assert m._joined_cache["paper"][1] is joined
    ei[EDGES[2]][0, 0] = (ei[EDGES[2]][0, 0] + 1) % NODES["paper"]
    out2 = m(xr, ei)["paper"].numpy()
    assert m._joined_cache["paper"][1] is not joined
    np.testing.assert_allclose(out2, _reference(m, x, ei)["paper"], rtol=1e-10, atol=1e-12)
    assert not np.array_equal(out1, out2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("heads", [1, 2])
@pytest.mark.parametrize("same_size", [False, True], ids=["sizes", "skip"])
def test_matches_pyg_values_and_gradients(dtype, heads, same_size):
    rng = np.random.default_rng(3)
    feat = {"paper": 8, "author": 8, "term": 8} if same_size else None
    x, ei = _graph(rng, feat)
    in_ch = 8 if same_size else {"paper": 6, "author": 4, "term": 5}
    ref, m = _pair(in_ch, 8, heads, dtype)
    torch, _ = _pyg()
    xt = {t: torch.tensor(v.astype(dtype), requires_grad=True) for t, v in x.items()}
    eit = {et: torch.tensor(v) for et, v in ei.items()}
    xr = {t: rtx.tensor(v.astype(dtype), requires_grad=True) for t, v in x.items()}
    out_t = ref(xt, eit)
    out_r = m(xr, ei)
    assert set(out_r) == {t for t, v in out_t.items() if v is not None} == {"paper", "author"}
    tol = dict(rtol=2e-4, atol=2e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    keys = sorted(out_r)
    loss_r = sum(((out_r[k] * (i + 1.0)).tanh()).sum() for i, k in enumerate(keys))
    for t in out_r:
        np.testing.assert_allclose(out_r[t].numpy(), out_t[t].detach().numpy(), **tol)
    # the same loss on both sides for the gradients
    loss_t = sum(((out_t[k] * (i + 1.0)).tanh()).sum() for i, k in enumerate(keys))
    loss_t.backward()
    loss_r.backward()
    for t in x:
        if xt[t].grad is None:
            assert xr[t].grad is None or not np.any(xr[t].grad.numpy()), t
        else:
            np.testing.assert_allclose(xr[t].grad.numpy(), xt[t].grad.numpy(), **tol)
    grads_t = {k: p.grad for k, p in ref.named_parameters()}
    for k, p in m.named_parameters():
        gt = grads_t[k]
        if gt is None:
            assert p.grad is None or not np.any(p.grad.numpy()), k
        else:
            np.testing.assert_allclose(p.grad.numpy(), gt.numpy(), err_msg=k, **tol)


def test_gradcheck_float64():
    rng = np.random.default_rng(5)
    x, ei = _graph(rng, {"paper": 4, "author": 4, "term": 4}, E=6)
    m = HGTConv(4, 4, META, heads=2).double()
    xs = [rtx.tensor(x[t], requires_grad=True) for t in NODES]

    def f(*xs_):
        out = m(dict(zip(NODES, xs_, strict=True)), ei)
        return out["paper"].tanh().sum() + (out["author"] * 2).sigmoid().sum()

    assert rtx.autograd.gradcheck(f, xs)


def test_an_unknown_edge_type_and_wrong_sizes_are_refused():
    rng = np.random.default_rng(1)
    x, ei = _graph(rng)
    m = HGTConv({"paper": 6, "author": 4, "term": 5}, 8, META, heads=2)
    xr = {t: rtx.tensor(v.astype(np.float32)) for t, v in x.items()}
    with pytest.raises(ValueError, match="not in metadata"):
        m(xr, {("author", "likes", "paper"): ei[EDGES[0]]})
    bad = dict(xr, paper=rtx.zeros(7, 5))
    with pytest.raises(ValueError, match=r"\[num_nodes, 6\]"):
        m(bad, ei)
    bad_edges = dict(ei)
    bad_edges[EDGES[0]] = np.array([[0, 9], [0, 1]])
    with pytest.raises(IndexError):
        m(xr, bad_edges)
    with pytest.raises(ValueError, match="divisible"):
        HGTConv(4, 6, META, heads=4)
    with pytest.raises(ValueError, match="not in metadata's node types"):
        HGTConv(4, 8, (["paper"], EDGES))


def test_repr_and_parameter_names_are_pygs():
    m = HGTConv(4, 8, META, heads=2)
    assert repr(m) == "HGTConv(-1, 8, heads=2)"
    assert m.k_rel.weight.shape == (2 * len(EDGES), 4, 4)
    assert "p_rel.author__writes__paper" in m.state_dict()


def test_the_ready_made_hgt_matches_pygs_example_model():
    """rtx.nn.models.HGT against the model of PyG's examples/hetero/hgt_dblp.py
    (every node type receives messages here, where the two agree by design)."""
    rng = np.random.default_rng(8)
    x, ei = _graph(rng)
    ei[("paper", "has", "term")] = np.stack([rng.integers(0, 7, 9), rng.integers(0, 3, 9)])
    meta = (list(NODES), list(ei))
    in_ch = {"paper": 6, "author": 4, "term": 5}

    torch, pyg_nn = _pyg()

    class PygHGT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin_dict = torch.nn.ModuleDict({t: torch.nn.Linear(c, 8)
                                                 for t, c in in_ch.items()})
            self.convs = torch.nn.ModuleList([pyg_nn.HGTConv(8, 8, meta, 2) for _ in range(2)])
            self.lin = torch.nn.Linear(8, 3)

        def forward(self, x_dict, edge_index_dict):
            x_dict = {k: self.lin_dict[k](v).relu() for k, v in x_dict.items()}
            for conv in self.convs:
                x_dict = conv(x_dict, edge_index_dict)
            return self.lin(x_dict["paper"])

    torch.manual_seed(0)
    ref = PygHGT().double()
    m = rtx.nn.models.HGT(meta, in_ch, 8, 3, heads=2, num_layers=2).double()
    sd = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    assert set(sd) == set(m.state_dict())
    m.load_state_dict(sd)
    want = ref({t: torch.tensor(v) for t, v in x.items()},
               {et: torch.tensor(v) for et, v in ei.items()})
    got = m({t: rtx.tensor(v) for t, v in x.items()}, ei)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="no features"):
        m({"paper": rtx.tensor(x["paper"])}, ei)


def test_lazy_sizes_materialise_at_the_first_forward():
    """``in_channels=-1`` (PyG's lazy form): the projections take their widths from the
    first input, after which a PyG state_dict loads and the outputs agree."""
    rng = np.random.default_rng(9)
    x, ei = _graph(rng)
    ref, eager = _pair({"paper": 6, "author": 4, "term": 5}, 8, 2, "float64")
    m = HGTConv(-1, 8, META, heads=2).double()
    xr = {t: rtx.tensor(v) for t, v in x.items()}
    m(xr, ei)                                       # materialises kqv_lin's weights
    assert m.kqv_lin.lins["author"].weight.shape == (24, 4)
    m.load_state_dict(eager.state_dict())
    got, want = m(xr, ei), eager(xr, ei)
    for t in want:
        np.testing.assert_allclose(got[t].numpy(), want[t].numpy(), rtol=1e-12, atol=1e-13)
