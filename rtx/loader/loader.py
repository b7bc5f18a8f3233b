"""Mini-batch loaders over ``NeighborSampler``: PyG's ``NeighborLoader`` and
``LinkNeighborLoader`` (docs/sampling.md, "Loaders").

A loader cuts its input (seed nodes, or seed edges) into batches, samples each
batch's neighbourhood with the native sampler and gathers the sampled nodes' (and
edges') attributes into an ``rtx.data.HeteroData`` laid out as PyG's batch:

* every node store: the node-level attributes of the graph's store gathered at
  ``n_id`` (rtx tensors), ``n_id`` (global ids), ``num_sampled_nodes``;
* every edge store: ``edge_index`` -- the sampled ``rtx.EdgeIndex`` over local ids
  (PyG gives a ``[2, E]`` tensor; rtx's layers take the EdgeIndex as is and use its
  prebuilt destination grouping), the edge-level attributes gathered at ``e_id``
  and ``e_id`` when edge ids are on, ``num_sampled_edges``;
* the input store: ``input_id`` and ``batch_size`` (nodes), or ``edge_label_index``
  / ``edge_label`` / ``input_id`` (edges).

Batch ``b`` of epoch ``e`` is a function of ``(seed, e, b)`` and the input only:
the same bits at any thread count and any ``prefetch``.  With ``prefetch=k > 0`` a
background thread samples and gathers up to ``k`` batches ahead of the one being
trained (the kernels release the GIL); breaking out of the loop stops it.
"""

from __future__ import annotations

import functools
import math
import operator
import queue
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from .._backend_state import get_default_backend, use_backend
from .._kernels import first_out_of_bounds
from ..autograd import no_grad
from ..backend.index_plan import EdgeIndex
from ..creation import from_numpy
from ..data import HeteroData
from ..functional import index_select
from ..tensor import Tensor
from ..utils._negative_sampling import _MAX_POPULATION, _decode, _encode, _sample_codes
from .sampler import EdgeType, NeighborSampler, NumNeighbors

__all__ = ["LinkNeighborLoader", "NeighborLoader"]

# random streams of the loaders (the sampler's own key is (seed, epoch, batch))
_TAG_SHUFFLE = 0x5348_5546      # "SHUF": the epoch's permutation of the input
_TAG_NEGATIVE = 0x4E45_4741     # "NEGA": a batch's negative pairs
_U64 = 2**64
_RTX_DTYPES = (np.bool_, np.int32, np.int64, np.float32, np.float64)


# ------------------------------------------------------------------ checks
def _int(v: Any, what: str) -> int:
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{what} must be an int, got bool")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {type(v).__name__}") from None


def _flag(v: Any, what: str) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{what} must be a bool, got {type(v).__name__}")
    return bool(v)


def _host(v: Any) -> Any:
    """rtx / torch tensors as numpy arrays (zero-copy where possible)."""
    if isinstance(v, Tensor):
        return v.numpy()
    if not isinstance(v, np.ndarray) and hasattr(v, "detach") and hasattr(v, "numpy"):
        return v.detach().cpu().numpy()
    return v


def _shape(v: Any) -> tuple[int, ...] | None:
    if isinstance(v, (Tensor, np.ndarray)):
        return tuple(v.shape)
    if isinstance(v, EdgeIndex):
        return (2, v.num_edges)
    s = getattr(v, "shape", None)
    if s is not None and hasattr(v, "detach"):     # a torch tensor
        return tuple(int(d) for d in s)
    return None


def _as_rtx(v: Any) -> Tensor:
    """An array-like attribute as an rtx tensor to gather from: rtx tensors as they
    are, numpy / torch arrays zero-copy where rtx has the dtype, else widened (a
    copy: unsigned / small ints to int64, float16 to float32)."""
    if isinstance(v, Tensor):
        return v
    a = np.asarray(_host(v))
    if a.dtype.kind == "u" or (a.dtype.kind == "i" and a.dtype.itemsize < 4):
        a = a.astype(np.int64)
    elif a.dtype.kind == "f" and a.dtype.itemsize < 4:
        a = a.astype(np.float32)
    if a.dtype.type not in _RTX_DTYPES:
        raise TypeError(f"cannot gather an attribute of dtype {a.dtype}")
    return from_numpy(np.ascontiguousarray(a))


def _gather(v: Tensor, idx: np.ndarray) -> Tensor:
    """Rows ``idx`` of ``v`` (rtx's native gather; nothing recorded for autograd)."""
    with no_grad():
        return index_select(v, idx)


def _check_data(data: Any, who: str) -> HeteroData:
    if not isinstance(data, HeteroData):
        raise TypeError(f"{who}: data must be an rtx.data.HeteroData (a PyG graph converts "
                        f"with HeteroData.from_pyg), got {type(data).__name__}")
    return data


