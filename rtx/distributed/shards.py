"""Offline partitioning into per-rank shards with 1-hop halos (halo exchange).

Every node of every type is *owned* by one part (``partition_all``: METIS on
the whole graph with one balance constraint per node type, or a seeded
balanced random split, or contiguous ranges).  Part ``p``'s shard
(``halo_subgraph``) holds

* its owned nodes of every type (local ids ``0 .. num_owned[t]-1``), with
  their features, and on the target type their labels and masks;
* its **halo**: every node that is the source of an edge into an owned node
  but is owned elsewhere, with its features and its owner (local ids after the
  owned ones, sorted by owner, then global id, so that what one peer sends
  lands in one contiguous block);
* every edge whose destination it owns (so each edge is in exactly one shard),
  in local ids, in the graph's own order;
* the whole graph's counts (``graph_info``).

That is all one layer needs: an owned node's output reads its in-edges and
its in-neighbours' inputs.  Before every later layer the halo rows are fetched
from their owners (``rtx.distributed.halo``), so no rank ever holds more than
its share plus one hop.

``partition(data, num_parts, out_dir)`` writes ``part-00000.npz`` ...
(``rtx.save`` trees: nothing pickled) and then ``manifest.json``, all
atomically; ``load_shard(out_dir, part)`` reads one back, checking it against
the manifest (its SHA-256 and every index range), so a rank only ever reads
its own file.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from typing import Any

import numpy as np

from .._fileio import atomic_write
from ..data.hetero_data import HeteroData
from ..datasets.hetero import EdgeType, HeteroGraph
from ..serialization import load as rtx_load
from ..serialization import save as rtx_save
from .partitioning import LocalGraph, _host, graph_info

__all__ = ["MANIFEST", "SHARD_FORMAT", "halo_subgraph", "load_shard", "partition",
           "partition_all", "partition_stats", "read_manifest"]

MANIFEST = "manifest.json"
SHARD_FORMAT = "rtx-shards/1"
_METHODS = ("metis", "random", "contiguous")


def _key(et: Any) -> str:
    return "__".join(et)


def _check_parts(num_parts: Any, counts: dict[str, int]) -> int:
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)) \
            or num_parts < 1:
        raise ValueError(f"num_parts must be a positive int, got {num_parts!r}")
    return int(num_parts)


def partition_all(data: HeteroData, num_parts: int, method: str = "metis",
                  seed: int = 0) -> dict[str, np.ndarray]:
    """Part id (``0 .. num_parts-1``, int64) of every node of every type.

    ``method``: ``"metis"`` (pymetis on the whole graph made undirected, each
    node weighted by 1 + its in-degree, so every part gets about ``1/P`` of the
    nodes and of the edges; few cut edges), ``"random"`` (a seeded random permutation of
    each type cut into ``P`` equal ranges: balanced, no locality) or
    ``"contiguous"`` (``np.array_split`` of each type's ids).  Deterministic.
    """
    counts = data.num_nodes_dict
    p = _check_parts(num_parts, counts)
    if method not in _METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(_METHODS)}")
    pm = None
    if method == "metis":
        try:
            pm = importlib.import_module("pymetis")
        except ImportError:
            raise ModuleNotFoundError("method='metis' needs pymetis (pip install pymetis), "
                                      "or use method='random'", name="pymetis") from None
    if p == 1:
        return {nt: np.zeros(n, dtype=np.int64) for nt, n in counts.items()}
    if method == "random":
        rng = np.random.default_rng(seed)
        out = {}
        for nt, n in counts.items():
            parts = np.empty(n, dtype=np.int64)
            parts[rng.permutation(n)] = np.arange(n, dtype=np.int64) * p // max(n, 1)
            out[nt] = parts
        return out
    if method == "contiguous":
        return {nt: (np.arange(n, dtype=np.int64) * p // max(n, 1)) for nt, n in counts.items()}
    return _metis_all(data, p, pm)


def _metis_all(data: HeteroData, p: int, pm: Any) -> dict[str, np.ndarray]:
    counts = data.num_nodes_dict
    types = list(counts)
    off = dict(zip(types, np.cumsum([0] + [counts[t] for t in types])[:-1].tolist(),
                   strict=True))
    n = int(sum(counts.values()))
    keys = []
    for (s, _, d), ei in data.edge_index_dict.items():
        ei = _host(ei)
        u = ei[0].astype(np.int64) + off[s]
        v = ei[1].astype(np.int64) + off[d]
        keep = u != v
        u, v = u[keep], v[keep]
        keys.append(u * n + v)
        keys.append(v * n + u)
    key = np.unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
    del keys
    src, dst = key // n, key % n
    del key
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=xadj[1:])
    del src
    # one balance constraint: a node weighs 1 + its in-degree, so every part gets
    # about 1/P of the nodes and of the edge work (edges are stored with their
    # destination's owner).  (pymetis's multi-constraint weights, one per node
    # type, left parts with 30x the edges of others on synthetic_mag: not used.)
    vw = np.ones(n, dtype=np.int64)
    for (_, _, d), ei in data.edge_index_dict.items():
        vw += np.bincount(_host(ei)[1].astype(np.int64) + off[d], minlength=n)
    csr = getattr(pm, "CSRAdjacency", None)
    kwargs = {"vweights": vw}
    if csr is not None:
        _, membership = pm.part_graph(p, csr(xadj, dst), **kwargs)
    else:
        _, membership = pm.part_graph(p, xadj=xadj, adjncy=dst, **kwargs)
    m = np.asarray(membership, dtype=np.int64)
    return {t: np.ascontiguousarray(m[off[t]:off[t] + counts[t]]) for t in types}


def _validate_parts(data: HeteroData, parts: dict[str, np.ndarray], num_parts: int) -> None:
    for nt, n in data.num_nodes_dict.items():
        if nt not in parts:
            raise ValueError(f"parts has no assignment for node type {nt!r}")
        a = np.asarray(parts[nt])
        if a.shape != (n,) or a.dtype.kind not in "iu":
            raise ValueError(f"parts[{nt!r}] must be an int array of shape ({n},), got "
                             f"{a.dtype} {a.shape}")
        if n and (int(a.min()) < 0 or int(a.max()) >= num_parts):
            raise ValueError(f"parts[{nt!r}] holds a part outside [0, {num_parts})")


def halo_subgraph(data: HeteroData, parts: dict[str, np.ndarray], part: int,
                  num_parts: int | None = None, target: str | None = None) -> LocalGraph:
    """Part ``part``'s 1-hop shard (module docstring) as a ``LocalGraph`` with
    ``num_owned_dict`` and ``halo_owner`` set; its one ``layer_edge_index``
    entry (every edge into an owned node) serves every layer.  The same
    arrays ``partition`` writes for that part."""
    info = graph_info(data, target)
    P = int(num_parts) if num_parts is not None else \
        max((int(np.max(a)) + 1 for a in parts.values() if np.size(a)), default=1)
    _validate_parts(data, parts, P)
    if isinstance(part, bool) or not isinstance(part, int) or not 0 <= part < P:
        raise ValueError(f"part {part!r} is not in [0, {P})")
    return _tree_to_local(_shard_tree(data, parts, part, P, info), info, part, P, "halo_subgraph")


def _shard_tree(data: HeteroData, parts: dict[str, np.ndarray], part: int, num_parts: int,
                info: dict[str, Any]) -> dict[str, Any]:
    """Part ``part``'s shard as the tree ``partition`` writes (``rtx.save``):
    ``nodes[nt]`` = global ids (owned, then halo by owner and id), number
    owned, halo owners, features where the graph has them; ``target`` = the
    owned target nodes' labels and masks; ``edges`` = every edge into an owned
    node, in local ids, in the graph's order."""
    counts = data.num_nodes_dict
    t = info["target"]
    parts = {nt: np.asarray(a, dtype=np.int64) for nt, a in parts.items()}
    need = {nt: np.zeros(n, dtype=bool) for nt, n in counts.items()}
    eis = {et: _host(ei).astype(np.int64, copy=False) for et, ei in data.edge_index_dict.items()}
    into = {}
    for et, ei in eis.items():
        hit = parts[et[2]][ei[1]] == part
        into[et] = hit
        need[et[0]][ei[0][hit]] = True
    nodes: dict[str, Any] = {}
    lut = {}
    for nt, n in counts.items():
        own = np.flatnonzero(parts[nt] == part)
        halo = np.flatnonzero(need[nt] & (parts[nt] != part))
        halo = halo[np.lexsort((halo, parts[nt][halo]))]  # by owner, then global id
        ids = np.concatenate([own, halo])
        table = np.full(n, -1, dtype=np.int64)
        table[ids] = np.arange(ids.size)
        lut[nt] = table
        entry: dict[str, Any] = {"global_ids": ids, "num_owned": int(own.size),
                                 "halo_owner": parts[nt][halo]}
        if "x" in data[nt]:
            entry["x"] = np.ascontiguousarray(_host(data[nt].x)[ids])
        nodes[nt] = entry
    store = data[t]
    owned_t = nodes[t]["global_ids"][:nodes[t]["num_owned"]]
    tgt: dict[str, Any] = {}
    for k in ("y", "train_mask", "val_mask", "test_mask"):
        if k in store:
            tgt[k] = np.ascontiguousarray(_host(store[k])[owned_t])
    edges = {_key(et): np.stack([lut[et[0]][ei[0][into[et]]], lut[et[2]][ei[1][into[et]]]])
             for et, ei in eis.items()}
    return {"format": SHARD_FORMAT, "part": int(part), "num_parts": int(num_parts),
            "nodes": nodes, "target": tgt, "edges": edges}


def _tree_to_local(tree: dict[str, Any], info: dict[str, Any], part: int, p: int,
                   what: str) -> LocalGraph:
    """A shard tree, every index range checked, as a ``LocalGraph``
    (``ValueError`` naming ``what``)."""
    try:
        if tree["part"] != part or tree["num_parts"] != p:
            raise ValueError(f"it is part {tree['part']} of {tree['num_parts']}, expected "
                             f"part {part} of {p}")
        gids, owner, n_own, x_dict = {}, {}, {}, {}
        for nt in info["node_types"]:
            node = tree["nodes"][nt]
            ids = np.asarray(node["global_ids"], dtype=np.int64)
            n = info["num_nodes"][nt]
            k = int(node["num_owned"])
            ho = np.asarray(node["halo_owner"], dtype=np.int64)
            if ids.ndim != 1 or not 0 <= k <= ids.size or ho.shape != (ids.size - k,):
                raise ValueError(f"node type {nt!r}: inconsistent ids / owners")
            if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
                raise ValueError(f"node type {nt!r}: a global id outside [0, {n})")
            if ho.size and (int(ho.min()) < 0 or int(ho.max()) >= p or (ho == part).any()):
                raise ValueError(f"node type {nt!r}: a halo owner outside the other parts")
            if np.unique(ids).size != ids.size:
                raise ValueError(f"node type {nt!r}: a node listed twice")
            gids[nt], owner[nt], n_own[nt] = ids, ho, k
            if "x" not in node:
                raise ValueError(f"node type {nt!r} has no features (x): HetGAT training "
                                 "needs features on every node type")
            x = np.asarray(node["x"])
            f = info["num_features"].get(nt)
            if x.ndim != 2 or x.shape != (ids.size, f) or x.dtype.kind != "f":
                raise ValueError(f"node type {nt!r}: features {x.dtype} {x.shape}, expected "
                                 f"floats of shape ({ids.size}, {f})")
            x_dict[nt] = np.ascontiguousarray(x)
        t = info["target"]
        k = n_own[t]
        n_t = gids[t].size
        y = np.zeros(n_t, dtype=np.int64)
        masks = {m: np.zeros(n_t, dtype=bool) for m in ("train_mask", "val_mask", "test_mask")}
        tgt = tree["target"]
        for name, arr in (("y", y), *masks.items()):
            if name in tgt:
                a = np.asarray(tgt[name])
                if a.shape != (k,):
                    raise ValueError(f"target {name}: shape {a.shape}, expected ({k},)")
                arr[:k] = a
        edges = {}
        for et in info["edge_types"]:
            e = np.asarray(tree["edges"][_key(et)], dtype=np.int64)
            s, _, d = et
            if e.ndim != 2 or e.shape[0] != 2:
                raise ValueError(f"edges {_key(et)}: shape {e.shape}, expected [2, E]")
            if e.size and (int(e[0].min()) < 0 or int(e[0].max()) >= gids[s].size
                           or int(e[1].min()) < 0 or int(e[1].max()) >= n_own[d]):
                raise ValueError(f"edges {_key(et)}: an index outside the shard (every "
                                 "destination must be owned)")
            edges[tuple(et)] = e
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"{what}: not a shard written by rtx.distributed.partition "
                         f"({type(exc).__name__}: {exc})") from None
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    g = HeteroGraph(x_dict, edges, y, masks["train_mask"], masks["val_mask"],
                    masks["test_mask"], target=t)
    info = dict(info, part=int(part), num_parts=int(p))
    return LocalGraph(g, gids, k, [g.edge_index_dict], info, dict(n_own), owner)


