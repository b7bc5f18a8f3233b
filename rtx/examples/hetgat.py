"""rtx's main job: train a heterogeneous graph attention network (HetGAT).

``--model rgcn|hgt|simplehgn`` trains another ready-made model of ``rtx.nn.models``
the same way; ``--dropout`` and ``--patience`` (early stopping on the validation
accuracy) are what published recipes add.

Full-batch training with Adam on the built-in synthetic citation graph (node
types paper / author / subject; classify papers into 8 classes), or on your own
graph (``--data FILE.npz``, see ``rtx.datasets.load_hetgraph``).  Run with
``rtx-hetgat`` (installed) or ``python -m rtx.examples.hetgat`` (outside the
source tree, whose ``rtx/`` has no compiled extension unless built in place).

Shows a progress bar (tqdm when installed, plain lines with the time left
otherwise), prints the final train / val / test accuracy of the best epoch (by
validation accuracy; by training loss when the graph has no validation node),
and writes into ``--out DIR``, atomically: ``best.npz`` (the best model's
state_dict, load it with ``rtx.load`` + ``HetGAT.load_state_dict``),
``metrics.json`` (the run's configuration and per-epoch curves) and, when
matplotlib is installed, ``curves.png`` (``pip install "rtx-gnn[examples]"``
installs tqdm and matplotlib).  A seed gives the same run at any thread count.

A bad option or input file is one line (``rtx-hetgat: error: ...``, exit 2); a
non-finite training loss stops the run at that epoch (one line, exit 1), and
nothing is written, so a previous run's files stay.

``mpiexec -n N rtx-hetgat --distributed`` trains over N MPI
ranks (``pip install "rtx-gnn[mpi]"``; rtx/examples/_distributed.py): each rank owns
1/N of the nodes and fetches its 1-hop halo's rows from their owners before every
layer (``--halo exchange``; or holds its papers' whole k-hop neighbourhood,
``--halo replicated``), from the whole graph or from per-rank shard files
(``--shards DIR``); loss and accuracies are the whole graph's; a user error on any
rank is printed once and every rank exits 2; ``--checkpoint-every`` / ``--resume``
save and carry on bit for bit; rank 0 also prints each rank's memory and epoch time
(docs/distributed.md).

``rtx-hetgat --dataset mag --scale 0.1 --sampled --num-neighbors 15 10 --batch-size
1024`` trains on neighbour-sampled mini-batches instead (rtx/examples/_sampled.py):
ogbn-mag's schema at a tenth of its size, embeddings for the featureless node types
(SparseAdam), a progress bar per batch with seeds/s, an exact layer-wise evaluation
each epoch.  Both paths report macro- and micro-F1 beside each accuracy.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys
import time
import zipfile
from collections.abc import Generator, Iterator
from typing import Any, cast

import numpy as np

import rtx
from rtx._fileio import atomic_write
from rtx.datasets import HeteroGraph, load_hetgraph, synthetic_hetgraph
from rtx.nn import HGT, RGCN, HetGAT, Module, SimpleHGN
from rtx.nn.functional import cross_entropy
from rtx.nn.training import train_epoch
from rtx.optim import Adam

from . import _cli, _distributed, _sampled

DEFAULTS = dict(num_papers=3000, epochs=20, hidden=64, heads=4, lr=0.01, weight_decay=5e-4)

#: The models --model builds (rtx.nn.models), all over the same graph and head.
MODELS = ("hetgat", "rgcn", "hgt", "simplehgn")


#: synthetic_hetgraph's smallest graph: max(10, num_classes) papers (8 classes).
MIN_PAPERS = 10

#: What the library raises for a file that cannot be a graph (rtx.datasets.load_hetgraph:
#: ValueError / TypeError / IndexError naming the problem; OSError from opening it;
#: EOFError and zipfile.BadZipFile from numpy's reader for a truncated archive;
#: MemoryError for a file declaring more than fits).  Nothing wider: anything else
#: is a bug and keeps its traceback.
_LOAD_ERRORS = (OSError, ValueError, TypeError, IndexError, EOFError, zipfile.BadZipFile,
                MemoryError)


def build_parser() -> _cli.ArgumentParser:
    ap = _cli.ArgumentParser(
        prog="rtx-hetgat", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-papers", type=_cli.int_at_least(MIN_PAPERS),
                    default=DEFAULTS["num_papers"],
                    help=f"size of the synthetic graph (papers, at least {MIN_PAPERS}; "
                         "~11 edges each)")
    ap.add_argument("--data", metavar="FILE.npz", default=None,
                    help="train on your own graph instead (rtx.datasets.load_hetgraph format)")
    ap.add_argument("--epochs", type=_cli.int_at_least(1), default=DEFAULTS["epochs"])
    ap.add_argument("--hidden", type=_cli.int_at_least(1), default=DEFAULTS["hidden"],
                    help="hidden channels (split over the heads: a multiple of --heads)")
    ap.add_argument("--heads", type=_cli.int_at_least(1), default=DEFAULTS["heads"])
    ap.add_argument("--layers", type=_cli.int_at_least(1), default=2)
    ap.add_argument("--model", choices=MODELS, default="hetgat",
                    help="hetgat: HetGAT (HeteroConv(GATConv)); rgcn: models.RGCN; hgt: "
                         "models.HGT; simplehgn: models.SimpleHGN (HGB's Simple-HGN)")
    ap.add_argument("--dropout", type=_cli.finite_float_at_least(0.0), default=0.0,
                    help="dropout rate of the features (and of the attention weights in "
                         "hetgat / simplehgn) in training; the metrics come from an "
                         "evaluation pass (default 0: none)")
    ap.add_argument("--patience", type=_cli.int_at_least(1), default=None, metavar="N",
                    help="early stopping: stop after N epochs without a better validation "
                         "accuracy (default: run every epoch)")
    ap.add_argument("--lr", type=_cli.finite_float_at_least(0.0), default=DEFAULTS["lr"])
    ap.add_argument("--weight-decay", type=_cli.finite_float_at_least(0.0),
                    default=DEFAULTS["weight_decay"])
    ap.add_argument("--threads", type=_cli.nonzero_int, default=None,
                    help="OpenMP threads (default: rtx's default; -1: every core)")
    ap.add_argument("--seed", type=_cli.int_at_least(0), default=0)
    ap.add_argument("--out", default="hetgat-run", metavar="DIR",
                    help="where best.npz, metrics.json and curves.png go (default: %(default)s)")
    ap.add_argument("--progress", choices=["auto", "tqdm", "plain", "none"], default="auto",
                    help="progress display (auto: tqdm when installed, else plain lines)")
    _sampled.add_arguments(ap)
    _distributed.add_arguments(ap)
    return ap


def _check_args(ap: _cli.ArgumentParser, args: argparse.Namespace) -> None:
    """What the option types cannot check alone; one line and exit 2 on failure."""
    if args.model != "rgcn" and args.hidden % args.heads:
        ap.error(f"--hidden ({args.hidden}) must be a multiple of --heads ({args.heads}): "
                 "the hidden channels are split over the heads")
    if args.dropout >= 1.0:
        ap.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.model != "hetgat" and (args.sampled or getattr(args, "distributed", False)):
        ap.error(f"--model {args.model}: the sampled and distributed paths train HetGAT "
                 "only (--model hetgat)")
    if args.progress == "tqdm" and not _cli.have_module("tqdm"):
        ap.error(f"--progress tqdm: tqdm is not installed ({_cli.EXTRA_HINT}, or "
                 "--progress plain)")
    _sampled.check_args(ap, args)
    _distributed.check_args(ap, args)


class _Progress(_cli.EpochProgress):
    """The main job's epoch line: loss, train / val accuracy and the epoch time."""

    def update(self, epoch: float, row: dict[str, float]) -> None:  # type: ignore[override]
        super().update(int(epoch), f"loss {row['loss']:.4f}  train {row['train_acc']:.3f}  "
                                   f"val {row['val_acc']:.3f}  {row['seconds']:.2f} s/epoch")


