"""rtx's matmul: numpy's BLAS on one thread, the work split across rtx's threads.

numpy's BLAS (OpenBLAS in numpy's wheels, pthreads build) keeps its own pool of
threads, separate from rtx's OpenMP team.  After every multi-threaded call its
workers busy-wait (a ``sched_yield`` loop) for about 2^28 cycles (~0.1 s) before
they sleep, and libgomp's workers spin after every OpenMP region too.  A training
step alternates matmuls with rtx's OpenMP kernels every millisecond or so, so
neither pool ever sleeps and on a 2-core machine they fight for the cores: a
HetGAT epoch (30k papers, 2 threads) took 0.56 s with BLAS on 2 threads and 0.23 s
with BLAS on one thread, same code otherwise (docs/performance.md).  So inside
rtx's matmul BLAS runs single-threaded -- its workers are never woken -- and rtx
splits a large matmul across its own threads instead (``CpuBackend.matmul``).

``SINGLE_THREADED_BLAS`` is that scope.  BLAS thread counts are process-wide
(OpenBLAS's pthreads build has no per-thread setting that works), so the scope
is reference-counted: the first rtx matmul to enter sets every BLAS library
threadpoolctl finds (OpenBLAS, MKL) to one thread, the last to leave restores
the user's setting.  A numpy matmul the user runs in another thread at that
moment runs on one thread too; nothing else changes.  Without threadpoolctl, or
with a BLAS it cannot set, the scope does nothing (rtx then runs as before).

A BLAS can be loaded after rtx's first look (``import scipy.linalg`` brings its
own OpenBLAS beside numpy's).  Such a load comes with an import, so an
outermost scope that sees ``sys.modules`` grown since the last look asks
threadpoolctl again (a few milliseconds, once per batch of imports; a training
loop imports nothing and pays one ``len``).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from .._kernels import gemm_bind, gemm_split, gemm_unbind, narrow_available, narrow_tn

# Below this many multiply-adds OpenBLAS runs on the calling thread anyway
# (its GEMM_MULTITHREAD_THRESHOLD), so no scope is needed.
BLAS_THREADED_MIN = 1 << 16

_lock = threading.Lock()
_libs: list[tuple[Any, Any]] | None = None   # (get, set) per library; [] when none
_seen = -1                                    # len(sys.modules) at the last look
_depth = 0
_held: list[tuple[Any, Any]] = []             # the libraries the open scope holds
_saved: list[int] = []                        # and their thread counts before it

# getter / setter names by threadpoolctl's internal_api, tried with the symbol
# affixes of the scipy-openblas builds numpy's wheels ship (scipy_..._64_ / 64_)
_NAMES = {
    "openblas": ("openblas_get_num_threads", "openblas_set_num_threads"),
    "mkl": ("MKL_Get_Max_Threads", "MKL_Set_Num_Threads"),
}
_AFFIXES = (("", ""), ("scipy_", "64_"), ("scipy_", "_64"), ("scipy_", ""), ("", "64_"))


def _find() -> list[tuple[Any, Any]]:
    if os.environ.get("RTX_BLAS_THREADS", "").lower() == "keep":
        return []      # opt-out: leave BLAS's threading alone
    try:
        from threadpoolctl import ThreadpoolController
        libs = ThreadpoolController().select(user_api="blas").lib_controllers
    except Exception:  # noqa: BLE001 - not installed, or a platform it cannot read
        return []
    found = []
    openblas: list[tuple[str, str, str]] = []   # (path, prefix, suffix)
    for lib in libs:
        names = _NAMES.get(lib.internal_api)
        if names is None:
            continue
        try:
            dll = ctypes.CDLL(lib.filepath)
        except OSError:
            continue
        for pre, suf in _AFFIXES:
            get = getattr(dll, f"{pre}{names[0]}{suf}", None)
            put = getattr(dll, f"{pre}{names[1]}{suf}", None)
            if get is not None and put is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                found.append((get, put))
                if lib.internal_api == "openblas":
                    openblas.append((lib.filepath, pre, suf))
                break
    if found:
        _OPENBLAS[:] = openblas
        if _numpy_openblas(openblas) != _team_lib:   # bound once, not per look
            _bind_team_gemm(openblas)
    return found


# ------------------------------------------------- the pieces in rtx's team
# A split matmul's pieces run as calls of numpy's own OpenBLAS ?gemm, made by
# rtx's OpenMP threads (``gemm_split``, rtx/_gemm.pxi) rather than by Python
# threads calling np.matmul: the OpenMP workers that spin after each kernel are
# the ones that take the pieces (libgomp's default spin, rtx/_spin.py; with torch
# imported first, rtx's kernels share torch's libgomp), and a call is one
# OpenMP region instead of a hand-off to a thread pool.  Bound only to numpy's
# OpenBLAS (so each piece has np.matmul's bits), only while BLAS is held at one
# thread (the pieces run inside SINGLE_THREADED_BLAS), and only after a small
# product through it equals np.matmul's bit for bit; else the Python threads run
# the pieces, as before.  ``RTX_TEAM_GEMM=0`` turns it off.
TEAM_GEMM = False
_OPENBLAS: list[tuple[str, str, str]] = []    # what _find saw: (path, prefix, suffix)
_team_lib: tuple[str, str, str] | None = None  # the one _bind_team_gemm chose last


def _numpy_openblas(openblas: list[tuple[str, str, str]]) -> tuple[str, str, str] | None:
    """The OpenBLAS numpy itself links (its wheel's ``numpy.libs`` / ``.dylibs``),
    else the only OpenBLAS loaded, else None."""
    root = os.path.dirname(os.path.dirname(os.path.realpath(np.__file__)))
    own = [o for o in openblas
           if os.path.realpath(o[0]).startswith(os.path.join(root, "numpy"))]
    if len(own) == 1:
        return own[0]
    return openblas[0] if len(openblas) == 1 else None


def _bind_team_gemm(openblas: list[tuple[str, str, str]]) -> None:
    global TEAM_GEMM, _team_lib
    TEAM_GEMM = False
    if os.environ.get("RTX_TEAM_GEMM", "1") == "0":
        return
    lib = _team_lib = _numpy_openblas(openblas)
    if lib is None or not gemm_bind(*lib):
        return
    # a product whose pieces are real GEMMs, checked bit for bit against np.matmul
    # on the same pieces (a wrong integer width or symbol would show here)
    ok = True
    for dt in (np.float32, np.float64):
        a = (np.arange(24 * 5, dtype=dt).reshape(24, 5) % 7 - 3) / 4
        b = (np.arange(5 * 3, dtype=dt).reshape(5, 3) % 5 - 2) / 3
        out = np.full((24, 3), np.nan, dt)
        # (small enough that OpenBLAS runs it on the calling thread: no scope)
        done = gemm_split(a, b, out, None, 2, False, 1)
        want = np.concatenate([a[:12] @ b, a[12:] @ b])
        ok = ok and bool(done) and np.array_equal(out, want)
    if ok:
        TEAM_GEMM = True
    else:
        gemm_unbind()


def _libraries() -> list[tuple[Any, Any]]:
    """The BLAS libraries to hold, looked up again when modules were imported
    since the last look (called with ``_lock`` held, outside any scope)."""
    global _libs, _seen
    if _libs is None or len(sys.modules) != _seen:
        _libs = _find()
        _seen = len(sys.modules)   # after the look (threadpoolctl's own imports)
    return _libs


class _SingleThreadedBlas:
    """``with SINGLE_THREADED_BLAS:`` BLAS on one thread inside the block
    (reference-counted across threads; a no-op when no BLAS can be set)."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth, _held, _saved
        with _lock:
            if _depth == 0:
                _held = _libraries()
                _saved = [get() for get, _ in _held]
                for (_, put), n in zip(_held, _saved, strict=True):
                    if n != 1:
                        put(1)
            _depth += 1

    def __exit__(self, *exc: object) -> None:
        global _depth
        with _lock:
            _depth -= 1
            if _depth == 0:
                _restore()


def _restore() -> None:
    for (_, put), n in zip(_held, _saved, strict=True):
        if n != 1:
            put(n)


SINGLE_THREADED_BLAS = _SingleThreadedBlas()


# ------------------------------------------------------------------ the split
# A matmul of at least SPLIT_MIN multiply-adds is cut into at most MAX_CHUNKS
# pieces along a dimension, chosen from the SHAPES alone (never from the thread
# count, so results are the same for any number of threads): the rows of ``a``
# when there are enough (each piece a smaller GEMM writing its own rows of the
# output), else the inner dimension K (partial products summed in a fixed
# order; the backward's ``x.T @ grad``).  The pieces are spread over
# ``get_num_threads()`` threads: the caller's and rtx's worker threads, each
# running numpy's matmul (which releases the GIL) with single-threaded BLAS.
SPLIT_MIN = 1 << 21
MAX_CHUNKS = 8
MIN_ROWS = 512      # rows per piece (a row split)
MIN_INNER = 2048    # inner length per piece (a K split)

_pool: ThreadPoolExecutor | None = None


def _workers() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=255, thread_name_prefix="rtx-matmul")
    return _pool


