"""The HetGAT training example (rtx's main job) end to end, at tiny scale."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from conftest import run_python

import rtx
from rtx.datasets import save_hetgraph, synthetic_hetgraph
from rtx.examples import hetgat as example
from rtx.nn import HetGAT

TINY = ["--num-papers", "160", "--epochs", "4", "--hidden", "8", "--heads", "2"]


def _check_outputs(out_dir, epochs=4):
    with open(os.path.join(out_dir, "metrics.json")) as f:
        m = json.load(f)
    assert [r["epoch"] for r in m["history"]] == list(range(1, epochs + 1))
    scores = [f"{s}_{k}" for s in ("train", "val", "test")
              for k in ("acc", "macro_f1", "micro_f1")]
    for r in m["history"]:
        assert set(r) == {"epoch", "loss", "seconds", *scores}
        assert np.isfinite(r["loss"]) and 0 <= r["val_acc"] <= 1
        for s in ("train", "val", "test"):  # issue 20: F1 beside accuracy (rtx.metrics)
            assert r[f"{s}_micro_f1"] == pytest.approx(r[f"{s}_acc"])  # single-label
            assert 0 <= r[f"{s}_macro_f1"] <= 1
    best = max(m["history"], key=lambda r: (r["val_acc"], -r["epoch"]))
    assert m["best_epoch"] == best["epoch"]
    # the checkpoint holds the best epoch's parameters: reloading reproduces its scores
    assert m["final"] == {k: best[k] for k in scores}
    assert os.path.isfile(m["checkpoint"])
    return m


def test_example_in_process_with_plain_progress(tmp_path, capsys, monkeypatch):
    # no tqdm: the plain fallback prints epoch lines
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    out = tmp_path / "run"
    m = example.main([*TINY, "--out", str(out), "--seed", "3"])
    text = capsys.readouterr().out
    assert "epoch    1/4  loss" in text and "s/epoch" in text
    for split in ("train", "val", "test"):
        assert f"{split} accuracy {m['final'][split + '_acc']:.4f}  macro-F1 " in text
    _check_outputs(out)
    assert m["config"]["num_papers"] == 160 and m["config"]["seed"] == 3
    # the checkpoint loads into a fresh model (rtx.load + load_state_dict)
    g = synthetic_hetgraph(160, seed=3)
    model = HetGAT(g.metadata(), g.num_features_dict, 8, g.num_classes, heads=2)
    model.load_state_dict(rtx.load(out / "best.npz"))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not (out / "curves.png").exists()
    else:
        assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_example_same_run_at_any_thread_count(tmp_path):
    runs = []
    for threads in ("1", "2"):
        m = example.main([*TINY, "--out", str(tmp_path / threads), "--threads", threads,
                          "--progress", "none"])
        runs.append([(r["loss"], r["val_acc"]) for r in m["history"]])
    assert runs[0] == runs[1]
    a = rtx.load(tmp_path / "1" / "best.npz")
    b = rtx.load(tmp_path / "2" / "best.npz")
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_example_on_a_users_npz(tmp_path):
    g = synthetic_hetgraph(120, seed=4)
    path = tmp_path / "mine.npz"
    save_hetgraph(g, path)
    m = example.main(["--data", str(path), "--epochs", "2", "--hidden", "4", "--heads", "2",
                      "--out", str(tmp_path / "run"), "--progress", "none"])
    assert m["graph"]["source"] == os.path.abspath(path)
    assert m["graph"]["num_nodes"] == g.num_nodes_dict
    _check_outputs(tmp_path / "run", epochs=2)


def test_example_bad_options(tmp_path, capsys):
    # one line on stderr and exit status 2, before anything runs (tests/examples/test_cli.py has
    # every option in a child process)
    with pytest.raises(SystemExit) as ei:
        example.main(["--epochs", "0", "--out", str(tmp_path)])
    assert ei.value.code == 2
    assert capsys.readouterr().err == (
        "rtx-hetgat: error: argument --epochs: must be at least 1, got 0\n")
    with pytest.raises(SystemExit) as ei:
        example.main([*TINY, "--hidden", "6", "--heads", "4", "--out", str(tmp_path),
                      "--progress", "none"])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("rtx-hetgat: error: --hidden (6) must be a multiple of --heads (4)")
    assert err.count("\n") == 1
    assert os.listdir(tmp_path) == []


def test_example_as_module_from_a_neutral_directory(tmp_path):
    """``python -m rtx.examples.hetgat`` (what the README runs), in a child process."""
    out = tmp_path / "run"
    p = run_python(["-m", "rtx.examples.hetgat", *TINY, "--out", str(out),
                    "--progress", "plain"], timeout=300)
    assert p.returncode == 0, p.stderr
    assert "test accuracy 0." in p.stdout or "test accuracy 1." in p.stdout
    _check_outputs(out)


def test_benchmark_quick_mode_runs():
    """``benchmarks/bench_hetgat.py --quick`` (rtx side) runs end to end in its child
    process against the rtx under test; no timing is asserted."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    bench = os.path.join(root, "benchmarks", "bench_hetgat.py")
    if not os.path.isfile(bench):
        pytest.skip("benchmarks/ is not here (tests copied out of the checkout)")
    p = run_python([bench, "--quick", "--no-pyg"], timeout=300)
    assert p.returncode == 0, p.stderr
    assert f"from {os.path.dirname(os.path.realpath(rtx.__file__))}" in p.stdout, p.stdout[:300]
    assert "| 2000 | rtx |" in p.stdout
