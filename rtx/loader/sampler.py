"""Heterogeneous neighbour sampling: ``NeighborSampler`` (the kernel is ``rtx/_sample.pxi``).

PyG's semantics (``torch_geometric.sampler.NeighborSampler`` over pyg-lib's
``hetero_neighbor_sample``, non-disjoint, directed): the seeds are hop 0's
frontier of their type; at hop ``k``, for every edge type ``(s, r, d)`` in the
graph's order, every node of type ``d`` that hop ``k - 1`` added draws
``num_neighbors[(s, r, d)][k]`` of its ``s``-type in-neighbours (``-1``: all),
uniformly without replacement (``min(fanout, degree)`` of them) or with
replacement (exactly ``fanout`` when the degree is > 0).  Sources not sampled
before are appended to ``n_id[s]``: a node appears once per type, in
first-appearance order.  Edges come out over local ids.

A sample is a function of ``(seed, epoch, batch)`` and the seeds only: the same
bits at any thread count, in any thread.  See docs/sampling.md.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._kernels import HeteroSamplerKernel, first_out_of_bounds, snapshot_indices, uncached_frees
from .._threads import get_num_threads
from ..backend._index_check import as_index_array
from ..backend.index_plan import EdgeIndex, IndexPlan

EdgeType = tuple[str, str, str]
NumNeighbors = Sequence[int] | Mapping[Any, Sequence[int]]

__all__ = ["EdgeType", "HeteroSamplerOutput", "NeighborSampler"]

_MAX_FANOUT = 2**31 - 1
_U64 = 2**64
_I64 = 2**63


@dataclass(frozen=True, eq=False)
class HeteroSamplerOutput:
    """One sampled batch, laid out as PyG's ``NeighborLoader`` batch attributes.

    Attributes:
        n_id_dict: node type -> global ids of the sampled nodes (read-only int64;
            the seeds first in their type, in the order given, duplicates kept).
            Every node type is present (possibly empty).
        edge_index_dict: edge type -> ``EdgeIndex`` over local ids (``num_src =
            len(n_id_dict[src])``, ``num_dst = len(n_id_dict[dst])``), its
            destination grouping already built.  Every edge type is present.
        num_sampled_nodes_dict: node type -> nodes added per hop, ``[hop 0 (the
            seeds), hop 1, ...]`` (``num_hops + 1`` entries; PyG's
            ``num_sampled_nodes``).
        num_sampled_edges_dict: edge type -> edges sampled per hop (``num_hops``
            entries; PyG's ``num_sampled_edges``).
        input_type: the seeds' node type (``None`` for seeds of several types,
            given as a dict).
        batch_size: the number of seeds (``n_id_dict[input_type][:batch_size]``
            are the seeds; with a dict of seeds, their total:
            ``n_id_dict[t][:num_sampled_nodes_dict[t][0]]`` are type t's).
        e_id_dict: edge type -> the global edge id (position in the graph's
            ``edge_index``) of every sampled edge, read-only int64 (PyG's
            ``e_id``); ``None`` unless the sampler was built with
            ``return_edge_id=True``.
    """

    n_id_dict: dict[str, np.ndarray]
    edge_index_dict: dict[EdgeType, EdgeIndex]
    num_sampled_nodes_dict: dict[str, list[int]]
    num_sampled_edges_dict: dict[EdgeType, list[int]]
    input_type: str | None
    batch_size: int
    e_id_dict: dict[EdgeType, np.ndarray] | None = None

    @property
    def num_nodes_dict(self) -> dict[str, int]:
        return {nt: len(ids) for nt, ids in self.n_id_dict.items()}

    @property
    def num_edges(self) -> int:
        return sum(ei.num_edges for ei in self.edge_index_dict.values())

    def __repr__(self) -> str:
        nodes = ", ".join(f"{nt}={len(v)}" for nt, v in self.n_id_dict.items())
        return (f"HeteroSamplerOutput(input_type={self.input_type!r}, "
                f"batch_size={self.batch_size}, nodes=({nodes}), edges={self.num_edges})")


def _host(a: Any) -> Any:
    """Tensors (anything with ``.numpy()`` that is not an ndarray) as numpy arrays."""
    if not isinstance(a, np.ndarray) and hasattr(a, "numpy"):
        return a.numpy()
    return a


def _int(v: Any, what: str) -> int:
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{what} must be an int, got bool")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {type(v).__name__}") from None


def _read_num_nodes(data: Any) -> dict[str, int]:
    if not hasattr(data, "num_nodes_dict") or not hasattr(data, "edge_index_dict"):
        raise TypeError("NeighborSampler: data must have num_nodes_dict and edge_index_dict "
                        f"(a heterogeneous graph), got {type(data).__name__}")
    nnd = data.num_nodes_dict
    if not isinstance(nnd, Mapping) or not nnd:
        raise ValueError("NeighborSampler: data.num_nodes_dict must be a non-empty dict "
                         "node type -> number of nodes")
    out: dict[str, int] = {}
    for nt, n in nnd.items():
        if not isinstance(nt, str):
            raise TypeError(f"NeighborSampler: node type {nt!r} must be a str")
        k = _int(n, f"NeighborSampler: the number of {nt!r} nodes")
        if k < 0:
            raise ValueError(f"NeighborSampler: node type {nt!r} has {k} nodes")
        out[nt] = k
    return out


def _read_edges(data: Any, num_nodes: dict[str, int]) -> dict[EdgeType, np.ndarray]:
    eid = data.edge_index_dict
    if not isinstance(eid, Mapping):
        raise TypeError("NeighborSampler: data.edge_index_dict must be a dict edge type -> "
                        "[2, E] int array")
    out: dict[EdgeType, np.ndarray] = {}
    for et, ei in eid.items():
        if not (isinstance(et, tuple) and len(et) == 3 and all(isinstance(p, str) for p in et)):
            raise TypeError(f"NeighborSampler: edge type {et!r} must be a (src_type, relation, "
                            "dst_type) tuple of str")
        for nt in (et[0], et[2]):
            if nt not in num_nodes:
                raise ValueError(f"NeighborSampler: edge type {et!r} refers to node type {nt!r}, "
                                 f"which is not in num_nodes_dict ({sorted(num_nodes)})")
        a = _host(ei)
        if not isinstance(a, np.ndarray):
            try:
                a = np.asarray(a)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"NeighborSampler: edge_index of {et!r} must be an int [2, E] "
                                f"array ({exc})") from None
        if a.ndim != 2 or a.shape[0] != 2:
            raise ValueError(f"NeighborSampler: edge_index of {et!r} must have shape [2, E], "
                             f"got {tuple(a.shape)}")
        if a.dtype not in (np.int32, np.int64):
            raise TypeError(f"NeighborSampler: edge_index of {et!r} must be int32 or int64, "
                            f"got {a.dtype}")
        out[et] = a
    return out


def _edge_type_key(key: Any, edge_types: list[EdgeType]) -> EdgeType:
    if isinstance(key, str):
        parts = key.split("__")
        if len(parts) == 3:
            key = tuple(parts)
    if isinstance(key, tuple) and key in edge_types:
        return key
    raise ValueError(f"NeighborSampler: num_neighbors names edge type {key!r}, which is not "
                     f"in the graph (edge types: {edge_types})")


def _fanout_list(v: Any, what: str) -> tuple[int, ...]:
    if isinstance(v, (str, bytes)) or not isinstance(v, (Sequence, np.ndarray)):
        raise TypeError(f"NeighborSampler: {what} must be a list of ints, got "
                        f"{type(v).__name__}")
    out = []
    for k, f in enumerate(v):
        n = _int(f, f"NeighborSampler: {what}[{k}]")
        if n < -1:
            raise ValueError(f"NeighborSampler: {what}[{k}] = {n}: a fanout must be >= -1 "
                             "(-1 = all neighbours)")
        if n > _MAX_FANOUT:
            raise ValueError(f"NeighborSampler: {what}[{k}] = {n} is above {_MAX_FANOUT}")
        out.append(n)
    return tuple(out)


def _fanouts(num_neighbors: Any, edge_types: list[EdgeType]) -> dict[EdgeType, tuple[int, ...]]:
    """``num_neighbors`` as edge type -> fanouts per hop, with PyG's rules."""
    if isinstance(num_neighbors, Mapping):
        given = {}
        for key, v in num_neighbors.items():
            et = _edge_type_key(key, edge_types)
            if et in given:
                raise ValueError(f"NeighborSampler: num_neighbors names edge type {et!r} twice")
            given[et] = _fanout_list(v, f"num_neighbors[{et!r}]")
        missing = [et for et in edge_types if et not in given]
        if missing:
            raise ValueError(f"NeighborSampler: num_neighbors has no fanouts for edge type "
                             f"{missing[0]!r} (as in PyG, a dict must name every edge type; "
                             "give [0, ...] to leave one out)")
        hops = {len(v) for v in given.values()}
        if len(hops) > 1:
            raise ValueError("NeighborSampler: the number of hops must be the same for every "
                             f"edge type, got {sorted(hops)}")
        return {et: given[et] for et in edge_types}
    fan = _fanout_list(num_neighbors, "num_neighbors")
    return {et: fan for et in edge_types}


class NeighborSampler:
    """Uniform heterogeneous neighbour sampling with PyG's semantics, native and parallel.

    ``NeighborSampler(data, num_neighbors, replace=False, seed=0)``

    Args:
        data: any object with ``num_nodes_dict`` (node type -> count) and
            ``edge_index_dict`` (``(src_type, relation, dst_type)`` -> int32/int64
            ``[2, E]``, row 0 source, row 1 destination): ``rtx.datasets.HeteroGraph``,
            ``rtx.data.HeteroData``.  Features are never read: featureless node
            types work.  The graph is copied (a private snapshot, grouped by
            destination once): changing ``data`` afterwards does not change samples.
        num_neighbors: fanouts per hop, the same for every edge type (``[15, 10]``),
            or a dict edge type -> fanouts (keys as tuples or PyG's ``"src__rel__dst"``
            strings).  As in PyG a dict must name every edge type with the same
            number of hops.  ``-1`` = all neighbours, ``0`` = none.
        replace: sample with replacement.
        seed: the sampler's seed (an int in ``[0, 2**64)``).
        return_edge_id: also return each sampled edge's id (its position in the
            graph's ``edge_index``; ``HeteroSamplerOutput.e_id_dict``, PyG's
            ``e_id``), to gather edge attributes.  Keeps the destination
            grouping's permutation: 8 more bytes per edge of the graph.

    ``dtype`` is the graph's id dtype: int32 when every edge array is int32, else
    int64.  The private adjacency stores source ids in int32 whenever every node
    type has fewer than 2**31 nodes (4 bytes per edge, whatever the input dtype).
    Edge types are processed in ``edge_index_dict`` order (it decides the order of
    ``n_id``, as in PyG).
    """

    def __init__(self, data: Any, num_neighbors: NumNeighbors, replace: bool = False,
                 seed: int = 0, return_edge_id: bool = False) -> None:
        num_nodes = _read_num_nodes(data)
        edges = _read_edges(data, num_nodes)
        self.node_types: list[str] = list(num_nodes)
        self.edge_types: list[EdgeType] = list(edges)
        self.num_nodes_dict: dict[str, int] = dict(num_nodes)
        self.num_neighbors: dict[EdgeType, tuple[int, ...]] = _fanouts(num_neighbors,
                                                                       self.edge_types)
        if not isinstance(replace, (bool, np.bool_)):
            raise TypeError(f"NeighborSampler: replace must be a bool, got "
                            f"{type(replace).__name__}")
        self.replace = bool(replace)
        if not isinstance(return_edge_id, (bool, np.bool_)):
            raise TypeError(f"NeighborSampler: return_edge_id must be a bool, got "
                            f"{type(return_edge_id).__name__}")
        self.return_edge_id = bool(return_edge_id)
        s = _int(seed, "NeighborSampler: seed")
        if not 0 <= s < _U64:
            raise ValueError(f"NeighborSampler: seed must be in [0, 2**64), got {s}")
        self.seed = s
        if isinstance(num_neighbors, Mapping):
            self.num_hops: int = len(next(iter(self.num_neighbors.values()), ()))
        else:
            self.num_hops = len(_fanout_list(num_neighbors, "num_neighbors"))
        tidx = {nt: i for i, nt in enumerate(self.node_types)}
        self._type_index = tidx
        is32 = bool(edges) and all(a.dtype == np.int32 for a in edges.values())
        # the adjacency holds source ids: 4 bytes each whenever every node type
        # has fewer than 2**31 nodes, whatever dtype the graph came in
        col32 = all(n <= np.iinfo(np.int32).max for n in num_nodes.values())
        ptrs, cols, eperms = [], [], []
        nbytes = 0
        # (the plans, groupings and copies made per relation are one-off: freed
        # inside, they go back to the system, not into the allocator's cache)
        with uncached_frees():
            for et, a in edges.items():
                s_t, _, d_t = et
                op = f"NeighborSampler: edge_index of {et!r}"
                # private, checked copies; the destination plan's cached CSR grouping
                # orders each destination's sources by edge position
                src = IndexPlan(a[0], num_nodes[s_t], _op=f"{op} row 0 (sources)")
                dst = IndexPlan(a[1], num_nodes[d_t], _op=f"{op} row 1 (destinations)")
                ptr, perm = dst._grouping()  # the plan's own immutable snapshots (csr() copies)
                sidx = src._idx
                col = np.take(sidx, perm)   # checked against num_nodes[s_t] by the plan
                if col32 and col.dtype != np.int32:
                    col = col.astype(np.int32)
                elif not col32 and col.dtype != np.int64:
                    col = col.astype(np.int64)
                ptrs.append(ptr)
                cols.append(snapshot_indices(col, -1)[0])
                nbytes += ptr.nbytes + cols[-1].nbytes + (perm.nbytes if self.return_edge_id else 0)
                if self.return_edge_id:
                    eperms.append(perm)   # CSR position -> edge id (an immutable snapshot)
                del src, dst, perm, col, sidx, ptr
            fan = np.array([self.num_neighbors[et] for et in self.edge_types],
                           dtype=np.int64).reshape(len(self.edge_types), self.num_hops)
            self._kernel = HeteroSamplerKernel(
                np.array([num_nodes[nt] for nt in self.node_types], dtype=np.int64),
                np.array([tidx[et[0]] for et in self.edge_types], dtype=np.int64),
                np.array([tidx[et[2]] for et in self.edge_types], dtype=np.int64),
                ptrs, cols, fan, self.replace, eperms if self.return_edge_id else None)
            del ptrs, cols, eperms   # (what the kernel did not keep goes inside the block)
        self.dtype = np.dtype(np.int32 if is32 else np.int64)
        self._num_edges = {et: int(a.shape[1]) for et, a in edges.items()}
        self._nbytes = int(nbytes)

    @property
    def num_edges_dict(self) -> dict[EdgeType, int]:
        return dict(self._num_edges)

    @property
    def nbytes(self) -> int:
        """Bytes of the private adjacency: per relation the destination pointers
        (8 bytes per destination node + 8), the source ids (4 bytes per edge, 8
        when a node type has 2**31 nodes or more) and, with ``return_edge_id``,
        the edge ids (8 bytes per edge)."""
        return self._nbytes

    def _seed_ids(self, nt: Any, ids: Any, op: str) -> np.ndarray:
        if not isinstance(nt, str):
            raise TypeError(f"{op}: the seeds' node type must be a str, got "
                            f"{type(nt).__name__}")
        if nt not in self._type_index:
            raise ValueError(f"{op}: unknown node type {nt!r} (node types: "
                             f"{self.node_types})")
        arr = as_index_array(_host(ids), f"{op}: seeds")
        own = np.array(arr, dtype=np.int64, copy=True)   # private: checked, then sampled
        n = self.num_nodes_dict[nt]
        bad = first_out_of_bounds(own, n)
        if bad >= 0:
            raise IndexError(f"{op}: seeds[{bad}] = {int(own[bad])} is out of range for the "
                             f"{n} {nt!r} nodes")
        return own

    def _seeds(self, seeds: Any) -> tuple[str | None, dict[str, np.ndarray]]:
        op = "NeighborSampler.sample"
        if isinstance(seeds, Mapping):
            if not seeds:
                raise ValueError(f"{op}: seeds: no seeds (an empty dict)")
            out = {nt: self._seed_ids(nt, ids, op) for nt, ids in seeds.items()}
            if not any(len(v) for v in out.values()):
                raise ValueError(f"{op}: seeds: no seeds (an empty batch)")
            return None, out
        if not (isinstance(seeds, tuple) and len(seeds) == 2):
            raise TypeError(f"{op}: seeds must be a (node_type, ids) tuple or a dict "
                            f"node_type -> ids, got {type(seeds).__name__}")
        nt, ids = seeds
        own = self._seed_ids(nt, ids, op)
        if own.shape[0] == 0:
            raise ValueError(f"{op}: seeds: no seeds (an empty batch)")
        return nt, {nt: own}

    def sample(self, seeds: tuple[str, Any] | Mapping[str, Any], epoch: int = 0,
               batch: int = 0, num_threads: int | None = None) -> HeteroSamplerOutput:
        """Sample the neighbourhood of ``seeds = (node_type, ids)``, or of seeds of
        several node types at once, ``{node_type: ids}`` (all of them hop 0's
        frontier, as pyg-lib's ``seed_dict``: what a link loader samples from).

        ``epoch`` and ``batch`` (ints in ``[0, 2**63)``) select the random stream
        together with the sampler's seed: the same ``(seed, epoch, batch, seeds)``
        give the same sample, bit for bit, at any thread count.  Duplicate seeds
        are kept (PyG keeps them): each copy is a seed row of its own and draws
        the same neighbours; a sampled node equal to a seed maps to its first
        copy.  The GIL is released while sampling: safe to call from several
        threads at once.  ``num_threads``: the kernel's threads for this call
        (default ``rtx.get_num_threads()``; the sample never depends on it).
        """
        input_type, own = self._seeds(seeds)
        if num_threads is None:
            nthr = get_num_threads()
        else:
            nthr = _int(num_threads, "NeighborSampler.sample: num_threads")
            if nthr < 1:
                raise ValueError(f"NeighborSampler.sample: num_threads must be >= 1, got {nthr}")
        ep = _int(epoch, "NeighborSampler.sample: epoch")
        bt = _int(batch, "NeighborSampler.sample: batch")
        for name, v in (("epoch", ep), ("batch", bt)):
            if not 0 <= v < _I64:
                raise ValueError(f"NeighborSampler.sample: {name} must be in [0, 2**63), got {v}")
        n_id, src, dst, ptrs, perms, hop_nodes, hop_edges, e_id = self._kernel.sample(
            list(own.values()), [self._type_index[t] for t in own], self.seed, ep, bt, nthr)
        tidx = self._type_index
        eid: dict[EdgeType, EdgeIndex] = {}
        for j, et in enumerate(self.edge_types):
            ns, nd = len(n_id[tidx[et[0]]]), len(n_id[tidx[et[2]]])
            # the kernel's local ids are positions in the n_id it wrote (in range by
            # construction) and its edges are sorted by destination: see
            # IndexPlan._trusted
            eid[et] = EdgeIndex._trusted(IndexPlan._trusted(src[j], ns),
                                         IndexPlan._trusted(dst[j], nd, csr=(ptrs[j], perms[j])))
        return HeteroSamplerOutput(
            n_id_dict={t: n_id[i] for i, t in enumerate(self.node_types)},
            edge_index_dict=eid,
            num_sampled_nodes_dict={t: hop_nodes[:, i].tolist()
                                    for i, t in enumerate(self.node_types)},
            num_sampled_edges_dict={et: hop_edges[:, j].tolist()
                                    for j, et in enumerate(self.edge_types)},
            input_type=input_type,
            batch_size=sum(int(v.shape[0]) for v in own.values()),
            e_id_dict=None if e_id is None else dict(zip(self.edge_types, e_id, strict=True)),
        )

    def __repr__(self) -> str:
        fan = list(self.num_neighbors.values())
        same = all(f == fan[0] for f in fan) if fan else True
        nn = list(fan[0]) if fan and same else {k: list(v) for k, v in self.num_neighbors.items()}
        return (f"NeighborSampler(node_types={self.node_types}, edge_types={len(self.edge_types)}, "
                f"num_neighbors={nn}, replace={self.replace}, dtype={self.dtype})")