def _edge_type(data: HeteroData, key: Any, who: str) -> EdgeType:
    """``key`` (a full edge type, an unambiguous relation name or (src, dst) pair) as
    the graph's edge type (PyG's ``_to_canonical``)."""
    ets = data.edge_types
    if isinstance(key, tuple) and len(key) == 3 and key in ets:
        return key
    if isinstance(key, str):
        hits = [et for et in ets if et[1] == key]
    elif isinstance(key, tuple) and len(key) == 2 and all(isinstance(p, str) for p in key):
        hits = [et for et in ets if (et[0], et[2]) == key]
    else:
        hits = []
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise ValueError(f"{who}: {key!r} names several edge types {hits}; give the full "
                         "(src_type, relation, dst_type)")
    raise ValueError(f"{who}: unknown edge type {key!r} (edge types: {ets})")


def _ids(v: Any, n: int, what: str) -> np.ndarray:
    """Integer node ids (a private int64 copy), each in ``[0, n)``."""
    a = np.asarray(_host(v))
    if a.dtype == object or a.dtype.kind not in "iu":
        if a.size == 0 and a.dtype.kind == "f":
            a = a.astype(np.int64)
        else:
            raise TypeError(f"{what} must be integer ids or a bool mask, got dtype {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {a.shape}")
    own = np.array(a, dtype=np.int64, copy=True)
    bad = first_out_of_bounds(own, n)
    if bad >= 0:
        raise IndexError(f"{what}[{bad}] = {int(own[bad])} is out of range for {n} nodes")
    return own


def _input_nodes(data: HeteroData, input_nodes: Any, who: str
                 ) -> tuple[str, np.ndarray, np.ndarray | None]:
    """PyG's ``get_input_nodes``: ``(node_type, seed ids, input_id or None)``."""
    if input_nodes is None:
        raise ValueError(f"{who}: a heterogeneous graph needs input_nodes: a node type, "
                         "(node_type, ids), (node_type, bool mask) or (node_type, None)")
    if isinstance(input_nodes, str):
        nt, nodes = input_nodes, None
    elif isinstance(input_nodes, (tuple, list)) and len(input_nodes) == 2:
        nt, nodes = input_nodes
    else:
        raise TypeError(f"{who}: input_nodes must be a node type or a (node_type, ids or "
                        f"mask) pair, got {type(input_nodes).__name__}")
    if not isinstance(nt, str):
        raise TypeError(f"{who}: the input node type must be a str, got {type(nt).__name__}")
    if nt not in data.node_types:
        raise ValueError(f"{who}: unknown input node type {nt!r} (node types: "
                         f"{data.node_types})")
    n = data.num_nodes_dict[nt]
    if nodes is None:
        return nt, np.arange(n, dtype=np.int64), None
    a = np.asarray(_host(nodes))
    if a.dtype == np.bool_:
        if a.ndim != 1 or a.shape[0] != n:
            raise ValueError(f"{who}: the input mask of {nt!r} must have shape ({n},), got "
                             f"{a.shape}")
        ids = np.flatnonzero(a).astype(np.int64)
        return nt, ids, ids     # PyG: a mask's input_id are the node ids
    return nt, _ids(a, n, f"{who}: input_nodes"), None


def _neg_sampling(neg: Any, ratio: Any, who: str) -> tuple[str, float] | None:
    """``(mode, amount)`` of PyG's ``NegativeSampling.cast`` forms, or None."""
    if ratio is not None:
        r = float(ratio)
        if r != 0.0:
            if neg is not None:
                raise ValueError(f"{who}: give neg_sampling or neg_sampling_ratio, not both")
            neg = {"mode": "binary", "amount": r}
    if neg is None:
        return None
    if isinstance(neg, str):
        mode, amount, extra = neg, 1.0, {}
    elif isinstance(neg, Mapping):
        extra = dict(neg)
        mode = extra.pop("mode", None)
        amount = extra.pop("amount", 1.0)
    elif hasattr(neg, "mode") and hasattr(neg, "amount"):     # PyG's NegativeSampling
        mode = getattr(neg.mode, "value", neg.mode)
        amount = neg.amount
        extra = {k: getattr(neg, k, None) for k in ("src_weight", "dst_weight")}
    else:
        raise TypeError(f"{who}: neg_sampling must be None, 'binary', 'triplet' or "
                        f"dict(mode=..., amount=...), got {type(neg).__name__}")
    if mode not in ("binary", "triplet"):
        raise ValueError(f"{who}: neg_sampling mode must be 'binary' or 'triplet', got "
                         f"{mode!r}")
    unknown = [k for k, v in extra.items() if v is not None]
    if unknown:
        raise ValueError(f"{who}: neg_sampling options {unknown} are not supported "
                         "(negatives are drawn uniformly)")
    if isinstance(amount, (bool, np.bool_)) or not isinstance(amount, (int, float, np.number)):
        raise TypeError(f"{who}: neg_sampling amount must be a number, got {amount!r}")
    amount = float(amount)
    if not (math.isfinite(amount) and amount > 0):
        raise ValueError(f"{who}: neg_sampling amount must be > 0, got {amount}")
    if mode == "triplet":
        if amount != math.ceil(amount):
            raise ValueError(f"{who}: neg_sampling amount must be an integer for 'triplet' "
                             f"(got {amount})")
    return mode, amount


