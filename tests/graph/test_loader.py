"""rtx.loader.NeighborLoader / LinkNeighborLoader: PyG's batch layout, checked
against the graph; epochs, shuffling and determinism; the background thread
(prefetch, early exit, errors, no leaks); bad input; a training smoke test."""

from __future__ import annotations

import gc
import threading
import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rtx
import rtx.nn as nn
import rtx.nn.functional as F
from rtx.data import HeteroData
from rtx.loader import LinkNeighborLoader, NeighborLoader

PW = ("author", "writes", "paper")
PC = ("paper", "cites", "paper")
PT = ("paper", "has_topic", "topic")


def small_graph(dtype=np.int64, seed=0, edge_attrs=True):
    """Four node types (one featureless, one with no edges), numpy and rtx values,
    a non-array attribute, multi-edges, an empty relation, edge attributes."""
    rng = np.random.default_rng(seed)
    data = HeteroData()
    data["paper"].x = rtx.randn(60, 8, seed=seed + 1)                     # rtx tensor
    data["paper"].y = rtx.tensor(rng.integers(0, 4, 60))
    data["paper"].train_mask = rtx.tensor(rng.random(60) < 0.5)
    data["paper"].year = rng.integers(2000, 2020, 60)                      # numpy int64
    data["paper"].venue = "kept"                                           # not node-level
    data["author"].num_nodes = 40                                          # featureless
    data["topic"].x = rng.random((10, 3)).astype(np.float32)               # numpy features
    data["lonely"].num_nodes = 5                                           # no edges at all

    def edges(n_src, n_dst, e, isolated=()):
        dst = rng.integers(0, n_dst, e)
        dst = np.where(np.isin(dst, isolated), (dst + 1) % n_dst, dst)
        return np.stack([rng.integers(0, n_src, e), dst]).astype(dtype)

    # papers 0..4 have no in-edges at all (no neighbours)
    w = edges(40, 60, 150, isolated=range(5))
    w = w[:, ~np.isin(w[1], range(5))]
    data[PW].edge_index = w
    c = edges(60, 60, 120)
    c = c[:, ~np.isin(c[1], range(5))]
    c = np.concatenate([c, c[:, :10]], axis=1)                             # multi-edges
    data[PC].edge_index = c
    data[PT].edge_index = edges(60, 10, 80)
    data["paper", "rev_writes", "author"].edge_index = w[[1, 0]]
    data["author", "knows", "author"].edge_index = np.zeros((2, 0), dtype)  # empty relation
    if edge_attrs:
        data[PC].edge_attr = rng.random((c.shape[1], 2)).astype(np.float32)
        data[PW].edge_weight = rtx.tensor(rng.random(w.shape[1]))
    data.target = "paper"
    return data


def np_(v):
    if isinstance(v, rtx.EdgeIndex):
        return np.stack([v.src.indices, v.dst.indices])
    return v.numpy() if isinstance(v, rtx.Tensor) else np.asarray(v)


def check_batch(data, batch, seeds=None, input_type="paper", exact_edges=None):
    """The batch is PyG's layout over ``data``: every attribute gathered at n_id /
    e_id, every local edge an edge of the graph, the seeds first."""
    nnd = data.num_nodes_dict
    assert batch.node_types == data.node_types and batch.edge_types == data.edge_types
    for k in ("target", "num_classes"):                             # graph-level kept
        assert (k in batch) == (k in data) and (k not in data or batch[k] == data[k])
    for nt in data.node_types:
        st, src = batch[nt], data[nt]
        n_id = np_(st.n_id)
        assert n_id.dtype == np.int64 and n_id.ndim == 1
        assert len(set(n_id.tolist())) == len(n_id) or nt == input_type
        assert ((0 <= n_id) & (n_id < nnd[nt])).all()
        assert sum(st.num_sampled_nodes) == len(n_id)
        for k, v in src.items():
            if k == "num_nodes":
                assert st.num_nodes == len(n_id)
            elif getattr(v, "shape", None) is not None and len(v.shape) and \
                    v.shape[0] == nnd[nt]:
                got = st[k]
                assert isinstance(got, rtx.Tensor), (nt, k)
                np.testing.assert_array_equal(np_(got), np_(v)[n_id])
            else:
                assert st[k] is v                                   # kept as it is
        if "x" not in src:
            assert "x" not in st                                    # featureless stays so
    for et in data.edge_types:
        st = batch[et]
        ei = st.edge_index
        assert isinstance(ei, rtx.EdgeIndex)
        assert ei.num_src == len(np_(batch[et[0]].n_id))
        assert ei.num_dst == len(np_(batch[et[2]].n_id))
        assert st.num_edges == ei.num_edges == sum(st.num_sampled_edges)
        src_g = np_(batch[et[0]].n_id)[ei.src.indices]
        dst_g = np_(batch[et[2]].n_id)[ei.dst.indices]
        g = np_(data[et].edge_index).astype(np.int64)
        if "e_id" in st:
            e_id = np_(st.e_id)
            np.testing.assert_array_equal(g[0, e_id], src_g)
            np.testing.assert_array_equal(g[1, e_id], dst_g)
            for k in data[et].keys():
                if k not in ("edge_index",) and len(np.shape(np_(data[et][k]))) and \
                        np.shape(np_(data[et][k]))[0] == g.shape[1]:
                    np.testing.assert_array_equal(np_(st[k]), np_(data[et][k])[e_id])
        else:
            assert exact_edges is not True
            true = set(zip(g[0].tolist(), g[1].tolist(), strict=True))
            assert set(zip(src_g.tolist(), dst_g.tolist(), strict=True)) <= true
        # per destination (a local node), the sampled edges are a sub-multiset of
        # the true in-edges (sampling is without replacement)
        if "e_id" in st:       # distinct edges of the graph per destination
            key = ei.dst.indices * (g.shape[1] + 1) + np_(st.e_id)
            assert len(np.unique(key)) == len(key)
            continue
        true_c = Counter(zip(g[0].tolist(), g[1].tolist(), strict=True))
        per = {}
        for s, d, loc in zip(src_g.tolist(), dst_g.tolist(), ei.dst.indices.tolist(),
                             strict=True):
            per.setdefault(loc, Counter())[(s, d)] += 1
        for c in per.values():
            assert not c - true_c
    if seeds is not None:
        st = batch[input_type]
        bs = st.batch_size
        assert bs == len(seeds)
        np.testing.assert_array_equal(np_(st.n_id)[:bs], seeds)
        assert st.num_sampled_nodes[0] == bs
        for nt in data.node_types:
            if nt != input_type:
                assert batch[nt].num_sampled_nodes[0] == 0


