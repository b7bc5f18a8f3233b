"""GATv2Conv and the fused ``rtx.gatv2_scores`` op.

The op: values and every gradient against a numpy reference and against the
same scores composed from rtx's existing ops (gather, add, leaky_relu, sum),
float64 gradchecks, bitwise determinism over thread counts, bad input, and
working memory (no ``[E, H, C]`` buffer).  The layer: values against a numpy
reference of PyG's formula and against PyG itself (values, attention, every
gradient, copied weights), PyG-shaped state dicts, gradchecks, self-loops,
edge features with every fill_value, bipartite input, bad input.
"""

from __future__ import annotations

import numpy as np
import pytest
from _gat_reference import gradcheck_module
from _layers_reference import gatv2_ref, gatv2_scores_ref
from conftest import bits, tol

import rtx
from rtx._kernels import set_segment_parallel_min
from rtx.autograd import gradcheck
from rtx.nn import GATv2Conv, HeteroConv

# torch_geometric 2.8's GATv2Conv state_dict keys (read off PyG).
PYG_KEYS = {
    "default": ["att", "bias", "lin_l.weight", "lin_l.bias", "lin_r.weight", "lin_r.bias"],
    "edge+res": ["att", "bias", "lin_l.weight", "lin_l.bias", "lin_r.weight", "lin_r.bias",
                 "lin_edge.weight", "res.weight"],
    "no-bias": ["att", "lin_l.weight", "lin_r.weight"],
}


def _op_inputs(rng, n_src=7, n_dst=5, e=40, H=3, C=4, dtype=np.float64):
    xl = rng.standard_normal((n_src, H, C)).astype(dtype)
    xr = rng.standard_normal((n_dst, H, C)).astype(dtype)
    att = rng.standard_normal((H, C)).astype(dtype)
    xe = rng.standard_normal((e, H, C)).astype(dtype)
    ei = np.stack([rng.integers(0, n_src, e), rng.integers(0, n_dst, e)])
    return xl, xr, att, xe, ei


def _composed(xl, xr, att, ei, slope, xe=None):
    """The same scores from rtx's existing differentiable ops (forms [E, H, C])."""
    z = rtx.index_select(xl, ei[0]) + rtx.index_select(xr, ei[1])
    if xe is not None:
        z = z + xe
    return (z.leaky_relu(slope) * att).sum(-1)


# ------------------------------------------------------------------ the op
@pytest.mark.parametrize("with_e", [False, True])
def test_op_values_match_reference(with_e, backend, dtype):
    rng = np.random.default_rng(0)
    xl, xr, att, xe, ei = _op_inputs(rng, dtype=dtype)
    got = rtx.gatv2_scores(rtx.tensor(xl), rtx.tensor(xr), rtx.tensor(att), ei, 0.3,
                           rtx.tensor(xe) if with_e else None)
    ref = gatv2_scores_ref(xl, xr, att, ei, 0.3, xe if with_e else None)
    assert got.dtype == dtype and got.shape == (40, 3)
    np.testing.assert_allclose(got.numpy(), ref, **tol(dtype))


@pytest.mark.parametrize("with_e", [False, True])
def test_op_gradients_match_the_composition(with_e, backend, dtype):
    rng = np.random.default_rng(1)
    xl, xr, att, xe, ei = _op_inputs(rng, dtype=dtype)
    w = rtx.tensor(rng.standard_normal((40, 3)).astype(dtype))
    grads = []
    for f in (rtx.gatv2_scores, _composed):
        ins = [rtx.tensor(a, requires_grad=True) for a in (xl, xr, att, xe)]
        e = ins[3] if with_e else None
        out = f(ins[0], ins[1], ins[2], ei, 0.2, e) if f is _composed else \
            f(ins[0], ins[1], ins[2], ei, 0.2, e)
        (out * w).sum().backward()
        grads.append([t.grad.numpy() if t.grad is not None else None for t in ins])
    t = {"rtol": 2e-5, "atol": 2e-5} if dtype == np.float32 else tol(dtype)
    for a, b in zip(*grads, strict=True):
        if b is None:
            assert a is None
        else:
            np.testing.assert_allclose(a, b, **t)