# ---------------------------------------------------------- the batch layout
class _Layout:
    """What a batch takes from the graph, read once at construction: per store the
    attributes to gather (as rtx tensors) and those kept as they are.  Values are
    the graph's (no copy): in-place changes to them show in later batches, new or
    removed attributes do not."""

    def __init__(self, data: HeteroData, want_e_id: bool | None, who: str) -> None:
        nnd = data.num_nodes_dict
        self.graph_attrs = list(data._global.items())   # PyG's copy.copy(data) keeps them
        self.nodes: dict[str, tuple[list[tuple[str, Tensor]], list[tuple[str, Any]], bool]] = {}
        for nt in data.node_types:
            n = nnd[nt]
            store = data[nt]
            gather, keep = [], []
            has_count = False
            for k, v in store.items():
                if k == "num_nodes":
                    has_count = True
                    continue
                s = _shape(v)
                if s and s[0] == n:
                    try:
                        gather.append((k, _as_rtx(v)))
                    except TypeError as exc:
                        raise TypeError(f"{who}: data[{nt!r}].{k}: {exc}") from None
                else:
                    keep.append((k, v))
            self.nodes[nt] = (gather, keep, has_count)
        self.edges: dict[EdgeType, tuple[list[tuple[str, Tensor]], list[tuple[str, Any]]]] = {}
        any_edge_attr = False
        for et in data.edge_types:
            store = data[et]
            E = store.num_edges
            gather, keep = [], []
            for k, v in store.items():
                if k == "edge_index":
                    continue
                s = _shape(v)
                # PyG gathers names holding "index" along their last dimension; rtx
                # keeps them as they are (docs/sampling.md)
                if s and s[0] == E and "index" not in k:
                    try:
                        gather.append((k, _as_rtx(v)))
                    except TypeError as exc:
                        raise TypeError(f"{who}: data[{et!r}].{k}: {exc}") from None
                else:
                    keep.append((k, v))
            any_edge_attr = any_edge_attr or bool(gather)
            self.edges[et] = (gather, keep)
        self.e_id = any_edge_attr if want_e_id is None else bool(want_e_id)

    def batch(self, out: Any) -> HeteroData:
        """The batch of one ``HeteroSamplerOutput`` (PyG's ``filter_hetero_data``)."""
        b = HeteroData()
        for k, v in self.graph_attrs:
            b[k] = v
        for nt, (gather, keep, has_count) in self.nodes.items():
            n_id = out.n_id_dict[nt]
            store = b[nt]
            for k, v in keep:
                store[k] = v
            for k, v in gather:
                store[k] = _gather(v, n_id)
            if has_count:
                store["num_nodes"] = int(n_id.shape[0])
            if "n_id" not in store:
                store["n_id"] = from_numpy(n_id)
            store["num_sampled_nodes"] = list(out.num_sampled_nodes_dict[nt])
        for et, (gather, keep) in self.edges.items():
            store = b[et]
            for k, v in keep:
                store[k] = v
            if et not in out.edge_index_dict:     # a store without edge_index
                continue
            store["edge_index"] = out.edge_index_dict[et]
            e_id = out.e_id_dict[et] if out.e_id_dict is not None else None
            if e_id is not None:
                for k, v in gather:
                    store[k] = _gather(v, e_id)
                if "e_id" not in store:
                    store["e_id"] = from_numpy(e_id)
            store["num_sampled_edges"] = list(out.num_sampled_edges_dict[et])
        return b


# ------------------------------------------------------------ the iterator
class _Stop:
    """The worker's shared state (never the iterator itself, so that dropping the
    iterator collects it and its finaliser stops the worker)."""

    __slots__ = ("done", "lock", "q", "slots", "stop", "thread")

    def __init__(self, prefetch: int) -> None:
        self.stop = threading.Event()
        self.slots = threading.Semaphore(prefetch)
        self.q: queue.SimpleQueue[tuple[int, Any, BaseException | None]] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.done = False


def _work(job: Callable[[int], Any], n: int, st: _Stop) -> None:
    """The background thread: batches 0..n-1 in order, each after taking a slot."""
    b = 0
    try:
        while b < n:
            st.slots.acquire()
            if st.stop.is_set():
                return
            st.q.put((b, job(b), None))
            b += 1
    except BaseException as exc:   # re-raised in the consuming thread
        st.q.put((b, None, exc))


