"""Graph partitioning for distributed full-graph GNN training.

Each rank *owns* a disjoint share of the target nodes (``partition_nodes``:
METIS through pymetis when it is installed, else a balanced contiguous split)
and gets the subgraph its owned nodes' outputs depend on (``local_subgraph``):
for a model of ``num_layers`` message-passing layers, the ``num_layers``-hop
in-neighbourhood over every relation, *halo* nodes included, relabelled to
local indices.

Why the owned outputs are exact: let ``R_L`` be the owned nodes and, going
down, ``R_{l-1}`` = ``R_l`` plus the sources of every edge into ``R_l`` (per
relation).  The subgraph keeps the nodes ``R_0`` and *every* edge into
``R_1`` (a superset of every edge into ``R_l``, l >= 1).  A node of ``R_l``
then sees at layer ``l`` all its in-edges (so attention softmaxes normalise
over the same edges as on the full graph) and, by induction, exact layer
``l-1`` states of itself and its in-neighbours (all in ``R_{l-1}``).  Nodes
outside ``R_l`` get wrong (truncated) states at layer ``l``, but nothing
owned reads them.  Self-loops that a layer adds per node are the same: each
node of the subgraph gets exactly one, as on the full graph.

The local graph is a ``HeteroGraph`` whose target type lists the owned nodes
first (local ids ``0 .. num_owned-1``), then the halo; its masks are true on
owned nodes only, so a loss over ``graph.train_mask`` counts each training
node on exactly one rank.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..creation import from_numpy
from ..data.hetero_data import HeteroData
from ..datasets.hetero import EdgeType, HeteroGraph
from ..tensor import Tensor
from . import _comm

__all__ = ["LocalGraph", "graph_info", "khop_in_nodes", "local_subgraph", "partition_nodes",
           "shard"]


def _metis() -> Any:
    try:
        return importlib.import_module("pymetis")
    except ImportError:
        return None


def graph_info(data: HeteroData, target: str | None = None) -> dict[str, Any]:
    """What every rank must know of the whole graph (JSON-ready): node and
    edge types, the target type, the number of classes, feature sizes, node
    and edge counts, and the number of train / val / test target nodes."""
    t = target if target is not None else getattr(data, "target", None)
    if not isinstance(t, str) or t not in data.node_types:
        raise ValueError(f"graph_info: the graph has no target node type (got {t!r}; node "
                         f"types {data.node_types}): set data.target or pass target=")
    store = data[t]
    counts = {}
    for k in ("train", "val", "test"):
        m = store.get(f"{k}_mask")
        counts[k] = int(np.count_nonzero(_host(m))) if m is not None else 0
    y = store.get("y")
    ncls = getattr(data, "num_classes", None)
    if ncls is None:
        ncls = int(_host(y).max()) + 1 if y is not None and _host(y).size else 0
    return {
        "node_types": list(data.node_types),
        "edge_types": [list(et) for et in data.edge_types],
        "target": t,
        "num_classes": int(ncls),
        "num_features": {nt: int(_host(data[nt].x).shape[1]) for nt in data.node_types
                         if "x" in data[nt]},
        "num_nodes": {nt: int(n) for nt, n in data.num_nodes_dict.items()},
        "num_edges": {"__".join(et): int(n) for et, n in data.num_edges_dict.items()},
        "counts": counts,
    }


def _host(a: Any) -> np.ndarray:
    """A store value (numpy array or rtx tensor) as a numpy array."""
    return a.numpy() if isinstance(a, Tensor) else np.asarray(a)


def partition_nodes(data: HeteroGraph, num_parts: int, method: str = "auto") -> np.ndarray:
    """Part id (``0 .. num_parts-1``) of each target node.

    ``method``: ``"metis"`` (pymetis on the target type's own relations, made
    undirected; balanced node counts, fewer cut edges), ``"contiguous"``
    (``np.array_split`` of the node ids: balanced, no locality), ``"random"``
    (a seeded random permutation cut into equal ranges) or ``"auto"``
    (metis when pymetis is installed and the target type has a relation to
    itself, else contiguous).  Deterministic.
    """
    if not isinstance(num_parts, int) or num_parts < 1:
        raise ValueError(f"num_parts must be a positive int, got {num_parts!r}")
    if method not in ("auto", "metis", "contiguous", "random"):
        raise ValueError(f"unknown method {method!r}; expected 'auto', 'metis', 'contiguous' "
                         "or 'random'")
    t = data.target
    n = data.num_nodes_dict[t]
    if num_parts > max(n, 1):
        raise ValueError(f"cannot split {n} {t!r} nodes into {num_parts} non-empty parts")
    self_rel = [ei for (s, _, d), ei in data.edge_index_dict.items() if s == d == t]
    pm = _metis()
    if method == "metis" and pm is None:
        raise ModuleNotFoundError("method='metis' needs pymetis (pip install pymetis)",
                                  name="pymetis")
    if method == "metis" and not self_rel:
        raise ValueError(f"method='metis': the target type {t!r} has no relation to itself")
    if num_parts == 1:
        return np.zeros(n, dtype=np.int64)
    if method == "random":  # a seeded permutation cut into equal ranges
        parts = np.empty(n, dtype=np.int64)
        parts[np.random.default_rng(0).permutation(n)] = np.arange(n) * num_parts // n
        return parts
    if method == "contiguous" or pm is None or not self_rel:
        parts = np.empty(n, dtype=np.int64)
        for p, idx in enumerate(np.array_split(np.arange(n), num_parts)):
            parts[idx] = p
        return parts
    ei = np.concatenate(self_rel, axis=1)
    src = np.concatenate([ei[0], ei[1]])
    dst = np.concatenate([ei[1], ei[0]])
    keep = src != dst
    key = np.unique(src[keep] * n + dst[keep])  # undirected, no duplicates, sorted
    u, v = key // n, key % n
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=xadj[1:])
    csr = getattr(pm, "CSRAdjacency", None)  # pymetis >= 2025; xadj/adjncy before
    if csr is not None:
        _, membership = pm.part_graph(num_parts, csr(xadj, v))
    else:
        _, membership = pm.part_graph(num_parts, xadj=xadj, adjncy=v)
    parts = np.asarray(membership, dtype=np.int64)
    if np.bincount(parts, minlength=num_parts).min() == 0:  # METIS left a part empty
        return partition_nodes(data, num_parts, "contiguous")
    return parts


def khop_in_nodes(edge_index_dict: dict[EdgeType, np.ndarray], num_nodes_dict: dict[str, int],
                  seeds: dict[str, np.ndarray], num_hops: int) -> list[dict[str, np.ndarray]]:
    """``[R_0, R_1, ..., R_k]``: boolean masks per node type, ``R_k`` = the
    seeds, ``R_{l-1}`` = ``R_l`` plus every source of an edge into ``R_l``."""
    if num_hops < 1:
        raise ValueError(f"num_hops must be >= 1, got {num_hops}")
    cur = {}
    for nt, n in num_nodes_dict.items():
        m = np.zeros(n, dtype=bool)
        if nt in seeds:
            m[np.asarray(seeds[nt], dtype=np.int64)] = True
        cur[nt] = m
    levels = [cur]
    for _ in range(num_hops):
        nxt = {nt: m.copy() for nt, m in cur.items()}
        for (s, _, d), ei in edge_index_dict.items():
            hit = cur[d][ei[1]]
            nxt[s][ei[0][hit]] = True
        levels.append(nxt)
        cur = nxt
    return levels[::-1]


@dataclass
class LocalGraph:
    """One rank's share of a graph.

    Attributes:
        graph: the local ``HeteroGraph`` (relabelled; masks true on owned nodes
            only); its edges are every edge into ``R_1``, enough for every layer.
        global_ids: node type -> global id of each local node.
        num_owned: owned target nodes (local target ids ``0 .. num_owned-1``).
        layer_edge_index: per layer ``l = 0 .. k-1``, only the edges into
            ``R_{l+1}`` (local ids): what layer ``l`` needs, no more.  Layer 0's
            is ``graph.edge_index_dict``; later layers' are smaller (the last
            layer's only reach the owned nodes).
        info: the whole graph's figures every rank needs (``graph_info``:
            metadata, target, number of classes, feature sizes, node and edge
            counts, the number of train / val / test nodes).
        num_owned_dict, halo_owner: for a 1-hop shard (``halo_subgraph``,
            ``load_shard``; halo exchange): every node type is partitioned;
            node type -> number of owned nodes (local ids ``0 .. n-1``) and the
            owning part of each halo node (the local ids after the owned ones,
            sorted by owner, then global id).  ``None`` for a replicated
            ``local_subgraph``, where only target nodes are owned.
    """

    graph: HeteroGraph
    global_ids: dict[str, np.ndarray]
    num_owned: int
    layer_edge_index: list[dict[EdgeType, np.ndarray]]
    info: dict[str, Any] = field(default_factory=dict)
    num_owned_dict: dict[str, int] | None = None
    halo_owner: dict[str, np.ndarray] | None = None

    def stats(self) -> dict[str, Any]:
        """Node / halo / edge counts and the local graph's array bytes."""
        g = self.graph
        nbytes = sum(x.nbytes for x in g.x_dict.values())
        nbytes += sum(ei.nbytes for le in self.layer_edge_index for ei in le.values())
        return {
            "owned": self.num_owned,
            "layer_edges": [sum(int(ei.shape[1]) for ei in le.values())
                            for le in self.layer_edge_index],
            "nodes": g.num_nodes_dict,
            "halo_target": g.num_nodes_dict[g.target] - self.num_owned,
            "edges": g.num_edges,
            "graph_bytes": int(nbytes),
        }


