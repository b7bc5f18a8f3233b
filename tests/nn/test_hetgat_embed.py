"""HetGAT with featureless node types (learnable embeddings, sparse or dense) and
its layer-wise inference (equal to the full-graph forward)."""

from __future__ import annotations

import numpy as np
import pytest
from _gat_reference import gradcheck_module
from test_hetgat import EDGE_TYPES, _hetgat_ref, _tiny

import rtx
from rtx.loader import NeighborLoader
from rtx.nn import HetGAT
from rtx.nn.functional import cross_entropy
from rtx.optim import Adam, SparseAdam

META = (["item", "user"], EDGE_TYPES)


def _model(sparse=False, seed=0, **kw):
    rtx.manual_seed(seed)
    return HetGAT(META, {"item": 3, "user": None}, 4, 3, heads=2, target="item",
                  num_nodes_dict={"user": 4}, sparse=sparse, **kw).double()


def test_featureless_type_uses_its_embedding():
    x, ei = _tiny()
    m = _model()
    assert m.featureless == ["user"] and m.in_channels == {"item": 3, "user": 4}
    assert "emb.user.weight" in m.state_dict() and m.emb.user.weight.shape == (4, 4)
    out = m({"item": rtx.tensor(x["item"])}, ei)
    ref = _hetgat_ref(m, {"item": x["item"], "user": m.emb.user.weight.numpy()}, ei)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-10, atol=1e-12)
    # a batch's global ids pick the rows (the sampled loaders' n_id)
    ids = np.array([3, 1, 1, 0])
    out = m({"item": rtx.tensor(x["item"])}, ei, {"user": ids})
    ref = _hetgat_ref(m, {"item": x["item"], "user": m.emb.user.weight.numpy()[ids]}, ei)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-10, atol=1e-12)


def test_models_with_features_only_are_unchanged():
    """No embedding is drawn: the same parameters for the same seed as before."""
    rtx.manual_seed(0)
    a = HetGAT(META, {"item": 3, "user": 2}, 4, 3, heads=2, target="item")
    rtx.manual_seed(0)
    b = HetGAT(META, {"item": 3, "user": 2}, 4, 3, heads=2, target="item",
               num_nodes_dict={"user": 4})
    assert not a.featureless and list(a.state_dict()) == list(b.state_dict())
    for k, v in a.state_dict().items():
        np.testing.assert_array_equal(v, b.state_dict()[k])


def test_gradcheck_through_the_embedding():
    x, ei = _tiny(seed=7, n_item=3, n_user=3)
    rtx.manual_seed(2)
    m = HetGAT(META, {"item": 3, "user": None}, 4, 2, heads=2, target="item",
               num_nodes_dict={"user": 3}).double()
    assert gradcheck_module(m, [rtx.tensor(x["item"])], lambda mod, a: mod({"item": a}, ei))


def test_sparse_embeddings_get_row_sparse_grads_of_the_batch():
    x, ei = _tiny()
    m, d = _model(sparse=True), _model(sparse=False)
    ids = np.array([2, 0, 2, 0])
    for mod in (m, d):
        mod({"item": rtx.tensor(x["item"])}, ei, {"user": ids}).sum().backward()
    g = m.emb.user.weight.grad
    assert g.is_sparse and g.indices().numpy().tolist() == [[0, 2]]
    np.testing.assert_allclose(g.to_dense().numpy(), d.emb.user.weight.grad.numpy(),
                               rtol=1e-12)
    assert [p is m.emb.user.weight for p in m.embedding_parameters()] == [True]
    assert len(m.dense_parameters()) == len(list(m.parameters())) - 1


def test_bad_featureless_arguments():
    with pytest.raises(ValueError, match="num_nodes_dict"):
        HetGAT(META, {"item": 3, "user": None}, 4, 3, heads=2, target="item")
    with pytest.raises(ValueError, match="in_channels has no size"):
        HetGAT(META, {"item": 3}, 4, 3, heads=2, target="item")
    with pytest.raises(ValueError, match="not in metadata"):
        HetGAT(META, {"item": 3, "user": None}, 4, 3, heads=2, target="item",
               num_nodes_dict={"user": 4, "shop": 2})
    with pytest.raises(ValueError, match="embedding_dim"):
        HetGAT(META, {"item": 3, "user": None}, 4, 3, heads=2, target="item",
               num_nodes_dict={"user": 4}, embedding_dim=0)
    x, ei = _tiny()
    m = _model()
    with pytest.raises(ValueError, match="has an embedding"):
        m({"item": rtx.tensor(x["item"]), "user": rtx.tensor(x["user"])}, ei)
    with pytest.raises(IndexError, match="n_id_dict"):
        m({"item": rtx.tensor(x["item"])}, ei, {"user": np.array([0, 4, 1, 1])})