class _Best:
    """The best epoch so far: by validation accuracy (the first of equals), or by
    training loss (the first of equals) when the graph has no validation node."""

    def __init__(self, has_val: bool) -> None:
        self.by = "val_acc" if has_val else "loss"
        self.epoch: int | None = None
        self.value = 0.0
        self.state: Any = None
        self.stopped_at: int | None = None  # the epoch early stopping ended the run

    def offer(self, row: dict[str, float], state: Any) -> None:
        v = row[self.by]
        if self.epoch is None or (v > self.value if self.by == "val_acc" else v < self.value):
            self.epoch, self.value, self.state = int(row["epoch"]), v, state

    @property
    def described(self) -> str:
        return "validation accuracy" if self.by == "val_acc" else "training loss"


def _accuracies(pred: np.ndarray, data: HeteroGraph) -> dict[str, float]:
    """Accuracy, macro-F1 and micro-F1 per split (``rtx.metrics``; NaN when empty)."""
    out: dict[str, float] = {}
    for k, m in (("train", data.train_mask), ("val", data.val_mask),
                 ("test", data.test_mask)):
        out.update(_sampled.split_scores(k, data.y[m], pred[m]))
    return out


def _plot(history: list[dict[str, float]], path: str) -> bool:
    """The curves as a PNG at ``path`` (written atomically); False when matplotlib
    is not installed."""
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
    try:
        with atomic_write(path, "wb") as fh:
            fig.savefig(fh, format="png", dpi=100)
    finally:
        plt.close(fig)
    return True


