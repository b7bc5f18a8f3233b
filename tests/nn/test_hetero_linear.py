"""``rtx.segment_matmul`` (the grouped matmul kernel) beyond op_db's samples, and
``HeteroLinear`` / ``HeteroDictLinear`` against PyG with copied weights."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import bits, tol

import rtx
from rtx._kernels import set_grouped_parallel_min
from rtx.autograd import gradcheck
from rtx.nn import HeteroDictLinear, HeteroLinear
from rtx.nn.lazy import has_uninitialized_params


def _ref(x, t, w):
    return np.einsum("nk,nkm->nm", x, w[t])


# ------------------------------------------------------------------ the op
@pytest.mark.parametrize("order", ["random", "sorted"])  # the kernel / the per-type GEMMs
@pytest.mark.parametrize("K,M", [(1, 1), (5, 3), (33, 17), (64, 64)])
def test_values_and_gradients_match_numpy(backend, dtype, K, M, order):
    rng = np.random.default_rng(K)
    N, T = 300, 5
    x = rng.standard_normal((N, K)).astype(dtype)
    w = rng.standard_normal((T, K, M)).astype(dtype)
    t = rng.integers(0, T, N)
    t[t == 3] = 1  # an empty type
    if order == "sorted":
        t = np.sort(t)
    g = rng.standard_normal((N, M)).astype(dtype)
    X, W = rtx.tensor(x, requires_grad=True), rtx.tensor(w, requires_grad=True)
    out = rtx.segment_matmul(X, t, W)
    assert out.dtype == dtype and out.shape == (N, M)
    # float32: sums of up to 64 products of normals, against float64 references
    t_ = {"rtol": 1e-4, "atol": 1e-4} if dtype == np.float32 else tol(dtype)
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    np.testing.assert_allclose(out.numpy(), _ref(x64, t, w64), **t_)
    (out * rtx.tensor(g)).sum().backward()
    gw = np.zeros_like(w64)
    np.add.at(gw, t, x64[:, :, None] * g64[:, None, :])
    np.testing.assert_allclose(X.grad.numpy(), np.einsum("nm,nkm->nk", g64, w64[t]), **t_)
    np.testing.assert_allclose(W.grad.numpy(), gw, **t_)
    np.testing.assert_array_equal(W.grad.numpy()[3], 0)


@pytest.mark.parametrize("K,M", [(16, 16), (33, 17), (64, 64)])
def test_gathered_gemms_match_numpy_and_the_row_kernels(dtype, K, M, monkeypatch):
    # unsorted types, wide blocks and >= 256 rows per type: the rows gathered into
    # type order, one GEMM per type, gathered back (an empty type among them)
    import rtx.backend.grouped as grouped

    rng = np.random.default_rng(K + M)
    N, T = 3000, 5
    x = rng.standard_normal((N, K)).astype(dtype)
    w = rng.standard_normal((T, K, M)).astype(dtype)
    t = rng.integers(0, T, N)
    t[t == 3] = 1
    g = rng.standard_normal((N, M)).astype(dtype)
    plan = rtx.IndexPlan(t, T)
    assert grouped._gathered_blocks(plan, K, M) is not None
    cpu = rtx.CpuBackend()
    got = [cpu.segment_matmul(x, plan, w), *cpu.segment_matmul_backward(g, x, plan, w)]
    # one side only: the same bits
    gx, gw1 = cpu.segment_matmul_backward(g, x, plan, w, need_weight=False)
    assert gw1 is None
    np.testing.assert_array_equal(bits(gx), bits(got[1]))
    gx1, gw = cpu.segment_matmul_backward(g, x, plan, w, need_x=False)
    assert gx1 is None
    np.testing.assert_array_equal(bits(gw), bits(got[2]))
    monkeypatch.setattr(grouped, "GEMM_MIN_WIDTH", 1 << 30)     # the row kernels
    rows = [cpu.segment_matmul(x, plan, w), *cpu.segment_matmul_backward(g, x, plan, w)]
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    gw = np.zeros_like(w64)
    np.add.at(gw, t, x64[:, :, None] * g64[:, None, :])
    want = [_ref(x64, t, w64), np.einsum("nm,nkm->nk", g64, w64[t]), gw]
    t_ = {"rtol": 1e-4, "atol": 1e-3} if dtype == np.float32 else tol(dtype)
    for a, b, r in zip(got, rows, want, strict=True):
        np.testing.assert_allclose(a, r, **t_)
        np.testing.assert_allclose(a, b, **t_)
    np.testing.assert_array_equal(got[2][3], 0)


def test_gathered_gemms_bits_do_not_depend_on_threads():
    rng = np.random.default_rng(3)
    N, K, M, T = 40_000, 64, 48, 6
    x = rng.standard_normal((N, K)).astype(np.float32)
    w = rng.standard_normal((T, K, M)).astype(np.float32)
    g = rng.standard_normal((N, M)).astype(np.float32)
    plan = rtx.IndexPlan(rng.integers(0, T, N), T)
    cpu = rtx.CpuBackend()
    runs = []
    for n in (1, 2, 3):
        rtx.set_num_threads(n)
        runs.append([cpu.segment_matmul(x, plan, w),
                     *cpu.segment_matmul_backward(g, x, plan, w)])
    for run in runs[1:]:
        for a, b in zip(runs[0], run, strict=True):
            np.testing.assert_array_equal(bits(a), bits(b))


def test_the_grouping_ranks_invert_the_permutation():
    t = np.random.default_rng(4).integers(0, 7, 1000)
    plan = rtx.IndexPlan(t, 7)
    _, perm = plan.csr()
    r = plan._grouping_ranks()
    np.testing.assert_array_equal(r[perm], np.arange(1000))
    assert r is plan._grouping_ranks() and not r.flags.writeable


def test_gradcheck_unsorted_types_and_one_side():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((9, 4)), rng.standard_normal((3, 4, 2))
    t = np.array([2, 0, 1, 2, 2, 0, 1, 0, 2])
    assert gradcheck(lambda a, b: rtx.segment_matmul(a, t, b),
                     [rtx.tensor(x, requires_grad=True), rtx.tensor(w, requires_grad=True)])
    X = rtx.tensor(x, requires_grad=True)
    rtx.segment_matmul(X, rtx.IndexPlan(t, 3), rtx.tensor(w)).sum().backward()
    np.testing.assert_allclose(X.grad.numpy(), w[t].sum(-1), rtol=1e-12)


@pytest.mark.parametrize("dtype_", [np.float32, np.float64])
def test_bits_do_not_depend_on_threads(dtype_):
    rng = np.random.default_rng(2)
    N, K, M, T = 5000, 24, 10, 6
    x = rng.standard_normal((N, K)).astype(dtype_)
    w = rng.standard_normal((T, K, M)).astype(dtype_)
    g = rng.standard_normal((N, M)).astype(dtype_)
    plan = rtx.IndexPlan(rng.integers(0, T, N), T)
    cpu = rtx.CpuBackend()
    old = set_grouped_parallel_min(0)
    try:
        runs = []
        for n in (1, 2, 3):
            rtx.set_num_threads(n)
            runs.append([cpu.segment_matmul(x, plan, w),
                         *cpu.segment_matmul_backward(g, x, plan, w)])
    finally:
        set_grouped_parallel_min(old)
    for run in runs[1:]:
        for a, b in zip(runs[0], run, strict=True):
            np.testing.assert_array_equal(bits(a), bits(b))


def test_bad_input_is_rejected_before_anything_is_written():
    x = rtx.ones(4, 3)
    w = rtx.ones(2, 3, 5)
    with pytest.raises(IndexError):
        rtx.segment_matmul(x, [0, 1, 2, 0], w)
    with pytest.raises(ValueError, match="len"):
        rtx.segment_matmul(x, [0, 1], w)
    with pytest.raises(ValueError, match=r"weight must be \[T, 3, M\]"):
        rtx.segment_matmul(x, [0, 1, 1, 0], rtx.ones(2, 4, 5))
    with pytest.raises(ValueError, match="IndexPlan was checked against"):
        rtx.segment_matmul(x, rtx.IndexPlan([0, 1, 1, 0], 3), w)
    cpu = rtx.CpuBackend()
    with pytest.raises(TypeError, match="IndexPlan"):
        cpu.segment_matmul(np.ones((4, 3), np.float32), np.array([0, 1, 1, 0]),
                           np.ones((2, 3, 5), np.float32))
    with pytest.raises(ValueError, match="grad must be"):
        cpu.segment_matmul_backward(np.ones((4, 4), np.float32), np.ones((4, 3), np.float32),
                                    rtx.IndexPlan([0, 1, 1, 0], 2),
                                    np.ones((2, 3, 5), np.float32))


# ------------------------------------------------------------- HeteroLinear
def _copy(torch_module):
    return {k: v.detach().numpy() for k, v in torch_module.state_dict().items()}


@pytest.mark.parametrize("kw", [{}, {"bias": False}, {"is_sorted": True}])
def test_hetero_linear_matches_pyg(kw):
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    rng = np.random.default_rng(3)
    N, T = 40, 4
    t = rng.integers(0, T, N)
    if kw.get("is_sorted"):
        t = np.sort(t)
    x = rng.standard_normal((N, 6))
    torch.manual_seed(0)
    ref = pyg.HeteroLinear(6, 5, T, **kw).double()
    xt = torch.from_numpy(x).requires_grad_()
    want = ref(xt, torch.from_numpy(t))
    m = HeteroLinear(6, 5, T, **kw).double()
    sd = _copy(ref)
    assert list(m.state_dict()) == list(sd)
    m.load_state_dict(sd)
    xr = rtx.tensor(x, requires_grad=True)
    got = m(xr, t)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(got.shape)
    (want * torch.from_numpy(g)).sum().backward()
    (got * rtx.tensor(g)).sum().backward()
    np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(dict(m.named_parameters())[name].grad.numpy(),
                                   p.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda a: m(a, t[:8]), [rtx.tensor(x[:8], requires_grad=True)])


def test_hetero_linear_init_lazy_and_errors():
    rtx.manual_seed(0)
    m = HeteroLinear(200, 50, 3)
    assert m.weight.shape == (3, 200, 50) and m.bias.shape == (3, 50)
    b = 1 / np.sqrt(200)  # PyG: kaiming_uniform(fan=in, a=sqrt(5)) = U(+-1/sqrt(in))
    assert 0.9 * b < np.abs(m.weight.numpy()).max() <= b
    assert 0.9 * b < np.abs(m.bias.numpy()).max() <= b
    g = HeteroLinear(200, 50, 3, weight_initializer="glorot", bias_initializer="zeros")
    assert np.abs(g.weight.numpy()).max() <= np.sqrt(6 / 250)
    np.testing.assert_array_equal(g.bias.numpy(), 0)
    lazy = HeteroLinear(-1, 4, 2)
    assert has_uninitialized_params(lazy)
    x = rtx.randn(5, 3)
    lazy(x, [0, 1, 1, 0, 1])
    assert lazy.weight.shape == (2, 3, 4) and not has_uninitialized_params(lazy)
    fresh = HeteroLinear(-1, 4, 2)
    fresh.load_state_dict(lazy.state_dict())  # sized by the checkpoint
    t = np.array([1, 1, 0, 0, 1])
    np.testing.assert_array_equal(fresh(x, t).numpy(), lazy(x, t).numpy())
    with pytest.raises(ValueError, match=r"x must be \[N, 3\]"):
        lazy(rtx.randn(5, 4), t)
    with pytest.raises(IndexError):
        lazy(x, [0, 1, 2, 0, 1])
    with pytest.raises(ValueError, match="num_types"):
        HeteroLinear(3, 4, 0)
    with pytest.raises(ValueError, match="in_channels"):
        HeteroLinear(-3, 4, 2)


# --------------------------------------------------------- HeteroDictLinear
@pytest.mark.parametrize("chans", [{"a": 6, "b": 6, "c": 6}, {"a": 6, "b": 3, "c": 6}, 6])
def test_hetero_dict_linear_matches_pyg(chans):
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    rng = np.random.default_rng(4)
    widths = chans if isinstance(chans, dict) else dict.fromkeys("abc", chans)
    types = None if isinstance(chans, dict) else ["a", "b", "c"]
    x = {k: rng.standard_normal((n, widths[k])) for k, n in zip("abc", (7, 0, 5), strict=True)}
    torch.manual_seed(0)
    ref = pyg.HeteroDictLinear(chans, 4, types=types).double()
    xt = {k: torch.from_numpy(v).requires_grad_() for k, v in x.items()}
    want = ref(xt)
    m = HeteroDictLinear(chans, 4, types=types).double()
    sd = _copy(ref)
    assert sorted(m.state_dict()) == sorted(sd)
    m.load_state_dict(sd)
    xr = {k: rtx.tensor(v, requires_grad=True) for k, v in x.items()}
    got = m(xr)
    assert set(got) == set(want)
    gs = {k: rng.standard_normal(tuple(v.shape)) for k, v in want.items()}
    sum((want[k] * torch.from_numpy(gs[k])).sum() for k in want).backward()
    sum(((got[k] * rtx.tensor(gs[k])).sum() for k in got), rtx.tensor(0.0)).backward()
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].detach().numpy(), rtol=1e-12,
                                   atol=1e-12)
        np.testing.assert_allclose(xr[k].grad.numpy(), xt[k].grad.numpy(), rtol=1e-12,
                                   atol=1e-12)
    params = dict(m.named_parameters())
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(params[name].grad.numpy(), p.grad.numpy(), rtol=1e-12,
                                   atol=1e-12)


def test_hetero_dict_linear_lazy_and_errors():
    m = HeteroDictLinear({"a": -1, "b": -1}, 3)
    out = m({"a": rtx.randn(4, 5), "b": rtx.randn(2, 2)})
    assert out["a"].shape == (4, 3) and out["b"].shape == (2, 3)
    assert m.lins["a"].weight.shape == (3, 5) and m.lins["b"].weight.shape == (3, 2)
    with pytest.raises(ValueError, match="types"):
        HeteroDictLinear(4, 3)
    with pytest.raises(ValueError, match="do not match"):
        HeteroDictLinear({"a": 4}, 3, types=["b"])
    with pytest.raises(ValueError, match=r"x_dict\['a'\] must be \[N, 5\]"):
        m({"a": rtx.randn(4, 6)})
