"""rtx's main job: train a heterogeneous graph attention network (HetGAT).

Full-batch training with Adam on the built-in synthetic citation graph (node
types paper / author / subject; classify papers into 8 classes), or on your own
graph (``--data FILE.npz``, see ``rtx.datasets.load_hetgraph``).  Run with
``rtx-hetgat`` (installed) or ``python -m rtx.examples.hetgat``.

Shows a progress bar (tqdm when installed, plain lines otherwise), prints the
final train / val / test accuracy of the best epoch (by validation accuracy),
and writes into ``--out DIR``: ``best.npz`` (the best model's state_dict, load
it with ``rtx.load`` + ``HetGAT.load_state_dict``), ``metrics.json`` (the
run's configuration and per-epoch curves) and, when matplotlib is installed,
``curves.png``.  A seed gives the same run at any thread count.

``mpiexec -n N python -m rtx.examples.hetgat --distributed`` trains over N MPI
ranks (``pip install "rtx-gnn[mpi]"``): each rank owns 1/N of the papers and holds
their k-hop in-neighbourhood (k = ``--layers``); loss and accuracies are the
whole graph's; rank 0 also prints each rank's memory and epoch time
(docs/distributed.md).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

import rtx
import rtx.distributed as dist
from rtx.datasets import HeteroGraph, load_hetgraph, synthetic_hetgraph
from rtx.distributed.hetgat import DistributedHetGAT
from rtx.nn import HetGAT
from rtx.nn.functional import cross_entropy
from rtx.optim import Adam

DEFAULTS = dict(num_papers=3000, epochs=20, hidden=64, heads=4, lr=0.01, weight_decay=5e-4)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="rtx-hetgat", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-papers", type=int, default=DEFAULTS["num_papers"],
                    help="size of the synthetic graph (papers; ~11 edges each)")
    ap.add_argument("--data", metavar="FILE.npz", default=None,
                    help="train on your own graph instead (rtx.datasets.load_hetgraph format)")
    ap.add_argument("--epochs", type=int, default=DEFAULTS["epochs"])
    ap.add_argument("--hidden", type=int, default=DEFAULTS["hidden"],
                    help="hidden channels (split over the heads)")
    ap.add_argument("--heads", type=int, default=DEFAULTS["heads"])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=DEFAULTS["lr"])
    ap.add_argument("--weight-decay", type=float, default=DEFAULTS["weight_decay"])
    ap.add_argument("--threads", type=int, default=None,
                    help="OpenMP threads (default: rtx's default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="hetgat-run", metavar="DIR",
                    help="where best.npz, metrics.json and curves.png go (default: %(default)s)")
    ap.add_argument("--progress", choices=["auto", "tqdm", "plain", "none"], default="auto",
                    help="progress display (auto: tqdm when installed)")
    ap.add_argument("--distributed", action="store_true",
                    help="graph-partitioned training over MPI ranks: launch with "
                         "`mpiexec -n N python -m rtx.examples.hetgat --distributed` "
                         "(needs pip install \"rtx-gnn[mpi]\"; docs/distributed.md)")
    ap.add_argument("--partition", choices=["auto", "metis", "contiguous"], default="auto",
                    help="with --distributed: how papers are split over ranks (auto: METIS "
                         "when pymetis is installed)")
    return ap


class _Progress:
    """tqdm when available (and asked for), else one plain line every few epochs."""

    def __init__(self, total: int, mode: str) -> None:
        self.total, self.bar, self.mode = total, None, mode
        if mode in ("auto", "tqdm"):
            try:
                tqdm = importlib.import_module("tqdm.auto").tqdm
            except ImportError:
                if mode == "tqdm":
                    raise
                self.mode = "plain"
            else:
                self.bar = tqdm(total=total, unit="epoch", dynamic_ncols=True)
                self.mode = "tqdm"
        self.every = max(1, total // 10)

    def update(self, epoch: float, row: dict[str, float]) -> None:
        epoch = int(epoch)
        text = (f"loss {row['loss']:.4f}  train {row['train_acc']:.3f}  "
                f"val {row['val_acc']:.3f}  {row['seconds']:.2f} s/epoch")
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(1)
        elif self.mode == "plain" and (epoch == 1 or epoch % self.every == 0
                                       or epoch == self.total):
            print(f"epoch {epoch:4d}/{self.total}  {text}", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _accuracies(pred: np.ndarray, data: HeteroGraph) -> dict[str, float]:
    ok = pred == data.y
    return {f"{k}_acc": float(ok[m].mean()) if m.any() else float("nan")
            for k, m in (("train", data.train_mask), ("val", data.val_mask),
                         ("test", data.test_mask))}


def _plot(history: list[dict[str, float]], path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ep = [r["epoch"] for r in history]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(ep, [r["loss"] for r in history])
    a.set_xlabel("epoch")
    a.set_ylabel("training loss")
    for k in ("train_acc", "val_acc", "test_acc"):
        b.plot(ep, [r[k] for r in history], label=k.replace("_acc", ""))
    b.set_xlabel("epoch")
    b.set_ylabel("accuracy")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def train(data: HeteroGraph, epochs: int, hidden: int, heads: int, layers: int, lr: float,
          weight_decay: float, seed: int,
          progress: str = "none") -> Iterator[tuple[dict[str, float], Any]]:
    """Train HetGAT on ``data``; yields ``(metrics_row, model)`` after every epoch.

    An epoch is one full-batch forward + backward + Adam step.  Its metrics
    (accuracies on all three masks) are those of the parameters that epoch's
    forward pass used (no dropout, so the training pass *is* the evaluation
    pass: no second forward needed)."""
    rtx.manual_seed(seed)
    x_dict = {nt: rtx.tensor(x) for nt, x in data.x_dict.items()}
    edge_index_dict = dict(data.edge_index_dict)
    model = HetGAT(data.metadata(), data.num_features_dict, hidden, data.num_classes,
                   heads=heads, num_layers=layers, target=data.target)
    opt = Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    train_idx = np.flatnonzero(data.train_mask)
    y_train = rtx.tensor(data.y[train_idx])
    bar = _Progress(epochs, progress)
    try:
        for epoch in range(1, epochs + 1):
            t0 = time.perf_counter()
            opt.zero_grad()
            logits = model(x_dict, edge_index_dict)
            loss = cross_entropy(rtx.index_select(logits, train_idx), y_train)
            loss.backward()
            pred = logits.detach().argmax(-1).numpy()
            state = model.state_dict()  # the parameters these metrics describe
            opt.step()
            row = {"epoch": epoch, "loss": float(loss.item()), **_accuracies(pred, data),
                   "seconds": time.perf_counter() - t0}
            bar.update(epoch, row)
            yield row, state
    finally:
        bar.close()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; returns the metrics it wrote to ``metrics.json``."""
    args = build_parser().parse_args(argv)
    for name in ("epochs", "hidden", "heads", "layers", "num_papers"):
        if getattr(args, name) < 1:
            raise SystemExit(f"rtx-hetgat: --{name.replace('_', '-')} must be at least 1")
    if args.threads is not None:
        rtx.set_num_threads(args.threads)
    if args.distributed:
        return _main_distributed(args)
    t_start = time.perf_counter()
    data, source = _load_data(args)
    t_data = time.perf_counter() - t_start
    print(f"rtx {rtx.__version__}, {rtx.get_num_threads()} threads")
    print(f"graph: {source}\n  {data}\n  ({data.num_edges} edges, built/loaded in "
          f"{t_data:.2f} s)", flush=True)
    os.makedirs(args.out, exist_ok=True)

    history: list[dict[str, float]] = []
    best: dict[str, Any] = {"val_acc": -1.0}
    t0 = time.perf_counter()
    for row, state in train(data, args.epochs, args.hidden, args.heads, args.layers, args.lr,
                            args.weight_decay, args.seed, args.progress):
        history.append(row)
        if row["val_acc"] > best["val_acc"]:
            best = {"epoch": row["epoch"], "val_acc": row["val_acc"], "state": state}
    train_s = time.perf_counter() - t0

    ckpt = os.path.join(args.out, "best.npz")
    rtx.save(best["state"], ckpt)
    # Re-evaluate the saved checkpoint from the file: what a user reloading it gets.
    rtx.manual_seed(args.seed)
    model = HetGAT(data.metadata(), data.num_features_dict, args.hidden, data.num_classes,
                   heads=args.heads, num_layers=args.layers, target=data.target)
    model.load_state_dict(rtx.load(ckpt))
    model.eval()
    with rtx.no_grad():
        x_dict = {nt: rtx.tensor(x) for nt, x in data.x_dict.items()}
        pred = model(x_dict, data.edge_index_dict).argmax(-1).numpy()
    final = _accuracies(pred, data)

    graph_info = _graph_info(source, data)
    metrics = _write_metrics(args, graph_info, {}, history, best, final, train_s, ckpt)
    print(f"\ntrained {args.epochs} epochs in {train_s:.1f} s "
          f"(median {metrics['median_epoch_seconds']:.3f} s/epoch); best epoch "
          f"{best['epoch']} by validation accuracy")
    _print_final(final, ckpt, metrics, args.out)
    return metrics


