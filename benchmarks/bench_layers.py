"""New conv layers, forward + backward: rtx beside PyTorch Geometric, same
process, same weights (PyG's state_dict loaded into rtx), same inputs, same
threads.

    python benchmarks/bench_layers.py                 # N = 100k nodes, E = 1M edges, 2 threads
    python benchmarks/bench_layers.py --quick         # a smoke run (seconds)
    python benchmarks/bench_layers.py --layers gatv2 --repeats 10
    python benchmarks/bench_layers.py --layers rgcn-8,rgcn-64,hetlin-8

One step = the layer's forward, ``(out * w).sum()`` and its backward (input and
parameter gradients).  Time: the median of ``--repeats`` steps after one
warm-up step (which also lets rtx check and group the edge index once, as a
training loop does).  Working memory of one step: the growth of the peak RSS
(Linux ``VmHWM`` after ``clear_refs``) over the RSS before the step, with rtx's
allocator cache emptied and glibc's free pages trimmed (``malloc_trim``)
first; rtx's own allocator peak (``rtx.memory_stats``)
beside it.  Ratios are rtx / PyG (lower is better for rtx).  The load average
is printed at the start and the end: figures from a loaded machine are not of
record.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:   # `benchmarks` importable, after any installed rtx
    sys.path.append(os.path.dirname(HERE))
from benchmarks._proc import (  # noqa: E402 - stdlib only
    reset_peak,
    rss_kib,
    use_checkout_build,
    write_json,
)


def _trim() -> None:
    """Give freed heap pages back to the OS (glibc), so that the next step's RSS
    growth is its own working memory, not the reuse of pages kept resident."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _measure(step: Callable[[], Any], repeats: int, before: Callable[[], None]
             ) -> tuple[float, float]:
    """(median seconds per step, peak-RSS growth of one step in MiB)."""
    step()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    before()
    gc.collect()
    _trim()
    mem = float("nan")
    if reset_peak():
        rss0 = rss_kib("VmRSS")
        step()
        mem = (rss_kib("VmHWM") - rss0) / 1024
    return statistics.median(times), mem


def build(kind: str, args: argparse.Namespace, ei: np.ndarray,
          rng: np.random.Generator) -> dict[str, Any]:
    """The PyG layer and the rtx one (PyG's weights loaded), and each side's call
    on its own input ``x`` (the edges as each library takes them in a training
    loop: torch tensors for PyG, rtx plans built once for rtx)."""
    import torch
    import torch_geometric.nn as pyg

    import rtx
    from rtx.nn import GATv2Conv, HeteroLinear, RGCNConv, SAGEConv

    F, O = args.features, args.out
    et = torch.from_numpy(ei)
    call_ref: Callable[[Any], Any] = lambda x: ref(x, et)  # noqa: E731
    call_mine: Callable[[Any], Any] = lambda x: mine(x, ei)  # noqa: E731
    if kind.startswith("sage"):
        aggr = kind.split("-")[1]
        ref = pyg.SAGEConv(F, O, aggr=aggr)
        mine = SAGEConv(F, O, aggr=aggr)
        out_width = O
    elif kind == "gatv2":
        C = O // args.heads
        ref = pyg.GATv2Conv(F, C, heads=args.heads)
        mine = GATv2Conv(F, C, heads=args.heads)
        out_width = C * args.heads
    elif kind.startswith("rgcn"):  # rgcn-<relations>: mean per relation
        R = int(kind.split("-")[1])
        types = rng.integers(0, R, ei.shape[1])
        ref, mine, out_width = pyg.RGCNConv(F, O, R), RGCNConv(F, O, R), O
        tt = torch.from_numpy(types)
        edges, tplan = rtx.EdgeIndex(ei, args.nodes), rtx.IndexPlan(types, R)
        call_ref = lambda x: ref(x, et, tt)  # noqa: E731
        call_mine = lambda x: mine(x, edges, tplan)  # noqa: E731
    elif kind.startswith("hetlin"):  # hetlin-<types>: HeteroLinear over the nodes
        T = int(kind.split("-")[1])
        types = rng.integers(0, T, args.nodes)
        ref, mine, out_width = pyg.HeteroLinear(F, O, T), HeteroLinear(F, O, T), O
        tt = torch.from_numpy(types)
        tplan = rtx.IndexPlan(types, T)
        call_ref = lambda x: ref(x, tt)  # noqa: E731
        call_mine = lambda x: mine(x, tplan)  # noqa: E731
    else:
        raise ValueError(kind)
    mine.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    return {"ref": ref, "mine": mine, "out": out_width, "torch": torch, "rtx": rtx,
            "call_ref": call_ref, "call_mine": call_mine}