# ------------------------------------------------------- layer-wise inference
def _data(x, ei):
    d = rtx.data.HeteroData()
    for nt, v in x.items():
        d[nt].x = rtx.tensor(v)
    for et, v in ei.items():
        d[et].edge_index = v
    return d


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_inference_equals_the_full_forward(layers):
    x, ei = _tiny(seed=3, n_item=9, n_user=7)
    ei[("item", "similar", "item")][:, 0] = 4  # a self-loop in the data (GAT drops it)
    rtx.manual_seed(1)
    m = HetGAT(META, {"item": 3, "user": 2}, 4, 3, heads=2, num_layers=layers,
               target="item").double().eval()
    with rtx.no_grad():
        full = m(_t(x), ei).numpy()
    for bs in (1, 2, 4, 9, 100):
        np.testing.assert_allclose(m.inference(_data(x, ei), batch_size=bs).numpy(), full,
                                   rtol=1e-12, atol=1e-13)


def _t(x):
    return {k: rtx.tensor(v) for k, v in x.items()}


def test_inference_with_embeddings_on_a_mag_graph():
    data = rtx.datasets.synthetic_mag(0.001)
    rtx.manual_seed(0)
    m = HetGAT(data.metadata(), {"paper": 128, "author": None, "institution": None,
                                 "field_of_study": None}, 8, data.num_classes, heads=2,
               num_nodes_dict=data.num_nodes_dict, sparse=True).double()
    x = {"paper": data["paper"].x.double()}
    with rtx.no_grad():
        full = m(x, data.edge_index_dict).numpy()
    data["paper"].x = x["paper"]
    out = m.inference(data, batch_size=64)
    assert out.shape == (data["paper"].num_nodes, data.num_classes)
    np.testing.assert_allclose(out.numpy(), full, rtol=1e-11, atol=1e-12)
    assert not out.requires_grad


def test_inference_bad_arguments():
    x, ei = _tiny()
    m = _model()
    for bs, exc in ((0, ValueError), (True, TypeError), (2.5, TypeError)):
        with pytest.raises(exc, match="batch_size"):
            m.inference(_data({"item": x["item"]}, ei), batch_size=bs)
    with pytest.raises(TypeError, match="x_dict"):
        m.inference(object())


def test_sampled_training_with_sparse_adam_learns():
    """Sampled batches (n_id gathers the embeddings), SparseAdam for the embeddings
    and Adam for the rest: the training loss falls."""
    data = rtx.datasets.synthetic_mag(0.002)
    rtx.manual_seed(0)
    m = HetGAT(data.metadata(), {"paper": 128, "author": None, "institution": None,
                                 "field_of_study": None}, 16, data.num_classes, heads=2,
               num_nodes_dict=data.num_nodes_dict, sparse=True)
    dense = Adam(m.dense_parameters(), lr=0.01)
    sparse = SparseAdam(m.embedding_parameters(), lr=0.01)
    train = np.flatnonzero(data["paper"].train_mask.numpy())
    loader = NeighborLoader(data, [5, 5], input_nodes=("paper", train), batch_size=256,
                            shuffle=True)
    losses = []
    for _ in range(4):
        tot = 0.0
        for b in loader:
            dense.zero_grad()
            sparse.zero_grad()
            bs = b["paper"].batch_size
            out = m(b.x_dict, b.edge_index_dict, b.n_id_dict)[:bs]
            loss = cross_entropy(out, b["paper"].y[:bs])
            loss.backward()
            assert m.emb.author.weight.grad.is_sparse
            dense.step()
            sparse.step()
            tot += loss.item() * bs
        losses.append(tot / len(train))
    assert losses[-1] < losses[0] - 0.3, losses


