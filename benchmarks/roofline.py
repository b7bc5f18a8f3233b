"""The roofline of a HetGAT epoch (issue 22 item 5): how far rtx's epoch is from what this
machine's arithmetic and memory bandwidth allow.

    python benchmarks/roofline.py                     # wide graph, 30k and 100k papers, 2 threads
    python benchmarks/roofline.py --profile           # + where the epoch goes, by op family
    python benchmarks/roofline.py --profile cprofile  # + the top Python functions (cProfile)
    python benchmarks/roofline.py --quick             # a smoke run

In one run it measures (1) the machine, (2) the work of an epoch, (3) rtx's epoch.

**(1) The machine, at ``--threads``.**  SGEMM rate: float32 ``C = A @ B`` timed (medians)
with numpy's BLAS on ``--threads`` threads (threadpoolctl) into a preallocated output,
for a square 2048 product and for the epoch's own shapes (``[N, 128] @ [128, 64]``,
``[128, N] @ [N, 64]``, ``[N, 64] @ [64, 128]``), and with ``rtx.matmul`` on the same
shapes (allocating, as the model calls it); the rate of the bound is the best of them.
Memory bandwidth: a 256 MiB ``memcpy`` split over the threads (rtx's blocked copy
kernel, via ``benchmarks.bench.copy_bandwidth``), ``np.copyto`` on one thread, and a
triad ``a = b + s * c`` over 3 x 64 MiB as one fused rtx pass; bytes read + bytes
written per second; the bandwidth of the bound is the best of them.

**(2) The work of an epoch** (forward, backward, Adam step) of HetGAT (hidden
``K = H*C`` = 64, ``H`` = 4 heads; float32, 4 bytes; int64 indices, ``I`` = 8 bytes), per
relation ``s -> d`` of layer ``l`` with ``N_s``, ``N_d`` nodes, input widths ``F_s``, ``F_d``
(the features in layer 0, ``K`` after) and ``E`` edges (self-loops included where
``s == d``).  The attention vectors are folded into the projection
(``a . W x = (W^T a) . x``), so a relation's dense work is ONE GEMM with
``cols = K + H`` output columns (``K + 2H`` when ``s == d``) plus, when ``s != d``, a GEMV
``[N_d, F_d] @ [F_d, H]`` for the destination's logits (the ``lin_dst`` GEMM PyG runs is
not needed).  Per phase, flops and bytes::

    forward
      projection GEMM      2 N_s F_s cols             4 (N_s F_s + F_s cols + N_s cols)
      destination GEMV     2 N_d F_d H                4 (N_d F_d + N_d H)        (s != d)
      logits + softmax     10 E H                     row: E (2I + 16H) + 8 N_d H
                                                      min: E (2I + 4H) + 4H (N_s + 2 N_d)
      aggregation          2 E K                      row: E (2I + 4H + 4K) + 4 N_d K
                                                      min: E (2I + 4H) + 4K (N_s + N_d)
      bias + relation sum  2 N_d K                    12 N_d K
      ELU (per type)       N_d K                      8 N_d K
      linear head          2 N_t K n_cls              4 (N_t K + K n_cls + N_t n_cls)
    backward
      linear head          4 N_t K n_cls              8 (N_t K + K n_cls + N_t n_cls)
      ELU (per type)       N_d K                      12 N_d K
      bias grad            N_d K                      4 N_d K
      aggregation          4 E K                      row: E (2I + 12K + 8H) + 4 N_s K
                                                      min: E (2I + 8H) + 4K (N_d + 2 N_s)
      softmax + logits     8 E H                      row: E (2I + 20H) + 4H (N_s + N_d)
                                                      min: E (2I + 12H) + 4H (N_s + N_d)
      projection GEMMs     2 N_s F_s cols per GEMM    4 (N_s F_s + N_s cols + F_s cols) per GEMM
                           (grad W; and grad X when l > 0)
      destination GEMV(s)  2 N_d F_d H per GEMV       4 (N_d F_d + N_d H) per GEMV
      gradient sums        N_s K per extra relation   12 N_s K               (l > 0)
    Adam step              12 P                       28 P     (P parameters: p, g, m, v
                                                               read, p, m, v written)

"row" counts every gathered or scattered row per edge (a row is read from memory for
every edge that touches it); "min" counts every array once (compulsory traffic: no
implementation moves less).  A row gather whose table fits in cache (the 30k graph's
``N x K`` tables are 8 MB, under the 36 MB L3) can beat the "row" figure, never "min".

**The bound** of a phase is ``max(flops / sgemm_rate, bytes / bandwidth)`` (the phase can
go no faster than its arithmetic or its memory traffic allows, at the best measured
rates), and the epoch's bound is the SUM over its phases (they run one after another:
each consumes the previous one's output), which is tighter than ``max(total flops /
rate, total bytes / bandwidth)`` (printed too, as "bound of totals").  Achieved / bound
>= 1 always holds for the "min" bound; the target of issue 22 is bound / achieved >= 50 %.

**(3) rtx's epoch.**  ``rtx.nn.HetGAT`` trained in this process (full batch, Adam lr 0.01,
weight decay 5e-4, cross-entropy over the training papers), ``--epochs`` epochs after a
warm-up one, the forward (model + loss), backward and step timed separately, medians.
``--profile`` then runs ``--profile-epochs`` more epochs with every method of the CPU
backend timed (a subclass of ``rtx.CpuBackend`` whose public methods time themselves,
outermost call only), grouped by op family per pass, beside the family's bound; the
time outside any backend call is Python (tape, modules, dispatch).  ``--profile
cprofile`` prints cProfile's top functions instead.
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import io
import os
import pstats
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.append(os.path.dirname(HERE))

IDX = 8      # bytes per index (int64)
F32 = 4      # bytes per float32
EdgeType = tuple[str, str, str]


@dataclass
class Phase:
    name: str
    family: str          # dense | edge | elementwise | optimizer
    pass_: str           # fwd | bwd | step
    flops: float
    bytes_row: float
    bytes_min: float

    def bound(self, rate: float, bw: float, model: str = "row") -> float:
        b = self.bytes_row if model == "row" else self.bytes_min
        return max(self.flops / rate, b / bw)


# ------------------------------------------------------------------ the model
def hetgat_work(num_nodes: dict[str, int], features: dict[str, int],
                edges: dict[EdgeType, int], layers: list[list[EdgeType]], target: str,
                hidden: int = 64, heads: int = 4, num_classes: int = 8,
                num_train: int | None = None) -> list[Phase]:
    """The phases of one HetGAT epoch (module docstring).  ``edges``: per relation the
    edge count the layer aggregates (self-loops included where source type ==
    destination type); ``layers``: each layer's relations."""
    K, H = hidden, heads
    n_t = num_nodes[target]
    ph: list[Phase] = []

    def add(name: str, fam: str, p: str, fl: float, row: float, mn: float | None = None) -> None:
        ph.append(Phase(name, fam, p, float(fl), float(row), float(row if mn is None else mn)))

    n_params = 0
    for li, rels in enumerate(layers):
        width = {nt: (features[nt] if li == 0 else K) for nt in num_nodes}
        dst_types = sorted({d for _, _, d in rels})
        per_src: dict[str, int] = defaultdict(int)
        for s, r, d in rels:
            tag = f"L{li} {s}-{r}->{d}"
            Ns, Nd, Fs, Fd, E = num_nodes[s], num_nodes[d], width[s], width[d], edges[(s, r, d)]
            cols = K + (2 * H if s == d else H)
            n_params += Fs * K + (0 if s == d else Fd * K) + 2 * K + K
            # forward
            add(f"{tag} projection", "dense", "fwd", 2 * Ns * Fs * cols,
                F32 * (Ns * Fs + Fs * cols + Ns * cols))
            if s != d:
                add(f"{tag} dst logits GEMV", "dense", "fwd", 2 * Nd * Fd * H,
                    F32 * (Nd * Fd + Nd * H))
            add(f"{tag} logits+softmax", "edge", "fwd", 10 * E * H,
                E * (2 * IDX + 16 * H) + 8 * Nd * H,
                E * (2 * IDX + F32 * H) + F32 * H * (Ns + 2 * Nd))
            add(f"{tag} aggregation", "edge", "fwd", 2 * E * K,
                E * (2 * IDX + F32 * H + F32 * K) + F32 * Nd * K,
                E * (2 * IDX + F32 * H) + F32 * K * (Ns + Nd))
            add(f"{tag} bias+sum", "elementwise", "fwd", 2 * Nd * K, 12 * Nd * K)
            # backward
            add(f"{tag} bias grad", "elementwise", "bwd", Nd * K, F32 * Nd * K)
            add(f"{tag} aggregation bwd", "edge", "bwd", 4 * E * K,
                E * (2 * IDX + 12 * K + 8 * H) + F32 * Ns * K,
                E * (2 * IDX + 8 * H) + F32 * K * (Nd + 2 * Ns))
            add(f"{tag} softmax+logits bwd", "edge", "bwd", 8 * E * H,
                E * (2 * IDX + 20 * H) + F32 * H * (Ns + Nd),
                E * (2 * IDX + 12 * H) + F32 * H * (Ns + Nd))
            gemms = 2 if li > 0 else 1
            add(f"{tag} projection bwd ({gemms} GEMM)", "dense", "bwd",
                gemms * 2 * Ns * Fs * cols, gemms * F32 * (Ns * Fs + Ns * cols + Fs * cols))
            if s != d:
                add(f"{tag} dst GEMV bwd ({gemms})", "dense", "bwd", gemms * 2 * Nd * Fd * H,
                    gemms * F32 * (Nd * Fd + Nd * H))
            if li > 0:
                per_src[s] += 1
                if per_src[s] > 1:
                    add(f"{tag} gradient sum", "elementwise", "bwd", Ns * K, 12 * Ns * K)
        for d in dst_types:
            Nd = num_nodes[d]
            add(f"L{li} ELU {d}", "elementwise", "fwd", Nd * K, 8 * Nd * K)
            add(f"L{li} ELU bwd {d}", "elementwise", "bwd", Nd * K, 12 * Nd * K)
    nc = num_classes
    add("linear head", "dense", "fwd", 2 * n_t * K * nc, F32 * (n_t * K + K * nc + n_t * nc))
    add("linear head bwd", "dense", "bwd", 4 * n_t * K * nc,
        2 * F32 * (n_t * K + K * nc + n_t * nc))
    n_tr = n_t if num_train is None else num_train
    add("cross-entropy", "elementwise", "fwd", 5 * n_tr * nc, F32 * 3 * n_tr * nc)
    n_params += K * nc + nc
    add(f"Adam ({n_params:,} parameters)", "optimizer", "step", 12 * n_params,
        7 * F32 * n_params)
    return ph