def run_layer(kind: str, args: argparse.Namespace, x: np.ndarray, ei: np.ndarray,
              rng: np.random.Generator) -> tuple[str, float, float, float, float, float]:
    """(kind, rtx s, pyg s, rtx MiB, pyg MiB, rtx allocator peak MiB) of one layer."""
    b = build(kind, args, ei, rng)
    torch, rtx = b["torch"], b["rtx"]
    ref, mine = b["ref"], b["mine"]
    call_ref, call_mine = b["call_ref"], b["call_mine"]
    w = rng.standard_normal((args.nodes, b["out"])).astype(np.float32)
    xt = torch.from_numpy(x).requires_grad_()
    wt = torch.from_numpy(w)
    xr = rtx.tensor(x, requires_grad=True)
    wr = rtx.tensor(w)

    def step_pyg() -> None:
        xt.grad = None
        ref.zero_grad(set_to_none=True)
        (call_ref(xt) * wt).sum().backward()

    def step_rtx() -> None:
        xr.grad = None
        mine.zero_grad()
        (call_mine(xr) * wr).sum().backward()

    t_pyg, m_pyg = _measure(step_pyg, args.repeats, lambda: None)
    rtx.empty_cache()
    rtx.reset_peak_memory_stats()
    cur = rtx.memory_stats()["current_bytes"]
    t_rtx, m_rtx = _measure(step_rtx, args.repeats, rtx.empty_cache)
    alloc = (rtx.memory_stats()["peak_bytes"] - cur) / 2**20
    del b, step_pyg, step_rtx
    gc.collect()
    rtx.empty_cache()
    return kind, t_rtx, t_pyg, m_rtx, m_pyg, alloc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--edges", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--out", type=int, default=64, help="output width (heads x per-head)")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--layers", default="sage-mean,sage-max,gatv2,rgcn-8,rgcn-64,hetlin-8",
                   help="rgcn-<R>: RGCNConv with R relations; hetlin-<T>: HeteroLinear, "
                        "T types")
    p.add_argument("--quick", action="store_true", help="N = 5k, E = 50k, 2 repeats")
    p.add_argument("--json", default=None, help="also write the figures here (atomically)")
    args = p.parse_args(argv)
    if args.quick:
        args.nodes, args.edges, args.repeats = 5_000, 50_000, 2
    use_checkout_build()
    import torch

    import rtx

    torch.set_num_threads(args.threads)
    rtx.set_num_threads(args.threads)
    load0 = os.getloadavg()
    print(f"bench_layers: N={args.nodes:,} E={args.edges:,} F={args.features} "
          f"out={args.out} heads={args.heads} threads={args.threads} float32; "
          f"load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    rng = np.random.default_rng(0)
    ei = rng.integers(0, args.nodes, (2, args.edges)).astype(np.int64)
    x = rng.standard_normal((args.nodes, args.features)).astype(np.float32)
    rows = [run_layer(kind, args, x, ei, rng) for kind in args.layers.split(",")]
    load1 = os.getloadavg()
    print(f"{'layer':<10} {'rtx ms':>8} {'pyg ms':>8} {'time x':>7} {'rtx MiB':>8} "
          f"{'pyg MiB':>8} {'mem x':>6} {'rtx alloc MiB':>13}")
    for kind, tr, tp, mr, mp, al in rows:
        print(f"{kind:<10} {tr * 1e3:8.1f} {tp * 1e3:8.1f} {tr / tp:7.2f} {mr:8.1f} {mp:8.1f} "
              f"{mr / mp if mp > 0 else float('nan'):6.2f} {al:13.1f}")
    print(f"load average at end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} "
          "(not of record unless the machine was quiet)")
    if args.json:
        write_json(args.json, {
            "nodes": args.nodes, "edges": args.edges, "features": args.features,
            "out": args.out, "heads": args.heads, "threads": args.threads,
            "repeats": args.repeats, "load_start": list(load0), "load_end": list(load1),
            "versions": {"rtx": getattr(rtx, "__version__", "?"), "torch": torch.__version__},
            "layers": {kind: {"rtx_s": tr, "pyg_s": tp, "time_x": tr / tp, "rtx_mib": mr,
                              "pyg_mib": mp, "mem_x": mr / mp if mp > 0 else None,
                              "rtx_alloc_mib": al}
                       for kind, tr, tp, mr, mp, al in rows}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
