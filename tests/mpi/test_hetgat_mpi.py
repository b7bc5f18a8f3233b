"""Graph-partitioned training on 2 ranks matches one process (loss curve, accuracy)."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
import rtx.distributed as dist
import rtx.nn as nn
from rtx.datasets import synthetic_hetgraph
from rtx.distributed.hetgat import DistributedHetGAT
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
        opt.zero_grad()
        logits = model(x, data.edge_index_dict)
        loss = -(rtx.index_select(logits, tr).log_softmax(-1) * rtx.tensor(onehot)).sum() \
            / tr.size
        loss.backward()
        pred = logits.detach().argmax(-1).numpy()
        accs.append([float((pred == data.y)[m].mean())
                     for m in (data.train_mask, data.val_mask, data.test_mask)])
        opt.step()
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
        opt.zero_grad()
        loss = nn.functional.cross_entropy(
            rtx.index_select(model(x, data.edge_index_dict), tr), rtx.tensor(data.y[tr]))
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    np.testing.assert_allclose([r["loss"] for r in rows], losses, rtol=1e-9)
    assert run.ddp.check_consistency()


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
