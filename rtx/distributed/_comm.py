"""Process group and collectives over MPI (mpi4py), on rtx buffers.

mpi4py is imported by ``init()`` only, never by ``import rtx`` or ``import
rtx.distributed``.  On the CPU backend a tensor's buffer is handed to MPI as is
(``np.asarray(t)`` is a zero-copy view of the tensor's rtx ``Storage``):
``all_reduce`` runs ``Allreduce(MPI.IN_PLACE, buf)`` and ``broadcast`` runs
``Bcast(buf)`` on it, and ``all_gather`` receives straight into the new
tensor's buffer.  Other backends (whose buffers are not numpy arrays) go
through one host copy each way, written back with the tensor's in-place API.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..backend.cpu import empty
from ..tensor import Tensor
from ..tensor import bump_version as _bump_version

_MPI: Any = None
_COMM: Any = None

# Environment variables set by MPI launchers (MPICH/Intel MPI hydra, Open MPI,
# PMIx, Slurm's srun): a process started by none of them is a "singleton".
_LAUNCH_VARS = (
    "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS",
    "HYDI_CONTROL_FD", "PMI_FD", "SLURM_STEP_NUM_TASKS",
)

_OPS = ("sum", "mean", "max")


def _import_mpi() -> Any:
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ImportError as exc:
            raise ImportError(
                "rtx.distributed needs mpi4py and an MPI library, which are not installed: "
                "pip install \"rtx-gnn[mpi]\" (mpi4py and the mpich wheel; or install mpi4py "
                f"against your cluster's MPI). ({exc})"
            ) from exc
        _MPI = MPI
    return _MPI


def launched_by_mpi() -> bool:
    """Whether an MPI launcher (``mpiexec``, ``mpirun``, ``srun``) started this process."""
    return any(v in os.environ for v in _LAUNCH_VARS)


def init(comm: Any = None, allow_singleton: bool = False) -> None:
    """Join the process group (``MPI.COMM_WORLD``, or ``comm``); idempotent.

    Raises ``ImportError`` (naming ``pip install "rtx-gnn[mpi]"``) without mpi4py,
    and ``RuntimeError`` when the process was not started by an MPI launcher,
    unless ``comm`` is given or ``allow_singleton=True`` (then it runs as the
    only rank of a world of size 1).
    """
    global _COMM
    if _COMM is not None and comm is None:
        return
    if comm is None and not allow_singleton and not launched_by_mpi():
        raise RuntimeError(
            "rtx.distributed.init(): this process was not started by an MPI launcher. "
            "Launch it with `mpiexec -n N python ...` (or `srun` under Slurm), or pass "
            "allow_singleton=True to run as a single rank."
        )
    MPI = _import_mpi()
    _COMM = MPI.COMM_WORLD if comm is None else comm


def is_initialized() -> bool:
    """Whether ``init()`` has run in this process."""
    return _COMM is not None


def _comm() -> Any:
    if _COMM is None:
        raise RuntimeError(
            "rtx.distributed is not initialized: call rtx.distributed.init() first "
            "(in a process started by `mpiexec -n N python ...`)"
        )
    return _COMM


def get_comm() -> Any:
    """The mpi4py communicator in use (after ``init()``)."""
    return _comm()


def rank() -> int:
    """This process's rank, ``0 <= rank() < world_size()``."""
    return int(_comm().Get_rank())


def world_size() -> int:
    """The number of processes in the group."""
    return int(_comm().Get_size())


def barrier() -> None:
    """Block until every rank has called ``barrier()``."""
    _comm().Barrier()


