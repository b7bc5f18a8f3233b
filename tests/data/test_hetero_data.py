"""Built-in heterogeneous data: the synthetic citation graph, .npz files, checks."""

from __future__ import annotations

import numpy as np
import pytest

from rtx.datasets import (
    HeteroGraph,
    from_pyg,
    load_hetgraph,
    random_split,
    save_hetgraph,
    synthetic_hetgraph,
)

EDGE_TYPES = [
    ("author", "writes", "paper"), ("paper", "written_by", "author"),
    ("paper", "cites", "paper"), ("paper", "has_subject", "subject"),
    ("subject", "rev_has_subject", "paper"),
]


def _same(a: HeteroGraph, b: HeteroGraph) -> None:
    assert a.metadata() == b.metadata() and a.target == b.target
    for nt in a.x_dict:
        np.testing.assert_array_equal(a.x_dict[nt], b.x_dict[nt])
    for et in a.edge_index_dict:
        np.testing.assert_array_equal(a.edge_index_dict[et], b.edge_index_dict[et])
    for k in ("y", "train_mask", "val_mask", "test_mask"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))


def test_synthetic_structure():
    g = synthetic_hetgraph(600, seed=3)
    assert g.target == "paper" and g.num_classes == 8
    assert g.metadata() == (["paper", "author", "subject"], EDGE_TYPES)
    nn = g.num_nodes_dict
    assert nn["paper"] == 600 and nn["author"] == 300 and nn["subject"] >= 8
    assert g.num_features_dict == {"paper": 64, "author": 32, "subject": 16}
    for (s, _, d), ei in g.edge_index_dict.items():
        assert ei.dtype == np.int64 and ei.shape[0] == 2 and ei.shape[1] > 0
        assert ei[0].max() < nn[s] and ei[1].max() < nn[d] and ei.min() >= 0
        # no duplicate edges
        assert np.unique(ei[0] * nn[d] + ei[1]).size == ei.shape[1]
    cites = g.edge_index_dict[("paper", "cites", "paper")]
    assert not np.any(cites[0] == cites[1])
    w = g.edge_index_dict[("author", "writes", "paper")]
    np.testing.assert_array_equal(g.edge_index_dict[("paper", "written_by", "author")], w[::-1])
    # every paper has at least one author and one subject
    assert np.unique(w[1]).size == 600
    assert np.unique(g.edge_index_dict[("paper", "has_subject", "subject")][0]).size == 600
    masks = np.stack([g.train_mask, g.val_mask, g.test_mask])
    assert (masks.sum(0) == 1).all()
    assert abs(g.train_mask.mean() - 0.6) < 0.01 and abs(g.val_mask.mean() - 0.2) < 0.01
    assert set(np.unique(g.y)) == set(range(8))
    assert g.x_dict["paper"].dtype == np.float32
    assert repr(g).startswith("HeteroGraph(\n  target='paper',\n  num_classes=8,")


def test_synthetic_deterministic_and_seeded():
    _same(synthetic_hetgraph(500, seed=1), synthetic_hetgraph(500, seed=1))
    a, b = synthetic_hetgraph(500, seed=1), synthetic_hetgraph(500, seed=2)
    assert not np.array_equal(a.y, b.y)


def test_synthetic_homophily_and_weak_features():
    """Neighbours mostly share the paper's class; paper features alone are a weak
    signal (a ridge classifier on them is far below one that also sees the
    neighbours' features): the graph matters."""
    g = synthetic_hetgraph(3000, seed=0)
    cites = g.edge_index_dict[("paper", "cites", "paper")]
    same = (g.y[cites[0]] == g.y[cites[1]]).mean()
    assert 0.5 < same < 0.8

    def ridge(x):
        x = np.hstack([x, np.ones((x.shape[0], 1))]).astype(np.float64)
        tr, te = g.train_mask, g.test_mask
        w = np.linalg.solve(x[tr].T @ x[tr] + np.eye(x.shape[1]),
                            x[tr].T @ np.eye(8)[g.y[tr]])
        return ((x[te] @ w).argmax(1) == g.y[te]).mean()

    def mean_in(et, feats):
        s, _, d = et
        ei = g.edge_index_dict[et]
        n = g.num_nodes_dict[d]
        out = np.zeros((n, feats.shape[1]))
        np.add.at(out, ei[1], feats[ei[0]])
        return out / np.maximum(np.bincount(ei[1], minlength=n), 1)[:, None]

    xp = g.x_dict["paper"]
    a_mean = mean_in(("paper", "written_by", "author"), xp)
    s_mean = mean_in(("paper", "has_subject", "subject"), xp)
    graph_feats = np.hstack([xp, mean_in(("author", "writes", "paper"), a_mean),
                             mean_in(("subject", "rev_has_subject", "paper"), s_mean),
                             mean_in(("paper", "cites", "paper"), xp)])
    feat_only, with_graph = ridge(xp), ridge(graph_feats)
    assert feat_only < 0.5
    assert with_graph > feat_only + 0.25


def test_synthetic_scales():
    g = synthetic_hetgraph(20000, seed=0)
    assert 150_000 < g.num_edges < 300_000  # ~11 edges per paper: 100k papers ~ 1.1M edges


def test_synthetic_bad_args():
    with pytest.raises(ValueError, match="num_papers"):
        synthetic_hetgraph(3)


