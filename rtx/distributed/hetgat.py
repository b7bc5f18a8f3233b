"""Graph-partitioned, data-parallel HetGAT training (``--distributed`` in
``python -m rtx.examples.hetgat``).

Two ways to share the graph (``halo=``):

* ``"exchange"`` (halo exchange): every node of every type is owned by one
  rank (``shards.partition_all``); a rank holds its owned nodes and their
  1-hop halo (``shards.halo_subgraph``, or a shard file written offline by
  ``rtx.distributed.partition`` and read by ``load_shard``: then no rank ever
  holds the whole graph).  Each layer computes only the owned nodes' outputs;
  before every layer after the first, the halo rows the layer reads are
  fetched from their owners (``halo.exchange``: an ``Alltoallv``, and the
  reverse one for their gradients in the backward pass).  ``overlap=True``
  posts the exchange, computes the owned rows' transforms meanwhile, and
  waits only before the halo rows' own.
* ``"replicated"``: only target nodes are owned; a rank keeps the k-hop
  in-neighbourhood of its own (``partitioning.shard``, k = the number of
  layers), so no communication happens inside the forward pass, at the cost
  of computing the halo again on every rank.

Either way each rank trains a replica of the model wrapped in
``DistributedDataParallel``.  The loss is the mean cross-entropy over ALL
training nodes, exactly as on one process: each rank backpropagates
``(sum of its owned training nodes' losses) * world_size / (global number of
training nodes)`` and DDP averages the gradients over ranks, which gives the
gradient of the global mean.  Accuracies are all-reduced counts over owned
nodes, so they are the full graph's.

Before anything else the ranks check that they hold the same graph and the
same configuration (``_comm.check_same``: a digest of the graph, or of the
shard manifest, and the arguments), so ranks started with a different seed,
data file or model raise on every rank instead of training different models.
"""

from __future__ import annotations

import importlib
import resource
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._kernels import memory_stats
from ..autograd.grad_mode import no_grad
from ..creation import from_numpy, manual_seed, tensor
from ..data.hetero_data import HeteroData
from ..datasets.hetero import HeteroGraph
from ..functional import concat, elu, index_select, leaky_relu
from ..graph_ops import EdgeIndex, message_passing, segment_softmax
from ..nn import HetGAT
from ..nn.functional import cross_entropy
from ..nn.training import train_epoch
from ..optim import Adam
from . import _comm
from .ddp import DistributedDataParallel
from .halo import ExchangePlan, Pending, exchange
from .partitioning import LocalGraph, shard
from .shards import graph_digest, halo_subgraph, partition_all

_MASKS = ("train", "val", "test")
HALO_MODES = ("exchange", "replicated")


