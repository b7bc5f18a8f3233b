"""Cross-entropy forward+backward: rtx's fused node vs log_softmax + nll_loss
composed, and torch's ``F.cross_entropy`` (when installed), side by side.

    python benchmarks/bench_losses.py            # N=100,000 rows, C in {8, 64, 349}, float32
    python benchmarks/bench_losses.py --quick    # small smoke run
    python benchmarks/bench_losses.py --classes 349   # ogbn-mag's venues only

Prints the median of ``--repeat`` runs (after one warm-up) and ratios to the
fused rtx op.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import rtx
import rtx.nn.functional as F


def _median(fn: Callable[[], object], repeat: int) -> float:
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--classes", type=int, nargs="+", default=None,
                    help="class counts (default 8, 64 and ogbn-mag's 349)")
    args = ap.parse_args(argv)
    n = 2_000 if args.quick else 100_000
    classes = args.classes or ((8,) if args.quick else (8, 64, 349))
    torch: Any
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        torch = None
    print(f"cross-entropy fwd+bwd, float32, N={n:,}, rtx threads={rtx.get_num_threads()}"
          + (f", torch threads={torch.get_num_threads()}" if torch else ""))
    print(f"{'C':>4} {'rtx fused ms':>13} {'composed ms':>12} {'torch ms':>9} "
          f"{'composed/fused':>15} {'torch/fused':>12}")
    rng = np.random.default_rng(0)
    for c in classes:
        _row(rng, n, c, args.repeat, torch)


def _row(rng: np.random.Generator, n: int, c: int, repeat: int, torch: object) -> None:
    a = rng.standard_normal((n, c)).astype(np.float32)
    t = rng.integers(0, c, n)
    x = rtx.tensor(a, requires_grad=True)

    def fused() -> None:
        x.grad = None
        F.cross_entropy(x, t).backward()

    def composed() -> None:
        x.grad = None
        F.nll_loss(F.log_softmax(x, 1), t).backward()

    tf = _median(fused, repeat)
    tc = _median(composed, repeat)
    tt = float("nan")
    if torch is not None:
        import torch as th

        tx = th.tensor(a, requires_grad=True)
        tt_ = th.tensor(t)

        def tfn() -> None:
            tx.grad = None
            th.nn.functional.cross_entropy(tx, tt_).backward()

        tt = _median(tfn, repeat)
    print(f"{c:>4} {tf * 1e3:>13.2f} {tc * 1e3:>12.2f} {tt * 1e3:>9.2f} "
          f"{tc / tf:>15.2f} {tt / tf:>12.2f}")

if __name__ == "__main__":
    main()
