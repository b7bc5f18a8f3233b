"""A small example: message passing and a two-layer graph convolutional network
trained on the built-in karate club graph.  Run with the console script
``rtx-karate`` (``rtx-demo`` is an alias) or ``python -m rtx.examples.karate``.
(rtx's main job is ``rtx-hetgat``: a heterogeneous GAT, rtx.examples.hetgat.)

It shows the building blocks: row gather / scatter-add message passing
(``index_select`` / ``index_add``, the OpenMP kernels), the autograd tape and
an optimiser, training a GCN (Kipf & Welling) semi-supervised from the two
faction leaders' labels.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

import rtx
from rtx.datasets import karate_club
from rtx.optim import Adam

from . import _cli


def gcn_propagate(h: rtx.Tensor, src: np.ndarray, dst: np.ndarray, norm: rtx.Tensor,
                  n: int) -> rtx.Tensor:
    """sum over edges j->i of norm_ij * h_j: gather, scale, scatter-add."""
    messages = rtx.index_select(h, src) * norm
    return rtx.index_add(messages, dst, n)


def cross_entropy(logits: rtx.Tensor, target: np.ndarray) -> rtx.Tensor:
    logp = logits.log_softmax(-1)
    onehot = np.eye(logits.shape[-1], dtype=logp.dtype)[target]
    return -(logp * rtx.tensor(onehot)).sum(-1).mean()


def build_parser() -> _cli.ArgumentParser:
    ap = _cli.ArgumentParser(prog=_prog(), description=__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=_cli.int_at_least(1), default=200)
    ap.add_argument("--hidden", type=_cli.int_at_least(1), default=16)
    ap.add_argument("--lr", type=_cli.finite_float_at_least(0.0), default=0.01)
    ap.add_argument("--seed", type=_cli.int_at_least(0), default=0)
    return ap


def _prog() -> str:
    """``rtx-karate``, or ``rtx-demo`` when run through the alias."""
    name = sys.argv[0].rsplit("/", 1)[-1] if sys.argv and sys.argv[0] else ""
    return name if name in ("rtx-karate", "rtx-demo") else "rtx-karate"


def main(argv: list[str] | None = None) -> float:
    """Run the example; returns the final accuracy.  A bad option is one line
    (``rtx-karate: error: ...``, exit 2); a non-finite loss stops the run (one
    line, exit 1)."""
    ap = build_parser()
    args = ap.parse_args(argv)

    rtx.show_config()
    g = karate_club()
    n = g.num_nodes
    loops = np.arange(n, dtype=np.int64)
    src = np.concatenate([g.edge_index[0], loops])
    dst = np.concatenate([g.edge_index[1], loops])
    print(f"\nkarate club: {n} nodes, {g.edge_index.shape[1]} directed edges (+{n} self loops)")

    # Message passing alone: in-degrees by scatter-adding ones, then symmetric norm.
    deg = rtx.index_add(rtx.ones(len(dst), 1), dst, n)
    dinv = deg ** -0.5
    norm = rtx.index_select(dinv, src) * rtx.index_select(dinv, dst)
    print("in-degree (with self loop) of nodes 0..5:", deg[:6, 0].tolist())

    gen = rtx.Generator(args.seed)
    x = rtx.tensor(np.eye(n, dtype=np.float32))  # one-hot node features
    w1 = (rtx.randn(n, args.hidden, generator=gen) * (2.0 / n) ** 0.5).requires_grad_()
    b1 = rtx.zeros(args.hidden, requires_grad=True)
    w2 = (rtx.randn(args.hidden, 2, generator=gen) * (1.0 / args.hidden) ** 0.5).requires_grad_()
    b2 = rtx.zeros(2, requires_grad=True)
    opt = Adam([w1, b1, w2, b2], lr=args.lr, weight_decay=5e-4)

    def forward() -> rtx.Tensor:
        h = gcn_propagate(x @ w1, src, dst, norm, n) + b1
        h = h.relu()
        return gcn_propagate(h @ w2, src, dst, norm, n) + b2

    train = np.flatnonzero(g.train_mask)
    t0 = time.perf_counter()
    with np.errstate(all="ignore"):  # a non-finite loss is reported, in one line
        for epoch in range(1, args.epochs + 1):
            opt.zero_grad()
            logits = forward()
            loss = cross_entropy(rtx.index_select(logits, train), g.y[train])
            if not math.isfinite(loss.item()):
                ap.fail(f"the training loss is {loss.item()} at epoch {epoch}: stopped "
                        "(a learning rate too large?)")
            loss.backward()
            opt.step()
            if epoch == 1 or epoch % 40 == 0:
                with rtx.no_grad():
                    pred = forward().argmax(-1).numpy()
                acc = float((pred == g.y).mean())
                print(f"epoch {epoch:4d}  loss {loss.item():.4f}  "
                      f"accuracy (all 34 nodes) {acc:.3f}")
    dt = time.perf_counter() - t0
    with rtx.no_grad():
        acc = float((forward().argmax(-1).numpy() == g.y).mean())
    print(f"\ntrained {args.epochs} epochs in {dt:.2f} s; final accuracy {acc:.3f} "
          f"from {len(train)} labelled nodes")
    return acc


def cli() -> int:
    """Console entry point ``rtx-karate`` (and its alias ``rtx-demo``)."""
    return _cli.run_console(main, _prog())


if __name__ == "__main__":
    raise SystemExit(cli())