@pytest.mark.parametrize("with_e", [False, True])
def test_op_gradcheck(with_e):
    rng = np.random.default_rng(2)
    xl, xr, att, xe, ei = _op_inputs(rng, n_src=4, n_dst=3, e=9, H=2, C=3)
    leaves = [rtx.tensor(a, requires_grad=True) for a in (xl, xr, att)]
    if with_e:
        leaves.append(rtx.tensor(xe[:9], requires_grad=True))
    assert gradcheck(lambda *a: rtx.gatv2_scores(a[0], a[1], a[2], ei, 0.2,
                                                 a[3] if with_e else None), leaves)


def test_op_only_needed_gradients():
    rng = np.random.default_rng(3)
    xl, xr, att, xe, ei = _op_inputs(rng)
    a = rtx.tensor(xl, requires_grad=True)
    out = rtx.gatv2_scores(a, rtx.tensor(xr), rtx.tensor(att), ei, 0.2, rtx.tensor(xe))
    out.sum().backward()
    ref_a = rtx.tensor(xl, requires_grad=True)
    _composed(ref_a, rtx.tensor(xr), rtx.tensor(att), ei, 0.2, rtx.tensor(xe)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ref_a.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype_", [np.float32, np.float64])
def test_op_bits_do_not_depend_on_threads(dtype_):
    rng = np.random.default_rng(4)
    xl, xr, att, xe, ei = _op_inputs(rng, n_src=300, n_dst=200, e=20000, H=2, C=8,
                                     dtype=dtype_)
    g = rng.standard_normal((20000, 2)).astype(dtype_)
    cpu = rtx.CpuBackend()
    ei = rtx.EdgeIndex(ei, 300, 200)
    old = set_segment_parallel_min(0)
    try:
        runs = []
        for T in (1, 2, 3):
            rtx.set_num_threads(T)
            runs.append([cpu.gatv2_scores(xl, xr, att, ei, 0.2, xe),
                         *cpu.gatv2_scores_backward(g, xl, xr, att, ei, 0.2, xe)])
    finally:
        set_segment_parallel_min(old)
    for run in runs[1:]:
        for a, b in zip(runs[0], run, strict=True):
            np.testing.assert_array_equal(bits(a), bits(b))


@pytest.mark.valgrind
@pytest.mark.parametrize("dtype_", [np.float32, np.float64])
@pytest.mark.parametrize("with_e", [False, True])
def test_op_bits_with_the_in_group_order_copies(dtype_, with_e):
    """From its second request an EdgeIndex hands the kernels the other side's
    indices in each grouping's order (``_in_group_order``), read in order instead
    of through ``perm``: the same bits as a fresh EdgeIndex per call, whose
    kernels read them through ``perm``."""
    rng = np.random.default_rng(9)
    xl, xr, att, xe, ei = _op_inputs(rng, n_src=300, n_dst=200, e=5000, H=2, C=8,
                                     dtype=dtype_)
    xe = xe if with_e else None
    g = rng.standard_normal((5000, 2)).astype(dtype_)
    cpu = rtx.CpuBackend()

    def run(fwd_plan, bwd_plan):
        return [cpu.gatv2_scores(xl, xr, att, fwd_plan, 0.2, xe),
                *cpu.gatv2_scores_backward(g, xl, xr, att, bwd_plan, 0.2, xe)]

    fresh = run(rtx.EdgeIndex(ei, 300, 200), rtx.EdgeIndex(ei, 300, 200))
    warm = rtx.EdgeIndex(ei, 300, 200)
    for _ in range(2):
        run(warm, warm)
    assert warm._in_group_order("dst") is not None and warm._in_group_order("src") is not None
    for a, b in zip(fresh, run(warm, warm), strict=True):
        if a is None:
            assert b is None
        else:
            np.testing.assert_array_equal(bits(a), bits(b))


def test_op_never_allocates_the_edge_sum():
    """Forward + backward working memory (rtx's allocator) stays far below one
    [E, H, C] buffer, with a warm EdgeIndex."""
    rng = np.random.default_rng(5)
    E, H, C = 200_000, 2, 16
    xl, xr, att, _, ei = _op_inputs(rng, n_src=1000, n_dst=1000, e=E, H=H, C=C,
                                    dtype=np.float32)
    edges = rtx.EdgeIndex(ei, 1000, 1000)
    edges.src.csr(), edges.dst.csr()
    a, b, c = (rtx.tensor(v, requires_grad=True) for v in (xl, xr, att))
    with rtx.use_backend(rtx.CpuBackend()):
        rtx.reset_peak_memory_stats()
        base = rtx.memory_stats()["current_bytes"]
        rtx.gatv2_scores(a, b, c, edges, 0.2).sum().backward()
        peak = rtx.memory_stats()["peak_bytes"] - base
    ehc = E * H * C * 4
    assert peak < ehc / 4, (peak, ehc)  # the scores + their gradient: [E, H] each


def test_op_empty_and_edge_cases(backend):
    rng = np.random.default_rng(6)
    xl, xr, att, _, _ = _op_inputs(rng)
    none = np.zeros((2, 0), np.int64)
    a = rtx.tensor(xl, requires_grad=True)
    out = rtx.gatv2_scores(a, rtx.tensor(xr), rtx.tensor(att), none, 0.2)
    assert out.shape == (0, 3)
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), 0)
    # slope 1: the plain sum; slope 0: ReLU
    _, _, _, _, ei = _op_inputs(rng)
    for s in (0.0, 1.0):
        got = rtx.gatv2_scores(rtx.tensor(xl), rtx.tensor(xr), rtx.tensor(att), ei, s)
        np.testing.assert_allclose(got.numpy(), gatv2_scores_ref(xl, xr, att, ei, s),
                                   rtol=1e-12, atol=1e-12)


