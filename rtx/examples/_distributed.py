"""``rtx-hetgat --distributed``: the example's MPI driver (docs/distributed.md).

Every rank runs the same command (``mpiexec -n N rtx-hetgat --distributed``);
each trains its share of the graph (``rtx.distributed.hetgat``).  What this
driver adds to the library:

* **One error, printed once.**  Options, input files and the output
  directory are checked on every rank without printing; then the ranks agree:
  a user error on ANY rank is printed once, by rank 0 (one line,
  ``rtx-hetgat: error: ...``, naming the rank when not every rank had it),
  and every rank exits 2.  A run that cannot finish (a non-finite loss, a file
  that cannot be written) does the same with status 1.  Bugs keep their
  traceback, with the rank's prefix, and end every rank (``MPI_Abort``).
* **The same run everywhere.**  Before the first step the ranks compare the
  graph's digest (or the shard manifest's) and every option that changes the
  result (``fingerprint``): different ``--seed`` or ``--epochs`` per rank is an
  error on every rank.
* **Checkpoints.**  ``--checkpoint-every N`` saves the model, Adam's state,
  the epoch, each rank's random generator, the metrics so far and the best
  model into ``--out/checkpoint`` (``rtx.distributed.checkpoint``: atomic, the
  previous one kept until the new one is complete); ``--resume DIR`` carries on
  from there, bit for bit.
* **Defaults for a shared node.**  Threads per rank = the usable cores / the
  ranks on this node (unless ``--threads`` or ``OMP_NUM_THREADS`` says, or the
  launcher bound the rank to fewer cores); every line rank 0 prints carries
  ``[rank 0/N]``; progress is plain lines unless rank 0 writes to a terminal.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import math
import os
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

import rtx
import rtx.distributed as dist
from rtx.distributed import _comm
from rtx.distributed.checkpoint import (
    find_checkpoint,
    load_checkpoint,
    read_latest,
    save_checkpoint,
)
from rtx.distributed.hetgat import HALO_MODES, DistributedHetGAT
from rtx.distributed.shards import load_shard, read_manifest

from . import _cli

#: Options that only mean something with --distributed.
_DIST_ONLY = ("shards", "checkpoint_every", "resume", "dist_timeout")
#: Options that may differ between ranks (the rest must agree: ``fingerprint``).
_PER_RANK = ("threads", "progress", "out", "data", "shards", "resume", "dist_timeout")
#: ...and those a resumed run may change.
_RESUME_FREE = ("epochs", "checkpoint_every", "resume")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The ``--distributed`` options of ``rtx-hetgat``."""
    g = ap.add_argument_group(
        "distributed training (launch with `mpiexec -n N rtx-hetgat --distributed`; needs "
        "pip install \"rtx-gnn[mpi]\"; docs/distributed.md)")
    g.add_argument("--distributed", action="store_true",
                   help="graph-partitioned training over MPI ranks")
    g.add_argument("--partition", choices=["auto", "metis", "random", "contiguous"],
                   default="auto",
                   help="how nodes are split over the ranks (auto: METIS when pymetis is "
                        "installed, else random)")
    g.add_argument("--halo", choices=list(HALO_MODES), default="exchange",
                   help="exchange (default): each rank keeps a 1-hop halo and fetches its "
                        "rows from their owners before every layer; replicated: each rank "
                        "keeps the whole L-hop neighbourhood of its papers and recomputes it")
    g.add_argument("--overlap", action="store_true",
                   help="with --halo exchange: compute the owned rows while the halo rows "
                        "travel (docs/distributed.md measures whether it pays)")
    g.add_argument("--shards", metavar="DIR", default=None,
                   help="train from the per-rank shard files rtx.distributed.partition wrote "
                        "(no rank loads the whole graph)")
    g.add_argument("--checkpoint-every", type=_cli.int_at_least(1), default=None, metavar="N",
                   help="save a checkpoint into OUT/checkpoint every N epochs (and at the end)")
    g.add_argument("--resume", metavar="DIR", default=None,
                   help="carry on from the checkpoint in DIR (a --checkpoint-every run's "
                        "OUT or OUT/checkpoint), bit for bit")
    g.add_argument("--dist-timeout", type=_cli.finite_float_at_least(0.001), default=None,
                   metavar="SECONDS",
                   help="how long a rank waits in a collective before every rank is aborted "
                        f"(default: ${_comm.TIMEOUT_ENV} or {_comm.DEFAULT_TIMEOUT:g})")


