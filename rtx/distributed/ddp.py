"""``DistributedDataParallel``: data-parallel training over MPI.

What it does, and when:

* **construction**: checks that every rank wraps the same parameter list
  (names, shapes, dtypes; one small allgather), then broadcasts rank 0's
  parameters and buffers to every rank, so all ranks start from the same weights.
* **after each** ``backward()`` (outside ``no_sync()``): gradients are averaged
  across ranks.  Parameters are grouped, in reverse registration order (the
  order their gradients come out of a backward pass), into buckets of at most
  ``bucket_cap_mb`` MiB of one dtype; each bucket is packed into one flat
  buffer and its non-blocking ``Iallreduce`` is started at once, so the
  reduction of a bucket overlaps the packing of the next ones; then the
  buckets are waited for in order and unpacked (divided by the world size)
  into each ``.grad``.

  rtx's autograd engine accumulates leaf gradients when the backward walk has
  finished (a leaf's gradient is only known to be complete then), so the
  all-reduce starts from a post-backward hook (``rtx.autograd.graph.
  register_post_backward_hook``) rather than per parameter during the walk:
  communication overlaps packing, not the backward computation itself.
* gradients are **identical on every rank**: every rank reduces the same
  buffers with the same MPI reduction, then divides by the same world size.
  (Sums of two values are bitwise commutative; MPICH's allreduce algorithms —
  recursive doubling, reduce-scatter + allgather — hand every rank the same
  result; ``check_consistency()`` verifies it.)
* a parameter whose gradient is ``None`` on some ranks counts as zero there;
  one that has no gradient on any rank keeps ``.grad = None``.
* **row-sparse gradients** (``Embedding(sparse=True)``, for ``SparseAdam``) stay
  sparse: every rank's rows and values are gathered, summed per row in rank order
  and divided by the world size (the union of the ranks' rows; PyTorch's DDP
  gathers sparse gradients the same way), identical bits on every rank.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any, cast

import numpy as np

from .._autodiff.sparse import RowSparseGrad
from ..autograd.grad_mode import no_grad
from ..autograd.graph import register_post_backward_hook
from ..tensor import Tensor
from . import _comm


def _named(module: Any, kind: str) -> list[tuple[str, Tensor]]:
    """``module``'s named parameters (or buffers), deduplicated by identity."""
    named = getattr(module, f"named_{kind}", None)
    if named is not None:
        items = list(named())
    else:
        plain = getattr(module, kind, None)
        if plain is None:
            if kind == "buffers":
                return []
            raise TypeError(
                f"DistributedDataParallel: {type(module).__name__} has no parameters() "
                "or named_parameters()"
            )
        items = [(str(i), t) for i, t in enumerate(plain())]
    seen: set[int] = set()
    out = []
    for name, t in items:
        if id(t) in seen:
            continue
        seen.add(id(t))
        if not isinstance(t, Tensor):
            raise TypeError(f"DistributedDataParallel: {kind[:-1]} {name!r} is not an rtx.Tensor")
        out.append((name, t))
    return out


def _is_sparse(g: Any) -> bool:
    return type(g) is RowSparseGrad


def _sparse_grad(p: Tensor) -> RowSparseGrad | None:
    """``p.grad`` when it is row-sparse (``Embedding(sparse=True)``), else None."""
    g: Any = p.grad
    return g if type(g) is RowSparseGrad else None


class _Bucket:
    __slots__ = ("params", "offsets", "flat", "dtype")

    def __init__(self, params: list[Tensor], dtype: np.dtype) -> None:
        self.params = params
        self.dtype = dtype
        self.offsets = [0]
        for p in params:
            self.offsets.append(self.offsets[-1] + p.numel())
        self.flat = np.empty(self.offsets[-1], dtype)