def test_op_bad_input():
    rng = np.random.default_rng(7)
    xl, xr, att, xe, ei = _op_inputs(rng)
    L, R, A, X = (rtx.tensor(v) for v in (xl, xr, att, xe))
    with pytest.raises(ValueError, match=r"xl must be \[N_src, H, C\]"):
        rtx.gatv2_scores(L.reshape(7, 12), R, A, ei, 0.2)
    with pytest.raises(ValueError, match=r"xr must be \[N_dst, 3, 4\]"):
        rtx.gatv2_scores(L, R.reshape(5, 4, 3), A, ei, 0.2)
    with pytest.raises(ValueError, match=r"att must be \[3, 4\]"):
        rtx.gatv2_scores(L, R, A.reshape(1, 3, 4), ei, 0.2)
    with pytest.raises(ValueError, match=r"xe must be \[40, 3, 4\]"):
        rtx.gatv2_scores(L, R, A, ei, 0.2, X[:39])
    with pytest.raises(TypeError, match="dtype"):
        rtx.gatv2_scores(L, R.float(), A, ei, 0.2)
    with pytest.raises(TypeError, match="float32 or float64"):
        rtx.gatv2_scores(L.long(), R.long(), A.long(), ei, 0.2)
    with pytest.raises(TypeError, match="negative_slope"):
        rtx.gatv2_scores(L, R, A, ei, "0.2")
    with pytest.raises(ValueError, match="finite"):
        rtx.gatv2_scores(L, R, A, ei, float("nan"))
    bad = ei.copy()
    bad[1, 3] = 5  # N_dst = 5
    with pytest.raises(IndexError):
        rtx.gatv2_scores(L, R, A, bad, 0.2)
    with pytest.raises(ValueError, match="EdgeIndex was built for"):
        rtx.gatv2_scores(L, R, A, rtx.EdgeIndex(ei, 7, 6), 0.2)
    cpu = rtx.CpuBackend()
    with pytest.raises(ValueError, match="grad must be"):
        cpu.gatv2_scores_backward(np.zeros((40, 2)), xl, xr, att, rtx.EdgeIndex(ei, 7, 5), 0.2)


# ------------------------------------------------------------------- layer
def _graph(n=7, e=24, seed=0, loops=True):
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, size=(2, e))
    if loops:
        ei[:, :3] = [[1, 2, 2], [1, 2, 2]]  # existing (and repeated) self-loops
    return rng, ei


