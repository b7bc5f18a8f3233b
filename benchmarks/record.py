"""Take every figure of record of issue 22 in one run: ``python benchmarks/run.py record``.

    python benchmarks/run.py record                  # refuses to start unless the machine is quiet
    python benchmarks/run.py record --wait-quiet 600 # wait up to 10 min for it to be quiet
    python benchmarks/run.py record --allow-loaded   # run anyway, every figure labelled LOADED
    python benchmarks/run.py record --quick --allow-loaded   # a smoke run of every step
    python benchmarks/run.py record --only softmax,fusion

Runs, one after another, each in its own process with the issue's settings (2 threads,
except the tape at 1, as issue 4 defined it):

==================  ==========================================================================
step                command (``benchmarks/``)
==================  ==========================================================================
tape                ``run.py tape`` (100-op chain, 16x16, 200 interleaved repetitions)
fusion              ``bench_fusion.py --no-torch-compile`` (4- and 8-op chains, 10M floats)
softmax             ``bench_softmax.py`` (E = 1M, N = 100k; rtx, PyG, DGL workers)
roofline            ``roofline.py --profile`` (wide graph, 30k and 100k papers)
hetgat-synthetic    ``bench_hetgat.py --graph synthetic --sizes 30000 100000 --epochs 8 --rounds 3``
hetgat-wide         ``bench_hetgat.py --graph wide --sizes 30000 100000 --epochs 8 --rounds 3``
hetgat-dblp         ``bench_hetgat.py --graph dblp --epochs 8 --rounds 3`` (``--hgb-path``)
relations           ``bench_relations.py --relations 6 20 60 --epochs 6 --rounds 2``
layers              ``bench_layers.py`` (issue 21: each conv layer's step beside PyG's, E = 1M,
                    N = 100k; RGCN with 8 and 64 relations)
==================  ==========================================================================

**Quiet machine.**  It refuses to start (exit 2) when the 1-minute load average is above
``--max-load`` (1.0), unless ``--wait-quiet`` seconds bring it down or ``--allow-loaded``
is given.  Before each step it waits up to ``--cooldown`` seconds (150) for the load to
fall below ``--max-load`` again: a 2-thread benchmark raises the 1-minute average
towards 2 by itself, and it decays below 1.0 in about 45 s when nothing else runs.  For
each step it prints and records the load average at its start, at its end (raised by
the step itself) and after the cool-down that follows it, and the CPU time other
processes used while it ran (``/proc/stat`` busy time minus the CPU time of this
process tree, in cores).  A step is **quiet** when its start load and its after-cool-down
load are at most ``--max-load`` and other processes used at most ``--max-foreign`` cores
(0.15) on average; otherwise each of its figures is labelled ``LOADED`` (never a figure
of record).

**Output**: ``<out>/record-<UTC time>.json`` (every step's own JSON, its log, loads and
times) and ``.md`` (one table of the ratios of record against issue 22's targets, ready
for docs/performance.md), both written atomically.  Whole run: about 30-40 minutes on
the project's 2-core VM (the steps' own estimates are in docs/performance.md).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.append(ROOT)
from benchmarks._proc import load_str, loadavg, write_json, write_text  # noqa: E402

PROG = "run.py record"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise SystemExit(_fail(message))


def _fail(msg: str) -> int:
    sys.stderr.write(f"{PROG}: error: {msg}\n")
    return 2


def steps(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """(name, command) of every step, with the issue's settings (or --quick's)."""
    py = sys.executable
    b = HERE
    q = ["--quick"] if args.quick else []
    dgl = ["--dgl-python", args.dgl_python] if args.dgl_python is not None else []
    hg = (["--epochs", "8", "--rounds", "3"] if not args.quick else [])
    hgb = ["--hgb-path", args.hgb_path] if args.hgb_path else []
    tape = ["--repeats", "20", "--ops", "20"] if args.quick else []
    return [
        ("tape", [py, os.path.join(b, "run.py"), "tape", "--threads", "1", *tape]),
        ("fusion", [py, os.path.join(b, "bench_fusion.py"), "--no-torch-compile", *q]),
        ("softmax", [py, os.path.join(b, "bench_softmax.py"), *q, *dgl]),
        ("roofline", [py, os.path.join(b, "roofline.py"), "--profile", *q]),
        ("hetgat-synthetic", [py, os.path.join(b, "bench_hetgat.py"), "--graph", "synthetic",
                              *(["--sizes", "30000", "100000"] if not args.quick else []),
                              *hg, *q, *dgl]),
        ("hetgat-wide", [py, os.path.join(b, "bench_hetgat.py"), "--graph", "wide",
                         *(["--sizes", "30000", "100000"] if not args.quick else []),
                         *hg, *q, *dgl]),
        ("hetgat-dblp", [py, os.path.join(b, "bench_hetgat.py"), "--graph", "dblp", *hgb,
                         *hg, *q, *dgl]),
        ("relations", [py, os.path.join(b, "bench_relations.py"),
                       *(["--relations", "6", "20", "60", "--epochs", "6", "--rounds", "2"]
                         if not args.quick else []), *q, *dgl]),
        ("layers", [py, os.path.join(b, "bench_layers.py"), *q]),
    ]


def _busy_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat (None off Linux)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)           # idle + iowait
    total = sum(v[:8])                                  # guest time is inside user
    return total - idle, total


def _own_cpu() -> float:
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    me = resource.getrusage(resource.RUSAGE_SELF)
    return ch.ru_utime + ch.ru_stime + me.ru_utime + me.ru_stime


def wait_quiet(limit: float, max_load: float, say: Callable[[str], None]) -> tuple[bool, float]:
    """Wait up to ``limit`` s for the 1-minute load to fall to ``max_load``; (quiet, s)."""
    t0 = time.time()
    last = 0.0
    while loadavg()[0] > max_load:
        waited = time.time() - t0
        if waited >= limit:
            return False, waited
        if waited - last >= 30 or last == 0.0:
            say(f"# waiting for a quiet machine: load {load_str()} (> {max_load}), "
                f"{waited:.0f} / {limit:.0f} s")
            last = waited or 1e-9
        time.sleep(5)
    return True, time.time() - t0


def run_step(name: str, cmd: list[str], json_path: str, say: Callable[[str], None]
             ) -> dict[str, Any]:
    """Run one step, streaming its output; its loads, CPU accounting and JSON."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    ncpu = os.cpu_count() or 1
    j0, c0, t0, l0 = _busy_jiffies(), _own_cpu(), time.time(), loadavg()
    shown = " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd)
    say(f"\n### step {name}: {shown} --json ...\n# load average at start of {name}: "
        f"{load_str()}")
    p = subprocess.Popen([*cmd, "--json", json_path], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, cwd=ROOT, bufsize=1)
    log = []
    assert p.stdout is not None
    for line in p.stdout:
        log.append(line)
        say(line.rstrip("\n"))
    rc = p.wait()
    j1, c1, t1, l1 = _busy_jiffies(), _own_cpu(), time.time(), loadavg()
    wall = t1 - t0
    foreign = None
    if j0 is not None and j1 is not None and wall > 0:
        busy = (j1[0] - j0[0]) / tick
        foreign = max(0.0, (busy - (c1 - c0)) / wall)
    say(f"# load average at end of {name}: {load_str()} ({wall:.0f} s; other processes used "
        f"{'n/a' if foreign is None else f'{foreign:.2f}'} of {ncpu} cores on average)")
    res: dict[str, Any] = {"command": cmd, "rc": rc, "seconds": wall, "load_start": list(l0),
                           "load_end": list(l1), "foreign_cores": foreign, "log": "".join(log)}
    if rc == 0 and os.path.isfile(json_path):
        with open(json_path) as f:
            res["result"] = json.load(f)
    return res


