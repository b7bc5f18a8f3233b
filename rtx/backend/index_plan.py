"""Checked index plans: indices validated once, with a cached CSR grouping.

``IndexPlan(indices, num_rows)`` takes a private, read-only, rtx-owned copy of
1-D int32/int64 indices after checking every one is in ``[0, num_rows)``.  The
first scatter-style kernel that needs it computes the CSR grouping (a stable
counting sort: ``perm[ptr[r]:ptr[r+1]]`` are the positions of index ``r`` in
increasing order) and the plan keeps it; later calls reuse it.  The lazy
initialisation is thread-safe (a lock; the grouping is a pure function of the
indices, so whoever builds it builds the same one).

``EdgeIndex(edge_index, num_src, num_dst)`` holds a ``[2, E]`` edge list (row 0
source, row 1 target, as PyG) as two plans: ``src`` (over ``num_src`` rows) and
``dst`` (over ``num_dst`` rows), each with its own lazily cached grouping.

Kernels given a plan need no re-validation: nobody can change its indices.
Ops given raw indices wrap them in a temporary plan (nothing is cached across
calls).

The plan's own arrays never leave it.  A read-only numpy array is no
protection: numpy's ``__dlpack__`` exports it (a versioned capsule flagged
read-only) and ``torch.from_dlpack`` / ``torch.from_numpy`` ignore the flag,
handing out a writable tensor over the memory the kernels index with.  So the
public accessors (``indices``, ``csr()``, ``counts()``) return fresh read-only
copies in plain numpy memory; rtx's kernels use the private ``_idx`` and
``_grouping()``.
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any

import numpy as np

from .._kernels import Storage, csr_build, is_index_snapshot, snapshot_indices
from ._index_check import _index_error, as_index_array


def _owned(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array in an rtx ``Storage`` (counted by memory_stats)."""
    dt = np.dtype(dtype)
    try:
        storage = Storage(math.prod(shape) * dt.itemsize, False)
    except OverflowError:  # more bytes than a Py_ssize_t holds
        raise MemoryError(f"rtx: an index grouping of shape {shape} is too large") from None
    return np.ndarray(shape, dt, storage)  # type: ignore[arg-type]


def _public_copy(a: np.ndarray) -> np.ndarray:
    """A read-only copy of a plan's private array, in plain numpy memory (never an
    ``IndexSnapshot``: the backends trust snapshots without copying them)."""
    out = np.array(a, copy=True)
    out.flags.writeable = False
    return out


def _check_rows(num_rows: Any, op: str, what: str = "num_rows") -> int:
    if isinstance(num_rows, (bool, np.bool_)):
        raise TypeError(f"{op}(): {what} must be an int, got bool")
    try:
        import operator

        n = operator.index(num_rows)
    except TypeError:
        raise TypeError(f"{op}(): {what} must be an int, got {type(num_rows).__name__}") from None
    if n < 0:
        raise ValueError(f"{op}(): {what} must be >= 0, got {n}")
    return n


def _host_indices(indices: Any) -> Any:
    """Tensors (anything with ``.numpy()`` that is not an ndarray) as numpy arrays."""
    if not isinstance(indices, np.ndarray) and hasattr(indices, "numpy"):
        return indices.numpy()
    return indices


