"""rtx.loader.NeighborSampler against a brute-force reference.

The reference (``_replay``) re-runs PyG's hop-by-hop algorithm in pure Python,
taking from the sample only what is random -- the neighbours each (relation,
frontier node) pair drew -- after checking those draws against the true
neighbourhood (a sub-multiset of the node's in-edges, of the right size; all of
them, in edge order, for -1).  Everything deterministic (frontiers, first-
appearance order of n_id, local ids, per-hop counts, the destination grouping)
must then match exactly.  Uniformity: chi-square tests of the draws.
"""

from __future__ import annotations

import threading
from collections import Counter
from itertools import combinations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

import rtx
from rtx import _kernels
from rtx.datasets import synthetic_hetgraph
from rtx.loader import HeteroSamplerOutput, NeighborSampler


class Graph:
    """The two properties the sampler reads, over plain numpy arrays."""

    def __init__(self, num_nodes_dict, edge_index_dict):
        self.num_nodes_dict = num_nodes_dict
        self.edge_index_dict = edge_index_dict


def random_graph(rng, num_nodes=None, num_edges=None, dtype=np.int64):
    nn = num_nodes or {"a": 30, "b": 20, "c": 5}
    ne = num_edges or {("a", "to", "b"): 80, ("b", "to", "a"): 80, ("a", "self", "a"): 60,
                       ("c", "to", "a"): 40, ("b", "to", "c"): 30}
    eid = {}
    for (s, r, d), e in ne.items():
        # heavy-tailed in-degrees, multi-edges and self loops allowed
        dst = np.minimum((rng.pareto(1.2, e) * 2).astype(np.int64), nn[d] - 1) if nn[d] else \
            np.zeros(0, np.int64)
        src = rng.integers(0, max(nn[s], 1), e) if nn[s] else np.zeros(0, np.int64)
        if not nn[s] or not nn[d]:
            src = dst = np.zeros(0, np.int64)
        eid[(s, r, d)] = np.stack([src, dst]).astype(dtype)
    return Graph(nn, eid)


def in_neighbours(graph, et, v):
    """Sources of the edges into ``v`` of edge type ``et``, in edge order."""
    ei = np.asarray(graph.edge_index_dict[et])
    return ei[0][ei[1] == v].tolist()


def _replay(graph, sampler, out: HeteroSamplerOutput, seeds, replace):
    """Check ``out`` against PyG's algorithm replayed with ``out``'s own draws.
    ``seeds``: ``(node_type, ids)`` or a dict ``{node_type: ids}`` (pyg-lib's
    seed_dict: every type's seeds are hop 0's frontier)."""
    node_types = list(graph.num_nodes_dict)
    edge_types = list(graph.edge_index_dict)
    if isinstance(seeds, dict):
        seed_type = None
        seed_dict = {t: [int(v) for v in ids] for t, ids in seeds.items()}
    else:
        seed_type = seeds[0]
        seed_dict = {seed_type: [int(v) for v in seeds[1]]}
    fan = sampler.num_neighbors
    L = sampler.num_hops
    n_id = {t: [] for t in node_types}
    local = {t: {} for t in node_types}
    for t, ids in seed_dict.items():
        for i, v in enumerate(ids):
            n_id[t].append(v)
            local[t].setdefault(v, i)
    got_n_id = {t: out.n_id_dict[t].tolist() for t in node_types}
    # the kernel's draws, per (edge type, local destination), in order
    drawn = {}
    for et in edge_types:
        ei = out.edge_index_dict[et]
        src_g = [got_n_id[et[0]][i] for i in ei.src.indices.tolist()]
        per = {}
        for u, d in zip(src_g, ei.dst.indices.tolist(), strict=True):
            per.setdefault(d, []).append(u)
        drawn[et] = per
    begin = dict.fromkeys(node_types, 0)
    end = {t: len(n_id[t]) for t in node_types}
    rows = {et: [] for et in edge_types}
    cols = {et: [] for et in edge_types}
    hop_nodes = {t: [len(n_id[t])] for t in node_types}
    hop_edges = {et: [] for et in edge_types}
    used = {et: set() for et in edge_types}
    for k in range(L):
        for et in edge_types:
            s, _, d = et
            f = fan[et][k]
            ne = 0
            for i in range(begin[d], end[d]):
                v = n_id[d][i]
                true = in_neighbours(graph, et, v)
                deg = len(true)
                got = drawn[et].get(i, [])
                used[et].add(i)
                if f < 0 or (not replace and f >= deg):
                    assert got == true, (et, v, got, true)
                else:
                    want = 0 if deg == 0 else f
                    assert len(got) == want, (et, v, f, deg, got)
                    if replace:
                        assert set(got) <= set(true)
                    else:
                        # a sub-multiset, and in edge order: a subsequence of ``true``
                        it = iter(true)
                        assert all(u in it for u in got), (et, v, got, true)
                for u in got:
                    if u not in local[s]:
                        local[s][u] = len(n_id[s])
                        n_id[s].append(u)
                    rows[et].append(local[s][u])
                    cols[et].append(i)
                ne += len(got)
            hop_edges[et].append(ne)
        for t in node_types:
            hop_nodes[t].append(len(n_id[t]) - end[t])
            begin[t], end[t] = end[t], len(n_id[t])
    for et in edge_types:   # no edges into nodes that were never a frontier
        assert set(drawn[et]) <= used[et]
    assert got_n_id == n_id
    assert out.num_sampled_nodes_dict == hop_nodes
    assert out.num_sampled_edges_dict == hop_edges
    assert out.input_type == seed_type
    assert out.batch_size == sum(len(v) for v in seed_dict.values())
    for et in edge_types:
        ei = out.edge_index_dict[et]
        assert ei.src.indices.tolist() == rows[et]
        assert ei.dst.indices.tolist() == cols[et]
        assert ei.num_src == len(n_id[et[0]]) and ei.num_dst == len(n_id[et[2]])
        for arr in (ei.src.indices, ei.dst.indices):
            assert arr.dtype == np.int64 and not arr.flags.writeable
        # the prebuilt destination grouping is what a fresh plan computes
        assert ei.dst.is_grouped
        fresh = rtx.IndexPlan(np.array(cols[et], dtype=np.int64), ei.num_dst)
        for a, b in zip(ei.dst.csr(), fresh.csr(), strict=True):
            np.testing.assert_array_equal(a, b)
        # every local edge, read back through n_id, is an edge of the graph (per local
        # destination: the copies of a duplicate seed each draw on their own)
        true_edges = Counter(zip(*np.asarray(graph.edge_index_dict[et]).tolist(), strict=True))
        per_dst = {}
        for r, c in zip(rows[et], cols[et], strict=True):
            per_dst.setdefault(c, Counter())[(n_id[et[0]][r], n_id[et[2]][c])] += 1
        for c, sampled in per_dst.items():
            if not replace:
                assert not sampled - true_edges, (et, c)
            else:
                assert set(sampled) <= set(true_edges), (et, c)
    for t in node_types:
        assert out.n_id_dict[t].dtype == np.int64 and not out.n_id_dict[t].flags.writeable
        mine = seed_dict.get(t, [])
        assert out.n_id_dict[t][: len(mine)].tolist() == mine
    if sampler.return_edge_id:
        _check_edge_ids(graph, out, n_id, replace)
    else:
        assert out.e_id_dict is None
    return n_id