def train(data: HeteroGraph, epochs: int, hidden: int, heads: int, layers: int, lr: float,
          weight_decay: float, seed: int,
          progress: str = "none") -> Iterator[tuple[dict[str, float], Any]]:
    """Train HetGAT on ``data``; yields ``(metrics_row, model_state)`` after every epoch.

    An epoch is one full-batch forward + backward + Adam step.  Its metrics
    (accuracies on all three masks) are those of the parameters that epoch's
    forward pass used (no dropout, so the training pass *is* the evaluation
    pass: no second forward needed), and ``model_state`` is their state_dict.
    The model and optimiser are built when this is called (a bad option raises
    here, before the first epoch), the epochs run as the iterator is consumed."""
    model, opt, x_dict = _setup(data, hidden, heads, layers, lr, weight_decay, seed)
    return _epochs(model, opt, data, x_dict, epochs, progress)


def build_model(name: str, data: HeteroGraph, hidden: int, heads: int, layers: int,
                dropout: float = 0.0) -> Module:
    """The ``--model`` over ``data``: ``hidden`` channels in all (split over
    ``heads`` where the model has heads), ``layers`` message-passing layers,
    ``dropout`` on features (and attention weights where the model has them)."""
    meta, feats = data.metadata(), data.num_features_dict
    n_cls, target = data.num_classes, data.target
    if name == "hetgat":
        return HetGAT(meta, feats, hidden, n_cls, heads=heads, num_layers=layers,
                      target=target, dropout=dropout)
    if name == "rgcn":
        return RGCN(meta, feats, hidden, n_cls, num_layers=layers, dropout=dropout,
                    target=target)
    if name == "hgt":
        return HGT(meta, feats, hidden, n_cls, heads=heads, num_layers=layers, target=target,
                   dropout=dropout)
    if name == "simplehgn":  # HGB's hidden size is per head
        return SimpleHGN(meta, feats, hidden // heads, n_cls, num_layers=layers, heads=heads,
                         feat_drop=dropout, attn_drop=dropout, target=target)
    raise ValueError(f"unknown model {name!r} (one of {MODELS})")


def _setup(data: HeteroGraph, hidden: int, heads: int, layers: int, lr: float,
           weight_decay: float, seed: int, model_name: str = "hetgat",
           dropout: float = 0.0) -> tuple[Module, Adam, dict[str, Any]]:
    """The seeded model, its optimiser and the input features as tensors."""
    rtx.manual_seed(seed)
    x_dict = {nt: rtx.tensor(x) for nt, x in data.x_dict.items()}
    model = build_model(model_name, data, hidden, heads, layers, dropout)
    opt = Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    return model, opt, x_dict


