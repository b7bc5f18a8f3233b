"""Side-by-side benchmarks: ``python -m benchmarks <subcommand> [options]``
(or ``python benchmarks/run.py <subcommand>``).

Every subcommand times rtx against the alternatives a user would pick, in one
process, interleaved (A B C A B C ...), and prints medians and ratios.  Speed
claims come from here, never from timed unit tests.

Adding a benchmark is one function::

    @subcommand("tape", "autograd tape overhead")
    def bench_tape(args: argparse.Namespace) -> int:
        ...

in a module of ``benchmarks/`` that ``benchmarks/run.py`` imports
and, if it takes options, an ``add_arguments`` callable passed to
``subcommand``.  Shared helpers: :func:`interleaved` (medians of interleaved
runs), :func:`copy_bandwidth` (the machine's copy bandwidth, measured now),
:func:`machine` (a one-line description), :func:`table` (aligned text table).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import importlib
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

# ------------------------------------------------------------ subcommand registry
_COMMANDS: dict[str, tuple[str, Callable[[argparse.Namespace], int],
                           Callable[[argparse.ArgumentParser], None] | None]] = {}


def subcommand(
    name: str,
    help: str,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register ``fn(args) -> exit code`` as ``python -m benchmarks <name>``."""

    def deco(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        if name in _COMMANDS:
            raise ValueError(f"benchmark subcommand {name!r} is already registered")
        _COMMANDS[name] = (help, fn, add_arguments)
        return fn

    return deco


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_, _fn, add_args) in _COMMANDS.items():
        p = sub.add_parser(name, help=help_)
        p.add_argument("--threads", type=int, default=None,
                       help="thread count for every library (default: rtx.get_num_threads())")
        p.add_argument("--repeats", type=int, default=None, help="timed runs per case")
        if add_args is not None:
            add_args(p)
    args = parser.parse_args(argv)
    return _COMMANDS[args.command][1](args)


