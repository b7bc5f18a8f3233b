"""Process group and collectives over MPI (mpi4py), on rtx buffers.

mpi4py is imported by ``init()`` only, never by ``import rtx`` or ``import
rtx.distributed``.  On the CPU backend a tensor's buffer is handed to MPI as is
(``np.asarray(t)`` is a zero-copy view of the tensor's rtx ``Storage``):
``all_reduce`` runs ``Iallreduce(MPI.IN_PLACE, buf)`` and ``broadcast`` runs
``Ibcast(buf)`` on it, and ``all_gather`` receives straight into the new
tensor's buffer.  Other backends (whose buffers are not numpy arrays) go
through one host copy each way, written back with the tensor's in-place API.

Bounded failures (docs/distributed.md, "When something goes wrong"):

* **Agreement.**  Every collective rtx runs -- the public ones, DDP's
  gradient reduction, the halo exchange, the exit handshake -- starts with one
  small ``Iallgather`` of a fixed-size descriptor (what the call is, its op,
  root, shape, dtype, an error flag and two counters).  Every rank compares
  every rank's descriptor, so ranks that called different collectives, or
  the same one with a different op, root, shape or dtype, or a bad argument
  on one rank, raise on ALL ranks before any data moves, instead of mixing
  data or hanging.
* **Watchdog.**  Every wait polls its non-blocking request (spinning for a
  millisecond, then sleeping with a backoff up to 1 ms, so a waiting rank
  does not burn a core) and gives up after ``timeout`` seconds
  (``init(timeout=)``, else ``RTX_DIST_TIMEOUT``, else 600): it prints what it
  waited for, with this rank's ``[rank r/N]`` prefix, and aborts every rank
  (``MPI_Abort``): a request cannot be cancelled, so raising would leave the
  ranks out of step.
* **Abort on an uncaught exception** (``init(abort_on_exception=True)``, the
  default): ``sys.excepthook`` prints the traceback with the rank prefix and
  calls ``MPI_Abort``, so the other ranks end at once instead of waiting in
  their next collective.
* **Exit handshake.**  At interpreter exit (``atexit``) a rank that has not
  called ``destroy_process_group()`` agrees with the others on an "exit"
  descriptor: when every rank is exiting, nothing happens; when another rank
  is still in a collective (this rank returned or called ``sys.exit`` early),
  both sides see the mismatch: the exiting rank aborts every rank with a
  message, within the time the others take to reach their next collective.
"""

from __future__ import annotations

import atexit
import datetime
import json
import math
import os
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..backend.cpu import empty
from ..tensor import Tensor, prepare_write
from ..tensor import bump_version as _bump_version

_MPI: Any = None
_COMM: Any = None
_RANK = 0
_SIZE = 1
_TIMEOUT = 600.0
_DESTROYED = False
_HOOKS_INSTALLED = False
_PREV_EXCEPTHOOK: Any = None

# Environment variables set by MPI launchers (MPICH/Intel MPI hydra, Open MPI,
# PMIx, Slurm's srun): a process started by none of them is a "singleton".
_LAUNCH_VARS = (
    "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS",
    "HYDI_CONTROL_FD", "PMI_FD", "SLURM_STEP_NUM_TASKS",
)
TIMEOUT_ENV = "RTX_DIST_TIMEOUT"
DEFAULT_TIMEOUT = 600.0

_OPS = ("sum", "mean", "max", "min", "lor", "land")

# ----------------------------------------------------------------- descriptors
# One int64 vector per collective call; every rank allgathers everyone's.
_D = 16
_MAGIC = 0x7274785F64697374  # "rtx_dist"
(_F_MAGIC, _F_KIND, _F_OP, _F_ROOT, _F_DTYPE, _F_NDIM) = range(6)
_F_SHAPE = 6          # 6 .. 11: the first six dimensions
_MAX_DIMS = 6
_F_SHAPE_HASH = 12    # crc32 of the whole shape (ndim > 6)
_F_EXTRA = 13         # 13, 14: two counters (DDP: forwards, syncs; halo: plan, layer)
_F_ERROR = 15         # 1: this rank's arguments are bad (its message follows)

