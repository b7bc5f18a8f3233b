"""Checkpoints of a distributed run, and resuming from them bit for bit.

A checkpoint directory holds one sub-directory per saved epoch and a pointer::

    DIR/latest.json                  {"format", "epoch", "dir", "world_size", "config"}
    DIR/epoch-000010/state.npz       rank 0: model and optimiser state_dicts, the
                                     epoch, whatever the caller adds (``extra``)
    DIR/epoch-000010/rank-00000.npz  every rank: its own state (the random
    DIR/epoch-000010/rank-00001.npz  generator; ``rank_extra``)

Under DDP the model and the optimiser are the same on every rank, so rank 0
writes them once; what differs per rank goes into that rank's own file.
Every file is written atomically (``rtx.save``), the pointer last and only
after every rank has reported its files written (an agreement), so a run
killed at any moment leaves the previous checkpoint intact and readable.
Only the two newest epoch directories are kept.

``load_checkpoint`` restores the model, the optimiser and this rank's random
generator in place; training on from there repeats the uninterrupted run's
arithmetic exactly (same parameters, same Adam moments and step counts, same
random stream), so its parameters and losses are bitwise the same.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from .._fileio import atomic_write
from ..creation import _default_generator
from ..serialization import load as rtx_load
from ..serialization import save as rtx_save
from . import _comm

__all__ = ["CHECKPOINT_FORMAT", "LATEST", "find_checkpoint", "load_checkpoint",
           "read_latest", "save_checkpoint"]

CHECKPOINT_FORMAT = "rtx-checkpoint/1"
LATEST = "latest.json"
_KEEP = 2


def _rng_state() -> str:
    return json.dumps(_default_generator.numpy_generator.bit_generator.state)


def _set_rng_state(text: str) -> None:
    _default_generator.numpy_generator.bit_generator.state = json.loads(text)


def _agree_ok(err: BaseException | None, what: str) -> None:
    """Raise on every rank when any rank failed (its own error there)."""
    every = _comm.allgather_object(None if err is None else f"{type(err).__name__}: {err}",
                                   what)
    if err is not None:
        raise err
    bad = [(r, m) for r, m in enumerate(every) if m is not None]
    if bad:
        r, m = bad[0]
        raise OSError(f"{what}: rank {r} failed ({m})")


def save_checkpoint(directory: str | os.PathLike[str], epoch: int, model: Any, optimizer: Any,
                    extra: Any = None, rank_extra: Any = None,
                    config: dict[str, Any] | None = None) -> str:
    """Save epoch ``epoch``'s state (a collective: every rank calls it); returns
    the epoch's directory.  ``extra``: more of rank 0's state (``rtx.save``
    trees: metrics so far, the best model); ``rank_extra``: this rank's own;
    ``config``: what a resumed run must agree with (checked by the caller)."""
    d = os.fspath(directory)
    sub = f"epoch-{int(epoch):06d}"
    path = os.path.join(d, sub)
    me, world = _comm.rank(), _comm.world_size()
    err: BaseException | None = None
    try:
        os.makedirs(path, exist_ok=True)
        if me == 0:
            rtx_save({"format": CHECKPOINT_FORMAT, "epoch": int(epoch),
                      "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                      "extra": extra}, os.path.join(path, "state.npz"))
        rtx_save({"format": CHECKPOINT_FORMAT, "epoch": int(epoch), "rank": me,
                  "world_size": world, "rng": _rng_state(), "extra": rank_extra},
                 os.path.join(path, f"rank-{me:05d}.npz"))
    except (OSError, ValueError, TypeError) as exc:
        err = exc
    _agree_ok(err, f"checkpoint {path}")
    err = None
    if me == 0:
        try:
            with atomic_write(os.path.join(d, LATEST), "w", encoding="utf-8") as fh:
                json.dump({"format": CHECKPOINT_FORMAT, "epoch": int(epoch), "dir": sub,
                           "world_size": world, "config": config or {}}, fh, indent=1,
                          sort_keys=True)
            old = sorted(n for n in os.listdir(d) if n.startswith("epoch-") and n != sub)
            for name in old[: max(0, len(old) - (_KEEP - 1))]:
                shutil.rmtree(os.path.join(d, name), ignore_errors=True)
        except OSError as exc:
            err = exc
    _agree_ok(err, f"checkpoint {os.path.join(d, LATEST)}")
    return path


def find_checkpoint(path: str | os.PathLike[str]) -> str:
    """The checkpoint directory ``path`` names: itself when it holds
    ``latest.json``, else its ``checkpoint/`` sub-directory (a run's ``--out``)."""
    p = os.fspath(path)
    if os.path.isfile(os.path.join(p, LATEST)):
        return p
    sub = os.path.join(p, "checkpoint")
    if os.path.isfile(os.path.join(sub, LATEST)):
        return sub
    raise FileNotFoundError(f"{p}: no checkpoint here (no {LATEST}, nor checkpoint/{LATEST})")


def read_latest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The pointer of a checkpoint directory, checked (``ValueError``)."""
    d = find_checkpoint(directory)
    path = os.path.join(d, LATEST)
    with open(path, encoding="utf-8") as fh:
        try:
            meta = json.load(fh)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not a checkpoint pointer ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT \
            or not isinstance(meta.get("epoch"), int) or not isinstance(meta.get("dir"), str) \
            or os.path.basename(meta["dir"]) != meta["dir"]:
        raise ValueError(f"{path}: not a checkpoint pointer written by rtx.distributed")
    meta["path"] = os.path.join(d, meta["dir"])
    return meta


def load_checkpoint(directory: str | os.PathLike[str], model: Any,
                    optimizer: Any) -> dict[str, Any]:
    """Restore the latest checkpoint in ``directory`` (a collective): the
    model and optimiser from ``state.npz``, this rank's random generator from
    its own file.  Returns ``{"epoch", "extra", "rank_extra", "config"}``.
    A checkpoint of another world size, or a damaged one, raises
    ``ValueError`` on every rank before anything is changed."""
    me, world = _comm.rank(), _comm.world_size()
    err: BaseException | None = None
    state: Any = None
    mine: Any = None
    meta: dict[str, Any] = {}
    try:
        meta = read_latest(directory)
        if meta.get("world_size") != world:
            raise ValueError(f"{meta['path']}: saved by {meta.get('world_size')} ranks, this "
                             f"run has {world} (resume with the same number of ranks)")
        state = rtx_load(os.path.join(meta["path"], "state.npz"))
        mine = rtx_load(os.path.join(meta["path"], f"rank-{me:05d}.npz"))
        for what, tree in (("state.npz", state), (f"rank-{me:05d}.npz", mine)):
            if not isinstance(tree, dict) or tree.get("format") != CHECKPOINT_FORMAT \
                    or tree.get("epoch") != meta["epoch"]:
                raise ValueError(f"{meta['path']}/{what}: not this checkpoint's file")
        if mine.get("rank") != me or mine.get("world_size") != world:
            raise ValueError(f"{meta['path']}: rank {me}'s file belongs to another rank")
    except (OSError, ValueError, TypeError) as exc:
        err = exc
    _agree_ok(err, "resume")
    err = None
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        _set_rng_state(mine["rng"])
    except (KeyError, ValueError, TypeError, RuntimeError) as exc:
        err = ValueError(f"{meta['path']}: does not fit this model ({exc})")
    _agree_ok(err, "resume")
    return {"epoch": int(meta["epoch"]), "extra": state.get("extra"),
            "rank_extra": mine.get("extra"), "config": meta.get("config", {})}