CONFIGS = {
    "concat": dict(heads=2),
    "mean": dict(heads=3, concat=False),
    "no-loops": dict(heads=2, add_self_loops=False),
    "slope": dict(heads=1, negative_slope=0.5),
    "no-bias": dict(heads=2, bias=False),
    "share": dict(heads=2, share_weights=True),
    "residual": dict(heads=2, residual=True),
    "edge-mean": dict(heads=2, edge_dim=3),
    "edge-add-res": dict(heads=2, edge_dim=3, fill_value="add", residual=True),
    "edge-max": dict(heads=2, edge_dim=3, fill_value="max"),
    "edge-min-mean": dict(heads=2, edge_dim=3, fill_value="min", concat=False),
    "edge-const": dict(heads=2, edge_dim=3, fill_value=0.5),
    "edge-array": dict(heads=1, edge_dim=3, fill_value=np.array([0.5, -1.0, 2.0])),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_values_match_reference(name, backend, dtype):
    kw = CONFIGS[name]
    rng, ei = _graph()
    x = rng.standard_normal((7, 5)).astype(dtype)
    rtx.manual_seed(1)
    conv = GATv2Conv(5, 4, **kw).to(dtype)
    attr = rng.standard_normal((ei.shape[1], 3)).astype(dtype) if "edge_dim" in kw else None
    out, (used, alpha) = conv(rtx.tensor(x), ei, None if attr is None else rtx.tensor(attr),
                              return_attention_weights=True)
    ref, ref_ei, ref_alpha = gatv2_ref(
        x, ei, conv.state_dict(), kw["heads"], 4, kw.get("concat", True),
        kw.get("negative_slope", 0.2), kw.get("add_self_loops", True), attr,
        kw.get("fill_value", "mean"), kw.get("share_weights", False))
    assert out.dtype == dtype and out.shape == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, **tol(dtype))
    np.testing.assert_array_equal(used, ref_ei)
    np.testing.assert_allclose(alpha.numpy(), ref_alpha, **tol(dtype))


def test_attention_sums_to_one_and_loops_are_appended():
    rng, ei = _graph()
    conv = GATv2Conv(5, 4, heads=2)
    _, (used, alpha) = conv(rtx.tensor(rng.standard_normal((7, 5)).astype(np.float32)), ei,
                            return_attention_weights=True)
    assert (used[:, -7:] == np.arange(7)).all() and (used[0, :-7] != used[1, :-7]).all()
    s = np.zeros((7, 2))
    np.add.at(s, used[1], alpha.numpy())
    np.testing.assert_allclose(s, 1.0, rtol=1e-5)


def test_bipartite_values_and_loops_up_to_min():
    """(x_src, x_dst): lin_l on the sources, lin_r on the targets; self-loops
    i -> i for i < min(N_src, N_dst) (PyG)."""
    rng = np.random.default_rng(2)
    xs, xd = rng.standard_normal((6, 5)), rng.standard_normal((4, 3))
    ei = np.stack([rng.integers(0, 6, 15), rng.integers(0, 4, 15)])
    for loops in (False, True):
        conv = GATv2Conv((5, 3), 4, heads=2, add_self_loops=loops, residual=True).double()
        out, (used, _) = conv((rtx.tensor(xs), rtx.tensor(xd)), ei,
                              return_attention_weights=True)
        ref, ref_ei, _ = gatv2_ref((xs, xd), ei, conv.state_dict(), 2, 4,
                                   add_self_loops=loops)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(used, ref_ei)
        if loops:
            assert (used[:, -4:] == np.arange(4)).all()


@pytest.mark.parametrize("name", ["concat", "mean", "share", "edge-add-res", "edge-max"])
def test_gradcheck(name):
    kw = CONFIGS[name]
    rng, ei = _graph(n=5, e=12, seed=3)
    conv = GATv2Conv(3, 2, **kw).double()
    x = rtx.tensor(rng.standard_normal((5, 3)))
    if "edge_dim" in kw:
        attr = rtx.tensor(rng.standard_normal((12, 3)))
        assert gradcheck_module(conv, [x, attr], lambda m, x, a: m(x, ei, a))
    else:
        assert gradcheck_module(conv, [x], lambda m, x: m(x, ei))


def test_gradcheck_bipartite():
    rng = np.random.default_rng(4)
    xs, xd = rtx.tensor(rng.standard_normal((5, 3))), rtx.tensor(rng.standard_normal((4, 2)))
    ei = np.stack([rng.integers(0, 5, 12), rng.integers(0, 4, 12)])
    conv = GATv2Conv((3, 2), 2, heads=2, add_self_loops=False, residual=True).double()
    assert gradcheck_module(conv, [xs, xd], lambda m, a, b: m((a, b), ei))


