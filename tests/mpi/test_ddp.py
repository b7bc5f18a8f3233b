"""DistributedDataParallel: gradients equal single-process full-batch gradients."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
import rtx.distributed as dist
import rtx.optim
from rtx.distributed import DistributedDataParallel as DDP

N, F, H, O = 12, 5, 7, 3


class MLP:
    """Two layers on plain rtx tensors (parameters() / named_parameters())."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.w1 = rtx.tensor(rng.standard_normal((F, H)), requires_grad=True)
        self.b1 = rtx.tensor(rng.standard_normal(H), requires_grad=True)
        self.w2 = rtx.tensor(rng.standard_normal((H, O)), requires_grad=True)
        self.unused = rtx.tensor(rng.standard_normal(4), requires_grad=True)

    def named_parameters(self):
        return [("w1", self.w1), ("b1", self.b1), ("w2", self.w2), ("unused", self.unused)]

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def __call__(self, x):
        return (x @ self.w1 + self.b1).tanh() @ self.w2


def _data():
    rng = np.random.default_rng(7)
    return rng.standard_normal((N, F)), rng.standard_normal((N, O))


def _shard(rank: int, size: int) -> np.ndarray:
    return np.array_split(np.arange(N), size)[rank]


def _loss_sum(model, x: np.ndarray, y: np.ndarray):
    d = model(rtx.tensor(x)) - rtx.tensor(y)
    return (d * d).sum()


def _reference_grads(seed: int = 0) -> dict[str, np.ndarray]:
    """Single-process, full-batch gradients of the mean loss from rank 0's weights."""
    m = MLP(seed)
    x, y = _data()
    (_loss_sum(m, x, y) / N).backward()
    return {n: p.grad.numpy().copy() for n, p in m.named_parameters() if p.grad is not None}


def _check(model, want):
    for n, p in model.named_parameters():
        if n in want:
            np.testing.assert_allclose(p.grad.numpy(), want[n], rtol=1e-12, atol=1e-14)
        else:
            assert p.grad is None


@pytest.mark.parametrize("cap_mb", [25.0, 1e-4])
def test_ddp_grads_equal_full_batch(world, cap_mb):
    rank, size = world
    model = MLP(seed=0)
    ddp = DDP(model, bucket_cap_mb=cap_mb)
    if cap_mb < 1:
        assert len(ddp.bucket_sizes) > 1  # several buckets, several Iallreduce
    x, y = _data()
    idx = _shard(rank, size)
    # each rank's share of the global mean; DDP averages over ranks, hence * size
    (_loss_sum(ddp, x[idx], y[idx]) * (size / N)).backward()
    _check(model, _reference_grads())
    assert ddp.check_consistency()


def test_rank1_different_weights_are_replaced_by_rank0s(world):
    rank, size = world
    model = MLP(seed=rank)  # rank 1 starts elsewhere
    ddp = DDP(model)
    ref = MLP(seed=0)
    for (_, p), (_, q) in zip(model.named_parameters(), ref.named_parameters(), strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    x, y = _data()
    idx = _shard(rank, size)
    (_loss_sum(ddp, x[idx], y[idx]) * (size / N)).backward()
    _check(model, _reference_grads())


def test_no_sync_accumulates_then_averages(world):
    rank, size = world
    model = MLP(seed=0)
    ddp = DDP(model)
    x, y = _data()
    idx = _shard(rank, size)
    a, b = idx[: len(idx) // 2], idx[len(idx) // 2:]
    with ddp.no_sync():
        (_loss_sum(ddp, x[a], y[a]) * (size / N)).backward()
    local = model.w1.grad.numpy().copy()
    all_local = dist.all_gather(rtx.tensor(local)).numpy()
    assert not np.allclose(all_local[0], all_local[1])  # not synced yet
    (_loss_sum(ddp, x[b], y[b]) * (size / N)).backward()
    _check(model, _reference_grads())


def test_grad_missing_on_some_ranks_counts_as_zero(world):
    rank, size = world
    model = MLP(seed=0)
    ddp = DDP(model)
    loss = (model.unused * model.unused).sum() * (rank + 1) if rank == 1 else \
        (model.w2 * 0).sum()
    loss.backward()
    want = 2 * MLP(0).unused.numpy() * 2 / size  # only rank 1 contributes
    np.testing.assert_allclose(model.unused.grad.numpy(), want, rtol=1e-13)
    np.testing.assert_array_equal(model.w2.grad.numpy(), 0)
    assert model.w1.grad is None  # no rank produced one
    assert ddp.check_consistency()


def test_training_stays_identical_across_ranks(world):
    rank, size = world
    model = MLP(seed=rank)
    ddp = DDP(model, bucket_cap_mb=1e-4)
    opt = rtx.optim.Adam(model.parameters(), lr=0.05)
    ref = MLP(seed=0)
    ropt = rtx.optim.Adam(ref.parameters(), lr=0.05)
    x, y = _data()
    idx = _shard(rank, size)
    for _ in range(5):
        opt.zero_grad()
        (_loss_sum(ddp, x[idx], y[idx]) * (size / N)).backward()
        opt.step()
        ropt.zero_grad()
        (_loss_sum(ref, x, y) / N).backward()
        ropt.step()
    assert ddp.check_consistency()
    for (_, p), (_, q) in zip(model.named_parameters(), ref.named_parameters(), strict=True):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-10, atol=1e-12)


def test_mismatched_models_raise(world):
    rank, size = world

    class Other(MLP):
        def named_parameters(self):
            ps = super().named_parameters()
            return ps[:-1] if rank == 1 else ps

    with pytest.raises(ValueError, match="wrap different parameters"):
        DDP(Other(0))


def test_ddp_over_rtx_nn_module(world):
    """An rtx.nn model (float64), rank-dependent init and buffer: rank 0's weights
    and buffers everywhere, full-batch gradients after backward."""
    import rtx.nn as nn

    rank, size = world

    def make(seed):
        rtx.manual_seed(seed)
        m = nn.Sequential(nn.Linear(F, H), nn.ELU(), nn.Linear(H, O)).double()
        m.register_buffer("scale", rtx.tensor(np.full(O, 1.0 + seed)))
        return m

    model = make(rank)
    ddp = DDP(model)
    np.testing.assert_array_equal(model.scale.numpy(), 1.0)
    ref = make(0)
    x, y = _data()
    idx = _shard(rank, size)

    def loss(m, rows):
        d = m(rtx.tensor(x[rows])) * m.scale - rtx.tensor(y[rows])
        return (d * d).sum()

    (loss(ddp, idx) * (size / N)).backward()
    (loss(ref, np.arange(N)) / N).backward()
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters(), strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12, atol=1e-14,
                                   err_msg=n)