def check_args(ap: _cli.ArgumentParser, args: argparse.Namespace) -> None:
    """What the option types cannot check (one line, exit 2)."""
    if not args.distributed:
        for name in _DIST_ONLY:
            if getattr(args, name) is not None:
                ap.error(f"--{name.replace('_', '-')} needs --distributed")
        if args.halo != "exchange" or args.overlap:
            ap.error(f"{'--overlap' if args.overlap else '--halo'} needs --distributed")
        return
    if args.partition == "metis" and not _cli.have_module("pymetis"):
        ap.error("--partition metis: pymetis is not installed (pip install pymetis, or "
                 "--partition random)")
    if args.shards is not None:
        if args.data is not None:
            ap.error("--shards and --data: pass one (the shards hold the graph)")
        if args.halo != "exchange":
            ap.error("--shards holds 1-hop halos: it needs --halo exchange")
        if args.partition != "auto":
            ap.error("--partition: the shards are partitioned already (rtx.distributed."
                     "partition chose the method)")
    if args.overlap and args.halo != "exchange":
        ap.error("--overlap needs --halo exchange")


def wanted(argv: Sequence[str] | None) -> bool:
    """Whether the command line asks for ``--distributed`` (before parsing it
    in full; abbreviations count, as argparse's)."""
    args = sys.argv[1:] if argv is None else list(argv)
    for a in args:
        if a == "--":
            break
        if len(a) > 6 and "--distributed".startswith(a):
            return True
    return False


# ------------------------------------------------------------------ errors
class _UserError(Exception):
    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.message, self.status = message, status


def _defer(ap: _cli.ArgumentParser) -> None:
    """Make ``ap``'s errors raise (to be agreed across ranks) instead of
    printing and exiting; ``--help`` prints on the first rank only."""
    def error(message: str) -> NoReturn:
        raise _UserError(message, 2)

    def fail(message: str, status: int = _cli.EXIT_FAILED) -> NoReturn:
        raise _UserError(message, status)

    def note(message: str) -> None:
        _say(f"{ap.prog}: note: {message}", err=True)

    quiet = (_comm.launcher_rank() or 0) != 0
    base_print = ap._print_message

    def print_message(message: str, file: Any = None) -> None:
        if not quiet:
            base_print(message, file)

    for name, fn in (("error", error), ("fail", fail), ("note", note),
                     ("_print_message", print_message)):
        setattr(ap, name, fn)


def _say(text: str, err: bool = False) -> None:
    """One line from rank 0, with its ``[rank 0/N]`` prefix."""
    if _comm.is_initialized() and dist.rank() != 0:
        return
    print(f"{_comm.prefix()}{text}", file=sys.stderr if err else sys.stdout, flush=True)


class _Job:
    """How this process leaves: after an agreed error, every rank exits with
    the same status (leaving the process group first when it joined it).
    ``ex`` is the example module (``rtx.examples.hetgat``) whose helpers the
    driver shares (passed in, not imported: the example imports this module)."""

    def __init__(self, ap: _cli.ArgumentParser, owns_group: bool, ex: Any) -> None:
        self.ap, self.owns_group, self.ex = ap, owns_group, ex

    def agree(self, err: _UserError | None) -> None:
        """Every rank's error (or none); when any rank has one, rank 0 prints
        the first, once, and every rank exits with its status."""
        every = _comm.allgather_object(None if err is None else [err.status, err.message],
                                       "rtx-hetgat")
        bad = [(r, e) for r, e in enumerate(every) if e is not None]
        if not bad:
            return
        r, (status, message) = bad[0]
        where = "" if len(bad) == len(every) and all(e[1] == message for _, e in bad) \
            else f"[rank {r}/{len(every)}] "
        if dist.rank() == 0:
            print(f"{self.ap.prog}: error: {where}{message}", file=sys.stderr, flush=True)
        self.exit(int(status))

    def exit(self, status: int) -> NoReturn:
        sys.stdout.flush()
        if self.owns_group:
            dist.destroy_process_group()
        raise SystemExit(status)


