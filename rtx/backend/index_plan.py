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
The public faces turn raw indices into a plan once per call (``as_plan``);
the rules and backends take only plans and never check again.  A raw
``edge_index`` passed on every forward (as PyTorch code does) is cached
(``as_edge_index``): the same edges again cost a comparison with the cached
plan's private copy (no check, no copy, no grouping), see ``_RawEdgeCache``.
``EdgeIndex.with_self_loops()`` is cached on the plan, as PyG caches a rowptr.

The plan's own arrays never leave it.  A read-only numpy array is no
protection: numpy's ``__dlpack__`` exports it (a versioned capsule flagged
read-only) and ``torch.from_dlpack`` / ``torch.from_numpy`` ignore the flag,
handing out a writable tensor over the memory the kernels index with.  So the
public accessors (``indices``, ``csr()``, ``counts()``) return fresh read-only
copies in plain numpy memory; rtx's kernels use the private ``_idx`` and
``_grouping()``.
"""

from __future__ import annotations

import functools
import math
import sys
import threading
import weakref
from typing import Any, NamedTuple

import numpy as np

from .._dtypes import check_rows
from .._kernels import (
    Storage,
    count_descents,
    csr_build,
    first_out_of_bounds,
    is_index_snapshot,
    memeq,
    snapshot_indices,
)
from ._index_check import _index_error, as_index_array, snapshot_threads


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


_check_rows = check_rows  # the one row-count check (rtx._dtypes)


def _host_indices(indices: Any) -> Any:
    """Tensors (anything with ``.numpy()`` that is not an ndarray) as numpy arrays."""
    if not isinstance(indices, np.ndarray) and hasattr(indices, "numpy"):
        return indices.numpy()
    return indices


class IndexPlan:
    """Indices checked once against ``num_rows``, with a lazily cached CSR grouping."""

    __slots__ = ("_idx", "_num_rows", "_csr", "_ranks", "_descents", "_lock", "_transient",
                 "_idx32", "__weakref__")
    _idx: np.ndarray
    _idx32: np.ndarray | None   # _narrow_idx's cached int32 copy
    _num_rows: int
    _csr: tuple[np.ndarray, np.ndarray] | None
    _ranks: np.ndarray | None   # the grouping's inverse permutation (_grouping_ranks)
    _descents: int | None  # how many i have idx[i] < idx[i - 1] (is_ordered, _is_sorted)
    _lock: threading.Lock
    # made by a face from raw indices for one call (and its backward): a backend
    # may skip building the grouping (the CPU index_add's group-free path)
    _transient: bool

    def __init__(self, indices: Any, num_rows: int, *, _op: str = "IndexPlan") -> None:
        n = _check_rows(num_rows, _op)
        if isinstance(indices, IndexPlan):
            indices = indices._idx
        self._init(as_index_array(_host_indices(indices), _op), n, _op)

    def _init(self, arr: np.ndarray, n: int, op: str) -> None:
        """The one bounds check: an immutable snapshot of ``arr`` (its buffer refuses
        writers), checked after the copy, so no other thread can change what was
        checked."""
        own, bad = snapshot_indices(arr, min(n, sys.maxsize), snapshot_threads(arr.shape[0]))
        if bad >= 0:
            raise _index_error(op, bad, int(own[bad]), n)
        self._idx = own
        self._num_rows = n
        self._csr = None
        self._ranks = None
        self._descents = None
        self._lock = threading.Lock()
        self._transient = False
        self._idx32 = None

    @classmethod
    def _from_array(cls, arr: np.ndarray, n: int, op: str) -> IndexPlan:
        """A plan of ``arr`` (from ``as_index_array``) over a checked row count ``n``."""
        self = cls.__new__(cls)
        self._init(arr, n, op)
        return self

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
        itself; ``EdgeIndex.with_self_loops`` keeps a subset of checked indices and
        appends ``arange(min(num_src, num_dst))``).  ``csr``, when given, is cached
        as the grouping: it must be what ``csr()`` would compute (the sampler's
        edges come out sorted by destination, so it is their pointers and the
        identity permutation) and must be snapshots too.  Only the O(1) properties
        are checked here (kind of memory, dtype, lengths); the range and the
        grouping are the caller's proof, which tests/graph/test_sampler.py checks against
        a brute-force reference.
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
        self._ranks = None
        self._descents = None
        self._lock = threading.Lock()
        self._transient = False
        self._idx32 = None
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

    def is_ordered(self) -> bool:
        """Whether the indices are (nearly) ascending: at most one descent per 16
        entries, as edges in target order are, with or without self-loops
        appended.  Then each group's entries lie (nearly) side by side and a
        kernel walking the grouping reads memory in order.  O(len) once, then
        cached (the indices never change)."""
        return 16 * self._descent_count() <= len(self)

    def _is_sorted(self) -> bool:
        """Whether the indices never descend (every group's entries side by side,
        the groups in index order).  Cached, as ``is_ordered``."""
        return self._descent_count() == 0

    def _descent_count(self) -> int:
        d = self._descents
        if d is None:
            d = self._descents = int(count_descents(self._idx))
        return d

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

    def _grouping_ranks(self) -> np.ndarray:
        """Cached: where each position lands in the grouping's order (the inverse
        of ``perm``: ``ranks[perm[i]] == i``), an int64 snapshot in ``[0, len)``."""
        r = self._ranks
        if r is None:
            _, perm = self._grouping()
            with self._lock:
                r = self._ranks
                if r is None:
                    r = _owned((len(self),), np.int64)
                    r[perm] = np.arange(len(self), dtype=np.int64)
                    r = self._ranks = snapshot_indices(r, -1)[0]
        return r

    def _narrow_idx(self) -> np.ndarray:
        """The indices as int32 when they are int64 and every one fits (``num_rows``
        at most 2**31), else ``_idx``: for kernels that stream the indices several
        times (the entry-order softmax reads them three times a call), half the
        bytes, the same values.  Cached, an immutable snapshot like ``_idx``.  A
        transient plan (one call's, from raw indices) keeps ``_idx``: converting
        would cost about what it saves."""
        if self._idx.dtype != np.int64 or self._num_rows > 2**31 or self._transient:
            return self._idx
        n = self._idx32
        if n is None:
            with self._lock:
                n = self._idx32
                if n is None:
                    n = self._idx32 = snapshot_indices(self._idx.astype(np.int32), -1)[0]
        return n

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


def _derived(arr: np.ndarray, n: int) -> IndexPlan:
    """A plan of indices derived from checked ones (each in ``[0, n)`` by
    construction): a private snapshot, no second bounds check."""
    arr = np.ascontiguousarray(arr)
    return IndexPlan._trusted(snapshot_indices(arr, -1, snapshot_threads(arr.shape[0]))[0], n)


def _plan_prefix(plan: IndexPlan, m: int, n: int, what: str) -> IndexPlan:
    """``plan``'s first ``m`` indices over ``n <= num_rows`` rows (``EdgeIndex.trim``)."""
    if m == len(plan) and n == plan.num_rows:
        return plan
    idx = plan._idx[:m]  # a view of the snapshot: still immutable
    if n < plan.num_rows:
        bad = first_out_of_bounds(idx, n)
        if bad >= 0:
            raise ValueError(f"EdgeIndex.trim: edge {bad} has {what[:-1]} {int(idx[bad])}, "
                             f"beyond the {n} kept {what}")
    csr = None
    if m == len(plan) and plan._csr is not None:
        ptr, perm = plan._csr  # every index is below n: the first n + 1 pointers
        csr = (ptr[: n + 1], perm)
    return IndexPlan._trusted(idx, n, csr)


class SelfLoops(NamedTuple):
    """What ``EdgeIndex.with_self_loops()`` did: ``kept`` (the positions, in the
    original edges, of those it kept, in order; a plan over their count),
    ``kept_dst`` (their targets, over ``num_dst``) and ``num_loops`` (appended
    after them)."""

    kept: IndexPlan
    kept_dst: IndexPlan
    num_loops: int


class EdgeIndex:
    """A ``[2, E]`` edge list (row 0 source, row 1 target) as two checked plans.

    ``EdgeIndex(edge_index, num_src, num_dst=None)``: sources are checked
    against ``num_src`` and targets against ``num_dst`` (default ``num_src``).
    ``src`` / ``dst`` are the ``IndexPlan`` s (read-only: the kernels index by
    them after one check, so they never change under a call); the target plan's
    grouping drives message passing, the source plan's its gradient.
    ``with_self_loops()`` gives (once, then from a cache on the plan) the edges
    GAT attends over.
    """

    __slots__ = ("_src", "_dst", "self_loop_info", "_loops", "_compact", "_order",
                 "_order_uses", "_lock", "__weakref__")
    _src: IndexPlan
    _dst: IndexPlan
    # for an EdgeIndex made by with_self_loops(): where its edges came from
    self_loop_info: SelfLoops | None
    _loops: EdgeIndex | None
    _compact: tuple[IndexPlan, EdgeIndex] | None
    # _in_group_order's arrays and request counts, by grouping side ("src", "dst")
    _order: dict[str, np.ndarray]
    _order_uses: dict[str, int]
    _lock: threading.Lock

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
                    f"{op}(): edge_index must have 2 rows (source, target), i.e. shape "
                    f"[2, E], got shape {tuple(ei.shape)}")
            if ei.shape[1] == 0 and ei.dtype.kind == "f":
                ei = ei.astype(np.int64)
            if ei.dtype.kind not in "iu":
                raise TypeError(f"{op}(): edge_index must be an integer [2, E] array, got "
                                f"dtype {ei.dtype}")
            src, dst = ei[0], ei[1]
        self._src = IndexPlan(src, ns, _op=f"{op}: edge_index[0] (sources)")
        self._dst = IndexPlan(dst, nd, _op=f"{op}: edge_index[1] (targets)")
        self._init_caches()

    @property
    def src(self) -> IndexPlan:
        """The sources' plan (checked against ``num_src``)."""
        return self._src

    @property
    def dst(self) -> IndexPlan:
        """The targets' plan (checked against ``num_dst``)."""
        return self._dst

    def _init_caches(self, info: SelfLoops | None = None) -> None:
        self.self_loop_info = info
        self._loops = None
        self._compact = None
        self._order = {}
        self._order_uses = {"src": 0, "dst": 0}
        self._lock = threading.Lock()

    @classmethod
    def _trusted(cls, src: IndexPlan, dst: IndexPlan,
                 info: SelfLoops | None = None) -> EdgeIndex:
        """An edge index over two plans built by ``IndexPlan._trusted`` (or checked
        ones), without copying them again.  Private (see ``IndexPlan._trusted``)."""
        if not (isinstance(src, IndexPlan) and isinstance(dst, IndexPlan)):
            raise TypeError("EdgeIndex._trusted: src and dst must be IndexPlans")
        if len(src) != len(dst):
            raise ValueError("EdgeIndex._trusted: src and dst differ in length")
        self = cls.__new__(cls)
        self._src = src
        self._dst = dst
        self._init_caches(info)
        return self

    def with_self_loops(self) -> EdgeIndex:
        """These edges without their self-loops, then one loop ``(i, i)`` per node
        ``i < min(num_src, num_dst)`` (PyG's ``remove_self_loops`` +
        ``add_self_loops``: what ``GATConv(add_self_loops=True)`` attends over).

        Built once (no second bounds check: every index comes from this plan or
        is a loop) and cached on this plan, so every layer and every forward on
        the same graph shares it.  Its ``self_loop_info`` says which of these
        edges it kept (``kept``: a plan of their positions, over ``num_edges``;
        ``kept_dst``: their targets, over ``num_dst``) and how many loops it added.
        """
        loops: EdgeIndex = self._cached("_loops", self._build_loops)
        return loops

    def _cached(self, slot: str, build: Any) -> Any:
        """``self.<slot>``, built by ``build()`` the first time (once, under the lock)."""
        value = getattr(self, slot)
        if value is None:
            with self._lock:
                value = getattr(self, slot)
                if value is None:
                    value = build()
                    setattr(self, slot, value)
        return value

    def _in_group_order(self, side: str) -> np.ndarray | None:
        """The other side's indices listed in ``side``'s grouping order (``"dst"``:
        each edge's source, the edges taken as the target grouping lists them;
        ``"src"``: each edge's target in the source grouping's order), so message
        passing reads them in order where it would read ``other[perm[k]]`` (a
        random read per edge; the same values, so the same bits).  Cached: an
        immutable snapshot, int32 when the other side has at most 2**31 rows.
        None while it would not pay: on the first request for ``side`` (a graph
        used for one call never pays for the copy: sampled mini-batches), and
        when ``side``'s indices are sorted (``perm`` is the identity).  Its values
        were checked as the other plan's, which never changes (``src`` / ``dst``
        are read-only; unpickling resets the caches with the plans)."""
        arr = self._order.get(side)
        if arr is not None:
            return arr
        plan, other = (self._dst, self._src) if side == "dst" else (self._src, self._dst)
        if plan._transient or len(plan) == 0 or plan._is_sorted():
            return None
        with self._lock:
            arr = self._order.get(side)
            if arr is not None:
                return arr
            self._order_uses[side] += 1
            if self._order_uses[side] < 2:
                return None
            _, perm = plan._grouping()
            arr = _owned((len(plan),), np.int32 if other._num_rows <= 2**31 else np.int64)
            np.take(other._idx, perm, out=arr)
            arr = self._order[side] = snapshot_indices(arr, -1)[0]
        return arr

    def _other_indices(self, side: str) -> tuple[np.ndarray, bool]:
        """``(indices, in_group_order)``: the other side's indices as the kernels
        walking ``side``'s grouping take them -- ``_in_group_order(side)``'s copy
        (read ``other[k]``) when there is one, else the other plan's own private
        array (read ``other[perm[k]]``); never handed out of the backend."""
        arr = self._in_group_order(side)
        if arr is not None:
            return arr, True
        return (self._src if side == "dst" else self._dst)._idx, False

    def compact_sources(self) -> tuple[IndexPlan, EdgeIndex]:
        """``(sources, edges)``: the distinct sources of these edges (ascending, a
        plan over ``num_src``) and these edges with each source renumbered to its
        position among them (over ``len(sources)`` sources; the same target plan,
        its grouping shared; the same ``self_loop_info``).  What a layer uses to
        transform only the source rows its edges read (a sampled layer's sources
        are often many more than its edges).  Built once (O(num_src + E), no
        second bounds check) and cached on this plan."""
        c: tuple[IndexPlan, EdgeIndex] = self._cached("_compact", self._build_compact)
        return c

    def _build_compact(self) -> tuple[IndexPlan, EdgeIndex]:
        src = self.src._idx
        mark = np.zeros(self.num_src, dtype=np.bool_)
        mark[src] = True
        uniq = np.flatnonzero(mark)
        pos = np.cumsum(mark, dtype=np.int64)
        pos -= 1
        local = pos[src]
        return (_derived(uniq, self.num_src),
                EdgeIndex._trusted(_derived(local, len(uniq)), self.dst, self.self_loop_info))

    def _build_loops(self) -> EdgeIndex:
        src, dst = self.src._idx, self.dst._idx
        n_loops = min(self.num_src, self.num_dst)
        kept = np.flatnonzero(src != dst)
        ar = np.arange(n_loops, dtype=np.int64)
        s = np.concatenate([src[kept].astype(np.int64, copy=False), ar])
        d_kept = dst[kept].astype(np.int64, copy=False)
        d = np.concatenate([d_kept, ar])
        info = SelfLoops(_derived(kept, self.num_edges), _derived(d_kept, self.num_dst),
                         n_loops)
        return EdgeIndex._trusted(_derived(s, self.num_src), _derived(d, self.num_dst), info)

    def trim(self, num_edges: int, num_src: int, num_dst: int) -> EdgeIndex:
        """The first ``num_edges`` edges over the first ``num_src`` sources and
        ``num_dst`` targets (PyG's ``trim_to_layer`` on one relation: a sampled
        batch's edges and nodes come hop by hop, so a layer's are prefixes).

        No copy: the plans share these indices; a plan whose edges and rows are
        all kept is this one's (its grouping too), and a target plan over all the
        edges reuses this one's grouping cut to ``num_dst`` rows.  Only the
        bound that shrank is checked (one pass over the kept indices):
        ``ValueError`` when a kept edge reaches beyond the kept nodes (the
        edges are not in hop order)."""
        m = check_rows(num_edges, "EdgeIndex.trim", "num_edges")
        ns = check_rows(num_src, "EdgeIndex.trim", "num_src")
        nd = check_rows(num_dst, "EdgeIndex.trim", "num_dst")
        if m > self.num_edges or ns > self.num_src or nd > self.num_dst:
            raise ValueError(f"EdgeIndex.trim: ({m}, {ns}, {nd}) exceeds this EdgeIndex's "
                             f"({self.num_edges} edges, {self.num_src} sources, "
                             f"{self.num_dst} targets)")
        if (m, ns, nd) == (self.num_edges, self.num_src, self.num_dst):
            return self
        return EdgeIndex._trusted(_plan_prefix(self.src, m, ns, "sources"),
                                  _plan_prefix(self.dst, m, nd, "targets"))

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
        return cls._trusted(src, dst)

    def __setstate__(self, state: Any) -> None:
        slots = state[1] if isinstance(state, tuple) and len(state) == 2 else state
        if not isinstance(slots, dict) or not {"src", "dst"} <= set(slots):
            raise TypeError("EdgeIndex: cannot restore from this state")
        src, dst = slots["src"], slots["dst"]
        if type(src) is not IndexPlan or type(dst) is not IndexPlan or len(src) != len(dst):
            raise TypeError("EdgeIndex: cannot restore from this state (expected two index "
                            "plans of the same length)")
        self._src, self._dst = src, dst
        self._init_caches()