# ------------------------------------------------------------------ the table
def _ok(v: float | None, target: str) -> str:
    if v is None or target == "-":
        return "-" if v is not None else "n/a"
    op, x = target.split(" ", 1)
    t = float(x.rstrip("x%"))
    if target.endswith("%"):
        v = 100 * v
    good = v <= t if op == "<=" else (v >= t if op == ">=" else v < t)
    return "met" if good else "**missed**"


def _fmt(v: float | None, kind: str = "x") -> str:
    if v is None:
        return "n/a"
    return f"{100 * v:.0f} %" if kind == "%" else (f"{v:+.1f} pt" if kind == "pt"
                                                   else f"{v:.2f}x")


def table_rows(name: str, r: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(case, figure, target) rows of one step's result."""
    rows: list[tuple[str, str, str]] = []
    if name == "tape":
        for m in ("fwd+bwd", "fwd", "no_grad"):
            v = r["result"].get(m, {}).get("ratio")
            rows.append((f"tape per op 16x16, {m}: rtx / torch eager", _fmt(v), "<= 1.0x"))
    elif name == "fusion":
        for k, v in r["chains"].items():
            rows.append((f"{k}, enabled() inputs made before: unfused / fused",
                         _fmt(v["unfused / enabled(before)"]), ">= 2.5x"))
            if v.get("numexpr / enabled(before)") is not None:
                rows.append((f"{k}, enabled() inputs made before: numexpr / fused",
                             _fmt(v["numexpr / enabled(before)"]), ">= 3.0x"))
    elif name == "softmax":
        for case, v in r["ratios"].items():
            if case.startswith("softmax"):
                for k in ("rtx plan / pyg", "rtx cold / pyg"):
                    if k in v:
                        rows.append((f"{case}: {k}", _fmt(v[k]), "<= 0.4x"))
                for k in ("rtx plan / dgl", "rtx cold / dgl"):
                    if k in v:
                        rows.append((f"{case}: {k}", _fmt(v[k]), "< 1.0x"))
            else:
                for k, x in v.get("bwd/fwd", {}).items():
                    rows.append((f"{case}: backward / forward, {k}", _fmt(x),
                                 "<= 1.5x" if k.startswith("rtx") else "-"))
    elif name == "roofline":
        for n, v in r["sizes"].items():
            rows.append((f"HetGAT epoch {r['graph']} {n} papers: bound / achieved (rows)",
                         _fmt(v["fraction_rows"], "%"), ">= 50%"))
            rows.append((f"HetGAT epoch {r['graph']} {n} papers: bound / achieved (min)",
                         _fmt(v["fraction_min"], "%"), "-"))
    elif name.startswith("hetgat"):
        for n, v in r["sizes"].items():
            for k, x in v["summary"]["ratios"].items():
                rows.append((f"{r['graph']} {n} papers: epoch {k}", _fmt(x["epoch_s"]),
                             "<= 0.5x"))
                rows.append((f"{r['graph']} {n} papers: RSS growth {k}",
                             _fmt(x["rss_growth_mib"]), "-"))
                rows.append((f"{r['graph']} {n} papers: test accuracy {k}",
                             _fmt(x["test_acc_pt"], "pt"), "-"))
    elif name == "relations":
        s = r["scaling"]
        rs = sorted(int(k) for k in r["relations"])
        for lib, gr in s["growth"].items():
            last = gr.get(str(rs[-1]))
            rows.append((f"epoch growth {rs[0]} -> {rs[-1]} relations, {lib} "
                         f"(linear: {rs[-1] / rs[0]:.1f}x)", _fmt(last),
                         f"< {rs[-1] / rs[0]:.1f}x" if lib == "rtx:grouped" else "-"))
        for R in rs:
            rows.append((f"{R} relations: rtx grouped / per-relation",
                         _fmt(s["grouped_over_per_relation"].get(str(R))),
                         "<= 0.5x" if R == rs[-1] else "-"))
            for k, x in r["relations"][str(R)]["summary"]["ratios"].items():
                rows.append((f"{R} relations: epoch {k}", _fmt(x["epoch_s"]), "-"))
    elif name == "layers":
        for kind, v in r["layers"].items():
            rows.append((f"layer {kind} step (E = {r['edges']:,}): time rtx / PyG",
                         _fmt(v["time_x"]), "<= 0.5x"))
            rows.append((f"layer {kind} step: working memory rtx / PyG", _fmt(v["mem_x"]),
                         "<= 0.5x"))
    return rows


def markdown(meta: dict[str, Any], results: dict[str, dict[str, Any]]) -> str:
    out = [f"Figures of record, issue 22 — {meta['date']}, commit `{meta['commit']}`, "
           f"{meta['machine']}; {meta['seconds'] / 60:.0f} min in all"
           f"{' (--quick: NOT figures of record)' if meta['quick'] else ''}.", "",
           "| step | case | figure | target | | load start / end / after cool-down | "
           "other processes (cores) | label |", "|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        label = "quiet" if r.get("quiet") else "**LOADED**"
        loads = (f"{r['load_start'][0]:.2f} / {r['load_end'][0]:.2f} / "
                 f"{r['load_after'][0]:.2f}" if r.get("load_after") else
                 f"{r['load_start'][0]:.2f} / {r['load_end'][0]:.2f} / -")
        fc = "n/a" if r.get("foreign_cores") is None else f"{r['foreign_cores']:.2f}"
        if "result" not in r:
            out.append(f"| {name} | (failed: rc {r.get('rc')}) | | | | {loads} | {fc} | {label} |")
            continue
        for case, fig, target in table_rows(name, r["result"]):
            mark = _ok(_parse(fig), target)
            fig_l = fig if r.get("quiet") else f"{fig} LOADED"
            out.append(f"| {name} | {case} | {fig_l} | {target} | {mark} | {loads} | {fc} | "
                       f"{label} |")
    return "\n".join(out) + "\n"


def _parse(fig: str) -> float | None:
    s = fig.strip()
    try:
        if s.endswith("%"):
            return float(s[:-1]) / 100
        if s.endswith("x"):
            return float(s[:-1])
        if s.endswith("pt"):
            return float(s[:-2])
    except ValueError:
        return None
    return None


def _commit() -> str:
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="every step's --quick (a smoke run)")
    ap.add_argument("--only", default=None, help="comma-separated steps to run")
    ap.add_argument("--max-load", type=float, default=1.0)
    ap.add_argument("--max-foreign", type=float, default=0.15,
                    help="cores other processes may use on average during a quiet step")
    ap.add_argument("--wait-quiet", type=float, default=0.0,
                    help="s to wait for a quiet machine before refusing to start")
    ap.add_argument("--cooldown", type=float, default=150.0,
                    help="s to wait after each step for the load to fall again")
    ap.add_argument("--allow-loaded", action="store_true",
                    help="run on a loaded machine; every figure is labelled LOADED")
    ap.add_argument("--out", default=".", help="directory of record-<time>.json / .md")
    ap.add_argument("--hgb-path", default=None, help="HGB's DBLP directory (hetgat-dblp)")
    ap.add_argument("--dgl-python", default=None, help="python of DGL's environment")
    args = ap.parse_args(argv)
    all_steps = steps(args)
    names = [n for n, _ in all_steps]
    only = names if args.only is None else [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in only if s not in names]
    if bad:
        return _fail(f"unknown step {bad[0]!r} (steps: {', '.join(names)})")
    if not os.path.isdir(args.out):
        return _fail(f"--out {args.out}: not a directory")
    if args.max_load <= 0 or args.cooldown < 0 or args.wait_quiet < 0:
        return _fail("--max-load must be > 0, --cooldown and --wait-quiet >= 0")

    def say(s: str) -> None:
        print(s, flush=True)

    say(f"# rtx figures of record (issue 22); load average {load_str()}; steps "
        f"{', '.join(only)}")
    quiet0, waited = wait_quiet(args.wait_quiet, args.max_load, say)
    if not quiet0 and not args.allow_loaded:
        return _fail(f"the machine is not quiet: 1-minute load average {loadavg()[0]:.2f} > "
                     f"{args.max_load} (waited {waited:.0f} s); figures of record need a quiet "
                     "machine: stop other jobs, or --wait-quiet SECONDS, or --allow-loaded "
                     "(every figure labelled LOADED)")
    from benchmarks.bench import machine

    t_start = time.time()
    stamp = _dt.datetime.now(_dt.timezone.utc)
    meta: dict[str, Any] = {"date": stamp.strftime("%Y-%m-%d %H:%M UTC"), "commit": _commit(),
                            "machine": machine(), "quick": args.quick, "max_load": args.max_load,
                            "max_foreign": args.max_foreign, "allow_loaded": args.allow_loaded}
    results: dict[str, dict[str, Any]] = {}
    base = os.path.join(args.out, "record-" + stamp.strftime("%Y%m%dT%H%MZ"))
    with tempfile.TemporaryDirectory(prefix="rtx-record-") as tmp:
        first = True
        for name, cmd in all_steps:
            if name not in only:
                continue
            quiet_start = quiet0 if first else wait_quiet(args.cooldown, args.max_load, say)[0]
            first = False
            if results:
                prev = list(results.values())[-1]
                prev["load_after"] = list(loadavg())
                prev["quiet"] = prev["quiet"] and prev["load_after"][0] <= args.max_load
            r = run_step(name, cmd, os.path.join(tmp, name + ".json"), say)
            r["quiet"] = bool(quiet_start and r["load_start"][0] <= args.max_load and
                              (r["foreign_cores"] is None or
                               r["foreign_cores"] <= args.max_foreign))
            results[name] = r
        if results:
            last = list(results.values())[-1]
            q, _ = wait_quiet(args.cooldown, args.max_load, say)
            last["load_after"] = list(loadavg())
            last["quiet"] = last["quiet"] and q
    meta["seconds"] = time.time() - t_start
    md = markdown(meta, results)
    write_json(base + ".json", {"meta": meta, "steps": results})
    write_text(base + ".md", md)
    say("\n" + md)
    failed = [n for n, r in results.items() if r["rc"] != 0]
    say(f"# wrote {base}.json and {base}.md; {meta['seconds'] / 60:.1f} min; load average "
        f"{load_str()}" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
