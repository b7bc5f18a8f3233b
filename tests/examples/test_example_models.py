"""The main job's --model / --dropout / --patience (issue 21): every ready-made model
trains full-batch on the built-in graph, its checkpoint reloads to the best epoch's
scores, dropout leaves the metrics to an evaluation pass, early stopping stops."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import rtx
from rtx.datasets import synthetic_hetgraph
from rtx.examples import hetgat as example

SCORES = [f"{s}_{k}" for s in ("train", "val", "test") for k in ("acc", "macro_f1", "micro_f1")]
TINY = ["--num-papers", "160", "--hidden", "8", "--heads", "2", "--progress", "none",
        "--seed", "2"]


def _metrics(out):
    with open(os.path.join(out, "metrics.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("model", example.MODELS)
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_every_model_trains_and_its_checkpoint_is_the_best_epoch(tmp_path, model, dropout):
    out = str(tmp_path / model)
    m = example.main([*TINY, "--model", model, "--epochs", "6", "--dropout", str(dropout),
                      "--out", out])
    assert m["config"]["model"] == model and m["config"]["dropout"] == dropout
    hist = m["history"]
    assert [r["epoch"] for r in hist] == list(range(1, 7))
    assert all(np.isfinite(r["loss"]) for r in hist)
    assert hist[-1]["loss"] < hist[0]["loss"]
    best = max(hist, key=lambda r: (r["val_acc"], -r["epoch"]))
    assert m["best_epoch"] == best["epoch"]
    # the metrics of an epoch are those of its checkpoint in evaluation mode (with
    # dropout: the evaluation pass; without: the training pass itself)
    assert m["final"] == {k: best[k] for k in SCORES}
    g = synthetic_hetgraph(160, seed=2)
    net = example.build_model(model, g, 8, 2, 2, dropout)
    net.load_state_dict(rtx.load(os.path.join(out, "best.npz")))
    net.eval()
    with rtx.no_grad():
        pred = net({k: rtx.tensor(v) for k, v in g.x_dict.items()},
                   g.edge_index_dict).argmax(-1).numpy()
    assert (pred[g.test_mask] == g.y[g.test_mask]).mean() == pytest.approx(best["test_acc"])


def test_dropout_changes_training_not_evaluation(tmp_path):
    """With dropout the training passes differ from the run without it, and each
    epoch's reported scores come from an evaluation-mode forward."""
    a = example.main([*TINY, "--epochs", "3", "--out", str(tmp_path / "a")])
    b = example.main([*TINY, "--epochs", "3", "--dropout", "0.5", "--out", str(tmp_path / "b")])
    # the first epoch's parameters are the same initial ones: same evaluation scores
    assert {k: b["history"][0][k] for k in SCORES} == {k: a["history"][0][k] for k in SCORES}
    assert a["history"][0]["loss"] != b["history"][0]["loss"]   # a dropped-out forward


def test_early_stopping(tmp_path, capsys):
    out = str(tmp_path / "es")
    m = example.main([*TINY, "--epochs", "200", "--patience", "3", "--lr", "0.05",
                      "--out", out])
    hist = m["history"]
    assert len(hist) < 200
    assert m["stopped_early_at"] == hist[-1]["epoch"] == m["best_epoch"] + 3
    assert all(r["val_acc"] <= hist[m["best_epoch"] - 1]["val_acc"]
               for r in hist[m["best_epoch"]:])
    assert f"early stopping at epoch {hist[-1]['epoch']}" in capsys.readouterr().out
    assert "stopped_early_at" not in example.main([*TINY, "--epochs", "2",
                                                   "--out", str(tmp_path / "x")])


@pytest.mark.parametrize("argv,msg", [
    (["--dropout", "1.0"], "--dropout must be in [0, 1)"),
    (["--model", "gcn"], "invalid choice: 'gcn'"),
    (["--patience", "0"], "--patience"),
    (["--model", "hgt", "--hidden", "9"], "must be a multiple of --heads"),
    (["--model", "rgcn", "--sampled", "--dataset", "mag"], "train HetGAT only"),
])
def test_bad_options_are_one_line(tmp_path, capsys, argv, msg):
    with pytest.raises(SystemExit) as ei:
        example.main([*TINY, "--epochs", "1", "--out", str(tmp_path / "o"), *argv])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err and err.startswith("rtx-hetgat: error:")