class IndexPlan:
    """Indices checked once against ``num_rows``, with a lazily cached CSR grouping."""

    __slots__ = ("_idx", "_num_rows", "_csr", "_lock", "__weakref__")
    _idx: np.ndarray
    _num_rows: int
    _csr: tuple[np.ndarray, np.ndarray] | None
    _lock: threading.Lock

    def __init__(self, indices: Any, num_rows: int, *, _op: str = "IndexPlan") -> None:
        n = _check_rows(num_rows, _op)
        if isinstance(indices, IndexPlan):
            indices = indices._idx
        arr = as_index_array(_host_indices(indices), _op)
        # an immutable snapshot (its buffer refuses writers), checked after the copy
        own, bad = snapshot_indices(arr, min(n, sys.maxsize))
        if bad >= 0:
            raise _index_error(_op, bad, int(own[bad]), n)
        self._idx = own
        self._num_rows = n
        self._csr = None
        self._lock = threading.Lock()

    @classmethod
    def _trusted(cls, indices: np.ndarray, num_rows: int,
                 csr: tuple[np.ndarray, np.ndarray] | None = None) -> IndexPlan:
        """A plan over indices an rtx kernel produced, without the copy and the range
        check of the constructor.  Private.

        Safe because what those two buy is already true: the copy makes the indices
        immutable, and here they must already live in an ``IndexSnapshot`` (the
        buffer refuses writers; checked below); the check proves every index in
        ``[0, num_rows)``, and the caller's kernel proves it by construction (the
        neighbour sampler's local ids are positions in the ``n_id`` it wrote
        itself).  ``csr``, when given, is cached as the grouping: it must be what
        ``csr()`` would compute (the sampler's edges come out sorted by
        destination, so it is their pointers and the identity permutation) and
        must be snapshots too.  Only the O(1) properties are checked here (kind of
        memory, dtype, lengths); the range and the grouping are the caller's proof,
        which tests/test_sampler.py checks against a brute-force reference.
        """
        if not is_index_snapshot(indices):
            raise TypeError("IndexPlan._trusted: the indices must be an rtx index snapshot")
        n = _check_rows(num_rows, "IndexPlan._trusted")
        if csr is not None:
            ptr, perm = csr
            if not (is_index_snapshot(ptr) and is_index_snapshot(perm)
                    and ptr.dtype == np.int64 and perm.dtype == np.int64):
                raise TypeError("IndexPlan._trusted: the grouping must be int64 snapshots")
            if len(ptr) != n + 1 or len(perm) != len(indices):
                raise ValueError("IndexPlan._trusted: the grouping does not match the indices")
        self = cls.__new__(cls)
        self._idx = indices
        self._num_rows = n
        self._csr = csr
        self._lock = threading.Lock()
        return self

    @property
    def indices(self) -> np.ndarray:
        """A read-only copy of the checked indices (int32/int64).  Writing to it by
        any route (DLPack, ``torch.from_numpy``) never reaches the plan."""
        return _public_copy(self._idx)

    @property
    def num_rows(self) -> int:
        """The row count every index was checked against."""
        return self._num_rows

    @property
    def dtype(self) -> np.dtype:
        return self._idx.dtype

    def __len__(self) -> int:
        return int(self._idx.shape[0])

    @property
    def is_grouped(self) -> bool:
        """Whether the CSR grouping has been computed (and is cached)."""
        return self._csr is not None

    def csr(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ptr, perm)``: int64 row pointers (``num_rows + 1``) and the stable
        permutation grouping positions by index, as read-only copies.  The
        grouping itself is computed once and cached (private to the plan)."""
        ptr, perm = self._grouping()
        return _public_copy(ptr), _public_copy(perm)

    def _grouping(self) -> tuple[np.ndarray, np.ndarray]:
        """The cached ``(ptr, perm)`` the kernels index with (never handed out)."""
        csr = self._csr
        if csr is None:
            with self._lock:
                csr = self._csr
                if csr is None:
                    csr = self._csr = self._build()
        return csr

    def _build(self) -> tuple[np.ndarray, np.ndarray]:
        ptr = _owned((self._num_rows + 2,), np.int64)
        perm = _owned((len(self),), np.int64)
        csr_build(self._idx, ptr, perm)
        # kernels index with these without checks: keep immutable snapshots
        return (snapshot_indices(ptr[: self._num_rows + 1], -1)[0],
                snapshot_indices(perm, -1)[0])

    def counts(self) -> np.ndarray:
        """How many indices point at each row (``num_rows`` int64)."""
        ptr, _ = self._grouping()
        return np.diff(ptr)

    def __repr__(self) -> str:
        return (f"IndexPlan(len={len(self)}, num_rows={self._num_rows}, dtype={self.dtype}, "
                f"grouped={self.is_grouped})")

    # ------------------------------------------------------------- copying
    # A plan is immutable (its indices are a read-only private snapshot, its
    # grouping a pure function of them), so copies share it.  Pickling sends the
    # indices and the row count only: unpickling runs the constructor, which
    # checks every index again (a pickle can be crafted), and the grouping is
    # rebuilt when first needed.  The lock never travels.
    def __copy__(self) -> IndexPlan:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> IndexPlan:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (IndexPlan, (np.array(self._idx, copy=True), self._num_rows))

    def __setstate__(self, state: Any) -> None:
        """A pickle that builds the object and then sets its slots (not what
        ``__reduce__`` writes): the indices are checked as the constructor does."""
        slots = state[1] if isinstance(state, tuple) and len(state) == 2 else state
        if not isinstance(slots, dict) or not {"_idx", "_num_rows"} <= set(slots):
            raise TypeError("IndexPlan: cannot restore from this state (expected the "
                            "indices and the row count)")
        IndexPlan.__init__(self, slots["_idx"], slots["_num_rows"])


class EdgeIndex:
    """A ``[2, E]`` edge list (row 0 source, row 1 target) as two checked plans.

    ``EdgeIndex(edge_index, num_src, num_dst=None)``: sources are checked
    against ``num_src`` and targets against ``num_dst`` (default ``num_src``).
    ``src`` / ``dst`` are the ``IndexPlan`` s; the target plan's grouping drives
    message passing, the source plan's its gradient.
    """

    __slots__ = ("src", "dst", "__weakref__")
    src: IndexPlan
    dst: IndexPlan

    def __init__(self, edge_index: Any, num_src: int, num_dst: int | None = None, *,
                 _op: str = "EdgeIndex") -> None:
        op = _op
        ns = _check_rows(num_src, op, "num_src")
        nd = ns if num_dst is None else _check_rows(num_dst, op, "num_dst")
        if isinstance(edge_index, EdgeIndex):
            src, dst = edge_index.src._idx, edge_index.dst._idx
        else:
            ei = _host_indices(edge_index)
            if not isinstance(ei, np.ndarray):
                try:
                    ei = np.asarray(ei)
                except (ValueError, TypeError) as exc:
                    raise TypeError(
                        f"{op}(): edge_index must be an int [2, E] array ({exc})") from None
            if ei.ndim != 2:
                raise TypeError(
                    f"{op}(): edge_index must be 2-D [2, E], got shape {tuple(ei.shape)}")
            if ei.shape[0] != 2:
                raise ValueError(
                    f"{op}(): edge_index must have 2 rows (source, target), got shape "
                    f"{tuple(ei.shape)}")
            if ei.shape[1] == 0 and ei.dtype.kind == "f":
                ei = ei.astype(np.int64)
            src, dst = ei[0], ei[1]
        self.src = IndexPlan(src, ns, _op=f"{op}: edge_index[0] (sources)")
        self.dst = IndexPlan(dst, nd, _op=f"{op}: edge_index[1] (targets)")

    @classmethod
    def _trusted(cls, src: IndexPlan, dst: IndexPlan) -> EdgeIndex:
        """An edge index over two plans built by ``IndexPlan._trusted`` (or checked
        ones), without copying them again.  Private (see ``IndexPlan._trusted``)."""
        if not (isinstance(src, IndexPlan) and isinstance(dst, IndexPlan)):
            raise TypeError("EdgeIndex._trusted: src and dst must be IndexPlans")
        if len(src) != len(dst):
            raise ValueError("EdgeIndex._trusted: src and dst differ in length")
        self = cls.__new__(cls)
        self.src = src
        self.dst = dst
        return self

    @property
    def num_edges(self) -> int:
        return len(self.src)

    @property
    def num_src(self) -> int:
        return self.src.num_rows

    @property
    def num_dst(self) -> int:
        return self.dst.num_rows

    def __repr__(self) -> str:
        return (f"EdgeIndex(num_edges={self.num_edges}, num_src={self.num_src}, "
                f"num_dst={self.num_dst})")

    # ------------------------------------------------------------- copying
    # Immutable like its plans: copies share it; a pickle holds both plans'
    # indices and row counts, and unpickling checks them again (IndexPlan).
    def __copy__(self) -> EdgeIndex:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> EdgeIndex:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (EdgeIndex._restore, (self.src, self.dst))

    @classmethod
    def _restore(cls, src: Any, dst: Any) -> EdgeIndex:
        """Unpickling: from two plans (each re-checked by its own unpickling)."""
        if type(src) is not IndexPlan or type(dst) is not IndexPlan or len(src) != len(dst):
            raise TypeError("EdgeIndex: cannot restore from this state (expected two index "
                            "plans of the same length)")
        self = cls.__new__(cls)
        self.src, self.dst = src, dst
        return self

    def __setstate__(self, state: Any) -> None:
        slots = state[1] if isinstance(state, tuple) and len(state) == 2 else state
        if not isinstance(slots, dict) or not {"src", "dst"} <= set(slots):
            raise TypeError("EdgeIndex: cannot restore from this state")
        src, dst = slots["src"], slots["dst"]
        if type(src) is not IndexPlan or type(dst) is not IndexPlan or len(src) != len(dst):
            raise TypeError("EdgeIndex: cannot restore from this state (expected two index "
                            "plans of the same length)")
        self.src, self.dst = src, dst


def as_plan(indices: Any, num_rows: int, op: str, length: int | None = None) -> IndexPlan:
    """``indices`` as a checked plan over ``num_rows`` (a given plan is reused
    when it was checked against the same row count); ``length``: required len."""
    if isinstance(indices, IndexPlan):
        n = _check_rows(num_rows, op)
        if indices.num_rows != n:
            raise ValueError(
                f"{op}(): the IndexPlan was checked against {indices.num_rows} rows, "
                f"but this call needs {n}")
        plan = indices
    else:
        plan = IndexPlan(indices, num_rows, _op=op)
    if length is not None and len(plan) != length:
        raise ValueError(f"{op}(): len(index) = {len(plan)} must equal {length}")
    return plan


def as_edge_index(edge_index: Any, num_src: int, num_dst: int, op: str) -> EdgeIndex:
    """``edge_index`` as an ``EdgeIndex`` over (num_src, num_dst), reusing a given one."""
    if isinstance(edge_index, EdgeIndex):
        if edge_index.num_src != num_src or edge_index.num_dst != num_dst:
            raise ValueError(
                f"{op}(): the EdgeIndex was built for {edge_index.num_src} source and "
                f"{edge_index.num_dst} target nodes, but this call has {num_src} and {num_dst}")
        return edge_index
    return EdgeIndex(edge_index, num_src, num_dst, _op=op)
