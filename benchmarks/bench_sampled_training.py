"""Sampled training of a 2-layer heterogeneous GAT: rtx beside DGL 2.1.

    python benchmarks/bench_sampled_training.py                  # ogbn-mag size
    python benchmarks/bench_sampled_training.py --scale 0.1 --batches 20
    python benchmarks/bench_sampled_training.py --quick          # a smoke run (seconds)

The graph is ``benchmarks/bench_sampling.py``'s (``rtx.datasets.synthetic_mag(--scale)``
read into plain arrays, with the reverse relations), the seeds its training papers,
batch 1024, fanouts ``--fanouts`` (default 15 10), ``--threads`` threads (default 2).
Labels are drawn at random (seeded): this times the training step, it does not
score the model.  Each side runs in a child process of its own, alternately
(``--rounds`` times), and trains ``--batches`` steps after ``--warmup`` untimed ones:

* rtx: ``rtx.loader.NeighborLoader`` (prefetch 1) + ``rtx.nn.HetGAT`` (hidden
  ``--hidden``, ``--heads`` heads, 2 layers; a sparse ``rtx.nn.Embedding`` per
  featureless type, ``SparseAdam`` for them, ``Adam`` for the rest), cross-entropy
  on the seeds; the batch's ``num_sampled_nodes`` / ``num_sampled_edges`` trim each
  layer to the hops it needs (PyG's ``trim_to_layer``; DGL's blocks do the same),
  ``--no-trim`` runs every layer on the whole batch.
* DGL: ``dgl.dataloading.NeighborSampler`` (fanouts reversed) + ``DataLoader``, and
  the same model written with DGL: per layer ``HeteroGraphConv({rel: GATConv}, "sum")``
  on the blocks (``allow_zero_in_degree``; DGL's GATConv adds no self-loops, rtx's
  HetGAT adds them within one node type), ELU, a linear head; ``torch.nn.Embedding(
  sparse=True)`` + ``torch.optim.SparseAdam`` for the featureless types, Adam for the
  rest.  Threads: ``torch.set_num_threads``, ``dgl.utils.set_num_threads``,
  ``OMP_NUM_THREADS``.

Both sides drop the input edge arrays once their library holds its own copy of the
graph's structure (DGL: ``dgl.heterograph``'s; rtx: each loader's ``NeighborSampler``,
8 B per destination + 4 B per edge per relation), and keep the paper features, which
their batches gather from; ``--keep-edges`` keeps rtx's (644 MiB more at scale 1).

Reported per side: seconds per 100 batches (median over rounds) and peak RSS
(``VmHWM``, the whole child: graph, sampler, model and optimiser state).  The load
average is printed at the start and the end: figures above 1 are not of record.

``--epoch`` trains one whole epoch on the graph's own labels instead (every training
paper once, ``--batches`` and ``--warmup`` ignored, every batch timed) and then scores
both models the same way: test papers (2019) in batches of 1024 with the same fanouts
(sampled evaluation, forward only), accuracy = argmax against the label.  There DGL's
model gets rtx's self-loops (on ``cites``, the relation within one node type: each
block's self edges dropped, one loop per destination node added, PyG's and rtx's
``GATConv`` rule), so both train the same model; the timed runs leave them out (less
work for DGL).  The issue's target: one-epoch accuracy within 1 point of DGL's.
"""

from __future__ import annotations

import argparse
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
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_sampling as bs  # noqa: E402  (the graph files and helpers)

NUM_CLASSES = 349


def _labels(n: int, d: str | None = None) -> np.ndarray:
    """The graph's own labels (``--epoch``: ``y.npy`` beside the graph), else random."""
    if d is not None and os.path.exists(os.path.join(d, "y.npy")):
        return np.load(os.path.join(d, "y.npy"))
    return np.random.default_rng(7).integers(0, NUM_CLASSES, n)