def _load_data(args: argparse.Namespace) -> tuple[HeteroGraph, str]:
    """The graph to train on (the user's ``--data`` file or the synthetic one), in
    float32, and a description of where it came from."""
    if args.data:
        data = load_hetgraph(args.data, seed=args.seed)
        source = os.path.abspath(args.data)
    else:
        data = synthetic_hetgraph(args.num_papers, seed=args.seed)
        source = f"synthetic_hetgraph(num_papers={args.num_papers}, seed={args.seed})"
    return data.astype(np.float32), source


def _graph_info(source: str, data: HeteroGraph) -> dict[str, Any]:
    return {"source": source, "num_nodes": data.num_nodes_dict,
            "num_edges": {"__".join(et): int(ei.shape[1])
                          for et, ei in data.edge_index_dict.items()},
            "num_classes": data.num_classes}


def _write_metrics(args: argparse.Namespace, graph_info: dict[str, Any],
                   extra: dict[str, Any], history: list[dict[str, float]],
                   best: dict[str, Any], final: dict[str, float], train_s: float,
                   ckpt: str) -> dict[str, Any]:
    """The run's metrics (``extra`` after the graph's), written to ``metrics.json``,
    and the loss / accuracy curves to ``curves.png`` when matplotlib is installed."""
    epoch_s = sorted(r["seconds"] for r in history)
    metrics: dict[str, Any] = {
        "config": {k: v for k, v in vars(args).items() if k != "progress"},
        "graph": graph_info,
        "threads": rtx.get_num_threads(),
        **extra,
        "best_epoch": best["epoch"],
        "final": final,
        "train_seconds": train_s,
        "median_epoch_seconds": epoch_s[len(epoch_s) // 2],
        "history": history,
        "checkpoint": os.path.abspath(ckpt),
    }
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    if _plot(history, os.path.join(args.out, "curves.png")):
        metrics["plot"] = os.path.abspath(os.path.join(args.out, "curves.png"))
    return metrics


def _print_final(final: dict[str, float], ckpt: str, metrics: dict[str, Any],
                 out: str) -> None:
    print(f"train accuracy {final['train_acc']:.4f}")
    print(f"val accuracy {final['val_acc']:.4f}")
    print(f"test accuracy {final['test_acc']:.4f}")
    print(f"wrote {ckpt}, {os.path.join(out, 'metrics.json')}"
          + (f", {metrics['plot']}" if "plot" in metrics else ""))
    sys.stdout.flush()


def _main_distributed(args: argparse.Namespace) -> dict[str, Any]:
    """``--distributed``: every rank takes its share of the graph (the k-hop
    in-neighbourhood of the papers it owns) and trains a replica under DDP;
    loss and accuracies are the whole graph's (rtx.distributed.hetgat).  Rank 0
    prints and writes the checkpoint, metrics and plot."""
    import gc

    try:
        dist.init()
    except (ImportError, RuntimeError) as exc:  # no mpi4py, or not under mpiexec
        raise SystemExit(f"rtx-hetgat --distributed: {exc}") from None
    rank, world = dist.rank(), dist.world_size()
    lead = rank == 0
    t_start = time.perf_counter()
    data, source = _load_data(args)
    if lead:
        print(f"rtx {rtx.__version__}, {world} MPI ranks x {rtx.get_num_threads()} threads")
        print(f"graph: {source}\n  {data}\n  ({data.num_edges} edges, built/loaded in "
              f"{time.perf_counter() - t_start:.2f} s)", flush=True)
        os.makedirs(args.out, exist_ok=True)
    graph_info = _graph_info(source, data)
    run = DistributedHetGAT(data, args.hidden, args.heads, args.layers, seed=args.seed,
                            method=args.partition)
    del data  # each rank keeps only its share
    gc.collect()
    rtx.reset_peak_memory_stats()

    history: list[dict[str, float]] = []
    best: dict[str, Any] = {"val_acc": -1.0}
    bar = _Progress(args.epochs, args.progress if lead else "none")
    t0 = time.perf_counter()
    try:
        for row, state in run.train(args.epochs, args.lr, args.weight_decay):
            history.append(row)
            bar.update(int(row["epoch"]), row)
            if row["val_acc"] > best["val_acc"]:
                best = {"epoch": row["epoch"], "val_acc": row["val_acc"], "state": state}
    finally:
        bar.close()
    train_s = time.perf_counter() - t0
    final = run.evaluate(best["state"])  # the best parameters, on every rank's share
    report = run.rank_report([r["rank_seconds"] for r in history])
    if not lead:
        return {"final": final, "ranks": report}

    ckpt = os.path.join(args.out, "best.npz")
    rtx.save(best["state"], ckpt)
    dist_info = {"world_size": world, "partition": args.partition, "ranks": report}
    metrics = _write_metrics(args, graph_info, {"distributed": dist_info}, history, best,
                             final, train_s, ckpt)
    print(f"\n{'rank':>4} {'owned':>7} {'halo':>7} {'nodes':>8} {'edges':>9} {'epoch s':>8} "
          f"{'rtx peak MB':>11} {'peak RSS MB':>11}")
    for r in report:
        print(f"{r['rank']:>4} {r['owned']:>7} {r['halo_target']:>7} {r['nodes']:>8} "
              f"{r['edges']:>9} {r['median_epoch_s']:>8.3f} {r['rtx_peak_mb']:>11.1f} "
              f"{r['peak_rss_mb']:>11.1f}")
    print(f"\ntrained {args.epochs} epochs on {world} ranks in {train_s:.1f} s "
          f"(median {metrics['median_epoch_seconds']:.3f} s/epoch, slowest rank); best "
          f"epoch {best['epoch']} by validation accuracy")
    _print_final(final, ckpt, metrics, args.out)
    return metrics


def cli() -> int:
    """Console entry point ``rtx-hetgat``."""
    main()
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