def _guarded(job: _Job, fn: Any, *errors: type[BaseException]) -> Any:
    """``fn()`` on every rank; a user error (or one of ``errors``, as one) on
    any rank ends every rank through ``job.agree``."""
    err: _UserError | None = None
    out = None
    try:
        out = fn()
    except _UserError as exc:
        err = exc
    except errors as exc:
        err = _UserError(job.ex._message(exc), 2)
    job.agree(err)
    return out


# ------------------------------------------------------------- defaults
def _threads(args: argparse.Namespace) -> str:
    """Set rtx's threads for this rank; returns how they were chosen.  Every
    rank gathers the host names (one collective) to count the ranks here."""
    hosts = _comm.allgather_object(socket.gethostname(), "rtx-hetgat: ranks per node")
    here = hosts.count(hosts[dist.rank()])
    if args.threads is not None:
        rtx.set_num_threads(args.threads)
        return "--threads"
    if os.environ.get("OMP_NUM_THREADS", "").strip():
        rtx.set_num_threads(None)
        return "OMP_NUM_THREADS"
    rtx.set_num_threads(None)
    usable = rtx.get_num_threads()
    try:
        bound = len(os.sched_getaffinity(0)) < (os.cpu_count() or 1)
    except (AttributeError, OSError):
        bound = False
    if bound:  # the launcher gave this rank its own cores
        return f"the {usable} cores this rank is bound to"
    n = max(1, usable // here)
    rtx.set_num_threads(n)
    return f"{usable} usable cores / {here} ranks on this node"


class _Progress:
    """Rank 0's progress: tqdm on a terminal (or when asked), else a plain
    line every ~10% of the epochs (batch logs: no carriage returns)."""

    def __init__(self, total: int, start: int, mode: str, duration: Any) -> None:
        self.total, self.start, self.bar, self.duration = total, start, None, duration
        self.t0 = time.perf_counter()
        self.every = max(1, (total - start) // 10)
        lead = dist.rank() == 0
        self.mode = mode if lead else "none"
        if self.mode == "auto":
            self.mode = "tqdm" if sys.stderr.isatty() and _cli.have_module("tqdm") else "plain"
        if self.mode == "tqdm":
            tqdm = importlib.import_module("tqdm.auto").tqdm
            self.bar = tqdm(total=total, initial=start, unit="epoch", dynamic_ncols=True,
                            desc=_comm.prefix().strip())

    def update(self, row: dict[str, float]) -> None:
        epoch = int(row["epoch"])
        text = (f"loss {row['loss']:.4f}  train {row['train_acc']:.3f}  "
                f"val {row['val_acc']:.3f}  {row['seconds']:.2f} s/epoch")
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(1)
        elif self.mode == "plain" and (epoch == self.start + 1 or epoch == self.total
                                       or (epoch - self.start) % self.every == 0):
            done = epoch - self.start
            eta = (time.perf_counter() - self.t0) / done * (self.total - epoch)
            _say(f"epoch {epoch:4d}/{self.total}  {text}  eta {self.duration(eta)}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def fingerprint(args: argparse.Namespace) -> dict[str, Any]:
    """The options every rank must share (not the per-rank ones: threads,
    paths, progress, the timeout); the graph itself is compared by digest."""
    fp = {k: v for k, v in sorted(vars(args).items()) if k not in _PER_RANK}
    fp["resume"] = args.resume is not None
    fp["source"] = "shards" if args.shards else ("data" if args.data else "synthetic")
    return fp


# ------------------------------------------------------------------- main
def main(argv: Sequence[str] | None, ex: Any) -> dict[str, Any]:
    """``rtx-hetgat --distributed ...`` (see the module docstring); ``ex`` is
    the example module (``rtx.examples.hetgat``: its parser and helpers).
    Returns the metrics (rank 0: what it wrote to metrics.json)."""
    ap = ex.build_parser()
    _defer(ap)
    err: _UserError | None = None
    args: argparse.Namespace | None = None
    try:
        args = ap.parse_args(None if argv is None else list(argv))
        ex._check_args(ap, args)
    except _UserError as exc:
        err = exc
    owns_group = not dist.is_initialized()
    try:
        dist.init(timeout=getattr(args, "dist_timeout", None))
    except (ImportError, RuntimeError, ValueError, TypeError) as exc:
        # no MPI, or not under a launcher: no rank can hear the others, each says it
        msg = err.message if err is not None else f"--distributed: {ex._message(exc)}"
        ap.exit(err.status if err is not None else 2, f"{ap.prog}: error: {msg}\n")
    job = _Job(ap, owns_group, ex)
    job.agree(err)
    assert args is not None
    try:
        return _run(ap, args, job, ex)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise


def _run(ap: _cli.ArgumentParser, args: argparse.Namespace, job: _Job, ex: Any) -> dict[str, Any]:
    rank, world = dist.rank(), dist.world_size()
    lead = rank == 0
    how = _threads(args)
    t_start = time.perf_counter()

    def load() -> tuple[Any, Any, str, dict[str, Any] | None]:
        data = local = None
        if args.shards is not None:
            try:
                parts = read_manifest(args.shards)["num_parts"]
                if parts != world:
                    raise _UserError(f"--shards {args.shards}: written for {parts} ranks, "
                                     f"this run has {world} (mpiexec -n {parts})")
                local = load_shard(args.shards, rank)
            except (OSError, ValueError) as exc:
                raise _UserError(f"--shards {args.shards}: {ex._message(exc)}") from None
            source = f"shards {os.path.abspath(args.shards)} (part {rank} of {world})"
        else:
            data, source = ex._load_data(ap, args)
        meta = None
        if args.resume is not None:
            try:
                meta = read_latest(args.resume)
            except (OSError, ValueError) as exc:
                raise _UserError(f"--resume {args.resume}: {ex._message(exc)}") from None
            if meta["epoch"] >= args.epochs:
                raise _UserError(f"--resume {args.resume}: the checkpoint is at epoch "
                                 f"{meta['epoch']}, --epochs {args.epochs}: nothing left to "
                                 "train (pass a larger --epochs)")
        if lead:
            _cli.check_output_dir(ap, "--out", args.out)
        return data, local, source, meta

    data, local, source, meta = _guarded(job, load)
    info_line = f"{world} MPI ranks x {rtx.get_num_threads()} threads ({how})"
    _say(f"rtx {rtx.__version__}, {info_line}")
    _say(f"graph: {source}")
    if data is not None:
        for line in str(data).splitlines():
            _say(f"  {line}")
    graph_info = (ex._graph_info(source, data) if data is not None else
                  {"source": source, "num_nodes": local.info["num_nodes"],
                   "num_edges": local.info["num_edges"],
                   "num_classes": local.info["num_classes"]})
    has_val = bool(data.val_mask.any()) if data is not None else local.info["counts"]["val"] > 0
    best = ex._Best(has_val)
    if best.by != "val_acc":
        _say("no validation nodes (val_mask is all False): the best epoch is the one with the "
             "lowest training loss")
    fp = fingerprint(args)

    def build() -> DistributedHetGAT:
        try:
            return DistributedHetGAT(data, args.hidden, args.heads, args.layers,
                                     seed=args.seed, method=args.partition, halo=args.halo,
                                     overlap=args.overlap, local=local, fingerprint=fp)
        except MemoryError as exc:
            raise _UserError(f"not enough memory for this model or graph share: {exc}") from None

    run = _guarded(job, build, ValueError, TypeError, _comm.CollectiveMismatchError)
    data = local = None  # each rank keeps only its share (the closure above shares these)
    gc.collect()
    rtx.reset_peak_memory_stats()
    _say(f"this rank: {run.local.num_owned} of {run.info['num_nodes'][run.info['target']]} "
         f"{run.info['target']} nodes, halo {args.halo}; built in "
         f"{time.perf_counter() - t_start:.2f} s")

    history: list[dict[str, float]] = []
    start = 0
    ckpt_dir = os.path.join(args.out, "checkpoint")
    config = {k: v for k, v in fp.items() if k not in _RESUME_FREE}
    config["graph"] = run.graph_id
    if meta is not None:
        def resume() -> dict[str, Any]:
            if meta["config"] != config:
                diff = sorted(k for k in set(meta["config"]) | set(config)
                              if meta["config"].get(k) != config.get(k))
                raise _UserError(f"--resume {args.resume}: the checkpoint was made with other "
                                 f"options or another graph ({', '.join(diff)} differ)")
            try:
                return load_checkpoint(find_checkpoint(args.resume),
                                       run.model, run.make_optimizer(args.lr,
                                                                     args.weight_decay))
            except (OSError, ValueError) as exc:
                raise _UserError(f"--resume {args.resume}: {ex._message(exc)}") from None

        state = _guarded(job, resume)
        start = state["epoch"]
        extra = state["extra"] or {}
        history = list(extra.get("history", []))
        b = extra.get("best") or {}
        best.epoch, best.value, best.state = b.get("epoch"), b.get("value", 0.0), b.get("state")
        _say(f"resumed from {state['epoch']} epochs ({find_checkpoint(args.resume)})")

    bar = _Progress(args.epochs, start, args.progress, _cli.duration)
    t0 = time.perf_counter()
    try:
        with np.errstate(all="ignore"):  # a non-finite loss is reported, in one line
            for row, st in run.train(args.epochs, args.lr, args.weight_decay, start):
                bar.update(row)
                if not math.isfinite(row["loss"]):  # global: the same on every rank
                    bar.close()
                    job.agree(_UserError(
                        f"the training loss is {row['loss']} at epoch {int(row['epoch'])}: "
                        "stopped, nothing written (non-finite features or labels, or a "
                        "learning rate too large for the data?)", _cli.EXIT_FAILED))
                history.append(row)
                best.offer(row, st)
                e = int(row["epoch"])
                if args.checkpoint_every and (e % args.checkpoint_every == 0 or e == args.epochs):
                    def save(e: int = e) -> None:
                        try:
                            save_checkpoint(ckpt_dir, e, run.model, run.opt, extra={
                                "history": history,
                                "best": {"epoch": best.epoch, "value": best.value,
                                         "state": best.state}}, config=config)
                        except OSError as exc:
                            raise _UserError(f"cannot write a checkpoint into {ckpt_dir}: "
                                             f"{ex._message(exc)}", _cli.EXIT_FAILED) from None

                    _guarded(job, save)
    finally:
        bar.close()
    train_s = time.perf_counter() - t0
    final = run.evaluate(best.state)  # the best parameters, on every rank's share
    report = run.rank_report([r["rank_seconds"] for r in history[len(history) - (
        args.epochs - start):]])
    metrics: dict[str, Any] = {"final": final, "ranks": report}

    def write() -> None:
        if not lead:
            return
        ckpt = os.path.join(args.out, "best.npz")
        ex._save_checkpoint(ap, best.state, ckpt)
        dist_info = {"world_size": world, "partition": args.partition, "halo": args.halo,
                     "overlap": args.overlap, "threads_per_rank": rtx.get_num_threads(),
                     "resumed_from_epoch": start or None, "ranks": report}
        metrics.update(ex._write_metrics(ap, args, graph_info, {"distributed": dist_info},
                                         history, best, final, train_s, ckpt))
        metrics["checkpoint_path"] = ckpt

    _guarded(job, write)
    if lead:
        _print_report(args, report, metrics, best, train_s, start, ex)
    if job.owns_group:
        dist.destroy_process_group()
    return metrics


def _print_report(args: argparse.Namespace, report: list[dict[str, Any]],
                  metrics: dict[str, Any], best: Any, train_s: float, start: int,
                  ex: Any) -> None:
    p = _comm.prefix()
    lines = ["", f"{'rank':>4} {'owned':>7} {'halo':>7} {'nodes':>8} {'edges':>9} "
                 f"{'epoch s':>8} {'rtx peak MB':>11} {'peak RSS MB':>11}"]
    for r in report:
        lines.append(f"{r['rank']:>4} {r['owned']:>7} {r['halo_target']:>7} {r['nodes']:>8} "
                     f"{r['edges']:>9} {r['median_epoch_s']:>8.3f} {r['rtx_peak_mb']:>11.1f} "
                     f"{r['peak_rss_mb']:>11.1f}")
    lines.append("")
    lines.append(f"trained {args.epochs - start} epochs on {len(report)} ranks in {train_s:.1f} s "
                 f"(median {metrics['median_epoch_seconds']:.3f} s/epoch, slowest rank); best "
                 f"epoch {best.epoch} by {best.described}")
    for split in ("train", "val", "test"):
        v = metrics["final"][f"{split}_acc"]
        lines.append(f"{split} accuracy {v:.4f}" if v is not None and math.isfinite(v)
                     else f"{split} accuracy n/a (no {split} nodes)")
    out = os.path.join(args.out, "metrics.json")
    lines.append(f"wrote {metrics['checkpoint_path']}, {out}"
                 + (f", {metrics['plot']}" if "plot" in metrics else ""))
    print("\n".join(f"{p}{ln}" if ln else "" for ln in lines), flush=True)
