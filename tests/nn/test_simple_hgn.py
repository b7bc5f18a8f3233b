"""rtx.nn.models.SimpleHGN: HGB's Simple-HGN over a heterogeneous graph (its one
typed graph, the layers' wiring, L2-normalised logits), gradcheck, training, bad input."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
from rtx.datasets import synthetic_hetgraph
from rtx.nn import SimpleHGN


def _tiny():
    rng = np.random.default_rng(4)
    meta = (["paper", "author"], [("author", "writes", "paper"), ("paper", "cites", "paper")])
    x = {"paper": rng.standard_normal((5, 3)), "author": rng.standard_normal((4, 2))}
    ei = {meta[1][0]: np.stack([rng.integers(0, 4, 8), rng.integers(0, 5, 8)]),
          meta[1][1]: np.stack([rng.integers(0, 5, 6), rng.integers(0, 5, 6)])}
    return meta, x, ei


def test_the_typed_graph_and_the_wiring_are_hgbs():
    meta, x, ei = _tiny()
    m = SimpleHGN(meta, {"paper": 3, "author": 2}, 4, 3, num_layers=2, heads=2, edge_dim=5)
    edge_index, edge_type, n = m._graph({k: rtx.tensor(v) for k, v in x.items()}, ei)
    assert n == 9
    # authors follow papers (metadata order); self-loops last, as one more type
    want_src = np.concatenate([ei[meta[1][0]][0] + 5, ei[meta[1][1]][0], np.arange(9)])
    want_dst = np.concatenate([ei[meta[1][0]][1], ei[meta[1][1]][1], np.arange(9)])
    assert (edge_index.num_src, edge_index.num_dst) == (9, 9) and edge_type.num_rows == 3
    np.testing.assert_array_equal(edge_index.src.indices, want_src)
    np.testing.assert_array_equal(edge_index.dst.indices, want_dst)
    np.testing.assert_array_equal(edge_type.indices, [0] * 8 + [1] * 6 + [2] * 9)
    convs = list(m.gat_layers)
    assert len(convs) == 3 and [c.heads for c in convs] == [2, 2, 1]
    assert [c.residual for c in convs] == [False, True, True]
    assert all(c.num_edge_types == 3 for c in convs)
    assert "fc_list.author.weight" in m.state_dict()


def test_the_typed_graph_is_built_once_per_graph():
    """The joined graph is kept while the relations' edges are the same (the same
    arrays, or equal copies: rtx's plan cache returns the same checked edges); new
    edge values, in place or not, or other node counts build it again."""
    meta, x, ei = _tiny()
    m = SimpleHGN(meta, {"paper": 3, "author": 2}, 4, 3, num_layers=1, heads=2, edge_dim=5)
    m.eval()  # no dropout: the outputs differ only if the graph does
    xs = {k: rtx.tensor(v) for k, v in x.items()}
    g1 = m._graph(xs, ei)
    out1 = m(xs, ei).numpy()
    assert m._graph(xs, ei)[0] is g1[0]
    np.testing.assert_array_equal(m(xs, ei).numpy(), out1)
    assert m._graph(xs, {k: v.copy() for k, v in ei.items()})[0] is g1[0]
    ei[meta[1][1]][0, 0] = (ei[meta[1][1]][0, 0] + 1) % 5   # written in place
    g2 = m._graph(xs, ei)
    assert g2[0] is not g1[0]
    np.testing.assert_array_equal(g2[0].src.indices[8], ei[meta[1][1]][0, 0])
    assert not np.array_equal(m(xs, ei).numpy(), out1)
    bigger = dict(xs, author=rtx.tensor(np.random.default_rng(9).standard_normal((6, 2))))
    assert m._graph(bigger, ei)[2] == 11


def test_logits_are_l2_normalised_rows_of_the_target_and_gradcheck():
    meta, x, ei = _tiny()
    # beta = 0: the residual attention HGB passes on is detached (its path carries no
    # gradient by design), so a finite-difference check must not see it either
    m = SimpleHGN(meta, {"paper": 3, "author": 2}, 4, 3, heads=2, edge_dim=5,
                  feat_drop=0.0, attn_drop=0.0, beta=0.0).double()
    xs = {k: rtx.tensor(v, requires_grad=True) for k, v in x.items()}
    out = m(xs, ei)
    assert out.shape == (5, 3)
    np.testing.assert_allclose(np.linalg.norm(out.numpy(), axis=1), 1.0, rtol=1e-12)
    w = rtx.tensor(np.arange(15.0).reshape(5, 3))
    assert rtx.autograd.gradcheck(lambda p, a: (m({"paper": p, "author": a}, ei) * w).sum(),
                                  [xs["paper"], xs["author"]])


def test_trains_on_the_built_in_graph():
    g = synthetic_hetgraph(300, seed=0)
    x = {k: rtx.tensor(v) for k, v in g.x_dict.items()}
    rtx.manual_seed(0)
    m = SimpleHGN(g.metadata(), g.num_features_dict, 16, g.num_classes, heads=2, edge_dim=8,
                  feat_drop=0.2, attn_drop=0.2)
    opt = rtx.optim.Adam(m.parameters(), lr=0.01)
    tr, te = np.flatnonzero(g.train_mask), np.flatnonzero(g.test_mask)
    y = rtx.tensor(g.y[tr])
    losses = []
    for _ in range(40):
        m.train()
        opt.zero_grad()
        loss = rtx.nn.functional.cross_entropy(rtx.index_select(m(x, g.edge_index_dict), tr), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    m.eval()
    acc = (m(x, g.edge_index_dict).numpy()[te].argmax(1) == g.y[te]).mean()
    assert losses[-1] < losses[0] - 0.3
    assert acc > 3.0 / g.num_classes            # well above chance (1 / 8)


def test_bad_input_is_refused():
    meta, x, ei = _tiny()
    with pytest.raises(ValueError, match="every node type"):
        SimpleHGN(meta, {"paper": 3}, 4, 3)
    with pytest.raises(ValueError, match="target"):
        SimpleHGN(meta, {"paper": 3, "author": 2}, 4, 3, target="venue")
    m = SimpleHGN(meta, {"paper": 3, "author": 2}, 4, 3, heads=2, edge_dim=5)
    xs = {k: rtx.tensor(v.astype(np.float32)) for k, v in x.items()}
    with pytest.raises(ValueError, match="no edges"):
        m(xs, {meta[1][0]: ei[meta[1][0]]})
    with pytest.raises(ValueError, match="no features"):
        m({"paper": xs["paper"]}, ei)
    bad = dict(ei)
    bad[meta[1][0]] = np.array([[0, 4], [0, 0]])     # author 4 of 4
    with pytest.raises(IndexError):
        m(xs, bad)
