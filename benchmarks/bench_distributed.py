"""Graph-partitioned HetGAT training on 1 and 2 MPI ranks: epoch time and peak
memory per rank, next to the scaling model of docs/distributed.md.

    python benchmarks/bench_distributed.py                 # ~100,000 papers, 1x1 then 2x1
    python benchmarks/bench_distributed.py --configs 1x1,2x1,1x2 --rounds 3
    python benchmarks/bench_distributed.py --num-papers 20000 --epochs 3

For each ``RANKSxTHREADS`` config (one after the other, never concurrently;
``--rounds`` repeats the list, interleaved) it launches ``mpiexec -n RANKS python
benchmarks/bench_distributed.py --worker`` with THREADS OpenMP and BLAS threads
per rank (2x1 and 1x2 use the same 2 cores).  Each worker builds the same
synthetic graph, takes its shard (``partition.shard``), trains ``--epochs``
full-batch epochs with DDP + Adam and reports, per rank: median epoch time,
rtx's peak tensor bytes over the training epochs, peak RSS, its nodes and edge
work.  The scaling model's range for each rank (from the round's 1-rank run and
the shard's node and edge counts) is printed beside the measurement, with the
machine's load average (this benchmark's numbers mean little on a loaded machine
unless 1 and 2 ranks are interleaved and repeated).
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


def launch(nranks: int, threads: int, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        cmd = ["mpiexec", "-n", str(nranks), sys.executable, os.path.abspath(__file__),
               "--worker", "--json", path, "--num-papers", str(args.num_papers),
               "--epochs", str(args.epochs), "--hidden", str(args.hidden),
               "--heads", str(args.heads), "--method", args.method,
               "--rank-threads", str(threads)]
        per = str(threads)  # rtx's OpenMP and numpy's BLAS alike
        env = dict(os.environ, OMP_NUM_THREADS=per, OPENBLAS_NUM_THREADS=per,
                   MKL_NUM_THREADS=per)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env)
        wall = time.perf_counter() - t0
        with open(path) as f:
            res = json.load(f)
    res["wall_s"] = wall
    return res


def _work(r: dict) -> int:
    """Edge work of a rank: edges summed over the layers that process them."""
    return int(sum(r["layer_edges"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-papers", type=int, default=100_000)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--configs", default="1x1,2x1",
                    help="RANKSxTHREADS_PER_RANK, comma-separated, run in this order; the "
                         "first one with 1 rank is the scaling model's baseline")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the configs this many times, interleaved")
    ap.add_argument("--method", default="auto", choices=["auto", "metis", "contiguous"])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    ap.add_argument("--rank-threads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    import rtx

    configs = [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")]
    print(f"rtx {rtx.__version__}; HetGAT 2 layers, hidden {args.hidden}, {args.heads} heads; "
          f"synthetic_hetgraph({args.num_papers}); {args.epochs} epochs; partition "
          f"{args.method}; {os.cpu_count()} CPUs, shared with other users (load average "
          f"{os.getloadavg()[0]:.1f} at start)")
    runs = []
    for rnd in range(args.rounds):
        for p, t in configs:
            runs.append((rnd, p, t, launch(p, t, args)))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    print("\nmodel (docs/distributed.md), from the round's first 1-rank run: epoch s between "
          "base * work_r/work_1 (edge-bound) and base * nodes_r/nodes_1 (node-bound), times "
          "threads_1/threads_r; rtx peak MB between the same two fractions of base; "
          "work = edges summed over the layers that process them")
    print(f"{'round':>5} {'PxT':>5} {'rank':>4} {'nodes':>8} {'work':>9} {'epoch s':>8} "
          f"{'model s':>11} {'rtx peak MB':>11} {'model MB':>11} {'peak RSS MB':>11}")
    for rnd, p, t, res in runs:
        base = next((b for r_, q, _, b in runs if r_ == rnd and q == 1), None)
        for r in res["ranks"]:
            t_lo = t_hi = lo = hi = float("nan")
            if base is not None:
                b = base["ranks"][0]
                fw, fn = _work(r) / _work(b), r["nodes"] / b["nodes"]
                thr = base["threads_per_rank"] / t
                t_lo, t_hi = sorted((b["median_epoch_s"] * fw * thr,
                                     b["median_epoch_s"] * fn * thr))
                lo, hi = sorted((b["rtx_peak_mb"] * fw, b["rtx_peak_mb"] * fn))
            print(f"{rnd:>5} {f'{p}x{t}':>5} {r['rank']:>4} {r['nodes']:>8} {_work(r):>9} "
                  f"{r['median_epoch_s']:>8.2f} {f'{t_lo:.2f}-{t_hi:.2f}':>11} "
                  f"{r['rtx_peak_mb']:>11.0f} {f'{lo:.0f}-{hi:.0f}':>11} "
                  f"{r['peak_rss_mb']:>11.0f}")
    for rnd in range(args.rounds):
        one = [res for r_, p, _, res in runs if r_ == rnd and p == 1]
        many = [(p, res) for r_, p, _, res in runs if r_ == rnd and p > 1]
        for p, res in many:
            if not one:
                continue
            slowest = max(r["median_epoch_s"] for r in res["ranks"])
            diff = max(abs(a - b) for a, b in zip(one[0]["loss"], res["loss"], strict=True))
            ratio = one[0]["ranks"][0]["median_epoch_s"] / slowest
            print(f"round {rnd}: epoch time 1 rank / {p} ranks (slowest) {ratio:.2f}x; "
                  f"loss curves max |diff| {diff:.1e}")


if __name__ == "__main__":
    main()
