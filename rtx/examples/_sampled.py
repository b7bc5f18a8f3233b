"""``rtx-hetgat --sampled``: mini-batch training with neighbour sampling.

``rtx-hetgat --dataset mag --scale 0.1 --sampled --num-neighbors 15 10
--batch-size 1024`` trains HetGAT on ``rtx.datasets.synthetic_mag(scale)`` (or
on the default synthetic graph, or ``--data``) the way graphs too large for
full-batch training are trained: each step takes ``--batch-size`` training
papers, samples ``--num-neighbors`` neighbours per hop and relation
(``rtx.loader.NeighborLoader``, one fanout per layer, ``-1`` = all), and
trains on the sampled subgraph; node types without features (ogbn-mag's
authors, institutions, fields of study) get learnable embeddings, gathered by
the batch's global ids, with row-sparse gradients updated by
``rtx.optim.SparseAdam`` (``--dense-embeddings``: dense gradients, Adam).  After
every epoch the model is evaluated exactly on the whole graph, layer by layer
(``HetGAT.inference``), which gives the epoch's accuracies and F1 scores, the
best checkpoint and the curves, as the full-batch path does.  A progress bar
counts batches with the seeds per second and the time left.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Generator, Mapping
from types import ModuleType
from typing import Any

import numpy as np

import rtx
from rtx.datasets import synthetic_mag
from rtx.loader import NeighborLoader
from rtx.nn import HetGAT
from rtx.nn.functional import cross_entropy
from rtx.optim import Adam, SparseAdam

from . import _cli

NUM_NEIGHBORS = (15, 10)  # the defaults of the options below
BATCH_SIZE, EVAL_BATCH_SIZE, SCALE = 1024, 4096, 0.1


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The dataset and ``--sampled`` options of ``rtx-hetgat``."""
    ap.add_argument("--dataset", choices=["hetgraph", "mag"], default="hetgraph",
                    help="hetgraph (default): the small synthetic citation graph "
                         "(--num-papers); mag: rtx.datasets.synthetic_mag, ogbn-mag's schema "
                         "and size times --scale (trains with --sampled)")
    ap.add_argument("--scale", type=_cli.finite_float_at_least(0.0), default=None,
                    help=f"with --dataset mag: the size relative to ogbn-mag (default "
                         f"{SCALE}: 194k nodes, 2.1M edges)")
    g = ap.add_argument_group("sampled training (mini-batches of seeds with sampled "
                              "neighbourhoods; docs/hetgat.md)")
    g.add_argument("--sampled", action="store_true",
                   help="mini-batch training with neighbour sampling, exact layer-wise "
                        "evaluation each epoch")
    g.add_argument("--num-neighbors", type=_cli.int_at_least(-1), nargs="+", default=None,
                   metavar="K",
                   help="neighbours sampled per hop and relation, one per layer (-1: all; "
                        f"default {' '.join(map(str, NUM_NEIGHBORS))})")
    g.add_argument("--batch-size", type=_cli.int_at_least(1), default=None,
                   help=f"seed papers per batch (default {BATCH_SIZE})")
    g.add_argument("--eval-batch-size", type=_cli.int_at_least(1), default=None,
                   help="destination nodes per batch of the layer-wise evaluation (default "
                        f"{EVAL_BATCH_SIZE})")
    g.add_argument("--dense-embeddings", action="store_true",
                   help="featureless node types' embeddings with dense gradients and Adam "
                        "(default: row-sparse gradients and SparseAdam)")