def local_subgraph(data: HeteroGraph, owned: np.ndarray, num_hops: int) -> LocalGraph:
    """The subgraph the ``owned`` target nodes (global ids) need for a model
    of ``num_hops`` layers, relabelled (module docstring: why it is exact)."""
    t = data.target
    owned = np.unique(np.asarray(owned, dtype=np.int64))
    n_t = data.num_nodes_dict[t]
    if owned.size and (owned[0] < 0 or owned[-1] >= n_t):
        raise IndexError(f"owned ids must lie in [0, {n_t}) ({t!r} nodes)")
    levels = khop_in_nodes(data.edge_index_dict, data.num_nodes_dict, {t: owned}, num_hops)
    nodes, r1 = levels[0], levels[1]
    global_ids: dict[str, np.ndarray] = {}
    local_of: dict[str, np.ndarray] = {}
    for nt, m in nodes.items():
        if nt == t:
            m = m.copy()
            m[owned] = False
            ids = np.concatenate([owned, np.flatnonzero(m)])
        else:
            ids = np.flatnonzero(m)
        lut = np.full(m.shape[0], -1, dtype=np.int64)
        lut[ids] = np.arange(ids.size)
        global_ids[nt], local_of[nt] = ids, lut
    edges = {}
    for et, ei in data.edge_index_dict.items():
        s, _, d = et
        sel = ei[:, r1[d][ei[1]]]  # every edge into R_1 (order kept)
        edges[et] = np.stack([local_of[s][sel[0]], local_of[d][sel[1]]])
    layer_edges = [edges]
    for lv in levels[2:]:  # layer l >= 1 needs only the edges into R_{l+1}
        layer_edges.append({et: ei[:, lv[et[2]][global_ids[et[2]]][ei[1]]]
                            for et, ei in edges.items()})
    x_dict = {nt: np.ascontiguousarray(x[global_ids[nt]]) for nt, x in data.x_dict.items()}
    gt = global_ids[t]
    is_owned = np.zeros(gt.size, dtype=bool)
    is_owned[: owned.size] = True
    masks = [getattr(data, m)[gt] & is_owned for m in ("train_mask", "val_mask", "test_mask")]
    g = HeteroGraph(x_dict, edges, data.y[gt], masks[0], masks[1], masks[2], target=t)
    layer_edges[0] = g.edge_index_dict
    return LocalGraph(g, global_ids, int(owned.size), layer_edges, graph_info(data))