def test_npz_round_trip(tmp_path):
    g = synthetic_hetgraph(200, seed=5)
    p = tmp_path / "g.npz"
    save_hetgraph(g, p)
    with np.load(p, allow_pickle=False) as f:  # the documented key scheme, no pickle
        assert set(f.files) == {"x/paper", "x/author", "x/subject", "y", "train_mask",
                                "val_mask", "test_mask", "target",
                                *("edge_index/" + "__".join(et) for et in EDGE_TYPES)}
    _same(load_hetgraph(p), g)


def test_npz_without_masks_gets_a_split(tmp_path):
    g = synthetic_hetgraph(200, seed=5)
    p = tmp_path / "g.npz"
    np.savez(p, **{"x/paper": g.x_dict["paper"], "x/author": g.x_dict["author"],
                   "edge_index/author__writes__paper":
                       g.edge_index_dict[("author", "writes", "paper")],
                   "y": g.y, "target": np.array("paper")})
    h = load_hetgraph(p)
    assert h.metadata() == (["paper", "author"], [("author", "writes", "paper")])
    tr, va, te = random_split(200, seed=0)
    np.testing.assert_array_equal(h.train_mask, tr)
    assert (h.train_mask ^ h.val_mask ^ h.test_mask).all()


def test_npz_bad_keys(tmp_path):
    p = tmp_path / "bad.npz"
    np.savez(p, **{"x/paper": np.zeros((3, 2), np.float32), "y": np.zeros(3, np.int64),
                   "edge_index/paper__cites": np.zeros((2, 1), np.int64)})
    with pytest.raises(ValueError, match="edge_index/<src>__<relation>__<dst>"):
        load_hetgraph(p)
    np.savez(p, **{"x/paper": np.zeros((3, 2), np.float32)})
    with pytest.raises(ValueError, match="no labels"):
        load_hetgraph(p)
    np.savez(p, **{"x/paper": np.zeros((3, 2), np.float32), "y": np.zeros(3, np.int64),
                   "weights": np.zeros(3)})
    with pytest.raises(ValueError, match="unexpected key 'weights'"):
        load_hetgraph(p)


def _graph(**over):
    kw = dict(
        x_dict={"paper": np.zeros((4, 3), np.float32), "author": np.zeros((2, 5), np.float32)},
        edge_index_dict={("author", "writes", "paper"): np.array([[0, 1], [2, 3]])},
        y=np.array([0, 1, 0, 1]), train_mask=np.ones(4, bool), val_mask=np.zeros(4, bool),
        test_mask=np.zeros(4, bool), target="paper")
    kw.update(over)
    return HeteroGraph(**kw)


def test_validation_names_the_type():
    g = _graph()
    assert g.num_nodes_dict == {"paper": 4, "author": 2}
    with pytest.raises(ValueError, match="'venue'"):
        _graph(edge_index_dict={("venue", "hosts", "paper"): np.zeros((2, 1), np.int64)})
    with pytest.raises(IndexError, match=r"\('author', 'writes', 'paper'\).*2 'author' nodes"):
        _graph(edge_index_dict={("author", "writes", "paper"): np.array([[2], [0]])})
    with pytest.raises(IndexError, match="'paper' nodes"):
        _graph(edge_index_dict={("author", "writes", "paper"): np.array([[0], [-1]])})
    with pytest.raises(ValueError, match=r"shape \[2, E\]"):
        _graph(edge_index_dict={("author", "writes", "paper"): np.zeros((3, 1), np.int64)})
    with pytest.raises(TypeError, match="must be integer"):
        _graph(edge_index_dict={("author", "writes", "paper"): np.zeros((2, 1))})
    with pytest.raises(TypeError, match="node type 'author'.*floating"):
        _graph(x_dict={"paper": np.zeros((4, 3)), "author": np.zeros((2, 5), np.int64)})
    with pytest.raises(ValueError, match="node type 'paper'.*2-D"):
        _graph(x_dict={"paper": np.zeros(4), "author": np.zeros((2, 5))})
    with pytest.raises(ValueError, match="target node type 'venue'"):
        _graph(target="venue")
    with pytest.raises(ValueError, match=r"y must be.*\(4,\)"):
        _graph(y=np.array([0, 1]))
    with pytest.raises(ValueError, match="train_mask"):
        _graph(train_mask=np.ones(4, np.int64))
    with pytest.raises(ValueError, match="'__'"):
        _graph(x_dict={"pa__per": np.zeros((4, 3)), "author": np.zeros((2, 5))})
    with pytest.raises(ValueError, match="tuple"):
        _graph(edge_index_dict={("author", "paper"): np.zeros((2, 1), np.int64)})


def test_empty_edge_type_allowed():
    g = _graph(edge_index_dict={("author", "writes", "paper"): np.zeros((2, 0), np.int64)})
    assert g.num_edges == 0


def test_from_pyg_without_pyg_is_a_clear_error():
    try:
        import torch_geometric  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="torch_geometric"):
            from_pyg(object())
    else:
        with pytest.raises(TypeError, match="HeteroData"):
            from_pyg(object())


def test_from_pyg_round_trip():
    pytest.importorskip("torch")
    tg = pytest.importorskip("torch_geometric.data")
    import torch

    g = synthetic_hetgraph(100, seed=0)
    hd = tg.HeteroData()
    for nt, x in g.x_dict.items():
        hd[nt].x = torch.from_numpy(x)
    for et, ei in g.edge_index_dict.items():
        hd[et].edge_index = torch.from_numpy(ei)
    hd["paper"].y = torch.from_numpy(g.y)
    for m in ("train_mask", "val_mask", "test_mask"):
        hd["paper"][m] = torch.from_numpy(getattr(g, m))
    _same(from_pyg(hd), g)