def test_sparse_embedding_gradients_are_averaged_and_stay_sparse(world):
    """Embedding(sparse=True) under DDP: each rank's batch touches its own rows (or
    none); the gradient becomes the row-sparse average (the union of the rows, each
    divided by the world size), equal to the full batch's, identical on every rank,
    and SparseAdam steps stay in lock-step."""
    import rtx.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 3, sparse=True)
            self.lin = nn.Linear(3, 2)

        def forward(self, ids):
            return self.lin(self.emb(ids)).sum()

    rank, size = world
    rtx.manual_seed(rank)  # a different init per rank: DDP broadcasts rank 0's
    model = Model().double()
    ddp = DDP(model)
    ref = Model().double()
    ref.load_state_dict(model.state_dict())
    batches = [[np.array([1, 4, 4, 7]), np.array([4, 9, 19, 1])],
               [np.array([2]), np.zeros(0, np.int64)]]     # step 2: one rank's batch is empty
    opt = rtx.optim.SparseAdam(model.emb.parameters(), lr=0.1)
    ref_opt = rtx.optim.SparseAdam(ref.emb.parameters(), lr=0.1)
    for step in range(3):
        every = [batches[min(step, 1)][r % 2] for r in range(size)]
        opt.zero_grad()
        ddp(every[rank]).backward()
        ref_opt.zero_grad()
        (sum(ref(b) for b in every) / size).backward()
        g, want = model.emb.weight.grad, ref.emb.weight.grad
        assert g.is_sparse and want.is_sparse
        np.testing.assert_array_equal(g.indices().numpy(), want.indices().numpy())
        np.testing.assert_allclose(g.values().numpy(), want.values().numpy(), rtol=1e-13)
        np.testing.assert_allclose(model.lin.weight.grad.numpy(), ref.lin.weight.grad.numpy(),
                                   rtol=1e-13)
        assert ddp.check_consistency()
        opt.step()
        ref_opt.step()
        np.testing.assert_allclose(model.emb.weight.numpy(), ref.emb.weight.numpy(), rtol=1e-12)


def test_sparse_on_one_rank_and_dense_on_another_raises_everywhere(world):
    import rtx.nn as nn

    rank, size = world
    emb = nn.Embedding(6, 2, sparse=True).double()
    ddp = DDP(emb)
    before = emb.weight.numpy().copy()
    with pytest.raises(ValueError, match="sparse gradient on rank 0 but a dense one on rank 1"):
        if rank == 0:
            ddp(np.array([1, 2])).sum().backward()
        else:  # a sparse and a dense use of the weight: a dense gradient
            (ddp(np.array([1])).sum() + (emb.weight * 2).sum()).backward()
    np.testing.assert_array_equal(emb.weight.numpy(), before)
