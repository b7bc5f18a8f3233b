"""Graph-partitioned training on 2 ranks matches one process (loss curve, accuracy)."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
import rtx.distributed as dist
import rtx.nn as nn
from rtx.datasets import synthetic_hetgraph
from rtx.distributed import _comm
from rtx.distributed.hetgat import DistributedHetGAT
from rtx.nn.training import train_epoch
from rtx.optim import Adam


class MeanHetero(nn.Module):
    """A 2-hop heterogeneous mean-aggregation network (HetGAT's layout: one
    layer per relation, summed per destination type, ELU; the last layer only
    into the target), built from rtx primitives."""

    def __init__(self, metadata, in_channels, hidden, out, heads=1, num_layers=2,
                 target="paper"):
        super().__init__()
        node_types, edge_types = metadata
        self.target = target
        self.layers = nn.ModuleList()
        self.selfs = nn.ModuleList()
        dims = dict(in_channels)
        for layer in range(num_layers):
            rels = [et for et in edge_types if layer < num_layers - 1 or et[2] == target]
            self.layers.append(nn.ModuleDict({"__".join(et): nn.Linear(dims[et[0]], hidden)
                                              for et in rels}))
            dsts = sorted({et[2] for et in rels})
            self.selfs.append(nn.ModuleDict({d: nn.Linear(dims[d], hidden) for d in dsts}))
            dims = {nt: hidden for nt in node_types}
        self.head = nn.Linear(hidden, out)

    def forward(self, x_dict, edge_index_dict):
        x = x_dict
        for convs, selfs in zip(self.layers, self.selfs, strict=True):
            out = {}
            for key, lin in convs.items():
                s, r, d = key.split("__")
                ei = edge_index_dict[(s, r, d)]
                n_d = x[d].shape[0]
                deg = np.bincount(ei[1], minlength=n_d).astype(x[d].dtype)
                inv = rtx.tensor((1.0 / np.maximum(deg, 1))[:, None])
                agg = rtx.index_add(rtx.index_select(lin(x[s]), ei[0]), ei[1], n_d) * inv
                out[d] = agg if d not in out else out[d] + agg
            x = {d: (v + selfs[d](x[d])).elu() for d, v in out.items()}
        return self.head(x[self.target])


def _double(*a, **k):
    return MeanHetero(*a, **k).double()


def _single_process_curve(data, epochs, lr):
    """The same training on the whole graph in one process."""
    rtx.manual_seed(0)
    model = _double(data.metadata(), data.num_features_dict, 16, data.num_classes,
                    heads=1, num_layers=2, target=data.target)
    opt = Adam(model.parameters(), lr=lr, weight_decay=5e-4)
    x = {nt: rtx.tensor(a) for nt, a in data.x_dict.items()}
    tr = np.flatnonzero(data.train_mask)
    onehot = np.zeros((tr.size, data.num_classes))
    onehot[np.arange(tr.size), data.y[tr]] = 1
    losses, accs = [], []
    for _ in range(epochs):
        loss, pred, _ = train_epoch(
            lambda: model(x, data.edge_index_dict),
            lambda logits: -(rtx.index_select(logits, tr).log_softmax(-1)
                             * rtx.tensor(onehot)).sum() / tr.size, opt)
        accs.append([float((pred == data.y)[m].mean())
                     for m in (data.train_mask, data.val_mask, data.test_mask)])
        losses.append(float(loss.item()))
    return losses, accs


@pytest.mark.parametrize("method", ["contiguous", "metis"])
def test_two_ranks_match_one_process_loss_curve(world, method):
    if method == "metis":
        pytest.importorskip("pymetis")
    rank, size = world
    data = synthetic_hetgraph(400, seed=1, dtype=np.float64)
    run = DistributedHetGAT(data, 16, 1, 2, seed=rank, method=method, model_fn=_double,
                            bucket_cap_mb=0.001)
    assert run.local.num_owned < data.num_nodes_dict["paper"]  # really sharded
    assert not run._layered  # not a HetGAT: every local edge in one dict
    rows = [row for row, _ in run.train(8, lr=0.02, weight_decay=5e-4)]
    losses, accs = _single_process_curve(data, 8, 0.02)
    np.testing.assert_allclose([r["loss"] for r in rows], losses, rtol=1e-10)
    for r, a in zip(rows, accs, strict=True):
        np.testing.assert_allclose([r["train_acc"], r["val_acc"], r["test_acc"]], a, atol=1e-12)
    assert losses[-1] < losses[0]
    assert run.ddp.check_consistency()
    rep = run.rank_report([r["rank_seconds"] for r in rows])
    assert [r["rank"] for r in rep] == list(range(size))
    assert sum(r["owned"] for r in rep) == data.num_nodes_dict["paper"]
    final = run.evaluate()
    assert set(final) == {"train_acc", "val_acc", "test_acc"}
    dist.barrier()


def _hetgat_double(*a, **k):
    return nn.HetGAT(*a, **k).double()


def test_two_ranks_hetgat_match_one_process_loss_curve(world):
    """rtx.nn.HetGAT itself (attention softmax over each node's in-edges)."""
    if not hasattr(nn, "HetGAT"):
        pytest.skip("this rtx has no rtx.nn.HetGAT yet")
    rank, size = world
    data = synthetic_hetgraph(300, seed=2, dtype=np.float64)
    run = DistributedHetGAT(data, 8, 2, 2, seed=rank, model_fn=_hetgat_double)
    assert run._layered  # per-layer edge sets: the last layer sees owned nodes' edges only
    sizes = run.local.stats()["layer_edges"]
    assert sizes[1] < sizes[0]
    rows = [row for row, _ in run.train(5, lr=0.02, weight_decay=5e-4)]
    rtx.manual_seed(0)
    model = _hetgat_double(data.metadata(), data.num_features_dict, 8, data.num_classes,
                           heads=2, num_layers=2, target=data.target)
    opt = Adam(model.parameters(), lr=0.02, weight_decay=5e-4)
    x = {nt: rtx.tensor(a) for nt, a in data.x_dict.items()}
    tr = np.flatnonzero(data.train_mask)
    losses = []
    for _ in range(5):
        loss, _, _ = train_epoch(
            lambda: model(x, data.edge_index_dict),
            lambda logits: nn.functional.cross_entropy(rtx.index_select(logits, tr),
                                                       rtx.tensor(data.y[tr])), opt)
        losses.append(float(loss.item()))
    np.testing.assert_allclose([r["loss"] for r in rows], losses, rtol=1e-9)
    assert run.ddp.check_consistency()


def test_hetgat_dropout_runs_through_hetgats_own_forward(world):
    """halo='replicated' runs HetGAT.forward (one edge dict per layer), so the model's
    feature dropout applies; halo='exchange' runs the layers itself and refuses a
    model with dropout (it would silently leave it out)."""
    rank, size = world
    data = synthetic_hetgraph(300, seed=2, dtype=np.float64)

    def dropped(*a, **k):
        return nn.HetGAT(*a, dropout=0.5, **k).double()

    plain = DistributedHetGAT(data, 8, 2, 2, seed=rank, model_fn=_hetgat_double)
    drop = DistributedHetGAT(data, 8, 2, 2, seed=rank, model_fn=dropped)
    with rtx.no_grad():
        drop.model.load_state_dict(plain.model.state_dict())
        rtx.manual_seed(rank)
        train_logits = drop.logits().numpy()
        drop.model.eval()
        np.testing.assert_array_equal(drop.logits().numpy(), plain.logits().numpy())
    assert not np.allclose(train_logits, plain.logits().numpy())
    rows = [row for row, _ in drop.train(2, lr=0.02, weight_decay=5e-4)]
    assert all(np.isfinite(r["loss"]) for r in rows)
    with pytest.raises(ValueError, match="without feature dropout"):
        DistributedHetGAT(data, 8, 2, 2, model_fn=dropped, halo="exchange")
    dist.barrier()


def test_example_distributed_end_to_end(world, tmp_path_factory):
    """`python -m rtx.examples.hetgat --distributed` at tiny scale: rank 0 writes
    the checkpoint and metrics with a per-rank report."""
    if not hasattr(nn, "HetGAT"):
        pytest.skip("this rtx has no rtx.nn.HetGAT yet")
    import json
    import os

    from rtx.examples.hetgat import main

    rank, size = world
    out = str(tmp_path_factory.mktemp("ex")) if rank == 0 else ""
    out = dist.get_comm().bcast(out, root=0)
    m = main(["--distributed", "--num-papers", "200", "--epochs", "3", "--hidden", "8",
              "--heads", "2", "--out", out, "--progress", "none"])
    acc = rtx.tensor([m["final"][k] for k in ("train_acc", "val_acc", "test_acc")])
    every = dist.all_gather(acc).numpy()
    np.testing.assert_array_equal(every, np.broadcast_to(every[0], every.shape))
    if rank == 0:
        with open(os.path.join(out, "metrics.json")) as f:
            saved = json.load(f)
        assert saved["distributed"]["world_size"] == size
        assert len(saved["distributed"]["ranks"]) == size
        assert len(saved["history"]) == 3 and os.path.exists(os.path.join(out, "best.npz"))
    dist.barrier()


# ------------------------------------------------------------- halo exchange
def _one_process_hetgat(data, hidden, heads, layers, epochs, lr):
    rtx.manual_seed(0)
    model = _hetgat_double(data.metadata(), data.num_features_dict, hidden, data.num_classes,
                           heads=heads, num_layers=layers, target=data.target)
    opt = Adam(model.parameters(), lr=lr, weight_decay=5e-4)
    x = {nt: rtx.tensor(a) for nt, a in data.x_dict.items()}
    tr = np.flatnonzero(data.train_mask)
    losses, accs = [], []
    for _ in range(epochs):
        loss, pred, _ = train_epoch(
            lambda: model(x, data.edge_index_dict),
            lambda logits: nn.functional.cross_entropy(rtx.index_select(logits, tr),
                                                       rtx.tensor(data.y[tr])), opt)
        accs.append([float((pred == data.y)[m].mean())
                     for m in (data.train_mask, data.val_mask, data.test_mask)])
        losses.append(float(loss.item()))
    return losses, accs


@pytest.mark.parametrize(("method", "overlap", "layers"), [
    ("metis", False, 2), ("metis", True, 2), ("random", False, 2), ("random", True, 3),
    ("random", "split", 3), ("contiguous", False, 1)])
def test_halo_exchange_matches_one_process(world, method, overlap, layers):
    """Each rank computes only its owned nodes and exchanges boundary rows per
    layer: the loss curve and accuracies are the one-process ones (float64)."""
    if method == "metis":
        pytest.importorskip("pymetis")
    rank, size = world
    data = synthetic_hetgraph(300, seed=2, dtype=np.float64)
    run = DistributedHetGAT(data, 8, 2, layers, seed=rank, model_fn=_hetgat_double,
                            halo="exchange", method=method, overlap=overlap is True,
                            split=overlap == "split" or None)
    own = run.local.num_owned_dict
    every = _comm.allgather_object(own)
    for nt, n in data.num_nodes_dict.items():  # every node owned exactly once
        assert sum(o[nt] for o in every) == n
    assert run.local.graph.num_nodes_dict["paper"] < data.num_nodes_dict["paper"]
    if layers > 1:
        assert any(sum(p.stats()["recv"].values()) for p in run.plans if p is not None)
    if method != "metis":  # the scaling model's counts are the exchange's own
        parts = dist.partition_all(data, size, method)
        st = dist.partition_stats(data, parts, size, num_layers=layers)[rank]
        assert run.local.num_owned_dict == st["owned"]
        assert {nt: n - st["owned"][nt] for nt, n in run.local.graph.num_nodes_dict.items()} \
            == st["halo"]
        for layer in range(1, layers):
            recv = run.plans[layer].stats()["recv"]
            assert {nt: v for nt, v in st["layer_halo"][layer].items() if v or nt in recv} \
                == {nt: recv.get(nt, 0) for nt in st["layer_halo"][layer]
                    if st["layer_halo"][layer][nt] or nt in recv}
        assert run._layer_edge_counts() == st["layer_edges"]
    rows = [row for row, _ in run.train(5, lr=0.02, weight_decay=5e-4)]
    losses, accs = _one_process_hetgat(data, 8, 2, layers, 5, 0.02)
    np.testing.assert_allclose([r["loss"] for r in rows], losses, rtol=1e-10)
    for r, a in zip(rows, accs, strict=True):
        np.testing.assert_allclose([r["train_acc"], r["val_acc"], r["test_acc"]], a, atol=1e-12)
    assert run.ddp.check_consistency()


def test_halo_exchange_is_its_own_adjoint(world):
    """forward: every halo row is its owner's row; backward: <exchange(x), g>
    summed over ranks equals <x, exchange^T(g)> (float64)."""
    from rtx.distributed.halo import ExchangePlan, exchange

    rank, size = world
    n, width = 40, 3
    owner = np.arange(n) % size  # global rows, owned round robin
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, width))
    mine = np.flatnonzero(owner == rank)
    want = np.flatnonzero((owner != rank) & (np.arange(n) % 3 == rank % 3))  # some others' rows
    want = want[np.lexsort((want, owner[want]))]
    plan = ExchangePlan(["a"], {"a": mine}, {"a": want}, {"a": owner[want]}, tag=7)
    x = rtx.tensor(X[mine], requires_grad=True)
    (halo,) = exchange(plan, [x])
    np.testing.assert_array_equal(halo.numpy(), X[want])
    g = rng.standard_normal(halo.shape) + rank
    (halo * rtx.tensor(g)).sum().backward()
    lhs = rtx.tensor([float((halo.numpy() * g).sum())])
    rhs = rtx.tensor([float((X[mine] * x.grad.numpy()).sum())])
    dist.all_reduce(lhs)
    dist.all_reduce(rhs)
    np.testing.assert_allclose(lhs.item(), rhs.item(), rtol=1e-12)
    # the gradient of an owned row is the sum of what every rank that holds it sent back
    assert plan.stats()["recv"]["a"] == want.size


