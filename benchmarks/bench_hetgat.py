"""HetGAT training: rtx beside PyTorch Geometric's HeteroConv(GATConv), same graph,
same model, same initial weights, same optimiser, same threads.

    python benchmarks/bench_hetgat.py                    # 30k and 100k papers, 2 threads
    python benchmarks/bench_hetgat.py --quick            # a smoke run (seconds)
    python benchmarks/bench_hetgat.py --sizes 30000 --epochs 10 --plot loss.png

Each (library, size) runs in its own child process, so that peak-RSS growth
(Linux ``VmHWM`` after ``clear_refs``, minus RSS after the data, the model and
the libraries are loaded) is that library's alone.  Children run alternately
(rtx, pyg, rtx, pyg, ...) ``--rounds`` times; the table shows medians.

Both models are built from the same ``state_dict`` (rtx's HetGAT initialises,
PyG's loads the same arrays: the parameter names are PyG's), trained full-batch
with Adam (lr 0.01, weight decay 5e-4) on cross-entropy over the training
papers.  An epoch = forward + backward + optimiser step; the first
(warm-up) epoch is not timed.  Accuracy: the test accuracy of the epoch with the
best validation accuracy, as the example reports it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _use_inplace_build() -> None:
    """Measure the checkout's in-place build when there is one (as benchmarks/run.py),
    else the installed rtx; children inherit the choice through PYTHONPATH."""
    root = os.path.dirname(HERE)
    rtx_dir = os.path.join(root, "rtx")
    if os.path.isdir(rtx_dir) and any(f.startswith("_kernels.") and f.endswith((".so", ".pyd"))
                                      for f in os.listdir(rtx_dir)):
        sys.path.insert(0, root)
        rest = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = root + (os.pathsep + rest if rest else "")


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _masks_acc(pred: np.ndarray, d: dict[str, np.ndarray]) -> dict[str, float]:
    ok = pred == d["y"]
    return {k: float(ok[d[k + "_mask"]].mean()) for k in ("train", "val", "test")}


def _edge_types(d: Any) -> list[tuple[str, str, str]]:
    return [tuple(k[len("edge_index/"):].split("__")) for k in d if k.startswith("edge_index/")]


def child_pyg(data: dict[str, np.ndarray], init: dict[str, np.ndarray] | None,
              args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    pyg_nn = importlib.import_module("torch_geometric.nn")
    GATConv, HeteroConv = pyg_nn.GATConv, pyg_nn.HeteroConv

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    node_types = [k[2:] for k in data if k.startswith("x/")]
    edge_types = _edge_types(data)
    target = str(data["target"])
    x_dict = {nt: torch.from_numpy(data["x/" + nt]) for nt in node_types}
    ei_dict = {et: torch.from_numpy(data["edge_index/" + "__".join(et)]) for et in edge_types}
    in_ch = {nt: x.shape[1] for nt, x in x_dict.items()}
    n_cls = int(data["y"].max()) + 1
    H, C = args.heads, args.hidden // args.heads

    class PygHetGAT(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.convs = torch.nn.ModuleList()
            needed = [set(node_types) for _ in range(args.layers)]
            needed[-1] = {target}
            for layer in range(args.layers - 2, -1, -1):  # rtx.nn.HetGAT's rule
                nxt = needed[layer + 1]
                needed[layer] = nxt | {s for s, _, d in edge_types if d in nxt}
            have = set(node_types)
            for layer in range(args.layers):
                rels = [et for et in edge_types
                        if et[0] in have and et[2] in have and et[2] in needed[layer]]
                convs = {}
                for s, r, d in rels:
                    cin = in_ch[s] if layer == 0 else args.hidden
                    cin_d = in_ch[d] if layer == 0 else args.hidden
                    if s == d:
                        convs[(s, r, d)] = GATConv(cin, C, heads=H)
                    else:
                        convs[(s, r, d)] = GATConv((cin, cin_d), C, heads=H,
                                                   add_self_loops=False)
                self.convs.append(HeteroConv(convs, aggr="sum"))
                have = {d for _, _, d in rels}
            self.lin = torch.nn.Linear(H * C, n_cls)

        def forward(self, x_dict: Any, ei_dict: Any) -> Any:
            for conv in self.convs:
                x_dict = {k: F.elu(v) for k, v in conv(x_dict, ei_dict).items()}
            return self.lin(x_dict[target])

    model = PygHetGAT()
    if init is not None:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in init.items()}, strict=True)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    train_idx = torch.from_numpy(np.flatnonzero(data["train_mask"]))
    y_train = torch.from_numpy(data["y"])[train_idx]

    def epoch() -> tuple[float, np.ndarray]:
        opt.zero_grad()
        logits = model(x_dict, ei_dict)
        loss = F.cross_entropy(logits[train_idx], y_train)
        loss.backward()
        opt.step()
        return float(loss.item()), logits.detach().argmax(-1).numpy()

    return _loop(epoch, data, args)


def child_rtx(data: dict[str, np.ndarray], init: dict[str, np.ndarray] | None,
              args: argparse.Namespace) -> dict[str, Any]:
    import rtx
    from rtx.nn import HetGAT
    from rtx.nn.functional import cross_entropy
    from rtx.optim import Adam

    rtx.set_num_threads(args.threads)
    rtx.manual_seed(args.seed)
    node_types = [k[2:] for k in data if k.startswith("x/")]
    edge_types = _edge_types(data)
    target = str(data["target"])
    x_dict = {nt: rtx.tensor(data["x/" + nt]) for nt in node_types}
    ei_dict = {et: data["edge_index/" + "__".join(et)] for et in edge_types}
    in_ch = {nt: x.shape[1] for nt, x in x_dict.items()}
    n_cls = int(data["y"].max()) + 1
    model = HetGAT((node_types, edge_types), in_ch, args.hidden, n_cls, heads=args.heads,
                   num_layers=args.layers, target=target)
    if init is not None:
        model.load_state_dict(init)
    opt = Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    train_idx = np.flatnonzero(data["train_mask"])
    y_train = rtx.tensor(data["y"][train_idx])

    def epoch() -> tuple[float, np.ndarray]:
        opt.zero_grad()
        logits = model(x_dict, ei_dict)
        loss = cross_entropy(rtx.index_select(logits, train_idx), y_train)
        loss.backward()
        opt.step()
        return float(loss.item()), logits.detach().argmax(-1).numpy()

    return _loop(epoch, data, args)


def _loop(epoch: Any, data: dict[str, np.ndarray], args: argparse.Namespace) -> dict[str, Any]:
    import gc

    gc.collect()
    peak_ok = _reset_peak()
    base = _rss_kib("VmRSS")
    times, cpu, losses, accs = [], [], [], []
    for _ in range(args.epochs):
        t0, c0 = time.perf_counter(), time.process_time()
        loss, pred = epoch()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        losses.append(loss)
        accs.append(_masks_acc(pred, data))
    peak = _rss_kib("VmHWM") if peak_ok else None
    best = max(range(len(accs)), key=lambda i: (accs[i]["val"], -i))
    return {"epoch_s": times, "median_epoch_s": statistics.median(times[1:] or times),
            "median_epoch_cpu_s": statistics.median(cpu[1:] or cpu),
            "rss_base_mib": base / 1024,
            "rss_growth_mib": None if peak is None else (peak - base) / 1024,
            "losses": losses, "best_epoch": best + 1, "best": accs[best], "last": accs[-1]}


def _child_main(args: argparse.Namespace) -> None:
    with np.load(args.data, allow_pickle=False) as f:
        data = {k: f[k] for k in f.files}
    init = None
    if args.init:
        with np.load(args.init, allow_pickle=False) as f:
            init = {k: f[k] for k in f.files}
    fn = child_rtx if args.child == "rtx" else child_pyg
    print("RESULT " + json.dumps(fn(data, init, args)))


def _run_child(lib: str, data: str, init: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", lib, "--data", data,
           "--init", init, "--epochs", str(args.epochs), "--threads", str(args.threads),
           "--hidden", str(args.hidden), "--heads", str(args.heads),
           "--layers", str(args.layers), "--lr", str(args.lr),
           "--weight-decay", str(args.weight_decay), "--seed", str(args.seed)]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{lib} child failed (rc {p.returncode}):\n{p.stdout}\n{p.stderr}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[30000, 100000])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="2,000 papers, 5 epochs, 1 round")
    ap.add_argument("--no-pyg", action="store_true", help="rtx only")
    ap.add_argument("--plot", default=None, help="PNG of both loss curves (first size)")
    ap.add_argument("--json", default=None, help="write all results here")
    ap.add_argument("--child", choices=["rtx", "pyg"], help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--init", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    _use_inplace_build()
    if args.child:
        _child_main(args)
        return 0
    if args.quick:
        args.sizes, args.epochs, args.rounds = [2000], 5, 1

    import rtx
    from rtx.datasets import save_hetgraph, synthetic_hetgraph
    from rtx.nn import HetGAT

    libs = ["rtx"]
    if not args.no_pyg:
        try:
            import torch
            torch_geometric = importlib.import_module("torch_geometric")
            libs.append("pyg")
            versions = f"torch {torch.__version__}, torch_geometric {torch_geometric.__version__}"
        except ImportError:
            versions = "torch_geometric not installed: rtx only"
    else:
        versions = "rtx only"
    print(f"rtx {rtx.__version__} from {os.path.dirname(os.path.realpath(rtx.__file__))}")
    print(f"rtx {rtx.__version__}; {versions}; {args.threads} threads; hidden {args.hidden}, "
          f"{args.heads} heads, {args.layers} layers; {args.epochs} epochs (first untimed), "
          f"{args.rounds} rounds, children alternate")
    results: dict[int, dict[str, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-hetgat-") as tmp:
        for n in args.sizes:
            g = synthetic_hetgraph(n, seed=args.seed)
            data_path, init_path = os.path.join(tmp, f"g{n}.npz"), os.path.join(tmp, f"i{n}.npz")
            save_hetgraph(g, data_path)
            rtx.manual_seed(args.seed)
            model = HetGAT(g.metadata(), g.num_features_dict, args.hidden, g.num_classes,
                           heads=args.heads, num_layers=args.layers, target=g.target)
            np.savez(init_path, **model.state_dict())  # type: ignore[arg-type]
            print(f"\n{n} papers: {g.num_edges} edges, nodes {g.num_nodes_dict}", flush=True)
            results[n] = {lib: [] for lib in libs}
            for r in range(args.rounds):
                for lib in libs if r % 2 == 0 else libs[::-1]:
                    res = _run_child(lib, data_path, init_path, args)
                    results[n][lib].append(res)
                    print(f"  round {r + 1} {lib:3s}: {res['median_epoch_s']:.3f} s/epoch "
                          f"({res['median_epoch_cpu_s']:.3f} s CPU), "
                          f"RSS growth {res['rss_growth_mib']:.0f} MiB, best-val test acc "
                          f"{res['best']['test']:.4f}", flush=True)
    _table(results, libs, args)
    if args.plot:
        _plot(results[args.sizes[0]], args.plot, args.sizes[0])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(k): v for k, v in results.items()}, f)
    return 0


def _table(results: dict[int, dict[str, list[dict[str, Any]]]], libs: list[str],
           args: argparse.Namespace) -> None:
    def med(rs: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rs)

    print("\n| papers | library | epoch wall (s) | epoch CPU (s) | RSS growth (MiB) | "
          "test acc (best val) | final loss |")
    print("|---|---|---|---|---|---|---|")
    for n, by in results.items():
        for lib in libs:
            rs = by[lib]
            print(f"| {n} | {lib} | {med(rs, 'median_epoch_s'):.3f} | "
                  f"{med(rs, 'median_epoch_cpu_s'):.3f} | "
                  f"{med(rs, 'rss_growth_mib'):.0f} | {rs[0]['best']['test']:.4f} | "
                  f"{rs[0]['losses'][-1]:.4f} |")
        if "pyg" in by:
            def ratio(key: str, by: dict[str, list[dict[str, Any]]] = by) -> float:
                return med(by["rtx"], key) / max(med(by["pyg"], key), 1e-9)

            da = by["rtx"][0]["best"]["test"] - by["pyg"][0]["best"]["test"]
            print(f"| {n} | **rtx / pyg** | **{ratio('median_epoch_s'):.2f}x** | "
                  f"**{ratio('median_epoch_cpu_s'):.2f}x** | "
                  f"**{ratio('rss_growth_mib'):.2f}x** | **{100 * da:+.1f} pt** | |")


def _plot(by: dict[str, list[dict[str, Any]]], path: str, n: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for lib, rs in by.items():
        ax.plot(range(1, len(rs[0]["losses"]) + 1), rs[0]["losses"], label=lib,
                linestyle="-" if lib == "rtx" else "--")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss")
    ax.set_title(f"HetGAT, {n} papers, same initial weights")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