def _check_edge_ids(graph, out, n_id, replace):
    """Every sampled edge's id names an edge of the graph with its two end points;
    a destination's ids are distinct and ascending without replacement (edge order:
    multi-edges are told apart)."""
    assert list(out.e_id_dict) == list(graph.edge_index_dict)
    for et, e_id in out.e_id_dict.items():
        ei = out.edge_index_dict[et]
        g = np.asarray(graph.edge_index_dict[et]).astype(np.int64)
        assert e_id.dtype == np.int64 and not e_id.flags.writeable
        assert e_id.shape == (ei.num_edges,)
        if not ei.num_edges:
            continue
        assert 0 <= e_id.min() and e_id.max() < g.shape[1]
        np.testing.assert_array_equal(g[0, e_id], np.asarray(n_id[et[0]])[ei.src.indices])
        np.testing.assert_array_equal(g[1, e_id], np.asarray(n_id[et[2]])[ei.dst.indices])
        if not replace:
            d = ei.dst.indices
            same = d[1:] == d[:-1]
            assert (e_id[1:][same] > e_id[:-1][same]).all(), et


def assert_same(a: HeteroSamplerOutput, b: HeteroSamplerOutput):
    assert list(a.n_id_dict) == list(b.n_id_dict)
    for t in a.n_id_dict:
        np.testing.assert_array_equal(a.n_id_dict[t], b.n_id_dict[t])
    for et in a.edge_index_dict:
        x, y = a.edge_index_dict[et], b.edge_index_dict[et]
        np.testing.assert_array_equal(x.src.indices, y.src.indices)
        np.testing.assert_array_equal(x.dst.indices, y.dst.indices)
        for p, q in zip(x.dst.csr(), y.dst.csr(), strict=True):
            np.testing.assert_array_equal(p, q)
    assert a.num_sampled_nodes_dict == b.num_sampled_nodes_dict
    assert a.num_sampled_edges_dict == b.num_sampled_edges_dict
    if a.e_id_dict is not None and b.e_id_dict is not None:
        for et in a.e_id_dict:
            np.testing.assert_array_equal(a.e_id_dict[et], b.e_id_dict[et])


@pytest.fixture
def parallel_always():
    old = _kernels.set_sample_parallel_min(0)
    yield
    _kernels.set_sample_parallel_min(old)


# ------------------------------------------------------------------ correctness
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanouts", [[3, 2], [-1, 2], [1, -1, 4], [0, 5], [40, 40]])
def test_matches_reference(replace, fanouts):
    g = random_graph(np.random.default_rng(1))
    s = NeighborSampler(g, fanouts, replace=replace, seed=7)
    for batch in range(3):
        seeds = ("a", np.random.default_rng(batch).choice(30, 6, replace=False))
        _replay(g, s, s.sample(seeds, epoch=1, batch=batch), seeds, replace)


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanouts", [[3, 2], [-1, 2], [40, 1]])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_dict_seeds_match_reference(replace, fanouts, dtype):
    """Seeds of several node types at once (a link loader's two end point types):
    all of them hop 0's frontier, each type's seeds first in its n_id; a sampled
    node that is a seed of its type maps to that seed."""
    g = random_graph(np.random.default_rng(21), dtype=dtype)
    s = NeighborSampler(g, fanouts, replace=replace, seed=5, return_edge_id=True)
    for batch in range(3):
        rng = np.random.default_rng(100 + batch)
        seeds = {"a": rng.choice(30, 5, replace=False), "b": rng.integers(0, 20, 4),
                 "c": np.array([], np.int64) if batch == 1 else rng.choice(5, 2)}
        out = s.sample(seeds, epoch=2, batch=batch)
        _replay(g, s, out, seeds, replace)