def as_plan(indices: Any, num_rows: int, op: str, length: int | None = None,
            what: str | None = None) -> IndexPlan:
    """``indices`` as a checked plan over ``num_rows`` (a given plan is reused when
    it was checked against the same row count); ``length``: the length the op
    needs (``what``: whose, for the message).  Raw indices are converted, their
    length compared, then copied and bounds-checked once (``IndexPlan``)."""
    if isinstance(indices, IndexPlan):
        n = _check_rows(num_rows, op)
        if indices.num_rows != n:
            raise ValueError(
                f"{op}(): the IndexPlan was checked against {indices.num_rows} rows, "
                f"but this call needs {n}")
        if length is not None and len(indices) != length:
            raise ValueError(f"{op}(): len(indices) = {len(indices)} must equal "
                             f"{what or 'the data length'} = {length}")
        return indices
    n = _check_rows(num_rows, op)
    arr = as_index_array(_host_indices(indices), op)
    if length is not None and arr.shape[0] != length:
        raise ValueError(f"{op}(): len(indices) = {arr.shape[0]} must equal "
                         f"{what or 'the data length'} = {length}")
    plan = IndexPlan._from_array(arr, n, op)
    plan._transient = True
    return plan


def as_edge_index(edge_index: Any, num_src: int, num_dst: int, op: str) -> EdgeIndex:
    """``edge_index`` as an ``EdgeIndex`` over (num_src, num_dst): a given one is
    reused (its sizes must match); raw edges (a numpy array or an rtx tensor)
    come from the cache of checked edges while they are equal (see
    ``_RawEdgeCache``), else are checked once and cached."""
    if isinstance(edge_index, EdgeIndex):
        if edge_index.num_src != num_src or edge_index.num_dst != num_dst:
            raise ValueError(
                f"{op}(): the EdgeIndex was built for {edge_index.num_src} source and "
                f"{edge_index.num_dst} target nodes, but this call has {num_src} and {num_dst}")
        return edge_index
    return _RAW_EDGES.get(edge_index, num_src, num_dst, op)