def shard(data: HeteroGraph, num_layers: int, rank: int | None = None,
          world_size: int | None = None, method: str = "auto") -> LocalGraph:
    """This rank's ``LocalGraph``: ``partition_nodes`` over ``world_size``
    parts (the same on every rank: it is deterministic), then
    ``local_subgraph`` of part ``rank``.  ``rank`` / ``world_size`` default to
    ``rtx.distributed``'s; then rank 0 partitions and broadcasts the assignment
    (so every rank agrees even if the partitioner were not deterministic)."""
    use_comm = rank is None and world_size is None and _comm.is_initialized()
    if rank is None or world_size is None:
        rank = _comm.rank() if rank is None else rank
        world_size = _comm.world_size() if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in a world of size {world_size}")
    if use_comm:  # rank 0 partitions, every rank gets the same assignment
        n = data.num_nodes_dict[data.target]
        err: Exception | None = None
        parts = np.zeros(n, dtype=np.int64)
        if rank == 0:
            try:
                parts = partition_nodes(data, world_size, method)
            except (ValueError, ImportError) as exc:
                err = exc
        flag = from_numpy(np.array([err is not None]))
        _comm.all_reduce(flag, op="lor")  # rank 0 failed: every rank raises
        if err is not None:
            raise err
        if bool(flag.item()):
            raise RuntimeError("partition: rank 0 could not partition the graph (its error "
                               "says why)")
        t = from_numpy(parts)
        _comm.broadcast(t, root=0)
        parts = t.numpy()
    else:
        parts = partition_nodes(data, world_size, method)
    return local_subgraph(data, np.flatnonzero(parts == rank), num_layers)