def test_dict_of_one_type_is_the_tuple_form():
    g = random_graph(np.random.default_rng(22))
    s = NeighborSampler(g, [3, 2], seed=9)
    seeds = np.array([4, 1, 4, 7])
    a, b = s.sample(("a", seeds), 1, 2), s.sample({"a": seeds}, 1, 2)
    assert_same(a, b)
    assert (a.input_type, a.batch_size, b.input_type, b.batch_size) == ("a", 4, None, 4)


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanouts", [[3, 2], [-1, -1], [1, 40]])
def test_edge_ids_name_the_sampled_edges(replace, fanouts):
    g = random_graph(np.random.default_rng(23))     # multi-edges and self loops
    s = NeighborSampler(g, fanouts, replace=replace, seed=3, return_edge_id=True)
    assert s._kernel.has_edge_ids
    plain = NeighborSampler(g, fanouts, replace=replace, seed=3)
    assert not plain._kernel.has_edge_ids
    for batch in range(3):
        seeds = ("a", np.random.default_rng(batch).choice(30, 8, replace=False))
        out = s.sample(seeds, batch=batch)
        _replay(g, s, out, seeds, replace)
        # edge ids change nothing else
        assert_same(out, plain.sample(seeds, batch=batch))
    # -1: a destination's edge ids are exactly its in-edges, in edge order
    if fanouts == [-1, -1]:
        for et, e_id in out.e_id_dict.items():
            ei = out.edge_index_dict[et]
            dst_g = out.n_id_dict[et[2]][ei.dst.indices]
            col = np.asarray(g.edge_index_dict[et])[1]
            for v in np.unique(dst_g)[:5]:
                np.testing.assert_array_equal(np.unique(e_id[dst_g == v]),
                                              np.flatnonzero(col == v))
    with pytest.raises(TypeError, match="return_edge_id"):
        NeighborSampler(g, [1], return_edge_id=1)


def test_kernel_checks_edge_permutations():
    nn = np.array([3, 3], np.int64)
    ptr, _ = _kernels.snapshot_indices(np.array([0, 1, 1, 2], np.int64), -1)
    col, _ = _kernels.snapshot_indices(np.array([0, 2], np.int64), -1)
    one = np.array([0], np.int64)
    fan = np.array([[1]], np.int64)
    good, _ = _kernels.snapshot_indices(np.array([1, 0], np.int64), -1)
    k = _kernels.HeteroSamplerKernel(nn, one, one + 1, [ptr], [col], fan, False, [good])
    assert k.has_edge_ids
    with pytest.raises(TypeError, match="snapshots"):
        _kernels.HeteroSamplerKernel(nn, one, one + 1, [ptr], [col], fan, False,
                                     [np.array([1, 0], np.int64)])
    short, _ = _kernels.snapshot_indices(np.array([0], np.int64), -1)
    with pytest.raises(ValueError, match="entries for 2 edges"):
        _kernels.HeteroSamplerKernel(nn, one, one + 1, [ptr], [col], fan, False, [short])
    out_of_range, _ = _kernels.snapshot_indices(np.array([0, 2], np.int64), -1)
    with pytest.raises(IndexError, match="edge id"):
        _kernels.HeteroSamplerKernel(nn, one, one + 1, [ptr], [col], fan, False,
                                     [out_of_range])
    with pytest.raises(ValueError, match="per relation"):
        _kernels.HeteroSamplerKernel(nn, one, one + 1, [ptr], [col], fan, False, [])
    # the kernel's seed lists: one type each, distinct types, in range
    with pytest.raises(ValueError, match="given twice"):
        k.sample([one, one], [0, 0], 0, 0, 0, 1)
    with pytest.raises(ValueError, match="outside"):
        k.sample([one], [2], 0, 0, 0, 1)
    with pytest.raises(ValueError, match="one seed type per seed array"):
        k.sample([one], [0, 1], 0, 0, 0, 1)
    with pytest.raises(ValueError, match="no seeds"):
        k.sample([one[:0]], [0], 0, 0, 0, 1)
    with pytest.raises(IndexError, match=r"seeds\[0\] = 3"):
        k.sample([one, one + 3], [0, 1], 0, 0, 0, 1)   # fine for type 0, not for 1 (3 nodes)
    res = k.sample([one, one + 1], [0, 1], 0, 0, 0, 1)
    assert [a.tolist() for a in res[0]] == [[0], [1]]


def test_all_neighbour_hops_equal_the_true_neighbourhood():
    g = random_graph(np.random.default_rng(2))
    s = NeighborSampler(g, [-1, -1])
    seeds = ("b", np.arange(20))
    out = s.sample(seeds)
    n_id = _replay(g, s, out, seeds, False)
    # hop 1 from all "b" nodes: every edge into b (and nothing else) is sampled
    ei = out.edge_index_dict[("a", "to", "b")]
    got = sorted(zip((np.array(n_id["a"])[ei.src.indices]).tolist(),
                     (np.array(n_id["b"])[ei.dst.indices]).tolist(), strict=True))
    want = sorted(zip(*g.edge_index_dict[("a", "to", "b")].tolist(), strict=True))
    assert got == want


