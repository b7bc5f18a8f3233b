"""rtx.distributed in one process: clear errors without a launcher or mpi4py,
lazy import.  The multi-rank tests are in tests/mpi (run under mpiexec)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from _gat_reference import gat_conv_ref
from conftest import child_env, run_child, run_python

import rtx
import rtx.distributed as dist
from rtx.datasets.hetero import HeteroGraph, synthetic_hetgraph
from rtx.distributed import _comm
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