# ----------------------------------------------------------------------- helpers
def machine() -> str:
    """CPU model, usable cores and the date: for result tables."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    from rtx._threads import _usable_cpus

    return (f"{model}, {_usable_cpus()} usable cores, {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}, numpy {np.__version__}")


def today() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def interleaved(cases: dict[str, Callable[[], Any]], repeats: int,
                warmup: int = 1, gap: float = 0.0) -> dict[str, float]:
    """Median wall time (s) of each case, run interleaved: A B C A B C ...

    Each call's result is dropped outside the timed region.  ``gap`` seconds of
    sleep precede every timed call (outside the timing): two OpenMP runtimes in
    one process (rtx's and torch's) each keep their workers spinning for a few
    ms after a parallel region, and on 2 cores those spinning workers stall the
    other library's next parallel region by a scheduler time slice.  Returns
    ``{name: median seconds}``; first-call times are in ``interleaved.first``, all times in
    ``interleaved.times``.
    """
    times: dict[str, list[float]] = {k: [] for k in cases}
    first: dict[str, float] = {}
    for k, fn in cases.items():
        for w in range(warmup):
            if gap:
                time.sleep(gap)
            t0 = time.perf_counter()
            r = fn()
            if w == 0:
                first[k] = time.perf_counter() - t0
            del r
    gc.collect()
    for _ in range(repeats):
        for k, fn in cases.items():
            if gap:
                time.sleep(gap)
            t0 = time.perf_counter()
            r = fn()
            times[k].append(time.perf_counter() - t0)
            del r
    interleaved.first = first  # type: ignore[attr-defined]
    interleaved.times = times  # type: ignore[attr-defined]
    return {k: statistics.median(v) for k, v in times.items()}


def copy_bandwidth(nbytes: int, threads: int, repeats: int = 5) -> dict[str, float]:
    """Copy bandwidth in GB/s (bytes read + bytes written per second).

    ``parallel``: rtx's blocked memcpy on ``threads`` threads into a warm
    buffer; ``numpy``: ``np.copyto`` (one thread).  Measured in this process,
    interleaved.
    """
    from rtx import _kernels

    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.zeros(nbytes, dtype=np.uint8)
    med = interleaved({
        "parallel": lambda: _kernels.copy_bandwidth_kernel(src, dst, threads),
        "numpy": lambda: np.copyto(dst, src),
    }, repeats)
    return {k: 2 * nbytes / v / 1e9 for k, v in med.items()}


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(w) if i else h.ljust(w)
                     for i, (h, w) in enumerate(zip(headers, widths, strict=True)))
    out = [line, "-" * len(line)]
    for r in rows:
        out.append("  ".join(c.rjust(w) if i else c.ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    return "\n".join(out)


def _ms(t: float) -> str:
    return f"{t * 1e3:.2f}" if t < 0.01 else f"{t * 1e3:.1f}"


def _loadavg() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def _try_import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - optional anchor
        return None


# ------------------------------------------------------------------- index benchmark
GAP = 0.0  # s of sleep before each timed call: see interleaved()

def _index_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    p.add_argument("--rows", type=int, default=100_000, help="N, rows of x / of the output")
    p.add_argument("--indices", type=int, default=1_000_000, help="E, number of indices")
    p.add_argument("--features", type=str, default="1,16,64,256", help="F values, comma separated")
    p.add_argument("--orders", type=str, default="uniform,sorted")
    p.add_argument("--ops", type=str, default="select,add")
    p.add_argument("--anchors", type=str, default="numpy,scipy,torch",
                   help="optional anchors to time when installed (numpy always runs)")
    p.add_argument("--oracle-max", type=int, default=64_000_000,
                   help="run np.add.at only when E*F is at most this (it takes seconds)")
    p.add_argument("--threshold", action="store_true",
                   help="measure the serial/parallel cut-over instead")
    p.add_argument("--strategies", action="store_true",
                   help="also time every scatter strategy (rows/csr/cols/serial)")


def _index_data(N: int, E: int, F: int, order: str, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, N, E, dtype=np.int64)
    if order == "sorted":
        idx.sort()
    x = rng.standard_normal((N, F), dtype=np.float32)
    src = rng.standard_normal((E, F), dtype=np.float32)
    return idx, x, src


def _bench_select(N: int, E: int, F: int, order: str, T: int, repeats: int,
                  torch: Any, bw: float) -> list[list[str]]:
    import rtx

    idx, x, _ = _index_data(N, E, F, order)
    xt = rtx.from_numpy(x)
    cases: dict[str, Callable[[], Any]] = {
        "rtx.index_select": lambda: rtx.index_select(xt, idx),
        "numpy x[idx]": lambda: x[idx],
        "np.take(out=np.empty)": lambda: np.take(x, idx, axis=0, out=np.empty((E, F), x.dtype)),
    }
    prealloc = np.empty((E, F), x.dtype)
    ref_cases = {"np.take(out=prealloc) [no alloc]":
                 lambda: np.take(x, idx, axis=0, out=prealloc)}
    if torch is not None:
        tx, ti = torch.from_numpy(x), torch.from_numpy(idx)
        tout = torch.empty((E, F), dtype=torch.float32)
        cases["torch.index_select"] = lambda: torch.index_select(tx, 0, ti)
        ref_cases["torch.index_select(out=) [no alloc]"] = (
            lambda: torch.index_select(tx, 0, ti, out=tout))
    # correctness first: the benchmark refuses to time a wrong answer
    if not np.array_equal(rtx.index_select(xt, idx).numpy(), x[idx]):
        raise AssertionError("rtx.index_select disagrees with numpy")
    med = interleaved({**cases, **ref_cases}, repeats, gap=GAP)
    first = interleaved.first["rtx.index_select"]  # type: ignore[attr-defined]
    nbytes = 2 * E * F * 4 + E * 8
    anchors = {k: v for k, v in med.items() if k in cases and not k.startswith("rtx")}
    best = min(anchors, key=lambda k: anchors[k])
    rows = []
    for k, v in med.items():
        gbs = nbytes / v / 1e9
        rows.append([f"select F={F} {order}", k, _ms(v), f"{v / med['rtx.index_select']:.2f}",
                     f"{gbs:.1f}", f"{gbs / bw * 100:.0f}%"])
    rows.append([f"select F={F} {order}", f"=> fastest anchor ({best}) / rtx",
                 f"{anchors[best] / med['rtx.index_select']:.2f}x",
                 f"rtx first call {_ms(first)} ms", "", ""])
    return rows


def _bench_add(N: int, E: int, F: int, order: str, T: int, repeats: int, torch: Any,
               scipy_sparse: Any, bw: float, oracle_max: int,
               strategies: bool) -> list[list[str]]:
    import rtx
    from rtx import _kernels

    idx, _, src = _index_data(N, E, F, order, seed=1)
    st = rtx.from_numpy(src)
    out_rtx = rtx.index_add(st, idx, N).numpy()
    cases: dict[str, Callable[[], Any]] = {"rtx.index_add": lambda: rtx.index_add(st, idx, N)}
    if strategies:
        for name in ("serial", "rows", "csr", "cols"):
            code = _kernels.SCATTER_STRATEGIES[name]

            def run(code: int = code) -> Any:
                out = np.empty((N, F), np.float32)
                _kernels.scatter_add_rows(src, idx, out, T, code)
                return out

            cases[f"kernel strategy={name}"] = run
    if scipy_sparse is not None:
        t0 = time.perf_counter()
        A = scipy_sparse.csr_matrix(
            (np.ones(E, np.float32), (idx, np.arange(E))), shape=(N, E))
        build = time.perf_counter() - t0
        cases["scipy CSR @ src (prebuilt)"] = lambda: A @ src
        ref = A @ src
        if not np.allclose(ref, out_rtx, rtol=1e-4, atol=1e-4):
            raise AssertionError("rtx.index_add disagrees with scipy")
    if torch is not None:
        tsrc, ti = torch.from_numpy(src), torch.from_numpy(idx)
        cases["torch.zeros().index_add_"] = (
            lambda: torch.zeros((N, F), dtype=torch.float32).index_add_(0, ti, tsrc))
    med = interleaved(cases, repeats, gap=GAP)
    first = interleaved.first["rtx.index_add"]  # type: ignore[attr-defined]
    if E * F <= oracle_max:
        t0 = time.perf_counter()
        oracle = np.zeros((N, F), np.float32)
        np.add.at(oracle, idx, src)
        med["np.add.at (oracle, 1 run)"] = time.perf_counter() - t0
        if not np.array_equal(oracle.view(np.int32), out_rtx.view(np.int32)):
            raise AssertionError("rtx.index_add is not bitwise equal to np.add.at")
    nbytes = E * F * 4 + E * 8 + N * F * 4
    rows = []
    for k, v in med.items():
        gbs = nbytes / v / 1e9
        rows.append([f"add F={F} {order}", k, _ms(v), f"{v / med['rtx.index_add']:.2f}",
                     f"{gbs:.1f}", f"{gbs / bw * 100:.0f}%"])
    summary = []
    for k in med:
        if k.startswith(("scipy", "torch")):
            summary.append(f"{k.split()[0].split('.')[0]} {med[k] / med['rtx.index_add']:.2f}x")
    rows.append([f"add F={F} {order}", "=> anchor / rtx: " + ", ".join(summary),
                 f"rtx first call {_ms(first)} ms",
                 f"CSR build {_ms(build)} ms" if scipy_sparse is not None else "", "", ""])
    return rows


def _bench_threshold(T: int, repeats: int) -> int:
    """Serial vs parallel time of the kernels at growing sizes; prints the cut-over.

    Gather: F=16; scatter: F=64 (narrower rows stay serial at any size, see
    ``SCATTER_MIN_ROW_BYTES`` in rtx/_index.pxi).  Preallocated outputs, so
    only the kernels are compared.
    """
    from rtx import _kernels

    old = _kernels.get_parallel_thresholds()
    big = 1 << 62
    print(f"serial vs {T}-thread kernel time (min over {repeats} interleaved runs of a loop), "
          "float32, preallocated output")
    rows = []
    try:
        for op, F, N in (("gather", 16, 4096), ("scatter", 64, 1024)):
            cross = None
            for kb in (4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096):
                E = max(1, kb * 1024 // (4 * F))
                idx, x, src = _index_data(N, E, F, "uniform")
                out = np.empty((E if op == "gather" else N, F), np.float32)
                inner = max(1, 2_000_000 // (kb * 1024))

                def loop(thr: int, op: str = op, idx: np.ndarray = idx, x: np.ndarray = x,
                         src: np.ndarray = src, out: np.ndarray = out, inner: int = inner) -> None:
                    _kernels.set_parallel_thresholds(**{op: thr})
                    f = _kernels.gather_rows if op == "gather" else _kernels.scatter_add_rows
                    a = x if op == "gather" else src
                    for _ in range(inner):
                        f(a, idx, out, T)

                interleaved({"serial": lambda: loop(big), "parallel": lambda: loop(0)}, repeats)
                s, p = (min(v) / inner for v in interleaved.times.values())  # type: ignore
                if cross is None and p < s:
                    cross = kb
                rows.append([f"{op} F={F}", f"{kb} KiB", f"{s * 1e6:.1f}", f"{p * 1e6:.1f}",
                             f"{s / p:.2f}"])
            rows.append([op, f"-> parallel first faster at {cross} KiB", "", "", ""])
    finally:
        _kernels.set_parallel_thresholds(**old)
    print(table(["op", "bytes moved", "serial us", "parallel us", "speed-up"], rows))
    print(f"current thresholds (bytes): {old}")
    return 0


@subcommand("index", "index_select / index_add against numpy, scipy and torch",
            _index_arguments)
def bench_index(args: argparse.Namespace) -> int:
    import rtx

    if args.threads is not None:
        rtx.set_num_threads(args.threads)
    T = rtx.get_num_threads()
    repeats = args.repeats or (3 if args.quick else 7)
    if args.threshold:
        return _bench_threshold(T, repeats if args.repeats else 15)
    if args.quick:
        N, E, Fs = 2_000, 20_000, [1, 16]
    else:
        N, E, Fs = args.rows, args.indices, [int(f) for f in args.features.split(",")]
    anchors = args.anchors.split(",")
    torch = _try_import("torch") if "torch" in anchors else None
    if torch is not None:
        torch.set_num_threads(T)
    scipy_sparse = _try_import("scipy.sparse") if "scipy" in anchors else None
    bw = copy_bandwidth(64 << 20 if args.quick else 256 << 20, T)
    print(f"# rtx index benchmark, {today()}")
    print(f"# machine: {machine()}")
    print(f"# rtx {rtx.__version__}, OpenMP {rtx._kernels.openmp_enabled()}, threads {T} for "
          f"rtx and torch (numpy and scipy run on 1); torch "
          f"{getattr(torch, '__version__', 'not installed')}, scipy "
          f"{'installed' if scipy_sparse is not None else 'not installed'}")
    print(f"# float32, N={N:,} rows, E={E:,} int64 indices, medians of {repeats} interleaved runs; "
          f"output allocation counted for everyone unless marked [no alloc]")
    print(f"# copy bandwidth (read+write): {bw['parallel']:.1f} GB/s on {T} threads, "
          f"{bw['numpy']:.1f} GB/s np.copyto on 1; %bw below is against the {T}-thread figure")
    print(f"# parallel thresholds (bytes moved): {rtx._kernels.get_parallel_thresholds()}")
    print(f"# load average at start (1/5/15 min): {_loadavg()}: other processes on a shared "
          "machine stall every parallel region (its join waits for a descheduled thread)")
    rows: list[list[str]] = []
    ops = args.ops.split(",")
    for F in Fs:
        for order in args.orders.split(","):
            rtx.empty_cache()
            if "select" in ops:
                rows += _bench_select(N, E, F, order, T, repeats, torch, bw["parallel"])
            rtx.empty_cache()
            if "add" in ops:
                rows += _bench_add(N, E, F, order, T, repeats, torch, scipy_sparse,
                                   bw["parallel"], args.oracle_max, args.strategies)
            print(f"# done F={F} {order}", file=sys.stderr, flush=True)
    print(table(["case", "implementation", "median ms", "x rtx time", "GB/s", "%bw"], rows))
    print(f"# load average at end (1/5/15 min): {_loadavg()}")
    print("x rtx time: the case's median over rtx's (> 1: rtx is faster).  GB/s: bytes read and")
    print("written (data + indices) per second.  rtx index_add keeps no grouping cache:")
    print("cold == warm.")
    return 0


__all__ = ["copy_bandwidth", "interleaved", "machine", "main", "subcommand", "table", "today"]