def test_dict_fanouts_per_edge_type():
    g = random_graph(np.random.default_rng(3))
    fan = {et: [2, 1] for et in g.edge_index_dict}
    fan[("c", "to", "a")] = [0, 0]
    fan["a__self__a"] = fan.pop(("a", "self", "a"))   # PyG's string keys work too
    fan[("a", "self", "a")] = fan.pop("a__self__a")
    s = NeighborSampler(g, fan)
    out = s.sample(("a", [0, 1, 2, 3]))
    assert out.edge_index_dict[("c", "to", "a")].num_edges == 0
    _replay(g, s, out, ("a", [0, 1, 2, 3]), False)
    s2 = NeighborSampler(g, {"__".join(et): v for et, v in fan.items()})
    assert_same(out, s2.sample(("a", [0, 1, 2, 3])))


def test_zero_hops_returns_the_seeds():
    g = random_graph(np.random.default_rng(4))
    s = NeighborSampler(g, [])
    out = s.sample(("a", [5, 2]))
    assert out.n_id_dict["a"].tolist() == [5, 2] and out.num_edges == 0
    assert out.num_sampled_nodes_dict == {"a": [2], "b": [0], "c": [0]}
    assert all(v == [] for v in out.num_sampled_edges_dict.values())


def test_duplicate_seeds_are_kept_and_map_to_their_first_copy():
    g = random_graph(np.random.default_rng(5))
    s = NeighborSampler(g, [-1, 3])
    seeds = ("a", [0, 3, 0, 0, 3])
    out = s.sample(seeds)
    _replay(g, s, out, seeds, False)
    assert out.n_id_dict["a"][:5].tolist() == [0, 3, 0, 0, 3]
    ei = out.edge_index_dict[("a", "self", "a")]
    # each copy draws the same neighbours (the stream is keyed by the global id)
    by_dst = {}
    for u, d in zip(ei.src.indices.tolist(), ei.dst.indices.tolist(), strict=True):
        by_dst.setdefault(d, []).append(u)
    assert by_dst.get(0) == by_dst.get(2) == by_dst.get(3)
    # a sampled node equal to a seed is the seed's first copy, never a later one
    assert not ({2, 3, 4} & set(ei.src.indices.tolist()))


def test_a_nodes_draws_do_not_depend_on_its_batch_mates():
    """The stream is keyed by the node's global id: the same seed draws the same
    neighbours wherever it sits in the batch, next to any other seeds, and a
    duplicate seed's copies draw alike (at a random hop)."""
    g = random_graph(np.random.default_rng(16))
    s = NeighborSampler(g, [2], seed=4)
    et = ("a", "self", "a")

    def draws(ids):
        out = s.sample(("a", ids), epoch=3, batch=1)
        ei = out.edge_index_dict[et]
        n_id = out.n_id_dict["a"]
        res = {}
        for u, d in zip(n_id[ei.src.indices].tolist(), ei.dst.indices.tolist(), strict=True):
            res.setdefault(d, []).append(u)
        return [res.get(i, []) for i in range(len(ids))]

    alone = {v: draws([v])[0] for v in range(30)}
    assert sum(len(set(in_neighbours(g, et, v))) > 2 for v in range(30)) > 3   # random draws
    for ids in ([0, 1, 2, 3], [3, 2, 1, 0], [7, 0, 7, 19, 0, 7], list(range(29, -1, -1))):
        assert draws(ids) == [alone[v] for v in ids]


def test_nodes_without_neighbours_and_empty_relations():
    nn = {"a": 4, "b": 3, "z": 0}
    eid = {("a", "to", "b"): np.array([[0, 1], [0, 0]]),
           ("b", "to", "a"): np.zeros((2, 0), np.int64),
           ("z", "to", "a"): np.zeros((2, 0), np.int64),
           ("a", "to", "z"): np.zeros((2, 0), np.int64)}
    g = Graph(nn, eid)
    for replace in (False, True):
        s = NeighborSampler(g, [5, 5], replace=replace)
        seeds = ("b", [2, 1, 0])
        out = s.sample(seeds)
        _replay(g, s, out, seeds, replace)
        assert out.n_id_dict["z"].shape == (0,)
        ei = out.edge_index_dict[("a", "to", "b")]
        assert ei.num_edges == (5 if replace else 2)     # fanout 5; degree 2
        assert set(ei.dst.indices.tolist()) == {2}        # only seed 0 (local 2) has any
        assert ei.dst.counts().tolist() == [0, 0, 5 if replace else 2]


def test_featureless_node_types_work():
    """Only num_nodes_dict and edge_index_dict are read (no x_dict anywhere)."""
    g = Graph({"paper": 5, "author": 7},
              {("author", "writes", "paper"): np.array([[0, 1, 2, 6], [0, 0, 4, 4]])})
    out = NeighborSampler(g, [2]).sample(("paper", [4]))
    assert sorted(out.n_id_dict["author"].tolist()) == [2, 6]


def test_heterograph_input():
    g = synthetic_hetgraph(400, seed=1)
    s = NeighborSampler(g, [4, 3])
    seeds = ("paper", np.flatnonzero(g.train_mask)[:32])
    _replay(g, s, s.sample(seeds), seeds, False)


def test_torch_tensors_as_input():
    torch = pytest.importorskip("torch")
    g = random_graph(np.random.default_rng(6))
    gt = Graph(g.num_nodes_dict, {k: torch.from_numpy(v) for k, v in g.edge_index_dict.items()})
    a = NeighborSampler(g, [3, 3], seed=2).sample(("a", np.arange(8)))
    b = NeighborSampler(gt, [3, 3], seed=2).sample(("a", torch.arange(8)))
    assert_same(a, b)


