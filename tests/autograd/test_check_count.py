"""One check per input (issue 18): each index is bounds-checked once per op call,
forward and backward together; a plan (IndexPlan / EdgeIndex) is never checked
again; a raw edge_index passed again costs no check (the plan cache).

The count is of the O(E) bounds scans over index memory: the kernels
``snapshot_indices`` (with a bound; without one it is a plain copy) and
``first_out_of_bounds``, wherever an rtx module binds them."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import rtx
from rtx import _kernels
from rtx.datasets import synthetic_hetgraph
from rtx.nn import GATConv, HetGAT


@pytest.fixture
def scans(monkeypatch):
    """A list that grows by one entry per bounds scan (the scanned length)."""
    seen: list[int] = []
    snap, oob = _kernels.snapshot_indices, _kernels.first_out_of_bounds

    def counted_snapshot(arr, n, threads=1):
        if n >= 0:
            seen.append(int(np.shape(arr)[0]))
        return snap(arr, n, threads)

    def counted_oob(arr, n):
        seen.append(int(np.shape(arr)[0]))
        return oob(arr, n)

    patched = 0
    for name, mod in list(sys.modules.items()):
        if name != "rtx" and not name.startswith("rtx."):
            continue
        for attr, v in list(vars(mod).items()):
            if v is snap:
                monkeypatch.setattr(mod, attr, counted_snapshot)
                patched += 1
            elif v is oob:
                monkeypatch.setattr(mod, attr, counted_oob)
                patched += 1
    assert patched >= 2  # the plans' module and the kernels' own names at least
    return seen


RNG = np.random.default_rng(0)
N, E = 7, 20


def _x(shape=(E, 3)):
    return rtx.tensor(RNG.standard_normal(shape), requires_grad=True)


def _fwd_bwd(out):
    out.sum().backward()


GRAPH_OPS = {
    "index_select": lambda i: rtx.index_select(_x((N, 3)), i),
    "Tensor.index_select": lambda i: _x((N, 3)).index_select(0, i),
    "index_add": lambda i: rtx.index_add(_x(), i, N),
    "Tensor.index_add": lambda i: _x((N, 3)).index_add(0, i, _x()),
    "segment_sum": lambda i: rtx.segment_sum(_x(), i, N),
    "segment_mean": lambda i: rtx.segment_mean(_x(), i, N),
    "segment_max": lambda i: rtx.segment_max(_x(), i, N),
    "segment_min": lambda i: rtx.segment_min(_x(), i, N),
    "segment_softmax": lambda i: rtx.segment_softmax(_x((E,)), i, N),
}


@pytest.mark.parametrize("name", list(GRAPH_OPS))
@pytest.mark.parametrize("form", ["numpy", "list", "tensor"])
def test_a_raw_index_is_checked_once_per_call(scans, name, form):
    idx = RNG.integers(0, N, E)
    given = idx if form == "numpy" else idx.tolist() if form == "list" else rtx.tensor(idx)
    _fwd_bwd(GRAPH_OPS[name](given))
    assert scans == [E]           # one scan of the E indices, forward and backward together


@pytest.mark.parametrize("name", list(GRAPH_OPS))
def test_a_plan_is_never_checked_again(scans, name):
    plan = rtx.IndexPlan(RNG.integers(0, N, E), N)
    scans.clear()                 # (building it was the one check)
    for _ in range(3):
        _fwd_bwd(GRAPH_OPS[name](plan))
    assert scans == []


def test_message_passing_checks_each_row_once_and_a_repeated_edge_index_not_again(scans):
    ei = np.stack([RNG.integers(0, N, E), RNG.integers(0, 5, E)])
    w = rtx.tensor(RNG.standard_normal(E), requires_grad=True)
    _fwd_bwd(rtx.message_passing(_x((N, 3)), ei, 5, w))
    assert scans == [E, E]        # sources and targets, once each
    for _ in range(3):            # the same raw array on every forward (as PyTorch code does)
        _fwd_bwd(rtx.message_passing(_x((N, 3)), ei, 5, w))
    assert scans == [E, E]
    ei[0, 3] = (ei[0, 3] + 1) % N  # changed in place: checked again (once)
    _fwd_bwd(rtx.message_passing(_x((N, 3)), ei, 5, w))
    assert scans == [E, E, E, E]
    plan = rtx.EdgeIndex(ei, N, 5)
    scans.clear()
    _fwd_bwd(rtx.message_passing(_x((N, 3)), plan, 5, w))
    assert scans == []


@pytest.mark.parametrize("loops", [True, False])
def test_gatconv_checks_raw_edges_once_across_forwards(scans, loops):
    conv = GATConv(3, 4, heads=2, add_self_loops=loops).double()
    ei = RNG.integers(0, N, (2, E))
    x = rtx.tensor(RNG.standard_normal((N, 3)))
    _fwd_bwd(conv(x, ei))
    assert scans == [E, E]        # self-loops come from the checked plan: no scan
    for _ in range(3):
        _fwd_bwd(conv(x, ei))
    assert scans == [E, E]


def test_hetgat_epoch_checks_each_relation_once(scans):
    g = synthetic_hetgraph(60, seed=1)
    x = {k: rtx.tensor(v) for k, v in g.x_dict.items()}
    rtx.manual_seed(0)
    m = HetGAT(g.metadata(), g.num_features_dict, 8, g.num_classes, heads=2)
    _fwd_bwd(m(x, g.edge_index_dict))
    want = sorted(2 * [e.shape[1] for et, e in g.edge_index_dict.items()
                       if et in set().union(*map(set, m.layer_edge_types))])
    assert sorted(scans) == want  # each relation's two rows once, shared by the layers
    scans.clear()
    for _ in range(2):
        _fwd_bwd(m(x, g.edge_index_dict))
    assert scans == []
