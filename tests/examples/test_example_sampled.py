"""``rtx-hetgat --sampled`` (rtx/examples/_sampled.py) end to end, at tiny scale:
neighbour-sampled mini-batches, embeddings for featureless types, layer-wise
evaluation each epoch, best checkpoint, metrics, one-line errors."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import rtx
from rtx.examples import hetgat as example

MAG = ["--sampled", "--dataset", "mag", "--scale", "0.002", "--num-neighbors", "5", "3",
       "--batch-size", "128", "--epochs", "3", "--hidden", "8", "--heads", "2",
       "--lr", "0.02"]
SCORES = [f"{s}_{k}" for s in ("train", "val", "test") for k in ("acc", "macro_f1", "micro_f1")]


def _no_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)


def test_sampled_mag_run(tmp_path, capsys, monkeypatch):
    _no_tqdm(monkeypatch)
    out = tmp_path / "run"
    m = example.main([*MAG, "--out", str(out)])
    text = capsys.readouterr().out
    assert "seeds/s" in text and "eta" in text and "batch      1/" in text
    assert "3 without features: embeddings" in text and "sparse, SparseAdam" in text
    with open(out / "metrics.json") as f:
        written = json.load(f)
    hist = written["history"]
    assert [r["epoch"] for r in hist] == [1, 2, 3]
    for r in hist:
        assert set(SCORES) <= set(r) and r["seeds_per_s"] > 0 and np.isfinite(r["loss"])
        assert r["train_micro_f1"] == pytest.approx(r["train_acc"])
    assert hist[-1]["loss"] < hist[0]["loss"]  # it trains
    best = max(hist, key=lambda r: (r["val_acc"], -r["epoch"]))
    assert written["best_epoch"] == best["epoch"]
    # the checkpoint is the best epoch's model: reloaded, its layer-wise evaluation gives
    # that epoch's scores again
    assert written["final"] == {k: best[k] for k in SCORES}
    s = written["sampled"]
    assert s["num_neighbors"] == [5, 3] and s["batch_size"] == 128 and s["sparse_embeddings"]
    assert set(s["embeddings"]) == {"author", "institution", "field_of_study"}
    state = rtx.load(out / "best.npz")
    assert state["emb.author.weight"].shape == (s["embeddings"]["author"], 8)
    for split in ("train", "val", "test"):
        assert f"{split} accuracy {m['final'][split + '_acc']:.4f}  macro-F1" in text


def test_sampled_on_the_default_graph_with_dense_embeddings_is_deterministic(tmp_path):
    """No featureless type there; the same seed gives the same run at any thread count."""
    args = ["--sampled", "--num-papers", "200", "--epochs", "2", "--hidden", "8", "--heads",
            "2", "--batch-size", "32", "--num-neighbors", "4", "4", "--progress", "none"]
    a = example.main([*args, "--out", str(tmp_path / "a"), "--threads", "1"])
    b = example.main([*args, "--out", str(tmp_path / "b"), "--threads", "2"])
    assert a["sampled"]["embeddings"] == {}
    assert [r["loss"] for r in a["history"]] == [r["loss"] for r in b["history"]]
    assert a["final"] == b["final"]
    c = example.main(["--sampled", "--dataset", "mag", "--scale", "0.001", "--epochs", "1",
                      "--hidden", "4", "--heads", "2", "--dense-embeddings", "--progress",
                      "none", "--out", str(tmp_path / "c")])
    assert not c["sampled"]["sparse_embeddings"]


@pytest.mark.parametrize("argv, message", [
    (["--dataset", "mag"], "--dataset mag trains with --sampled"),
    (["--scale", "0.1"], "--scale is for --dataset mag"),
    (["--sampled", "--dataset", "mag", "--scale", "0"], "--scale must be > 0"),
    (["--sampled", "--dataset", "mag", "--scale", "1e-9"], "--scale 1e-09:"),
    (["--batch-size", "8"], "--batch-size is an option of --sampled"),
    (["--num-neighbors", "3", "3"], "--num-neighbors is an option of --sampled"),
    (["--sampled", "--num-neighbors", "3"], "gives 1 hop(s) but --layers is 2"),
    (["--sampled", "--num-neighbors", "3", "-2"], "must be at least -1"),
    (["--sampled", "--batch-size", "0"], "must be at least 1"),
    (["--sampled", "--distributed"], "cannot be combined"),
    (["--sampled", "--dataset", "mag", "--data", "x.npz"], "two graphs"),
])
def test_sampled_bad_options_are_one_line(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        example.main([*argv, "--out", str(tmp_path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rtx-hetgat: error: ") and message in err


def test_sampled_tqdm_bar_shows_seeds_per_second(tmp_path, capsys):
    pytest.importorskip("tqdm")
    example.main(["--sampled", "--dataset", "mag", "--scale", "0.001", "--epochs", "1",
                  "--hidden", "4", "--heads", "2", "--progress", "tqdm",
                  "--out", str(tmp_path)])
    cap = capsys.readouterr()
    assert "seeds/s" in cap.err and "batch" in cap.err  # tqdm writes to stderr
    assert "epoch 1: loss" in cap.out + cap.err