# ---------------------------------------------------------------- determinism
def test_int32_and_int64_graphs_give_the_same_sample():
    g64 = random_graph(np.random.default_rng(7))
    g32 = Graph(g64.num_nodes_dict, {k: v.astype(np.int32) for k, v in
                                     g64.edge_index_dict.items()})
    for replace in (False, True):
        s64 = NeighborSampler(g64, [4, 3], replace=replace, seed=3)
        s32 = NeighborSampler(g32, [4, 3], replace=replace, seed=3)
        assert s64.dtype == np.int64 and s32.dtype == np.int32
        seeds = ("a", np.arange(0, 30, 2, dtype=np.int32))
        out = s32.sample(seeds, epoch=2, batch=5)
        _replay(g32, s32, out, seeds, replace)
        assert_same(out, s64.sample(seeds, epoch=2, batch=5))
    # mixed dtypes: the sampler works in int64
    gm = Graph(g64.num_nodes_dict, dict(g64.edge_index_dict))
    gm.edge_index_dict[("a", "to", "b")] = g32.edge_index_dict[("a", "to", "b")]
    sm = NeighborSampler(gm, [4, 3], seed=3)
    assert sm.dtype == np.int64
    assert_same(sm.sample(("a", [1, 2])), NeighborSampler(g64, [4, 3], seed=3).sample(
        ("a", [1, 2])))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("eid", [False, True])
def test_adjacency_keeps_4_byte_source_ids_whatever_the_input_dtype(dtype, eid):
    g = random_graph(np.random.default_rng(7))
    g = Graph(g.num_nodes_dict, {k: v.astype(dtype) for k, v in g.edge_index_dict.items()})
    s = NeighborSampler(g, [4, 3], seed=3, return_edge_id=eid)
    want = sum(8 * (g.num_nodes_dict[et[2]] + 1) + (4 + 8 * eid) * ei.shape[1]
               for et, ei in g.edge_index_dict.items())
    assert s.nbytes == want
    assert s.dtype == dtype


def test_same_seed_epoch_batch_same_sample_others_differ():
    g = random_graph(np.random.default_rng(8), num_nodes={"a": 300, "b": 200, "c": 50},
                     num_edges={("a", "to", "b"): 3000, ("b", "to", "a"): 3000,
                                ("a", "self", "a"): 3000, ("c", "to", "a"): 500,
                                ("b", "to", "c"): 500})
    s = NeighborSampler(g, [3, 2], seed=11)
    seeds = ("a", np.arange(40))
    base = s.sample(seeds, epoch=1, batch=2)
    assert_same(base, s.sample(seeds, epoch=1, batch=2))
    assert_same(base, NeighborSampler(g, [3, 2], seed=11).sample(seeds, epoch=1, batch=2))

    def key(o):
        return [o.n_id_dict[t].tolist() for t in o.n_id_dict] + [
            o.edge_index_dict[et].src.indices.tolist() for et in o.edge_index_dict]

    others = [s.sample(seeds, epoch=1, batch=3), s.sample(seeds, epoch=2, batch=2),
              NeighborSampler(g, [3, 2], seed=12).sample(seeds, epoch=1, batch=2)]
    for o in others:
        assert key(o) != key(base)


@pytest.mark.parametrize("replace", [False, True])
def test_same_bits_at_any_thread_count(replace, parallel_always):
    g = random_graph(np.random.default_rng(9), num_nodes={"a": 3000, "b": 2000, "c": 40},
                     num_edges={("a", "to", "b"): 30000, ("b", "to", "a"): 30000,
                                ("a", "self", "a"): 20000, ("c", "to", "a"): 3000,
                                ("b", "to", "c"): 5000})
    # fanout 50 > FLOYD_SCAN_MAX exercises the hash-set membership on the "c" nodes
    s = NeighborSampler(g, [5, 50], replace=replace, seed=5)
    seeds = ("a", np.arange(0, 3000, 3))
    outs = []
    for t in (1, 2, 3):
        rtx.set_num_threads(t)
        outs.append(s.sample(seeds, epoch=0, batch=1))
        if t > 1 and _kernels.openmp_enabled():
            assert len(_kernels.last_kernel_thread_ids()) > 1
    _replay(g, s, outs[0], seeds, replace)
    for o in outs[1:]:
        assert_same(outs[0], o)
    # and with the serial cut-over at its default
    _kernels.set_sample_parallel_min(1 << 40)
    rtx.set_num_threads(2)
    assert_same(outs[0], s.sample(seeds, epoch=0, batch=1))


def test_dict_seeds_and_edge_ids_same_bits_at_any_thread_count(parallel_always):
    g = random_graph(np.random.default_rng(19), num_nodes={"a": 3000, "b": 2000, "c": 40},
                     num_edges={("a", "to", "b"): 30000, ("b", "to", "a"): 30000,
                                ("a", "self", "a"): 20000, ("c", "to", "a"): 3000,
                                ("b", "to", "c"): 5000})
    s = NeighborSampler(g, [5, 50], seed=6, return_edge_id=True)
    seeds = {"a": np.arange(0, 3000, 5), "b": np.arange(1, 2000, 4)}
    outs = []
    try:
        for t in (1, 2, 3):
            rtx.set_num_threads(t)
            outs.append(s.sample(seeds, epoch=1, batch=4))
    finally:
        rtx.set_num_threads(2)
    _replay(g, s, outs[0], seeds, False)
    for o in outs[1:]:
        assert_same(outs[0], o)
        for et in o.e_id_dict:
            np.testing.assert_array_equal(outs[0].e_id_dict[et], o.e_id_dict[et])