def _shutdown(st: _Stop) -> None:
    """Stop the worker (it finishes the batch in hand) and wait for it."""
    with st.lock:
        if st.done:
            return
        st.done = True
    st.stop.set()
    st.slots.release()            # wake a worker waiting for a slot
    t = st.thread
    if t is not None and t is not threading.current_thread():
        t.join()
    while True:                   # drop what it made
        try:
            st.q.get_nowait()
        except queue.Empty:
            break


class _LoaderIterator(Iterator[HeteroData]):
    """One epoch of a loader (``iter(loader)``).  ``close()`` (or dropping it, or
    leaving a ``for`` loop early) stops its background thread."""

    def __init__(self, loader: _Loader, epoch: int) -> None:
        self.epoch = epoch
        self._n = len(loader)
        self._next = 0
        self._transform = loader.transform
        self._job = functools.partial(loader._batch, epoch, loader._order(epoch))
        self._prefetch = loader.prefetch
        self._st: _Stop | None = None
        if self._prefetch > 0 and self._n > 0:
            st = self._st = _Stop(self._prefetch)
            t = threading.Thread(target=_work, args=(self._job, self._n, st), daemon=True,
                                 name=f"rtx-loader-epoch{epoch}")
            st.thread = t
            self._finalizer = weakref.finalize(self, _shutdown, st)
            t.start()

    def __iter__(self) -> _LoaderIterator:
        return self

    def __len__(self) -> int:
        return self._n - self._next

    def __next__(self) -> HeteroData:
        if self._next >= self._n:
            self.close()
            raise StopIteration
        st = self._st
        if st is None:
            batch = self._job(self._next)
        else:
            b, batch, exc = st.q.get()
            st.slots.release()
            if exc is not None:
                self.close()
                raise exc
            assert b == self._next
        self._next += 1
        return batch if self._transform is None else self._transform(batch)

    def close(self) -> None:
        """Stop the background thread and drop the batches it prepared."""
        self._next = self._n
        if self._st is not None:
            self._finalizer()


# ------------------------------------------------------------- the loaders
class _Loader:
    """What both loaders share: the input in batches, epochs, prefetching."""

    _who = "Loader"

    def __init__(self, data: HeteroData, num_neighbors: NumNeighbors, num_inputs: int, *,
                 batch_size: int, shuffle: bool, drop_last: bool, seed: int, prefetch: int,
                 replace: bool, num_threads: int | None, return_edge_id: bool | None,
                 transform: Callable[[HeteroData], Any] | None) -> None:
        who = self._who
        bs = _int(batch_size, f"{who}: batch_size")
        if bs < 1:
            raise ValueError(f"{who}: batch_size must be >= 1, got {bs}")
        pf = _int(prefetch, f"{who}: prefetch")
        if pf < 0:
            raise ValueError(f"{who}: prefetch must be >= 0 (0 = no background thread), "
                             f"got {pf}")
        self.batch_size = bs
        self.prefetch = pf
        self.shuffle = _flag(shuffle, f"{who}: shuffle")
        self.drop_last = _flag(drop_last, f"{who}: drop_last")
        s = _int(seed, f"{who}: seed")
        if not 0 <= s < _U64:
            raise ValueError(f"{who}: seed must be in [0, 2**64), got {s}")
        self.seed = s
        if num_threads is not None:
            nt = _int(num_threads, f"{who}: num_threads")
            if nt < 1:
                raise ValueError(f"{who}: num_threads must be >= 1 or None, got {nt}")
            num_threads = nt
        self.num_threads = num_threads
        if return_edge_id is not None:
            return_edge_id = _flag(return_edge_id, f"{who}: return_edge_id")
        if transform is not None and not callable(transform):
            raise TypeError(f"{who}: transform must be callable, got {type(transform).__name__}")
        self.transform = transform
        self.data = data
        self._layout = _Layout(data, return_edge_id, who)
        self.sampler = NeighborSampler(data, num_neighbors, replace=_flag(replace, f"{who}: "
                                       "replace"), seed=s, return_edge_id=self._layout.e_id)
        self.num_inputs = num_inputs
        self._epoch = 0
        # batches are made on the backend current where the loader was built (the
        # background thread's default would be the process-wide one)
        self._backend = get_default_backend()

    def __len__(self) -> int:
        n, bs = self.num_inputs, self.batch_size
        return n // bs if self.drop_last else -(-n // bs)

    @property
    def epoch(self) -> int:
        """The epoch the next ``iter(loader)`` runs (0, 1, ... in turn)."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter(loader)`` run ``epoch`` (e.g. to resume training)."""
        e = _int(epoch, f"{self._who}.set_epoch: epoch")
        if not 0 <= e < 2**63:
            raise ValueError(f"{self._who}.set_epoch: epoch must be in [0, 2**63), got {e}")
        self._epoch = e

    def __iter__(self) -> _LoaderIterator:
        it = _LoaderIterator(self, self._epoch)
        self._epoch += 1
        return it

    def _order(self, epoch: int) -> np.ndarray | None:
        """The epoch's order of the inputs (a seeded permutation), or None."""
        if not self.shuffle or self.num_inputs == 0:
            return None
        rng = np.random.default_rng([_TAG_SHUFFLE, self.seed, epoch])
        return rng.permutation(self.num_inputs)

    def _positions(self, order: np.ndarray | None, b: int) -> np.ndarray:
        lo = b * self.batch_size
        hi = min(lo + self.batch_size, self.num_inputs)
        if order is None:
            return np.arange(lo, hi, dtype=np.int64)
        return order[lo:hi].astype(np.int64, copy=False)

    def _batch(self, epoch: int, order: np.ndarray | None, b: int) -> HeteroData:
        """Batch ``b`` of ``epoch`` (any thread)."""
        with use_backend(self._backend):
            return self._make(self._positions(order, b), epoch, b)

    def __call__(self, index: Any) -> HeteroData:
        """The batch of the inputs at positions ``index`` (PyG's ``loader(index)``),
        sampled with epoch 0, batch 0's stream."""
        pos = _ids(index, self.num_inputs, f"{self._who}(index)")
        if pos.shape[0] == 0:
            raise ValueError(f"{self._who}(index): no inputs")
        with use_backend(self._backend):
            return self._make(pos, 0, 0)

    def _make(self, pos: np.ndarray, epoch: int, b: int) -> HeteroData:
        raise NotImplementedError   # pragma: no cover