KINDS = ("all_reduce", "broadcast", "all_gather", "barrier", "gather_object",
         "broadcast_object", "ddp_init", "ddp_sync", "halo_setup", "halo_forward",
         "halo_backward", "exit", "destroy_process_group")
_KIND_CODE = {k: i + 1 for i, k in enumerate(KINDS)}
_OP_CODE = {o: i + 1 for i, o in enumerate(_OPS)}
_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
           "float16", "float32", "float64", "complex64", "complex128")
_DTYPE_CODE = {d: i + 1 for i, d in enumerate(_DTYPES)}


class CollectiveMismatchError(RuntimeError):
    """Raised on every rank when the ranks called different collectives, or
    the same collective with a different op, root or counters (they are out
    of step).  Shapes or dtypes that differ raise ``ValueError``."""


CollectiveMismatchError.__module__ = "rtx.distributed"  # its public home (tracebacks)


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


def launcher_rank() -> int | None:
    """This process's rank as the launcher's environment says (before ``init()``:
    MPICH/Intel ``PMI_RANK``, Open MPI, PMIx, Slurm), or ``None``."""
    for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"):
        text = os.environ.get(v)
        if text is not None and text.strip().isdigit():
            return int(text)
    return None


def _parse_timeout(value: Any, what: str) -> float:
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{what}: expected a number of seconds, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what}: expected seconds (a number or a timedelta), got "
                        f"{type(value).__name__}")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{what}: the timeout must be a finite number of seconds > 0, "
                         f"got {value!r}")
    return v


def init(comm: Any = None, allow_singleton: bool = False, timeout: Any = None,
         abort_on_exception: bool = True) -> None:
    """Join the process group (``MPI.COMM_WORLD``, or ``comm``); idempotent.

    Raises ``ImportError`` (naming ``pip install "rtx-gnn[mpi]"``) without mpi4py,
    and ``RuntimeError`` when the process was not started by an MPI launcher,
    unless ``comm`` is given or ``allow_singleton=True`` (then it runs as the
    only rank of a world of size 1).

    ``timeout``: seconds (or a ``timedelta``) any collective may wait for the
    other ranks before the watchdog aborts every rank; default
    ``RTX_DIST_TIMEOUT`` or 600.  ``abort_on_exception``: an uncaught
    exception on a rank prints its traceback with the rank and aborts every
    rank (``sys.excepthook``), instead of leaving the others waiting.
    """
    global _COMM, _RANK, _SIZE, _TIMEOUT, _DESTROYED
    t = _parse_timeout(timeout, "init(timeout=...)") if timeout is not None else None
    env = os.environ.get(TIMEOUT_ENV)
    if t is None and env is not None and env.strip():
        t = _parse_timeout(env.strip(), TIMEOUT_ENV)
    if _COMM is not None and comm is None:
        if t is not None:
            _TIMEOUT = t
        return
    if comm is None and not allow_singleton and not launched_by_mpi():
        raise RuntimeError(
            "rtx.distributed.init(): this process was not started by an MPI launcher. "
            "Launch it with `mpiexec -n N python ...` (or `srun` under Slurm), or pass "
            "allow_singleton=True to run as a single rank."
        )
    MPI = _import_mpi()
    c = MPI.COMM_WORLD if comm is None else comm
    _COMM = c
    _RANK, _SIZE = int(c.Get_rank()), int(c.Get_size())
    _TIMEOUT = DEFAULT_TIMEOUT if t is None else t
    _DESTROYED = False
    if _SIZE > 1:
        _install_hooks(abort_on_exception)


def is_initialized() -> bool:
    """Whether ``init()`` has run in this process (and no ``destroy_process_group()`` since)."""
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
    _comm()
    return _RANK


def world_size() -> int:
    """The number of processes in the group."""
    _comm()
    return _SIZE


def get_timeout() -> float:
    """The watchdog timeout in seconds (``init(timeout=)`` / ``RTX_DIST_TIMEOUT``)."""
    return _TIMEOUT


def prefix() -> str:
    """``"[rank r/N] "``: how this rank marks its log lines and errors (empty
    before ``init()``)."""
    if _COMM is None:
        return ""
    return f"[rank {_RANK}/{_SIZE}] "