class DistributedDataParallel:
    """Wrap ``module`` for data-parallel training (PyTorch's DDP, over MPI).

    ``rtx.distributed.init()`` must have run.  ``forward`` (and calling the
    wrapper) passes straight through to ``module``; other attributes are the
    module's.  See the module docstring for what is all-reduced and when.
    """

    def __init__(self, module: Any, bucket_cap_mb: float = 25.0,
                 broadcast_buffers: bool = True) -> None:
        if not bucket_cap_mb > 0:
            raise ValueError(f"bucket_cap_mb must be positive, got {bucket_cap_mb}")
        comm = _comm._comm()
        self.module = module
        self.comm = comm
        self.bucket_cap_mb = float(bucket_cap_mb)
        named = [(n, p) for n, p in _named(module, "parameters") if p.requires_grad]
        if not named:
            raise ValueError("DistributedDataParallel: the module has no parameter requiring grad")
        buffers = _named(module, "buffers") if broadcast_buffers else []
        self._check_same_params(named, buffers)
        self._params = [p for _, p in named]
        self._names = [n for n, _ in named]
        self._ids = {id(p) for p in self._params}
        self._forwards = 0  # forward() calls, and gradient reductions: agreed at each sync
        self._syncs = 0
        everything = [t for _, t in [*named, *buffers]]
        with no_grad():
            bufs = _comm._agree(
                "ddp_init", extra=(len(everything), sum(t.numel() for t in everything)),
                check=lambda: [_comm._host_buffer(t, "DistributedDataParallel")
                               for t in everything],
                what="DistributedDataParallel")
            if comm.Get_size() > 1:
                _comm._wait([comm.Ibcast(b, root=0) for b, _ in bufs],
                            "DistributedDataParallel: broadcasting rank 0's parameters")
            for t, (b, zc) in zip(everything, bufs, strict=True):
                _comm._mark_written(t, b, zc)
        self._buckets = self._make_buckets()
        self._sync = True
        ref = weakref.ref(self)

        def hook(leaves: list[Tensor]) -> None:
            me = ref()
            if me is not None and me._sync and any(id(t) in me._ids for t in leaves):
                me.sync_gradients()

        self._hook = register_post_backward_hook(hook)

    # ------------------------------------------------------------ setup
    def _check_same_params(self, named: list[tuple[str, Tensor]],
                           buffers: list[tuple[str, Tensor]]) -> None:
        sig = [[n, list(t.shape), str(t.dtype)] for n, t in named]
        sig += [["buffer:" + n, list(t.shape), str(t.dtype)] for n, t in buffers]
        sigs = _comm.allgather_object(sig, "DistributedDataParallel")
        for r, s in enumerate(sigs):
            if s != sigs[0]:
                diff = next((a, b) for a, b in zip(sigs[0], s, strict=False) if a != b) \
                    if len(s) == len(sigs[0]) else (f"{len(sigs[0])} tensors", f"{len(s)}")
                raise ValueError(
                    "DistributedDataParallel: rank 0 and rank "
                    f"{r} wrap different parameters: {diff[0]} vs {diff[1]}"
                )

    def _make_buckets(self) -> list[_Bucket]:
        cap = self.bucket_cap_mb * 2**20
        buckets: list[_Bucket] = []
        cur: dict[np.dtype, list[Tensor]] = {}
        size: dict[np.dtype, int] = {}
        for p in reversed(self._params):
            dt = p.dtype
            nbytes = p.numel() * dt.itemsize
            if dt in cur and size[dt] + nbytes > cap:
                buckets.append(_Bucket(cur.pop(dt), dt))
                size[dt] = 0
            cur.setdefault(dt, []).append(p)
            size[dt] = size.get(dt, 0) + nbytes
        for dt, ps in cur.items():
            buckets.append(_Bucket(ps, dt))
        return buckets

    @property
    def bucket_sizes(self) -> list[int]:
        """Elements per bucket, in reduction order."""
        return [b.offsets[-1] for b in self._buckets]

    # ---------------------------------------------------------- forward
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        self._forwards += 1  # agreed at the next gradient reduction (sync_gradients)
        return self.module(*args, **kwargs)

    __call__ = forward

    def __getattr__(self, name: str) -> Any:
        if name == "module":  # not yet set: avoid recursion
            raise AttributeError(name)
        return getattr(self.module, name)

    # ------------------------------------------------------------- sync
    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Inside this context backward passes accumulate gradients locally,
        without communication; the first backward after it averages the
        accumulated sums (gradient accumulation, as PyTorch's ``no_sync``)."""
        prev = self._sync
        self._sync = False
        try:
            yield
        finally:
            self._sync = prev

    def sync_gradients(self) -> None:
        """Average every parameter's ``.grad`` across ranks now (called
        automatically after each ``backward()`` outside ``no_sync()``)."""
        MPI = _comm._import_mpi()
        comm = self.comm
        world = comm.Get_size()
        # Every rank must be at the same step: the forward count and this
        # reduction's number are agreed first (one small allgather), so a rank
        # that ran backward() once more, or skipped a forward, raises on every
        # rank before any gradient is mixed.
        _comm._agree("ddp_sync", extra=(self._forwards, self._syncs + 1),
                     shape=(len(self._params), sum(self.bucket_sizes)),
                     what="DistributedDataParallel.sync_gradients")
        self._syncs += 1
        sparse = self._sync_sparse()   # row-sparse gradients (Embedding(sparse=True))
        has = np.array([p.grad is not None and i not in sparse
                        for i, p in enumerate(self._params)], dtype=np.int8)
        reqs = [comm.Iallreduce(MPI.IN_PLACE, has, op=MPI.MAX)]
        for b in self._buckets:
            for p, lo, hi in zip(b.params, b.offsets, b.offsets[1:], strict=False):
                g = p.grad
                if g is None or _is_sparse(g):  # (the sparse ones are done)
                    b.flat[lo:hi] = 0
                else:
                    b.flat[lo:hi] = np.asarray(g).reshape(-1)
            reqs.append(comm.Iallreduce(MPI.IN_PLACE, b.flat, op=MPI.SUM))
        what = "DistributedDataParallel.sync_gradients"
        _comm._wait(reqs[:1], what)
        any_grad = {id(p) for p, h in zip(self._params, has, strict=True) if h}
        for b, req in zip(self._buckets, reqs[1:], strict=True):
            _comm._wait([req], what)
            np.divide(b.flat, world, out=b.flat)
            for p, lo, hi in zip(b.params, b.offsets, b.offsets[1:], strict=False):
                if id(p) not in any_grad:
                    continue
                avg = b.flat[lo:hi].reshape(p.shape)
                g = p.grad
                gv = None if g is None else g._value
                if (g is not None and isinstance(gv, np.ndarray) and gv.flags.c_contiguous
                        and gv.flags.writeable):
                    _comm.prepare_write(g)
                    np.copyto(gv, avg)
                    _comm.bump_version(g)
                else:
                    p.grad = Tensor._make(p._ad.inner.from_numpy(avg.copy()), p._ad)

    def _sync_sparse(self) -> set[int]:
        """Average the row-sparse gradients (``Embedding(sparse=True)``) across ranks,
        as PyTorch's DDP does for sparse gradients: every rank's rows and values are
        gathered (raw bytes, one allgather), concatenated in rank order and summed per
        row in that order (so every rank computes the same bits), then divided by the
        world size; each rank's ``.grad`` becomes that coalesced ``RowSparseGrad``
        (also a rank whose batch did not touch the embedding).  Returns the
        positions of those parameters.  Which parameters are sparse is agreed first:
        a parameter sparse on one rank and dense on another raises on every rank
        before any gradient changes."""
        what = "DistributedDataParallel.sync_gradients"
        kinds = [0 if p.grad is None else 2 if _is_sparse(p.grad) else 1
                 for p in self._params]
        every = _comm.allgather_object(kinds, what)
        sparse = sorted({i for ks in every for i, k in enumerate(ks) if k == 2})
        if not sparse:
            return set()
        for i in sparse:
            dense = [r for r, ks in enumerate(every) if ks[i] == 1]
            if dense:
                have = [r for r, ks in enumerate(every) if ks[i] == 2]
                raise ValueError(f"{what}: parameter {self._names[i]!r} has a sparse gradient "
                                 f"on rank {have[0]} but a dense one on rank {dense[0]}")
        parts = []
        for i in sparse:
            p, g = self._params[i], _sparse_grad(self._params[i])
            if g is not None:
                idx = np.ascontiguousarray(g._idx, dtype=np.int64)
                vals = np.ascontiguousarray(p._ad.inner.to_numpy(g._vals), dtype=p.dtype)
            else:
                idx = np.zeros(0, np.int64)
                vals = np.zeros((0, *p.shape[1:]), p.dtype)
            parts += [np.int64(idx.size).tobytes(), idx.tobytes(), vals.tobytes()]
        blobs = _comm._allgather_bytes(b"".join(parts), what)
        world = len(blobs)
        rows: dict[int, list[np.ndarray]] = {i: [] for i in sparse}
        values: dict[int, list[np.ndarray]] = {i: [] for i in sparse}
        for blob in blobs:              # rank order
            off = 0
            for i in sparse:
                p = self._params[i]
                n = int(np.frombuffer(blob, np.int64, 1, off)[0])
                off += 8
                rows[i].append(np.frombuffer(blob, np.int64, n, off))
                off += 8 * n
                width = int(np.prod(p.shape[1:], dtype=np.int64))
                values[i].append(np.frombuffer(blob, p.dtype, n * width, off).reshape(
                    (n, *p.shape[1:])))
                off += p.dtype.itemsize * n * width
        for i in sparse:
            p = self._params[i]
            r, v = np.concatenate(rows[i]), np.concatenate(values[i])
            uniq, inv = np.unique(r, return_inverse=True)
            out = np.zeros((uniq.size, *p.shape[1:]), p.dtype)
            np.add.at(out, inv.reshape(-1), v)        # in rank order: the same bits everywhere
            np.divide(out, world, out=out)
            B = p._ad.inner
            p.grad = cast(Any, RowSparseGrad(uniq, B.from_numpy(out), tuple(p.shape), p._ad))
        return set(sparse)

    def check_consistency(self) -> bool:
        """Whether every rank holds bitwise-identical parameters (and gradients,
        where present): one allgather of a digest per rank."""
        import hashlib

        h = hashlib.sha256()
        for p in self._params:
            h.update(np.ascontiguousarray(p.numpy()).tobytes())
            sg = _sparse_grad(p)
            if sg is not None:
                h.update(b"sparse" + np.ascontiguousarray(sg._idx).tobytes())
                h.update(np.ascontiguousarray(sg._values().numpy()).tobytes())
            elif p.grad is not None:
                h.update(np.ascontiguousarray(p.grad.numpy()).tobytes())
        digests = _comm.allgather_object(h.hexdigest(), "check_consistency")
        return all(d == digests[0] for d in digests)

    def remove_hook(self) -> None:
        """Stop syncing automatically after ``backward()`` (``sync_gradients()``
        still works)."""
        self._hook.remove()

    def __del__(self) -> None:
        hook = self.__dict__.get("_hook")
        if hook is not None:
            hook.remove()