def test_state_dict_keys_init_and_numpy_load():
    assert list(GATv2Conv(5, 4).state_dict()) == PYG_KEYS["default"]
    assert list(GATv2Conv(5, 4, edge_dim=2, residual=True).state_dict()) == PYG_KEYS["edge+res"]
    assert list(GATv2Conv(5, 4, bias=False).state_dict()) == PYG_KEYS["no-bias"]
    shared = GATv2Conv(5, 4, share_weights=True)
    assert shared.lin_r is shared.lin_l and list(shared.state_dict()) == PYG_KEYS["default"]
    assert len(list(shared.parameters())) == 4  # att, bias, lin_l.weight, lin_l.bias
    rtx.manual_seed(0)
    conv = GATv2Conv(200, 50, heads=2)
    assert np.abs(conv.bias.numpy()).max() == 0
    for w, b in ((conv.lin_l.weight, np.sqrt(6 / 300)), (conv.att, np.sqrt(6 / 52)),
                 (conv.lin_l.bias, 1 / np.sqrt(200))):
        assert 0.9 * b < np.abs(w.numpy()).max() <= b
    rng, ei = _graph(seed=5)
    H, C, F, D = 2, 3, 5, 2
    sd = {"att": rng.standard_normal((1, H, C)), "bias": rng.standard_normal(H * C),
          "lin_l.weight": rng.standard_normal((H * C, F)), "lin_l.bias": rng.standard_normal(H * C),
          "lin_r.weight": rng.standard_normal((H * C, F)), "lin_r.bias": rng.standard_normal(H * C),
          "lin_edge.weight": rng.standard_normal((H * C, D)),
          "res.weight": rng.standard_normal((H * C, F))}
    conv = GATv2Conv(F, C, heads=H, edge_dim=D, residual=True).double()
    conv.load_state_dict(sd)
    x, attr = rng.standard_normal((7, F)), rng.standard_normal((24, D))
    ref, _, _ = gatv2_ref(x, ei, sd, H, C, edge_attr=attr)
    np.testing.assert_allclose(conv(rtx.tensor(x), ei, rtx.tensor(attr)).numpy(), ref,
                               rtol=1e-12, atol=1e-12)


def test_dropout_only_in_training():
    rng, ei = _graph(seed=6)
    x = rtx.tensor(rng.standard_normal((7, 5)))
    conv = GATv2Conv(5, 4, heads=2, dropout=0.5).double()
    conv.eval()
    ref, _, _ = gatv2_ref(x.numpy(), ei, conv.state_dict(), 2, 4)
    np.testing.assert_allclose(conv(x, ei).numpy(), ref, rtol=1e-12, atol=1e-12)
    conv.train()
    _, (_, alpha) = conv(x, ei, return_attention_weights=True)
    a = alpha.numpy()
    assert (a == 0).any() and a.max() > 1.0 - 1e-12  # dropped, the kept ones scaled by 2


def test_hetero_conv_takes_it():
    rng = np.random.default_rng(7)
    x = {"a": rtx.tensor(rng.standard_normal((5, 3))), "b": rtx.tensor(rng.standard_normal((4, 2)))}
    eab = np.stack([rng.integers(0, 5, 9), rng.integers(0, 4, 9)])
    eaa = rng.integers(0, 5, (2, 8))
    hc = HeteroConv({("a", "to", "b"): GATv2Conv((3, 2), 4, add_self_loops=False),
                     ("a", "self", "a"): GATv2Conv(3, 4)}).double()
    out = hc(x, {("a", "to", "b"): eab, ("a", "self", "a"): eaa})
    sd = hc.state_dict()
    r_ab = {k.split(".", 2)[2]: v for k, v in sd.items() if k.startswith("convs.<a___to___b>")}
    ref, _, _ = gatv2_ref((x["a"].numpy(), x["b"].numpy()), eab, r_ab, 1, 4,
                          add_self_loops=False)
    np.testing.assert_allclose(out["b"].numpy(), ref, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="add_self_loops"):
        HeteroConv({("a", "to", "b"): GATv2Conv((3, 2), 4)})


def test_repr_is_pygs():
    assert repr(GATv2Conv(16, 8, heads=4)) == "GATv2Conv(16, 8, heads=4)"
    assert repr(GATv2Conv((-1, -1), 8)) == "GATv2Conv((-1, -1), 8, heads=1)"