def test_shards_on_disk_train_like_the_graph_in_memory(world, tmp_path_factory):
    """rtx.distributed.partition writes one file per rank; each rank reads only
    its own and trains exactly as with the whole graph in memory."""
    pytest.importorskip("pymetis")
    rank, size = world
    data = synthetic_hetgraph(300, seed=2, dtype=np.float64)
    d = str(tmp_path_factory.mktemp("shards")) if rank == 0 else ""
    d = _comm.broadcast_object(d)
    if rank == 0:
        dist.partition(data, size, d, method="metis")
    dist.barrier()
    local = dist.load_shard(d, rank)
    assert local.info["num_parts"] == size and local.info["part"] == rank
    a = DistributedHetGAT(None, 8, 2, 2, model_fn=_hetgat_double, halo="exchange",
                          method="metis", local=local)
    b = DistributedHetGAT(data, 8, 2, 2, model_fn=_hetgat_double, halo="exchange",
                          method="metis")
    ra = [row["loss"] for row, _ in a.train(3, lr=0.02, weight_decay=5e-4)]
    rb = [row["loss"] for row, _ in b.train(3, lr=0.02, weight_decay=5e-4)]
    assert ra == rb  # the same partition, the same arithmetic: bitwise
    with pytest.raises(ValueError, match="needs halo='exchange'"):
        DistributedHetGAT(None, 8, 2, 2, local=local, halo="replicated")


