"""rtx.data.HeteroData: PyG's heterogeneous data object (stores, views, checks, files)."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import rtx
from rtx.data import EdgeStore, HeteroData, NodeStore
from rtx.data.naming import (
    check_edge_type,
    check_name,
    edge_key,
    edge_module_key,
    parse_edge_key,
)

W = ("author", "writes", "paper")
C = ("paper", "cites", "paper")


def small() -> HeteroData:
    data = HeteroData()
    data.target = "paper"
    data["paper"].x = rtx.randn(4, 8, seed=0)
    data["paper"].y = rtx.tensor([0, 1, 0, 1])
    data["author"].num_nodes = 3                       # featureless
    data[W].edge_index = np.array([[0, 1, 2], [0, 0, 3]])
    data[C].edge_index = rtx.tensor([[0, 1], [1, 2]])
    data[C].edge_attr = np.ones((2, 5), dtype=np.float32)
    return data


# ------------------------------------------------------------------ naming
@pytest.mark.parametrize("name", ["paper", "field_of_study", "rev_writes", "a b", ">actor"])
def test_names_accepted(name):
    assert check_name(name) == name


@pytest.mark.parametrize("name,exc", [
    ("", TypeError), (3, TypeError), (None, TypeError),
    ("a/b", ValueError), ("a.b", ValueError), ("a__b", ValueError), ("_a", ValueError),
    ("a_", ValueError), ("a\x00b", ValueError), ("a\nb", ValueError),
])
def test_names_refused(name, exc):
    with pytest.raises(exc):
        check_name(name)


def test_edge_keys_are_injective_and_invert():
    # without the rule on leading/trailing '_' these two would share both keys
    assert edge_key(("a", "r", "b")) == "a__r__b"
    assert parse_edge_key("a__r__b") == ("a", "r", "b")
    assert edge_module_key(("author", "writes", "paper")) == "<author___writes___paper>"
    with pytest.raises(ValueError):
        check_edge_type(("a_", "r", "b"))
    with pytest.raises(ValueError):
        check_edge_type(("a", "r", "_b"))
    with pytest.raises(ValueError):
        parse_edge_key("a__b")
    with pytest.raises(ValueError):
        check_edge_type(("a", "r"))


# ------------------------------------------------------------------ stores
def test_stores_and_lookups():
    data = small()
    assert isinstance(data["paper"], NodeStore) and isinstance(data[W], EdgeStore)
    assert data["writes"] is data[W]                 # unambiguous relation name
    assert data["author", "paper"] is data[W]        # unambiguous (src, dst)
    assert data["paper", "paper"] is data[C]
    assert data.target == "paper" and data["target"] == "paper"
    assert data.metadata() == (["paper", "author"], [W, C])
    assert data.node_types == ["paper", "author"] and data.edge_types == [W, C]
    assert data.num_nodes_dict == {"paper": 4, "author": 3}
    assert data.num_nodes == 7 and data.num_edges == 5
    assert data.num_edges_dict == {W: 3, C: 2}
    assert data.num_node_features == {"paper": 8, "author": 0}
    assert data[W].size() == (3, 4) and data[W].size(1) == 4
    assert set(data.x_dict) == {"paper"} and data.x_dict["paper"] is data["paper"].x
    assert set(data.edge_index_dict) == {W, C}
    assert set(data.edge_attr_dict) == {C}
    assert "paper" in data and W in data and "target" in data and "nothing" not in data
    assert data["author"].node_type == "author" and data[W].edge_type == W
    assert set(data.keys()) == {"target", "x", "y", "num_nodes", "edge_index", "edge_attr"}


def test_new_stores_are_checked_and_created():
    data = HeteroData()
    data["venue"].num_nodes = 2
    assert data.node_types == ["venue"]
    data["venue", "paper"].edge_index = np.zeros((2, 0), np.int64)   # PyG's default relation
    assert data.edge_types == [("venue", "to", "paper")]
    with pytest.raises(ValueError, match="__"):
        data["a__b"]
    with pytest.raises(ValueError):
        data["a", "r.x", "b"]
    with pytest.raises(KeyError):
        data[1]


def test_ambiguous_lookups_raise():
    data = HeteroData()
    data["a", "r", "b"].edge_index = np.zeros((2, 0), np.int64)
    data["b", "r", "a"].edge_index = np.zeros((2, 0), np.int64)
    data["a", "s", "b"].edge_index = np.zeros((2, 0), np.int64)
    with pytest.raises(KeyError, match="several"):
        data["r"]
    with pytest.raises(KeyError, match="several"):
        data["a", "b"]
    assert data["b", "a"].edge_type == ("b", "r", "a")


def test_num_nodes_inference_order():
    s = HeteroData()["p"]
    assert s.num_nodes is None
    s.y = np.zeros(5)
    assert s.num_nodes == 5
    s.x = np.zeros((6, 2))
    assert s.num_nodes == 6                      # x comes before y
    s.num_nodes = 7
    assert s.num_nodes == 7                      # explicit wins
    del s.num_nodes
    assert s.num_nodes == 6
    s.x = None                                   # PyG: assigning None deletes
    assert "x" not in s and s.num_nodes == 5


def test_num_nodes_dict_unknown_type():
    data = HeteroData()
    data["p"].something = "text"
    with pytest.raises(ValueError, match="'p'"):
        _ = data.num_nodes_dict


def test_attribute_rules():
    data = small()
    with pytest.raises(AttributeError):
        data.paper = 3                            # a node type, not an attribute
    with pytest.raises(AttributeError):
        data.num_nodes = 3                        # read-only view
    with pytest.raises(AttributeError):
        data._private = 1
    with pytest.raises(AttributeError):
        data["paper"]._private = 1
    with pytest.raises(AttributeError, match="nope"):
        _ = data.nope
    with pytest.raises(AttributeError):
        _ = data["paper"].nope
    data["num_classes"] = 2                       # a str key naming no type: graph-level
    assert data.num_classes == 2
    del data.num_classes
    assert "num_classes" not in data
    data["author"] = {"num_nodes": 5}
    assert data["author"].num_nodes == 5


def test_dict_constructor():
    data = HeteroData({"paper": {"x": np.zeros((2, 3))}, W: {"edge_index": np.zeros((2, 1),
                                                                                      np.int64)}},
                      author={"num_nodes": 1}, target="paper")
    assert data.metadata() == (["paper", "author"], [W])
    assert data.target == "paper" and data["author"].num_nodes == 1


# ------------------------------------------------------------------ checks
def test_validate_accepts_small():
    assert small().validate()


@pytest.mark.parametrize("mutate,exc,match", [
    (lambda d: setattr(d[W], "edge_index", np.array([[0, 3], [0, 0]])), IndexError, "row 0"),
    (lambda d: setattr(d[W], "edge_index", np.array([[0, 1], [0, 4]])), IndexError, "row 1"),
    (lambda d: setattr(d[W], "edge_index", np.array([[-1], [0]])), IndexError, "-1"),
    (lambda d: setattr(d[W], "edge_index", np.zeros((3, 2), np.int64)), ValueError, r"\[2, E\]"),
    (lambda d: setattr(d[W], "edge_index", np.zeros((2, 2))), TypeError, "integer"),
    (lambda d: setattr(d["paper"], "y", np.zeros(3)), ValueError, "3 rows"),
    (lambda d: setattr(d["paper"], "x", np.full((4, 2), np.nan)), ValueError, "non-finite"),
    (lambda d: setattr(d["paper"], "x", np.array([[1.0], [np.inf], [0], [0]])), ValueError,
     "row 1"),
    (lambda d: setattr(d[C], "edge_attr", np.ones((3, 5))), ValueError, "2 edges"),
    (lambda d: setattr(d["author"], "num_nodes", -1), ValueError, "num_nodes"),
    (lambda d: setattr(d["author"], "num_nodes", 2.5), ValueError, "num_nodes"),
    (lambda d: d["author", "to", "paper"], ValueError, "no edge_index"),
    (lambda d: setattr(d["paper"], "z", np.float32(3)), ValueError, "0-d"),
])
def test_validate_refuses(mutate, exc, match):
    data = small()
    mutate(data)
    with pytest.raises(exc, match=match):
        data.validate()
    assert data.validate(raise_on_error=False) is False


def test_validate_edge_to_unknown_type():
    data = small()
    data._edges[("ghost", "r", "paper")] = EdgeStore(data, ("ghost", "r", "paper"))
    data._edges[("ghost", "r", "paper")].edge_index = np.zeros((2, 0), np.int64)
    with pytest.raises(ValueError, match="ghost"):
        data.validate()


# ------------------------------------------------------------------ copies
def test_copy_clone_pickle():
    data = small()
    sh = data.copy()
    assert sh["paper"].x is data["paper"].x and sh["paper"] is not data["paper"]
    sh["paper"].x = None
    assert "x" in data["paper"]                     # stores are new
    deep = data.clone()
    assert deep["paper"].x is not data["paper"].x
    np.testing.assert_array_equal(deep["paper"].x.numpy(), data["paper"].x.numpy())
    for other in (copy.copy(data), copy.deepcopy(data), pickle.loads(pickle.dumps(data))):
        assert other.metadata() == data.metadata() and other.target == "paper"
        assert other["writes"].size() == (3, 4)   # the stores know their new parent
        np.testing.assert_array_equal(np.asarray(other[W].edge_index),
                                      np.asarray(data[W].edge_index))


def test_apply_and_device():
    data = small()
    data.apply(lambda v: np.asarray(v) * 0, "edge_index")
    assert int(np.asarray(data[W].edge_index).sum()) == 0
    assert data.to("cpu") is data and data.cpu() is data and data.to(None) is data
    with pytest.raises(ValueError, match="CPUs"):
        data.to("cuda:0")


# ------------------------------------------------------------------ files
def test_save_load_round_trip(tmp_path):
    data = small()
    data["paper"].year = np.arange(4, dtype=np.int32)
    data.note = None
    data.scale = 0.5
    p = tmp_path / "g.npz"
    data.save(p)
    back = HeteroData.load(p)
    assert back.metadata() == data.metadata()
    assert back.target == "paper" and back.scale == 0.5 and "note" not in back
    assert isinstance(back["paper"].x, rtx.Tensor) and isinstance(back["paper"].year, np.ndarray)
    assert back["paper"].year.dtype == np.int32
    for (t, s), (_, s2) in zip(data.node_items() + data.edge_items(),
                               back.node_items() + back.edge_items(), strict=True):
        assert s.keys() == s2.keys(), t
        for k in s.keys():
            np.testing.assert_array_equal(np.asarray(s[k]), np.asarray(s2[k]))
    assert repr(back) == repr(data).replace("  note=None,\n", "")


def test_save_compressed(tmp_path):
    data = small()
    data["paper"].x = rtx.zeros(2000, 8)
    data["paper"].y = np.zeros(2000, np.int64)
    plain, packed = tmp_path / "a.npz", tmp_path / "b.npz"
    data[W].edge_index = np.zeros((2, 0), np.int64)
    data[C].edge_index = np.zeros((2, 0), np.int64)
    data[C].edge_attr = np.zeros((0, 5), np.float32)
    data.save(plain)
    data.save(packed, compress=True)
    assert packed.stat().st_size * 10 < plain.stat().st_size
    assert repr(HeteroData.load(packed)) == repr(data)


def test_load_refuses_other_files(tmp_path):
    p = tmp_path / "sd.npz"
    rtx.save({"w": np.zeros(2)}, p)
    with pytest.raises(ValueError, match="not a HeteroData file"):
        HeteroData.load(p)


def test_save_refuses_objects(tmp_path):
    data = small()
    data["paper"].obj = object()
    with pytest.raises(TypeError, match="obj"):
        data.save(tmp_path / "g.npz")
    assert not (tmp_path / "g.npz").exists()


# ------------------------------------------------------------------ PyG
def test_repr_matches_pyg():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.data")
    data = small()
    ref = pyg.HeteroData()
    ref.target = "paper"
    ref["paper"].x = torch.zeros(4, 8)
    ref["paper"].y = torch.zeros(4)
    ref["author"].num_nodes = 3
    ref[W].edge_index = torch.zeros(2, 3, dtype=torch.long)
    ref[C].edge_index = torch.zeros(2, 2, dtype=torch.long)
    ref[C].edge_attr = torch.zeros(2, 5)
    assert repr(data) == repr(ref)
    assert repr(HeteroData()) == repr(pyg.HeteroData())


def test_pyg_round_trip():
    pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    data = small()
    ref = data.to_pyg()
    assert [tuple(t) for t in ref.edge_types] == data.edge_types
    assert ref.node_types == data.node_types and ref.target == "paper"
    assert ref["author"].num_nodes == 3
    back = HeteroData.from_pyg(ref)
    assert back.metadata() == data.metadata()
    assert isinstance(back["paper"].x, rtx.Tensor) and back["paper"].x.dtype == rtx.float32
    assert back[W].edge_index.dtype == rtx.int64
    np.testing.assert_array_equal(back["paper"].x.numpy(), data["paper"].x.numpy())
    np.testing.assert_array_equal(back[C].edge_attr.numpy(), data[C].edge_attr)
    with pytest.raises(TypeError):
        HeteroData.from_pyg(data)
