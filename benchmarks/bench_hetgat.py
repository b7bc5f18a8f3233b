"""HetGAT training: rtx beside PyTorch Geometric's HeteroConv(GATConv) and DGL's
HeteroGraphConv(GATConv), same graph, same model, same initial weights, same optimiser,
same threads.

    python benchmarks/bench_hetgat.py                    # synthetic graph, 30k and 100k papers
    python benchmarks/bench_hetgat.py --graph wide       # issue 22's wide-feature graph
    python benchmarks/bench_hetgat.py --graph dblp [--hgb-path DIR]   # HGB-DBLP (4,231-d)
    python benchmarks/bench_hetgat.py --quick            # a smoke run (seconds)
    python benchmarks/bench_hetgat.py --sizes 30000 --epochs 10 --plot loss.png

Graphs (``--graph``): ``synthetic`` is ``rtx.datasets.synthetic_hetgraph`` (64 / 32 /
16-d features, 5 relations); ``wide`` is ``benchmarks.graphs.wide_hetgraph`` (paper 128-d,
author 64-d, subject 32-d; writes, cites, has and their reverses; ~2.5 authors and
~1.5 citations per paper); ``dblp`` is HGB's DBLP read by ``rtx.datasets.load_hgb``
from ``--hgb-path`` when given, else ``benchmarks.graphs.dblp_like`` (a generated graph
of DBLP's shape: 14,328 papers with 4,231-d bag-of-words features, unless ``--sizes``
says otherwise).  ``--sizes`` counts papers.

Each (library, size, round) runs in its own child process, so that peak-RSS growth
(Linux ``VmHWM`` after ``clear_refs``, minus RSS after the data, the model and the
libraries are loaded) is that library's alone.  The children of a round run in
rotated order (rtx pyg dgl, pyg dgl rtx, dgl rtx pyg, ...) ``--rounds`` times; the
table shows medians over rounds of each child's median epoch.  DGL runs in its own
environment (``$RTX_DGL_PYTHON`` or ``--dgl-python``; torch 2.2, numpy < 2), as a
child like the others.

The model: 2 layers, hidden 64 = 4 heads x 16 channels, one GATConv per relation,
summed per destination type, ELU, a Linear head; self-loops only on relations that
join a type to itself (PyG's and rtx's ``add_self_loops``; for DGL the loops are added
to those relations' graphs, existing ones removed first, as PyG does); only relations
that reach the target are built (rtx.nn.HetGAT's rule, copied by the other two).
All three start from the **same weights**: rtx's HetGAT initialises, PyG's model
loads its ``state_dict`` (same names), DGL's loads it renamed (``lin``/``lin_src``/
``lin_dst`` -> ``fc``/``fc_src``/``fc_dst``, ``att_src`` -> ``attn_l``, ``att_dst``
-> ``attn_r``, ``bias``; ``GATConv(in, out, heads, allow_zero_in_degree=True)``).
Full batch, Adam (lr 0.01, weight decay 5e-4), cross-entropy over the training nodes.
An epoch = forward + backward + optimiser step; the first (warm-up) epoch is not timed.

Before timing, each library trains one epoch from the same weights in a child of its
own and the three epoch-0 losses must agree to rounding (rtol 1e-4), else the
benchmark stops (``--no-check`` skips it).  Accuracy: the test accuracy of the epoch
with the best validation accuracy (validation accuracy beside it).

``--path {default,per-relation,grouped}`` is passed to rtx's HetGAT as
``HetGAT(..., path=...)`` when its signature has that argument (the grouped/typed path
of issue 22 item 1); without it ``per-relation`` is today's code and ``grouped`` is
reported as n/a.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import re
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:   # `benchmarks` importable, after any installed rtx
    sys.path.append(os.path.dirname(HERE))
from benchmarks._proc import (  # noqa: E402 - numpy + stdlib only (DGL's venv imports it)
    TAG,
    WorkerError,
    child_env,
    dgl_python,
    load_str,
    loadavg,
    reset_peak,
    rss_kib,
    run_json_child,
    use_checkout_build,
    write_json,
)

# The keyword of rtx.nn.HetGAT that chooses the per-relation or the grouped path
# (issue 22 item 1), once it exists: see --path.
HETGAT_PATH_KWARG = "path"
LIBS = ("rtx", "pyg", "dgl")
EdgeType = tuple[str, str, str]


def _masks_acc(pred: np.ndarray, d: dict[str, np.ndarray]) -> dict[str, float]:
    ok = pred == d["y"]
    return {k: float(ok[d[k + "_mask"]].mean()) for k in ("train", "val", "test")}


def _edge_types(d: Any) -> list[EdgeType]:
    out = []
    for k in d:
        if k.startswith("edge_index/"):
            s, r, t = k[len("edge_index/"):].split("__")
            out.append((s, r, t))
    return out


def layer_relations(node_types: list[str], edge_types: list[EdgeType], target: str,
                    layers: int) -> list[list[EdgeType]]:
    """The relations each layer has (rtx.nn.HetGAT's rule): only those that can reach
    ``target`` — the last layer's go into ``target``, the one before's into their
    sources, and so on — among types that have features entering the layer."""
    needed = [set(node_types) for _ in range(layers)]
    needed[-1] = {target}
    for layer in range(layers - 2, -1, -1):
        nxt = needed[layer + 1]
        needed[layer] = nxt | {s for s, _, d in edge_types if d in nxt}
    have = set(node_types)
    out = []
    for layer in range(layers):
        rels = [et for et in edge_types
                if et[0] in have and et[2] in have and et[2] in needed[layer]]
        out.append(rels)
        have = {d for _, _, d in rels}
    return out


def _graph_parts(data: dict[str, np.ndarray]) -> tuple[list[str], list[EdgeType], str, int]:
    node_types = [k[2:] for k in data if k.startswith("x/")]
    return node_types, _edge_types(data), str(data["target"]), int(data["y"].max()) + 1


# ------------------------------------------------------------------ children
def child_pyg(data: dict[str, np.ndarray], init: dict[str, np.ndarray] | None,
              args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    pyg_nn = importlib.import_module("torch_geometric.nn")
    GATConv, HeteroConv = pyg_nn.GATConv, pyg_nn.HeteroConv

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    node_types, edge_types, target, n_cls = _graph_parts(data)
    x_dict = {nt: torch.from_numpy(data["x/" + nt]) for nt in node_types}
    ei_dict = {et: torch.from_numpy(data["edge_index/" + "__".join(et)]) for et in edge_types}
    in_ch = {nt: x.shape[1] for nt, x in x_dict.items()}
    H, C = args.heads, args.hidden // args.heads

    class PygHetGAT(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.convs = torch.nn.ModuleList()
            for layer, rels in enumerate(layer_relations(node_types, edge_types, target,
                                                         args.layers)):
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


_DGL_PARAM = {"lin.weight": "fc.weight", "lin_src.weight": "fc_src.weight",
              "lin_dst.weight": "fc_dst.weight", "att_src": "attn_l", "att_dst": "attn_r",
              "bias": "bias"}


def dgl_name(name: str) -> str:
    """rtx's / PyG's parameter name -> the same parameter in DGL's model below
    (``convs.0.convs.<author___writes___paper>.lin_src.weight`` ->
    ``convs.0.mods.('author', 'writes', 'paper').fc_src.weight``)."""
    m = re.match(r"^convs\.(\d+)\.convs\.<(.+)>\.(.+)$", name)
    if m is None:
        return name                             # lin.weight, lin.bias
    et = tuple(m.group(2).split("___"))
    if len(et) != 3 or m.group(3) not in _DGL_PARAM:
        raise ValueError(f"no DGL name for parameter {name!r}")
    return f"convs.{m.group(1)}.mods.{et!s}.{_DGL_PARAM[m.group(3)]}"


def child_dgl(data: dict[str, np.ndarray], init: dict[str, np.ndarray] | None,
              args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    dgl = importlib.import_module("dgl")
    dgl_nn = importlib.import_module("dgl.nn.pytorch")
    GATConv, HeteroGraphConv = dgl_nn.GATConv, dgl_nn.HeteroGraphConv

    dgl.utils.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    node_types, edge_types, target, n_cls = _graph_parts(data)
    x_dict = {nt: torch.from_numpy(data["x/" + nt]) for nt in node_types}
    num_nodes = {nt: int(x.shape[0]) for nt, x in x_dict.items()}
    in_ch = {nt: int(x.shape[1]) for nt, x in x_dict.items()}
    H, C = args.heads, args.hidden // args.heads
    layers = layer_relations(node_types, edge_types, target, args.layers)

    def edges(et: EdgeType) -> tuple[Any, Any]:
        ei = data["edge_index/" + "__".join(et)].astype(np.int64)
        if et[0] == et[2]:      # PyG's add_self_loops: remove the existing ones, add one per node
            ei = ei[:, ei[0] != ei[1]]
            loops = np.arange(min(num_nodes[et[0]], num_nodes[et[2]]), dtype=np.int64)
            ei = np.concatenate([ei, np.stack([loops, loops])], axis=1)
        return torch.from_numpy(np.ascontiguousarray(ei[0])), \
            torch.from_numpy(np.ascontiguousarray(ei[1]))

    graphs = [dgl.heterograph({et: edges(et) for et in rels},
                              num_nodes_dict={nt: num_nodes[nt] for nt in node_types})
              for rels in layers]

    class DglHetGAT(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.convs = torch.nn.ModuleList()
            for layer, rels in enumerate(layers):
                mods = {}
                for s, r, d in rels:
                    cin = in_ch[s] if layer == 0 else args.hidden
                    cin_d = in_ch[d] if layer == 0 else args.hidden
                    mods[(s, r, d)] = GATConv(cin if s == d else (cin, cin_d), C, H,
                                              allow_zero_in_degree=True)
                self.convs.append(HeteroGraphConv(mods, aggregate="sum"))
            self.lin = torch.nn.Linear(H * C, n_cls)

        def forward(self, x_dict: Any) -> Any:
            for conv, g in zip(self.convs, graphs, strict=True):
                x_dict = {k: F.elu(v.flatten(1)) for k, v in conv(g, x_dict).items()}
            return self.lin(x_dict[target])

    model = DglHetGAT()
    if init is not None:
        model.load_state_dict({dgl_name(k): torch.from_numpy(v) for k, v in init.items()},
                              strict=True)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    train_idx = torch.from_numpy(np.flatnonzero(data["train_mask"]))
    y_train = torch.from_numpy(data["y"])[train_idx]

    def epoch() -> tuple[float, np.ndarray]:
        opt.zero_grad()
        logits = model(x_dict)
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
    from rtx.nn.training import train_epoch
    from rtx.optim import Adam

    rtx.set_num_threads(args.threads)
    rtx.manual_seed(args.seed)
    node_types, edge_types, target, n_cls = _graph_parts(data)
    x_dict = {nt: rtx.tensor(data["x/" + nt]) for nt in node_types}
    ei_dict = {et: data["edge_index/" + "__".join(et)] for et in edge_types}
    in_ch = {nt: x.shape[1] for nt, x in x_dict.items()}
    kw: dict[str, Any] = {}
    if args.path != "default":
        if HETGAT_PATH_KWARG in inspect.signature(HetGAT).parameters:
            kw[HETGAT_PATH_KWARG] = args.path
        elif args.path == "grouped":
            return {"unsupported": f"rtx.nn.HetGAT takes no {HETGAT_PATH_KWARG}= argument: "
                                   "no grouped path to measure yet"}
    model = HetGAT((node_types, edge_types), in_ch, args.hidden, n_cls, heads=args.heads,
                   num_layers=args.layers, target=target, **kw)
    if init is not None:
        model.load_state_dict(init)
    opt = Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    train_idx = np.flatnonzero(data["train_mask"])
    y_train = rtx.tensor(data["y"][train_idx])

    def epoch() -> tuple[float, np.ndarray]:
        loss, pred, _ = train_epoch(
            lambda: model(x_dict, ei_dict),
            lambda logits: cross_entropy(rtx.index_select(logits, train_idx), y_train), opt)
        return float(loss.item()), pred

    return _loop(epoch, data, args)


def _loop(epoch: Any, data: dict[str, np.ndarray], args: argparse.Namespace) -> dict[str, Any]:
    import gc

    gc.collect()
    peak_ok = reset_peak()
    base = rss_kib("VmRSS")
    times, cpu, losses, accs = [], [], [], []
    for _ in range(args.epochs):
        t0, c0 = time.perf_counter(), time.process_time()
        loss, pred = epoch()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        losses.append(loss)
        accs.append(_masks_acc(pred, data))
    peak = rss_kib("VmHWM") if peak_ok else None
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
    fn = {"rtx": child_rtx, "pyg": child_pyg, "dgl": child_dgl}[args.child]
    print(TAG + json.dumps(fn(data, init, args)), flush=True)


# ------------------------------------------------------------------ parent
def child_cmd(lib: str, data: str, init: str, args: argparse.Namespace,
              epochs: int) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one library's child (``rtx``, ``pyg``,
    ``dgl``, or ``rtx:<path>`` for rtx's HetGAT with ``path=<path>``)."""
    base, _, path = lib.partition(":")
    if base == "dgl":
        py = dgl_python(args.dgl_python)
        if py is None:
            raise WorkerError("DGL's python is not found (--dgl-python / $RTX_DGL_PYTHON)")
    else:
        py = sys.executable
    cmd = [py, os.path.abspath(__file__), "--child", base, "--data", data,
           "--init", init, "--epochs", str(epochs), "--threads", str(args.threads),
           "--hidden", str(args.hidden), "--heads", str(args.heads),
           "--layers", str(args.layers), "--lr", str(args.lr),
           "--weight-decay", str(args.weight_decay), "--seed", str(args.seed),
           "--path", path or (args.path if base == "rtx" else "default")]
    return cmd, child_env(args.threads, dgl=base == "dgl")


def run_child(lib: str, data: str, init: str, args: argparse.Namespace,
              epochs: int | None = None) -> dict[str, Any]:
    cmd, env = child_cmd(lib, data, init, args, args.epochs if epochs is None else epochs)
    return run_json_child(cmd, env, f"{lib} child")


def available_libs(args: argparse.Namespace) -> tuple[list[str], str]:
    """The libraries to run (``--libs``, less those not installed) and their versions."""
    want = [s.strip() for s in args.libs.split(",") if s.strip()]
    if args.no_pyg:
        want = ["rtx"]
    bad = [w for w in want if w.partition(":")[0] not in LIBS]
    if bad:
        raise SystemExit(f"bench_hetgat: error: unknown library {bad[0]!r} (choose from "
                         f"{', '.join(LIBS)})")
    libs, notes = [], []
    for lib in want:
        base = lib.partition(":")[0]
        if base == "pyg":
            try:
                import torch
                tg = importlib.import_module("torch_geometric")
                notes.append(f"torch {torch.__version__}, torch_geometric {tg.__version__}")
            except ImportError:
                notes.append("torch_geometric not installed: no PyG")
                continue
        elif base == "dgl":
            py = dgl_python(args.dgl_python)
            if py is None:
                notes.append("DGL's environment not found: no DGL")
                continue
            p = run_json_child([py, "-c", "import dgl, torch, json; print('@@ ' + json.dumps("
                                "{'v': f'dgl {dgl.__version__} (torch {torch.__version__})'}))"],
                               child_env(1, dgl=True), "DGL import")
            notes.append(p["v"] + f" in {os.path.dirname(os.path.dirname(py))}")
        libs.append(lib)
    return libs, "; ".join(notes)


def make_graph(kind: str, n: int, args: argparse.Namespace) -> Any:
    from benchmarks.graphs import dblp_like, load_dblp, wide_hetgraph
    from rtx.datasets import synthetic_hetgraph

    if kind == "synthetic":
        return synthetic_hetgraph(n, seed=args.seed)
    if kind == "wide":
        return wide_hetgraph(n, seed=args.seed)
    if args.hgb_path:
        return load_dblp(args.hgb_path)
    return dblp_like(n, seed=args.seed)


def _num_target(g: Any) -> int:
    return int(g.num_nodes_dict[g.target])


def prepare(g: Any, tmp: str, tag: str, args: argparse.Namespace) -> tuple[str, str]:
    """Write the graph and rtx's initial weights (the same for every library)."""
    import rtx
    from rtx.datasets import save_hetgraph
    from rtx.nn import HetGAT

    data_path, init_path = os.path.join(tmp, f"g-{tag}.npz"), os.path.join(tmp, f"i-{tag}.npz")
    save_hetgraph(g, data_path)
    rtx.manual_seed(args.seed)
    model = HetGAT(g.metadata(), g.num_features_dict, args.hidden, g.num_classes,
                   heads=args.heads, num_layers=args.layers, target=g.target)
    np.savez(init_path, **model.state_dict())  # type: ignore[arg-type]
    return data_path, init_path


def check_losses(libs: list[str], data: str, init: str, args: argparse.Namespace,
                 rtol: float = 1e-4) -> tuple[dict[str, Any], list[str]]:
    """One epoch per library from the same weights; the epoch-0 losses must agree to
    ``rtol``.  Returns ``{lib: loss}`` (and notes) and the libraries that ran (a
    library that reports itself unsupported, e.g. ``rtx:grouped``, is dropped)."""
    losses: dict[str, Any] = {}
    ran = []
    for lib in libs:
        res = run_child(lib, data, init, args, epochs=1)
        if "unsupported" in res:
            losses[lib] = "n/a: " + res["unsupported"]
            print(f"  {lib}: n/a ({res['unsupported']})", flush=True)
            continue
        losses[lib] = res["losses"][0]
        ran.append(lib)
    vals = {k: v for k, v in losses.items() if isinstance(v, float)}
    print("  epoch-0 loss from the same weights: " +
          ", ".join(f"{k} {v:.7f}" for k, v in vals.items()), flush=True)
    ref = vals.get("rtx", next(iter(vals.values())))
    bad = {k: v for k, v in vals.items() if abs(v - ref) > rtol * abs(ref)}
    if bad:
        raise SystemExit(f"bench_hetgat: error: epoch-0 losses differ beyond rtol {rtol} "
                         f"(same weights): {vals}; the models are not the same, not timing")
    return losses, ran


def compare(g: Any, tag: str, libs: list[str], args: argparse.Namespace,
            tmp: str) -> dict[str, Any]:
    """Check, then time every library on ``g``: the results of every round, by library."""
    data, init = prepare(g, tmp, tag, args)
    out: dict[str, Any] = {"edges": int(g.num_edges), "nodes": dict(g.num_nodes_dict),
                           "features": dict(g.num_features_dict),
                           "relations": len(g.edge_types), "load_start": load_str()}
    print(f"\n{tag}: {g.num_edges} edges in {len(g.edge_types)} relations, nodes "
          f"{g.num_nodes_dict}, features {g.num_features_dict}; load {load_str()}", flush=True)
    if not args.no_check:
        out["epoch0_loss"], libs = check_losses(libs, data, init, args)
    rounds: dict[str, list[dict[str, Any]]] = {lib: [] for lib in libs}
    for r in range(args.rounds):
        k = r % len(libs)
        for lib in libs[k:] + libs[:k]:
            res = run_child(lib, data, init, args)
            if "unsupported" in res:
                print(f"  {lib}: n/a ({res['unsupported']})", flush=True)
                rounds.pop(lib, None)
                libs = [x for x in libs if x != lib]
                continue
            rounds[lib].append(res)
            print(f"  round {r + 1} {lib:3s}: {res['median_epoch_s']:.3f} s/epoch "
                  f"({res['median_epoch_cpu_s']:.3f} s CPU), "
                  f"RSS growth {res['rss_growth_mib']:.0f} MiB, best-val test acc "
                  f"{res['best']['test']:.4f} (val {res['best']['val']:.4f})", flush=True)
    out["rounds"] = rounds
    out["summary"] = summarize(rounds)
    out["load_end"] = load_str()
    curves = {lib: rs[0]["losses"] for lib, rs in rounds.items() if rs}
    if len(curves) > 1:
        ref = curves.get("rtx", next(iter(curves.values())))
        out["max_loss_rel_diff"] = {lib: float(np.max(np.abs(np.subtract(c, ref)) /
                                                np.abs(ref))) for lib, c in curves.items()}
    return out


def summarize(rounds: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians over rounds per library, and rtx's ratios to each anchor."""
    def med(rs: list[dict[str, Any]], key: str) -> float | None:
        vals = [r[key] for r in rs if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    per: dict[str, Any] = {}
    for lib, rs in rounds.items():
        if not rs:
            continue
        per[lib] = {"epoch_s": med(rs, "median_epoch_s"),
                    "epoch_cpu_s": med(rs, "median_epoch_cpu_s"),
                    "rss_growth_mib": med(rs, "rss_growth_mib"),
                    "test_acc": rs[0]["best"]["test"], "val_acc": rs[0]["best"]["val"],
                    "final_loss": rs[0]["losses"][-1],
                    "round_epoch_s": [r["median_epoch_s"] for r in rs]}
    ratios: dict[str, Any] = {}
    for lib in per:
        for anchor in ("pyg", "dgl"):
            if lib.startswith("rtx") and anchor in per:
                a, b = per[lib], per[anchor]
                ratios[f"{lib}/{anchor}"] = {
                    k: (a[k] / b[k] if a[k] is not None and b[k] else None)
                    for k in ("epoch_s", "epoch_cpu_s", "rss_growth_mib")}
                ratios[f"{lib}/{anchor}"]["test_acc_pt"] = 100 * (a["test_acc"] - b["test_acc"])
                ratios[f"{lib}/{anchor}"]["val_acc_pt"] = 100 * (a["val_acc"] - b["val_acc"])
    return {"libs": per, "ratios": ratios}


def print_table(results: dict[int, dict[str, Any]]) -> None:
    def f(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    print("\n| papers | library | epoch wall (s) | epoch CPU (s) | RSS growth (MiB) | "
          "test acc (best val) | val acc | final loss |")
    print("|---|---|---|---|---|---|---|---|")
    for n, res in results.items():
        s = res["summary"]
        for lib, v in s["libs"].items():
            print(f"| {n} | {lib} | {f(v['epoch_s'], '.3f')} | {f(v['epoch_cpu_s'], '.3f')} | "
                  f"{f(v['rss_growth_mib'], '.0f')} | {v['test_acc']:.4f} | "
                  f"{v['val_acc']:.4f} | {v['final_loss']:.4f} |")
        for k, r in s["ratios"].items():
            lib, anchor = k.split("/")
            print(f"| {n} | **{lib} / {anchor}** | **{f(r['epoch_s'], '.2f')}x** | "
                  f"**{f(r['epoch_cpu_s'], '.2f')}x** | **{f(r['rss_growth_mib'], '.2f')}x** | "
                  f"**{r['test_acc_pt']:+.1f} pt** | {r['val_acc_pt']:+.1f} pt | |")


def add_common_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--epochs", type=int, default=10, help="epochs per child (first untimed)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--libs", default="rtx,pyg,dgl",
                    help="comma-separated, of rtx, pyg, dgl (those installed run)")
    ap.add_argument("--dgl-python", default=None,
                    help="python of DGL's environment (default $RTX_DGL_PYTHON or "
                         "/work/dglvenv/bin/python; '' for no DGL)")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the epoch-0 loss check before timing")
    ap.add_argument("--json", default=None, help="write all results here")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", choices=["synthetic", "wide", "dblp"], default="synthetic")
    ap.add_argument("--sizes", type=int, nargs="+", default=None,
                    help="paper counts (default 30000 100000; dblp: 14328, DBLP's own)")
    ap.add_argument("--hgb-path", default=None,
                    help="--graph dblp: HGB's DBLP directory (rtx.datasets.load_hgb); "
                         "default: a generated graph of DBLP's shape")
    ap.add_argument("--path", choices=["default", "per-relation", "grouped"],
                    default="default", help="rtx HetGAT's path (when it has that argument)")
    ap.add_argument("--quick", action="store_true", help="2,000 papers, 5 epochs, 1 round")
    ap.add_argument("--no-pyg", action="store_true", help="rtx only (no PyG, no DGL)")
    ap.add_argument("--plot", default=None, help="PNG of the loss curves (first size)")
    add_common_arguments(ap)
    ap.add_argument("--child", choices=list(LIBS), help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--init", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        if args.child != "dgl":
            use_checkout_build()
        _child_main(args)
        return 0
    use_checkout_build()
    if args.sizes is None:
        args.sizes = [14328] if args.graph == "dblp" else [30000, 100000]
    if args.quick:
        args.sizes, args.epochs, args.rounds = [2000], 5, 1
    if args.graph == "dblp" and args.hgb_path:
        args.sizes = args.sizes[:1]              # the real graph has one size

    import rtx

    libs, versions = available_libs(args)
    t_start, load0 = time.time(), loadavg()
    print(f"rtx {rtx.__version__} from {os.path.dirname(os.path.realpath(rtx.__file__))}")
    print(f"rtx {rtx.__version__}; {versions}; {args.threads} threads; graph {args.graph}; "
          f"hidden {args.hidden}, {args.heads} heads, {args.layers} layers; {args.epochs} epochs "
          f"(first untimed), {args.rounds} rounds, children rotate; libraries {', '.join(libs)}")
    print(f"load average at start: {load_str()}", flush=True)
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-hetgat-") as tmp:
        for n in args.sizes:
            g = make_graph(args.graph, n, args)
            n_eff = _num_target(g) if args.graph != "dblp" else int(g.num_nodes_dict["paper"])
            results[n_eff] = compare(g, f"{args.graph}-{n_eff}", libs, args, tmp)
    print_table(results)
    load1 = loadavg()
    print(f"load average at end: {load_str()} (start {' '.join(f'{v:.2f}' for v in load0)}); "
          f"{time.time() - t_start:.0f} s")
    if args.plot:
        first = next(iter(results.values()))["rounds"]
        _plot(first, args.plot, next(iter(results)))
    if args.json:
        write_json(args.json, {"benchmark": "hetgat", "graph": args.graph,
                               "threads": args.threads, "epochs": args.epochs,
                               "rounds": args.rounds, "versions": versions,
                               "load_start": list(load0), "load_end": list(load1),
                               "seconds": time.time() - t_start,
                               "sizes": {str(k): v for k, v in results.items()}})
    return 0


def _plot(by: dict[str, list[dict[str, Any]]], path: str, n: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    styles = {"rtx": "-", "pyg": "--", "dgl": ":"}
    for lib, rs in by.items():
        ax.plot(range(1, len(rs[0]["losses"]) + 1), rs[0]["losses"], label=lib,
                linestyle=styles.get(lib, "-."))
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss")
    ax.set_title(f"HetGAT, {n} papers, same initial weights")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