# ------------------------------------------------------------------ buffers
def _check_tensor(t: Any, fn: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: expected an rtx.Tensor, got {type(t).__name__}")


def _writable_check(t: Tensor, fn: str) -> None:
    if t.requires_grad and is_grad_enabled():
        raise RuntimeError(
            f"{fn}: a tensor that requires grad cannot be modified in place outside "
            "rtx.no_grad() (wrap the call in `with rtx.no_grad():`)"
        )


def _host_buffer(t: Tensor, fn: str) -> tuple[np.ndarray, bool]:
    """``(buffer, zero_copy)``: the tensor's own memory on the CPU backend
    (C-contiguous required), otherwise a contiguous host copy."""
    v = t._value
    if isinstance(v, np.ndarray):
        if not v.flags.c_contiguous:
            raise ValueError(
                f"{fn}: the tensor is not contiguous (a view from transpose, permute or "
                f"slicing; shape {t.shape}, strides {v.strides}); pass t.contiguous() and "
                "use the result"
            )
        if not v.flags.writeable:
            raise ValueError(f"{fn}: the tensor's buffer is read-only")
        return v, True
    return np.ascontiguousarray(t.numpy()), False


def bump_version(t: Tensor) -> None:
    """Record an in-place write that bypassed the tensor's in-place API (MPI
    wrote into its buffer) in rtx's version counter, where rtx has one, so
    that a backward pass that saved this buffer refuses to use stale data."""
    _bump_version(t)


def _mark_written(t: Tensor, buf: np.ndarray, zero_copy: bool) -> None:
    """After MPI wrote ``buf``: bump the tensor's version counter when rtx has
    one (the zero-copy path), or copy the host buffer back with the in-place API."""
    if zero_copy:
        bump_version(t)
        return
    with no_grad():
        t.copy_(buf)


def _agree(comm: Any, fn: str, tensor: Any, check: Any) -> Any:
    """Run this rank's argument checks (``check()``: returns what the
    collective needs, raises ``TypeError`` / ``ValueError`` / ``RuntimeError``),
    then agree with every other rank in one small allgather of (shape, dtype,
    error), before any data moves.  So a bad argument on ONE rank raises on
    every rank (its own exception there, a ``RuntimeError`` naming it on the
    others) instead of leaving the others blocked in the collective; tensors
    that differ in shape or dtype across ranks raise ``ValueError`` everywhere."""
    err: Exception | None = None
    out = None
    try:
        out = check()
    except (TypeError, ValueError, RuntimeError) as exc:
        err = exc
    sig = (tuple(tensor.shape), str(tensor.dtype)) if isinstance(tensor, Tensor) else None
    msg = None if err is None else f"{type(err).__name__}: {err}"
    sigs = comm.allgather((sig, msg))
    if err is not None:
        raise err
    for r, (_, m) in enumerate(sigs):
        if m is not None:
            raise RuntimeError(f"{fn}: rank {r} gave a bad argument ({m})")
    if any(s != sigs[0][0] for s, _ in sigs):
        desc = ", ".join(f"rank {r}: shape {s[0]} {s[1]}" for r, (s, _) in enumerate(sigs))
        raise ValueError(f"{fn}: tensors differ in shape or dtype across ranks ({desc})")
    return out


def _mpi_op(op: str, fn: str) -> Any:
    if op not in _OPS:
        raise ValueError(f"{fn}: unknown op {op!r}; expected one of {', '.join(map(repr, _OPS))}")
    MPI = _import_mpi()
    return MPI.MAX if op == "max" else MPI.SUM


# -------------------------------------------------------------- collectives
def all_reduce(tensor: Tensor, op: str = "sum") -> Tensor:
    """Reduce ``tensor`` over all ranks, in place; returns ``tensor``.

    ``op``: ``"sum"``, ``"mean"`` (sum divided by the world size; floating
    tensors only) or ``"max"``.  Every rank must pass a tensor of the same
    shape and dtype.  Every rank gets the same values.  Arguments are checked
    on every rank first (one small allgather, see ``_agree``).
    """
    fn = "all_reduce"
    comm = _comm()
    MPI = _import_mpi()

    def check() -> tuple[Any, np.ndarray, bool]:
        _check_tensor(tensor, fn)
        mop = _mpi_op(op, fn)
        if op == "mean" and tensor.dtype.kind != "f":
            raise TypeError(f"{fn}: op='mean' needs a floating tensor, got {tensor.dtype}")
        if tensor.dtype.kind == "b" and op == "sum":
            raise TypeError(f"{fn}: op='sum' of a bool tensor; use op='max' (logical or)")
        _writable_check(tensor, fn)
        return (mop, *_host_buffer(tensor, fn))

    mop, buf, zc = _agree(comm, fn, tensor, check)
    comm.Allreduce(MPI.IN_PLACE, buf, op=mop)
    if op == "mean":
        np.divide(buf, comm.Get_size(), out=buf)
    _mark_written(tensor, buf, zc)
    return tensor


def broadcast(tensor: Tensor, root: int = 0) -> Tensor:
    """Overwrite ``tensor`` on every rank with rank ``root``'s values, in place;
    returns ``tensor``.  Shapes and dtypes must agree across ranks; arguments
    are checked on every rank first (``_agree``)."""
    fn = "broadcast"
    comm = _comm()
    size = comm.Get_size()

    def check() -> tuple[np.ndarray, bool]:
        _check_tensor(tensor, fn)
        if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < size:
            raise ValueError(f"{fn}: root {root!r} is not a rank of a world of size {size}")
        _writable_check(tensor, fn)
        return _host_buffer(tensor, fn)

    buf, zc = _agree(comm, fn, tensor, check)
    comm.Bcast(buf, root=root)
    _mark_written(tensor, buf, zc)
    return tensor


def all_gather(tensor: Tensor) -> Tensor:
    """Every rank's ``tensor``, stacked: a new tensor of shape
    ``(world_size(), *tensor.shape)`` whose ``[r]`` is rank ``r``'s tensor
    (``list(out)`` gives the per-rank pieces).  Shapes and dtypes must agree
    across ranks; arguments are checked on every rank first (``_agree``).  On
    the CPU backend MPI sends from the tensor's buffer and receives straight
    into the result's."""
    fn = "all_gather"
    comm = _comm()

    def check() -> np.ndarray:
        _check_tensor(tensor, fn)
        v = tensor._value
        if isinstance(v, np.ndarray):
            if not v.flags.c_contiguous:
                raise ValueError(
                    f"{fn}: the tensor is not contiguous (shape {tensor.shape}, strides "
                    f"{v.strides}); pass t.contiguous()"
                )
            return v
        return np.ascontiguousarray(tensor.numpy())

    send = _agree(comm, fn, tensor, check)
    shape = (comm.Get_size(), *tensor.shape)
    if isinstance(tensor._value, np.ndarray):  # CPU backend: receive into an rtx-owned buffer
        recv = empty(shape, tensor.dtype)
        comm.Allgather(send, recv)
        return Tensor._make(recv, tensor._ad)
    recv = np.empty(shape, tensor.dtype)
    comm.Allgather(send, recv)
    return Tensor._make(tensor._ad.inner.from_numpy(recv), tensor._ad)