@pytest.mark.parametrize("layers", [2, 3])
def test_trimming_to_the_layer_gives_the_seeds_logits_and_gradients(layers):
    """num_sampled_nodes_dict / num_sampled_edges_dict (DGL's blocks): layer l reads
    hops 0 .. L - l and outputs hops 0 .. L - l - 1 only; the result is the seeds'
    logits, the untrimmed forward's to rounding, every gradient too."""
    data = rtx.datasets.synthetic_mag(0.002, seed=1)
    rtx.manual_seed(0)
    m = HetGAT(data.metadata(), {"paper": 128, "author": None, "institution": None,
                                 "field_of_study": None}, 8, data.num_classes, heads=2,
               num_layers=layers, num_nodes_dict=data.num_nodes_dict, sparse=False).double()
    train = np.flatnonzero(data["paper"].train_mask.numpy())
    loader = NeighborLoader(data, [4] * layers, input_nodes=("paper", train), batch_size=32)
    b = next(iter(loader))
    k = b["paper"].batch_size
    x = {"paper": b["paper"].x.double()}
    kw = dict(num_sampled_nodes_dict=b.num_sampled_nodes_dict,
              num_sampled_edges_dict=b.num_sampled_edges_dict)
    grads = []
    for trim in (False, True):
        m.zero_grad()
        out = m(x, b.edge_index_dict, b.n_id_dict, **(kw if trim else {}))
        loss = cross_entropy(out[:k], b["paper"].y[:k])
        loss.backward()
        grads.append((out.shape[0], out[:k].numpy(),
                      {n: p.grad.numpy() for n, p in m.named_parameters() if p.grad is not None}))
    (n_full, full, g_full), (n_trim, trim, g_trim) = grads
    # to rounding, not bit for bit: the first layer's target logits are a GEMM over
    # the hop 0..1 rows only, and OpenBLAS's bits for a row depend on the row count
    # (numpy: (a @ b)[:151] != a[:151] @ b for a [3000, 128] and b [128, 2])
    np.testing.assert_allclose(trim, full, rtol=1e-10, atol=1e-13)
    assert n_trim == k < n_full                          # the seeds only
    assert g_trim.keys() == g_full.keys()
    for n in g_full:
        np.testing.assert_allclose(g_trim[n], g_full[n], rtol=1e-9, atol=1e-12, err_msg=n)


def test_trimming_arguments_are_checked():
    data = rtx.datasets.synthetic_mag(0.001, seed=2)
    m = HetGAT(data.metadata(), {"paper": 128, "author": None, "institution": None,
                                 "field_of_study": None}, 8, data.num_classes, heads=2,
               num_nodes_dict=data.num_nodes_dict)
    loader = NeighborLoader(data, [3, 3], input_nodes=("paper", np.arange(20)), batch_size=20)
    b = next(iter(loader))
    nodes, edges = b.num_sampled_nodes_dict, b.num_sampled_edges_dict
    args = (b.x_dict, b.edge_index_dict, b.n_id_dict)
    with pytest.raises(ValueError, match="needs both"):
        m(*args, num_sampled_nodes_dict=nodes)
    bad = dict(nodes, paper=list(nodes["paper"])[:2])
    with pytest.raises(ValueError, match=r"num_sampled_nodes_dict\['paper'\]"):
        m(*args, num_sampled_nodes_dict=bad, num_sampled_edges_dict=edges)
    et = next(iter(edges))
    bad_e = dict(edges)
    bad_e[et] = [v + 1 for v in edges[et]]
    with pytest.raises(ValueError, match="num_sampled_edges_dict"):
        m(*args, num_sampled_nodes_dict=nodes, num_sampled_edges_dict=bad_e)
    with pytest.raises(ValueError, match="not a list"):
        m(b.x_dict, [b.edge_index_dict] * 2, b.n_id_dict, num_sampled_nodes_dict=nodes,
          num_sampled_edges_dict=edges)


def test_a_dropped_batch_is_freed_without_the_cyclic_collector():
    """HeteroData's stores hold their data weakly (as PyG's): no reference cycle, so a
    sampled batch's buffers go when the batch does (they used to wait for gc, which
    let a training loop's RSS climb by a batch's size per step)."""
    import gc
    import weakref

    data = rtx.data.HeteroData()
    data["paper"].x = rtx.zeros(4, 2)
    data["author", "writes", "paper"].edge_index = np.array([[0, 1], [2, 3]])
    data["author"].num_nodes = 2
    assert data["author", "writes", "paper"].size() == (2, 4)
    ref = weakref.ref(data)
    gc.disable()
    try:
        del data
        assert ref() is None
    finally:
        gc.enable()
