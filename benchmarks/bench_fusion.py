"""Elementwise fusion: chains of 4 and 8 ops over 10M float32 elements.

Side by side in one process, interleaved (A B C A B C ...), all on the same
thread count (default 2):

- ``rtx fused``: ``Fusion(CpuBackend())`` (one blocked OpenMP pass);
- ``rtx enabled(), inputs made before``: ``with rtx.fusion.enabled():`` around the
  chain, its inputs made before the block (on the default backend), as a user who
  wraps a model call has them (issue 22: "fusion needs ceremony");
- ``rtx enabled(), inputs made inside``: the same block, the inputs made inside an
  earlier ``enabled()`` block (on the fused stack);
- ``rtx unfused``: ``CpuBackend()`` (one numpy ufunc per op, owned buffers);
- ``numexpr`` (multi-threaded, blocked) on the same expression;
- ``numpy`` (one ufunc per op, fresh temporaries);
- ``torch eager`` and ``torch.compile`` (inductor, CPU; C++/OpenMP codegen).

``fwd``: the chain's value.  ``fwd+bwd``: ``loss = chain.sum()``, its backward,
gradients for every input read back (rtx's lazily fused gradients included),
then the loss read (``loss.item()``, as a training loop logs it: a lazy loss
nobody reads would never be computed).
Before timing, every library's forward (and gradient) is compared with numpy.
Also reported: the fused forward's peak extra memory (rtx ``memory_stats``:
peak minus inputs and output).  Prints medians (ms) and ratios; quote them
with the machine load (printed).  Run: ``python benchmarks/bench_fusion.py``
(``--help`` for options).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import time
from typing import Any

import numpy as np

if os.path.dirname(os.path.dirname(os.path.abspath(__file__))) not in sys.path:
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks._proc import use_checkout_build  # noqa: E402 - stdlib only

use_checkout_build()
import rtx  # noqa: E402 - the checkout's in-place build when there is one
from benchmarks.bench import _loadavg, _try_import, interleaved, machine, table, today  # noqa: E402
from rtx.fusion import Fusion  # noqa: E402

SLOPE = 0.01
BEFORE = "rtx enabled(), inputs made before"
INSIDE = "rtx enabled(), inputs made inside"


def chain(a: Any, b: Any, c: Any, d: Any, n_ops: int, lib: Any) -> Any:
    """4 ops: leaky_relu(a + b) * c - d; 8 ops: + relu, * 0.5, + a, minimum(., b)."""
    lrelu = lib.leaky_relu if lib is rtx else lib.nn.functional.leaky_relu
    h = lrelu(a + b, SLOPE) * c - d
    if n_ops == 8:
        h = lib.minimum(lib.relu(h) * 0.5 + a, b)
    return h


def chain_numpy(a: Any, b: Any, c: Any, d: Any, n_ops: int) -> np.ndarray:
    h = a + b
    h = np.where(h > 0, h, h * np.float32(SLOPE))
    h = h * c - d
    if n_ops == 8:
        h = np.minimum(np.maximum(h, 0) * np.float32(0.5) + a, b)
    return h


def numexpr_expr(n_ops: int) -> str:
    lr = f"where(a + b > 0, a + b, (a + b) * {SLOPE})"
    h = f"({lr}) * c - d"
    if n_ops == 8:
        r = f"where({h} > 0, {h}, 0) * 0.5 + a"
        h = f"where({r} < b, {r}, b)"
    return h


def _peak_row(fz: Fusion, ts: list[Any], n_ops: int, n: int) -> list[str]:
    """The fused forward's peak rtx memory beyond its inputs and output."""
    gc.collect()
    rtx.empty_cache()
    rtx.reset_peak_memory_stats()
    cur = rtx.memory_stats()["current_bytes"]      # the inputs (and nothing else live)
    with rtx.use_backend(fz):
        y = chain(*ts, n_ops, rtx)
        y.numpy()
    extra = rtx.memory_stats()["peak_bytes"] - cur - n * 4
    del y
    return [f"{n_ops} ops", f"{cur / 2**20:.0f}", f"{n * 4 / 2**20:.0f}",
            f"{extra / 2**20:.2f}"]


