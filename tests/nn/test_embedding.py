"""rtx.nn.Embedding, its row-sparse gradient and rtx.optim.SparseAdam, against numpy
references (float64), the dense path (gradchecks) and, where PyTorch is installed (an
optional anchor, not a test requirement), torch with copied weights."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
from rtx.autograd import gradcheck
from rtx.nn import Embedding
from rtx.nn import functional as F


def _weights(n: int, d: int, padding_idx=None, seed=0) -> np.ndarray:
    w = np.random.default_rng(seed).normal(size=(n, d))
    if padding_idx is not None:
        w[padding_idx] = 0
    return w


def _embedding(w: np.ndarray, padding_idx=None, sparse=False) -> Embedding:
    """An rtx Embedding holding a copy of the float64 weights w."""
    e = Embedding(*w.shape, padding_idx=padding_idx, sparse=sparse, dtype=np.float64)
    with rtx.no_grad():
        e.weight.copy_(rtx.tensor(w))
    return e


def _torch_embedding(w: np.ndarray, padding_idx=None, sparse=False):
    torch = pytest.importorskip("torch")
    t = torch.nn.Embedding(*w.shape, padding_idx=padding_idx, sparse=sparse, dtype=torch.float64)
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(w))
    return t


# -------------------------------------------------------- numpy references
def _ref_dense_grad(n: int, idx: np.ndarray, gout: np.ndarray, padding_idx=None) -> np.ndarray:
    """d(sum(gout * w[idx]))/dw: repeated rows accumulate; the padding row gets none."""
    g = np.zeros((n, gout.shape[-1]))
    flat = idx.reshape(-1)
    np.add.at(g, flat, gout.reshape(len(flat), -1))
    if padding_idx is not None:
        g[padding_idx % n] = 0
    return g


def _ref_sparse_grad(n, idx, gout, padding_idx=None) -> tuple[np.ndarray, np.ndarray]:
    """The coalesced row-sparse gradient: sorted distinct rows (padding row left out)
    as a (1, nnz) index array, and their summed values."""
    dense = _ref_dense_grad(n, idx, gout, padding_idx)
    rows = np.unique(idx.reshape(-1))
    if padding_idx is not None:
        rows = rows[rows != padding_idx % n]
    return rows[None, :], dense[rows]


class _RefSparseAdam:
    """torch.optim.SparseAdam's update (torch/optim/sparse_adam.py), transcribed in
    numpy: only the rows present in the gradient move, their moments included."""

    def __init__(self, w, lr, betas, eps, maximize=False):
        self.w, self.lr, self.betas, self.eps, self.maximize = w, lr, betas, eps, maximize
        self.m, self.v, self.step_count = np.zeros_like(w), np.zeros_like(w), 0

    def step(self, rows: np.ndarray, values: np.ndarray) -> None:
        b1, b2 = self.betas
        g = -values if self.maximize else values
        self.step_count += 1
        old_m, old_v = self.m[rows], self.v[rows]
        m_upd = (g - old_m) * (1 - b1)
        v_upd = (g ** 2 - old_v) * (1 - b2)
        self.m[rows] += m_upd
        self.v[rows] += v_upd
        numer = m_upd + old_m
        denom = np.sqrt(v_upd + old_v) + self.eps
        t = self.step_count
        step_size = self.lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        self.w[rows] += -step_size * (numer / denom)


# ----------------------------------------------------------------- module
def test_init_is_standard_normal_with_zero_padding_row():
    rtx.manual_seed(0)
    e = Embedding(2000, 32, padding_idx=-3)
    w = e.weight.numpy()
    assert e.padding_idx == 1997 and e.weight.shape == (2000, 32) and e.weight.requires_grad
    assert not w[1997].any()
    rest = np.delete(w, 1997, axis=0)
    assert abs(rest.mean()) < 0.01 and abs(rest.std() - 1) < 0.01
    assert repr(e) == "Embedding(2000, 32, padding_idx=1997)"
    assert [n for n, _ in e.named_parameters()] == ["weight"]


def test_from_pretrained_freezes_and_shares():
    w = rtx.tensor(np.arange(6.0).reshape(3, 2))
    e = Embedding.from_pretrained(w)
    assert not e.weight.requires_grad and e.weight.shape == (3, 2)
    np.testing.assert_array_equal(e([2, 0]).numpy(), [[4, 5], [0, 1]])
    assert Embedding.from_pretrained(w, freeze=False).weight.requires_grad


@pytest.mark.parametrize("bad, exc", [
    (dict(num_embeddings=-1, embedding_dim=2), ValueError),
    (dict(num_embeddings=3, embedding_dim=2, padding_idx=3), ValueError),
    (dict(num_embeddings=3, embedding_dim=2, padding_idx=-4), ValueError),
    (dict(num_embeddings=3, embedding_dim=2, padding_idx=1.0), TypeError),
    (dict(num_embeddings=3, embedding_dim=2, sparse="yes"), TypeError),
])
def test_bad_arguments(bad, exc):
    with pytest.raises(exc):
        Embedding(**bad)


def test_bad_indices_raise_before_anything():
    e = Embedding(4, 2)
    before = e.weight.numpy().copy()
    with pytest.raises(IndexError):
        e([0, 4])
    with pytest.raises(IndexError):
        e(np.array([[-1]]))
    with pytest.raises(TypeError):
        e(np.array([0.0]))
    with pytest.raises(TypeError):
        e(rtx.tensor([0.0, 1.0]))
    np.testing.assert_array_equal(e.weight.numpy(), before)


# ------------------------------------------------------------ dense path
@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_forward_and_dense_grad_match_numpy(backend, padding_idx):
    w = _weights(6, 3, padding_idx)
    e = _embedding(w, padding_idx)
    idx = np.array([[2, 0, 5], [5, 2, 2]])
    out = e(rtx.tensor(idx))
    np.testing.assert_array_equal(out.numpy(), w[idx])
    gw = np.random.default_rng(1).normal(size=out.shape)
    out.backward(rtx.tensor(gw))
    assert not getattr(e.weight.grad, "is_sparse", False)
    np.testing.assert_allclose(e.weight.grad.numpy(), _ref_dense_grad(6, idx, gw, padding_idx),
                               rtol=1e-12)


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_forward_and_dense_grad_match_torch(padding_idx):
    w = _weights(6, 3, padding_idx)
    t = _torch_embedding(w, padding_idx)
    import torch

    e = _embedding(w, padding_idx)
    idx = np.array([[2, 0, 5], [5, 2, 2]])
    out = e(rtx.tensor(idx))
    ref = t(torch.from_numpy(idx))
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=0, atol=0)
    gw = np.random.default_rng(1).normal(size=ref.shape)
    out.backward(rtx.tensor(gw))
    ref.backward(torch.from_numpy(gw))
    np.testing.assert_allclose(e.weight.grad.numpy(), t.weight.grad.numpy(), rtol=1e-12)


def test_dense_gradcheck_any_index_shape():
    w = rtx.tensor(np.random.default_rng(2).normal(size=(5, 3)), requires_grad=True)
    for idx in (np.array([[4, 0], [4, 4]]), np.array([1]), np.zeros((2, 0), np.int64)):
        assert gradcheck(lambda w, idx=idx: F.embedding(idx, w), [w])


# ----------------------------------------------------------- sparse path
def _coalesced(g) -> tuple[np.ndarray, np.ndarray]:
    g = g.coalesce()
    return g.indices().numpy(), g.values().numpy()


@pytest.mark.parametrize("padding_idx", [None, 3])
def test_sparse_grad_matches_numpy(backend, padding_idx):
    w = _weights(50, 4, padding_idx)
    e = _embedding(w, padding_idx, sparse=True)
    idx = np.array([7, 3, 7, 40, 3, 3, 0])
    gw = np.random.default_rng(3).normal(size=(len(idx), 4))
    e(idx).backward(rtx.tensor(gw))
    g = e.weight.grad
    assert g.is_sparse and g.is_coalesced() and g.shape == (50, 4) and g.layout == "sparse_coo"
    ri, rv = _ref_sparse_grad(50, idx, gw, padding_idx)
    np.testing.assert_array_equal(g._indices().numpy(), ri)
    np.testing.assert_allclose(g._values().numpy(), rv, rtol=1e-12)
    assert g._values().shape == (g._nnz(), 4)  # only the batch's rows are held
    # the same gradient as the dense path
    d = _embedding(w, padding_idx)
    d(idx).backward(rtx.tensor(gw))
    np.testing.assert_allclose(g.to_dense().numpy(), d.weight.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("padding_idx", [None, 3])
def test_sparse_grad_matches_torch(padding_idx):
    w = _weights(50, 4, padding_idx)
    t = _torch_embedding(w, padding_idx, sparse=True)
    import torch

    e = _embedding(w, padding_idx, sparse=True)
    idx = np.array([7, 3, 7, 40, 3, 3, 0])
    gw = np.random.default_rng(3).normal(size=(len(idx), 4))
    e(idx).backward(rtx.tensor(gw))
    t(torch.from_numpy(idx)).backward(torch.from_numpy(gw))
    ti, tv = _coalesced(t.weight.grad)
    np.testing.assert_array_equal(e.weight.grad._indices().numpy(), ti)
    np.testing.assert_allclose(e.weight.grad._values().numpy(), tv, rtol=1e-12)


def test_sparse_grad_accumulates_over_two_backwards(backend):
    w = _weights(20, 3)
    e = _embedding(w, sparse=True)
    ref = np.zeros_like(w)
    for idx, k in ((np.array([1, 5, 1]), 1.0), (np.array([5, 9]), -2.5)):
        (e(idx) * k).sum().backward()
        ref += _ref_dense_grad(20, idx, np.full((len(idx), 3), k))
    g = e.weight.grad
    assert g.is_sparse
    np.testing.assert_array_equal(g.indices().numpy(), [[1, 5, 9]])
    np.testing.assert_allclose(g.values().numpy(), ref[[1, 5, 9]], rtol=1e-12)


def test_sparse_and_dense_use_of_one_weight_sum_densely():
    e = _embedding(_weights(8, 2), sparse=True)
    idx = np.array([3, 3, 6])
    (e(idx).sum() + (e.weight * 2).sum()).backward()
    g = e.weight.grad
    assert not getattr(g, "is_sparse", False)
    ref = np.full((8, 2), 2.0)
    ref[3] += 2
    ref[6] += 1
    np.testing.assert_allclose(g.numpy(), ref, rtol=1e-12)
    # a dense gradient, then a sparse one: dense as well
    e.weight.grad = None
    (e.weight * 3).sum().backward()
    e(idx).sum().backward()
    np.testing.assert_allclose(e.weight.grad.numpy(), ref + 1)


def test_sparse_grad_through_a_computed_weight_is_dense():
    w = rtx.tensor(np.random.default_rng(4).normal(size=(6, 2)), requires_grad=True)
    F.embedding([1, 1, 4], w * 2, sparse=True).sum().backward()
    ref = np.zeros((6, 2))
    ref[1], ref[4] = 4, 2
    np.testing.assert_allclose(w.grad.numpy(), ref)


def test_autograd_grad_returns_the_sparse_gradient():
    e = Embedding(5, 2, sparse=True)
    (g,) = rtx.autograd.grad(e([4, 0, 4]).sum(), [e.weight])
    assert g.is_sparse and g.indices().numpy().tolist() == [[0, 4]]
    np.testing.assert_allclose(g.values().numpy(), [[1, 1], [2, 2]])
    assert e.weight.grad is None


def test_zero_grad_keeps_or_drops_a_sparse_grad():
    e = Embedding(5, 2, sparse=True)
    e([1]).sum().backward()
    e.zero_grad(set_to_none=False)
    assert e.weight.grad.is_sparse and e.weight.grad._nnz() == 0
    e([2]).sum().backward()
    assert e.weight.grad.indices().numpy().tolist() == [[2]]
    e.zero_grad()
    assert e.weight.grad is None


def test_a_sparse_grad_pickles_and_deep_copies():
    import copy
    import pickle

    e = Embedding(6, 2, sparse=True)
    e([5, 1, 5]).sum().backward()
    for g in (copy.deepcopy(e.weight.grad), pickle.loads(pickle.dumps(e.weight.grad)),
              copy.deepcopy(e.weight).grad):
        assert g.is_sparse and g.indices().numpy().tolist() == [[1, 5]]
        np.testing.assert_array_equal(g.to_dense().numpy(), e.weight.grad.to_dense().numpy())


@pytest.mark.parametrize("opt", [
    lambda ps: rtx.optim.Adam(ps), lambda ps: rtx.optim.AdamW(ps),
    lambda ps: rtx.optim.SGD(ps, lr=0.1)])
def test_dense_optimisers_refuse_sparse_grads_before_updating(opt):
    lin = rtx.nn.Linear(2, 2)
    e = Embedding(5, 2, sparse=True)
    o = opt(list(lin.parameters()) + list(e.parameters()))
    (lin(e([1, 2])).sum()).backward()
    before = [p.numpy().copy() for p in lin.parameters()]
    with pytest.raises(RuntimeError, match="does not support sparse gradients"):
        o.step()
    for p, b in zip(lin.parameters(), before, strict=True):
        np.testing.assert_array_equal(p.numpy(), b)


# ------------------------------------------------------------ SparseAdam
_ADAM_BATCHES = [np.array([1, 2, 2, 29]), np.array([0, 0]), np.array([5, 1, 7]),
                 np.array([29, 5, 0, 3, 3]), np.array([2])]


@pytest.mark.parametrize("maximize", [False, True])
def test_sparse_adam_matches_numpy(backend, maximize):
    w = _weights(30, 3, padding_idx=0)
    e = _embedding(w, padding_idx=0, sparse=True)
    kw = dict(lr=0.05, betas=(0.8, 0.95), eps=1e-6, maximize=maximize)
    o = rtx.optim.SparseAdam(e.parameters(), **kw)
    ref = _RefSparseAdam(w.copy(), **kw)
    rng = np.random.default_rng(5)
    for idx in _ADAM_BATCHES:
        gw = rng.normal(size=(len(idx), 3))
        o.zero_grad()
        (e(idx) * rtx.tensor(gw)).sum().backward()
        o.step()
        rows, values = _ref_sparse_grad(30, idx, gw, padding_idx=0)
        ref.step(rows[0], values)
        np.testing.assert_allclose(e.weight.detach().numpy(), ref.w, rtol=1e-12, atol=1e-14)
    st = o.state[id(e.weight)]
    assert st["step"] == ref.step_count == len(_ADAM_BATCHES)
    np.testing.assert_allclose(st["exp_avg"].numpy(), ref.m, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(st["exp_avg_sq"].numpy(), ref.v, rtol=1e-12, atol=1e-14)
    assert not e.weight.numpy()[0].any()  # the padding row never moves


@pytest.mark.parametrize("maximize", [False, True])
def test_sparse_adam_matches_torch(maximize):
    w = _weights(30, 3, padding_idx=0)
    t = _torch_embedding(w, padding_idx=0, sparse=True)
    import torch

    e = _embedding(w, padding_idx=0, sparse=True)
    kw = dict(lr=0.05, betas=(0.8, 0.95), eps=1e-6, maximize=maximize)
    o = rtx.optim.SparseAdam(e.parameters(), **kw)
    to = torch.optim.SparseAdam(t.parameters(), **kw)
    rng = np.random.default_rng(5)
    for idx in _ADAM_BATCHES:
        gw = rng.normal(size=(len(idx), 3))
        o.zero_grad()
        to.zero_grad()
        (e(idx) * rtx.tensor(gw)).sum().backward()
        (t(torch.from_numpy(idx)) * torch.from_numpy(gw)).sum().backward()
        o.step()
        to.step()
        np.testing.assert_allclose(e.weight.detach().numpy(), t.weight.detach().numpy(),
                                   rtol=1e-12, atol=1e-14)
    st, tst = o.state[id(e.weight)], to.state[t.weight]
    assert st["step"] == int(tst["step"]) == len(_ADAM_BATCHES)
    np.testing.assert_allclose(st["exp_avg_sq"].numpy(), tst["exp_avg_sq"].numpy(), rtol=1e-12)


def test_sparse_adam_updates_rows_in_place_and_only_present_rows():
    e = Embedding(1000, 4, sparse=True)
    o = rtx.optim.SparseAdam(e.parameters(), lr=0.1)
    e([1, 2]).sum().backward()
    o.step()
    buf = e.weight.numpy()
    before = buf.copy()
    o.zero_grad()
    e([7, 2]).sum().backward()
    o.step()
    after = e.weight.numpy()
    assert np.shares_memory(buf, after)  # the rows were written into the weight's buffer
    changed = np.flatnonzero((after != before).any(axis=1))
    assert changed.tolist() == [2, 7]


def test_sparse_adam_refuses_dense_grads_and_bad_hyperparameters():
    lin = rtx.nn.Linear(2, 2)
    o = rtx.optim.SparseAdam(lin.parameters())
    lin(rtx.ones(1, 2)).sum().backward()
    with pytest.raises(RuntimeError, match="does not support dense gradients"):
        o.step()
    for kw in (dict(lr=0.0), dict(eps=0.0), dict(betas=(1.0, 0.9)), dict(betas=(0.9, -0.1))):
        with pytest.raises(ValueError):
            rtx.optim.SparseAdam(lin.parameters(), **kw)


def test_sparse_adam_state_dict_round_trip():
    rtx.manual_seed(1)
    a = Embedding(10, 2, sparse=True)
    b = Embedding(10, 2, sparse=True)
    with rtx.no_grad():
        b.weight.copy_(a.weight)
    oa, ob = rtx.optim.SparseAdam(a.parameters()), rtx.optim.SparseAdam(b.parameters())
    a([1, 3]).sum().backward()
    oa.step()
    ob.load_state_dict(oa.state_dict())
    with rtx.no_grad():
        b.weight.copy_(a.weight)
    for m, o in ((a, oa), (b, ob)):
        o.zero_grad()
        m([3, 4]).sum().backward()
        o.step()
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())


def test_index_accumulate_backend(backend):
    """Backend.index_accumulate: repeats accumulate; the result equals the dense sum."""
    B = backend
    dst = B.from_numpy(np.arange(8.0).reshape(4, 2))
    src = B.from_numpy(np.ones((3, 2)))
    res = B.index_accumulate(dst, rtx.IndexPlan(np.array([3, 0, 3]), 4), src)
    np.testing.assert_array_equal(B.to_numpy(res), [[1, 2], [2, 3], [4, 5], [8, 9]])
    with pytest.raises(TypeError, match="same dtype"):
        B.index_accumulate(B.from_numpy(np.zeros((4, 2), np.float32)),
                           rtx.IndexPlan(np.array([0]), 4), B.from_numpy(np.ones((1, 2))))