def _pieces(n: int, step_min: int) -> list[tuple[int, int]]:
    k = min(MAX_CHUNKS, n // step_min)
    if k < 2:
        return []
    bounds = [n * i // k for i in range(k + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def matmul_2d(a: np.ndarray, b: np.ndarray, out: np.ndarray, threads: int,
              scratch: Any) -> None:
    """``out[...] = a @ b`` for 2-D operands, split as described above.
    ``scratch(shape)`` allocates the K split's partial products."""
    m, k = a.shape
    n = b.shape[1]
    if m * k * n < BLAS_THREADED_MIN:
        np.matmul(a, b, out=out)
        return
    if _narrow(a, b, out, m, k, n):
        inner = _pieces(k, MIN_INNER) if m * k * n >= SPLIT_MIN else []
        bounds = np.array([0] + [k1 for _, k1 in inner] if inner else [0, k], np.int64)
        narrow_tn(a.T, b, bounds, out, threads)
        return
    with SINGLE_THREADED_BLAS:
        rows = _pieces(m, MIN_ROWS) if m * k * n >= SPLIT_MIN else []
        inner = [] if rows or m * k * n < SPLIT_MIN else _pieces(k, MIN_INNER)
        if not rows and not inner:
            np.matmul(a, b, out=out)
            return
        team = TEAM_GEMM and a.dtype == b.dtype == out.dtype and a.dtype in _NARROW_DTYPES
        if rows:
            if team and gemm_split(a, b, out, None, len(rows), False, threads):
                return
            tasks = [(a[r0:r1], b, out[r0:r1]) for r0, r1 in rows]
            _run(tasks, threads)
            return
        rest = scratch((len(inner) - 1, m, n))
        if not (team and gemm_split(a, b, out, rest, len(inner), True, threads)):
            parts = [out, *rest]
            _run([(a[:, k0:k1], b[k0:k1], p)
                  for (k0, k1), p in zip(inner, parts, strict=True)], threads)
        for p in rest:
            np.add(out, p, out=out)


# ``x.T @ g`` with few columns in g (a projection onto a few columns: a GAT layer's
# attention logits, whose weight gradient is ``[N, F].T @ [N, heads]``) runs in
# rtx's narrow kernel (rtx/_narrow.pxi) instead of BLAS, where it wins (measured
# on 2 threads, ms rtx / BLAS split, float32: [100000, 64].T @ [100000, n]:
# n = 2 0.69 / 2.30, n = 4 0.87 / 2.40, n = 8 1.39 / 1.28; [100000, 16], n = 8:
# 0.27 / 0.81; [20000, 1000], n = 1: 1.97 / 1.31; float64 alike): g of 2 to 4
# columns, one column and at most NARROW_ONE_COLS rows of x.T, or up to 8
# columns and at most NARROW_WIDE_COLS rows.  K is cut into the BLAS split's
# pieces and their partials summed in order, so the bits depend on shapes alone.
NARROW_ONE_COLS = 512
NARROW_WIDE_COLS = 32
_NARROW_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_HAVE_NARROW = narrow_available()


def _narrow(a: np.ndarray, b: np.ndarray, out: np.ndarray, m: int, k: int, n: int) -> bool:
    """Whether ``a @ b`` takes the narrow kernel: ``a`` is ``x.T`` with x's rows
    contiguous, ``b``'s rows contiguous, one float dtype, a long inner dimension
    and few columns in ``b`` (above)."""
    if not _HAVE_NARROW or k < MIN_INNER or not (
            2 <= n <= 4 or (n == 1 and m <= NARROW_ONE_COLS)
            or (n <= 8 and m <= NARROW_WIDE_COLS)):
        return False
    dt = a.dtype
    if dt not in _NARROW_DTYPES or b.dtype != dt or out.dtype != dt:
        return False
    isz = dt.itemsize
    sa, sb = a.strides, b.strides
    return (sa[0] == isz and sb[1] == isz and sa[1] >= 0 and sb[0] >= 0
            and sa[1] % isz == 0 and sb[0] % isz == 0 and out.flags.c_contiguous)


def _run(tasks: list[tuple[np.ndarray, np.ndarray, np.ndarray]], threads: int) -> None:
    """The matmul tasks on ``threads`` threads (task i on thread i % threads)."""
    t = max(1, min(threads, len(tasks)))
    groups = [tasks[i::t] for i in range(t)]
    futures: list[Future[None]] = []
    try:
        for g in groups[1:]:
            try:
                futures.append(_workers().submit(_group, g))
            except RuntimeError:   # the pool is shut down (interpreter exit): run here
                _group(g)
        _group(groups[0])
    finally:
        for f in futures:
            f.result()


def _group(tasks: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
    for x, y, o in tasks:
        np.matmul(x, y, out=o)


def blas_controlled() -> bool:
    """Whether rtx can run BLAS single-threaded here (threadpoolctl found a BLAS
    whose thread count it can set)."""
    with _lock:
        return bool(_libs if _depth else _libraries())


def _after_fork_in_child() -> None:
    # the forking thread may have been inside a scope: restore BLAS in the child
    global _depth, _lock, _pool
    if _depth:
        _restore()
    _depth = 0
    _lock = threading.Lock()
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