def _same_values(row: np.ndarray, idx: np.ndarray) -> bool:
    """Whether a raw edge row holds exactly a plan's indices: ``memeq`` (a
    ``memcmp`` without the GIL and without temporaries) when the layouts agree,
    ``np.array_equal`` for any other dtype or a strided row."""
    if row.dtype == idx.dtype and row.flags.c_contiguous and idx.flags.c_contiguous:
        return bool(memeq(row, idx))
    return bool(np.array_equal(row, idx))


class _RawEdgeCache:
    """Checked ``EdgeIndex`` es of the raw edge arrays seen lately, so a raw
    ``edge_index`` passed on every forward is checked (and grouped, and given
    self-loops) once.

    Safety: a hit needs the SAME VALUES, compared with the cached plan's own
    private copy (``memeq``: no check, no copy, no grouping), so an
    array changed in place, a numpy array shared with a tensor
    (``rtx.from_numpy``) or a tensor written through a numpy / DLPack view is
    never mistaken for its old edges; an equal copy is a hit.  Lookup is by a
    fingerprint (dtype, E, the row counts and a few sampled values); an entry
    lives while the array (or tensor) it was made from does (a weak reference)
    and at most ``MAX`` entries are kept (the oldest go first).

    Thread-safe without holding a lock while comparing: the entries of a
    fingerprint are one immutable tuple, read once; a caller returns the plan
    of the entry it compared, so another thread replacing the tuple meanwhile
    (``memeq`` releases the GIL) cannot hand it a plan of other
    edges.  Inserts and evictions take ``_lock``.
    """

    # Enough for every relation of a many-relation graph passed raw on every
    # forward (60 relations thrashed a cache of 32: every forward re-checked and
    # re-grouped them all); an entry lives only while its array does, so the
    # bound matters only for arrays kept alive elsewhere.
    MAX = 256
    SAMPLES = 8

    def __init__(self) -> None:
        self._entries: dict[tuple[Any, ...], tuple[tuple[Any, EdgeIndex], ...]] = {}
        self._order: list[tuple[tuple[Any, ...], Any]] = []  # (key, ref) oldest first
        self._lock = threading.RLock()  # a weakref callback may run inside a locked block

    def _key(self, a: np.ndarray, ns: int, nd: int) -> tuple[Any, ...]:
        E = a.shape[1]
        pos = np.linspace(0, E - 1, min(E, self.SAMPLES)).astype(np.intp) if E else ()
        sample = tuple(a[:, pos].ravel().tolist()) if E else ()
        return (a.dtype.str, E, ns, nd, sample)

    def get(self, edge_index: Any, num_src: int, num_dst: int, op: str) -> EdgeIndex:
        ns = _check_rows(num_src, op, "num_src")
        nd = _check_rows(num_dst, op, "num_dst")
        a = _host_indices(edge_index)
        if (type(a) is not np.ndarray or a.ndim != 2 or a.shape[0] != 2
                or a.dtype.kind not in "iu"):
            return EdgeIndex(edge_index, ns, nd, _op=op)  # not cacheable: checked each time
        key = self._key(a, ns, nd)
        for _, ei in self._entries.get(key, ()):  # one read of one immutable tuple
            if _same_values(a[0], ei.src._idx) and _same_values(a[1], ei.dst._idx):
                return ei
        ei = EdgeIndex(a, ns, nd, _op=op)
        try:
            ref = weakref.ref(edge_index, functools.partial(self._drop, key))
        except TypeError:  # not weak-referenceable (a list): not cached
            return ei
        with self._lock:
            self._entries[key] = self._entries.get(key, ()) + ((ref, ei),)
            self._order.append((key, ref))
            while len(self._order) > self.MAX:
                k, r = self._order.pop(0)
                self._remove(k, r)
        return ei

    def _remove(self, key: tuple[Any, ...], ref: Any) -> None:
        kept = tuple(e for e in self._entries.get(key, ()) if e[0] is not ref)
        if kept:
            self._entries[key] = kept
        else:
            self._entries.pop(key, None)

    def _drop(self, key: tuple[Any, ...], ref: Any) -> None:
        """The array an entry was made from is gone: so is the entry."""
        with self._lock:
            self._remove(key, ref)
            self._order = [(k, r) for k, r in self._order if r is not ref]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._order.clear()

    def __len__(self) -> int:
        return len(self._order)


