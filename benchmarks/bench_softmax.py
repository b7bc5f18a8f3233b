"""segment_softmax and message passing, forward and backward: rtx, PyG and DGL in one run
(issue 22 item 2).

    python benchmarks/bench_softmax.py                # E = 1M, N = 100k, 2 threads
    python benchmarks/bench_softmax.py --quick        # a smoke run (N = 2,000, E = 20,000)
    python benchmarks/bench_softmax.py --libs rtx,pyg --repeats 9

Cases (float32; E edges with uniformly random sources, N destinations):

- ``softmax H={1,8} {random,sorted} {backward(g),(out*g).sum()}``: rtx's
  ``segment_softmax(s, dst, N)``, PyG's ``torch_geometric.utils.softmax(s, dst,
  num_nodes=N)`` and DGL's ``edge_softmax(graph, s)``; destinations uniformly random or
  sorted (edges in destination order); the backward either ``out.backward(g)`` or the
  loss ``(out * g).sum()`` and its backward (the loss is timed in the backward phase).
- ``message_passing H=4 C=16 {random,sorted}``: ``out[dst] += w[e] * x[src]`` and
  ``out.backward(g)``: rtx's fused ``message_passing(x, edges, N, w)``, PyG's way
  (torch ``index_select`` . ``mul`` . ``index_add_``) and DGL's ``u_mul_e_sum``.  The
  ratio of record is backward / forward (target: at most 1.5x).

rtx runs ``cold`` (raw int64 indices: checked and grouped on every call) and ``plan``
(a warm ``rtx.IndexPlan`` / ``rtx.EdgeIndex``, as GATConv holds one).  DGL's graph is
built once per destination order, its formats created before timing (DGL caches them
on the graph, as a training loop would).

Each library runs in its own persistent child process (``benchmarks._proc.Worker``;
DGL in its own environment), so no two OpenMP runtimes share a process; the parent
only orchestrates: for each case, one warm-up call per (library, variant), then
``--repeats`` rounds in rotated order, each call timed inside its child (forward and
backward separately; the input leaves are made outside the timing), ``--gap`` seconds
of sleep between calls.  Before timing, every library's output and gradients are
compared with rtx's (``assert_allclose``).  Medians, in ms.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.append(os.path.dirname(HERE))
from benchmarks._proc import (  # noqa: E402 - numpy + stdlib only (DGL's venv imports it)
    Worker,
    child_env,
    dgl_python,
    load_str,
    loadavg,
    serve,
    use_checkout_build,
    write_json,
)

LOSSES = ("backward(g)", "(out*g).sum()")
MP_H, MP_C = 4, 16
VARIANTS = {"rtx": ["cold", "plan"], "pyg": ["pyg"], "dgl": ["dgl"]}
RATIOS = ["rtx plan / pyg", "rtx plan / dgl", "rtx cold / pyg", "rtx cold / dgl"]


def _key(lib: str, variant: str) -> str:
    """The column of a (library, variant): ``rtx cold``, ``rtx plan``, ``pyg``, ``dgl``."""
    return f"rtx {variant}" if lib == "rtx" else lib


# ------------------------------------------------------------------ workers
class _State:
    data: dict[str, np.ndarray]
    lib: str
    N: int
    E: int
    mod: Any
    extra: dict[str, Any]


S = _State()


def _init(msg: dict[str, Any]) -> dict[str, Any]:
    T = int(msg["threads"])
    with np.load(msg["data"], allow_pickle=False) as f:
        S.data = {k: f[k] for k in f.files}
    S.N, S.E = int(S.data["N"]), int(S.data["dst_random"].shape[0])
    S.extra = {}
    if S.lib == "rtx":
        import rtx

        rtx.set_num_threads(T)
        S.mod = rtx
        for o in ("random", "sorted"):
            S.extra["plan_" + o] = rtx.IndexPlan(S.data["dst_" + o], S.N)
            S.extra["plan_" + o].csr()
            ei = np.stack([S.data["src_" + o], S.data["dst_" + o]])
            S.extra["ei_" + o] = ei
            e = rtx.EdgeIndex(ei, S.N, S.N)
            e.src.csr()
            e.dst.csr()
            S.extra["edge_" + o] = e
        version = f"rtx {rtx.__version__} ({rtx.get_num_threads()} threads)"
    else:
        import torch

        torch.set_num_threads(T)
        S.mod = torch
        for o in ("random", "sorted"):
            S.extra["src_" + o] = torch.from_numpy(S.data["src_" + o])
            S.extra["dst_" + o] = torch.from_numpy(S.data["dst_" + o])
        if S.lib == "pyg":
            torch_geometric = importlib.import_module("torch_geometric")
            S.extra["softmax"] = importlib.import_module("torch_geometric.utils").softmax
            version = (f"torch_geometric {torch_geometric.__version__} (torch "
                       f"{torch.__version__}, {torch.get_num_threads()} threads)")
        else:
            dgl = importlib.import_module("dgl")
            dgl.utils.set_num_threads(T)
            for o in ("random", "sorted"):
                g = dgl.graph((S.extra["src_" + o], S.extra["dst_" + o]), num_nodes=S.N)
                g.create_formats_()
                S.extra["graph_" + o] = g
            S.extra["edge_softmax"] = dgl.nn.functional.edge_softmax
            S.extra["u_mul_e_sum"] = dgl.ops.u_mul_e_sum
            version = (f"dgl {dgl.__version__} (torch {torch.__version__}, "
                       f"{torch.get_num_threads()} threads)")
    return {"version": version}


def _host(t: Any) -> np.ndarray:
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t.numpy())


def _softmax(case: dict[str, Any], variant: str, save: str | None) -> dict[str, float]:
    H, o, loss = case["H"], case["order"], case["loss"]
    s, g = S.data[f"s{H}"], S.data[f"g{H}"]
    if S.lib == "rtx":
        rtx = S.mod
        index = S.extra["plan_" + o] if variant == "plan" else S.data["dst_" + o]
        t = rtx.tensor(s, requires_grad=True)
        gt = rtx.tensor(g)
        t0 = time.perf_counter()
        out = rtx.segment_softmax(t, index, S.N)
        t1 = time.perf_counter()
        if loss == LOSSES[0]:
            out.backward(gt)
        else:
            (out * gt).sum().backward()
        grad = t.grad
        t2 = time.perf_counter()
    else:
        torch = S.mod
        t = torch.from_numpy(s.reshape(S.E, 1) if (H == 1 and S.lib == "dgl") else s)
        t.requires_grad_()
        gt = torch.from_numpy(g.reshape(t.shape))
        t0 = time.perf_counter()
        if S.lib == "pyg":
            out = S.extra["softmax"](t, S.extra["dst_" + o], num_nodes=S.N)
        else:
            out = S.extra["edge_softmax"](S.extra["graph_" + o], t)
        t1 = time.perf_counter()
        if loss == LOSSES[0]:
            out.backward(gt)
        else:
            (out * gt).sum().backward()
        grad = t.grad
        t2 = time.perf_counter()
    if save:
        np.savez(save, out=_host(out).reshape(S.E, H), grad=_host(grad).reshape(S.E, H))
    return {"fwd": t1 - t0, "bwd": t2 - t1}


def _message(case: dict[str, Any], variant: str, save: str | None) -> dict[str, float]:
    o = case["order"]
    x, w, g = S.data["x"], S.data["w"], S.data["gx"]
    if S.lib == "rtx":
        rtx = S.mod
        edge = S.extra["edge_" + o] if variant == "plan" else S.extra["ei_" + o]
        xt, wt = rtx.tensor(x, requires_grad=True), rtx.tensor(w, requires_grad=True)
        gt = rtx.tensor(g)
        t0 = time.perf_counter()
        out = rtx.message_passing(xt, edge, S.N, wt)
        t1 = time.perf_counter()
        out.backward(gt)
        gx, gw = xt.grad, wt.grad
        t2 = time.perf_counter()
    else:
        torch = S.mod
        xt = torch.from_numpy(x).requires_grad_()
        wt = torch.from_numpy(w).requires_grad_()
        gt = torch.from_numpy(g)
        t0 = time.perf_counter()
        if S.lib == "pyg":
            msg = xt.index_select(0, S.extra["src_" + o]) * wt.unsqueeze(-1)
            out = torch.zeros(x.shape, dtype=msg.dtype).index_add_(0, S.extra["dst_" + o], msg)
        else:
            out = S.extra["u_mul_e_sum"](S.extra["graph_" + o], xt, wt.unsqueeze(-1))
        t1 = time.perf_counter()
        out.backward(gt)
        gx, gw = xt.grad, wt.grad
        t2 = time.perf_counter()
    if save:
        np.savez(save, out=_host(out), grad_x=_host(gx), grad_w=_host(gw))
    return {"fwd": t1 - t0, "bwd": t2 - t1}


def _handle(msg: dict[str, Any]) -> dict[str, Any]:
    if msg["op"] == "init":
        return _init(msg)
    case = msg["case"]
    fn = _softmax if case["kind"] == "softmax" else _message
    return fn(case, msg["variant"], msg.get("save"))


# ------------------------------------------------------------------ parent
def make_data(path: str, N: int, E: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, N, E), rng.integers(0, N, E)
    order = np.argsort(dst, kind="stable")
    arrays: dict[str, np.ndarray] = {
        "N": np.array(N), "src_random": src, "dst_random": dst,
        "src_sorted": np.ascontiguousarray(src[order]),
        "dst_sorted": np.ascontiguousarray(dst[order])}
    for H in (1, 8):
        shape = (E,) if H == 1 else (E, H)
        arrays[f"s{H}"] = rng.standard_normal(shape, dtype=np.float32)
        arrays[f"g{H}"] = rng.standard_normal(shape, dtype=np.float32)
    arrays["x"] = rng.standard_normal((N, MP_H, MP_C), dtype=np.float32)
    arrays["w"] = rng.standard_normal((E, MP_H), dtype=np.float32)
    arrays["gx"] = rng.standard_normal((N, MP_H, MP_C), dtype=np.float32)
    np.savez(path, **arrays)  # type: ignore[arg-type]


def cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for H in (1, 8):
        for o in ("random", "sorted"):
            for loss in LOSSES:
                out.append({"kind": "softmax", "H": H, "order": o, "loss": loss,
                            "name": f"softmax H={H} {o} {loss}"})
    for o in ("random", "sorted"):
        out.append({"kind": "message", "order": o,
                    "name": f"message_passing H={MP_H} C={MP_C} {o}"})
    return out


def _check(workers: dict[str, Worker], case: dict[str, Any], tmp: str) -> None:
    """Every (library, variant)'s output and gradients against rtx plan's."""
    got: dict[str, dict[str, np.ndarray]] = {}
    for lib, wk in workers.items():
        for v in VARIANTS[lib]:
            path = os.path.join(tmp, f"check-{lib}-{v}.npz")
            wk.call(op="run", case=case, variant=v, save=path)
            with np.load(path) as f:
                got[_key(lib, v)] = {k: f[k] for k in f.files}
    ref_key = "rtx plan" if "rtx plan" in got else next(iter(got))
    ref = got[ref_key]
    atol = 1e-5 if case["kind"] == "softmax" else 1e-4
    for k, arrs in got.items():
        for name, a in arrs.items():
            np.testing.assert_allclose(a, ref[name], rtol=1e-4, atol=atol,
                                       err_msg=f"{case['name']}: {k} {name} vs {ref_key}")


def run_case(workers: dict[str, Worker], case: dict[str, Any], repeats: int,
             gap: float) -> dict[str, dict[str, float]]:
    keys = [(lib, v) for lib in workers for v in VARIANTS[lib]]
    for lib, v in keys:                               # warm-up
        workers[lib].call(op="run", case=case, variant=v)
    times: dict[str, dict[str, list[float]]] = {_key(lib, v): {"fwd": [], "bwd": [],
                                                               "total": []} for lib, v in keys}
    for r in range(repeats):
        k = r % len(keys)
        for lib, v in keys[k:] + keys[:k]:
            time.sleep(gap)
            t = workers[lib].call(op="run", case=case, variant=v)
            d = times[_key(lib, v)]
            d["fwd"].append(t["fwd"])
            d["bwd"].append(t["bwd"])
            d["total"].append(t["fwd"] + t["bwd"])
    return {k: {p: statistics.median(v) for p, v in d.items()} for k, d in times.items()}


def summarize(med: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """rtx's fwd+bwd ratios to PyG and DGL per softmax case; bwd / fwd per message case."""
    out: dict[str, Any] = {}
    for name, m in med.items():
        r: dict[str, Any] = {}
        for v in ("cold", "plan"):
            rk = f"rtx {v}"
            if rk not in m:
                continue
            for anchor in ("pyg", "dgl"):
                if anchor in m:
                    r[f"{rk} / {anchor}"] = m[rk]["total"] / m[anchor]["total"]
        if name.startswith("message"):
            r["bwd/fwd"] = {k: v["bwd"] / v["fwd"] for k, v in m.items()}
        out[name] = r
    return out