def test_bad_input_is_rejected():
    rng, ei = _graph()
    x = rtx.tensor(rng.standard_normal((7, 5)).astype(np.float32))
    for kw, match in ((dict(heads=0), "heads"), (dict(heads=1.5), "heads"),
                      (dict(dropout=1.0), "dropout"), (dict(fill_value="mul"), "fill_value"),
                      (dict(fill_value=True), "fill_value"),
                      (dict(edge_dim=3, fill_value=np.zeros(2)), "edge_dim=3"),
                      (dict(edge_dim=0), "edge_dim")):
        with pytest.raises(ValueError, match=match):
            GATv2Conv(5, 4, **kw)
    with pytest.raises(ValueError, match="out_channels"):
        GATv2Conv(5, 0)
    with pytest.raises(ValueError, match="in_channels"):
        GATv2Conv(-3, 4)
    conv = GATv2Conv(5, 4, edge_dim=3)
    with pytest.raises(ValueError, match="pass edge_attr"):
        conv(x, ei)
    with pytest.raises(ValueError, match=r"edge_attr must have shape \[24, 3\]"):
        conv(x, ei, rtx.ones(23, 3))
    with pytest.raises(TypeError, match="edge_attr must be an rtx.Tensor"):
        conv(x, ei, np.ones((24, 3), np.float32))
    with pytest.raises(ValueError, match="no edge_dim"):
        GATv2Conv(5, 4)(x, ei, rtx.ones(24, 3))
    with pytest.raises(ValueError, match=r"x must have shape \[num_nodes, 5\]"):
        GATv2Conv(5, 4)(rtx.ones(7, 6), ei)
    with pytest.raises(ValueError, match="x_dst is required"):
        GATv2Conv((5, 3), 4, add_self_loops=False)((x, None), ei)
    with pytest.raises(ValueError, match=r"x_dst must have shape \[num_nodes, 3\]"):
        GATv2Conv((5, 3), 4, add_self_loops=False)((x, x), ei)
    with pytest.raises(IndexError):
        GATv2Conv(5, 4)(x, np.array([[0, 7], [1, 1]]))
    # a str fill for loops that some targets (>= min(N_src, N_dst)) do not get
    xs, xd = rtx.ones(3, 5), rtx.ones(6, 5)
    with pytest.raises(ValueError, match="min"):
        GATv2Conv(5, 4, edge_dim=1)((xs, xd), np.array([[0, 1], [5, 1]]), rtx.ones(2, 1))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_pyg_values_attention_and_gradients(name):
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    kw = dict(CONFIGS[name])
    if isinstance(kw.get("fill_value"), np.ndarray):
        kw_t = {**kw, "fill_value": torch.from_numpy(kw["fill_value"])}
    else:
        kw_t = kw
    rng, ei = _graph(seed=8)
    x = rng.standard_normal((7, 5))
    attr = rng.standard_normal((ei.shape[1], 3))
    torch.manual_seed(0)
    ref = pyg.GATv2Conv(5, 4, **kw_t).double()
    sd = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    conv = GATv2Conv(5, 4, **kw).double()
    assert list(conv.state_dict()) == list(sd)
    conv.load_state_dict(sd)
    xt, at = torch.tensor(x, requires_grad=True), torch.tensor(attr, requires_grad=True)
    extra = (at,) if "edge_dim" in kw else ()
    yt, (et, alt) = ref(xt, torch.from_numpy(ei), *extra, return_attention_weights=True)
    w = rng.standard_normal(yt.shape)
    (yt * torch.from_numpy(w)).sum().backward()
    xr, ar = rtx.tensor(x, requires_grad=True), rtx.tensor(attr, requires_grad=True)
    yr, (er, alr) = conv(xr, ei, *((ar,) if extra else ()), return_attention_weights=True)
    (yr * rtx.tensor(w)).sum().backward()
    np.testing.assert_array_equal(er, et.numpy())
    np.testing.assert_allclose(yr.numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(alr.numpy(), alt.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    if extra:
        np.testing.assert_allclose(ar.grad.numpy(), at.grad.numpy(), rtol=1e-10, atol=1e-12)
    params = dict(conv.named_parameters())
    for n, p in ref.named_parameters():
        np.testing.assert_allclose(params[n].grad.numpy(), p.grad.numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=n)


def test_matches_pyg_bipartite_float32():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    rng = np.random.default_rng(9)
    xs = rng.standard_normal((6, 5)).astype(np.float32)
    xd = rng.standard_normal((4, 3)).astype(np.float32)
    ei = np.stack([rng.integers(0, 6, 15), rng.integers(0, 4, 15)])
    ref = pyg.GATv2Conv((5, 3), 4, heads=2, residual=True)
    conv = GATv2Conv((5, 3), 4, heads=2, residual=True)
    conv.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    a, b = torch.tensor(xs, requires_grad=True), torch.tensor(xd, requires_grad=True)
    yt = ref((a, b), torch.from_numpy(ei))
    yt.pow(2).sum().backward()
    ra, rb = rtx.tensor(xs, requires_grad=True), rtx.tensor(xd, requires_grad=True)
    yr = conv((ra, rb), ei)
    (yr * yr).sum().backward()
    np.testing.assert_allclose(yr.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ra.grad.numpy(), a.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rb.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4)