def test_snapshot_mutating_the_input_changes_nothing():
    g = random_graph(np.random.default_rng(10))
    nn = dict(g.num_nodes_dict)
    s = NeighborSampler(g, [3, 3], seed=1)
    seeds_arr = np.arange(10)
    before = s.sample(("a", seeds_arr))
    for ei in g.edge_index_dict.values():
        ei[...] = ei[:, ::-1].copy()       # rewrite every edge array in place
        ei[0, :3] = 0
    g.num_nodes_dict["a"] = 1
    g.edge_index_dict.clear()
    seeds_arr[:] = 0
    assert_same(before, s.sample(("a", np.arange(10))))
    assert s.num_nodes_dict == nn


def test_outputs_are_independent_of_later_calls():
    g = random_graph(np.random.default_rng(11))
    s = NeighborSampler(g, [3, 3])
    a = s.sample(("a", [1, 2, 3]))
    keep = {t: v.copy() for t, v in a.n_id_dict.items()}
    s.sample(("b", [1, 2, 3]))
    s.sample(("a", [4, 5]), batch=9)
    for t in keep:
        np.testing.assert_array_equal(keep[t], a.n_id_dict[t])
    with pytest.raises(ValueError):
        a.n_id_dict["a"][0] = 5


def test_two_threads_at_once_give_the_serial_samples(parallel_always):
    g = random_graph(np.random.default_rng(12), num_nodes={"a": 2000, "b": 1000, "c": 30},
                     num_edges={("a", "to", "b"): 20000, ("b", "to", "a"): 20000,
                                ("a", "self", "a"): 20000, ("c", "to", "a"): 3000,
                                ("b", "to", "c"): 3000})
    s = NeighborSampler(g, [4, 4], seed=3)
    rng = np.random.default_rng(0)
    jobs = [(("a", rng.choice(2000, 64, replace=False)), b) for b in range(24)]
    serial = [s.sample(sd, batch=b) for sd, b in jobs]
    results = [None] * len(jobs)
    errors = []

    def work(which):
        try:
            for i in which:
                results[i] = s.sample(jobs[i][0], batch=jobs[i][1])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    rtx.set_num_threads(2)
    threads = [threading.Thread(target=work, args=(range(k, len(jobs), 2),)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for a, b in zip(serial, results, strict=True):
        assert_same(a, b)


# ----------------------------------------------------------------- uniformity
def _star(n_dst, deg):
    """n_dst destinations, each with the same ``deg`` distinct sources 0..deg-1."""
    src = np.tile(np.arange(deg), n_dst)
    dst = np.repeat(np.arange(n_dst), deg)
    return Graph({"s": deg, "d": n_dst}, {("s", "to", "d"): np.stack([src, dst])})


def _draws(out, g):
    """Per seed, the source ids it drew (in order)."""
    ei = out.edge_index_dict[("s", "to", "d")]
    src = out.n_id_dict["s"][ei.src.indices]
    res = {}
    for u, d in zip(src.tolist(), ei.dst.indices.tolist(), strict=True):
        res.setdefault(d, []).append(u)
    return res


@pytest.mark.parametrize("fanout", [3, 40])
def test_without_replacement_is_uniform(fanout):
    deg = 10 if fanout == 3 else 64
    g = _star(2000, deg)
    s = NeighborSampler(g, [fanout], seed=0)
    counts = np.zeros(deg)
    for batch in range(3):
        for got in _draws(s.sample(("d", np.arange(2000)), batch=batch), g).values():
            assert len(got) == fanout and len(set(got)) == fanout
            np.add.at(counts, got, 1)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_without_replacement_subsets_are_uniform():
    """Every 2-subset of 5 neighbours equally likely (not just every neighbour)."""
    g = _star(3000, 5)
    s = NeighborSampler(g, [2], seed=1)
    subsets = Counter()
    for batch in range(2):
        for got in _draws(s.sample(("d", np.arange(3000)), batch=batch), g).values():
            assert got == sorted(got)                 # in edge order
            subsets[tuple(got)] += 1
    obs = np.array([subsets[c] for c in combinations(range(5), 2)])
    assert obs.sum() == 6000
    assert stats.chisquare(obs).pvalue > 1e-3


def test_with_replacement_is_uniform_and_independent():
    g = _star(3000, 6)
    s = NeighborSampler(g, [4], replace=True, seed=2)
    pairs = np.zeros((6, 6))
    counts = np.zeros(6)
    for got in _draws(s.sample(("d", np.arange(3000))), g).values():
        assert len(got) == 4
        np.add.at(counts, got, 1)
        pairs[got[0], got[1]] += 1
        pairs[got[2], got[3]] += 1
    assert stats.chisquare(counts).pvalue > 1e-3
    assert stats.chisquare(pairs.ravel()).pvalue > 1e-3
    # with replacement repeats happen (about 1 - 6*5*4*3/6**4 = 72% of the seeds)
    reps = sum(len(set(v)) < 4 for v in _draws(s.sample(("d", np.arange(3000))), g).values())
    assert 0.6 * 3000 < reps < 0.85 * 3000


def test_uniform_across_batches_for_one_node():
    """One node's draws over many batches (the stream changes with the batch)."""
    g = _star(1, 8)
    s = NeighborSampler(g, [1], seed=3)
    counts = np.zeros(8)
    for batch in range(1600):
        counts[s.sample(("d", [0]), batch=batch).n_id_dict["s"][0]] += 1
    assert stats.chisquare(counts).pvalue > 1e-3


# ------------------------------------------------------------------ bad input
def test_bad_num_neighbors():
    g = random_graph(np.random.default_rng(13))
    ets = list(g.edge_index_dict)
    with pytest.raises(ValueError, match="not in the graph"):
        NeighborSampler(g, {**{et: [1] for et in ets}, ("a", "nope", "b"): [1]})
    with pytest.raises(ValueError, match="not in the graph"):
        NeighborSampler(g, {**{et: [1] for et in ets}, "a__nope__b": [1]})
    with pytest.raises(ValueError, match="no fanouts for edge type"):
        NeighborSampler(g, {ets[0]: [1]})
    with pytest.raises(ValueError, match="number of hops"):
        NeighborSampler(g, {et: [1] * (1 + (i == 0)) for i, et in enumerate(ets)})
    with pytest.raises(ValueError, match=">= -1"):
        NeighborSampler(g, [2, -2])
    with pytest.raises(ValueError, match="above"):
        NeighborSampler(g, [2**31])
    for bad in ([1.5], [True], ["3"], [None]):
        with pytest.raises(TypeError):
            NeighborSampler(g, bad)
    for bad in (3, "15", None):
        with pytest.raises(TypeError):
            NeighborSampler(g, bad)
    with pytest.raises(TypeError):
        NeighborSampler(g, [1], replace=1)
    for seed, exc in ((-1, ValueError), (2**64, ValueError), (1.0, TypeError)):
        with pytest.raises(exc):
            NeighborSampler(g, [1], seed=seed)


def test_bad_graph():
    with pytest.raises(TypeError, match="num_nodes_dict"):
        NeighborSampler(object(), [1])
    with pytest.raises(ValueError, match="not in num_nodes_dict"):
        NeighborSampler(Graph({"a": 3}, {("a", "r", "b"): np.zeros((2, 0), np.int64)}), [1])
    with pytest.raises(IndexError, match="sources"):
        NeighborSampler(Graph({"a": 3, "b": 2}, {("a", "r", "b"): np.array([[3], [0]])}), [1])
    with pytest.raises(IndexError, match="destinations"):
        NeighborSampler(Graph({"a": 3, "b": 2}, {("a", "r", "b"): np.array([[0], [-1]])}), [1])
    with pytest.raises(TypeError, match="int32 or int64"):
        NeighborSampler(Graph({"a": 3}, {("a", "r", "a"): np.zeros((2, 1), np.float64)}), [1])
    with pytest.raises(TypeError, match="int32 or int64"):
        NeighborSampler(Graph({"a": 3}, {("a", "r", "a"): np.zeros((2, 1), np.uint8)}), [1])
    with pytest.raises(ValueError, match=r"shape \[2, E\]"):
        NeighborSampler(Graph({"a": 3}, {("a", "r", "a"): np.zeros((3, 1), np.int64)}), [1])
    with pytest.raises(ValueError, match="-1 nodes"):
        NeighborSampler(Graph({"a": -1}, {}), [1])
    with pytest.raises(TypeError, match="tuple of str"):
        NeighborSampler(Graph({"a": 3}, {("a", "a"): np.zeros((2, 0), np.int64)}), [1])


def test_bad_seeds_raise_before_sampling():
    g = random_graph(np.random.default_rng(14))
    s = NeighborSampler(g, [2, 2])
    with pytest.raises(ValueError, match="unknown node type"):
        s.sample(("zzz", [0]))
    with pytest.raises(TypeError, match="tuple"):
        s.sample([0, 1])
    # a dict of seeds of several types is accepted (test_dict_seeds_match_reference);
    # its bad forms are errors before sampling
    with pytest.raises(ValueError, match="unknown node type"):
        s.sample({"a": [0], "zzz": [0]})
    with pytest.raises(TypeError, match="must be a str"):
        s.sample({0: [0]})
    with pytest.raises(ValueError, match="no seeds"):
        s.sample({})
    with pytest.raises(ValueError, match="no seeds"):
        s.sample({"a": [], "b": []})
    with pytest.raises(IndexError, match=r"seeds\[0\] = 20 is out of range for the 20 'b'"):
        s.sample({"a": [0], "b": [20]})
    with pytest.raises(ValueError, match="no seeds"):
        s.sample(("a", []))
    with pytest.raises(IndexError, match=r"seeds\[1\] = 30"):
        s.sample(("a", [0, 30]))
    with pytest.raises(IndexError, match=r"seeds\[0\] = -1"):
        s.sample(("a", [-1]))
    with pytest.raises(TypeError):
        s.sample(("a", np.array([True, False])))
    with pytest.raises(TypeError):
        s.sample(("a", np.array([0.0, 1.0])))
    with pytest.raises(TypeError):
        s.sample(("a", np.zeros((2, 2), np.int64)))
    for kw, exc in (({"epoch": -1}, ValueError), ({"batch": 2**63}, ValueError),
                    ({"epoch": 1.0}, TypeError), ({"batch": True}, TypeError)):
        with pytest.raises(exc):
            s.sample(("a", [0]), **kw)
    # the map pool was never left dirty by a failed call
    assert_same(s.sample(("a", [1, 2])), NeighborSampler(g, [2, 2]).sample(("a", [1, 2])))


def test_kernel_rejects_unchecked_arrays():
    nn = np.array([3, 3], np.int64)
    ptr, _ = _kernels.snapshot_indices(np.array([0, 1, 1, 2], np.int64), -1)
    col, _ = _kernels.snapshot_indices(np.array([0, 2], np.int64), -1)
    one = np.array([0], np.int64)
    fan = np.array([[1]], np.int64)
    _kernels.HeteroSamplerKernel(nn, one, one + 1, [ptr], [col], fan, False)
    with pytest.raises(TypeError, match="snapshots"):
        _kernels.HeteroSamplerKernel(nn, one, one + 1, [np.array([0, 1, 1, 2])], [col], fan,
                                     False)
    bad_col, _ = _kernels.snapshot_indices(np.array([0, 3], np.int64), -1)
    with pytest.raises(IndexError):
        _kernels.HeteroSamplerKernel(nn, one, one + 1, [ptr], [bad_col], fan, False)
    bad_ptr, _ = _kernels.snapshot_indices(np.array([0, 2, 1, 2], np.int64), -1)
    with pytest.raises(ValueError, match="decreases"):
        _kernels.HeteroSamplerKernel(nn, one, one + 1, [bad_ptr], [col], fan, False)
    short, _ = _kernels.snapshot_indices(np.array([0, 1, 2], np.int64), -1)
    with pytest.raises(ValueError, match="does not group"):
        _kernels.HeteroSamplerKernel(nn, one, one + 1, [short], [col], fan, False)
    with pytest.raises(ValueError, match="node type"):
        _kernels.HeteroSamplerKernel(nn, one, one + 2, [ptr], [col], fan, False)
    with pytest.raises(ValueError, match="fanout"):
        _kernels.HeteroSamplerKernel(nn, one, one + 1, [ptr], [col], fan - 3, False)
    k = _kernels.HeteroSamplerKernel(nn, one, one + 1, [ptr], [col], fan, False)
    for bad in ([0, 5], [3], [-1]):        # 3 destination nodes: 3 is the first bad id
        with pytest.raises(IndexError, match="out of range"):
            k.sample(np.array(bad, np.int64), 1, 0, 0, 0, 1)
    with pytest.raises(ValueError, match="no seeds"):
        k.sample(np.zeros(0, np.int64), 1, 0, 0, 0, 1)
    with pytest.raises(ValueError, match="seed_type"):
        k.sample(one, 2, 0, 0, 0, 1)
    out = k.sample(np.array([2, 0], np.int64), 1, 0, 0, 0, 1)
    assert out[0][1].tolist() == [2, 0] and out[0][0].tolist() == [2, 0]


def test_trusted_plans_refuse_writable_memory():
    with pytest.raises(TypeError, match="snapshot"):
        rtx.IndexPlan._trusted(np.arange(3), 3)
    idx, _ = _kernels.snapshot_indices(np.arange(3, dtype=np.int64), -1)
    with pytest.raises(TypeError, match="grouping"):
        rtx.IndexPlan._trusted(idx, 3, csr=(np.arange(4), np.arange(3)))
    p4, _ = _kernels.snapshot_indices(np.arange(4, dtype=np.int64), -1)
    with pytest.raises(ValueError, match="does not match"):
        rtx.IndexPlan._trusted(idx, 4, csr=(p4, idx))
    plan = rtx.IndexPlan._trusted(idx, 3, csr=(p4, idx))
    assert plan.is_grouped and plan.counts().tolist() == [1, 1, 1]
    with pytest.raises(ValueError, match="length"):
        rtx.EdgeIndex._trusted(plan, rtx.IndexPlan._trusted(idx[:2], 3))


def test_the_sampler_edges_drive_message_passing():
    """The prebuilt grouping gives the same result as a freshly checked EdgeIndex."""
    g = random_graph(np.random.default_rng(15))
    out = NeighborSampler(g, [3, 3]).sample(("a", np.arange(10)))
    ei = out.edge_index_dict[("a", "self", "a")]
    x = rtx.tensor(np.random.default_rng(0).standard_normal((ei.num_src, 4)))
    fresh = rtx.EdgeIndex(np.stack([ei.src.indices, ei.dst.indices]), ei.num_src, ei.num_dst)
    np.testing.assert_array_equal(rtx.message_passing(x, ei, ei.num_dst).numpy(),
                                  rtx.message_passing(x, fresh, ei.num_dst).numpy())


# ----------------------------------------------------------------- hypothesis
@st.composite
def graphs(draw):
    nt = draw(st.integers(1, 3))
    names = ["t0", "t1", "t2"][:nt]
    nn = {t: draw(st.integers(0, 12)) for t in names}
    eid = {}
    for r in range(draw(st.integers(0, 4))):
        s, d = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        e = draw(st.integers(0, 40)) if nn[s] and nn[d] else 0
        src = draw(st.lists(st.integers(0, max(nn[s] - 1, 0)), min_size=e, max_size=e))
        dst = draw(st.lists(st.integers(0, max(nn[d] - 1, 0)), min_size=e, max_size=e))
        eid[(s, f"r{r}", d)] = np.array([src, dst], dtype=np.int64).reshape(2, e)
    return Graph(nn, eid)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=graphs(), data=st.data())
def test_hypothesis_random_graphs(g, data):
    if not any(g.num_nodes_dict.values()):
        return
    hops = data.draw(st.integers(0, 3))
    fan = data.draw(st.lists(st.integers(-1, 5), min_size=hops, max_size=hops))
    replace = data.draw(st.booleans())
    seed = data.draw(st.integers(0, 2**64 - 1))
    seed_type = data.draw(st.sampled_from([t for t, n in g.num_nodes_dict.items() if n]))
    n = g.num_nodes_dict[seed_type]
    ids = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=8))
    s = NeighborSampler(g, fan, replace=replace, seed=seed)
    out = s.sample((seed_type, ids), epoch=data.draw(st.integers(0, 5)))
    _replay(g, s, out, (seed_type, ids), replace)