_RAW_EDGES = _RawEdgeCache()


class TypedEdges(NamedTuple):
    """Several relations' edges into one target type as one edge list
    (``typed_edges``).  ``edges``: over the relations' sources stacked in order
    (relation ``r``'s source ``j`` is row ``offsets[r] + j``) into the shared
    targets.  ``segments``: each edge's (target, relation) pair as
    ``target * R + r`` over ``R * num_dst`` rows -- the groups a per-relation
    softmax normalises over -- so a ``[num_dst, R * H]`` block of per-relation
    target values is, reshaped to ``[num_dst * R, H]``, indexed by them.  The
    edges are sorted by segment (stable: within a relation and target, in the
    relation's order), hence by target: both plans are in order."""

    edges: EdgeIndex
    segments: IndexPlan
    offsets: tuple[int, ...]


# parts[0] -> {ids of all parts: (weak references to them, their TypedEdges)}
_TYPED: weakref.WeakKeyDictionary[EdgeIndex, dict[tuple[int, ...], Any]] = \
    weakref.WeakKeyDictionary()
_TYPED_LOCK = threading.Lock()


def typed_edges(parts: list[EdgeIndex]) -> TypedEdges:
    """The relations ``parts`` (each an ``EdgeIndex`` into the same ``num_dst``
    targets) as one typed edge list (``TypedEdges``).  Built from the checked
    plans without a second bounds check (each stacked source is below its
    relation's offset plus its ``num_src``; each segment below ``R * num_dst``),
    ordered by the segments' grouping (a stable counting sort), and cached while
    the parts live."""
    if not parts:
        raise ValueError("typed_edges: no relations")
    nd = parts[0].num_dst
    for p in parts:
        if not isinstance(p, EdgeIndex):
            raise TypeError(f"typed_edges: expected EdgeIndex parts, got {type(p).__name__}")
        if p.num_dst != nd:
            raise ValueError(f"typed_edges: the relations have {p.num_dst} and {nd} targets")
    key = tuple(id(p) for p in parts)
    with _TYPED_LOCK:
        hit = _TYPED.get(parts[0], {}).get(key)
        if hit is not None and all(r() is p for r, p in zip(hit[0], parts, strict=True)):
            return hit[1]
    R = len(parts)
    offsets, total = [], 0
    for p in parts:
        offsets.append(total)
        total += p.num_src
    # int32 ids when every stacked source and segment fits (half the traffic)
    it = np.int32 if max(total, R * nd) <= np.iinfo(np.int32).max else np.int64
    src = np.concatenate([p.src._idx.astype(it, copy=False) + it(off)
                          for p, off in zip(parts, offsets, strict=True)])
    seg = np.concatenate([p.dst._idx.astype(it, copy=False) * it(R) + it(r)
                          for r, p in enumerate(parts)])
    # the segments' grouping (a stable counting sort) orders the edges
    ptr, perm = _derived(seg, R * nd)._grouping()
    seg = seg[perm]
    edges = EdgeIndex._trusted(_derived(src[perm], total), _derived(seg // it(R), nd))
    ident = snapshot_indices(np.arange(len(seg), dtype=np.int64), -1)[0]
    segments = IndexPlan._trusted(snapshot_indices(seg, -1)[0], R * nd, (ptr, ident))
    typed = TypedEdges(edges, segments, tuple(offsets))
    with _TYPED_LOCK:
        entries = _TYPED.setdefault(parts[0], {})
        if len(entries) >= 8:   # parts[0] met with ever new partners: keep the latest
            entries.pop(next(iter(entries)))
        # one entry per distinct combination while parts[0] lives; a dead part's
        # entry is replaced at its next lookup (a new object, a new id)
        entries[key] = ([weakref.ref(p) for p in parts], typed)
    return typed