# ------------------------------------------------------------------ layout
@pytest.mark.parametrize("form", ["ids", "mask", "type", "none"])
def test_batch_layout_matches_the_graph(form, backend):
    data = small_graph()
    mask = np_(data["paper"].train_mask)
    ids = np.flatnonzero(mask)[::-1].copy()                  # any order, as given
    input_nodes = {"ids": ("paper", ids), "mask": ("paper", data["paper"].train_mask),
                   "type": "paper", "none": ("paper", None)}[form]
    loader = NeighborLoader(data, [4, 3], input_nodes=input_nodes, batch_size=7,
                            shuffle=False, prefetch=0)
    inputs = {"ids": ids, "mask": np.flatnonzero(mask)}.get(form, np.arange(60))
    assert len(loader) == -(-len(inputs) // 7)
    seen = []
    for b, batch in enumerate(loader):
        want = inputs[7 * b: 7 * b + 7]
        check_batch(data, batch, want)
        st = batch["paper"]
        input_id = np_(st.input_id)
        assert input_id.dtype == np.int64
        if form == "mask":    # PyG: a mask's input_id are the node ids
            np.testing.assert_array_equal(input_id, want)
        else:                 # else the positions in input_nodes
            np.testing.assert_array_equal(input_id, np.arange(7 * b, 7 * b + len(want)))
        # labels of the seeds: out[:batch_size] lines up with y[:batch_size]
        np.testing.assert_array_equal(np_(st.y)[: st.batch_size], np_(data["paper"].y)[want])
        seen.extend(np_(st.n_id)[: st.batch_size].tolist())
        # edge attributes: the graph has some, so e_id is on (auto)
        assert "e_id" in batch[PC] and "edge_attr" in batch[PC]
        assert "edge_weight" in batch[PW]
        assert batch["paper"].venue == "kept"
        assert batch["lonely"].num_nodes == 0 and len(np_(batch["lonely"].n_id)) == 0
        assert batch["author", "knows", "author"].num_edges == 0
    assert seen == inputs.tolist()


def test_featureless_types_get_ids_only_and_the_edges_are_grouped():
    data = rtx.datasets.synthetic_mag(0.001)
    ids = np.flatnonzero(np_(data["paper"].train_mask))
    loader = NeighborLoader(data, [5, 4], input_nodes=("paper", ids), batch_size=100,
                            shuffle=True, seed=3)
    batch = next(iter(loader))
    for nt in ("author", "institution", "field_of_study"):
        assert "x" not in batch[nt] and len(np_(batch[nt].n_id)) == batch[nt].num_nodes
    seeds = np_(batch["paper"].n_id)[:100]
    check_batch(data, batch, seeds)
    assert set(seeds.tolist()) <= set(ids.tolist())
    # the destination grouping comes built (layers use it as is, nothing re-sorted)
    for et in data.edge_types:
        assert batch[et].edge_index.dst.is_grouped
    # synthetic_mag has no edge attributes: no e_id unless asked for
    assert all("e_id" not in batch[et] for et in data.edge_types)
    b2 = next(iter(NeighborLoader(data, [5, 4], input_nodes=("paper", ids), batch_size=100,
                                  seed=3, return_edge_id=True)))
    for et in data.edge_types:
        assert "e_id" in b2[et]
        np.testing.assert_array_equal(b2[et].edge_index.src.indices,
                                      batch[et].edge_index.src.indices)
    check_batch(data, b2, seeds, exact_edges=True)


def test_edge_attributes_need_edge_ids():
    data = small_graph()
    off = next(iter(NeighborLoader(data, [3, 3], input_nodes="paper", batch_size=20,
                                   return_edge_id=False)))
    # as PyG without edge ids: the edge-level attributes cannot be gathered, so they go
    assert "e_id" not in off[PC] and "edge_attr" not in off[PC]
    assert "edge_weight" not in off[PW]
    check_batch(data, off, exact_edges=False)


def test_int32_graphs_give_the_same_batches():
    d64, d32 = small_graph(np.int64), small_graph(np.int32)
    assert np_(d32[PC].edge_index).dtype == np.int32
    kw = dict(input_nodes="paper", batch_size=9, seed=4)
    for a, b in zip(NeighborLoader(d64, [3, 2], **kw), NeighborLoader(d32, [3, 2], **kw),
                    strict=True):
        assert_same_batch(a, b)
        check_batch(d32, b)


def test_seeds_without_neighbours_empty_relations_big_batches():
    data = small_graph()
    # papers 0..4 have no in-edges: only the seeds come back, no edge into them
    loader = NeighborLoader(data, [5, 5], input_nodes=("paper", np.arange(5)),
                            batch_size=1000, prefetch=0)
    assert len(loader) == 1
    batch = next(iter(loader))
    check_batch(data, batch)
    assert batch["paper"].batch_size == 5
    for et in data.edge_types:
        if et[2] == "paper":
            assert batch[et].num_sampled_edges[0] == 0
    # a relation with no edges, and 0 hops
    b0 = next(iter(NeighborLoader(data, [], input_nodes="paper", batch_size=3)))
    assert b0["paper"].num_sampled_nodes == [3] and len(np_(b0["paper"].n_id)) == 3
    assert all(b0[et].num_edges == 0 for et in data.edge_types)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_an_empty_input_yields_nothing(prefetch):
    data = small_graph()
    for nodes in [("paper", np.zeros(0, np.int64)), ("paper", np.zeros(60, bool)),
                  ("paper", [])]:
        loader = NeighborLoader(data, [2], input_nodes=nodes, prefetch=prefetch)
        assert len(loader) == 0
        assert list(loader) == []
    # drop_last with fewer seeds than a batch: nothing either
    loader = NeighborLoader(data, [2], input_nodes="paper", batch_size=61, drop_last=True)
    assert len(loader) == 0 and list(loader) == []


def test_loader_call_samples_given_positions():
    data = small_graph()
    ids = np.array([9, 3, 40, 7])
    loader = NeighborLoader(data, [3], input_nodes=("paper", ids))
    b = loader([2, 0])
    np.testing.assert_array_equal(np_(b["paper"].n_id)[:2], [40, 9])
    np.testing.assert_array_equal(np_(b["paper"].input_id), [2, 0])
    with pytest.raises(IndexError):
        loader([4])
    with pytest.raises(ValueError, match="no inputs"):
        loader([])


# ----------------------------------------------------- epochs and determinism
def assert_same_batch(a, b):
    assert a.node_types == b.node_types and a.edge_types == b.edge_types
    for nt in a.node_types:
        assert sorted(a[nt].keys()) == sorted(b[nt].keys())
        for k in a[nt].keys():
            va, vb = a[nt][k], b[nt][k]
            if isinstance(va, rtx.Tensor):
                np.testing.assert_array_equal(va.numpy(), vb.numpy())
            else:
                assert va == vb
    for et in a.edge_types:
        assert sorted(a[et].keys()) == sorted(b[et].keys())
        for k in a[et].keys():
            va, vb = a[et][k], b[et][k]
            if isinstance(va, (rtx.Tensor, rtx.EdgeIndex)):
                np.testing.assert_array_equal(np_(va), np_(vb))
            else:
                assert va == vb


def seeds_of(batches, nt="paper"):
    return [np_(b[nt].n_id)[: b[nt].batch_size].tolist() for b in batches]


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_an_epoch_covers_the_input(shuffle, drop_last):
    data = small_graph()
    ids = np.flatnonzero(np_(data["paper"].train_mask))
    loader = NeighborLoader(data, [2, 2], input_nodes=("paper", ids), batch_size=4,
                            shuffle=shuffle, drop_last=drop_last, seed=1)
    epochs = [seeds_of(loader) for _ in range(3)]
    for ep in epochs:
        assert len(ep) == len(loader) == (len(ids) // 4 if drop_last else -(-len(ids) // 4))
        flat = [v for b in ep for v in b]
        assert len(flat) == len(set(flat))
        assert all(len(b) == 4 for b in (ep if drop_last else ep[:-1]))
        if drop_last:
            assert set(flat) <= set(ids.tolist()) and len(flat) == 4 * (len(ids) // 4)
        else:
            assert sorted(flat) == sorted(ids.tolist())
        if not shuffle:
            assert flat == ids[: len(flat)].tolist()
    if shuffle:   # a new permutation each epoch
        assert epochs[0] != epochs[1] != epochs[2]
    else:
        assert epochs[0] == epochs[1]
    assert loader.epoch == 3


def test_epochs_differ_and_replay_exactly():
    data = small_graph()
    kw = dict(input_nodes="paper", batch_size=16, seed=7)
    a = NeighborLoader(data, [3, 3], **kw)
    e0, e1 = list(a), list(a)
    # the sampler's stream depends on the epoch: even unshuffled, samples differ
    u = NeighborLoader(data, [3, 3], input_nodes="paper", batch_size=16, shuffle=False)
    u0, u1 = list(u), list(u)
    assert any(np_(x["paper"].n_id).tolist() != np_(y["paper"].n_id).tolist()
               for x, y in zip(u0, u1, strict=True))
    assert seeds_of(e0) != seeds_of(e1)
    # another loader with the same arguments replays both epochs bit for bit
    b = NeighborLoader(data, [3, 3], **kw)
    for x, y in zip(e0 + e1, list(b) + list(b), strict=True):
        assert_same_batch(x, y)
    # set_epoch: resume at any epoch
    c = NeighborLoader(data, [3, 3], **kw)
    c.set_epoch(1)
    for x, y in zip(e1, c, strict=True):
        assert_same_batch(x, y)
    # another seed: other batches
    d = NeighborLoader(data, [3, 3], input_nodes="paper", batch_size=16, seed=8)
    assert seeds_of(d) != seeds_of(e0)


def test_the_input_edge_arrays_can_go_once_the_loader_is_built():
    """The loader samples from its sampler's private copy: the graph's edge_index
    arrays dropped after construction (a script saving their memory) change no batch."""
    kw = dict(input_nodes="paper", batch_size=16, seed=3)
    want = list(NeighborLoader(small_graph(edge_attrs=False), [3, 2], **kw))
    data = small_graph(edge_attrs=False)
    loader = NeighborLoader(data, [3, 2], **kw)
    for et in data.edge_types:
        del data[et].edge_index
    assert all("edge_index" not in data[et] for et in data.edge_types)
    got = list(loader)
    assert len(got) == len(want)
    for x, y in zip(got, want, strict=True):
        assert_same_batch(x, y)


@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_batches_do_not_depend_on_threads_or_prefetch(prefetch):
    data = rtx.datasets.synthetic_mag(0.002)
    rtx._kernels.set_sample_parallel_min(0)       # the kernels' threaded paths
    try:
        ref = []
        rtx.set_num_threads(1)
        for b in NeighborLoader(data, [6, 4], input_nodes=("paper", data["paper"].train_mask),
                                batch_size=300, seed=2, prefetch=0):
            ref.append(b)
        rtx.set_num_threads(2)
        got = list(NeighborLoader(data, [6, 4], input_nodes=("paper",
                                  data["paper"].train_mask), batch_size=300, seed=2,
                                  prefetch=prefetch, num_threads=3 if prefetch == 3 else None))
    finally:
        rtx._kernels.set_sample_parallel_min(1024)
    assert len(ref) == len(got) > 2
    for x, y in zip(ref, got, strict=True):
        assert_same_batch(x, y)


# ------------------------------------------------------ the background thread
def loader_threads():
    return [t for t in threading.enumerate() if t.name.startswith("rtx-loader")]


def test_breaking_early_stops_the_thread():
    data = small_graph()
    before = len(loader_threads())
    loader = NeighborLoader(data, [3, 3], input_nodes="paper", batch_size=2, prefetch=2)
    for i, _ in enumerate(loader):
        assert len(loader_threads()) == before + 1
        if i == 3:
            break
    gc.collect()
    assert len(loader_threads()) == before
    # close() stops it too, and the iterator is then exhausted
    it = iter(loader)
    next(it)
    it.close()
    assert len(loader_threads()) == before
    with pytest.raises(StopIteration):
        next(it)
    # closing while the worker waits for a slot (it is prefetch batches ahead) wakes it
    it = iter(loader)
    next(it)
    deadline = time.monotonic() + 10.0
    while it._st.q.qsize() < loader.prefetch and time.monotonic() < deadline:
        time.sleep(0.002)
    assert it._st.q.qsize() == loader.prefetch
    time.sleep(0.05)                          # now blocked taking a slot
    closer = threading.Thread(target=it.close, daemon=True)
    closer.start()
    closer.join(10.0)
    assert not closer.is_alive(), "close() did not stop a worker waiting for a slot"
    assert len(loader_threads()) == before
    # a finished epoch leaves no thread
    assert len(list(loader)) == len(loader)
    gc.collect()
    assert len(loader_threads()) == before
    # many abandoned epochs: no thread piles up
    for _ in range(20):
        next(iter(loader))
    gc.collect()
    assert len(loader_threads()) == before


@pytest.mark.parametrize("prefetch", [0, 1, 2])
def test_errors_in_the_worker_reach_the_loop(prefetch, monkeypatch):
    data = small_graph()
    loader = NeighborLoader(data, [3], input_nodes="paper", batch_size=5, prefetch=prefetch)
    real = loader.sampler.sample

    def sample(seeds, epoch, batch, num_threads=None):
        if batch == 2:
            raise MemoryError("no room for batch 2")
        return real(seeds, epoch, batch, num_threads=num_threads)

    monkeypatch.setattr(loader.sampler, "sample", sample)
    got = []
    with pytest.raises(MemoryError, match="no room for batch 2"):
        for b in loader:
            got.append(b)
    assert len(got) == 2
    gc.collect()
    assert loader_threads() == []


@pytest.mark.parametrize("prefetch", [1, 3])
def test_prefetch_is_bounded_and_runs_ahead(prefetch, monkeypatch):
    data = small_graph()
    loader = NeighborLoader(data, [2], input_nodes="paper", batch_size=3, prefetch=prefetch)
    started = []
    real = loader._make

    def make(pos, epoch, b):
        started.append(b)
        return real(pos, epoch, b)

    monkeypatch.setattr(loader, "_make", make)
    consumed = 0
    reached = False
    for batch in loader:
        consumed += 1
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:      # let the worker run as far as it may
            ahead = len(started) - consumed
            assert ahead <= prefetch
            if ahead == min(prefetch, len(loader) - consumed):
                reached = True
                break
            time.sleep(0.002)
        assert np_(batch["paper"].n_id).shape[0] >= batch["paper"].batch_size
    assert reached
    assert started == list(range(len(loader)))


def test_the_worker_samples_while_the_main_thread_computes():
    """With prefetch the next batches are made while the consumer is busy (a sleep
    stands in for training; benchmarks/bench_sampling.py --loader measures it
    against real training)."""
    data = rtx.datasets.synthetic_mag(0.002)
    kw = dict(input_nodes=("paper", data["paper"].train_mask), batch_size=64, seed=1)
    n = 0
    t0 = time.perf_counter()
    for _ in NeighborLoader(data, [10, 10], prefetch=0, **kw):
        n += 1
    t_sample = (time.perf_counter() - t0) / n
    pause = max(3 * t_sample, 0.003)

    def run(prefetch):
        t = time.perf_counter()
        for _ in NeighborLoader(data, [10, 10], prefetch=prefetch, **kw):
            time.sleep(pause)
        return time.perf_counter() - t

    sync, ahead = min(run(0) for _ in range(2)), min(run(1) for _ in range(2))
    # synchronous: sample + pause per batch; with prefetch most sampling is hidden
    assert ahead < sync - 0.25 * n * t_sample, (sync, ahead, n * t_sample)


# ------------------------------------------------------------------ bad input
def test_bad_input_is_refused_before_sampling(monkeypatch):
    data = small_graph()
    calls = []
    real = rtx.loader.NeighborSampler.sample
    monkeypatch.setattr(rtx.loader.NeighborSampler, "sample",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    bad = [
        ({"num_neighbors": {("a", "b", "c"): [1]}}, ValueError, "not in the graph"),
        ({"num_neighbors": [2, -2]}, ValueError, ">= -1"),
        ({"num_neighbors": [2.5]}, TypeError, "int"),
        ({"input_nodes": ("nope", [0])}, ValueError, "unknown input node type"),
        ({"input_nodes": "nope"}, ValueError, "unknown input node type"),
        ({"input_nodes": ("paper", [0, 60])}, IndexError, r"input_nodes\[1\] = 60"),
        ({"input_nodes": ("paper", [-1])}, IndexError, r"input_nodes\[0\] = -1"),
        ({"input_nodes": ("paper", np.zeros(59, bool))}, ValueError, r"shape \(60,\)"),
        ({"input_nodes": ("paper", np.zeros(60, np.float32))}, TypeError, "float32"),
        ({"input_nodes": ("paper", np.zeros((2, 3), np.int64))}, ValueError, "1-D"),
        ({"input_nodes": None}, ValueError, "needs input_nodes"),
        ({"input_nodes": ("paper",)}, TypeError, "input_nodes"),
        ({"input_nodes": (0, [1])}, TypeError, "must be a str"),
        ({"batch_size": 0}, ValueError, "batch_size must be >= 1"),
        ({"batch_size": -3}, ValueError, "batch_size must be >= 1"),
        ({"batch_size": 2.0}, TypeError, "batch_size"),
        ({"prefetch": -1}, ValueError, "prefetch must be >= 0"),
        ({"prefetch": True}, TypeError, "prefetch"),
        ({"shuffle": 1}, TypeError, "shuffle"),
        ({"drop_last": None}, TypeError, "drop_last"),
        ({"seed": -1}, ValueError, "seed"),
        ({"seed": 2**64}, ValueError, "seed"),
        ({"num_threads": 0}, ValueError, "num_threads"),
        ({"replace": "yes"}, TypeError, "replace"),
        ({"return_edge_id": 1}, TypeError, "return_edge_id"),
        ({"transform": 3}, TypeError, "transform"),
    ]
    for kw, exc, match in bad:
        args = {"num_neighbors": [2, 2], "input_nodes": "paper", **kw}
        with pytest.raises(exc, match=match):
            NeighborLoader(data, **args)
    with pytest.raises(TypeError, match="HeteroData"):
        NeighborLoader(object(), [2], input_nodes="paper")
    with pytest.raises(ValueError, match="epoch"):
        NeighborLoader(data, [2], input_nodes="paper").set_epoch(-1)
    assert calls == []
    monkeypatch.undo()
    sampler = rtx.loader.NeighborSampler(data, [2])
    for v, exc in ((0, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(exc, match="num_threads"):
            sampler.sample(("paper", [0]), num_threads=v)
    # the graph is untouched
    np.testing.assert_array_equal(np_(data[PC].edge_index), np_(small_graph()[PC].edge_index))


# ------------------------------------------------------------ link loader
def link_graph(dtype=np.int64):
    data = small_graph(dtype)
    return data


def check_link_batch(data, batch, et, rows, cols, mode, amount=1.0, label=None):
    """``edge_label_index`` maps through n_id to the seed edges (then negatives that
    are no edge of the graph nor a seed edge); labels; seeds are the distinct end
    points, sorted, first in their n_id."""
    st = batch[et]
    input_id = np_(st.input_id)
    B = len(input_id)
    s_nid, d_nid = np_(batch[et[0]].n_id), np_(batch[et[2]].n_id)
    g = np_(data[et].edge_index).astype(np.int64)
    known = set(zip(g[0].tolist(), g[1].tolist(), strict=True)) | set(
        zip(rows.tolist(), cols.tolist(), strict=True))
    if mode == "triplet":
        src_i = np_(batch[et[0]].src_index)
        pos_i = np_(batch[et[2]].dst_pos_index)
        neg_i = np_(batch[et[2]].dst_neg_index)
        assert neg_i.shape == ((B,) if amount == 1 else (B, int(amount)))
        np.testing.assert_array_equal(s_nid[src_i], rows[input_id])
        np.testing.assert_array_equal(d_nid[pos_i], cols[input_id])
        negs = d_nid[neg_i].reshape(B, -1)
        for i in range(B):
            for v in negs[i]:
                assert (int(rows[input_id[i]]), int(v)) not in known
                assert et[0] != et[2] or v != rows[input_id[i]]
        assert "edge_label_index" not in st and "edge_label" not in st
        ends = {et[0]: s_nid[src_i].tolist()}
        ends[et[2]] = ends.get(et[2], []) + d_nid[pos_i].tolist() + negs.ravel().tolist()
    else:
        eli = np_(st.edge_label_index)
        K = eli.shape[1]
        want_neg = int(np.ceil(B * amount)) if mode == "binary" else 0
        n_s, n_d = data.num_nodes_dict[et[0]], data.num_nodes_dict[et[2]]
        if et[0] == et[2]:      # pairs that may be negatives: no self-loops, no known pair
            free = n_s * (n_s - 1) - sum(a != b for a, b in known)
        else:
            free = n_s * n_d - len(known)
        assert K == B + min(want_neg, free)     # as many as asked, or all there are
        got_s, got_d = s_nid[eli[0]], d_nid[eli[1]]
        np.testing.assert_array_equal(got_s[:B], rows[input_id])
        np.testing.assert_array_equal(got_d[:B], cols[input_id])
        neg = list(zip(got_s[B:].tolist(), got_d[B:].tolist(), strict=True))
        assert len(set(neg)) == len(neg)                       # distinct in a batch
        assert not set(neg) & known                             # never an edge
        if et[0] == et[2]:
            assert all(a != b for a, b in neg)                   # no self-loops
        lab = np_(st.edge_label) if "edge_label" in st else None
        if mode == "binary":
            want = (np.ones(B, np.float32) if label is None else label[input_id])
            np.testing.assert_array_equal(lab[:B], want)
            assert (lab[B:] == 0).all() and lab.dtype == want.dtype
        elif label is not None:
            np.testing.assert_array_equal(lab, label[input_id])
        else:
            assert lab is None
        ends = {et[0]: got_s.tolist()}
        ends[et[2]] = ends.get(et[2], []) + got_d.tolist()
    for nt, vs in ends.items():
        uniq = sorted(set(vs))
        assert batch[nt].num_sampled_nodes[0] == len(uniq)
        np.testing.assert_array_equal(np_(batch[nt].n_id)[: len(uniq)], uniq)
    for nt in data.node_types:
        if nt not in ends:
            assert batch[nt].num_sampled_nodes[0] == 0
    check_batch(data, batch)


@pytest.mark.parametrize("et", [PW, PC])
@pytest.mark.parametrize("neg", [None, "binary", {"mode": "binary", "amount": 2.5},
                                 "triplet", {"mode": "triplet", "amount": 3}])
def test_link_batches_match_the_graph(et, neg):
    data = link_graph()
    g = np_(data[et].edge_index).astype(np.int64)
    loader = LinkNeighborLoader(data, [3, 2], edge_label_index=et, neg_sampling=neg,
                                batch_size=16, seed=5)
    mode = None if neg is None else (neg if isinstance(neg, str) else neg["mode"])
    amount = 1.0 if not isinstance(neg, dict) else neg["amount"]
    assert len(loader) == -(-g.shape[1] // 16)
    seen = []
    for batch in loader:
        check_link_batch(data, batch, et, g[0], g[1], mode, amount)
        seen.extend(np_(batch[et].input_id).tolist())
    assert sorted(seen) == list(range(g.shape[1]))


def test_link_labels_and_given_edges():
    data = link_graph()
    rng = np.random.default_rng(3)
    rows, cols = rng.integers(0, 40, 30), rng.integers(0, 60, 30)     # need not be edges
    label = rng.integers(0, 3, 30)                                     # starts at 0
    for neg in (None, "binary"):
        loader = LinkNeighborLoader(data, [2], edge_label_index=(PW, np.stack([rows, cols])),
                                    edge_label=rtx.tensor(label), neg_sampling=neg,
                                    batch_size=8, shuffle=False)
        want = label + 1 if neg == "binary" else label    # PyG: 0 then means negative
        for batch in loader:
            check_link_batch(data, batch, PW, rows, cols, neg, label=want)
        assert np_(batch[PW].edge_label).dtype == np.int64
    # the relation's name alone names the edge type (PyG's _to_canonical)
    b = next(iter(LinkNeighborLoader(data, [2], edge_label_index="writes", batch_size=4)))
    assert "edge_label" not in b[PW] and np_(b[PW].edge_label_index).shape == (2, 4)
    for key in ("writes", ("author", "paper"), PW, list(PW)):
        b = LinkNeighborLoader(data, [2], edge_label_index=(key, np.stack([rows, cols])),
                               shuffle=False, batch_size=30)([0, 1])
        np.testing.assert_array_equal(np_(b["author"].n_id)[np_(b[PW].edge_label_index)[0]],
                                      rows[:2])


def test_link_batches_are_deterministic_and_epochs_differ():
    data = link_graph()
    kw = dict(edge_label_index=PC, neg_sampling="binary", batch_size=20, seed=9)
    a = LinkNeighborLoader(data, [3, 3], **kw)
    e0, e1 = list(a), list(a)
    rtx.set_num_threads(1)
    b = LinkNeighborLoader(data, [3, 3], prefetch=0, **kw)
    for x, y in zip(e0 + e1, list(b) + list(b), strict=True):
        assert_same_batch(x, y)
    negs = [np_(x[PC].edge_label_index)[:, 20:].tolist() for x in (e0[0], e1[0])]
    assert negs[0] != negs[1]


def test_link_negatives_when_few_non_edges_exist():
    """A dense relation: nearly every pair is an edge, negatives still never are."""
    data = HeteroData()
    data["u"].num_nodes = 6
    data["v"].num_nodes = 5
    allp = np.array([(i, j) for i in range(6) for j in range(5) if (i + j) % 4]).T
    data["u", "r", "v"].edge_index = allp
    data["v", "q", "u"].edge_index = allp[[1, 0]]
    free = 30 - allp.shape[1]
    loader = LinkNeighborLoader(data, [2], edge_label_index=("u", "r", "v"),
                                neg_sampling={"mode": "binary", "amount": 3}, batch_size=4,
                                shuffle=False)
    for batch in loader:
        eli = np_(batch["u", "r", "v"].edge_label_index)
        B = len(np_(batch["u", "r", "v"].input_id))
        assert eli.shape[1] == B + min(3 * B, free)     # as many as exist
        s = np_(batch["u"].n_id)[eli[0, B:]]
        d = np_(batch["v"].n_id)[eli[1, B:]]
        assert all((a + b) % 4 == 0 for a, b in zip(s, d, strict=True))
    trip = LinkNeighborLoader(data, [2], edge_label_index=("u", "r", "v"),
                              neg_sampling={"mode": "triplet", "amount": 2}, batch_size=4)
    for batch in trip:
        check_link_batch(data, batch, ("u", "r", "v"), allp[0], allp[1], "triplet", 2)
    # a source linked to every destination has no triplet negative: refused up front
    full = np.array([[0] * 5 + [1], [0, 1, 2, 3, 4, 0]])
    data["u", "r", "v"].edge_index = full
    with pytest.raises(ValueError, match="linked to every"):
        LinkNeighborLoader(data, [1], edge_label_index=("u", "r", "v"),
                           neg_sampling="triplet")


def test_link_bad_input():
    data = link_graph()
    bad = [
        ({"edge_label_index": None}, ValueError, "needs edge_label_index"),
        ({"edge_label_index": ("a", "b", "c")}, ValueError, "unknown edge type"),
        ({"edge_label_index": "nope"}, ValueError, "unknown edge type"),
        ({"edge_label_index": (PW, np.zeros((3, 2), np.int64))}, ValueError, r"\[2, E\]"),
        ({"edge_label_index": (PW, np.array([[40], [0]]))}, IndexError, r"\[0\]\[0\] = 40"),
        ({"edge_label_index": (PW, np.array([[0], [60]]))}, IndexError, r"\[1\]\[0\] = 60"),
        ({"edge_label_index": (PW, np.zeros((2, 2)))}, TypeError, "integer"),
        ({"edge_label_index": 5}, TypeError, "edge_label_index"),
        ({"edge_label": np.ones(3)}, ValueError, "one entry per seed edge"),
        ({"edge_label": np.ones(1), "neg_sampling": "triplet"}, ValueError, "triplet"),
        ({"neg_sampling": "ternary"}, ValueError, "'binary' or 'triplet'"),
        ({"neg_sampling": {"mode": "binary", "amount": 0}}, ValueError, "> 0"),
        ({"neg_sampling": {"mode": "binary", "amount": float("nan")}}, ValueError, "> 0"),
        ({"neg_sampling": {"mode": "triplet", "amount": 1.5}}, ValueError, "integer"),
        ({"neg_sampling": {"mode": "binary", "src_weight": np.ones(40)}}, ValueError,
         "not supported"),
        ({"neg_sampling": 3}, TypeError, "neg_sampling"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"prefetch": -2}, ValueError, "prefetch"),
        ({"num_neighbors": [-5]}, ValueError, ">= -1"),
    ]
    for kw, exc, match in bad:
        args = {"num_neighbors": [2], "edge_label_index": (PW, np.array([[0], [1]])), **kw}
        if "edge_label" in kw and kw["edge_label"].shape == (1,):
            pass
        with pytest.raises(exc, match=match):
            LinkNeighborLoader(data, **args)
    with pytest.raises(TypeError, match="HeteroData"):
        LinkNeighborLoader({}, [1], edge_label_index=PW)
    assert len(LinkNeighborLoader(data, [1], edge_label_index=(PW, np.zeros((2, 0), int)))) == 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_a=st.integers(1, 12), n_b=st.integers(1, 9), e=st.integers(0, 40),
       batch_size=st.integers(1, 15), shuffle=st.booleans(), drop_last=st.booleans(),
       amount=st.sampled_from([None, 0.5, 1.0, 3.0]), seed=st.integers(0, 2**64 - 1),
       data_seed=st.integers(0, 1000))
def test_random_graphs_and_batchings(n_a, n_b, e, batch_size, shuffle, drop_last, amount,
                                     seed, data_seed):
    """Any graph and batching: an epoch covers the seeds (or drops only the last,
    partial batch), every batch is the graph's, negatives are never edges."""
    rng = np.random.default_rng(data_seed)
    data = HeteroData()
    data["a"].x = rng.random((n_a, 2)).astype(np.float32)
    data["b"].num_nodes = n_b
    ab = np.stack([rng.integers(0, n_a, e), rng.integers(0, n_b, e)])
    data["a", "to", "b"].edge_index = ab
    data["b", "back", "a"].edge_index = ab[[1, 0]]
    data["a", "self", "a"].edge_index = np.stack([rng.integers(0, n_a, e),
                                                  rng.integers(0, n_a, e)])
    ids = rng.permutation(n_a)[: rng.integers(0, n_a + 1)]
    loader = NeighborLoader(data, [2, -1], input_nodes=("a", ids), batch_size=batch_size,
                            shuffle=shuffle, drop_last=drop_last, seed=seed, prefetch=1)
    got = []
    for batch in loader:
        check_batch(data, batch, input_type="a")
        got.extend(np_(batch["a"].n_id)[: batch["a"].batch_size].tolist())
    full = len(ids) // batch_size * batch_size
    assert len(got) == len(set(got)) == (full if drop_last else len(ids))
    assert set(got) <= set(ids.tolist())
    if e == 0:
        return
    neg = None if amount is None else {"mode": "binary", "amount": amount}
    link = LinkNeighborLoader(data, [2], edge_label_index=("a", "to", "b"), neg_sampling=neg,
                              batch_size=batch_size, shuffle=shuffle, seed=seed, prefetch=0)
    for batch in link:
        check_link_batch(data, batch, ("a", "to", "b"), ab[0], ab[1], neg and "binary",
                         amount or 1.0)


# ------------------------------------------------------------ training smoke
class TinyHetGAT(nn.Module):
    """Linear heads for the types with features, zeros for the featureless ones
    (embeddings are another issue), two HeteroConv(GATConv) layers, a classifier."""

    def __init__(self, metadata, in_dims, hidden, out, target, heads=2):
        super().__init__()
        node_types, edge_types = metadata
        self.target, self.hidden = target, hidden
        self.featureless = [nt for nt in node_types if nt not in in_dims]
        self.lin = nn.ModuleDict({nt: nn.Linear(d, hidden) for nt, d in in_dims.items()})

        def conv(et):
            ch = hidden if et[0] == et[2] else (hidden, hidden)
            return nn.GATConv(ch, hidden // heads, heads=heads, add_self_loops=False)

        self.conv1 = nn.HeteroConv({et: conv(et) for et in edge_types})
        self.conv2 = nn.HeteroConv({et: conv(et) for et in edge_types if et[2] == target})
        self.head = nn.Linear(hidden, out)

    def forward(self, batch):
        h = {nt: rtx.relu(self.lin[nt](batch[nt].x)) for nt in self.lin}
        for nt in self.featureless:
            h[nt] = rtx.zeros(batch[nt].num_nodes, self.hidden)
        h1 = self.conv1(h, batch.edge_index_dict)
        h = {nt: rtx.elu(h1[nt]) if nt in h1 else v for nt, v in h.items()}
        out = self.conv2(h, batch.edge_index_dict)[self.target]
        return self.head(out)


def test_training_on_batches_reduces_the_loss():
    rtx.manual_seed(0)
    data = rtx.datasets.synthetic_mag(0.001)
    loader = NeighborLoader(data, [6, 4], input_nodes=("paper", data["paper"].train_mask),
                            batch_size=128, seed=0, prefetch=1)
    model = TinyHetGAT(data.metadata(), {"paper": 128}, 32, data.num_classes, "paper")
    opt = rtx.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(8):
        for batch in loader:
            bs = batch["paper"].batch_size
            out = model(batch)
            assert out.shape == (batch["paper"].num_nodes, data.num_classes)
            loss = F.cross_entropy(out[:bs], batch["paper"].y[:bs])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.item()))
    assert np.isfinite(losses).all()
    k = len(loader)      # the last epoch's mean loss well below the first's (ln 349 = 5.86)
    assert np.mean(losses[-k:]) < np.mean(losses[:k]) - 0.5, losses
