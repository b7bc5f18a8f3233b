"""Graph-ops suite: segment_softmax and fused message passing (issue 11), and
index_add with a warm IndexPlan vs index_select (issue 10), side by side.

    python benchmarks/bench_graph.py                 # N=100,000, E=1,000,000, float32, 2 threads
    python benchmarks/bench_graph.py --quick         # small smoke run
    python benchmarks/bench_graph.py --threads 1 --repeats 9

Anchors (when installed): PyG's ``torch_geometric.utils.softmax`` and torch's
``index_select`` + ``mul`` + ``index_add_`` chain.  Every case is forward +
backward, timed interleaved (A B C A B C ...), medians reported with ratios.
``cold`` passes raw indices (checked and grouped on every call), ``plan`` a
warm ``rtx.IndexPlan`` / ``rtx.EdgeIndex`` (grouping cached).  Working memory
of message passing: rtx's ``memory_stats()["peak_bytes"]`` during the call
minus the bytes held before it and minus output + gradients (what any
implementation must hold).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import rtx


def _try(name: str) -> Any:
    try:
        return __import__(name, fromlist=["_"])
    except Exception:  # noqa: BLE001 - optional anchor
        return None


def interleaved(cases: dict[str, Callable[[], Any]], repeats: int, gap: float) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in cases}
    for fn in cases.values():
        fn()  # warm-up (and, for plans, the one-off grouping)
    gc.collect()
    for _ in range(repeats):
        for k, fn in cases.items():
            time.sleep(gap)
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def machine() -> str:
    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            model = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}"


def row(name: str, t: float, base: float) -> str:
    return f"| {name} | {t * 1e3:.1f} | {t / base:.2f} |"


def softmax_suite(N, E, H, T, repeats, gap, torch, pyg) -> list[str]:
    rng = np.random.default_rng(0)
    idx = rng.integers(0, N, E)
    shape = (E,) if H == 1 else (E, H)
    s = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    plan = rtx.IndexPlan(idx, N)
    gt = rtx.tensor(g)

    def run_rtx(index: Any) -> Callable[[], Any]:
        def f() -> None:
            t = rtx.tensor(s, requires_grad=True)
            rtx.segment_softmax(t, index, N).backward(gt)
        return f

    cases = {"rtx cold": run_rtx(idx), "rtx plan": run_rtx(plan)}
    if pyg is not None:
        ti, tg = torch.from_numpy(idx), torch.from_numpy(g)

        def run_pyg() -> None:
            t = torch.from_numpy(s).requires_grad_()
            pyg.utils.softmax(t, ti, num_nodes=N).backward(tg)
        cases["PyG softmax"] = run_pyg
        # values agree
        t = rtx.segment_softmax(rtx.tensor(s), plan, N).numpy()
        ref = pyg.utils.softmax(torch.from_numpy(s), ti, num_nodes=N).numpy()
        np.testing.assert_allclose(t, ref, rtol=1e-4, atol=1e-6)
    med = interleaved(cases, repeats, gap)
    base = med.get("PyG softmax", med["rtx cold"])
    return [row(f"segment_softmax H={H} {k}", v, base) for k, v in med.items()]


def message_suite(N, E, H, C, T, repeats, gap, torch) -> list[str]:
    rng = np.random.default_rng(1)
    ei = np.stack([rng.integers(0, N, E), rng.integers(0, N, E)])
    x = rng.standard_normal((N, H, C)).astype(np.float32)
    w = rng.standard_normal((E, H)).astype(np.float32)
    g = rng.standard_normal((N, H, C)).astype(np.float32)
    plan = rtx.EdgeIndex(ei, N, N)
    plan.src.csr()
    plan.dst.csr()
    gt = rtx.tensor(g)
    mem: dict[str, float] = {}

    def run_rtx(edge: Any) -> Callable[[], Any]:
        def f() -> None:
            xt = rtx.tensor(x, requires_grad=True)
            wt = rtx.tensor(w, requires_grad=True)
            rtx.message_passing(xt, edge, N, wt).backward(gt)
        return f

    def working_memory(edge: Any) -> int:
        xt = rtx.tensor(x, requires_grad=True)
        wt = rtx.tensor(w, requires_grad=True)
        gc.collect()
        before = rtx.memory_stats()["current_bytes"]
        rtx.reset_peak_memory_stats()
        out = rtx.message_passing(xt, edge, N, wt)
        out.backward(gt)
        peak = rtx.memory_stats()["peak_bytes"]
        assert xt.grad is not None and wt.grad is not None
        must = out.numpy().nbytes + xt.grad.numpy().nbytes + wt.grad.numpy().nbytes
        return peak - before - must

    mem["cold"] = working_memory(ei)
    mem["plan"] = working_memory(plan)
    cases = {"rtx cold": run_rtx(ei), "rtx plan": run_rtx(plan)}
    if torch is not None:
        ts, td = torch.from_numpy(ei[0]), torch.from_numpy(ei[1])
        tg = torch.from_numpy(g)

        def run_torch() -> None:
            tx = torch.from_numpy(x).requires_grad_()
            tw = torch.from_numpy(w).requires_grad_()
            msg = tx.index_select(0, ts) * tw.unsqueeze(-1)
            out = torch.zeros((N, H, C)).index_add_(0, td, msg)
            out.backward(tg)
        cases["torch chain"] = run_torch
        xt = rtx.tensor(x)
        ref = torch.zeros((N, H, C)).index_add_(
            0, td, torch.from_numpy(x).index_select(0, ts) * torch.from_numpy(w).unsqueeze(-1))
        np.testing.assert_allclose(rtx.message_passing(xt, plan, N, rtx.tensor(w)).numpy(),
                                   ref.numpy(), rtol=1e-4, atol=1e-4)
    med = interleaved(cases, repeats, gap)
    base = med.get("torch chain", med["rtx cold"])
    lines = [row(f"message_passing H={H} C={C} {k}", v, base) for k, v in med.items()]
    msg_bytes = E * H * C * 4
    for k in ("cold", "plan"):
        lines.append(f"| working memory rtx {k} | {mem[k] / 2**20:.1f} MiB | "
                     f"{mem[k] / msg_bytes:.3f}x of the [E,H,C] message tensor "
                     f"({msg_bytes / 2**20:.0f} MiB) |")
    return lines


def index_suite(N, E, F, repeats, gap) -> list[str]:
    rng = np.random.default_rng(2)
    idx = rng.integers(0, N, E)
    plan = rtx.IndexPlan(idx, N)
    plan.csr()
    x = rtx.tensor(rng.standard_normal((N, F)).astype(np.float32))
    src = rtx.tensor(rng.standard_normal((E, F)).astype(np.float32))
    med = interleaved({
        "index_select": lambda: rtx.index_select(x, plan),
        "index_add warm plan": lambda: rtx.index_add(src, plan, N),
        "index_add cold": lambda: rtx.index_add(src, idx, N),
    }, repeats, gap)
    base = med["index_select"]
    return [row(f"F={F} {k}", v, base) for k, v in med.items()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--gap", type=float, default=0.02,
                   help="sleep before each timed call (lets the other OpenMP runtime idle)")
    args = p.parse_args(argv)
    N, E = (2000, 20000) if args.quick else (100_000, 1_000_000)
    T = args.threads
    rtx.set_num_threads(T)
    torch = _try("torch")
    pyg = _try("torch_geometric")
    if torch is not None:
        torch.set_num_threads(T)
    print(f"# rtx graph-ops benchmark, "
          f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    print(f"# {machine()}; threads={T}; N={N:,} E={E:,} float32; "
          f"loadavg {' '.join(f'{v:.2f}' for v in os.getloadavg())}; repeats={args.repeats}")
    print(f"# torch {getattr(torch, '__version__', 'absent')}, "
          f"torch_geometric {getattr(pyg, '__version__', 'absent')}")
    print("\n| case (forward + backward) | median ms | ratio vs anchor |\n|---|---|---|")
    for H in (1, 8):
        print("\n".join(softmax_suite(N, E, H, T, args.repeats, args.gap, torch, pyg)))
    print("\n".join(message_suite(N, E, 4, 16, T, args.repeats, args.gap, torch)))
    print("\n| index op (warm plan) | median ms | ratio vs index_select |\n|---|---|---|")
    for F in (16, 64):
        print("\n".join(index_suite(N, E, F, args.repeats, args.gap)))
    print(f"# loadavg after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