class NeighborLoader(_Loader):
    """Mini-batches of seed nodes with their sampled neighbourhoods (PyG's
    ``torch_geometric.loader.NeighborLoader``, heterogeneous graphs).

    ``NeighborLoader(data, num_neighbors, input_nodes=("paper", ids_or_mask),
    batch_size=1024, shuffle=True, drop_last=False, seed=0, prefetch=1,
    replace=False, num_threads=None, return_edge_id=None, transform=None)``

    Args:
        data: an ``rtx.data.HeteroData``.
        num_neighbors: fanouts per hop (``[15, 10]``), or a dict edge type ->
            fanouts, as ``NeighborSampler``.
        input_nodes: the seeds: a node type (all its nodes), ``(node_type, ids)``,
            ``(node_type, bool mask)`` or ``(node_type, None)``.
        batch_size: seeds per batch (the last batch may be smaller unless
            ``drop_last``).  PyG's default is 1; rtx's is 1024.
        shuffle: a seeded permutation of the seeds per epoch (PyG's default: False).
        seed: seeds the sampler, the permutations and nothing else.
        prefetch: batches a background thread samples and gathers ahead of the
            one being trained (0: each batch is made when asked for).
        replace: sample with replacement.
        num_threads: the sampler's threads (default ``rtx.get_num_threads()``).
        return_edge_id: ``e_id`` in every edge store (and the edge-level
            attributes gathered); ``None``: when the graph has edge attributes.
        transform: applied to each batch in the consuming thread.

    Each batch is an ``rtx.data.HeteroData`` (see the module docstring); the input
    store has ``batch_size`` and ``input_id`` and its first ``batch_size`` nodes
    are the seeds, in order: ``out[:batch_size]`` are their predictions.
    """

    _who = "NeighborLoader"

    def __init__(self, data: HeteroData, num_neighbors: NumNeighbors,
                 input_nodes: Any = None, batch_size: int = 1024, shuffle: bool = True,
                 drop_last: bool = False, seed: int = 0, prefetch: int = 1,
                 replace: bool = False, num_threads: int | None = None,
                 return_edge_id: bool | None = None,
                 transform: Callable[[HeteroData], Any] | None = None) -> None:
        data = _check_data(data, self._who)
        nt, ids, input_id = _input_nodes(data, input_nodes, self._who)
        self.input_type = nt
        self._ids = ids
        self._input_id = input_id
        super().__init__(data, num_neighbors, int(ids.shape[0]), batch_size=batch_size,
                         shuffle=shuffle, drop_last=drop_last, seed=seed, prefetch=prefetch,
                         replace=replace, num_threads=num_threads,
                         return_edge_id=return_edge_id, transform=transform)

    @property
    def input_nodes(self) -> tuple[str, np.ndarray]:
        """``(node_type, ids)`` of the seeds (a read-only copy)."""
        ids = self._ids.copy()
        ids.setflags(write=False)
        return self.input_type, ids

    def _make(self, pos: np.ndarray, epoch: int, b: int) -> HeteroData:
        seeds = self._ids[pos]
        out = self.sampler.sample((self.input_type, seeds), epoch, b,
                                  num_threads=self.num_threads)
        batch = self._layout.batch(out)
        store = batch[self.input_type]
        input_id = pos if self._input_id is None else self._input_id[pos]
        store["input_id"] = from_numpy(np.ascontiguousarray(input_id, dtype=np.int64))
        store["batch_size"] = int(seeds.shape[0])
        return batch

    def __repr__(self) -> str:
        return (f"NeighborLoader(input_type={self.input_type!r}, num_inputs={self.num_inputs}, "
                f"batch_size={self.batch_size}, shuffle={self.shuffle}, "
                f"prefetch={self.prefetch}, batches={len(self)})")