# ------------------------------------------------------------------ files
def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def graph_digest(data: HeteroData) -> str:
    """A SHA-256 over the graph's arrays (features, edges, labels, masks) and
    names: two ranks hold the same graph iff their digests are equal."""
    h = hashlib.sha256()
    for nt in data.node_types:
        store = data[nt]
        h.update(f"node {nt} {store.num_nodes}\n".encode())
        for k in sorted(store.keys()):
            v = store[k]
            if isinstance(v, (np.ndarray,)) or hasattr(v, "numpy"):
                a = np.ascontiguousarray(_host(v))
                h.update(f"{k} {a.dtype.str} {a.shape}\n".encode())
                h.update(a.data)
    for et in data.edge_types:
        a = np.ascontiguousarray(_host(data[et].edge_index))
        h.update(f"edge {_key(et)} {a.dtype.str} {a.shape}\n".encode())
        h.update(a.data)
    return h.hexdigest()


def partition(data: HeteroData, num_parts: int, out_dir: str | os.PathLike[str],
              method: str = "metis", seed: int = 0,
              target: str | None = None) -> dict[str, Any]:
    """Partition ``data`` (an ``rtx.data.HeteroData``, e.g. a ``HeteroGraph``)
    into ``num_parts`` shards with 1-hop halos and write them to ``out_dir``:
    ``part-00000.npz`` ... (one per rank) and ``manifest.json`` (the parts'
    files with their SHA-256, the global counts, per-part statistics), each
    written atomically, the manifest last (a reader never sees a manifest
    naming a file that is not complete).  Returns the manifest.

    ``method``: see ``partition_all``.  Node types without features are
    partitioned and written too (statistics), but training needs features on
    every node type.  Train with ``mpiexec -n num_parts rtx-hetgat
    --distributed --shards out_dir``.
    """
    info = graph_info(data, target)
    p = _check_parts(num_parts, data.num_nodes_dict)
    parts = partition_all(data, p, method, seed)
    directory = os.fspath(out_dir)
    os.makedirs(directory, exist_ok=True)
    files = []
    for r in range(p):
        lg = _shard_tree(data, parts, r, p, info)
        name = f"part-{r:05d}.npz"
        path = os.path.join(directory, name)
        rtx_save(lg, path)
        files.append({"part": r, "file": name, "sha256": _sha256(path),
                      "bytes": os.path.getsize(path),
                      "owned": {nt: int(v["num_owned"]) for nt, v in lg["nodes"].items()},
                      "halo": {nt: int(v["global_ids"].size - v["num_owned"])
                               for nt, v in lg["nodes"].items()},
                      "edges": int(sum(e.shape[1] for e in lg["edges"].values()))})
    manifest = {"format": SHARD_FORMAT, "num_parts": p, "method": method, "seed": int(seed),
                "graph": info, "graph_sha256": graph_digest(data), "parts": files}
    manifest["digest"] = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
    with atomic_write(os.path.join(directory, MANIFEST), "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
    return manifest


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """``manifest.json`` of a shard directory, checked (``ValueError`` naming
    the problem; ``OSError`` when it cannot be read)."""
    path = os.path.join(os.fspath(directory), MANIFEST)
    with open(path, encoding="utf-8") as fh:
        try:
            m = json.load(fh)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not a shard manifest (bad JSON: {exc})") from None
    if not isinstance(m, dict) or m.get("format") != SHARD_FORMAT:
        raise ValueError(f"{path}: not a shard manifest (expected format {SHARD_FORMAT!r}; "
                         "written by rtx.distributed.partition)")
    want = m.get("digest")
    body = {k: v for k, v in m.items() if k != "digest"}
    if want != hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest():
        raise ValueError(f"{path}: the manifest's digest does not match its content (edited "
                         "or damaged)")
    p = m.get("num_parts")
    parts = m.get("parts")
    if not isinstance(p, int) or p < 1 or not isinstance(parts, list) or len(parts) != p or \
            [e.get("part") for e in parts] != list(range(p)):
        raise ValueError(f"{path}: the manifest lists no consistent parts")
    return m


def load_shard(directory: str | os.PathLike[str], part: int) -> LocalGraph:
    """Part ``part``'s shard from a directory ``partition`` wrote, as a
    ``LocalGraph`` (1-hop halo; ``info`` from the manifest).  Reads only that
    part's file; checks its SHA-256 against the manifest and every index
    range before building anything (``ValueError`` naming the file)."""
    m = read_manifest(directory)
    p = m["num_parts"]
    if isinstance(part, bool) or not isinstance(part, int) or not 0 <= part < p:
        raise ValueError(f"{os.fspath(directory)}: part {part!r} is not one of the "
                         f"{p} parts")
    entry = m["parts"][part]
    path = os.path.join(os.fspath(directory), entry["file"])
    if _sha256(path) != entry["sha256"]:
        raise ValueError(f"{path}: its SHA-256 differs from the manifest's (a damaged, "
                         "truncated or replaced file)")
    tree = rtx_load(path)
    info = dict(m["graph"], manifest_digest=m["digest"], graph_sha256=m["graph_sha256"])
    return _tree_to_local(tree, info, part, p, path)


# ------------------------------------------------------------- statistics
def layer_relations(info: dict[str, Any], num_layers: int) -> list[list[EdgeType]]:
    """The relations each layer of ``rtx.nn.HetGAT`` runs (only those that
    can reach the target: the last layer only into the target, ...)."""
    target = info["target"]
    ets: list[EdgeType] = [(et[0], et[1], et[2]) for et in info["edge_types"]]
    needed: list[set[str]] = [set() for _ in range(num_layers)]
    needed[-1] = {target}
    for layer in range(num_layers - 2, -1, -1):
        nxt = needed[layer + 1]
        needed[layer] = nxt | {s for s, _, d in ets if d in nxt}
    have = set(info["node_types"])
    out = []
    for layer in range(num_layers):
        rels = [et for et in ets if et[0] in have and et[2] in have and et[2] in needed[layer]]
        out.append(rels)
        have = {d for _, _, d in rels}
    return out


def partition_stats(data: HeteroData, parts: dict[str, np.ndarray], num_parts: int,
                    num_layers: int = 2, target: str | None = None) -> list[dict[str, Any]]:
    """Per part, without building any shard: owned and halo nodes per type,
    edges into owned nodes, and per layer ``l >= 1`` the halo rows per type
    that layer receives (the sources of its relations' edges into owned
    nodes that are owned elsewhere) -- the halo exchange's traffic."""
    info = graph_info(data, target)
    P = int(num_parts)
    _validate_parts(data, parts, P)
    counts = data.num_nodes_dict
    parts = {nt: np.asarray(a, dtype=np.int64) for nt, a in parts.items()}
    eis = {et: _host(ei).astype(np.int64, copy=False) for et, ei in data.edge_index_dict.items()}
    rels = layer_relations(info, num_layers)
    stats: list[dict[str, Any]] = [{
        "part": r, "owned": {nt: 0 for nt in counts}, "halo": {nt: 0 for nt in counts},
        "edges": 0, "layer_halo": [{nt: 0 for nt in counts} for _ in range(num_layers)],
        "layer_edges": [0] * num_layers} for r in range(P)]
    for nt in counts:
        for r, c in enumerate(np.bincount(parts[nt], minlength=P)):
            stats[r]["owned"][nt] = int(c)
    dst_part = {et: parts[et[2]][ei[1]] for et, ei in eis.items()}
    for et in eis:
        for r, c in enumerate(np.bincount(dst_part[et], minlength=P)):
            stats[r]["edges"] += int(c)
            for layer in range(num_layers):
                if et in rels[layer]:
                    stats[r]["layer_edges"][layer] += int(c)

    def halo_counts(ets: list[EdgeType], nt: str) -> np.ndarray:
        keys = []
        n = counts[nt]
        for et in ets:
            if et[0] != nt:
                continue
            src = eis[et][0]
            dp = dst_part[et]
            cross = parts[nt][src] != dp
            keys.append(dp[cross] * n + src[cross])
        if not keys:
            return np.zeros(P, dtype=np.int64)
        u = np.unique(np.concatenate(keys))
        return np.bincount(u // max(n, 1), minlength=P)

    for nt in counts:
        for r, c in enumerate(halo_counts(list(eis), nt)):
            stats[r]["halo"][nt] = int(c)
        for layer in range(num_layers):
            for r, c in enumerate(halo_counts(rels[layer], nt)):
                stats[r]["layer_halo"][layer][nt] = int(c)
    return stats