def check_args(ap: _cli.ArgumentParser, args: argparse.Namespace) -> None:
    """One line, exit 2, for an option that makes no sense with the others."""
    if args.scale is not None and args.dataset != "mag":
        ap.error("--scale is for --dataset mag")
    if args.scale is not None and args.scale <= 0:
        ap.error(f"--scale must be > 0, got {args.scale:g}")
    if args.dataset == "mag" and args.data:
        ap.error("--data and --dataset mag are two graphs: give one")
    if args.dataset == "mag" and not args.sampled:
        ap.error("--dataset mag trains with --sampled (its featureless node types and size "
                 "are what neighbour sampling is for)")
    if not args.sampled:
        for opt, v in (("--num-neighbors", args.num_neighbors),
                       ("--batch-size", args.batch_size),
                       ("--eval-batch-size", args.eval_batch_size),
                       ("--dense-embeddings", args.dense_embeddings or None)):
            if v is not None:
                ap.error(f"{opt} is an option of --sampled training")
        return
    if getattr(args, "distributed", False):
        ap.error("--sampled and --distributed cannot be combined")
    if args.num_neighbors is None:
        args.num_neighbors = list(NUM_NEIGHBORS)[:args.layers] + \
            [NUM_NEIGHBORS[-1]] * max(0, args.layers - 2)
    if len(args.num_neighbors) != args.layers:
        ap.error(f"--num-neighbors gives {len(args.num_neighbors)} hop(s) but --layers is "
                 f"{args.layers}: give one fanout per layer")
    args.batch_size = args.batch_size or BATCH_SIZE
    args.eval_batch_size = args.eval_batch_size or EVAL_BATCH_SIZE
    if args.dataset == "mag" and args.scale is None:
        args.scale = SCALE


class _Graph:
    """What ``HetGAT.inference`` reads: features as tensors, the edges."""

    def __init__(self, x_dict: Mapping[str, Any], edge_index_dict: Mapping[Any, Any]) -> None:
        self.x_dict, self.edge_index_dict = dict(x_dict), dict(edge_index_dict)


def _host(v: Any) -> np.ndarray:
    return v.numpy() if isinstance(v, rtx.Tensor) else np.asarray(v)


class _Task:
    """The graph with its labels and splits, whatever it came from."""

    def __init__(self, data: Any) -> None:
        self.data = data
        self.target: str = str(data.target)
        self.num_classes = int(data.num_classes)
        st = data[self.target]
        self.y = _host(st.y).astype(np.int64)
        self.masks = {k: _host(st[f"{k}_mask"]).astype(bool) for k in ("train", "val", "test")}
        x = {nt: data[nt].x for nt in data.node_types if "x" in data[nt]}
        self.x_dict = {nt: v if isinstance(v, rtx.Tensor) else rtx.tensor(np.asarray(v))
                       for nt, v in x.items()}
        self.in_channels: dict[str, int | None] = {
            nt: (int(self.x_dict[nt].shape[1]) if nt in self.x_dict else None)
            for nt in data.node_types}
        self.graph = _Graph(self.x_dict, data.edge_index_dict)

    def model(self, hidden: int, heads: int, layers: int, sparse: bool) -> HetGAT:
        return HetGAT(self.data.metadata(), self.in_channels, hidden, self.num_classes,
                      heads=heads, num_layers=layers, target=self.target,
                      num_nodes_dict=self.data.num_nodes_dict, sparse=sparse)

    def scores(self, pred: np.ndarray) -> dict[str, float]:
        out: dict[str, float] = {}
        for k, m in self.masks.items():
            out.update(split_scores(k, self.y[m], pred[m]))
        return out