class LinkNeighborLoader(_Loader):
    """Mini-batches of seed edges with the sampled neighbourhoods of their end
    points (PyG's ``torch_geometric.loader.LinkNeighborLoader``, heterogeneous
    graphs, non-disjoint).

    ``LinkNeighborLoader(data, num_neighbors, edge_label_index=(edge_type, [2, E]),
    edge_label=None, neg_sampling=None, batch_size=1024, shuffle=True,
    drop_last=False, seed=0, prefetch=1, replace=False, num_threads=None,
    return_edge_id=None, transform=None, neg_sampling_ratio=None)``

    Args:
        edge_label_index: the seed edges: an edge type (all its edges),
            ``(edge_type, None)`` or ``(edge_type, [2, E] int ids)`` (row 0 of the
            edge type's source type, row 1 of its destination type; they need not
            be edges of the graph).
        edge_label: one label per seed edge (optional).
        neg_sampling: ``None``, ``"binary"``, ``"triplet"``, ``dict(mode=...,
            amount=...)`` or PyG's ``NegativeSampling`` (uniform only).  Negatives
            are never edges of the graph's edge type nor seed edges, seeded per
            ``(seed, epoch, batch)``: ``"binary"`` draws ``ceil(amount * B)``
            distinct pairs per batch (no self-loops within one node type);
            ``"triplet"`` draws ``amount`` destinations per seed edge.

    The other arguments are ``NeighborLoader``'s.  Per batch the end points of the
    batch's seed edges (and negatives) are the seeds -- each type's distinct ids,
    sorted, first in its ``n_id`` -- and the edge type's store has
    ``edge_label_index`` (local ids: positives, then negatives), ``edge_label``
    (``"binary"``: 1 / 0 float32, or the given labels + 1 when they start at 0,
    and 0 for negatives) and ``input_id`` (the seed edges' positions in
    ``edge_label_index``).  ``"triplet"``: ``src_index`` on the source store,
    ``dst_pos_index`` and ``dst_neg_index`` (``[B]``, or ``[B, amount]``) on the
    destination store, as PyG.
    """

    _who = "LinkNeighborLoader"

    def __init__(self, data: HeteroData, num_neighbors: NumNeighbors,
                 edge_label_index: Any = None, edge_label: Any = None,
                 neg_sampling: Any = None, batch_size: int = 1024, shuffle: bool = True,
                 drop_last: bool = False, seed: int = 0, prefetch: int = 1,
                 replace: bool = False, num_threads: int | None = None,
                 return_edge_id: bool | None = None,
                 transform: Callable[[HeteroData], Any] | None = None,
                 neg_sampling_ratio: float | None = None) -> None:
        who = self._who
        data = _check_data(data, who)
        et, eli = self._edge_label_index(data, edge_label_index)
        self.edge_type = et
        n_src, n_dst = data.num_nodes_dict[et[0]], data.num_nodes_dict[et[2]]
        self._rows = _ids(eli[0], n_src, f"{who}: edge_label_index[0]")
        self._cols = _ids(eli[1], n_dst, f"{who}: edge_label_index[1]")
        E = int(self._rows.shape[0])
        self.neg_sampling = _neg_sampling(neg_sampling, neg_sampling_ratio, who)
        mode = self.neg_sampling[0] if self.neg_sampling else None
        self._label: np.ndarray | None = None
        if edge_label is not None:
            if mode == "triplet":
                raise ValueError(f"{who}: edge_label must be None for 'triplet' negative "
                                 "sampling (use src_index / dst_pos_index / dst_neg_index)")
            lab = np.asarray(_host(edge_label))
            if lab.ndim < 1 or lab.shape[0] != E:
                raise ValueError(f"{who}: edge_label must have one entry per seed edge "
                                 f"({E}), got shape {lab.shape}")
            if lab.dtype.kind not in "biuf":
                raise TypeError(f"{who}: edge_label must be numeric, got {lab.dtype}")
            lab = np.asarray(_host(_as_rtx(lab)))
            if mode == "binary" and lab.size and lab.min() == 0:
                lab = lab + 1      # PyG: 0 now means "negative"
            self._label = np.ascontiguousarray(lab)
        self._same = et[0] == et[2]
        self._sizes = (n_src, n_dst)
        if mode is not None:
            self._existing, self._population = self._existing_codes(data, et)
            if mode == "triplet":
                self._check_triplet_sources()
        super().__init__(data, num_neighbors, E, batch_size=batch_size, shuffle=shuffle,
                         drop_last=drop_last, seed=seed, prefetch=prefetch, replace=replace,
                         num_threads=num_threads, return_edge_id=return_edge_id,
                         transform=transform)

    # ------------------------------------------------------------ input
    def _edge_label_index(self, data: HeteroData, eli: Any) -> tuple[EdgeType, Any]:
        who = self._who
        if eli is None:
            raise ValueError(f"{who}: a heterogeneous graph needs edge_label_index: an edge "
                             "type or (edge_type, [2, E] ids)")
        if isinstance(eli, str) or (isinstance(eli, tuple) and eli and all(
                isinstance(p, str) for p in eli)):
            et = _edge_type(data, eli, who)       # an edge type, relation or (src, dst)
            idx = None
        elif isinstance(eli, (tuple, list)) and len(eli) == 2:
            # (edge type / relation / (src, dst), ids or None)
            et = _edge_type(data, tuple(eli[0]) if isinstance(eli[0], list) else eli[0], who)
            idx = eli[1]
        else:
            raise TypeError(f"{who}: edge_label_index must be an edge type or (edge_type, "
                            f"[2, E] ids), got {type(eli).__name__}")
        if idx is None:
            store = data[et]
            if "edge_index" not in store:
                raise ValueError(f"{who}: edge type {et!r} has no edge_index to take the seed "
                                 "edges from")
            idx = store["edge_index"]
        a = np.asarray(_host(idx)) if not isinstance(idx, EdgeIndex) else np.stack(
            [idx.src.indices, idx.dst.indices])
        if a.ndim != 2 or a.shape[0] != 2:
            raise ValueError(f"{who}: edge_label_index must have shape [2, E], got {a.shape}")
        return et, a

    def _existing_codes(self, data: HeteroData, et: EdgeType) -> tuple[np.ndarray, int]:
        """Sorted distinct codes of the pairs a negative must not be: the graph's edges
        of ``et`` and the seed edges (self-loops never count within one type)."""
        n_src, n_dst = self._sizes
        bip = not self._same
        pop_src, pop_dst = (n_src, n_dst) if bip else (n_src, max(n_src - 1, 0))
        if pop_src and pop_dst and pop_src > _MAX_POPULATION // pop_dst:
            raise ValueError(f"{self._who}: {n_src} x {n_dst} node pairs do not fit in int64 "
                             "codes")
        rows, cols = [self._rows], [self._cols]
        store = data[et]
        if "edge_index" in store:
            g = _host(store["edge_index"])
            g = np.stack([g.src.indices, g.dst.indices]) if isinstance(g, EdgeIndex) else \
                np.asarray(g)
            rows.append(g[0].astype(np.int64, copy=False))
            cols.append(g[1].astype(np.int64, copy=False))
        code, population = _encode(np.concatenate(rows), np.concatenate(cols), n_src, n_dst,
                                   bip, False)
        existing = np.unique(code)
        existing.setflags(write=False)
        return existing, population

    def _check_triplet_sources(self) -> None:
        """Every seed edge's source must have a destination it is not linked to."""
        n_src, n_dst = self._sizes
        room = n_dst - 1 if self._same else n_dst
        if room <= 0:
            raise ValueError(f"{self._who}: no negative destination exists ({n_dst} "
                             f"{self.edge_type[2]!r} nodes)")
        row, _ = _decode(self._existing, n_src, n_dst, not self._same, False)
        deg = np.bincount(row, minlength=n_src)
        full = np.flatnonzero(deg[self._rows] >= room)
        if full.size:
            i = int(full[0])
            raise ValueError(f"{self._who}: seed edge {i}'s source {int(self._rows[i])} is "
                             f"linked to every {self.edge_type[2]!r} node: no negative "
                             "destination exists for 'triplet' sampling")

    # ------------------------------------------------------------ batches
    def _negatives_binary(self, k: int, rng: np.random.Generator) -> tuple[np.ndarray,
                                                                           np.ndarray]:
        n_src, n_dst = self._sizes
        avail = self._population - int(self._existing.shape[0])
        codes = _sample_codes(self._existing, self._population, min(k, avail), rng)
        return _decode(codes, n_src, n_dst, not self._same, False)

    def _negatives_triplet(self, src: np.ndarray, amount: int,
                           rng: np.random.Generator) -> np.ndarray:
        """``amount`` destinations per source in ``src`` (row-major ``[B, amount]``),
        none linked to its source (nor the source itself, within one type)."""
        n_src, n_dst = self._sizes
        srep = np.repeat(src, amount)
        neg = rng.integers(0, n_dst, size=srep.shape[0], dtype=np.int64)
        ex = self._existing
        for _ in range(64):
            bad = self._taken(srep, neg, ex)
            nb = int(np.count_nonzero(bad))
            if nb == 0:
                return neg
            neg[bad] = rng.integers(0, n_dst, size=nb, dtype=np.int64)
        # sources linked to nearly everything: draw from their complement exactly
        for i in np.flatnonzero(self._taken(srep, neg, ex)):
            cand = np.arange(n_dst, dtype=np.int64)
            ok = ~self._taken(np.full(n_dst, srep[i]), cand, ex)
            neg[i] = rng.choice(cand[ok])
        return neg

    def _taken(self, row: np.ndarray, col: np.ndarray, ex: np.ndarray) -> np.ndarray:
        """Whether each pair ``(row[i], col[i])`` is no valid negative: a known pair
        (``ex``: sorted codes) or, within one node type, a self-loop."""
        n_src, n_dst = self._sizes
        if self._same:   # _encode's code without self-loops (they are marked taken)
            loop = row == col
            code = row * max(n_src - 1, 1) + (col - (col > row))
        else:
            loop = np.zeros(row.shape[0], dtype=bool)
            code = row * n_dst + col
        if ex.shape[0] == 0:
            return loop
        pos = np.minimum(np.searchsorted(ex, code), ex.shape[0] - 1)
        return (ex[pos] == code) | loop

    def _make(self, pos: np.ndarray, epoch: int, b: int) -> HeteroData:
        et = self.edge_type
        src, dst = self._rows[pos], self._cols[pos]
        num_pos = int(pos.shape[0])
        mode, amount = self.neg_sampling if self.neg_sampling else (None, 0.0)
        rng = np.random.default_rng([_TAG_NEGATIVE, self.seed, epoch, b]) if mode else None
        label = self._label[pos] if self._label is not None else None
        if mode == "binary":
            assert rng is not None
            ns, nd = self._negatives_binary(math.ceil(num_pos * amount), rng)
            src, dst = np.concatenate([src, ns]), np.concatenate([dst, nd])
            pos_label = label if label is not None else np.ones(num_pos, np.float32)
            label = np.concatenate([pos_label, np.zeros((ns.shape[0],) + pos_label.shape[1:],
                                                        pos_label.dtype)])
        elif mode == "triplet":
            assert rng is not None
            dst = np.concatenate([dst, self._negatives_triplet(src, int(amount), rng)])
        # the seeds: each end point type's distinct ids (PyG: unique, sorted)
        if self._same:
            seed_ids, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
            seeds = {et[0]: seed_ids}
            inv_src, inv_dst = inv[: src.shape[0]], inv[src.shape[0]:]
        else:
            s_ids, inv_src = np.unique(src, return_inverse=True)
            d_ids, inv_dst = np.unique(dst, return_inverse=True)
            seeds = {et[0]: s_ids, et[2]: d_ids}
        out = self.sampler.sample(seeds, epoch, b, num_threads=self.num_threads)
        batch = self._layout.batch(out)
        store = batch[et]
        store["input_id"] = from_numpy(np.ascontiguousarray(pos, dtype=np.int64))
        inv_src = inv_src.astype(np.int64, copy=False)
        inv_dst = inv_dst.astype(np.int64, copy=False)
        if mode == "triplet":
            batch[et[0]]["src_index"] = from_numpy(np.ascontiguousarray(inv_src))
            batch[et[2]]["dst_pos_index"] = from_numpy(np.ascontiguousarray(inv_dst[:num_pos]))
            neg = inv_dst[num_pos:].reshape(num_pos, -1)
            if neg.shape[1] == 1:
                neg = neg[:, 0]
            batch[et[2]]["dst_neg_index"] = from_numpy(np.ascontiguousarray(neg))
            for k in ("edge_label_index", "edge_label", "edge_label_time"):
                if k in store:
                    del store[k]
        else:
            store["edge_label_index"] = from_numpy(np.stack([inv_src, inv_dst]))
            if label is not None:
                store["edge_label"] = from_numpy(np.ascontiguousarray(label))
            elif "edge_label" in store:
                del store["edge_label"]   # the graph's own labels do not fit this batch
        return batch

    def __repr__(self) -> str:
        return (f"LinkNeighborLoader(edge_type={self.edge_type!r}, num_inputs={self.num_inputs}, "
                f"batch_size={self.batch_size}, neg_sampling={self.neg_sampling}, "
                f"prefetch={self.prefetch}, batches={len(self)})")