def work_of_graph(g: Any, hidden: int, heads: int, layers: int) -> tuple[list[Phase], Any]:
    """The phases of an epoch on ``g`` (a HeteroGraph) and the layers' relations."""
    from benchmarks.bench_hetgat import layer_relations

    num_nodes = {nt: int(n) for nt, n in g.num_nodes_dict.items()}
    feats = dict(g.num_features_dict)
    ets = [tuple(et) for et in g.edge_types]
    edges = {}
    for et in ets:
        ei = np.asarray(g[et].edge_index)
        if et[0] == et[2]:          # GATConv's add_self_loops: existing ones out, one per node
            edges[et] = int(np.count_nonzero(ei[0] != ei[1])) + min(num_nodes[et[0]],
                                                                     num_nodes[et[2]])
        else:
            edges[et] = int(ei.shape[1])
    rels = layer_relations(list(num_nodes), ets, g.target, layers)
    return hetgat_work(num_nodes, feats, edges, rels, g.target, hidden, heads,
                       int(g.num_classes), int(np.count_nonzero(g.train_mask))), rels


# ------------------------------------------------------------------ the machine
def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def measure_machine(threads: int, sizes: list[int], quick: bool) -> dict[str, Any]:
    """This machine's SGEMM rates (numpy's BLAS on ``threads`` threads and on one,
    ``rtx.matmul``) and copy bandwidths.  numpy's threaded BLAS runs last: after a
    threaded call OpenBLAS's workers spin for a while before they sleep, and a
    2-thread measurement taken in that window loses a core to them (rtx.matmul's
    [30000, 128] @ [128, 64] measured right after numpy's: 63-96 GFLOP/s, median
    67, against 77-128, median 116, measured first; 5 runs each way, alternating
    processes, 2026-12-06)."""
    import rtx

    rng = np.random.default_rng(0)
    reps = 3 if quick else 7
    square = 512 if quick else 2048
    shapes = [(f"square {square}", square, square, square)]
    for n in sizes:
        shapes += [(f"[{n},128]@[128,64]", n, 128, 64), (f"[128,{n}]@[{n},64]", 128, n, 64),
                   (f"[{n},64]@[64,128]", n, 64, 128)]
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:          # pragma: no cover - threadpoolctl is an rtx dependency
        threadpool_limits = None
    operands = {}
    for name, m, k, n in shapes:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        operands[name] = (a, b, np.empty((m, n), np.float32), 2.0 * m * k * n)
    gemm: dict[str, dict[str, float]] = {name: {} for name, *_ in shapes}
    for name, (a, b, _, flops) in operands.items():       # rtx first (see above)
        ta, tb = rtx.tensor(a), rtx.tensor(b)

        def rtx_mm(ta: Any = ta, tb: Any = tb) -> None:
            rtx.matmul(ta, tb)

        gemm[name]["rtx_gflops"] = flops / _median_time(rtx_mm, reps) / 1e9

    bw = _bandwidths(rtx, rng, threads, quick, reps)      # rtx's copy kernel: before too
    for label, nthr in (("numpy_1thread_gflops", 1), ("numpy_gflops", threads)):
        for name, (a, b, out, flops) in operands.items():
            def np_mm(a: np.ndarray = a, b: np.ndarray = b, out: np.ndarray = out) -> None:
                np.matmul(a, b, out=out)

            if threadpool_limits is not None:
                with threadpool_limits(limits=nthr, user_api="blas"):
                    gemm[name][label] = flops / _median_time(np_mm, reps) / 1e9
            elif nthr == threads:
                gemm[name][label] = flops / _median_time(np_mm, reps) / 1e9
    gemm = {name: {k: r[k] for k in ("numpy_gflops", "numpy_1thread_gflops", "rtx_gflops")
                   if k in r} for name, r in gemm.items()}
    rate = max(max(v.values()) for v in gemm.values()) * 1e9
    best_bw = max(bw.values()) * 1e9
    return {"gemm": gemm, "sgemm_rate": rate, "bandwidth": bw, "bandwidth_best": best_bw}