def _plan(a: dict[str, Any], train: np.ndarray) -> int:
    """Batches to run: a whole epoch with ``--epoch``, else warmup + timed."""
    if a.get("epoch"):
        return -(-len(train) // bs.BATCH)
    return a["warmup"] + a["batches"]


def child_rtx(d: str, a: dict[str, Any]) -> dict[str, Any]:
    bs.use_checkout_build()
    import rtx
    from rtx.data import HeteroData
    from rtx.loader import NeighborLoader

    rtx.set_num_threads(a["threads"])
    nodes, edges, x, train = bs.load_graph(d)
    data = HeteroData()
    for nt, n in nodes.items():
        data[nt].num_nodes = n
    data["paper"].x = rtx.from_numpy(x)
    for et, ei in edges.items():
        data[et].edge_index = ei
    y = _labels(nodes["paper"], d if a.get("epoch") else None)
    rtx.manual_seed(0)
    model = rtx.nn.HetGAT(data.metadata(), {nt: (x.shape[1] if nt == "paper" else None)
                                            for nt in nodes}, a["hidden"], NUM_CLASSES,
                          heads=a["heads"], num_layers=2, num_nodes_dict=nodes, sparse=True,
                          **({"path": a["path"]} if a.get("path") else {}))
    opts = [rtx.optim.Adam(model.dense_parameters(), lr=0.005),
            rtx.optim.SparseAdam(model.embedding_parameters(), lr=0.005)]
    loader = NeighborLoader(data, a["fanouts"], input_nodes=("paper", train),
                            batch_size=bs.BATCH, shuffle=True, seed=1, prefetch=1)
    ev = None
    if a.get("epoch"):   # (built now, while the graph's edge arrays are here to sample)
        ev = NeighborLoader(data, a["fanouts"],
                            input_nodes=("paper", np.load(os.path.join(d, "test.npy"))),
                            batch_size=bs.BATCH, shuffle=False, seed=2, prefetch=1)
    if not a.get("keep_edges"):
        # Each loader's sampler holds a private, compact copy of the graph's structure
        # (NeighborSampler.nbytes: 8 B per destination + 4 B per edge): nothing reads
        # the input edge arrays again, so they go, as the DGL side's go once
        # dgl.heterograph has made its own copy (``--keep-edges`` keeps them).
        for et in edges:
            del data[et].edge_index
        del edges
    it = iter(loader)
    t = 0.0
    nb = _plan(a, train)
    warm = 0 if a.get("epoch") else a["warmup"]
    for b in range(nb):
        t0 = time.perf_counter()
        batch = next(it)
        k = batch["paper"].batch_size
        trim = ({} if a.get("no_trim") else
                dict(num_sampled_nodes_dict=batch.num_sampled_nodes_dict,
                     num_sampled_edges_dict=batch.num_sampled_edges_dict))
        out = model(batch.x_dict, batch.edge_index_dict, batch.n_id_dict, **trim)[:k]
        loss = rtx.nn.functional.cross_entropy(
            out, rtx.tensor(y[batch["paper"].n_id.numpy()[:k]]))
        for o in opts:
            o.zero_grad()
        loss.backward()
        for o in opts:
            o.step()
        if b >= warm:
            t += time.perf_counter() - t0
    it.close()
    res = {"train_s": t, "batches": nb - warm, "loss": float(loss.item()),
           "peak_rss_mib": bs._peak_rss_mib()}
    if ev is not None:
        test = np.load(os.path.join(d, "test.npy"))
        right = 0
        with rtx.no_grad():
            for batch in ev:
                k = batch["paper"].batch_size
                out = model(batch.x_dict, batch.edge_index_dict, batch.n_id_dict,
                            num_sampled_nodes_dict=batch.num_sampled_nodes_dict,
                            num_sampled_edges_dict=batch.num_sampled_edges_dict)[:k]
                pred = out.numpy().argmax(1)
                right += int((pred == y[batch["paper"].n_id.numpy()[:k]]).sum())
        res["test_acc"] = right / len(test)
        res["peak_rss_mib"] = bs._peak_rss_mib()
    return res


def child_dgl(d: str, a: dict[str, Any]) -> dict[str, Any]:
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import dgl
    import dgl.nn as dglnn
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(a["threads"])
    dgl.utils.set_num_threads(a["threads"])
    nodes, edges, x, train = bs.load_graph(d)
    g = dgl.heterograph({et: (torch.from_numpy(ei[0]), torch.from_numpy(ei[1]))
                         for et, ei in edges.items()}, num_nodes_dict=nodes)
    del edges
    feat = torch.from_numpy(x)
    y = torch.from_numpy(_labels(nodes["paper"], d if a.get("epoch") else None))
    H, hid = a["heads"], a["hidden"]
    torch.manual_seed(0)

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.ModuleDict({nt: torch.nn.Embedding(n, hid, sparse=True)
                                            for nt, n in nodes.items() if nt != "paper"})
            ins = {nt: (x.shape[1] if nt == "paper" else hid) for nt in nodes}

            def layer(first: bool) -> Any:
                return dglnn.HeteroGraphConv({
                    r: dglnn.GATConv((ins[s] if first else hid, ins[t] if first else hid),
                                     hid // H, H, allow_zero_in_degree=True)
                    for s, r, t in g.canonical_etypes}, aggregate="sum")

            self.layers = torch.nn.ModuleList([layer(True), layer(False)])
            self.lin = torch.nn.Linear(hid, NUM_CLASSES)

        def forward(self, blocks: Any, input_nodes: Any) -> Any:
            h = {nt: (feat[ids] if nt == "paper" else self.emb[nt](ids))
                 for nt, ids in input_nodes.items()}
            if a.get("epoch"):
                blocks = [_with_self_loops(b) for b in blocks]
            for layer, block in zip(self.layers, blocks, strict=True):
                h = layer(block, h)
                h = {nt: F.elu(v.flatten(1)) for nt, v in h.items()}
            return self.lin(h["paper"])

    def _with_self_loops(block: Any) -> Any:
        """rtx's (and PyG's) GATConv rule on a block: on a relation within one node
        type, its self edges dropped and one loop (i, i) per destination node added
        (a block's destination nodes are its first source nodes)."""
        data = {}
        for et in block.canonical_etypes:
            src, dst = block.edges(etype=et)
            if et[0] == et[2]:
                n = block.num_dst_nodes(et[2])
                keep = src != dst
                loop = torch.arange(n, dtype=src.dtype)
                src, dst = torch.cat([src[keep], loop]), torch.cat([dst[keep], loop])
            data[et] = (src, dst)
        nb = dgl.create_block(data, num_src_nodes={t: block.num_src_nodes(t)
                                                   for t in block.srctypes},
                              num_dst_nodes={t: block.num_dst_nodes(t) for t in block.dsttypes})
        return nb

    model = Model()
    emb = list(model.emb.parameters())
    ids = {id(p) for p in emb}
    opts = [torch.optim.Adam([p for p in model.parameters() if id(p) not in ids], lr=0.005),
            torch.optim.SparseAdam(emb, lr=0.005)]
    sampler = dgl.dataloading.NeighborSampler(list(reversed(a["fanouts"])))
    loader = dgl.dataloading.DataLoader(g, {"paper": torch.from_numpy(train)}, sampler,
                                        batch_size=bs.BATCH, shuffle=True, num_workers=0)
    it = iter(loader)
    t = 0.0
    nb = _plan(a, train)
    warm = 0 if a.get("epoch") else a["warmup"]
    for b in range(nb):
        t0 = time.perf_counter()
        input_nodes, output_nodes, blocks = next(it)
        out = model(blocks, input_nodes)
        loss = F.cross_entropy(out, y[output_nodes["paper"]])
        for o in opts:
            o.zero_grad()
        loss.backward()
        for o in opts:
            o.step()
        if b >= warm:
            t += time.perf_counter() - t0
    res = {"train_s": t, "batches": nb - warm, "loss": float(loss.item()),
           "peak_rss_mib": bs._peak_rss_mib()}
    if a.get("epoch"):
        test = torch.from_numpy(np.load(os.path.join(d, "test.npy")))
        ev = dgl.dataloading.DataLoader(g, {"paper": test}, sampler, batch_size=bs.BATCH,
                                        shuffle=False, num_workers=0)
        right = 0
        with torch.no_grad():
            for input_nodes, output_nodes, blocks in ev:
                pred = model(blocks, input_nodes).argmax(1)
                right += int((pred == y[output_nodes["paper"]]).sum())
        res["test_acc"] = right / len(test)
        res["peak_rss_mib"] = bs._peak_rss_mib()
    return res


def _run_child(python: str, side: str, d: str, a: dict[str, Any]) -> dict | None:
    env = {**os.environ, "OMP_NUM_THREADS": str(a["threads"]), "DGLBACKEND": "pytorch"}
    cmd = [python, os.path.abspath(__file__), "--child", side, "--data", d,
           "--child-args", json.dumps(a)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a["timeout"])
    if r.returncode != 0:
        print(f"# {side} child failed ({r.returncode}):\n{r.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench_sampled_training",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--fanouts", type=int, nargs=2, default=[15, 10])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dgl-python", default=None)
    ap.add_argument("--no-dgl", action="store_true")
    ap.add_argument("--keep-edges", action="store_true",
                    help="rtx keeps the input edge arrays after building its loader "
                         "(default: they are dropped, as DGL's side drops its own)")
    ap.add_argument("--no-trim", action="store_true",
                    help="rtx: every layer on the whole batch (no trim to the layer)")
    ap.add_argument("--quick", action="store_true", help="scale 0.01, 3 batches, 1 round")
    ap.add_argument("--path", choices=["grouped", "per-relation"], default=None,
                    help="rtx's HetGAT path (default: HetGAT's default, grouped)")
    ap.add_argument("--epoch", action="store_true",
                    help="one whole epoch on the graph's labels, then test accuracy (sampled)")
    ap.add_argument("--json", default=None, help="also write the results here (atomically)")
    ap.add_argument("--timeout", type=float, default=7200)
    ap.add_argument("--child", choices=["rtx", "dgl"], help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--child-args", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        fn = child_rtx if args.child == "rtx" else child_dgl
        print(json.dumps(fn(args.data, json.loads(args.child_args))))
        return 0
    if args.threads < 1 or args.batches < 1 or args.warmup < 0 or args.rounds < 1 \
            or not args.scale > 0 or args.hidden % args.heads or min(args.fanouts) < -1:
        ap.error("--threads, --batches, --rounds >= 1, --warmup >= 0, --scale > 0, --hidden "
                 "a multiple of --heads, fanouts >= -1")
    if args.quick:
        args.scale, args.batches, args.rounds, args.warmup = min(args.scale, 0.01), 3, 1, 1
    print(f"# load average at start (1/5/15 min): {bs._loadavg()}  (not of record above 1)")
    dgl_py = None if args.no_dgl else bs._dgl_python(args.dgl_python)
    if not args.no_dgl and dgl_py is None:
        print("# DGL not found (--dgl-python / $RTX_DGL_PYTHON): rtx only")
    t0 = time.perf_counter()
    labels = None
    if args.epoch:
        bs.use_checkout_build()
        import rtx.datasets

        src = rtx.datasets.synthetic_mag(scale=args.scale, seed=0)
        pp = src["paper"]
        labels = (bs._host(pp.y).astype(np.int64), np.flatnonzero(bs._host(pp.test_mask)))
        g = bs._read_mag(src)
        del src, pp
    else:
        g = bs._from_synthetic_mag(args.scale, 0) or bs.mag_graph(args.scale, 0)
    nodes, edges, x, train = g
    print(f"# graph ({time.perf_counter() - t0:.1f} s): {sum(nodes.values()):,} nodes, "
          f"{sum(e.shape[1] for e in edges.values()):,} edges, {len(train):,} training papers; "
          f"fanouts {args.fanouts}, batch {bs.BATCH}, hidden {args.hidden}, {args.heads} "
          f"heads, {args.threads} threads, {args.batches} timed batches after {args.warmup}; "
          f"rtx {'keeps' if args.keep_edges else 'drops'} the input edge arrays once its "
          "loader is built")
    a = {"fanouts": args.fanouts, "threads": args.threads, "batches": args.batches,
         "warmup": args.warmup, "hidden": args.hidden, "heads": args.heads,
         "timeout": args.timeout, "no_trim": args.no_trim, "epoch": args.epoch,
         "keep_edges": args.keep_edges,
         "path": args.path}
    runs: dict[str, list[dict]] = {"rtx": [], "dgl": []}
    with tempfile.TemporaryDirectory(prefix="rtx-bench-sampled-training-") as d:
        bs.save_graph(d, nodes, edges, x, train)
        if labels is not None:
            np.save(os.path.join(d, "y.npy"), labels[0])
            np.save(os.path.join(d, "test.npy"), labels[1])
            print(f"# one epoch: {-(-len(train) // bs.BATCH)} batches, then "
                  f"{len(labels[1]):,} test papers (sampled evaluation, same fanouts)")
        del g, nodes, edges, x, train
        for _ in range(args.rounds):
            for side, py in (("rtx", sys.executable), ("dgl", dgl_py)):
                if py is not None:
                    r = _run_child(py, side, d, a)
                    if r is not None:
                        runs[side].append(r)
    res: dict[str, Any] = {}
    print(f"\n  {'':4} {'s / 100 batches':>16} {'peak RSS MiB':>13} {'last loss':>10}")
    for side, rs in runs.items():
        if rs:
            res[side] = {"s_per_100": statistics.median(100 * r["train_s"] / r["batches"]
                                                        for r in rs),
                         "peak_rss_mib": max(r["peak_rss_mib"] for r in rs),
                         "loss": rs[-1]["loss"]}
            acc = ""
            if "test_acc" in rs[-1]:
                res[side]["test_acc"] = statistics.median(r["test_acc"] for r in rs)
                res[side]["epoch_s"] = statistics.median(r["train_s"] for r in rs)
                acc = (f"   test acc {res[side]['test_acc']:.4f} after one epoch "
                       f"({res[side]['epoch_s']:.0f} s)")
            print(f"  {side:4} {res[side]['s_per_100']:16.1f} {res[side]['peak_rss_mib']:13,.0f}"
                  f" {res[side]['loss']:10.3f}{acc}")
    if "rtx" in res and "dgl" in res:
        print(f"  rtx / dgl: {res['rtx']['s_per_100'] / res['dgl']['s_per_100']:.2f}x the time "
              f"(target <= 0.5x), {res['rtx']['peak_rss_mib'] / res['dgl']['peak_rss_mib']:.2f}x "
              "the peak RSS (target <= 0.6x)")
        if "test_acc" in res["rtx"] and "test_acc" in res["dgl"]:
            gap = 100 * (res["rtx"]["test_acc"] - res["dgl"]["test_acc"])
            print(f"  one-epoch test accuracy, rtx - dgl: {gap:+.2f} points (target within 1)")
    print(f"# load average at end (1/5/15 min): {bs._loadavg()}")
    if args.json:
        bs.use_checkout_build()
        from rtx._fileio import atomic_write
        with atomic_write(args.json, "w") as fh:
            json.dump({"scale": args.scale, **a, "loadavg_end": bs._loadavg(),
                       "results": res}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
