"""Graph-partitioned, data-parallel HetGAT training (``--distributed`` in
``python -m rtx.examples.hetgat``).

Every rank builds (or loads) the graph, keeps the share of it that its owned
target nodes need (``partition.shard``: k-hop in-neighbourhood, k = the number
of layers) and trains a replica of the model wrapped in
``DistributedDataParallel``.  The loss is the mean cross-entropy over ALL
training nodes, exactly as on one process: each rank backpropagates
``(sum of its owned training nodes' losses) * world_size / (global number of
training nodes)`` and DDP averages the gradients over ranks, which gives the
gradient of the global mean.  Accuracies are all-reduced counts over owned
nodes, so they are the full graph's.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._kernels import memory_stats
from ..autograd.grad_mode import no_grad
from ..creation import manual_seed, tensor
from ..datasets.hetero import HeteroGraph
from ..functional import elu, index_select
from ..nn import HetGAT
from ..nn.functional import cross_entropy
from ..optim import Adam
from . import _comm
from .ddp import DistributedDataParallel
from .partition import LocalGraph, shard

_MASKS = ("train", "val", "test")


def peak_rss_bytes() -> int:
    """This process's peak resident set size (``getrusage``)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if sys.platform == "darwin" else r * 1024)


def _allreduce_f64(values: list[float], op: str = "sum") -> np.ndarray:
    t = tensor(np.asarray(values, dtype=np.float64))
    _comm.all_reduce(t, op=op)
    return t.numpy().copy()


class DistributedHetGAT:
    """One rank's state: its ``LocalGraph``, the DDP-wrapped model, the
    global counts used to scale the loss and the accuracies."""

    def __init__(self, data: HeteroGraph, hidden: int, heads: int, num_layers: int,
                 seed: int = 0, method: str = "auto", bucket_cap_mb: float = 25.0,
                 model_fn: Any = None) -> None:
        """``model_fn(metadata, in_channels, hidden, out, heads=, num_layers=, target=)``
        builds the model (default ``rtx.nn.HetGAT``); it must be a ``num_layers``-hop
        message-passing model for the shards to be exact."""
        if model_fn is None:
            model_fn = HetGAT
        self.rank, self.world = _comm.rank(), _comm.world_size()
        t0 = time.perf_counter()
        self.local: LocalGraph = shard(data, num_layers, method=method)
        self.partition_seconds = time.perf_counter() - t0
        g = self.local.graph
        self.graph = g
        self.counts = {k: int(getattr(data, f"{k}_mask").sum()) for k in _MASKS}
        if self.counts["train"] == 0:
            raise ValueError("DistributedHetGAT: the graph has no training nodes")
        self.idx = {k: np.flatnonzero(getattr(g, f"{k}_mask")) for k in _MASKS}
        self.y_train = tensor(g.y[self.idx["train"]])
        self.x_dict = {nt: tensor(x) for nt, x in g.x_dict.items()}
        manual_seed(seed)
        self.model = model_fn(data.metadata(), data.num_features_dict, hidden,
                              data.num_classes, heads=heads, num_layers=num_layers,
                              target=data.target)
        self.ddp = DistributedDataParallel(self.model, bucket_cap_mb=bucket_cap_mb)
        self._layered = type(self.model) is HetGAT and len(self.model.convs) == num_layers

    def logits(self) -> Any:
        """The model's logits on the local graph (owned nodes' rows exact).

        For ``rtx.nn.HetGAT`` each layer gets only the edges it needs
        (``LocalGraph.layer_edge_index``: the last layer only the owned nodes'
        in-edges), running HetGAT's layers (``convs``, ELU, ``lin``) here;
        other models get every local edge in one dict."""
        m = self.model
        if self._layered:
            h = self.x_dict
            for conv, edges in zip(m.convs, self.local.layer_edge_index, strict=True):
                h = {nt: elu(v) for nt, v in conv(h, edges).items()}
            return m.lin(h[m.target])
        return self.ddp(self.x_dict, self.graph.edge_index_dict)

    def loss(self, logits: Any) -> tuple[Any, float]:
        """``(what this rank backpropagates, its summed training loss)``."""
        if self.idx["train"].size == 0:  # still take part in the gradient all-reduce
            return (logits * 0.0).sum(), 0.0
        local_sum = cross_entropy(index_select(logits, self.idx["train"]), self.y_train,
                                  reduction="sum")
        return local_sum * (self.world / self.counts["train"]), float(local_sum.item())

    def correct(self, pred: np.ndarray) -> list[float]:
        """This rank's correct predictions per mask (owned nodes only)."""
        ok = pred == self.graph.y
        return [float(ok[self.idx[k]].sum()) for k in _MASKS]

    def _fractions(self, total_correct: Any) -> dict[str, float]:
        return {f"{k}_acc": float(c / self.counts[k]) if self.counts[k] else float("nan")
                for k, c in zip(_MASKS, total_correct, strict=True)}

    def accuracies(self, correct: list[float]) -> dict[str, float]:
        """Global accuracies from every rank's ``correct()`` counts (all-reduced)."""
        return self._fractions(_allreduce_f64(correct))

    def evaluate(self, state: dict[str, Any] | None = None) -> dict[str, float]:
        """Global accuracies of the current (or of ``state``'s) parameters."""
        if state is not None:
            self.model.load_state_dict(state)
        self.model.eval()
        with no_grad():
            pred = self.logits().argmax(-1).numpy()
        self.model.train()
        return self.accuracies(self.correct(pred))

    def train(self, epochs: int, lr: float,
              weight_decay: float) -> Iterator[tuple[dict[str, float], dict[str, Any]]]:
        """Yield ``(row, state)`` after every epoch (rows identical on every rank:
        global loss and accuracies; ``seconds`` is the slowest rank's epoch)."""
        opt = Adam(self.model.parameters(), lr=lr, weight_decay=weight_decay)
        for epoch in range(1, epochs + 1):
            t0 = time.perf_counter()
            opt.zero_grad()
            logits = self.logits()
            to_backprop, local_sum = self.loss(logits)
            to_backprop.backward()  # DDP all-reduces the gradients here
            pred = logits.detach().argmax(-1).numpy()
            state = self.model.state_dict()
            opt.step()
            secs = time.perf_counter() - t0
            tot = _allreduce_f64([local_sum, *self.correct(pred)])
            slowest = float(_allreduce_f64([secs], op="max")[0])
            row = {"epoch": epoch, "loss": float(tot[0] / self.counts["train"]),
                   **self._fractions(tot[1:]), "seconds": slowest, "rank_seconds": secs}
            yield row, state

    def rank_report(self, epoch_seconds: list[float]) -> list[dict[str, Any]]:
        """Per-rank memory, graph share and median epoch time (gathered on every rank)."""
        st = self.local.stats()
        mine = {
            "rank": self.rank,
            "owned": st["owned"], "halo_target": st["halo_target"],
            "nodes": sum(st["nodes"].values()), "edges": st["edges"],
            "layer_edges": st["layer_edges"] if self._layered else [st["edges"]] * len(
                self.local.layer_edge_index),
            "graph_mb": st["graph_bytes"] / 2**20,
            "rtx_peak_mb": memory_stats()["peak_bytes"] / 2**20,
            "peak_rss_mb": peak_rss_bytes() / 2**20,
            "median_epoch_s": float(np.median(epoch_seconds)) if epoch_seconds else 0.0,
            "partition_s": self.partition_seconds,
        }
        return list(_comm.get_comm().allgather(mine))