# -------------------------------------------------------------- failure paths
def _print_err(text: str) -> None:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        p = prefix()
        lines = text.rstrip("\n").splitlines() or [""]
        sys.stderr.write("".join(f"{p}{ln}\n" for ln in lines))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def abort(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` (with this rank's prefix) and end EVERY rank now
    (``MPI_Abort``).  Without MPI (or in a world of one) exit with ``code``."""
    _print_err(message)
    if _COMM is not None and _SIZE > 1:
        # give the launcher's output forwarding a moment: MPI_Abort tears the job
        # down at once, and another rank may be printing its own view of the failure
        time.sleep(0.25)
        _COMM.Abort(code)
    os._exit(code)


def _excepthook(etype: Any, value: Any, tb: Any) -> None:
    if _COMM is None or _DESTROYED or issubclass(etype, KeyboardInterrupt):
        (_PREV_EXCEPTHOOK or sys.__excepthook__)(etype, value, tb)
        return
    text = "".join(traceback.format_exception(etype, value, tb))
    abort(text + "rtx.distributed: an uncaught exception on this rank: aborting every rank",
          1)


def _at_exit() -> None:
    """The exit handshake (module docstring)."""
    if _COMM is None or _DESTROYED or _SIZE < 2:
        return
    try:
        _agree("exit")
    except (CollectiveMismatchError, ValueError) as exc:
        abort(f"rtx.distributed: this rank is exiting while another is not: {exc}; "
              "aborting every rank")


def _install_hooks(abort_on_exception: bool) -> None:
    global _HOOKS_INSTALLED, _PREV_EXCEPTHOOK
    if _HOOKS_INSTALLED:
        return
    _HOOKS_INSTALLED = True
    atexit.register(_at_exit)  # after mpi4py's own (atexit runs last-in first-out)
    if abort_on_exception:
        _PREV_EXCEPTHOOK = sys.excepthook
        sys.excepthook = _excepthook


def destroy_process_group() -> None:
    """Leave the process group, with every other rank (a collective: every
    rank calls it; the exit handshake is then skipped).  ``init()`` may be
    called again afterwards."""
    global _COMM, _DESTROYED
    _agree("destroy_process_group")
    _DESTROYED = True
    _COMM = None


# ------------------------------------------------------------------- waiting
def _wait(reqs: Sequence[Any], what: str) -> None:
    """Complete ``reqs`` (non-blocking MPI requests), polling: spin ~1 ms,
    then sleep with a backoff up to 1 ms between tests.  After the watchdog
    timeout: abort every rank, saying what this rank waited for."""
    MPI = _MPI
    if MPI.Request.Testall(list(reqs)):
        return
    t0 = time.monotonic()
    spin_until = t0 + 1e-3
    deadline = t0 + _TIMEOUT
    delay = 2e-5
    while True:
        if MPI.Request.Testall(list(reqs)):
            return
        now = time.monotonic()
        if now > deadline:
            abort(f"rtx.distributed: {what} waited {_TIMEOUT:g} s for the other ranks "
                  f"(watchdog timeout: init(timeout=...) or {TIMEOUT_ENV}); a rank is stuck, "
                  "has died or runs a different program path: aborting every rank")
        if now > spin_until:
            time.sleep(delay)
            delay = min(delay * 2, 1e-3)


def _allgather_bytes(data: bytes, what: str) -> list[bytes]:
    """Every rank's ``data`` (no agreement: call only where every rank is known
    to call it, right after an agreement)."""
    MPI = _MPI
    comm = _comm()
    n = np.array([len(data)], dtype=np.int64)
    counts = np.empty(_SIZE, dtype=np.int64)
    _wait([comm.Iallgather(n, counts)], what)
    displ = np.zeros(_SIZE, dtype=np.int64)
    np.cumsum(counts[:-1], out=displ[1:])
    recv = np.empty(int(counts.sum()), dtype=np.uint8)
    send = np.frombuffer(data, dtype=np.uint8) if data else np.empty(0, np.uint8)
    _wait([comm.Iallgatherv(send, [recv, counts, displ, MPI.BYTE])], what)
    return [recv[int(d):int(d) + int(c)].tobytes() for d, c in zip(displ, counts, strict=True)]


# ---------------------------------------------------------------- agreement
def _dtype_code(dt: Any) -> int:
    name = np.dtype(dt).name
    return _DTYPE_CODE.get(name, 1000 + (zlib.crc32(name.encode()) & 0xFFFF))


def _descriptor(kind: str, op: str | None, root: int, shape: tuple[int, ...] | None,
                dtype: Any, extra: tuple[int, int], err: bool) -> np.ndarray:
    d = np.zeros(_D, dtype=np.int64)
    d[_F_MAGIC] = _MAGIC
    d[_F_KIND] = _KIND_CODE[kind]
    d[_F_OP] = _OP_CODE.get(op, 0) if op is not None else 0
    if op is not None and op not in _OP_CODE:
        d[_F_OP] = -1
    d[_F_ROOT] = root
    d[_F_DTYPE] = _dtype_code(dtype) if dtype is not None else 0
    if shape is None:
        d[_F_NDIM] = -1
    else:
        d[_F_NDIM] = len(shape)
        for i, s in enumerate(shape[:_MAX_DIMS]):
            d[_F_SHAPE + i] = s
        d[_F_SHAPE_HASH] = zlib.crc32(repr(tuple(shape)).encode())
    d[_F_EXTRA], d[_F_EXTRA + 1] = extra
    d[_F_ERROR] = int(err)
    return d


def _kind_name(code: int) -> str:
    return KINDS[code - 1] if 1 <= code <= len(KINDS) else f"<unknown collective {code}>"


def _shape_text(d: np.ndarray) -> str:
    nd = int(d[_F_NDIM])
    if nd < 0:
        return "no tensor"
    dims = [str(int(v)) for v in d[_F_SHAPE:_F_SHAPE + min(nd, _MAX_DIMS)]]
    if nd > _MAX_DIMS:
        dims.append("...")
    dc = int(d[_F_DTYPE])
    dt = _DTYPES[dc - 1] if 1 <= dc <= len(_DTYPES) else f"dtype#{dc}"
    return f"shape ({', '.join(dims)}{',' if nd == 1 else ''}) {dt}"


def describe(d: np.ndarray) -> str:
    """A descriptor in words (for error messages)."""
    kind = _kind_name(int(d[_F_KIND]))
    parts = []
    oc = int(d[_F_OP])
    if oc:
        parts.append(f"op={_OPS[oc - 1]!r}" if 1 <= oc <= len(_OPS) else "op=<unknown>")
    if int(d[_F_ROOT]) >= 0:
        parts.append(f"root={int(d[_F_ROOT])}")
    if int(d[_F_NDIM]) >= 0:
        parts.append(_shape_text(d))
    if kind == "ddp_sync":
        parts.append(f"after forward #{int(d[_F_EXTRA])}, backward #{int(d[_F_EXTRA + 1])}")
    elif int(d[_F_EXTRA]) or int(d[_F_EXTRA + 1]):
        parts.append(f"#{int(d[_F_EXTRA])}.{int(d[_F_EXTRA + 1])}")
    return f"{kind}({', '.join(parts)})"


def _agree(kind: str, *, op: str | None = None, root: int = -1, tensor: Any = None,
           shape: tuple[int, ...] | None = None, dtype: Any = None,
           extra: tuple[int, int] = (0, 0), check: Callable[[], Any] | None = None,
           what: str | None = None) -> Any:
    """Run this rank's argument checks (``check()``: returns what the
    collective needs, raises ``TypeError`` / ``ValueError`` / ``RuntimeError``),
    then agree with every other rank in one ``Iallgather`` of descriptors,
    before any data moves (module docstring).  A bad argument on ONE rank
    raises on every rank (its own exception there, a ``RuntimeError`` naming
    it elsewhere); ranks out of step raise ``CollectiveMismatchError``, and
    tensors that differ in shape or dtype ``ValueError``, on every rank."""
    comm = _comm()
    fn = what or kind
    err: Exception | None = None
    out = None
    if check is not None:
        try:
            out = check()
        except (TypeError, ValueError, RuntimeError) as exc:
            err = exc
    if isinstance(tensor, Tensor):
        shape, dtype = tuple(tensor.shape), tensor.dtype
    mine = _descriptor(kind, op, root, shape, dtype, extra, err is not None)
    if _SIZE == 1:
        if err is not None:
            raise err
        return out
    every = np.empty((_SIZE, _D), dtype=np.int64)
    _wait([comm.Iallgather(mine, every)], f"{fn}: agreeing on the call with the other ranks")
    if (every[:, _F_MAGIC] != _MAGIC).any():
        r = int(np.flatnonzero(every[:, _F_MAGIC] != _MAGIC)[0])
        raise CollectiveMismatchError(
            f"{fn}: rank {r} is in an MPI call that is not one of rtx.distributed's "
            "(mixing raw mpi4py collectives with rtx's on one communicator?)")
    if every[:, _F_ERROR].any():  # every rank knows: every rank joins the message exchange
        msg = b"" if err is None else f"{type(err).__name__}: {err}".encode()
        msgs = _allgather_bytes(msg, f"{fn}: exchanging error messages")
        if err is not None:
            raise err
        bad = [(r, m.decode(errors="replace")) for r, m in enumerate(msgs) if m]
        r, m = bad[0]
        raise RuntimeError(f"{fn}: rank {r} gave a bad argument ({m})")
    control = [_F_KIND, _F_OP, _F_ROOT, _F_EXTRA, _F_EXTRA + 1]
    if (every[:, control] != every[0, control]).any():
        desc = "; ".join(f"rank {r}: {describe(d)}" for r, d in enumerate(every))
        hint = ""
        kinds = {int(v) for v in every[:, _F_KIND]}
        if _KIND_CODE["exit"] in kinds and len(kinds) > 1:
            hint = " (a rank is exiting while the others still run collectives)"
        elif kinds == {_KIND_CODE["ddp_sync"]}:
            hint = (" (DistributedDataParallel: one rank ran backward() more or fewer times, "
                    "or skipped a forward)")
        raise CollectiveMismatchError(f"{fn}: the ranks are out of step, they called "
                                      f"different collectives{hint}: {desc}")
    shape_f = slice(_F_DTYPE, _F_SHAPE_HASH + 1)
    if (every[:, shape_f] != every[0, shape_f]).any():
        desc = ", ".join(f"rank {r}: {_shape_text(d)}" for r, d in enumerate(every))
        raise ValueError(f"{fn}: tensors differ in shape or dtype across ranks ({desc})")
    if err is not None:  # cannot happen (its flag was seen above); keeps the types right
        raise err
    return out


# ------------------------------------------------------------ object messages
def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"{type(o).__name__} is not JSON-serialisable")


def allgather_object(obj: Any, what: str = "allgather_object") -> list[Any]:
    """Every rank's ``obj`` (JSON-serialisable: dicts, lists, str, numbers,
    None, numpy scalars and arrays as lists; nothing is pickled), after an
    agreement."""
    data = b""

    def check() -> None:
        nonlocal data
        try:
            data = json.dumps(obj, sort_keys=True, default=_json_default).encode()
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{what}: the value is not JSON-serialisable ({exc})") from None

    _agree("gather_object", check=check, what=what)
    return [json.loads(b.decode()) for b in _allgather_bytes(data, what)]


def broadcast_object(obj: Any, root: int = 0, what: str = "broadcast_object") -> Any:
    """Rank ``root``'s ``obj`` on every rank (JSON-serialisable)."""
    return allgather_object(obj if _RANK == root else None, what)[root]


def check_same(values: dict[str, Any], what: str) -> None:
    """Raise ``ValueError`` on EVERY rank unless every rank passes equal
    ``values`` (a dict of JSON-serialisable values), naming each differing
    key with each rank's value."""
    every = allgather_object(values, what)
    keys = sorted({k for v in every for k in v})
    diff = [k for k in keys if any(v.get(k) != every[0].get(k) for v in every)]
    if diff:
        def show(k: str) -> str:
            return f"{k}: " + ", ".join(f"rank {r}: {v.get(k)!r}" for r, v in enumerate(every))
        shown = "; ".join(show(k) for k in diff[:6])
        more = f" (and {len(diff) - 6} more)" if len(diff) > 6 else ""
        raise ValueError(f"{what}: the ranks differ ({shown}{more}); every rank must run "
                         "the same program on the same data")


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
    (C-contiguous required), otherwise a contiguous host copy.  The caller may
    write it: pending lazy readers of the tensor finish first."""
    prepare_write(t)
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


def _mpi_op(op: str, kind: str, fn: str) -> Any:
    """The MPI reduction for ``op`` on a tensor of dtype kind ``kind``."""
    if not isinstance(op, str) or op not in _OPS:
        raise ValueError(f"{fn}: unknown op {op!r}; expected one of {', '.join(map(repr, _OPS))}")
    MPI = _import_mpi()
    if kind == "b":
        if op in ("sum", "mean"):
            raise TypeError(
                f"{fn}: op={op!r} of a bool tensor is not defined; use op='lor' (or 'max': "
                "true where any rank is true) or op='land' (or 'min': true where every rank "
                "is true), or reduce t.int() with op='sum' to count the ranks")
        return MPI.LOR if op in ("lor", "max") else MPI.LAND
    if op in ("lor", "land"):
        raise TypeError(f"{fn}: op={op!r} needs a bool tensor; use 'max' / 'min' (or "
                        "'sum') on numbers")
    if op == "mean" and kind != "f":
        raise TypeError(f"{fn}: op='mean' needs a floating tensor, got dtype kind {kind!r}")
    return {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]


# -------------------------------------------------------------- collectives
def all_reduce(tensor: Tensor, op: str = "sum") -> Tensor:
    """Reduce ``tensor`` over all ranks, in place; returns ``tensor``.

    ``op``: ``"sum"``, ``"mean"`` (sum divided by the world size; floating
    tensors only), ``"max"``, ``"min"``; on bool tensors ``"lor"`` (or
    ``"max"``: true where any rank is true) and ``"land"`` (or ``"min"``: true
    where every rank is true).  Every rank must pass a tensor of the same
    shape and dtype and the same ``op``.  Every rank gets the same values.
    Arguments are checked on every rank first (one small allgather, see
    ``_agree``).
    """
    fn = "all_reduce"
    comm = _comm()
    MPI = _import_mpi()

    def check() -> tuple[Any, np.ndarray, bool]:
        _check_tensor(tensor, fn)
        mop = _mpi_op(op, tensor.dtype.kind, fn)
        _writable_check(tensor, fn)
        return (mop, *_host_buffer(tensor, fn))

    mop, buf, zc = _agree("all_reduce", op=op if isinstance(op, str) else None,
                          tensor=tensor, check=check, what=fn)
    if _SIZE > 1:
        _wait([comm.Iallreduce(MPI.IN_PLACE, buf, op=mop)], fn)
    if op == "mean":
        np.divide(buf, _SIZE, out=buf)
    _mark_written(tensor, buf, zc)
    return tensor


def broadcast(tensor: Tensor, root: int = 0) -> Tensor:
    """Overwrite ``tensor`` on every rank with rank ``root``'s values, in place;
    returns ``tensor``.  Shapes, dtypes and ``root`` must agree across ranks;
    arguments are checked on every rank first (``_agree``)."""
    fn = "broadcast"
    comm = _comm()
    size = _SIZE

    def check() -> tuple[np.ndarray, bool]:
        _check_tensor(tensor, fn)
        if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < size:
            raise ValueError(f"{fn}: root {root!r} is not a rank of a world of size {size}")
        _writable_check(tensor, fn)
        return _host_buffer(tensor, fn)

    r = root if isinstance(root, int) and not isinstance(root, bool) else -2
    buf, zc = _agree("broadcast", root=r, tensor=tensor, check=check, what=fn)
    if _SIZE > 1:
        _wait([comm.Ibcast(buf, root=root)], fn)
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

    send = _agree("all_gather", tensor=tensor, check=check, what=fn)
    shape = (_SIZE, *tensor.shape)
    if isinstance(tensor._value, np.ndarray):  # CPU backend: receive into an rtx-owned buffer
        recv = empty(shape, tensor.dtype)
        _wait([comm.Iallgather(send, recv)], fn)
        return Tensor._make(recv, tensor._ad)
    host = np.empty(shape, tensor.dtype)
    _wait([comm.Iallgather(send, host)], fn)
    return Tensor._make(tensor._ad.inner.from_numpy(host), tensor._ad)


def barrier() -> None:
    """Block until every rank has called ``barrier()`` (an agreement: ranks
    that are in another collective instead raise ``CollectiveMismatchError``)."""
    _agree("barrier", what="barrier")