def _epochs(model: Module, opt: Adam, data: HeteroGraph, x_dict: dict[str, Any], epochs: int,
            progress: str, note: Any = None,
            evaluate: bool = False) -> Generator[tuple[dict[str, float], Any], None, None]:
    """One full-batch step per epoch.  Without dropout the training forward is the
    evaluation (its predictions and state are the metrics'); with it
    (``evaluate``), an evaluation-mode forward of the same parameters comes
    first and gives them."""
    edge_index_dict = dict(data.edge_index_dict)
    train_idx = np.flatnonzero(data.train_mask)
    y_train = rtx.tensor(data.y[train_idx])
    bar = _Progress(epochs, progress, note)
    try:
        for epoch in range(1, epochs + 1):
            t0 = time.perf_counter()
            eval_pred = None
            if evaluate:
                model.eval()
                with rtx.no_grad():
                    eval_pred = model(x_dict, edge_index_dict).argmax(-1).numpy()
                eval_state = model.state_dict()
                model.train()
            # the metrics and state are those of the parameters this forward used
            loss, pred, state = train_epoch(
                lambda: model(x_dict, edge_index_dict),
                lambda logits: cross_entropy(rtx.index_select(logits, train_idx), y_train),
                opt, state_of=None if evaluate else model)
            if eval_pred is not None:
                pred, state = eval_pred, eval_state
            row = {"epoch": epoch, "loss": float(loss.item()), **_accuracies(pred, data),
                   "seconds": time.perf_counter() - t0}
            bar.update(epoch, row)
            yield row, state
    finally:
        bar.close()