def test_example_logs_threads_and_progress_for_batch_logs(world, tmp_path_factory, capsys,
                                                           monkeypatch):
    """Rank 0 prints every line with its [rank 0/N] prefix, progress as plain
    lines (stdout is not a terminal here: no carriage returns), the other
    ranks nothing; threads per rank = usable cores / ranks on this node."""
    import os

    from rtx.examples.hetgat import main

    rank, size = world
    out = str(tmp_path_factory.mktemp("ex")) if rank == 0 else ""
    out = _comm.broadcast_object(out)
    rtx.set_num_threads(None)
    usable = rtx.get_num_threads()
    bound = len(os.sched_getaffinity(0)) < (os.cpu_count() or 1)
    capsys.readouterr()
    m = main(["--distributed", "--num-papers", "120", "--epochs", "3", "--hidden", "8",
              "--heads", "2", "--out", out])  # --progress auto
    text = capsys.readouterr()
    want = usable if bound else max(1, usable // size)  # one node here
    assert rtx.get_num_threads() == want
    if rank == 0:
        assert m["distributed"]["threads_per_rank"] == want
        lines = [ln for ln in text.out.splitlines() if ln]
        assert lines and all(ln.startswith(f"[rank 0/{size}] ") for ln in lines), text.out
        assert "\r" not in text.out + text.err
        assert [ln.split("] ", 1)[1][:12] for ln in lines
                if ln.split("] ", 1)[1].startswith("epoch ")] == \
            ["epoch    1/3", "epoch    2/3", "epoch    3/3"], text.out
        assert f"{size} MPI ranks x {want} threads" in text.out
    else:
        assert text.out == "" and m["final"] is not None
    main(["--distributed", "--num-papers", "120", "--epochs", "1", "--hidden", "8",
          "--heads", "2", "--out", out, "--threads", "1", "--progress", "none"])
    assert rtx.get_num_threads() == 1
    dist.barrier()