def _bandwidths(rtx: Any, rng: np.random.Generator, threads: int, quick: bool,
                reps: int) -> dict[str, float]:
    """Copy bandwidths, GB/s read + write: rtx's threaded copy kernel, numpy's
    one-thread copy and a fused rtx triad."""
    from benchmarks.bench import copy_bandwidth

    bw: dict[str, float] = {}
    try:
        c = copy_bandwidth(64 << 20 if quick else 256 << 20, threads, repeats=reps)
        bw["memcpy, threads"] = c["parallel"]
        bw["np.copyto, 1 thread"] = c["numpy"]
    except Exception as exc:  # noqa: BLE001 - rtx's private copy kernel may move
        print(f"# copy bandwidth kernel unavailable ({type(exc).__name__}: {exc}); "
              "np.copyto only", file=sys.stderr)
        n = (64 if quick else 256) << 20
        src, dst = np.ones(n, np.uint8), np.zeros(n, np.uint8)
        bw["np.copyto, 1 thread"] = 2 * n / _median_time(lambda: np.copyto(dst, src), reps) / 1e9
    n = (16 if quick else 64) << 18            # float32 elements: 16 / 64 MiB per array
    bt = rtx.tensor(rng.standard_normal(n, dtype=np.float32))
    ct = rtx.tensor(rng.standard_normal(n, dtype=np.float32))
    try:
        from rtx.fusion import Fusion

        fz = Fusion(rtx.CpuBackend())
        with rtx.use_backend(fz):
            bf, cf = rtx.tensor(bt.numpy()), rtx.tensor(ct.numpy())
        t = _median_time(lambda: (bf + cf * 1.5).numpy(), reps)
        bw["triad b + s*c, fused rtx"] = 3 * 4 * n / t / 1e9
    except Exception as exc:  # noqa: BLE001 - report, keep the others
        print(f"# fused triad unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)
    return bw


# ------------------------------------------------------------------ rtx's epoch
_SKIP = {"shape", "dtype", "is_prim", "aliases", "is_contiguous", "can_view", "to_numpy"}
_FAMILIES = [
    ("dense (matmul)", ("matmul",)),
    ("message passing fwd", ("message_passing",)),
    ("message passing bwd", ("message_passing_backward",)),
    ("segment softmax fwd+bwd", ("segment_softmax", "segment_softmax_backward")),
    ("gather / scatter", ("index_select", "index_add", "getitem", "concat", "stack")),
    ("activations fwd+bwd", ("elu", "leaky_relu", "relu", "sigmoid", "tanh", "elu_backward",
                             "leaky_relu_backward", "relu_backward")),
    ("reductions / loss", ("sum", "mean", "max", "min", "argmax", "softmax", "log_softmax")),
    ("allocation", ("empty", "zeros", "full", "from_numpy")),
]


def family_of(method: str) -> str:
    for fam, names in _FAMILIES:
        if method in names:
            return fam
    if method.startswith("segment_"):
        return "segment ops (other)"
    return "elementwise and other backend ops"


def timed_backend() -> tuple[Any, dict[str, float], dict[str, int]]:
    """A CPU backend whose public methods time themselves (outermost call per thread).
    Returns (backend, seconds by method, calls by method)."""
    import rtx
    from rtx.backend._family import is_def  # (a compiled method is no inspect.isfunction)

    base = rtx.CpuBackend
    secs: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    local = threading.local()

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(self: Any, *a: Any, **k: Any) -> Any:
            if getattr(local, "depth", 0):
                return fn(self, *a, **k)
            local.depth = 1
            t0 = time.perf_counter()
            try:
                return fn(self, *a, **k)
            finally:
                secs[name] += time.perf_counter() - t0
                calls[name] += 1
                local.depth = 0
        return timed

    ns = {name: wrap(name, attr) for name, attr in inspect.getmembers(base, is_def)
          if not name.startswith("_") and name not in _SKIP}
    cls = type("TimedCpuBackend", (base,), ns)
    return cls(), secs, calls


class Trainer:
    """rtx's HetGAT on one graph, with its forward / backward / step timed apart."""

    def __init__(self, g: Any, args: argparse.Namespace, backend: Any = None) -> None:
        import contextlib

        import rtx
        from rtx.nn import HetGAT
        from rtx.optim import Adam

        self.rtx = rtx
        ctx = rtx.use_backend(backend) if backend is not None else contextlib.nullcontext()
        with ctx:
            rtx.manual_seed(args.seed)
            self.model = HetGAT(g.metadata(), g.num_features_dict, args.hidden, g.num_classes,
                                heads=args.heads, num_layers=args.layers, target=g.target)
            self.opt = Adam(self.model.parameters(), lr=0.01, weight_decay=5e-4)
            self.x = {nt: rtx.tensor(x) for nt, x in g.x_dict.items()}
            self.train = np.flatnonzero(g.train_mask)
            self.y = rtx.tensor(np.asarray(g.y)[self.train])
        self.edges = dict(g.edge_index_dict)
        self.ctx_backend = backend

    def epoch(self, marks: Callable[[str], None] | None = None) -> dict[str, float]:
        from rtx.nn.functional import cross_entropy

        rtx = self.rtx
        t0 = time.perf_counter()
        self.opt.zero_grad()
        logits = self.model(self.x, self.edges)
        loss = cross_entropy(rtx.index_select(logits, self.train), self.y)
        t1 = time.perf_counter()
        if marks:
            marks("fwd")
        loss.backward()
        t2 = time.perf_counter()
        if marks:
            marks("bwd")
        self.opt.step()
        t3 = time.perf_counter()
        if marks:
            marks("step")
        return {"fwd": t1 - t0, "bwd": t2 - t1, "step": t3 - t2, "epoch": t3 - t0,
                "loss": float(loss.item())}


def measure_epoch(g: Any, args: argparse.Namespace) -> dict[str, Any]:
    tr = Trainer(g, args)
    tr.epoch()
    runs = [tr.epoch() for _ in range(args.epochs)]
    return {k: statistics.median(r[k] for r in runs) for k in ("fwd", "bwd", "step", "epoch")} \
        | {"epochs": len(runs), "last_loss": runs[-1]["loss"]}


def profile_backend(g: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Seconds per op family and pass, summed over ``--profile-epochs`` epochs."""
    be, secs, calls = timed_backend()
    tr = Trainer(g, args, backend=be)
    tr.epoch()
    by: dict[str, dict[str, float]] = {p: defaultdict(float) for p in ("fwd", "bwd", "step")}
    wall = {"fwd": 0.0, "bwd": 0.0, "step": 0.0}
    last: dict[str, float] = {}

    def marks(p: str) -> None:
        nonlocal last
        for m, v in secs.items():
            d = v - last.get(m, 0.0)
            if d:
                by[p][family_of(m)] += d
        last = dict(secs)

    for _ in range(args.profile_epochs):
        last = dict(secs)
        r = tr.epoch(marks)
        for p in wall:
            wall[p] += r[p]
    n = args.profile_epochs
    return {"per_epoch_s": {p: {f: v / n for f, v in fams.items()} for p, fams in by.items()},
            "wall_per_epoch_s": {p: v / n for p, v in wall.items()},
            "calls_per_epoch": {m: c / (n + 1) for m, c in sorted(calls.items())}}


def profile_cprofile(g: Any, args: argparse.Namespace, top: int = 30) -> str:
    tr = Trainer(g, args)
    tr.epoch()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(args.profile_epochs):
        tr.epoch()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


# ------------------------------------------------------------------ report
def summarize(phases: list[Phase], rate: float, bw: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for model in ("row", "min"):
        per_pass: dict[str, float] = defaultdict(float)
        per_family: dict[str, float] = defaultdict(float)
        for p in phases:
            b = p.bound(rate, bw, model)
            per_pass[p.pass_] += b
            per_family[f"{p.pass_} {p.family}"] += b
        tot_b = sum(p.bytes_row if model == "row" else p.bytes_min for p in phases)
        tot_f = sum(p.flops for p in phases)
        out[model] = {"bound_s": sum(per_pass.values()), "per_pass_s": dict(per_pass),
                      "per_family_s": dict(per_family), "bytes": tot_b, "flops": tot_f,
                      "bound_of_totals_s": max(tot_f / rate, tot_b / bw)}
    return out


def print_report(n: int, g: Any, phases: list[Phase], summ: dict[str, Any],
                 ach: dict[str, Any], verbose: bool) -> None:
    print(f"\n## {n} papers: {g.num_edges:,} edges, {len(g.edge_types)} relations, "
          f"nodes {g.num_nodes_dict}")
    fam: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for p in phases:
        f = fam[(p.pass_, p.family)]
        f[0] += p.flops
        f[1] += p.bytes_row
        f[2] += p.bytes_min
    print("\n| pass | family | GFLOP | GB (rows) | GB (min) | bound rows (ms) | bound min (ms) |")
    print("|---|---|---|---|---|---|---|")
    for (pa, fa), (fl, br, bm) in sorted(fam.items()):
        print(f"| {pa} | {fa} | {fl / 1e9:.3f} | {br / 1e9:.3f} | {bm / 1e9:.3f} | "
              f"{summ['row']['per_family_s'][f'{pa} {fa}'] * 1e3:.2f} | "
              f"{summ['min']['per_family_s'][f'{pa} {fa}'] * 1e3:.2f} |")
    print("\n| pass | rtx achieved (ms) | bound rows (ms) | bound min (ms) | "
          "bound / achieved (rows) | bound / achieved (min) |")
    print("|---|---|---|---|---|---|")
    for pa in ("fwd", "bwd", "step"):
        a = ach[pa]
        br, bm = summ["row"]["per_pass_s"].get(pa, 0.0), summ["min"]["per_pass_s"].get(pa, 0.0)
        print(f"| {pa} | {a * 1e3:.1f} | {br * 1e3:.2f} | {bm * 1e3:.2f} | "
              f"{br / a:.1%} | {bm / a:.1%} |")
    a = ach["epoch"]
    br, bm = summ["row"]["bound_s"], summ["min"]["bound_s"]
    print(f"| **epoch** | **{a * 1e3:.1f}** | **{br * 1e3:.2f}** | **{bm * 1e3:.2f}** | "
          f"**{br / a:.1%}** | **{bm / a:.1%}** |")
    print(f"\nepoch: {summ['row']['flops'] / 1e9:.2f} GFLOP, {summ['row']['bytes'] / 1e9:.2f} GB "
          f"(rows) / {summ['min']['bytes'] / 1e9:.2f} GB (min); bound of totals "
          f"{summ['row']['bound_of_totals_s'] * 1e3:.2f} / "
          f"{summ['min']['bound_of_totals_s'] * 1e3:.2f} ms; achieved / bound (rows) = "
          f"{a / br:.2f}x (target: bound / achieved >= 50 %)")
    if verbose:
        print("\n| phase | pass | GFLOP | MB rows | MB min |\n|---|---|---|---|---|")
        for p in phases:
            print(f"| {p.name} | {p.pass_} | {p.flops / 1e9:.4f} | {p.bytes_row / 1e6:.2f} | "
                  f"{p.bytes_min / 1e6:.2f} |")


def print_profile(prof: dict[str, Any], summ: dict[str, Any]) -> None:
    print("\nwhere rtx's epoch goes (backend methods timed, outermost call; ms per epoch):\n")
    print("| pass | op family | ms | share of the epoch |\n|---|---|---|---|")
    total = sum(prof["wall_per_epoch_s"].values())
    for pa in ("fwd", "bwd", "step"):
        fams = prof["per_epoch_s"][pa]
        inside = sum(fams.values())
        for f, v in sorted(fams.items(), key=lambda kv: -kv[1]):
            print(f"| {pa} | {f} | {v * 1e3:.1f} | {v / total:.1%} |")
        rest = prof["wall_per_epoch_s"][pa] - inside
        print(f"| {pa} | outside the backend (Python: tape, modules, dispatch) | "
              f"{rest * 1e3:.1f} | {rest / total:.1%} |")
    print(f"| | **epoch (profiled)** | **{total * 1e3:.1f}** | 100% |")
    print("\nthe model's bound by pass and family (rows), for comparison: " + ", ".join(
        f"{k} {v * 1e3:.2f} ms" for k, v in sorted(summ["row"]["per_family_s"].items())))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", choices=["synthetic", "wide", "dblp"], default="wide")
    ap.add_argument("--sizes", type=int, nargs="+", default=[30_000, 100_000])
    ap.add_argument("--hgb-path", default=None, help="--graph dblp: HGB's DBLP directory")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=9, help="timed epochs (after a warm-up)")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", nargs="?", const="backend", default=None,
                    choices=["backend", "cprofile"],
                    help="also show where the epoch goes (default: by backend op family)")
    ap.add_argument("--profile-epochs", type=int, default=3)
    ap.add_argument("--phases", action="store_true", help="print every phase of the model")
    ap.add_argument("--quick", action="store_true", help="2,000 papers, 3 epochs")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from benchmarks._proc import use_checkout_build

    use_checkout_build()
    if args.quick:
        args.sizes, args.epochs, args.profile_epochs = [2000], 3, 1
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import rtx
    from benchmarks._proc import load_str, loadavg, write_json
    from benchmarks.bench_hetgat import make_graph

    rtx.set_num_threads(args.threads)
    t_start, load0 = time.time(), loadavg()
    print(f"# roofline of rtx's HetGAT epoch; rtx {rtx.__version__} from "
          f"{os.path.dirname(os.path.realpath(rtx.__file__))}; {args.threads} threads; graph "
          f"{args.graph}; hidden {args.hidden} = {args.heads} heads")
    print(f"# load average at start: {load_str()}", flush=True)
    mach = measure_machine(args.threads, args.sizes, args.quick)
    print(f"\n| SGEMM (float32) | numpy BLAS, {args.threads} threads GFLOP/s | numpy BLAS, "
          "1 thread | rtx.matmul GFLOP/s |\n|---|---|---|---|")
    for k, v in mach["gemm"].items():
        print(f"| {k} | {v['numpy_gflops']:.1f} | {v.get('numpy_1thread_gflops', 0):.1f} | "
              f"{v['rtx_gflops']:.1f} |")
    print("\n| bandwidth (read + write) | GB/s |\n|---|---|")
    for k, v in mach["bandwidth"].items():
        print(f"| {k} | {v:.1f} |")
    rate, bw = mach["sgemm_rate"], mach["bandwidth_best"]
    print(f"\nrates of the bound: SGEMM {rate / 1e9:.1f} GFLOP/s, bandwidth {bw / 1e9:.1f} GB/s",
          flush=True)
    out: dict[str, Any] = {"benchmark": "roofline", "graph": args.graph,
                           "threads": args.threads, "machine": mach, "sizes": {}}
    for n in args.sizes:
        g = make_graph(args.graph, n, args)
        phases, _ = work_of_graph(g, args.hidden, args.heads, args.layers)
        summ = summarize(phases, rate, bw)
        ach = measure_epoch(g, args)
        print_report(n, g, phases, summ, ach, args.phases)
        entry: dict[str, Any] = {"achieved_s": ach, "bound": summ,
                                 "fraction_rows": summ["row"]["bound_s"] / ach["epoch"],
                                 "fraction_min": summ["min"]["bound_s"] / ach["epoch"]}
        if args.profile == "backend":
            try:
                prof = profile_backend(g, args)
                print_profile(prof, summ)
                entry["profile"] = prof
            except Exception as exc:  # noqa: BLE001 - the backend layout may have moved
                print(f"# backend timers unavailable ({type(exc).__name__}: {exc}); "
                      "use --profile cprofile")
        elif args.profile == "cprofile":
            text = profile_cprofile(g, args)
            print("\n" + text)
            entry["cprofile"] = text
        out["sizes"][str(n)] = entry
        print(flush=True)
    load1 = loadavg()
    print(f"# load average at end: {load_str()} (start "
          f"{' '.join(f'{v:.2f}' for v in load0)}); {time.time() - t_start:.0f} s")
    out.update(load_start=list(load0), load_end=list(load1), seconds=time.time() - t_start)
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