def peak_rss_bytes() -> int:
    """This process's peak resident set size (``getrusage``)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if sys.platform == "darwin" else r * 1024)


def _allreduce_f64(values: list[float], op: str = "sum") -> np.ndarray:
    t = tensor(np.asarray(values, dtype=np.float64))
    _comm.all_reduce(t, op=op)
    return t.numpy().copy()


def _exchange_method(method: str) -> str:
    if method == "auto":
        try:
            importlib.import_module("pymetis")
        except ImportError:
            return "random"
        return "metis"
    return method


def exchange_partition(data: HeteroData, method: str = "auto",
                       seed: int = 0) -> dict[str, np.ndarray]:
    """Every node type's part assignment over the world, computed on rank 0
    and broadcast (the same on every rank; rank 0's error raised everywhere)."""
    world, me = _comm.world_size(), _comm.rank()
    m = _exchange_method(method)
    parts: dict[str, np.ndarray] | None = None
    err: Exception | None = None
    if me == 0:
        try:
            parts = partition_all(data, world, m, seed)
        except (ValueError, ImportError) as exc:
            err = exc
    flag = from_numpy(np.array([err is not None]))
    _comm.all_reduce(flag, op="lor")
    if err is not None:
        raise err
    if bool(flag.item()):
        raise RuntimeError("partition: rank 0 could not partition the graph (its error says why)")
    out = {}
    for nt, n in data.num_nodes_dict.items():
        t = from_numpy(parts[nt] if parts is not None else np.zeros(n, dtype=np.int64))
        _comm.broadcast(t, root=0)
        out[nt] = t.numpy()
    return out


class DistributedHetGAT:
    """One rank's state: its ``LocalGraph``, the DDP-wrapped model, the
    global counts used to scale the loss and the accuracies."""

    def __init__(self, data: HeteroData | None, hidden: int, heads: int, num_layers: int,
                 seed: int = 0, method: str = "auto", bucket_cap_mb: float = 25.0,
                 model_fn: Any = None, halo: str = "replicated", overlap: bool = False,
                 split: bool | None = None, local: LocalGraph | None = None,
                 fingerprint: dict[str, Any] | None = None) -> None:
        """``model_fn(metadata, in_channels, hidden, out, heads=, num_layers=, target=)``
        builds the model (default ``rtx.nn.HetGAT``); it must be a ``num_layers``-hop
        message-passing model for replicated shards to be exact, and an
        ``rtx.nn.HetGAT`` (whose layers this class runs) for ``halo="exchange"``.

        ``data``: the whole graph (every rank holds it until it has taken its
        share), or ``None`` with ``local``: this rank's shard (``load_shard``;
        ``halo="exchange"``).  ``fingerprint``: more values every rank must
        agree on (the command line's arguments); checked with the graph's
        digest and the model's configuration before anything else.

        ``halo="exchange"`` runs layers after the first either through the
        model's own ``GATConv`` s on [owned | halo] rows (``split=False``) or
        with the same arithmetic split into owned and halo rows
        (``split=True``: only owned destinations are computed); ``overlap=True``
        (implies ``split``) computes the owned rows while the halo travels."""
        if model_fn is None:
            model_fn = HetGAT
        if halo not in HALO_MODES:
            raise ValueError(f"halo must be one of {HALO_MODES}, got {halo!r}")
        if (data is None) == (local is None):
            raise ValueError("DistributedHetGAT: pass the graph (data) or this rank's shard "
                             "(local), not both")
        if local is not None and halo != "exchange":
            raise ValueError("DistributedHetGAT: a shard holds a 1-hop halo: it needs "
                             "halo='exchange'")
        self.rank, self.world = _comm.rank(), _comm.world_size()
        self.halo, self.overlap = halo, bool(overlap) and halo == "exchange"
        # the split layer (own GAT arithmetic, owned destinations only); overlap needs it
        self.split = self.overlap if split is None else bool(split) or self.overlap
        config = {"hidden": hidden, "heads": heads, "num_layers": num_layers, "halo": halo,
                  "method": method, "world_size": self.world, **(fingerprint or {})}
        t0 = time.perf_counter()
        if local is None:
            assert data is not None
            self.graph_id = graph_digest(data)
            _comm.check_same({"graph_sha256": self.graph_id, **config}, "DistributedHetGAT")
            if halo == "replicated":
                if not isinstance(data, HeteroGraph):
                    raise TypeError("DistributedHetGAT: halo='replicated' needs a HeteroGraph "
                                    "(features on every node type, labels on the target)")
                local = shard(data, num_layers, method=method)
            else:
                parts = exchange_partition(data, method, seed=0)
                local = halo_subgraph(data, parts, self.rank, self.world)
        else:
            info = local.info
            self.graph_id = str(info.get("manifest_digest"))
            _comm.check_same({"shards": self.graph_id, **config},
                             "DistributedHetGAT")
            if info.get("num_parts") != self.world or info.get("part") != self.rank:
                raise ValueError(f"DistributedHetGAT: rank {self.rank} of {self.world} holds "
                                 f"part {info.get('part')} of {info.get('num_parts')}")
        self.partition_seconds = time.perf_counter() - t0
        self.local: LocalGraph = local
        g = self.local.graph
        self.graph = g
        info = self.local.info
        self.info = info
        self.counts = {k: int(info["counts"][k]) for k in _MASKS}
        if self.counts["train"] == 0:
            raise ValueError("DistributedHetGAT: the graph has no training nodes")
        self.idx = {k: np.flatnonzero(getattr(g, f"{k}_mask")) for k in _MASKS}
        self.y_train = tensor(g.y[self.idx["train"]])
        self.x_dict = {nt: tensor(x) for nt, x in g.x_dict.items()}
        metadata = (list(info["node_types"]), [tuple(et) for et in info["edge_types"]])
        manual_seed(seed)
        self.model = model_fn(metadata, dict(info["num_features"]), hidden,
                              int(info["num_classes"]), heads=heads, num_layers=num_layers,
                              target=info["target"])
        self.ddp = DistributedDataParallel(self.model, bucket_cap_mb=bucket_cap_mb)
        self.opt: Adam | None = None
        self._layered = type(self.model) is HetGAT and len(self.model.convs) == num_layers
        if halo == "exchange":
            if not self._layered:
                raise ValueError("DistributedHetGAT: halo='exchange' runs rtx.nn.HetGAT's "
                                 "layers; other models need halo='replicated'")
            m = self.model
            if m.dropout or m.featureless:
                raise ValueError("DistributedHetGAT: halo='exchange' runs HetGAT's layers "
                                 "itself, without feature dropout or embeddings of featureless "
                                 "node types; use halo='replicated' (HetGAT's own forward) "
                                 f"for dropout={m.dropout}, featureless={list(m.featureless)}")
            self._setup_exchange()

    # ------------------------------------------------------------- exchange
    def _setup_exchange(self) -> None:
        """Per layer: the edges it runs (relabelled into [owned | the halo rows
        that layer reads]) and, for layers after the first, the exchange plan
        fetching those halo rows (one collective per layer)."""
        lg, m = self.local, self.model
        assert lg.num_owned_dict is not None and lg.halo_owner is not None
        n_own = lg.num_owned_dict
        self.n_own = n_own
        edges_all = lg.graph.edge_index_dict
        self.x_own = {nt: x[:n_own[nt]] if x.shape[0] != n_own[nt] else x
                      for nt, x in self.x_dict.items()}
        self.layer_edges: list[dict[Any, np.ndarray]] = []
        self.plans: list[ExchangePlan | None] = []
        self.split_edges: list[dict[Any, EdgeIndex]] = []
        for layer, rels in enumerate(m.layer_edge_types):
            if layer == 0:
                self.layer_edges.append({et: edges_all[et] for et in rels})
                self.plans.append(None)
                self.split_edges.append({})
                continue
            types = [nt for nt in lg.graph.node_types if any(et[0] == nt for et in rels)]
            halo_pos, remap = {}, {}
            for nt in types:
                used = [edges_all[et][0] for et in rels if et[0] == nt]
                src = np.concatenate(used) if used else np.zeros(0, np.int64)
                pos = np.unique(src[src >= n_own[nt]])  # local ids: sorted by owner, then id
                table = np.arange(lg.global_ids[nt].size, dtype=np.int64)
                table[pos] = n_own[nt] + np.arange(pos.size)
                halo_pos[nt], remap[nt] = pos, table
            edges = {}
            for et in rels:
                ei = edges_all[et]
                edges[et] = np.stack([remap[et[0]][ei[0]], ei[1]])
            self.layer_edges.append(edges)
            gid = lg.global_ids
            self.plans.append(ExchangePlan(
                types,
                {nt: gid[nt][:n_own[nt]] for nt in types},
                {nt: gid[nt][halo_pos[nt]] for nt in types},
                {nt: lg.halo_owner[nt][halo_pos[nt] - n_own[nt]] for nt in types},
                tag=layer))
            split = {}
            for et in rels:
                s, _, d = et
                n_src = n_own[s] + halo_pos[s].size
                raw = edges[et]
                if s == d:
                    keep = raw[0] != raw[1]
                    ar = np.arange(n_own[d], dtype=np.int64)
                    raw = np.concatenate([raw[:, keep], np.stack([ar, ar])], axis=1)
                split[et] = EdgeIndex(raw, n_src, n_own[d])
            self.split_edges.append(split)

    def _check_split(self) -> None:
        for conv in self.model.convs:
            for gat in conv.convs.values():
                if (gat.edge_dim is not None or gat.residual or not gat.concat
                        or gat.dropout > 0.0):
                    raise ValueError("split / overlap support HetGAT's own GATConv layers only "
                                     "(no edge features, residual, dropout; concat)")

    def _layer_split(self, layer: int, conv: Any, h_own: dict[str, Any]) -> dict[str, Any]:
        """Layer ``layer`` (>= 1), owned destinations only: post the exchange,
        run the owned rows' transforms (with ``overlap``: while the halo rows
        travel; else after they arrived), then the halo rows' and the
        attention.  The same arithmetic as ``GATConv.forward``."""
        plan = self.plans[layer]
        assert plan is not None
        pending = Pending()
        halo = dict(zip(plan.types, exchange(plan, [h_own[t] for t in plan.types], pending),
                        strict=True))
        if not self.overlap:
            pending.wait()
        parts = []
        for et, gat in zip(conv.edge_types, conv.convs.values(), strict=True):
            s, _, d = et
            H, C = gat.heads, gat.out_channels
            if gat.lin is not None:
                w_src = w_dst = gat.lin.weight
            else:
                w_src, w_dst = gat.lin_src.weight, gat.lin_dst.weight
            wa_src = (w_src.reshape(H, C, w_src.shape[1]) * gat.att_src.reshape(H, C, 1)).sum(1)
            wa_dst = (w_dst.reshape(H, C, w_dst.shape[1]) * gat.att_dst.reshape(H, C, 1)).sum(1)
            parts.append((et, gat, w_src, wa_src, h_own[s] @ w_src.T, h_own[s] @ wa_src.T,
                          h_own[d] @ wa_dst.T))
        pending.wait()
        out: dict[str, Any] = {}
        for et, gat, w_src, wa_src, z_own, a_own, a_dst in parts:
            s, _, d = et
            H, C = gat.heads, gat.out_channels
            ei = self.split_edges[layer][et]
            z = concat([z_own, halo[s] @ w_src.T], 0).reshape(ei.num_src, H, C)
            a = concat([a_own, halo[s] @ wa_src.T], 0)
            e = leaky_relu(index_select(a, ei.src) + index_select(a_dst, ei.dst),
                           gat.negative_slope)
            alpha = segment_softmax(e, ei.dst, ei.num_dst)
            o = message_passing(z, ei, ei.num_dst, alpha).reshape(ei.num_dst, H * C)
            if gat.bias is not None:
                o = o + gat.bias
            out[d] = o if d not in out else out[d] + o
        return out

    def _logits_exchange(self) -> Any:
        m = self.model
        n_own = self.n_own
        h_own: dict[str, Any] = self.x_own
        if self.split:
            self._check_split()
        for layer, conv in enumerate(m.convs):
            edges = self.layer_edges[layer]
            if layer and self.split:
                out = self._layer_split(layer, conv, h_own)
            else:
                if layer == 0:
                    src = self.x_dict
                else:
                    plan = self.plans[layer]
                    assert plan is not None
                    halo = exchange(plan, [h_own[t] for t in plan.types])
                    src = {t: concat([h_own[t], hl], 0)
                           for t, hl in zip(plan.types, halo, strict=True)}
                out = {}
                for et, gat in zip(conv.edge_types, conv.convs.values(), strict=True):
                    s, _, d = et
                    if s == d:
                        o = gat(src[s], edges[et])
                        if o.shape[0] != n_own[d]:
                            o = o[: n_own[d]]
                    else:
                        o = gat((src[s], h_own[d]), edges[et])
                    out[d] = o if d not in out else out[d] + o
            h_own = {nt: elu(v) for nt, v in out.items()}
        return m.lin(h_own[m.target])

    # -------------------------------------------------------------- forward
    def logits(self) -> Any:
        """The model's logits on the local graph (owned nodes' rows exact;
        with ``halo="exchange"`` only the owned target nodes' rows).

        For ``rtx.nn.HetGAT`` each layer gets only the edges it needs
        (``LocalGraph.layer_edge_index``, one dict per layer, passed to
        ``HetGAT.forward``: the last layer only the owned nodes' in-edges);
        other models get every local edge in one dict.  ``halo="exchange"``
        runs HetGAT's layers here, a halo exchange between each two."""
        if self.halo == "exchange":
            self.ddp._forwards += 1  # a forward through DDP's model (agreed at each sync)
            return self._logits_exchange()
        if self._layered:  # HetGAT's own forward, each layer on its trimmed edges
            return self.ddp(self.x_dict, list(self.local.layer_edge_index))
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
        ok = pred == self.graph.y[: pred.shape[0]]
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

    def make_optimizer(self, lr: float, weight_decay: float) -> Adam:
        """The Adam optimiser ``train`` steps (made once; a checkpoint restores its state)."""
        if self.opt is None:
            self.opt = Adam(self.model.parameters(), lr=lr, weight_decay=weight_decay)
        return self.opt

    def train(self, epochs: int, lr: float, weight_decay: float,
              start_epoch: int = 0) -> Iterator[tuple[dict[str, float], dict[str, Any]]]:
        """Yield ``(row, state)`` after every epoch ``start_epoch + 1 .. epochs``
        (rows identical on every rank: global loss and accuracies; ``seconds``
        is the slowest rank's epoch)."""
        opt = self.make_optimizer(lr, weight_decay)
        sums: list[float] = []

        def backprop(logits: Any) -> Any:
            to_backprop, local_sum = self.loss(logits)
            sums.append(local_sum)
            return to_backprop  # DDP all-reduces its gradients in the backward

        for epoch in range(start_epoch + 1, epochs + 1):
            t0 = time.perf_counter()
            _, pred, state = train_epoch(self.logits, backprop, opt, state_of=self.model)
            assert state is not None
            local_sum = sums.pop()
            secs = time.perf_counter() - t0
            tot = _allreduce_f64([local_sum, *self.correct(pred)])
            slowest = float(_allreduce_f64([secs], op="max")[0])
            row = {"epoch": epoch, "loss": float(tot[0] / self.counts["train"]),
                   **self._fractions(tot[1:]), "seconds": slowest, "rank_seconds": secs}
            yield row, state

    def rank_report(self, epoch_seconds: list[float]) -> list[dict[str, Any]]:
        """Per-rank memory, graph share and median epoch time (gathered on every rank)."""
        st = self.local.stats()
        t = self.graph.target
        own_t = st["owned"]
        mine = {
            "rank": self.rank,
            "owned": own_t, "halo_target": st["nodes"][t] - own_t,
            "nodes": sum(st["nodes"].values()), "edges": st["edges"],
            "layer_edges": self._layer_edge_counts(),
            "graph_mb": st["graph_bytes"] / 2**20,
            "rtx_peak_mb": memory_stats()["peak_bytes"] / 2**20,
            "peak_rss_mb": peak_rss_bytes() / 2**20,
            "median_epoch_s": float(np.median(epoch_seconds)) if epoch_seconds else 0.0,
            "partition_s": self.partition_seconds,
        }
        if self.halo == "exchange":
            mine["owned_nodes"] = int(sum(self.n_own.values()))
            mine["halo_rows"] = [p.stats()["recv"] if p is not None else {}
                                 for p in self.plans]
        return list(_comm.allgather_object(mine, "rank_report"))

    def _layer_edge_counts(self) -> list[int]:
        if self.halo == "exchange":
            return [int(sum(ei.shape[1] for ei in le.values())) for le in self.layer_edges]
        if self._layered:
            return [int(sum(ei.shape[1] for ei in le.values()))
                    for le in self.local.layer_edge_index]
        return [int(self.graph.num_edges)] * len(self.local.layer_edge_index)