def _run_epochs(ap: _cli.ArgumentParser, rows: Iterator[tuple[dict[str, float], Any]],
                best: _Best, on_row: Any = None,
                patience: int | None = None) -> list[dict[str, float]]:
    """Consume the training iterator; stop at the first non-finite loss (one line,
    exit 1: nothing is written, a previous run's files in --out stay as they were),
    and, with ``patience``, once that many epochs have passed without a better
    validation accuracy (early stopping; ``best.stopped_at`` says when)."""
    history: list[dict[str, float]] = []
    close = getattr(rows, "close", lambda: None)  # a generator's: its progress bar ends
    try:
        for row, state in rows:
            if on_row is not None:
                on_row(row)
            if not math.isfinite(row["loss"]):
                close()  # the progress bar ends before the message
                ap.fail(f"the training loss is {row['loss']} at epoch {int(row['epoch'])}: "
                        "stopped, nothing written (non-finite features or labels, or a "
                        "learning rate too large for the data?)")
            history.append(row)
            best.offer(row, state)
            if (patience is not None and best.epoch is not None
                    and int(row["epoch"]) - best.epoch >= patience):
                best.stopped_at = int(row["epoch"])
                break
    finally:
        close()
    return history


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; returns the metrics it wrote to ``metrics.json``.

    A user error (a bad option, a file that is not a graph) prints one line
    ``rtx-hetgat: error: ...`` and exits with status 2 (``SystemExit``); a run that
    cannot finish (a non-finite loss) prints one line and exits with status 1."""
    if _distributed.wanted(argv):  # every rank parses, the ranks agree on errors
        return _distributed.main(argv, sys.modules[__name__])
    ap = build_parser()
    args = ap.parse_args(argv)
    _check_args(ap, args)
    if args.threads is not None:
        rtx.set_num_threads(args.threads)
    if args.sampled:  # mini-batches with neighbour sampling (rtx/examples/_sampled.py)
        return _sampled.main(ap, args, sys.modules[__name__])
    t_start = time.perf_counter()
    data, source = _load_data(ap, args)
    t_data = time.perf_counter() - t_start
    _cli.check_output_dir(ap, "--out", args.out)
    print(f"rtx {rtx.__version__}, {rtx.get_num_threads()} threads")
    print(f"graph: {source}\n  {data}\n  ({data.num_edges} edges, built/loaded in "
          f"{t_data:.2f} s)", flush=True)
    best = _Best(bool(data.val_mask.any()))
    if best.by != "val_acc":
        print("no validation nodes (val_mask is all False): the best epoch is the one with "
              "the lowest training loss", flush=True)

    if args.patience is not None and best.by != "val_acc":
        ap.error("--patience: early stopping watches the validation accuracy, and this "
                 "graph has no validation nodes")
    try:
        model, opt, x_dict = _setup(data, args.hidden, args.heads, args.layers, args.lr,
                                    args.weight_decay, args.seed, args.model, args.dropout)
    except MemoryError as exc:
        ap.error(f"not enough memory for this model (--hidden {args.hidden}, --heads "
                 f"{args.heads}, --layers {args.layers}): {exc}")
    t0 = time.perf_counter()
    with np.errstate(all="ignore"):  # a non-finite loss is reported, in one line
        history = _run_epochs(ap, _epochs(model, opt, data, x_dict, args.epochs,
                                          args.progress, ap.note,
                                          evaluate=args.dropout > 0), best,
                              patience=args.patience)
    train_s = time.perf_counter() - t0
    if best.stopped_at is not None:
        print(f"early stopping at epoch {best.stopped_at}: no better validation accuracy "
              f"for {args.patience} epochs", flush=True)

    ckpt = os.path.join(args.out, "best.npz")
    _save_checkpoint(ap, best.state, ckpt)
    # Re-evaluate the saved checkpoint from the file: what a user reloading it gets.
    rtx.manual_seed(args.seed)
    model = build_model(args.model, data, args.hidden, args.heads, args.layers, args.dropout)
    model.load_state_dict(rtx.load(ckpt))
    model.eval()
    with rtx.no_grad():
        x_dict = {nt: rtx.tensor(x) for nt, x in data.x_dict.items()}
        pred = model(x_dict, data.edge_index_dict).argmax(-1).numpy()
    final = _accuracies(pred, data)

    graph_info = _graph_info(source, data)
    extra = {"stopped_early_at": best.stopped_at} if args.patience is not None else {}
    metrics = _write_metrics(ap, args, graph_info, extra, history, best, final, train_s, ckpt)
    print(f"\ntrained {len(history)} epochs in {train_s:.1f} s "
          f"(median {metrics['median_epoch_seconds']:.3f} s/epoch); best epoch "
          f"{best.epoch} by {best.described}")
    _print_final(final, ckpt, metrics, args.out)
    return metrics


def _load_data(ap: _cli.ArgumentParser, args: argparse.Namespace) -> tuple[HeteroGraph, str]:
    """The graph to train on (the user's ``--data`` file or the synthetic one), in
    float32, and a description of where it came from.  A file that is not a graph
    is one line (``--data FILE: what is wrong``), exit 2."""
    if args.data:
        _sniff_npz(ap, args.data)
        try:
            data = load_hetgraph(args.data, seed=args.seed)
        except _LOAD_ERRORS as exc:
            ap.error(f"--data {args.data}: {_message(exc)}")
        source = os.path.abspath(args.data)
    else:
        try:
            data = synthetic_hetgraph(args.num_papers, seed=args.seed)
        except (ValueError, MemoryError) as exc:
            ap.error(f"--num-papers {args.num_papers}: {_message(exc)}")
        source = f"synthetic_hetgraph(num_papers={args.num_papers}, seed={args.seed})"
    if not data.train_mask.any():
        ap.error(f"{'--data ' + args.data if args.data else 'the graph'}: no training nodes "
                 "(train_mask is all False)")
    return data.astype(np.float32), source


def _sniff_npz(ap: _cli.ArgumentParser, path: str) -> None:
    """An ``.npz`` is a zip archive: say so plainly for anything else (numpy's own
    message for a text file is about pickles)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        ap.error(f"--data {path}: {_message(exc)}")
    if not head:
        ap.error(f"--data {path}: the file is empty (expected an .npz archive, "
                 "see rtx.datasets.save_hetgraph)")
    if head not in (b"PK\x03\x04", b"PK\x05\x06"):
        ap.error(f"--data {path}: not an .npz file (no zip header; expected an archive "
                 "written by numpy.savez or rtx.datasets.save_hetgraph)")


def _message(exc: BaseException) -> str:
    """An exception as one line (an OSError's strerror, without the path repeated)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, (zipfile.BadZipFile, EOFError)):
        return f"a damaged or truncated .npz archive ({exc})"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, (ValueError, OSError)) else f"{type(exc).__name__}: {text}"


def _graph_info(source: str, data: HeteroGraph) -> dict[str, Any]:
    return {"source": source, "num_nodes": data.num_nodes_dict,
            "num_edges": {"__".join(et): int(ei.shape[1])
                          for et, ei in data.edge_index_dict.items()},
            "num_classes": data.num_classes}


def _save_checkpoint(ap: _cli.ArgumentParser, state: Any, ckpt: str) -> None:
    """``best.npz``, atomically: a failed write leaves the previous one intact."""
    try:
        with atomic_write(ckpt, "wb") as fh:
            rtx.save(state, cast(io.IOBase, fh))
    except OSError as exc:
        ap.fail(f"cannot write {ckpt}: {_message(exc)} (the previous file, if any, is intact)")


def _json_safe(obj: Any) -> Any:
    """NaN / inf (an accuracy over an empty mask) as null: metrics.json stays JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _write_metrics(ap: _cli.ArgumentParser, args: argparse.Namespace,
                   graph_info: dict[str, Any], extra: dict[str, Any],
                   history: list[dict[str, float]], best: _Best, final: dict[str, float],
                   train_s: float, ckpt: str) -> dict[str, Any]:
    """The run's metrics (``extra`` after the graph's), written to ``metrics.json``,
    and the loss / accuracy curves to ``curves.png`` when matplotlib is installed
    (both atomically; one line saying so when matplotlib is missing)."""
    epoch_s = sorted(r["seconds"] for r in history)
    metrics: dict[str, Any] = {
        "config": {k: v for k, v in vars(args).items() if k != "progress"},
        "graph": graph_info,
        "threads": rtx.get_num_threads(),
        **extra,
        "best_epoch": best.epoch,
        "best_by": "val_acc" if best.by == "val_acc" else "train_loss",
        "final": final,
        "train_seconds": train_s,
        "median_epoch_seconds": epoch_s[len(epoch_s) // 2],
        "history": history,
        "checkpoint": os.path.abspath(ckpt),
    }
    path = os.path.join(args.out, "metrics.json")
    try:
        with atomic_write(path, "w", encoding="utf-8") as f:
            json.dump(_json_safe(metrics), f, indent=1, allow_nan=False)
        plotted = _plot(history, os.path.join(args.out, "curves.png"))
    except OSError as exc:
        ap.fail(f"cannot write into {args.out}: {_message(exc)}")
    if plotted:
        metrics["plot"] = os.path.abspath(os.path.join(args.out, "curves.png"))
    else:
        ap.note(f"no curves.png: matplotlib is not installed ({_cli.EXTRA_HINT})")
    return cast(dict[str, Any], _json_safe(metrics))


def _print_final(final: dict[str, float], ckpt: str, metrics: dict[str, Any],
                 out: str) -> None:
    for split in ("train", "val", "test"):
        v = final[f"{split}_acc"]
        f1 = (f"  macro-F1 {final[f'{split}_macro_f1']:.4f}  micro-F1 "
              f"{final[f'{split}_micro_f1']:.4f}" if f"{split}_macro_f1" in final else "")
        print(f"{split} accuracy {v:.4f}{f1}" if math.isfinite(v)
              else f"{split} accuracy n/a (no {split} nodes)")
    print(f"wrote {ckpt}, {os.path.join(out, 'metrics.json')}"
          + (f", {metrics['plot']}" if "plot" in metrics else ""))
    sys.stdout.flush()


def cli() -> int:
    """Console entry point ``rtx-hetgat``."""
    return _cli.run_console(main, "rtx-hetgat")


if __name__ == "__main__":
    raise SystemExit(cli())
