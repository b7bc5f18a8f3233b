"""Graph-partitioned HetGAT training on 1, 2, 4 ... MPI ranks: epoch time, peak
memory and halo traffic per rank, next to the scaling model of
docs/distributed.md; and the partition statistics the model is built from.

    python benchmarks/bench_distributed.py                      # ~100,000 papers, 1x1 then 2x1
    python benchmarks/bench_distributed.py --configs 1x1,2x1,4x1 --halo exchange,replicated
    python benchmarks/bench_distributed.py --configs 1x1,2x1 --overlap both --rounds 3
    python benchmarks/bench_distributed.py --shards --configs 1x1,2x1,4x1   # from shard files
    python benchmarks/bench_distributed.py --stats --mag-scale 0.5 --parts 1,2,4,8,16,32,64

Training runs: for each ``RANKSxTHREADS`` config and halo mode (one after the
other, never concurrently; ``--rounds`` repeats the list, interleaved) it
launches ``mpiexec -n RANKS python benchmarks/bench_distributed.py --worker``
with THREADS OpenMP and BLAS threads per rank (2x1 and 1x2 use the same 2
cores; 4x1 on 2 cores is oversubscribed).  Each worker builds the synthetic
graph (or, with ``--shards``, reads only its own shard file, written once per
world size beforehand), trains ``--epochs`` full-batch epochs with DDP + Adam
and reports, per rank: median epoch time, rtx's peak tensor bytes over the
training epochs, peak RSS, its nodes, edges and edge work, and the bytes its
halo exchange received per epoch (forward rows + backward gradients, counted
from its exchange plans).  The model's range for each rank (from the round's
1-rank run and the shard's counts) is printed beside it, with the load average.

``--stats``: no training; partitions ``synthetic_mag(scale)`` (ogbn-mag's
schema; ~21M edges at 0.5) into each ``--parts`` count and prints, for the
largest part, the fractions the model uses: local nodes (owned + 1-hop halo)
and edges per rank, the halo rows each layer receives and the bytes that means
per epoch, next to the replicated scheme's L-hop neighbourhood.
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
    from rtx.distributed import _comm
    from rtx.distributed.hetgat import DistributedHetGAT, peak_rss_bytes

    dist.init()
    rtx.set_num_threads(args.rank_threads)
    rss0 = peak_rss_bytes()
    if args.shard_dir:
        local = dist.load_shard(args.shard_dir, dist.rank())
        full_nodes = sum(local.info["num_nodes"].values())
        full_edges = sum(local.info["num_edges"].values())
        run = DistributedHetGAT(None, args.hidden, args.heads, 2, seed=0, halo="exchange",
                                overlap=args.overlap == "on", split=args.overlap != "off",
                                local=local)
        del local
    else:
        from rtx.datasets import synthetic_hetgraph

        data = synthetic_hetgraph(args.num_papers, seed=0).astype(np.float32)
        full_nodes, full_edges = sum(data.num_nodes_dict.values()), data.num_edges
        run = DistributedHetGAT(data, args.hidden, args.heads, 2, seed=0, method=args.method,
                                halo=args.halo, overlap=args.overlap == "on",
                                split=args.overlap != "off")
        del data
    rss_graph = _comm.allgather_object(peak_rss_bytes() / 2**20, "rss after the graph")
    rtx.reset_peak_memory_stats()
    times, rows = [], []
    for row, _ in run.train(args.epochs, lr=0.01, weight_decay=5e-4):
        times.append(row["rank_seconds"])
        rows.append(row)
    rep = run.rank_report(times)
    for r in rep:
        r["rss_graph_mb"] = rss_graph[r["rank"]]
    if dist.rank() == 0:
        out = {"world": dist.world_size(), "threads_per_rank": args.rank_threads,
               "full_nodes": full_nodes, "full_edges": full_edges,
               "rss_before_graph_mb": rss0 / 2**20,
               "ranks": rep, "loss": [r["loss"] for r in rows],
               "train_acc": rows[-1]["train_acc"],
               "slowest_epoch_s": [r["seconds"] for r in rows]}
        with open(args.json, "w") as f:
            json.dump(out, f)


def launch(nranks: int, threads: int, halo: str, overlap: str, shard_dir: str | None,
           args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        cmd = ["mpiexec", "-n", str(nranks), sys.executable, os.path.abspath(__file__),
               "--worker", "--json", path, "--num-papers", str(args.num_papers),
               "--epochs", str(args.epochs), "--hidden", str(args.hidden),
               "--heads", str(args.heads), "--method", args.method,
               "--rank-threads", str(threads), "--halo", halo]
        cmd += ["--overlap", overlap]
        cmd += ["--shard-dir", shard_dir] if shard_dir else []
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


def _halo_mb(r: dict, hidden: int) -> float:
    """Bytes the rank's halo exchange receives per epoch: every layer's halo
    rows (float32, ``hidden`` wide) forward, and as many gradients backward."""
    rows = sum(sum(layer.values()) for layer in r.get("halo_rows", []))
    return 2 * rows * hidden * 4 / 2**20


def train_runs(args: argparse.Namespace) -> None:
    import rtx

    configs = [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")]
    modes = [h.strip() for h in args.halo.split(",")]
    overlaps = {"off": ["off"], "on": ["on"], "split": ["split"], "both": ["off", "on"],
                "all": ["off", "split", "on"]}[args.overlap]
    if args.shards:
        modes = ["exchange"]
    print(f"rtx {rtx.__version__}; HetGAT 2 layers, hidden {args.hidden}, {args.heads} heads; "
          f"synthetic_hetgraph({args.num_papers}); {args.epochs} epochs; partition "
          f"{args.method}{'; from shard files' if args.shards else ''}; {os.cpu_count()} CPUs, "
          f"shared with other users (load average {os.getloadavg()[0]:.1f} at start)")
    shard_dirs: dict[int, str] = {}
    keep = tempfile.TemporaryDirectory(prefix="rtx-bench-shards-")
    if args.shards:
        import numpy as np

        import rtx.distributed as dist
        from rtx.datasets import synthetic_hetgraph

        data = synthetic_hetgraph(args.num_papers, seed=0).astype(np.float32)
        for p in sorted({c[0] for c in configs}):
            d = os.path.join(keep.name, f"P{p}")
            t0 = time.perf_counter()
            method = "random" if args.method == "contiguous" else (
                "metis" if args.method == "auto" else args.method)
            dist.partition(data, p, d, method=method)
            print(f"partitioned into {p} shards in {time.perf_counter() - t0:.1f} s ({d})")
            shard_dirs[p] = d
        del data
    runs = []
    for rnd in range(args.rounds):
        for p, t in configs:
            for halo in modes:
                for ov in (overlaps if halo == "exchange" else ["off"]):
                    runs.append((rnd, p, t, halo, ov, launch(p, t, halo, ov,
                                                             shard_dirs.get(p), args)))
    keep.cleanup()
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    print("\nmodel (docs/distributed.md), from the round's first 1-rank run of the same mode: "
          "epoch s between base * work_r/work_1 (edge-bound) and base * nodes_r/nodes_1 "
          "(node-bound), times threads_1/threads_r; rtx peak MB between the same two "
          "fractions of base; RSS graph = peak RSS once the rank holds its share (before "
          "training); halo MB = rows received per epoch, forward + backward")
    print(f"{'round':>5} {'PxT':>5} {'mode':>10} {'rank':>4} {'nodes':>8} {'work':>9} "
          f"{'epoch s':>8} {'model s':>11} {'rtx MB':>7} {'model MB':>9} {'RSS MB':>7} "
          f"{'RSS graph':>9} {'halo MB':>8}")
    for rnd, p, t, halo, ov, res in runs:
        mode = halo[:4] + {"off": "", "split": "+split", "on": "+ov"}[ov]
        base = next((b for r_, q, _, h, o, b in runs if r_ == rnd and q == 1 and h == halo
                     and o == ov), None)
        for r in res["ranks"]:
            t_lo = t_hi = lo = hi = float("nan")
            if base is not None:
                b = base["ranks"][0]
                fw, fn = _work(r) / _work(b), r["nodes"] / b["nodes"]
                thr = base["threads_per_rank"] / t
                t_lo, t_hi = sorted((b["median_epoch_s"] * fw * thr,
                                     b["median_epoch_s"] * fn * thr))
                lo, hi = sorted((b["rtx_peak_mb"] * fw, b["rtx_peak_mb"] * fn))
            print(f"{rnd:>5} {f'{p}x{t}':>5} {mode:>10} {r['rank']:>4} {r['nodes']:>8} "
                  f"{_work(r):>9} {r['median_epoch_s']:>8.3f} {f'{t_lo:.2f}-{t_hi:.2f}':>11} "
                  f"{r['rtx_peak_mb']:>7.0f} {f'{lo:.0f}-{hi:.0f}':>9} "
                  f"{r['peak_rss_mb']:>7.0f} {r['rss_graph_mb']:>9.0f} "
                  f"{_halo_mb(r, args.hidden):>8.1f}")
    for rnd in range(args.rounds):
        for halo in modes:
            for ov in (overlaps if halo == "exchange" else ["off"]):
                one = [res for r_, p, _, h, o, res in runs
                       if r_ == rnd and p == 1 and h == halo and o == ov]
                for p, res in [(p, res) for r_, p, _, h, o, res in runs
                               if r_ == rnd and p > 1 and h == halo and o == ov]:
                    if not one:
                        continue
                    slowest = max(r["median_epoch_s"] for r in res["ranks"])
                    diff = max(abs(a - b) for a, b in zip(one[0]["loss"], res["loss"],
                                                          strict=True))
                    ratio = one[0]["ranks"][0]["median_epoch_s"] / slowest
                    rss = max(r["peak_rss_mb"] for r in res["ranks"])
                    tag = "" if ov == "off" else f" {ov}"
                    print(f"round {rnd} {halo}{tag}: 1 rank / {p} ranks (slowest) "
                          f"{ratio:.2f}x; peak RSS per rank {rss:.0f} MB vs "
                          f"{one[0]['ranks'][0]['peak_rss_mb']:.0f} MB; loss curves max "
                          f"|diff| {diff:.1e}")


def stats(args: argparse.Namespace) -> None:
    """The scaling model's partition statistics (docs/distributed.md)."""
    import numpy as np

    from rtx.datasets import synthetic_mag
    from rtx.distributed import partitioning, shards

    t0 = time.perf_counter()
    data = synthetic_mag(args.mag_scale, seed=0)
    n, e = data.num_nodes, data.num_edges
    print(f"synthetic_mag({args.mag_scale}): {n:,} nodes, {e:,} edges (with reverses), "
          f"built in {time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.1f}")
    d, b, L = args.hidden, 4, 2
    counts = data.num_nodes_dict
    info = partitioning.graph_info(data)
    rels = shards.layer_relations(info, L)
    w1 = sum(int(data[et].edge_index.shape[1]) for layer in rels for et in layer)
    rows = []
    for p in [int(v) for v in args.parts.split(",")]:
        t0 = time.perf_counter()
        parts = shards.partition_all(data, p, args.method)
        t_part = time.perf_counter() - t0
        st = shards.partition_stats(data, parts, p, L)
        local = [sum(s["owned"].values()) + sum(s["halo"].values()) for s in st]
        r = int(np.argmax(local))
        s = st[r]
        halo_rows = [sum(h.values()) for h in s["layer_halo"]]
        recv = 2 * sum(halo_rows[1:]) * d * b  # layers >= 1, forward + backward
        cut = sum(sum(x["halo"].values()) for x in st)
        # the replicated scheme on the same partition: rank r's papers' L-hop neighbourhood
        own_t = np.flatnonzero(parts[info["target"]] == r)
        lv = partitioning.khop_in_nodes(
            {et: np.asarray(data[et].edge_index.numpy() if hasattr(data[et].edge_index, "numpy")
                            else data[et].edge_index) for et in data.edge_types},
            counts, {info["target"]: own_t}, L)
        repl = sum(int(m.sum()) for m in lv[0].values()) / n
        rows.append((p, local[r] / n, s["edges"] / e, sum(s["layer_edges"]) / w1,
                     sum(s["owned"].values()), sum(s["halo"].values()), halo_rows[1:],
                     recv, cut, t_part, repl))
        print(f"P={p:>3}: partitioned in {t_part:.1f} s; largest rank {r}: owned "
              f"{sum(s['owned'].values()):,}, halo {sum(s['halo'].values()):,} "
              f"({', '.join(f'{k} {v:,}' for k, v in s['halo'].items())}), edges "
              f"{s['edges']:,}; layer-1 halo rows {halo_rows[1]:,}; received per epoch "
              f"{recv / 2**20:.1f} MB; all ranks' halo {cut:,}; replicated {L}-hop "
              f"neighbourhood {repl:.3f} of the nodes", flush=True)
    print(f"\n| P | nodes/rank `N_r/N` | edges/rank `E_r/E` | edge work `W_r/W_1` | "
          f"halo rows layer 1 | MB received / epoch (d={d}, fp32, fwd+bwd) | replicated "
          f"{L}-hop `N_r/N` |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for p, fn, fe, fw, _own, _halo, hr, recv, _cut, _t, repl in rows:
        print(f"| {p} | {fn:.3f} | {fe:.3f} | {fw:.3f} | {sum(hr):,} | {recv / 2**20:.1f} | "
              f"{repl:.3f} |")


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
    ap.add_argument("--method", default="auto", choices=["auto", "metis", "random",
                                                         "contiguous"])
    ap.add_argument("--halo", default="exchange",
                    help="halo modes to run, comma-separated: exchange, replicated")
    ap.add_argument("--overlap", default="off", choices=["off", "split", "on", "both", "all"],
                    help="with --halo exchange: off (the model's GATConv on [owned | halo] "
                         "rows), split (owned destinations only, wait for the halo first), on "
                         "(split, the owned rows computed while the halo travels); both: off "
                         "and on; all: the three")
    ap.add_argument("--shards", action="store_true",
                    help="partition into shard files first; workers read only their own")
    ap.add_argument("--stats", action="store_true",
                    help="partition statistics of synthetic_mag (no training)")
    ap.add_argument("--mag-scale", type=float, default=0.5)
    ap.add_argument("--parts", default="1,2,4,8,16,32,64")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    ap.add_argument("--rank-threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--shard-dir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
    elif args.stats:
        stats(args)
    else:
        train_runs(args)


if __name__ == "__main__":
    main()
