"""``dropout=`` of the ready-made HetGAT and HGT: off in eval mode (the model equals
its dropout-free twin with the same parameters), on in training, checked arguments."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
from rtx.datasets import synthetic_hetgraph
from rtx.nn import HGT, HetGAT


@pytest.mark.parametrize("cls", [HetGAT, HGT])
def test_dropout_is_off_in_eval_and_on_in_training(cls):
    g = synthetic_hetgraph(80, seed=1)
    x = {k: rtx.tensor(v) for k, v in g.x_dict.items()}
    rtx.manual_seed(0)
    plain = cls(g.metadata(), g.num_features_dict, 8, g.num_classes, heads=2)
    rtx.manual_seed(0)
    dropped = cls(g.metadata(), g.num_features_dict, 8, g.num_classes, heads=2, dropout=0.5)
    assert set(plain.state_dict()) == set(dropped.state_dict())   # same parameters
    dropped.load_state_dict(plain.state_dict())
    plain.eval()
    dropped.eval()
    want = plain(x, g.edge_index_dict).numpy()
    np.testing.assert_array_equal(dropped(x, g.edge_index_dict).numpy(), want)
    dropped.train()
    rtx.manual_seed(5)
    a = dropped(x, g.edge_index_dict).numpy()
    assert not np.allclose(a, want)
    rtx.manual_seed(5)
    np.testing.assert_array_equal(dropped(x, g.edge_index_dict).numpy(), a)  # seeded
    for bad in (1.0, -0.1, True, "0.5"):
        with pytest.raises(ValueError, match="dropout"):
            cls(g.metadata(), g.num_features_dict, 8, g.num_classes, heads=2, dropout=bad)
