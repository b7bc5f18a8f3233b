"""rtx.distributed in one process: clear errors without a launcher or mpi4py,
lazy import.  The multi-rank tests are in tests/mpi (run under mpiexec)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from _gat_reference import gat_conv_ref
from conftest import child_env, run_child, run_python

import rtx
import rtx.distributed as dist
from rtx.datasets.hetero import HeteroGraph, synthetic_hetgraph
from rtx.distributed import _comm, shards
from rtx.distributed.partitioning import khop_in_nodes, local_subgraph, partition_nodes, shard


@pytest.fixture
def fresh(monkeypatch):
    """rtx.distributed as if never initialised (restored afterwards)."""
    monkeypatch.setattr(_comm, "_COMM", None)
    monkeypatch.setattr(_comm, "_MPI", None)
    return monkeypatch


def test_import_rtx_does_not_import_mpi4py():
    r = run_child("import sys, rtx, rtx.distributed; print('mpi4py' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_without_mpi4py_names_the_extra(fresh):
    fresh.setitem(sys.modules, "mpi4py", None)  # makes `from mpi4py import MPI` fail
    with pytest.raises(ImportError, match=r'pip install "rtx-gnn\[mpi\]"'):
        dist.init(allow_singleton=True)
    assert not dist.is_initialized()


def test_without_a_launcher_init_refuses(fresh):
    for v in _comm._LAUNCH_VARS:
        fresh.delenv(v, raising=False)
    assert not dist.launched_by_mpi()
    with pytest.raises(RuntimeError, match="mpiexec -n N"):
        dist.init()
    fresh.setenv("PMI_RANK", "0")
    assert dist.launched_by_mpi()


def test_collectives_before_init_raise(fresh):
    t = rtx.zeros(3)
    for call in (dist.rank, dist.world_size, dist.barrier, lambda: dist.all_reduce(t),
                 lambda: dist.broadcast(t), lambda: dist.all_gather(t),
                 lambda: dist.DistributedDataParallel(object())):
        with pytest.raises(RuntimeError, match="call rtx.distributed.init"):
            call()
    np.testing.assert_array_equal(t.numpy(), 0)


def test_singleton_world_in_a_child():
    """A world of one rank (allow_singleton): collectives are the identity, DDP a no-op."""
    pytest.importorskip("mpi4py", reason="the one-rank world needs mpi4py (the mpi extra)")
    code = """
import numpy as np, rtx, rtx.distributed as dist
dist.init(allow_singleton=True)
assert (dist.rank(), dist.world_size()) == (0, 1)
t = rtx.tensor([1.0, -2.0, 3.0])
dist.all_reduce(t, op="mean"); dist.broadcast(t); g = dist.all_gather(t)
assert g.shape == (1, 3) and np.array_equal(g.numpy()[0], [1.0, -2.0, 3.0])
try:
    dist.all_reduce(t, op="prod")
except ValueError as e:
    assert "unknown op" in str(e)
else:
    raise AssertionError("no error")
class M:
    def __init__(self):
        self.w = rtx.tensor([[1.0, 2.0]], requires_grad=True)
    def parameters(self):
        return [self.w]
    def __call__(self, x):
        return x @ self.w