def bench_chain(n_ops: int, args: argparse.Namespace, host: list[np.ndarray], fz: Fusion,
                cpu: Any, ne: Any, torch: Any, rows: list[list[str]],
                peak_rows: list[list[str]], record: dict[str, Any]) -> None:
    """Time one chain length in every library (rows appended to ``rows``)."""
    n = args.n
    want = chain_numpy(*host, n_ops)
    cases: dict[tuple[str, str], Any] = {}
    tensors: dict[str, Any] = {}
    for name, backend in (("rtx fused", fz), ("rtx unfused", cpu)):
        with rtx.use_backend(backend):
            ts = [rtx.tensor(h) for h in host]
            tg = [rtx.tensor(h, requires_grad=True) for h in host]
        tensors[name] = (ts, tg)

        def fwd(ts: Any = ts) -> Any:
            return chain(*ts, n_ops, rtx).numpy()

        def fwd_bwd(tg: Any = tg) -> Any:
            for t in tg:
                t.grad = None
            loss = chain(*tg, n_ops, rtx).sum()
            loss.backward()
            return [t.grad.numpy() for t in tg] + [loss.item()]

        np.testing.assert_allclose(fwd(), want, rtol=1e-5, atol=1e-6)
        if backend is fz:
            peak_rows.append(_peak_row(fz, ts, n_ops, n))
        cases[(name, "fwd")] = fwd
        cases[(name, "fwd+bwd")] = fwd_bwd
    # `with rtx.fusion.enabled():` around the chain (issue 22 item 3), with the inputs
    # made before the block (on the default backend: what a user who wraps a model call
    # has) and made inside a block of their own
    for name, inside in ((BEFORE, False), (INSIDE, True)):
        with rtx.fusion.enabled() if inside else contextlib.nullcontext():
            ts = [rtx.tensor(h) for h in host]
            tg = [rtx.tensor(h, requires_grad=True) for h in host]
        tensors[name] = (ts, tg)

        def fwd_on(ts: Any = ts) -> Any:
            with rtx.fusion.enabled():
                return chain(*ts, n_ops, rtx).numpy()

        def fwd_bwd_on(tg: Any = tg) -> Any:
            for t in tg:
                t.grad = None
            with rtx.fusion.enabled():
                loss = chain(*tg, n_ops, rtx).sum()
                loss.backward()
                return [t.grad.numpy() for t in tg] + [loss.item()]

        np.testing.assert_allclose(fwd_on(), want, rtol=1e-5, atol=1e-6)
        cases[(name, "fwd")] = fwd_on
        cases[(name, "fwd+bwd")] = fwd_bwd_on
    if ne is not None:
        expr = numexpr_expr(n_ops)
        env = dict(zip("abcd", host, strict=True))
        np.testing.assert_allclose(ne.evaluate(expr, local_dict=env), want, rtol=1e-5,
                                   atol=1e-6)
        cases[("numexpr", "fwd")] = lambda expr=expr, env=env: ne.evaluate(
            expr, local_dict=env)
    cases[("numpy", "fwd")] = lambda: chain_numpy(*host, n_ops)
    if torch is not None:
        tt = [torch.from_numpy(h) for h in host]
        tq = [torch.from_numpy(h.copy()).requires_grad_() for h in host]

        def t_fwd(tt: Any = tt) -> Any:
            with torch.no_grad():
                return chain(*tt, n_ops, torch)

        def t_fwd_bwd(f: Any = None, tq: Any = tq) -> Any:
            for t in tq:
                t.grad = None
            loss = (f or (lambda *x: chain(*x, n_ops, torch)))(*tq).sum()
            loss.backward()
            return [t.grad for t in tq] + [loss.item()]

        cases[("torch eager", "fwd")] = t_fwd
        cases[("torch eager", "fwd+bwd")] = t_fwd_bwd
        if not args.no_torch_compile:
            try:
                t0 = time.perf_counter()
                cf = torch.compile(lambda a, b, c, d: chain(a, b, c, d, n_ops, torch))
                with torch.no_grad():
                    got = cf(*tt).numpy()
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
                t_fwd_bwd(cf)
                print(f"# torch.compile ({n_ops} ops) compiled in "
                      f"{time.perf_counter() - t0:.1f} s")

                def c_fwd(cf: Any = cf, tt: Any = tt) -> Any:
                    with torch.no_grad():
                        return cf(*tt)

                cases[("torch.compile", "fwd")] = c_fwd
                cases[("torch.compile", "fwd+bwd")] = lambda cf=cf: t_fwd_bwd(cf)
            except Exception as e:  # noqa: BLE001 - report, keep the other rows
                print(f"# torch.compile did not compile: {type(e).__name__}: {e}",
                      file=sys.stderr)
    # gradients and losses agree (rtx fused vs unfused, bitwise for this arithmetic)
    gf = cases[("rtx fused", "fwd+bwd")]()
    gu = cases[("rtx unfused", "fwd+bwd")]()
    for x, y in zip(gf, gu, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)
    del gf, gu
    keyed = {f"{k[0]}|{k[1]}": v for k, v in cases.items()}
    med = interleaved(keyed, args.repeats, warmup=1, gap=0.02 if torch else 0.0)
    for mode in ("fwd", "fwd+bwd"):
        fused = med.get(f"rtx fused|{mode}")
        for lib in ("rtx fused", BEFORE, INSIDE, "rtx unfused", "numexpr", "numpy",
                    "torch eager", "torch.compile"):
            t = med.get(f"{lib}|{mode}")
            if t is None:
                continue
            rows.append([f"{n_ops} ops", mode, lib, f"{t * 1e3:.1f}",
                         f"{t / fused:.2f}" if fused else "-"])
        b = med.get(f"{BEFORE}|{mode}")
        record[f"{n_ops} ops {mode}"] = {
            "median_s": {k.split("|")[0]: v for k, v in med.items() if k.endswith("|" + mode)},
            "unfused / enabled(before)": med[f"rtx unfused|{mode}"] / b if b else None,
            "numexpr / enabled(before)": (med[f"numexpr|{mode}"] / b
                                          if b and f"numexpr|{mode}" in med else None)}
    del tensors, cases, keyed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=10_000_000, help="elements per operand")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--no-torch-compile", action="store_true")
    p.add_argument("--chains", type=int, nargs="+", default=[4, 8], choices=[4, 8])
    p.add_argument("--quick", action="store_true", help="100,000 elements, 3 repeats")
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.repeats = 100_000, 3
    T, n = args.threads, args.n
    rtx.set_num_threads(T)
    ne = _try_import("numexpr")
    torch = _try_import("torch")
    if ne is not None:
        ne.set_num_threads(T)
    if torch is not None:
        torch.set_num_threads(T)
    rng = np.random.default_rng(0)
    host = [rng.standard_normal(n).astype(np.float32) for _ in range(4)]
    print(f"# bench_fusion  {today()}  n={n} float32  threads={T}")
    print(f"# {machine()}")
    load0 = _loadavg()
    t_start = time.time()
    print(f"# load average before: {load0}")

    fz, cpu = Fusion(rtx.CpuBackend()), rtx.CpuBackend()
    rows: list[list[str]] = []
    peak_rows: list[list[str]] = []
    record: dict[str, Any] = {}
    for n_ops in args.chains:
        bench_chain(n_ops, args, host, fz, cpu, ne, torch, rows, peak_rows, record)
    print()
    print(table(["chain", "mode", "library", "median ms", "x fused"], rows))
    print()
    print(table(["chain", "live before MiB", "output MiB", "fused fwd extra MiB"], peak_rows))
    print("\nissue 22 (fusion as a mode): `with rtx.fusion.enabled():` around the chain, "
          "inputs made before the block")
    for k, v in record.items():
        u, x = v["unfused / enabled(before)"], v["numexpr / enabled(before)"]
        print(f"  {k}: unfused / it = {u:.2f}x (target >= 2.5)" +
              (f", numexpr / it = {x:.2f}x (target >= 3)" if x else ""))
    load1 = _loadavg()
    print(f"# load average after: {load1}; fusion stats: {fz.cache_info()}")
    if args.json:
        from benchmarks._proc import write_json

        write_json(args.json, {"benchmark": "fusion", "n": n, "threads": T,
                               "repeats": args.repeats, "load_start": load0,
                               "load_end": load1, "seconds": time.time() - t_start,
                               "chains": record})
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    sys.exit(main())
