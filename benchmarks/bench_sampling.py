"""Heterogeneous neighbour sampling with feature gathering: rtx beside DGL 2.1.

    python benchmarks/bench_sampling.py                   # ogbn-mag size, [15, 10] and [25, 20]
    python benchmarks/bench_sampling.py --scale 0.1 --batches 30
    python benchmarks/bench_sampling.py --quick           # a smoke run (seconds)
    python benchmarks/bench_sampling.py --dgl-python /path/to/dglvenv/bin/python
    python benchmarks/bench_sampling.py --loader --scale 0.05   # the loader's overlap

The graph has ogbn-mag's schema and size at ``--scale 1``: paper 736,389 (128-d
float32 features), author 1,134,649, institution 8,740, field_of_study 59,965;
writes 7,145,660, affiliated_with 1,043,998, cites 5,416,271, has_topic 7,505,078
edges, each with its reverse relation (``rev_*``; 42.2M edges in all), heavy-tailed
degrees.  ``rtx.datasets.synthetic_mag`` when it exists (``--graph auto``), else
the generator below (vectorised numpy, seeded).  The seeds are the training
papers (the first 85.5 % of a seeded permutation, ogbn-mag's train share),
shuffled per epoch, batch 1024.

Each side runs in a child process of its own, alternately (rtx, dgl, rtx, dgl,
... ``--rounds`` times), on the same graph files and thread count:

* rtx: ``rtx.loader.NeighborSampler(graph, fanouts)``; per batch
  ``sampler.sample(("paper", seeds), epoch, batch)`` and the paper features of
  ``n_id["paper"]`` gathered with ``rtx.index_select``.
* DGL: ``dgl.dataloading.NeighborSampler(fanouts reversed)`` (DGL lists fanouts
  from the input layer; PyG and rtx from the seeds) + ``dgl.dataloading.DataLoader``
  (``num_workers=0``) over the same heterograph; per batch the paper features of
  ``input_nodes["paper"]`` gathered with torch indexing.  Threads:
  ``dgl.utils.set_num_threads``, ``torch.set_num_threads`` and ``OMP_NUM_THREADS``.

Featureless types (author, institution, field_of_study) are skipped on both
sides (their ids are the sample).  Reported per side: batches/s and sampled edges/s
over ``--batches`` batches after ``--warmup`` untimed ones (medians over rounds),
graph build time (the sampler's adjacency; DGL's heterograph + its formats built
by the warm-up), peak RSS.  Edge counts differ a little by design: DGL's blocks
re-sample every node of the previous block (the seeds again at hop 2), PyG's and
rtx's hop k expands only the nodes hop k - 1 added.

``--loader`` measures ``rtx.loader.NeighborLoader``'s background thread instead:
a small heterogeneous GAT (a linear layer on the paper features, zeros for the
featureless types, two ``HeteroConv(GATConv)`` layers, hidden ``--hidden``, 2
heads) trains one step per batch on ``rtx.datasets.synthetic_mag(--scale)``'s
training papers, with ``prefetch=0`` (sample, gather, then train) and ``prefetch=1``
(the next batch sampled and gathered on the loader's thread while this one trains),
``--rounds`` times in alternating order, each after ``--warmup`` untimed batches.
Reported: wall time per batch of each and, of it, the time the loop waits in
``next(loader)`` (with ``prefetch=0`` the whole sampling + gathering; with
``prefetch=1`` only what training did not hide), the loader alone (sampling +
gathering, no training) and training alone (on batches made beforehand), and the
share of the loading hidden behind training, ``1 - wait(prefetch 1) /
wait(prefetch 0)`` (1 = all of it).
``--loader-threads`` gives the loader's sampler its own thread count (training
keeps ``--threads``).

The machine this runs on is often shared: the load average is printed at the start
and the end; figures with a load average above 1 are not of record.
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
if ROOT not in sys.path:   # `benchmarks` importable, after any installed rtx
    sys.path.append(ROOT)
from benchmarks._proc import use_checkout_build  # noqa: E402 - stdlib only

# ogbn-mag at scale 1
MAG_NODES = {"paper": 736_389, "author": 1_134_649, "institution": 8_740,
             "field_of_study": 59_965}
MAG_EDGES = {("author", "writes", "paper"): 7_145_660,
             ("author", "affiliated_with", "institution"): 1_043_998,
             ("paper", "cites", "paper"): 5_416_271,
             ("paper", "has_topic", "field_of_study"): 7_505_078}
# tail exponents of the (Pareto) node weights: smaller = heavier tail
TAIL = {"paper": 1.6, "author": 1.8, "institution": 1.1, "field_of_study": 1.05}
TRAIN_SHARE = 629_571 / 736_389
FEATURES = 128
BATCH = 1024


def _loadavg() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def _peak_rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def mag_graph(scale: float, seed: int = 0) -> tuple[dict[str, int], dict[tuple[str, str, str],
                                                                          np.ndarray],
                                                    np.ndarray, np.ndarray]:
    """An ogbn-mag-shaped graph: (num_nodes, edge_index (with rev_*), paper x, train ids).

    Per relation a configuration model: heavy-tailed out- and in-degree sequences
    (multinomial over fixed Pareto propensities per node), sources and destinations
    paired by a random permutation, self loops and duplicate edges dropped and
    topped up with more draws until the target count is reached.
    """
    rng = np.random.default_rng(seed)
    nodes = {t: max(1, round(n * scale)) for t, n in MAG_NODES.items()}
    edges: dict[tuple[str, str, str], np.ndarray] = {}
    for (s, r, d), e in MAG_EDGES.items():
        e = max(1, round(e * scale))
        ws, wd = rng.pareto(TAIL[s], nodes[s]) + 1.0, rng.pareto(TAIL[d], nodes[d]) + 1.0
        key = np.zeros(0, np.int64)
        for _ in range(20):     # top up until the duplicates are made up for
            m = int((e - len(key)) * 1.1) + 16
            src = np.repeat(np.arange(nodes[s], dtype=np.int64), rng.multinomial(m, ws / ws.sum()))
            dst = np.repeat(np.arange(nodes[d], dtype=np.int64), rng.multinomial(m, wd / wd.sum()))
            new = src * nodes[d] + dst[rng.permutation(m)]
            if s == d:
                new = new[new // nodes[d] != new % nodes[d]]
            key = np.concatenate([key, new])
            key.sort()
            key = key[np.concatenate([[True], key[1:] != key[:-1]])]
            if len(key) >= e:
                break
        if len(key) > e:
            key = np.sort(key[rng.permutation(len(key))[:e]])   # ordered by source, as OGB's
        edges[(s, r, d)] = np.stack([key // nodes[d], key % nodes[d]])
    for (s, r, d) in list(MAG_EDGES):
        ei = edges[(s, r, d)]
        edges[(d, f"rev_{r}", s)] = np.stack([ei[1], ei[0]])
    x = rng.standard_normal((nodes["paper"], FEATURES), dtype=np.float32)
    train = np.sort(rng.permutation(nodes["paper"])[: int(nodes["paper"] * TRAIN_SHARE)])
    return nodes, edges, x, train


def _from_synthetic_mag(scale: float, seed: int) -> Any:
    """``rtx.datasets.synthetic_mag`` in the layout above, or None when it is absent
    or its graph does not read as expected (then the generator below is used)."""
    use_checkout_build()
    try:
        import rtx.datasets as ds
    except ImportError:
        return None
    fn = getattr(ds, "synthetic_mag", None)
    if fn is None:
        return None
    try:
        return _read_mag(fn(scale=scale, seed=seed))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        print(f"# rtx.datasets.synthetic_mag's graph did not read as expected ({exc!r}): "
              "using the benchmark's own generator")
        return None


def _host(a: Any) -> np.ndarray:
    return np.asarray(a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else a)


def _read_mag(g: Any) -> Any:
    """(num_nodes, edge_index, paper x, train ids) of a HeteroGraph / HeteroData-like graph."""
    nodes = {k: int(v) for k, v in g.num_nodes_dict.items()}
    edges = {k: _host(v).astype(np.int64, copy=False) for k, v in g.edge_index_dict.items()}
    x = np.ascontiguousarray(_host(g.x_dict["paper"]), dtype=np.float32)
    mask = getattr(g, "train_mask", None)
    if mask is None:
        mask = g["paper"].train_mask
    return nodes, edges, x, np.flatnonzero(_host(mask))


def save_graph(d: str, nodes: dict[str, int], edges: dict[tuple[str, str, str], np.ndarray],
               x: np.ndarray, train: np.ndarray) -> None:
    meta = {"nodes": nodes, "edge_types": [list(et) for et in edges]}
    for i, ei in enumerate(edges.values()):
        np.save(os.path.join(d, f"edge{i}.npy"), np.ascontiguousarray(ei, dtype=np.int64))
    np.save(os.path.join(d, "x_paper.npy"), x)
    np.save(os.path.join(d, "train.npy"), train.astype(np.int64))
    with open(os.path.join(d, "meta.json"), "w") as fh:
        json.dump(meta, fh)


def load_graph(d: str) -> tuple[dict[str, int], dict[tuple[str, str, str], np.ndarray],
                                np.ndarray, np.ndarray]:
    with open(os.path.join(d, "meta.json")) as fh:
        meta = json.load(fh)
    edges = {tuple(et): np.load(os.path.join(d, f"edge{i}.npy"))
             for i, et in enumerate(meta["edge_types"])}
    return (meta["nodes"], edges, np.load(os.path.join(d, "x_paper.npy")),  # type: ignore[return-value]
            np.load(os.path.join(d, "train.npy")))


def _batches(train: np.ndarray, n: int, seed: int) -> list[np.ndarray]:
    perm = np.random.default_rng(seed).permutation(train)
    out = [perm[i: i + BATCH] for i in range(0, len(perm), BATCH)]
    return out[:n]


# ------------------------------------------------------------------ children
def child_rtx(d: str, fanouts: list[int], threads: int, batches: int, warmup: int) -> dict:
    use_checkout_build()
    import rtx
    from rtx.loader import NeighborSampler

    rtx.set_num_threads(threads)
    nodes, edges, x, train = load_graph(d)

    class Graph:
        num_nodes_dict = nodes
        edge_index_dict = edges

    t0 = time.perf_counter()
    sampler = NeighborSampler(Graph(), fanouts)
    build = time.perf_counter() - t0
    del edges
    xt = rtx.from_numpy(x)
    plan = _batches(train, warmup + batches, seed=1)
    n_edges = n_nodes = 0
    t_sample = t_gather = 0.0
    for b, seeds in enumerate(plan):
        t0 = time.perf_counter()
        out = sampler.sample(("paper", seeds), epoch=0, batch=b)
        t1 = time.perf_counter()
        feats = rtx.index_select(xt, out.n_id_dict["paper"])
        t2 = time.perf_counter()
        assert feats.shape == (len(out.n_id_dict["paper"]), FEATURES)
        if b >= warmup:
            t_sample += t1 - t0
            t_gather += t2 - t1
            n_edges += out.num_edges
            n_nodes += sum(len(v) for v in out.n_id_dict.values())
    return {"build_s": build, "sample_s": t_sample, "gather_s": t_gather,
            "edges": n_edges, "nodes": n_nodes, "batches": batches,
            "peak_rss_mib": _peak_rss_mib()}


def child_dgl(d: str, fanouts: list[int], threads: int, batches: int, warmup: int) -> dict:
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import dgl
    import torch

    torch.set_num_threads(threads)
    dgl.utils.set_num_threads(threads)
    nodes, edges, x, train = load_graph(d)
    t0 = time.perf_counter()
    g = dgl.heterograph({et: (torch.from_numpy(ei[0]), torch.from_numpy(ei[1]))
                         for et, ei in edges.items()}, num_nodes_dict=nodes)
    del edges
    feat = torch.from_numpy(x)
    sampler = dgl.dataloading.NeighborSampler(list(reversed(fanouts)))
    # the same seed batches as rtx (DGL's own shuffle draws other ones)
    plan = _batches(train, warmup + batches, seed=1)
    build = time.perf_counter() - t0
    n_edges = n_nodes = 0
    t_sample = t_gather = 0.0
    loader = dgl.dataloading.DataLoader(
        g, {"paper": torch.from_numpy(np.concatenate(plan))}, sampler, batch_size=BATCH,
        shuffle=False, drop_last=False, num_workers=0)
    it = iter(loader)
    for b in range(len(plan)):
        t0 = time.perf_counter()
        input_nodes, _, blocks = next(it)
        t1 = time.perf_counter()
        feats = feat[input_nodes["paper"]]
        t2 = time.perf_counter()
        assert feats.shape == (len(input_nodes["paper"]), FEATURES)
        if b == 0:
            build += t1 - t0            # DGL builds its sparse formats on first use
        if b >= warmup:
            t_sample += t1 - t0
            t_gather += t2 - t1
            n_edges += sum(int(blk.num_edges()) for blk in blocks)
            n_nodes += sum(len(v) for v in input_nodes.values())
    return {"build_s": build, "sample_s": t_sample, "gather_s": t_gather,
            "edges": n_edges, "nodes": n_nodes, "batches": batches,
            "peak_rss_mib": _peak_rss_mib()}


def _run_child(python: str, side: str, d: str, fanouts: list[int], args: argparse.Namespace
               ) -> dict | None:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(args.threads)
    env["DGLBACKEND"] = "pytorch"
    cmd = [python, os.path.abspath(__file__), "--child", side, "--data", d,
           "--fanouts", *map(str, fanouts), "--threads", str(args.threads),
           "--batches", str(args.batches), "--warmup", str(args.warmup)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    if r.returncode != 0:
        print(f"# {side} child failed ({r.returncode}):\n{r.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def _dgl_python(path: str | None) -> str | None:
    cands = [path] if path else [os.environ.get("RTX_DGL_PYTHON"), "/work/dglvenv/bin/python"]
    for p in cands:
        if p and os.path.exists(p):
            r = subprocess.run([p, "-c", "import dgl"], capture_output=True,
                               env={**os.environ, "DGLBACKEND": "pytorch"})
            if r.returncode == 0:
                return p
    return None


# ------------------------------------------------------------ loader overlap
def _tiny_hetgat(rtx: Any, data: Any, hidden: int, heads: int = 2) -> Any:
    """Linear on the featured types, zeros for the featureless ones, two
    HeteroConv(GATConv) layers (the second only into the target), a classifier."""
    nn = rtx.nn
    target = data.target
    in_dims = {nt: int(data[nt].x.shape[1]) for nt in data.node_types if "x" in data[nt]}

    class TinyHetGAT(nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.featureless = [nt for nt in data.node_types if nt not in in_dims]
            self.lin = nn.ModuleDict({nt: nn.Linear(d, hidden) for nt, d in in_dims.items()})

            def conv(et: tuple[str, str, str]) -> Any:
                ch = hidden if et[0] == et[2] else (hidden, hidden)
                return nn.GATConv(ch, hidden // heads, heads=heads, add_self_loops=False)

            self.conv1 = nn.HeteroConv({et: conv(et) for et in data.edge_types})
            self.conv2 = nn.HeteroConv({et: conv(et) for et in data.edge_types
                                        if et[2] == target})
            self.head = nn.Linear(hidden, int(data.num_classes))

        def forward(self, batch: Any) -> Any:
            h = {nt: rtx.relu(self.lin[nt](batch[nt].x)) for nt in self.lin}
            for nt in self.featureless:
                h[nt] = rtx.zeros(batch[nt].num_nodes, hidden)
            h1 = self.conv1(h, batch.edge_index_dict)
            h = {nt: rtx.elu(h1[nt]) if nt in h1 else v for nt, v in h.items()}
            return self.head(self.conv2(h, batch.edge_index_dict)[target])

    return TinyHetGAT()


def run_loader(args: argparse.Namespace, fanouts: list[int]) -> dict[str, Any]:
    """Wall time per batch with prefetch 0 and 1, the loader and training alone."""
    use_checkout_build()
    import rtx
    import rtx.nn.functional as F
    from rtx.loader import NeighborLoader

    rtx.set_num_threads(args.threads)
    t0 = time.perf_counter()
    data = rtx.datasets.synthetic_mag(args.scale, seed=0)
    print(f"# graph (rtx.datasets.synthetic_mag({args.scale}), "
          f"{time.perf_counter() - t0:.1f} s): {data.num_nodes:,} nodes, "
          f"{data.num_edges:,} edges")
    rtx.manual_seed(0)
    model = _tiny_hetgat(rtx, data, args.hidden)
    opt = rtx.optim.Adam(model.parameters(), lr=0.005)
    target = data.target

    def loader(prefetch: int) -> Any:
        return NeighborLoader(data, fanouts, input_nodes=(target, data[target].train_mask),
                              batch_size=args.batch_size, shuffle=True, seed=0,
                              prefetch=prefetch, num_threads=args.loader_threads)

    def step(batch: Any) -> None:
        bs = batch[target].batch_size
        loss = F.cross_entropy(model(batch)[:bs], batch[target].y[:bs])
        opt.zero_grad()
        loss.backward()
        opt.step()

    n = args.batches

    def train(prefetch: int) -> tuple[float, float]:
        """(wall per batch, of it the time the loop waits for next())."""
        it = iter(loader(prefetch))
        for _ in range(args.warmup):
            step(next(it))
        wait = 0.0
        t = time.perf_counter()
        for _ in range(n):
            t1 = time.perf_counter()
            b = next(it)
            wait += time.perf_counter() - t1
            step(b)
        dt = time.perf_counter() - t
        it.close()
        return dt / n, wait / n

    def load_only() -> tuple[float, list[Any]]:
        it = iter(loader(0))
        warm = [next(it) for _ in range(args.warmup)]
        t = time.perf_counter()
        kept = [next(it) for _ in range(n)]
        return (time.perf_counter() - t) / n, warm + kept

    def train_only(batches: list[Any]) -> float:
        for b in batches[: args.warmup]:
            step(b)
        t = time.perf_counter()
        for b in batches[args.warmup:]:
            step(b)
        return (time.perf_counter() - t) / n

    if len(loader(0)) < args.warmup + n:
        raise SystemExit(f"bench_sampling: only {len(loader(0))} batches per epoch; lower "
                         "--batches / --warmup or raise --scale")
    sync, ahead, t_load, t_train = [], [], [], []
    for k in range(args.rounds):      # alternating orders, so that drift cancels
        tl, kept = load_only()
        t_load.append(tl)
        t_train.append(train_only(kept))
        del kept
        if k % 2:
            ahead.append(train(1))
            sync.append(train(0))
        else:
            sync.append(train(0))
            ahead.append(train(1))
    med = statistics.median
    r = {"fanouts": fanouts, "batch_size": args.batch_size, "hidden": args.hidden,
         "threads": args.threads, "loader_threads": args.loader_threads,
         "wall_ms_prefetch0": 1e3 * med(w for w, _ in sync),
         "wall_ms_prefetch1": 1e3 * med(w for w, _ in ahead),
         "wait_ms_prefetch0": 1e3 * med(q for _, q in sync),
         "wait_ms_prefetch1": 1e3 * med(q for _, q in ahead),
         "load_ms": 1e3 * med(t_load), "train_ms": 1e3 * med(t_train)}
    # the loop waits for the whole batch without prefetch; what it still waits for
    # with prefetch is the part of loading not hidden behind the previous step
    r["hidden_share"] = 1.0 - r["wait_ms_prefetch1"] / r["wait_ms_prefetch0"]
    print(f"\nloader overlap, fanouts {fanouts}, batch {args.batch_size}, hidden "
          f"{args.hidden}, {args.threads} threads (loader: "
          f"{args.loader_threads or args.threads}), {n} batches x {args.rounds} rounds:")
    speedup = r["wall_ms_prefetch0"] / r["wall_ms_prefetch1"]
    print(f"  wall per batch: prefetch 0 {r['wall_ms_prefetch0']:.1f} ms, prefetch 1 "
          f"{r['wall_ms_prefetch1']:.1f} ms ({speedup:.2f}x)")
    print(f"  waiting for next(): prefetch 0 {r['wait_ms_prefetch0']:.1f} ms, prefetch 1 "
          f"{r['wait_ms_prefetch1']:.1f} ms per batch")
    print(f"  alone: loading {r['load_ms']:.1f} ms, training {r['train_ms']:.1f} ms per batch")
    print(f"  loading hidden behind training: {100 * r['hidden_share']:.0f} % "
          "(1 - wait with prefetch 1 / wait with prefetch 0)")
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench_sampling", description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--fanouts", type=int, nargs="+", action="append",
                    help="one fanout list per --fanouts (default: 15 10 and 25 20)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--graph", choices=["auto", "inline"], default="auto")
    ap.add_argument("--dgl-python", default=None,
                    help="a Python with DGL 2.1 (default: $RTX_DGL_PYTHON, /work/dglvenv)")
    ap.add_argument("--no-dgl", action="store_true")
    ap.add_argument("--quick", action="store_true", help="scale 0.01, 5 batches, 1 round")
    ap.add_argument("--json", default=None, help="also write the results here (atomically)")
    ap.add_argument("--loader", action="store_true",
                    help="measure NeighborLoader's prefetch overlap with training instead")
    ap.add_argument("--batch-size", type=int, default=BATCH, help="--loader: seeds per batch")
    ap.add_argument("--hidden", type=int, default=64, help="--loader: the model's width")
    ap.add_argument("--loader-threads", type=int, default=None,
                    help="--loader: the sampler's threads (default: --threads)")
    ap.add_argument("--child", choices=["rtx", "dgl"], help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=3600, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.threads < 1 or args.batches < 1 or args.warmup < 0 or args.rounds < 1 \
            or not args.scale > 0:
        ap.error("--threads, --batches, --rounds must be >= 1, --warmup >= 0, --scale > 0")
    fan_sets = args.fanouts or [[15, 10], [25, 20]]
    if any(f < -1 for fs in fan_sets for f in fs):
        ap.error("fanouts must be >= -1")
    if args.child:
        fn = child_rtx if args.child == "rtx" else child_dgl
        print(json.dumps(fn(args.data, fan_sets[0], args.threads, args.batches, args.warmup)))
        return 0
    if args.quick:
        args.scale, args.batches, args.rounds, args.warmup = min(args.scale, 0.01), 5, 1, 1
    print(f"# load average at start (1/5/15 min): {_loadavg()}  (not of record above 1)")
    if args.loader:
        if args.batch_size < 1 or args.hidden < 2 or args.hidden % 2 or (
                args.loader_threads is not None and args.loader_threads < 1):
            ap.error("--batch-size >= 1, --hidden even and >= 2, --loader-threads >= 1")
        rows = [run_loader(args, fanouts) for fanouts in fan_sets]
        print(f"# load average at end (1/5/15 min): {_loadavg()}")
        if args.json:
            use_checkout_build()
            from rtx._fileio import atomic_write
            with atomic_write(args.json, "w") as fh:
                json.dump({"mode": "loader", "scale": args.scale, "loadavg_end": _loadavg(),
                           "results": rows}, fh, indent=1)
        return 0
    print(f"# scale {args.scale}, batch {BATCH}, {args.threads} threads, {args.batches} timed "
          f"batches after {args.warmup} warm-up, {args.rounds} rounds")
    dgl_py = None if args.no_dgl else _dgl_python(args.dgl_python)
    if not args.no_dgl and dgl_py is None:
        print("# DGL not found (--dgl-python / $RTX_DGL_PYTHON): rtx only")
    t0 = time.perf_counter()
    g = _from_synthetic_mag(args.scale, 0) if args.graph == "auto" else None
    source = "rtx.datasets.synthetic_mag"
    if g is None:
        g = mag_graph(args.scale, 0)
        source = "bench_sampling.mag_graph"
    nodes, edges, x, train = g
    print(f"# graph ({source}, {time.perf_counter() - t0:.1f} s): "
          + ", ".join(f"{t} {n:,}" for t, n in nodes.items()) + f"; "
          f"{sum(e.shape[1] for e in edges.values()):,} edges in {len(edges)} relations; "
          f"{len(train):,} training papers")
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rtx-bench-sampling-") as d:
        save_graph(d, nodes, edges, x, train)
        del g, nodes, edges, x, train
        for fanouts in fan_sets:
            runs: dict[str, list[dict]] = {"rtx": [], "dgl": []}
            for _ in range(args.rounds):
                for side, py in (("rtx", sys.executable), ("dgl", dgl_py)):
                    if py is None:
                        continue
                    r = _run_child(py, side, d, fanouts, args)
                    if r is not None:
                        runs[side].append(r)
            row: dict[str, Any] = {"fanouts": fanouts}
            for side, rs in runs.items():
                if not rs:
                    continue
                tot = [r["sample_s"] + r["gather_s"] for r in rs]
                row[side] = {
                    "batches_per_s": statistics.median(r["batches"] / t
                                                       for r, t in zip(rs, tot, strict=True)),
                    "edges_per_s": statistics.median(r["edges"] / t
                                                     for r, t in zip(rs, tot, strict=True)),
                    "sample_ms": statistics.median(1e3 * r["sample_s"] / r["batches"] for r in rs),
                    "gather_ms": statistics.median(1e3 * r["gather_s"] / r["batches"] for r in rs),
                    "edges_per_batch": rs[0]["edges"] / rs[0]["batches"],
                    "nodes_per_batch": rs[0]["nodes"] / rs[0]["batches"],
                    "build_s": statistics.median(r["build_s"] for r in rs),
                    "peak_rss_mib": max(r["peak_rss_mib"] for r in rs),
                }
            results.append(row)
            _print_row(row)
    print(f"# load average at end (1/5/15 min): {_loadavg()}")
    if args.json:
        use_checkout_build()
        from rtx._fileio import atomic_write
        with atomic_write(args.json, "w") as fh:
            json.dump({"scale": args.scale, "threads": args.threads, "batch": BATCH,
                       "loadavg_end": _loadavg(), "results": results}, fh, indent=1)
    return 0


def _print_row(row: dict[str, Any]) -> None:
    print(f"\nfanouts {row['fanouts']}:")
    print(f"  {'':4} {'batches/s':>10} {'edges/s':>12} {'sample ms':>10} {'gather ms':>10} "
          f"{'edges/batch':>12} {'nodes/batch':>12} {'build s':>8} {'peak RSS MiB':>13}")
    for side in ("rtx", "dgl"):
        r = row.get(side)
        if r:
            print(f"  {side:4} {r['batches_per_s']:10.2f} {r['edges_per_s']:12,.0f} "
                  f"{r['sample_ms']:10.1f} {r['gather_ms']:10.1f} {r['edges_per_batch']:12,.0f} "
                  f"{r['nodes_per_batch']:12,.0f} {r['build_s']:8.1f} {r['peak_rss_mib']:13,.0f}")
    if row.get("rtx") and row.get("dgl"):
        print(f"  rtx / dgl: {row['rtx']['batches_per_s'] / row['dgl']['batches_per_s']:.2f}x "
              f"batches/s, {row['rtx']['edges_per_s'] / row['dgl']['edges_per_s']:.2f}x edges/s "
              "(target: >= 3x)")


if __name__ == "__main__":
    sys.exit(main())