m = M(); ddp = dist.DistributedDataParallel(m)
(ddp(rtx.tensor([[3.0]])) ** 2).sum().backward()
assert np.allclose(m.w.grad.numpy(), [[18.0, 36.0]]), m.w.grad
print("ok")
"""
    r = run_child(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("ok")


# ------------------------------------------------------------- partitioning
def _hetgat_ref_params(data, hidden, heads, num_layers, out, seed=0):
    """Random parameters for the numpy HetGAT reference (issue 12's architecture)."""
    rng = np.random.default_rng(seed)
    layers = []
    dims = dict(data.num_features_dict)
    for layer in range(num_layers):
        convs = {}
        for et in data.edge_types:
            s, _, d = et
            if layer == num_layers - 1 and d != data.target:
                continue
            c = hidden // heads
            p = {"att_src": rng.standard_normal((1, heads, c)),
                 "att_dst": rng.standard_normal((1, heads, c)),
                 "bias": rng.standard_normal(hidden) * 0.1}
            if s == d:
                p["lin.weight"] = rng.standard_normal((hidden, dims[s])) / np.sqrt(dims[s])
            else:
                p["lin_src.weight"] = rng.standard_normal((hidden, dims[s])) / np.sqrt(dims[s])
                p["lin_dst.weight"] = rng.standard_normal((hidden, dims[d])) / np.sqrt(dims[d])
            convs[et] = p
        layers.append(convs)
        dims = {nt: hidden for nt in dims}
    head = (rng.standard_normal((out, hidden)), rng.standard_normal(out))
    return layers, head


def _hetgat_ref(g, params, heads, layer_edges=None):
    """numpy HetGAT; ``layer_edges``: one edge dict per layer (default: g's for all)."""
    layers, (w, b) = params
    x = {nt: a.astype(np.float64) for nt, a in g.x_dict.items()}
    for li, convs in enumerate(layers):
        acc: dict[str, np.ndarray] = {}
        edges = g.edge_index_dict if layer_edges is None else layer_edges[li]
        for et, p in convs.items():
            s, _, d = et
            inp = x[s] if s == d else (x[s], x[d])
            o, _, _ = gat_conv_ref(inp, edges[et], p, heads, p["bias"].size // heads,
                                   add_self_loops=(s == d))
            acc[d] = acc[d] + o if d in acc else o
        x = {nt: np.where(v > 0, v, np.expm1(np.minimum(v, 0))) for nt, v in acc.items()}
    return x[g.target] @ w.T + b


@pytest.mark.parametrize("method", ["contiguous", "metis"])
@pytest.mark.parametrize(("parts", "num_layers"), [(2, 1), (2, 2), (3, 2), (2, 3)])
def test_khop_subgraph_gives_the_full_graph_outputs_for_owned_nodes(method, parts, num_layers):
    if method == "metis":
        pytest.importorskip("pymetis")
    data = synthetic_hetgraph(300, seed=3, dtype=np.float64)
    params = _hetgat_ref_params(data, hidden=8, heads=2, num_layers=num_layers, out=4)
    full = _hetgat_ref(data, params, heads=2)
    assign = partition_nodes(data, parts, method)
    assert sorted(np.unique(assign)) == list(range(parts))
    seen = np.zeros(data.num_nodes_dict["paper"], dtype=int)
    for r in range(parts):
        lg = local_subgraph(data, np.flatnonzero(assign == r), num_layers)
        owned = lg.global_ids["paper"][: lg.num_owned]
        seen[owned] += 1
        local = _hetgat_ref(lg.graph, params, heads=2)
        np.testing.assert_allclose(local[: lg.num_owned], full[owned], rtol=1e-10, atol=1e-12)
        # per-layer edge sets (layer l: only edges into R_{l+1}) give the same rows
        assert len(lg.layer_edge_index) == num_layers
        first, edges = lg.layer_edge_index[0], lg.graph.edge_index_dict
        assert first.keys() == edges.keys() and all(first[et] is edges[et] for et in edges)
        per_layer = _hetgat_ref(lg.graph, params, heads=2, layer_edges=lg.layer_edge_index)
        np.testing.assert_allclose(per_layer[: lg.num_owned], full[owned], rtol=1e-10,
                                   atol=1e-12)
        sizes = lg.stats()["layer_edges"]
        assert sizes == sorted(sizes, reverse=True) and sizes[0] == lg.graph.num_edges
        for m in ("train_mask", "val_mask", "test_mask"):  # masks only on owned nodes
            lm = getattr(lg.graph, m)
            assert not lm[lg.num_owned:].any()
            np.testing.assert_array_equal(lm[: lg.num_owned], getattr(data, m)[owned])
        np.testing.assert_array_equal(lg.graph.y[: lg.num_owned], data.y[owned])
    np.testing.assert_array_equal(seen, 1)  # every target node owned exactly once


def test_fewer_hops_is_not_enough():
    """The check above can fail: one hop short, owned outputs differ."""
    data = synthetic_hetgraph(300, seed=3, dtype=np.float64)
    params = _hetgat_ref_params(data, hidden=8, heads=2, num_layers=2, out=4)
    full = _hetgat_ref(data, params, heads=2)
    lg = local_subgraph(data, np.arange(150), 1)
    local = _hetgat_ref(lg.graph, params, heads=2)
    assert not np.allclose(local[: lg.num_owned], full[:150])


def test_khop_levels_by_hand():
    # a -> b -> c (paper cites paper), author x writes c
    g = HeteroGraph({"paper": np.zeros((4, 1)), "author": np.zeros((2, 1))},
                    {("paper", "cites", "paper"): np.array([[0, 1], [1, 2]]),
                     ("author", "writes", "paper"): np.array([[0], [2]])},
                    np.zeros(4, dtype=np.int64), *[np.ones(4, bool)] * 3)
    lv = khop_in_nodes(g.edge_index_dict, g.num_nodes_dict, {"paper": np.array([2])}, 2)
    assert [np.flatnonzero(m["paper"]).tolist() for m in lv] == [[0, 1, 2], [1, 2], [2]]
    assert [np.flatnonzero(m["author"]).tolist() for m in lv] == [[0], [0], []]
    lg = local_subgraph(g, np.array([2]), 2)
    assert lg.global_ids["paper"].tolist() == [2, 0, 1]  # owned first, then halo
    assert lg.num_owned == 1 and lg.stats()["halo_target"] == 2
    # edges into R_1 = {1, 2}: 0->1 and 1->2, relabelled
    assert lg.graph.edge_index_dict[("paper", "cites", "paper")].tolist() == [[1, 2], [2, 0]]
    # the last layer needs only the edges into R_2 = {2}: 1 -> 2 and x -> 2
    last = lg.layer_edge_index[1]
    assert last[("paper", "cites", "paper")].tolist() == [[2], [0]]
    assert last[("author", "writes", "paper")].tolist() == [[0], [0]]


def test_partition_arguments():
    data = synthetic_hetgraph(100, seed=0)
    with pytest.raises(ValueError, match="unknown method"):
        partition_nodes(data, 2, "spectral")
    with pytest.raises(ValueError, match="positive int"):
        partition_nodes(data, 0)
    with pytest.raises(ValueError, match="non-empty parts"):
        partition_nodes(data, 101)
    np.testing.assert_array_equal(partition_nodes(data, 1), 0)
    c = partition_nodes(data, 3, "contiguous")
    assert np.bincount(c).tolist() == [34, 33, 33] and (np.diff(c) >= 0).all()
    with pytest.raises(ValueError, match="not in a world"):
        shard(data, 2, rank=2, world_size=2)
    with pytest.raises(IndexError, match="owned ids"):
        local_subgraph(data, np.array([100]), 2)
    a, b = shard(data, 2, rank=0, world_size=2), shard(data, 2, rank=1, world_size=2)
    assert a.num_owned + b.num_owned == 100


def test_post_backward_hook_sees_final_gradients():
    from rtx.autograd.graph import register_post_backward_hook

    x = rtx.tensor([1.0, 2.0], requires_grad=True)
    w = rtx.tensor([3.0, -1.0], requires_grad=True)
    seen = []

    def hook(leaves):
        seen.append({id(t): t.grad.numpy().copy() for t in leaves})

    h = register_post_backward_hook(hook)
    try:
        ((x * w).sum() + (x * x).sum()).backward()  # x used twice: grads summed first
        assert len(seen) == 1 and set(seen[0]) == {id(x), id(w)}
        np.testing.assert_array_equal(seen[0][id(x)], [5.0, 3.0])  # w + 2x, complete
        rtx.autograd.grad((x * w).sum(), [x])  # grad() touches no .grad: no hook
        assert len(seen) == 1
    finally:
        h.remove()
    (x * w).sum().backward()
    assert len(seen) == 1  # removed


def test_example_distributed_without_a_launcher_says_how_to_launch():
    env = {k: v for k, v in child_env().items() if k not in _comm._LAUNCH_VARS}
    r = run_python(["-m", "rtx.examples.hetgat", "--distributed", "--num-papers", "100",
                    "--epochs", "1"], env=env)
    assert r.returncode != 0
    assert "mpiexec -n N" in r.stderr and "Traceback" not in r.stderr, r.stderr


# ------------------------------------------------------ 1-hop shards (halo exchange)
def _shard_graph(P=3, seed=3, n=300):
    data = synthetic_hetgraph(n, seed=seed, dtype=np.float64)
    return data, shards.partition_all(data, P, "random", seed=1)


@pytest.mark.parametrize("method", ["random", "contiguous", "metis"])
def test_partition_all_splits_every_node_type(method):
    if method == "metis":
        pytest.importorskip("pymetis")
    data = synthetic_hetgraph(300, seed=3)
    parts = shards.partition_all(data, 3, method)
    assert set(parts) == set(data.node_types)
    for nt, n in data.num_nodes_dict.items():
        counts = np.bincount(parts[nt], minlength=3)
        assert parts[nt].shape == (n,) and counts.sum() == n and (counts > 0).all(), (nt, counts)
        if method != "metis":
            assert counts.max() - counts.min() <= 1  # balanced per type
        else:  # one balance constraint per type: within METIS's tolerance
            assert counts.max() <= 1.35 * n / 3 + 1, (nt, counts)
    again = shards.partition_all(data, 3, method)
    assert all(np.array_equal(parts[nt], again[nt]) for nt in parts)  # deterministic


def test_partition_all_arguments(monkeypatch):
    data = synthetic_hetgraph(50, seed=0)
    with pytest.raises(ValueError, match="unknown method"):
        shards.partition_all(data, 2, "spectral")
    with pytest.raises(ValueError, match="positive int"):
        shards.partition_all(data, 0)
    monkeypatch.setitem(sys.modules, "pymetis", None)
    with pytest.raises(ImportError, match="pip install pymetis"):
        shards.partition_all(data, 2, "metis")
    assert all((p == 0).all() for p in shards.partition_all(data, 1, "random").values())


def test_halo_subgraph_holds_each_edge_once_and_its_halo_sorted_by_owner():
    data, parts = _shard_graph()
    seen_edges = {et: [] for et in data.edge_types}
    owned_seen = {nt: np.zeros(n, int) for nt, n in data.num_nodes_dict.items()}
    for p in range(3):
        lg = shards.halo_subgraph(data, parts, p, 3)
        g = lg.graph
        for nt in data.node_types:
            ids, k = lg.global_ids[nt], lg.num_owned_dict[nt]
            assert (parts[nt][ids[:k]] == p).all() and (parts[nt][ids[k:]] != p).all()
            np.testing.assert_array_equal(lg.halo_owner[nt], parts[nt][ids[k:]])
            order = np.lexsort((ids[k:], lg.halo_owner[nt]))
            np.testing.assert_array_equal(order, np.arange(order.size))  # by owner, then id
            owned_seen[nt][ids[:k]] += 1
            np.testing.assert_array_equal(g.x_dict[nt], data.x_dict[nt][ids])
        t = data.target
        k = lg.num_owned_dict[t]
        own = lg.global_ids[t][:k]
        np.testing.assert_array_equal(g.y[:k], data.y[own])
        for m in ("train_mask", "val_mask", "test_mask"):
            np.testing.assert_array_equal(getattr(g, m)[:k], getattr(data, m)[own])
            assert not getattr(g, m)[k:].any()
        for et, ei in g.edge_index_dict.items():
            s, _, d = et
            assert (ei[1] < lg.num_owned_dict[d]).all()  # every destination owned
            seen_edges[et].append(np.stack([lg.global_ids[s][ei[0]], lg.global_ids[d][ei[1]]]))
        # the halo is exactly the sources of edges into owned nodes that others own
        for nt in data.node_types:
            need = set()
            for et, ei in data.edge_index_dict.items():
                if et[0] == nt:
                    hit = parts[et[2]][ei[1]] == p
                    need |= {int(v) for v in ei[0][hit] if parts[nt][v] != p}
            assert set(lg.global_ids[nt][lg.num_owned_dict[nt]:].tolist()) == need
    for nt in data.node_types:
        np.testing.assert_array_equal(owned_seen[nt], 1)
    for et, ei in data.edge_index_dict.items():
        got = np.concatenate(seen_edges[et], axis=1)
        assert got.shape == ei.shape
        key = lambda a: sorted(map(tuple, a.T.tolist()))  # noqa: E731
        assert key(got) == key(ei)  # each edge in exactly one shard


def test_one_layer_on_a_halo_shard_gives_the_full_graph_outputs():
    """What one layer needs is in the shard: owned rows of a 1-layer HetGAT
    (numpy reference) equal the full graph's; one hop fewer (no halo) is not."""
    data, parts = _shard_graph()
    params = _hetgat_ref_params(data, hidden=8, heads=2, num_layers=1, out=4)
    full = _hetgat_ref(data, params, heads=2)
    for p in range(3):
        lg = shards.halo_subgraph(data, parts, p, 3)
        k = lg.num_owned_dict["paper"]
        local = _hetgat_ref(lg.graph, params, heads=2)
        np.testing.assert_allclose(local[:k], full[lg.global_ids["paper"][:k]], rtol=1e-10,
                                   atol=1e-12)
    lg = shards.halo_subgraph(data, parts, 0, 3)
    cut = {et: ei[:, ei[0] < lg.num_owned_dict[et[0]]] for et, ei in
           lg.graph.edge_index_dict.items()}
    g = HeteroGraph(lg.graph.x_dict, cut, lg.graph.y, lg.graph.train_mask, lg.graph.val_mask,
                    lg.graph.test_mask, target="paper")
    k = lg.num_owned_dict["paper"]
    assert not np.allclose(_hetgat_ref(g, params, heads=2)[:k],
                           full[lg.global_ids["paper"][:k]])


def test_partition_writes_shards_and_a_manifest_that_load_back(tmp_path):
    data, _ = _shard_graph(P=2)
    m = dist.partition(data, 2, tmp_path, method="random", seed=1)
    names = sorted(os.listdir(tmp_path))
    assert names == ["manifest.json", "part-00000.npz", "part-00001.npz"]  # no temp files
    assert m == shards.read_manifest(tmp_path) and m["num_parts"] == 2
    assert m["graph"]["num_nodes"] == data.num_nodes_dict
    assert m["graph_sha256"] == shards.graph_digest(data)
    parts = shards.partition_all(data, 2, "random", seed=1)
    for p in range(2):
        a = dist.load_shard(tmp_path, p)
        b = shards.halo_subgraph(data, parts, p, 2)
        assert a.num_owned_dict == b.num_owned_dict == m["parts"][p]["owned"]
        for nt in data.node_types:
            np.testing.assert_array_equal(a.global_ids[nt], b.global_ids[nt])
            np.testing.assert_array_equal(a.graph.x_dict[nt], b.graph.x_dict[nt])
        for et in data.edge_types:
            np.testing.assert_array_equal(a.graph.edge_index_dict[et],
                                          b.graph.edge_index_dict[et])
        assert a.info["manifest_digest"] == m["digest"]
    stats = dist.partition_stats(data, parts, 2, num_layers=2)
    for p, st in enumerate(stats):
        assert st["owned"] == m["parts"][p]["owned"] and st["halo"] == m["parts"][p]["halo"]
        assert st["edges"] == m["parts"][p]["edges"]


def test_damaged_shards_are_refused(tmp_path):
    data, _ = _shard_graph(P=2)
    dist.partition(data, 2, tmp_path, method="random")
    with pytest.raises(ValueError, match="part 2 is not one of the 2 parts"):
        dist.load_shard(tmp_path, 2)
    part = tmp_path / "part-00001.npz"
    raw = bytearray(part.read_bytes())
    raw[len(raw) // 2] ^= 1
    part.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="SHA-256 differs"):
        dist.load_shard(tmp_path, 1)
    dist.load_shard(tmp_path, 0)  # the other part is fine
    man = tmp_path / "manifest.json"
    man.write_text(man.read_text().replace('"num_parts": 2', '"num_parts": 3'))
    with pytest.raises(ValueError, match="digest does not match"):
        dist.load_shard(tmp_path, 0)
    man.write_text("{}")
    with pytest.raises(ValueError, match="not a shard manifest"):
        shards.read_manifest(tmp_path)
    with pytest.raises(FileNotFoundError):
        dist.load_shard(tmp_path / "nowhere", 0)


def test_partition_of_a_graph_without_features_everywhere(tmp_path):
    """ogbn-mag's layout (features on papers only): shards and statistics are
    written; training from them says what is missing."""
    from rtx.datasets import synthetic_mag

    data = synthetic_mag(0.001, seed=0)
    m = dist.partition(data, 2, tmp_path, method="random")
    assert sum(p["owned"]["author"] for p in m["parts"]) == data["author"].num_nodes
    assert sum(p["edges"] for p in m["parts"]) == data.num_edges
    with pytest.raises(ValueError, match="'author' has no features"):
        dist.load_shard(tmp_path, 0)
    parts = shards.partition_all(data, 4, "random")
    st = dist.partition_stats(data, parts, 4, num_layers=2)
    assert sum(s["edges"] for s in st) == data.num_edges
    # the last layer only runs relations into papers: it reads no institution
    assert all(s["layer_halo"][1]["institution"] == 0 for s in st)
    assert any(s["layer_halo"][0]["institution"] > 0 for s in st)
