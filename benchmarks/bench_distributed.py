"""Graph-partitioned HetGAT training on 1 and 2 MPI ranks: epoch time and peak
memory per rank, next to the scaling model of docs/distributed.md.

    python benchmarks/bench_distributed.py                 # ~100,000 papers
    python benchmarks/bench_distributed.py --num-papers 20000 --epochs 3

It launches ``mpiexec -n P python benchmarks/bench_distributed.py --worker``
for each P in ``--ranks`` (one after the other, never concurrently), with
``--threads`` OpenMP threads per rank split evenly (1 rank x 2 threads vs
2 ranks x 1 thread on this 2-core machine: the same cores either way).  Each
worker builds the same synthetic graph, takes its shard (``partition.shard``),
trains ``--epochs`` full-batch epochs with DDP + Adam and reports, per rank:
median epoch time, rtx's peak tensor bytes over the training epochs, peak RSS,
its share of nodes and edges.  The scaling model's prediction for each rank
(from the measured 1-rank run and the shard's edge/node counts) is printed
beside the measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def worker(args: argparse.Namespace) -> None:
    import numpy as np

    import rtx
    import rtx.distributed as dist
    from rtx.datasets import synthetic_hetgraph
    from rtx.distributed.hetgat import DistributedHetGAT, peak_rss_bytes

    dist.init()
    rtx.set_num_threads(args.rank_threads)
    rss0 = peak_rss_bytes()
    data = synthetic_hetgraph(args.num_papers, seed=0).astype(np.float32)
    run = DistributedHetGAT(data, args.hidden, args.heads, 2, seed=0, method=args.method)
    full_nodes = sum(data.num_nodes_dict.values())
    full_edges = data.num_edges
    del data
    rtx.reset_peak_memory_stats()
    times, rows = [], []
    for row, _ in run.train(args.epochs, lr=0.01, weight_decay=5e-4):
        times.append(row["rank_seconds"])
        rows.append(row)
    rep = run.rank_report(times)
    if dist.rank() == 0:
        out = {"world": dist.world_size(), "threads_per_rank": args.rank_threads,
               "full_nodes": full_nodes, "full_edges": full_edges,
               "rss_before_graph_mb": rss0 / 2**20, "ranks": rep,
               "loss": [r["loss"] for r in rows], "train_acc": rows[-1]["train_acc"],
               "slowest_epoch_s": [r["seconds"] for r in rows]}
        with open(args.json, "w") as f:
            json.dump(out, f)


def launch(nranks: int, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        cmd = ["mpiexec", "-n", str(nranks), sys.executable, os.path.abspath(__file__),
               "--worker", "--json", path, "--num-papers", str(args.num_papers),
               "--epochs", str(args.epochs), "--hidden", str(args.hidden),
               "--heads", str(args.heads), "--method", args.method,
               "--rank-threads", str(max(1, args.threads // nranks))]
        per = str(max(1, args.threads // nranks))  # rtx's OpenMP and numpy's BLAS alike
        env = dict(os.environ, OMP_NUM_THREADS=per, OPENBLAS_NUM_THREADS=per,
                   MKL_NUM_THREADS=per)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env)
        wall = time.perf_counter() - t0
        with open(path) as f:
            res = json.load(f)
    res["wall_s"] = wall
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-papers", type=int, default=100_000)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2, help="total threads over all ranks")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--method", default="auto", choices=["auto", "metis", "contiguous"])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    ap.add_argument("--rank-threads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    import rtx

    print(f"rtx {rtx.__version__}; HetGAT 2 layers, hidden {args.hidden}, {args.heads} heads; "
          f"synthetic_hetgraph({args.num_papers}); {args.epochs} epochs; {args.threads} "
          f"threads in total; partition {args.method}; {os.cpu_count()} CPUs (shared)")
    results = {int(p): launch(int(p), args) for p in args.ranks.split(",")}
    base = results.get(1)
    print()
    print(f"{'ranks':>5} {'rank':>4} {'nodes':>8} {'edges':>9} {'epoch s':>8} {'model s':>8} "
          f"{'rtx peak MB':>11} {'model MB':>9} {'peak RSS MB':>11}")
    for p, res in results.items():
        for r in res["ranks"]:
            pred_t = pred_m = float("nan")
            if base is not None:
                b = base["ranks"][0]
                frac = r["edges"] / b["edges"]
                # the model: time ~ edges (x threads ratio), tensor memory ~ edges
                pred_t = b["median_epoch_s"] * frac * (
                    base["threads_per_rank"] / res["threads_per_rank"])
                pred_m = b["rtx_peak_mb"] * frac
            print(f"{p:>5} {r['rank']:>4} {r['nodes']:>8} {r['edges']:>9} "
                  f"{r['median_epoch_s']:>8.2f} {pred_t:>8.2f} {r['rtx_peak_mb']:>11.0f} "
                  f"{pred_m:>9.0f} {r['peak_rss_mb']:>11.0f}")
    if base is not None and 2 in results:
        two = results[2]
        slowest = max(r["median_epoch_s"] for r in two["ranks"])
        print(f"\nspeed-up (slowest-rank median epoch, 1 rank / 2 ranks): "
              f"{base['ranks'][0]['median_epoch_s'] / slowest:.2f}x")
        print(f"loss curves 1 vs 2 ranks: max |diff| "
              f"{max(abs(a - b) for a, b in zip(base['loss'], two['loss'], strict=True)):.2e}")


if __name__ == "__main__":
    main()