def split_scores(split: str, y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """``{split}_acc``, ``{split}_macro_f1``, ``{split}_micro_f1`` (``rtx.metrics``;
    NaN for an empty split)."""
    if not len(y):
        nan = float("nan")
        return {f"{split}_acc": nan, f"{split}_macro_f1": nan, f"{split}_micro_f1": nan}
    return {f"{split}_acc": rtx.metrics.accuracy(y, pred),
            f"{split}_macro_f1": rtx.metrics.f1_score(y, pred, average="macro"),
            f"{split}_micro_f1": rtx.metrics.f1_score(y, pred, average="micro")}


class _BatchProgress:
    """One bar over every batch of the run (tqdm), or a plain line every tenth of
    an epoch, with the seeds per second and the time left."""

    def __init__(self, epochs: int, per_epoch: int, mode: str, note: Any,
                 duration: Any) -> None:
        self.total, self.per_epoch = epochs * per_epoch, per_epoch
        self.done, self.seeds, self.t0, self.duration = 0, 0, time.perf_counter(), duration
        self.every = max(1, per_epoch // 10)
        self.bar, self.mode = _cli.open_bar(self.total, "batch", mode, note)

    def batch(self, epoch: int, seeds: int, loss: float) -> None:
        self.done += 1
        self.seeds += seeds
        elapsed = time.perf_counter() - self.t0
        rate = self.seeds / elapsed if elapsed > 0 else 0.0
        text = f"epoch {epoch}  loss {loss:.4f}  {rate:,.0f} seeds/s"
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(1)
        elif self.mode == "plain":
            k = (self.done - 1) % self.per_epoch + 1
            if k == 1 or k % self.every == 0 or k == self.per_epoch:
                eta = elapsed / self.done * (self.total - self.done)
                print(f"batch {self.done:6d}/{self.total}  {text}  eta {self.duration(eta)}",
                      flush=True)

    def epoch(self, row: dict[str, float]) -> None:
        self.t0 += row["eval_seconds"]  # seeds/s (and the time left) count training only
        text = (f"epoch {int(row['epoch'])}: loss {row['loss']:.4f}  train {row['train_acc']:.3f}"
                f"  val {row['val_acc']:.3f}  val macro-F1 {row['val_macro_f1']:.3f}  "
                f"{row['seconds']:.1f} s (eval {row['eval_seconds']:.1f} s)")
        if self.bar is not None:
            self.bar.write(text)
        elif self.mode == "plain":
            print(text, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _epochs(task: _Task, model: HetGAT, opts: list[Any], args: argparse.Namespace,
            bar: _BatchProgress) -> Generator[tuple[dict[str, float], Any], None, None]:
    train_idx = np.flatnonzero(task.masks["train"])
    loader = NeighborLoader(task.data, list(args.num_neighbors),
                            input_nodes=(task.target, train_idx), batch_size=args.batch_size,
                            shuffle=True, seed=args.seed)
    T = task.target
    try:
        for epoch in range(1, args.epochs + 1):
            t0 = time.perf_counter()
            model.train()
            total, seen = 0.0, 0
            for b in loader:
                bs = int(b[T].batch_size)
                for o in opts:
                    o.zero_grad()
                out = model(b.x_dict, b.edge_index_dict, b.n_id_dict,  # trimmed per layer
                            num_sampled_nodes_dict=b.num_sampled_nodes_dict,
                            num_sampled_edges_dict=b.num_sampled_edges_dict)[:bs]
                y = rtx.tensor(task.y[b[T].n_id.numpy()[:bs]])
                loss = cross_entropy(out, y)
                loss.backward()
                for o in opts:
                    o.step()
                lv = float(loss.item())
                total += lv * bs
                seen += bs
                bar.batch(epoch, bs, lv)
            train_s = time.perf_counter() - t0
            model.eval()
            pred = model.inference(task.graph, batch_size=args.eval_batch_size)
            pred_np = pred.argmax(-1).numpy()
            row = {"epoch": epoch, "loss": total / max(seen, 1), **task.scores(pred_np),
                   "seconds": time.perf_counter() - t0,
                   "train_seconds": train_s, "eval_seconds": time.perf_counter() - t0 - train_s,
                   "seeds_per_s": seen / train_s if train_s > 0 else 0.0}
            bar.epoch(row)
            yield row, model.state_dict()
    finally:
        bar.close()


def _load(ap: _cli.ArgumentParser, args: argparse.Namespace,
          ex: ModuleType) -> tuple[Any, str]:
    if args.dataset == "mag":
        try:
            data = synthetic_mag(args.scale, seed=args.seed)
        except (ValueError, MemoryError) as exc:
            ap.error(f"--scale {args.scale:g}: {ex._message(exc)}")
        return data, f"synthetic_mag(scale={args.scale:g}, seed={args.seed})"
    return ex._load_data(ap, args)


def main(ap: _cli.ArgumentParser, args: argparse.Namespace, ex: ModuleType) -> dict[str, Any]:
    """The sampled run of ``rtx-hetgat`` (``ex``: rtx.examples.hetgat, whose
    checkpoint, metrics and printing helpers it shares)."""
    t_start = time.perf_counter()
    data, source = _load(ap, args, ex)
    t_data = time.perf_counter() - t_start
    _cli.check_output_dir(ap, "--out", args.out)
    task = _Task(data)
    if not task.masks["train"].any():
        ap.error("the graph has no training nodes (train_mask is all False)")
    print(f"rtx {rtx.__version__}, {rtx.get_num_threads()} threads")
    print(f"graph: {source}\n  {data.num_nodes} nodes, {data.num_edges} edges, "
          f"{len(data.node_types)} node types ({len(task.in_channels) - len(task.x_dict)} "
          f"without features: embeddings), built/loaded in {t_data:.2f} s", flush=True)
    best = ex._Best(bool(task.masks["val"].any()))
    sparse = not args.dense_embeddings
    rtx.manual_seed(args.seed)
    try:
        model = task.model(args.hidden, args.heads, args.layers, sparse)
    except MemoryError as exc:
        ap.error(f"not enough memory for this model (--hidden {args.hidden}): {exc}")
    emb = model.embedding_parameters()
    if sparse and emb:
        opts: list[Any] = [Adam(model.dense_parameters(), lr=args.lr,
                                weight_decay=args.weight_decay), SparseAdam(emb, lr=args.lr)]
    else:
        opts = [Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)]
    train_idx = np.flatnonzero(task.masks["train"])
    per_epoch = -(-len(train_idx) // args.batch_size)
    print(f"sampled: {len(train_idx)} training seeds, {per_epoch} batches of "
          f"{args.batch_size} per epoch, fanouts {list(args.num_neighbors)}; "
          f"{len(emb)} embedding table(s) ({'sparse, SparseAdam' if sparse else 'dense, Adam'})",
          flush=True)
    bar = _BatchProgress(args.epochs, per_epoch, args.progress, ap.note, _cli.duration)
    t0 = time.perf_counter()
    with np.errstate(all="ignore"):
        history = ex._run_epochs(ap, _epochs(task, model, opts, args, bar), best)
    train_s = time.perf_counter() - t0

    ckpt = os.path.join(args.out, "best.npz")
    ex._save_checkpoint(ap, best.state, ckpt)
    rtx.manual_seed(args.seed)  # re-evaluate the saved checkpoint, as a user reloading it would
    model = task.model(args.hidden, args.heads, args.layers, sparse)
    model.load_state_dict(rtx.load(ckpt))
    model.eval()
    pred = model.inference(task.graph, batch_size=args.eval_batch_size).argmax(-1).numpy()
    final = task.scores(pred)
    graph_info = {"source": source, "num_nodes": data.num_nodes_dict,
                  "num_edges": {"__".join(et): int(n) for et, n in data.num_edges_dict.items()},
                  "num_classes": task.num_classes}
    extra = {"sampled": {"num_neighbors": list(args.num_neighbors),
                         "batch_size": args.batch_size, "batches_per_epoch": per_epoch,
                         "embeddings": {nt: model.emb[nt].num_embeddings
                                        for nt in model.featureless},
                         "sparse_embeddings": sparse,
                         "median_seeds_per_s": float(np.median(
                             [r["seeds_per_s"] for r in history]))}}
    metrics = ex._write_metrics(ap, args, graph_info, extra, history, best, final, train_s,
                                ckpt)
    print(f"\ntrained {args.epochs} epochs in {train_s:.1f} s "
          f"(median {metrics['median_epoch_seconds']:.3f} s/epoch with evaluation, "
          f"{extra['sampled']['median_seeds_per_s']:,.0f} seeds/s); best epoch {best.epoch} "
          f"by {best.described}")
    ex._print_final(final, ckpt, metrics, args.out)
    return metrics

