"""Link prediction on a heterogeneous graph: which author wrote which paper?

Predicts ``('author', 'writes', 'paper')`` edges of the built-in synthetic
citation graph (``rtx.datasets.synthetic_hetgraph``).  The edges are split with
``rtx.transforms.RandomLinkSplit`` (validation and test edges, with as many
non-edges each, are hidden from message passing, and so are their reverse
``written_by`` edges); a heterogeneous graph-attention encoder
(``HeteroConv`` with one ``GATConv`` per relation) embeds authors and papers
from the training edges, and a decoder scores an (author, paper) pair: ``dot``
(the dot product of the two embeddings) or ``mlp`` (a two-layer MLP on their
concatenation), ``--decoder``.  Each epoch draws fresh negatives
(``rtx.utils.negative_sampling``) and minimises
``binary_cross_entropy_with_logits``.

Run with ``rtx-hetlink`` (installed) or ``python -m rtx.examples.hetlink``.
Shows a progress bar (tqdm when installed, else plain lines), reports ROC-AUC,
MRR and Hits@K on the validation edges every epoch and on the test edges for
the best epoch (by validation ROC-AUC; MRR and Hits@K rank each positive among
all the split's negatives, OGB's shared-negatives layout), and writes into
``--out DIR``, atomically: ``best.npz`` (the best model's state_dict: ``rtx.load``
+ ``LinkPredictor.load_state_dict``) and ``metrics.json`` (configuration,
per-epoch curves, final metrics).  A seed gives the same run at any thread count.

A bad option is one line (``rtx-hetlink: error: ...``, exit 2); a non-finite
training loss stops the run (one line, exit 1) and nothing is written.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys
import time
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

import rtx
from rtx._fileio import atomic_write
from rtx.data import HeteroData
from rtx.datasets import synthetic_hetgraph
from rtx.metrics import hits_at_k, mrr, roc_auc_score
from rtx.nn import GATConv, HeteroConv, Linear, Module, ModuleList
from rtx.nn.functional import binary_cross_entropy_with_logits, elu, relu
from rtx.optim import Adam
from rtx.transforms import RandomLinkSplit
from rtx.utils import negative_sampling

from . import _cli

EDGE = ("author", "writes", "paper")
REV = ("paper", "written_by", "author")
DEFAULTS = dict(num_papers=2000, epochs=30, hidden=32, heads=2, lr=0.01)
#: synthetic_hetgraph's smallest graph (8 classes): enough edges to split
MIN_PAPERS = 40


class LinkPredictor(Module):
    """A heterogeneous GAT encoder and a link decoder for one relation.

    ``encode(x_dict, edge_index_dict)``: ``num_layers`` ``HeteroConv`` layers with
    one ``GATConv`` per edge type (``heads`` heads of ``hidden // heads`` channels,
    concatenated; self-loops only within one node type), summed per destination,
    ELU between layers.  ``decode(z_dict, edge_label_index)``: one logit per
    ``(src, dst)`` pair of ``edge_type``: ``<z_src, z_dst>`` (``decoder="dot"``) or
    ``Linear(2 hidden, hidden) -> ReLU -> Linear(hidden, 1)`` on the concatenated
    embeddings (``decoder="mlp"``)."""

    def __init__(self, metadata: Any, in_channels: Mapping[str, int], hidden: int,
                 heads: int = 2, num_layers: int = 2, decoder: str = "dot",
                 edge_type: tuple[str, str, str] = EDGE) -> None:
        super().__init__()
        if decoder not in ("dot", "mlp"):
            raise ValueError(f"LinkPredictor: decoder must be 'dot' or 'mlp', got {decoder!r}")
        if hidden % heads:
            raise ValueError(f"LinkPredictor: hidden ({hidden}) must be a multiple of heads "
                             f"({heads})")
        node_types, edge_types = metadata
        self.edge_type, self.decoder = tuple(edge_type), decoder
        self.convs = ModuleList()
        sizes = dict(in_channels)
        for _ in range(num_layers):
            convs: dict[Any, Module] = {}
            for s, r, d in edge_types:
                if s == d:
                    convs[(s, r, d)] = GATConv(sizes[s], hidden // heads, heads=heads)
                else:
                    convs[(s, r, d)] = GATConv((sizes[s], sizes[d]), hidden // heads,
                                               heads=heads, add_self_loops=False)
            self.convs.append(HeteroConv(convs, aggr="sum"))
            sizes = {nt: hidden for nt in node_types}
        if decoder == "mlp":
            self.lin1: Linear | None = Linear(2 * hidden, hidden)
            self.lin2: Linear | None = Linear(hidden, 1)
        else:
            self.lin1 = self.lin2 = None

    def encode(self, x_dict: Mapping[str, rtx.Tensor],
               edge_index_dict: Mapping[Any, Any]) -> dict[str, rtx.Tensor]:
        h: dict[str, rtx.Tensor] = dict(x_dict)
        for i, conv in enumerate(self.convs):
            out = conv(h, edge_index_dict)
            h = {nt: elu(v) if i + 1 < len(self.convs) else v for nt, v in out.items()}
        return h

    def decode(self, z_dict: Mapping[str, rtx.Tensor], edge_label_index: Any) -> rtx.Tensor:
        s, _, d = self.edge_type
        idx = np.asarray(edge_label_index)
        zs = rtx.index_select(z_dict[s], idx[0])
        zd = rtx.index_select(z_dict[d], idx[1])
        if self.lin1 is None or self.lin2 is None:
            return (zs * zd).sum(-1)
        h = relu(self.lin1(rtx.concat([zs, zd], -1)))
        return self.lin2(h).reshape(-1)

    def forward(self, x_dict: Mapping[str, rtx.Tensor], edge_index_dict: Mapping[Any, Any],
                edge_label_index: Any) -> rtx.Tensor:
        return self.decode(self.encode(x_dict, edge_index_dict), edge_label_index)


def build_parser() -> _cli.ArgumentParser:
    ap = _cli.ArgumentParser(prog="rtx-hetlink", description=__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-papers", type=_cli.int_at_least(MIN_PAPERS),
                    default=DEFAULTS["num_papers"],
                    help=f"size of the synthetic graph (papers, at least {MIN_PAPERS})")
    ap.add_argument("--epochs", type=_cli.int_at_least(1), default=DEFAULTS["epochs"])
    ap.add_argument("--hidden", type=_cli.int_at_least(1), default=DEFAULTS["hidden"],
                    help="embedding size (a multiple of --heads)")
    ap.add_argument("--heads", type=_cli.int_at_least(1), default=DEFAULTS["heads"])
    ap.add_argument("--layers", type=_cli.int_at_least(1), default=2)
    ap.add_argument("--decoder", choices=["dot", "mlp"], default="dot",
                    help="dot product of the embeddings, or an MLP on both (default: dot)")
    ap.add_argument("--lr", type=_cli.finite_float_at_least(0.0), default=DEFAULTS["lr"])
    ap.add_argument("--val", type=_cli.finite_float_at_least(0.0), default=0.1,
                    help="fraction of the edges for validation (default: %(default)s)")
    ap.add_argument("--test", type=_cli.finite_float_at_least(0.0), default=0.1,
                    help="fraction of the edges for testing (default: %(default)s)")
    ap.add_argument("--k", type=_cli.int_at_least(1), default=10, help="K of Hits@K")
    ap.add_argument("--threads", type=_cli.nonzero_int, default=None,
                    help="OpenMP threads (default: rtx's default; -1: every core)")
    ap.add_argument("--seed", type=_cli.int_at_least(0), default=0)
    ap.add_argument("--out", default="hetlink-run", metavar="DIR",
                    help="where best.npz and metrics.json go (default: %(default)s)")
    ap.add_argument("--progress", choices=["auto", "tqdm", "plain", "none"], default="auto",
                    help="progress display (auto: tqdm when installed, else plain lines)")
    return ap


def _check_args(ap: _cli.ArgumentParser, args: argparse.Namespace) -> None:
    if args.hidden % args.heads:
        ap.error(f"--hidden ({args.hidden}) must be a multiple of --heads ({args.heads})")
    for opt, v in (("--val", args.val), ("--test", args.test)):
        if v <= 0 or v >= 0.5:
            ap.error(f"{opt} must be a fraction in (0, 0.5), got {v:g}")
    if args.progress == "tqdm" and not _cli.have_module("tqdm"):
        ap.error(f"--progress tqdm: tqdm is not installed ({_cli.EXTRA_HINT}, or "
                 "--progress plain)")


def split(data: HeteroData, val: float, test: float, seed: int
          ) -> tuple[HeteroData, HeteroData, HeteroData]:
    """``RandomLinkSplit`` of the ``writes`` edges (and their reverse), negatives for
    validation and test only (training draws fresh ones every epoch)."""
    t = RandomLinkSplit(num_val=val, num_test=test, edge_types=[EDGE], rev_edge_types=[REV],
                        add_negative_train_samples=False, seed=seed)
    return cast(tuple[HeteroData, HeteroData, HeteroData], t(data))


def _features(data: HeteroData) -> dict[str, rtx.Tensor]:
    return {nt: v if isinstance(v, rtx.Tensor) else rtx.tensor(v)
            for nt, v in data.x_dict.items()}


def _host(v: Any) -> np.ndarray:
    return v.numpy() if isinstance(v, rtx.Tensor) else np.asarray(v)


def evaluate(model: LinkPredictor, data: HeteroData, k: int) -> dict[str, float]:
    """ROC-AUC, MRR and Hits@K of ``data``'s supervision pairs (positives ranked
    among all of the split's negatives)."""
    store = data[EDGE]
    with rtx.no_grad():
        score = model(_features(data), data.edge_index_dict, _host(store.edge_label_index))
    s, y = score.numpy().astype(np.float64), _host(store.edge_label)
    pos, neg = s[y == 1], s[y == 0]
    return {"auc": roc_auc_score(y, s), "mrr": mrr(pos, neg), f"hits@{k}": hits_at_k(pos, neg, k)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; returns the metrics it wrote to ``metrics.json``."""
    ap = build_parser()
    args = ap.parse_args(argv)
    _check_args(ap, args)
    if args.threads is not None:
        rtx.set_num_threads(args.threads)
    _cli.check_output_dir(ap, "--out", args.out)
    try:
        data = synthetic_hetgraph(args.num_papers, seed=args.seed)
    except (ValueError, MemoryError) as exc:
        ap.error(f"--num-papers {args.num_papers}: {exc}")
    train_data, val_data, test_data = split(data, args.val, args.test, args.seed)
    tr = train_data[EDGE]
    pos = _host(tr.edge_label_index)
    n_src, n_dst = data[EDGE[0]].num_nodes, data[EDGE[2]].num_nodes
    print(f"rtx {rtx.__version__}, {rtx.get_num_threads()} threads")
    print(f"graph: synthetic_hetgraph(num_papers={args.num_papers}, seed={args.seed}): "
          f"{n_src} authors, {n_dst} papers; {EDGE} edges: {pos.shape[1]} train, "
          f"{int(_host(val_data[EDGE].edge_label).sum())} val, "
          f"{int(_host(test_data[EDGE].edge_label).sum())} test (+ as many non-edges)",
          flush=True)

    def new_model() -> LinkPredictor:
        rtx.manual_seed(args.seed)
        return LinkPredictor(data.metadata(), {nt: x.shape[1] for nt, x in data.x_dict.items()},
                             args.hidden, heads=args.heads, num_layers=args.layers,
                             decoder=args.decoder)

    model = new_model()
    opt = Adam(model.parameters(), lr=args.lr)
    x_dict, mp_edges = _features(train_data), train_data.edge_index_dict
    labels = rtx.tensor(np.concatenate([np.ones(pos.shape[1]), np.zeros(pos.shape[1])]),
                        dtype=rtx.float32)
    history: list[dict[str, float]] = []
    best_auc, best_epoch, best_state = -1.0, 0, None
    bar = _cli.EpochProgress(args.epochs, args.progress, ap.note)
    t0 = time.perf_counter()
    try:
        with np.errstate(all="ignore"):
            for epoch in range(1, args.epochs + 1):
                te = time.perf_counter()
                neg = negative_sampling(pos, (n_src, n_dst), pos.shape[1],
                                        seed=args.seed * 100_003 + epoch).numpy()
                opt.zero_grad()
                logits = model(x_dict, mp_edges, np.concatenate([pos, neg], 1))
                loss = binary_cross_entropy_with_logits(logits, labels[:logits.shape[0]])
                lv = float(loss.item())
                if not math.isfinite(lv):
                    bar.close()
                    ap.fail(f"the training loss is {lv} at epoch {epoch}: stopped, nothing "
                            "written (a learning rate too large?)")
                loss.backward()
                opt.step()
                row = {"epoch": epoch, "loss": lv, **{f"val_{k}": v for k, v in
                                                      evaluate(model, val_data, args.k).items()},
                       "seconds": time.perf_counter() - te}
                history.append(row)
                if row["val_auc"] > best_auc:
                    best_auc, best_epoch, best_state = row["val_auc"], epoch, model.state_dict()
                bar.update(epoch, f"loss {lv:.4f}  val auc {row['val_auc']:.3f}  "
                                  f"mrr {row['val_mrr']:.3f}")
    finally:
        bar.close()
    train_s = time.perf_counter() - t0

    ckpt = os.path.join(args.out, "best.npz")
    try:
        with atomic_write(ckpt, "wb") as fh:
            rtx.save(best_state, cast(io.IOBase, fh))
    except OSError as exc:
        ap.fail(f"cannot write {ckpt}: {exc.strerror or exc}")
    # the test metrics of the checkpoint as a user reloading it gets them
    model = new_model()
    model.load_state_dict(rtx.load(ckpt))
    final = {"val": evaluate(model, val_data, args.k), "test": evaluate(model, test_data, args.k)}
    metrics: dict[str, Any] = {
        "config": {k: v for k, v in vars(args).items() if k != "progress"},
        "edge_type": list(EDGE), "best_epoch": best_epoch, "best_by": "val_auc",
        "final": final, "train_seconds": train_s, "history": history,
        "checkpoint": os.path.abspath(ckpt),
    }
    path = os.path.join(args.out, "metrics.json")
    try:
        with atomic_write(path, "w", encoding="utf-8") as f:
            json.dump(metrics, f, indent=1)
    except OSError as exc:
        ap.fail(f"cannot write {path}: {exc.strerror or exc}")
    print(f"\ntrained {args.epochs} epochs in {train_s:.1f} s; best epoch {best_epoch} by "
          "validation ROC-AUC")
    for name, m in final.items():
        print(f"{name}: " + "  ".join(f"{k} {v:.4f}" for k, v in m.items()))
    print(f"wrote {ckpt}, {path}")
    sys.stdout.flush()
    return metrics


def cli() -> int:
    """Console entry point ``rtx-hetlink``."""
    return _cli.run_console(main, "rtx-hetlink")


if __name__ == "__main__":
    raise SystemExit(cli())