def print_tables(med: dict[str, dict[str, dict[str, float]]], summ: dict[str, Any]) -> None:
    keys = list(next(iter(med.values())))
    ratio_keys = [k for k in RATIOS if any(k in r for r in summ.values())]
    print("\nforward + backward, median ms (ratio = rtx's time / the anchor's):\n")
    print("| case | " + " | ".join(keys) + " | " + " | ".join(ratio_keys) + " |")
    print("|---|" + "---|" * (len(keys) + len(ratio_keys)))
    for name, m in med.items():
        cells = [f"{m[k]['total'] * 1e3:.1f}" if k in m else "-" for k in keys]
        rats = [f"{summ[name][k]:.2f}" if k in summ[name] else "-" for k in ratio_keys]
        print(f"| {name} | " + " | ".join(cells + rats) + " |")
    print("\nforward / backward split, median ms (message passing: backward / forward):\n")
    print("| case | " + " | ".join(f"{k} fwd / bwd" for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name, m in med.items():
        cells = []
        for k in keys:
            if k not in m:
                cells.append("-")
                continue
            c = f"{m[k]['fwd'] * 1e3:.1f} / {m[k]['bwd'] * 1e3:.1f}"
            if name.startswith("message"):
                c += f" (**{m[k]['bwd'] / m[k]['fwd']:.2f}x**)"
            cells.append(c)
        print(f"| {name} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="N = 2,000, E = 20,000, 3 repeats")
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--gap", type=float, default=0.02, help="s of sleep before each call")
    ap.add_argument("--libs", default="rtx,pyg,dgl")
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    ap.add_argument("--dgl-python", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", choices=list(VARIANTS), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        S.lib = args.worker
        if args.worker != "dgl":
            use_checkout_build()
        serve(_handle)
        return 0
    use_checkout_build()
    if args.quick:
        args.nodes, args.edges, args.repeats = 2000, 20_000, 3
    t_start, load0 = time.time(), loadavg()
    print(f"# segment_softmax / message passing, rtx vs PyG vs DGL; N={args.nodes:,} "
          f"E={args.edges:,} float32; {args.threads} threads; {args.repeats} repeats, "
          f"rotated, gap {args.gap} s")
    print(f"# load average at start: {load_str()}", flush=True)
    want = [s.strip() for s in args.libs.split(",") if s.strip()]
    results: dict[str, dict[str, dict[str, float]]] = {}
    versions: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-softmax-") as tmp:
        data = os.path.join(tmp, "data.npz")
        make_data(data, args.nodes, args.edges)
        workers: dict[str, Worker] = {}
        try:
            for lib in want:
                py = sys.executable
                if lib == "pyg" and _missing("torch_geometric"):
                    print("# torch_geometric not installed: no PyG")
                    continue
                if lib == "dgl":
                    found = dgl_python(args.dgl_python)
                    if found is None:
                        print("# DGL's environment not found: no DGL")
                        continue
                    py = found
                wk = Worker(lib, [py, os.path.abspath(__file__), "--worker", lib],
                            child_env(args.threads, dgl=lib == "dgl"))
                versions[lib] = wk.call(op="init", data=data, threads=args.threads)["version"]
                workers[lib] = wk
            print("# " + "; ".join(versions.values()), flush=True)
            for case in cases():
                if args.only and args.only not in case["name"]:
                    continue
                _check(workers, case, tmp)
                results[case["name"]] = run_case(workers, case, args.repeats, args.gap)
                m = results[case["name"]]
                print(f"# {case['name']}: " + ", ".join(
                    f"{k} {v['total'] * 1e3:.1f}" for k, v in m.items()) + " ms", flush=True)
        finally:
            for wk in workers.values():
                wk.close()
    summ = summarize(results)
    print_tables(results, summ)
    load1 = loadavg()
    print(f"\n# load average at end: {load_str()} (start "
          f"{' '.join(f'{v:.2f}' for v in load0)}); {time.time() - t_start:.0f} s")
    if args.json:
        write_json(args.json, {"benchmark": "softmax", "nodes": args.nodes,
                               "edges": args.edges, "threads": args.threads,
                               "repeats": args.repeats, "versions": versions,
                               "load_start": list(load0), "load_end": list(load1),
                               "seconds": time.time() - t_start, "median_s": results,
                               "ratios": summ})
    return 0


def _missing(mod: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(mod) is None


if __name__ == "__main__":
    sys.exit(main())
