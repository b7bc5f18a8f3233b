"""Node types without features (issue 20, item 7): from_pyg of a DBLP-like graph
converts them to node ids or one-hot features, the user's choice; compressed
HeteroData / save_hetgraph files."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

import rtx
from rtx.data import HeteroData
from rtx.data.hetero_data import fill_featureless
from rtx.datasets import from_pyg, load_hetgraph, save_hetgraph, synthetic_hetgraph

HAVE_PYG = (importlib.util.find_spec("torch") is not None
            and importlib.util.find_spec("torch_geometric") is not None)
needs_pyg = pytest.mark.skipif(not HAVE_PYG, reason="needs torch and torch_geometric")


def dblp_like():
    """PyG's DBLP layout at toy size: 'conference' has only num_nodes."""
    import torch
    from torch_geometric.data import HeteroData as PygHeteroData
    g = torch.Generator().manual_seed(0)
    d = PygHeteroData()
    d["author"].x = torch.randn(12, 5, generator=g)
    d["author"].y = torch.randint(0, 4, (12,), generator=g)
    d["paper"].x = torch.randn(20, 7, generator=g)
    d["conference"].num_nodes = 4
    d["author", "to", "paper"].edge_index = torch.stack(
        [torch.randint(0, 12, (30,), generator=g), torch.randint(0, 20, (30,), generator=g)])
    d["paper", "to", "author"].edge_index = d["author", "to", "paper"].edge_index.flip(0)
    d["paper", "to", "conference"].edge_index = torch.stack(
        [torch.arange(20), torch.randint(0, 4, (20,), generator=g)])
    d["conference", "to", "paper"].edge_index = d["paper", "to", "conference"].edge_index.flip(0)
    return d


@needs_pyg
def test_heterodata_from_pyg_featureless_choices():
    d = dblp_like()
    kept = HeteroData.from_pyg(d)                               # as it is
    assert "x" not in kept["conference"] and kept["conference"].num_nodes == 4
    ids = HeteroData.from_pyg(d, featureless="ids")
    nid = ids["conference"].node_id
    assert isinstance(nid, rtx.Tensor) and nid.dtype == np.int64
    assert nid.tolist() == [0, 1, 2, 3] and "x" not in ids["conference"]
    assert "node_id" not in ids["author"]                       # types with x untouched
    np.testing.assert_array_equal(ids["author"].x.numpy(), d["author"].x.numpy())
    hot = HeteroData.from_pyg(d, featureless="one_hot")
    np.testing.assert_array_equal(hot["conference"].x.numpy(), np.eye(4, dtype=np.float32))
    assert hot["conference"].x.dtype == np.float32
    with pytest.raises(ValueError, match="featureless"):
        HeteroData.from_pyg(d, featureless="zeros")


@needs_pyg
def test_datasets_from_pyg_featureless():
    d = dblp_like()
    with pytest.raises(ValueError, match="node type 'conference' has no features 'x'.*one_hot"):
        from_pyg(d)                                             # the error, with a way out
    g = from_pyg(d, featureless="one_hot")
    assert g.target == "author" and g.num_features_dict == {"author": 5, "paper": 7,
                                                            "conference": 4}
    np.testing.assert_array_equal(g["conference"].x, np.eye(4, dtype=np.float32))
    with pytest.raises(ValueError, match=r"HeteroData.from_pyg\(data, featureless='ids'\)"):
        from_pyg(d, featureless="ids")
    # a one-hot graph trains with the main job's model
    model = rtx.nn.HetGAT(g.metadata(), g.num_features_dict, 8, g.num_classes, heads=2,
                          target="author")
    out = model({nt: rtx.tensor(x) for nt, x in g.x_dict.items()}, g.edge_index_dict)
    assert out.shape == (12, g.num_classes)


def test_fill_featureless_checks_first():
    data = HeteroData()
    data["a"].x = rtx.ones(2, 2)
    data["b"].num_nodes = 3
    data["c"].y = rtx.tensor([0, 1])              # node count from y
    data["d"]["name"] = "no count"
    fill_featureless(data["a"], "ids")
    assert "node_id" not in data["a"]
    fill_featureless(data["b"], "one_hot")
    assert data["b"].x.shape == (3, 3)
    fill_featureless(data["c"], "ids")
    assert data["c"].node_id.tolist() == [0, 1]
    with pytest.raises(ValueError, match="neither features 'x' nor num_nodes"):
        fill_featureless(data["d"], "ids")
    data["e"].num_nodes = 40_000                  # 6 GiB of one-hot: refused before allocating
    with pytest.raises(MemoryError, match="featureless='ids'"):
        fill_featureless(data["e"], "one_hot")
    assert "x" not in data["e"]


def test_compressed_files_are_smaller_and_equal(tmp_path):
    g = synthetic_hetgraph(400, seed=1)
    # one-hot features (what featureless='one_hot' makes) are what compresses best
    g["subject"].x = np.eye(g["subject"].x.shape[0], 64, dtype=np.float32)
    plain, packed = tmp_path / "g.npz", tmp_path / "gz.npz"
    save_hetgraph(g, plain)
    save_hetgraph(g, packed, compress=True)
    assert os.path.getsize(packed) < 0.8 * os.path.getsize(plain)
    a, b = load_hetgraph(plain), load_hetgraph(packed)
    for nt in g.node_types:
        np.testing.assert_array_equal(a[nt].x, b[nt].x)
    for et in g.edge_types:
        np.testing.assert_array_equal(a[et].edge_index, b[et].edge_index)
    d = HeteroData()
    d["paper"].x = rtx.tensor(np.eye(300, dtype=np.float32))
    d["paper"].node_id = rtx.arange(300)
    d.save(tmp_path / "d.npz")
    d.save(tmp_path / "dz.npz", compress=True)
    assert os.path.getsize(tmp_path / "dz.npz") < 0.1 * os.path.getsize(tmp_path / "d.npz")
    back = HeteroData.load(tmp_path / "dz.npz")
    np.testing.assert_array_equal(back["paper"].x.numpy(), d["paper"].x.numpy())
