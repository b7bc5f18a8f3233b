"""The link-prediction example (rtx.examples.hetlink) end to end, at tiny scale."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from conftest import run_python

import rtx
from rtx.datasets import synthetic_hetgraph
from rtx.examples import hetlink as example

TINY = ["--num-papers", "200", "--epochs", "3", "--hidden", "8", "--heads", "2"]


def _check(out_dir, epochs=3):
    with open(os.path.join(out_dir, "metrics.json")) as f:
        m = json.load(f)
    assert [r["epoch"] for r in m["history"]] == list(range(1, epochs + 1))
    for r in m["history"]:
        assert set(r) == {"epoch", "loss", "val_auc", "val_mrr", "val_hits@10", "seconds"}
        assert np.isfinite(r["loss"]) and 0 <= r["val_auc"] <= 1 and 0 < r["val_mrr"] <= 1
    best = max(m["history"], key=lambda r: (r["val_auc"], -r["epoch"]))
    assert m["best_epoch"] == best["epoch"]
    # the checkpoint holds the best epoch's parameters: reloading gives its val metrics
    assert m["final"]["val"]["auc"] == pytest.approx(best["val_auc"], abs=1e-12)
    assert m["final"]["val"]["mrr"] == pytest.approx(best["val_mrr"], abs=1e-12)
    assert set(m["final"]["test"]) == {"auc", "mrr", "hits@10"}
    return m


@pytest.mark.parametrize("decoder", ["dot", "mlp"])
def test_example_runs_and_checkpoints(tmp_path, capsys, monkeypatch, decoder):
    monkeypatch.setitem(sys.modules, "tqdm", None)      # the plain progress lines
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    out = tmp_path / "run"
    m = example.main([*TINY, "--decoder", decoder, "--out", str(out), "--seed", "2"])
    text = capsys.readouterr().out
    assert "epoch    1/3  loss" in text and "val auc" in text
    assert f"test: auc {m['final']['test']['auc']:.4f}" in text
    _check(out)
    g = synthetic_hetgraph(200, seed=2)
    model = example.LinkPredictor(g.metadata(), {nt: x.shape[1] for nt, x in g.x_dict.items()},
                                  8, heads=2, decoder=decoder)
    model.load_state_dict(rtx.load(out / "best.npz"))   # strict: every key matches


def test_example_learns_something(tmp_path):
    m = example.main(["--num-papers", "600", "--epochs", "15", "--out", str(tmp_path),
                      "--progress", "none"])
    assert m["final"]["test"]["auc"] > 0.55                # 0.5 is chance


def test_training_pairs_and_split_do_not_leak():
    g = synthetic_hetgraph(200, seed=0)
    tr, va, te = example.split(g, 0.1, 0.1, seed=0)
    E = example.EDGE
    def pairs(a):
        a = a.numpy() if isinstance(a, rtx.Tensor) else np.asarray(a)
        return set(zip(a[0].tolist(), a[1].tolist(), strict=True))
    mp = pairs(tr[E].edge_index)
    rev = pairs(tr[example.REV].edge_index)
    assert rev == {(b, a) for a, b in mp}                 # the reverse relation follows
    for split in (va, te):
        lab = split[E].edge_label.numpy()
        idx = split[E].edge_label_index.numpy()
        positives = pairs(idx[:, lab == 1])
        assert not positives & mp                         # hidden from message passing


def test_bad_options_are_one_line(tmp_path, capsys):
    for argv, needle in (
        (["--epochs", "0"], "argument --epochs: must be at least 1, got 0"),
        ([*TINY, "--hidden", "7"], "--hidden (7) must be a multiple of --heads (2)"),
        ([*TINY, "--val", "0.7"], "--val must be a fraction in (0, 0.5)"),
        ([*TINY, "--decoder", "cosine"], "argument --decoder: invalid choice"),
        (["--num-papers", "5"], "must be at least 40"),
    ):
        with pytest.raises(SystemExit) as ei:
            example.main([*argv, "--out", str(tmp_path), "--progress", "none"])
        assert ei.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("rtx-hetlink: error: ") and needle in err, err
        assert err.count("\n") == 1
    assert os.listdir(tmp_path) == []


def test_example_as_module(tmp_path):
    out = tmp_path / "run"
    p = run_python(["-m", "rtx.examples.hetlink", *TINY, "--out", str(out),
                    "--progress", "plain"], timeout=300)
    assert p.returncode == 0, p.stderr
    assert "test: auc 0." in p.stdout or "test: auc 1." in p.stdout
    _check(out)
