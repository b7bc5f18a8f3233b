"""HetGAT epoch against the number of relations, the edge count fixed (issue 22 item 1).

    python benchmarks/bench_relations.py                      # 6, 20, 60 relations, 400k edges
    python benchmarks/bench_relations.py --relations 6 60 --edges 1000000
    python benchmarks/bench_relations.py --quick              # a smoke run

The graph (``benchmarks.graphs.relations_hetgraph``): 30,000 papers (128-d), as many
authors (64-d) and 1,000 subjects (32-d), the same for every relation count; ``R``
relations cycling over the six ordered pairs of distinct node types split a fixed
budget of ``--edges`` edges (no relation joins a type to itself, so no self-loops are
added: the edge count is exactly the budget).  The model, the weights, the check of
the epoch-0 losses and the child processes are ``bench_hetgat.py``'s (2 layers, hidden
64 = 4 x 16, Adam; each library in its own child, rotated, medians over rounds).

Libraries: ``rtx:per-relation`` (today's path: one GATConv per relation),
``rtx:grouped`` (the grouped projections and typed message passing of issue 22, passed
as ``HetGAT(..., path="grouped")`` once HetGAT has that argument; until then it prints
n/a), PyG's ``HeteroConv(GATConv)`` and DGL's ``HeteroGraphConv(GATConv)``.

Printed: epoch time per library and relation count, its growth from the smallest
relation count (linear growth would be ``R / R_min``), rtx's ratios to PyG and DGL,
and grouped / per-relation (target: at most 0.5x at 60 relations, and sub-linear
growth).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.append(os.path.dirname(HERE))
from benchmarks import bench_hetgat as bh  # noqa: E402
from benchmarks._proc import load_str, loadavg, use_checkout_build, write_json  # noqa: E402

DEFAULT_LIBS = "rtx:per-relation,rtx:grouped,pyg,dgl"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--relations", type=int, nargs="+", default=[6, 20, 60])
    ap.add_argument("--edges", type=int, default=400_000, help="the fixed edge budget")
    ap.add_argument("--papers", type=int, default=30_000)
    ap.add_argument("--quick", action="store_true",
                    help="2,000 papers, 20,000 edges, 6 and 20 relations, 3 epochs, 1 round")
    bh.add_common_arguments(ap)
    ap.set_defaults(epochs=6, rounds=2, libs=DEFAULT_LIBS)
    args = ap.parse_args(argv)
    args.no_pyg, args.path = False, "default"
    if args.quick:
        args.papers, args.edges, args.relations = 2000, 20_000, [6, 20]
        args.epochs, args.rounds = 3, 1
    use_checkout_build()

    import rtx
    from benchmarks.graphs import relations_hetgraph

    libs, versions = bh.available_libs(args)
    t0, load0 = time.time(), loadavg()
    print(f"rtx {rtx.__version__} from {os.path.dirname(os.path.realpath(rtx.__file__))}")
    print(f"HetGAT epoch vs relation count: {args.papers} papers, {args.edges} edges split "
          f"over {args.relations} relations; {versions}; {args.threads} threads; "
          f"{args.epochs} epochs (first untimed), {args.rounds} rounds; libraries "
          f"{', '.join(libs)}")
    print(f"load average at start: {load_str()}", flush=True)
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-relations-") as tmp:
        for R in args.relations:
            g = relations_hetgraph(R, args.edges, args.papers, seed=args.seed)
            results[R] = bh.compare(g, f"relations-{R}", libs, args, tmp)
    summary = scaling(results)
    print_scaling(results, summary)
    load1 = loadavg()
    print(f"load average at end: {load_str()} (start {' '.join(f'{v:.2f}' for v in load0)}); "
          f"{time.time() - t0:.0f} s")
    if args.json:
        write_json(args.json, {"benchmark": "relations", "papers": args.papers,
                               "edges": args.edges, "threads": args.threads,
                               "epochs": args.epochs, "rounds": args.rounds,
                               "versions": versions, "load_start": list(load0),
                               "load_end": list(load1), "seconds": time.time() - t0,
                               "relations": {str(k): v for k, v in results.items()},
                               "scaling": summary})
    return 0


def scaling(results: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per library: epoch seconds by relation count and the growth from the smallest;
    grouped / per-relation and rtx / anchors by relation count."""
    rs = sorted(results)
    per: dict[str, dict[str, Any]] = {}
    for R in rs:
        for lib, v in results[R]["summary"]["libs"].items():
            per.setdefault(lib, {})[str(R)] = v["epoch_s"]
    growth = {lib: {R: (t[R] / t[str(rs[0])] if str(rs[0]) in t and t[R] else None)
                    for R in t} for lib, t in per.items()}
    grouped: dict[str, float | None] = {}
    for R in rs:
        t = results[R]["summary"]["libs"]
        g, p = t.get("rtx:grouped"), t.get("rtx:per-relation")
        grouped[str(R)] = g["epoch_s"] / p["epoch_s"] if g and p else None
    return {"epoch_s": per, "growth": growth, "linear_growth": {str(R): R / rs[0] for R in rs},
            "grouped_over_per_relation": grouped}


def print_scaling(results: dict[int, dict[str, Any]], s: dict[str, Any]) -> None:
    rs = sorted(results)
    print("\n| library | " + " | ".join(f"R={R} epoch (s)" for R in rs) + " | " +
          " | ".join(f"growth R={R}/{rs[0]}" for R in rs[1:]) + " |")
    print("|---|" + "---|" * (2 * len(rs) - 1))
    for lib, t in s["epoch_s"].items():
        cells = [f"{t[str(R)]:.3f}" if t.get(str(R)) else "n/a" for R in rs]
        gr = [f"{s['growth'][lib][str(R)]:.2f}x" if s["growth"][lib].get(str(R)) else "n/a"
              for R in rs[1:]]
        print(f"| {lib} | " + " | ".join(cells + gr) + " |")
    print("| (linear) | " + " | ".join("" for _ in rs) + " | " +
          " | ".join(f"{s['linear_growth'][str(R)]:.2f}x" for R in rs[1:]) + " |")
    print("\n| R | grouped / per-relation | " + " | ".join(
        k for k in results[rs[0]]["summary"]["ratios"]) + " |")
    print("|---|---|" + "---|" * len(results[rs[0]]["summary"]["ratios"]))
    for R in rs:
        g = s["grouped_over_per_relation"][str(R)]
        rat = results[R]["summary"]["ratios"]
        print(f"| {R} | {'n/a' if g is None else f'{g:.2f}x'} | " + " | ".join(
            "-" if r["epoch_s"] is None else f"{r['epoch_s']:.2f}x" for r in rat.values()) + " |")


if __name__ == "__main__":
    sys.exit(main())
