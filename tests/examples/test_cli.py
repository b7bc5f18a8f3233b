"""The command lines (``rtx-hetgat``, ``rtx-karate`` / ``rtx-demo``) as a user meets them.

Every user error (a bad option, a file that is not a graph) is ONE line on stderr,
``prog: error: ...``, with exit status 2, never a traceback; a run that cannot finish
(a non-finite loss, an output that cannot be written) is one line and exit status 1,
and leaves the previous run's files in ``--out`` as they were.  Each case runs the
command in a child process (``python -m rtx.examples.<name>``, what the console
scripts call).
"""

from __future__ import annotations

import errno
import json
import os
import sys
import zipfile

import numpy as np
import pytest
from conftest import run_python

import rtx
from rtx.datasets import save_hetgraph, synthetic_hetgraph
from rtx.examples import _cli
from rtx.examples import hetgat as example

HETGAT = ["-m", "rtx.examples.hetgat"]
KARATE = ["-m", "rtx.examples.karate"]
TINY = ["--num-papers", "160", "--epochs", "3", "--hidden", "8", "--heads", "2",
        "--progress", "none"]


def assert_one_line_error(p, prog: str, status: int = 2, *needles: str) -> str:
    """``p`` exited with ``status`` after exactly one stderr line ``prog: error: ...``."""
    lines = p.stderr.splitlines()
    assert p.returncode == status, (p.returncode, p.stderr[-2000:])
    assert len(lines) == 1, p.stderr[-2000:]
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ------------------------------------------------------------ bad options
HETGAT_BAD_OPTIONS = {
    "threads-0": (["--threads", "0"], "--threads"),
    "threads-text": (["--threads", "two"], "--threads"),
    "epochs-0": (["--epochs", "0"], "--epochs"),
    "epochs-negative": (["--epochs", "-3"], "--epochs"),
    "epochs-text": (["--epochs", "abc"], "--epochs"),
    "epochs-float": (["--epochs", "1.5"], "--epochs"),
    "hidden-0": (["--hidden", "0"], "--hidden"),
    "heads-0": (["--heads", "0"], "--heads"),
    "layers-0": (["--layers", "0"], "--layers"),
    "hidden-not-multiple-of-heads": (["--hidden", "30", "--heads", "4"], "--heads"),
    "lr-negative": (["--lr", "-1"], "--lr"),
    "lr-nan": (["--lr", "nan"], "--lr"),
    "lr-inf": (["--lr", "inf"], "--lr"),
    "lr-text": (["--lr", "fast"], "--lr"),
    "weight-decay-negative": (["--weight-decay", "-0.1"], "--weight-decay"),
    "weight-decay-nan": (["--weight-decay", "nan"], "--weight-decay"),
    "num-papers-1": (["--num-papers", "1"], "--num-papers"),
    "num-papers-9": (["--num-papers", "9"], "--num-papers"),
    "seed-negative": (["--seed", "-1"], "--seed"),
    "progress-unknown": (["--progress", "fancy"], "--progress"),
    "partition-unknown": (["--partition", "spectral"], "--partition"),
    "unknown-option": (["--batch-size", "4"], "--batch-size"),
    "distributed-without-mpiexec": (["--distributed"], "--distributed"),
}


@pytest.mark.parametrize("case", sorted(HETGAT_BAD_OPTIONS))
def test_hetgat_bad_option_is_one_line(case, tmp_path):
    argv, needle = HETGAT_BAD_OPTIONS[case]
    p = run_python([*HETGAT, *TINY, "--out", str(tmp_path / "run"), *argv])
    assert_one_line_error(p, "rtx-hetgat", 2, needle)
    assert not (tmp_path / "run" / "best.npz").exists()


def test_hetgat_out_that_cannot_hold_files_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    p = run_python([*HETGAT, *TINY, "--out", str(blocker)])
    assert_one_line_error(p, "rtx-hetgat", 2, "--out", str(blocker))
    p = run_python([*HETGAT, *TINY, "--out", str(blocker / "sub")])
    assert_one_line_error(p, "rtx-hetgat", 2, "--out")


def test_hetgat_progress_tqdm_without_tqdm_is_one_line(tmp_path):
    code = ("import sys; sys.modules['tqdm'] = None; sys.modules['tqdm.auto'] = None\n"
            "from rtx.examples.hetgat import cli\n"
            f"sys.argv = ['rtx-hetgat', *{TINY[:-2]!r}, '--progress', 'tqdm', "
            f"'--out', {str(tmp_path / 'run')!r}]\n"
            "raise SystemExit(cli())\n")
    p = run_python(["-c", code])
    assert_one_line_error(p, "rtx-hetgat", 2, "--progress tqdm", "tqdm is not installed")


KARATE_BAD_OPTIONS = {
    "epochs-0": (["--epochs", "0"], "--epochs"),
    "epochs-text": (["--epochs", "many"], "--epochs"),
    "hidden-0": (["--hidden", "0"], "--hidden"),
    "lr-negative": (["--lr", "-1"], "--lr"),
    "lr-nan": (["--lr", "nan"], "--lr"),
    "seed-negative": (["--seed", "-5"], "--seed"),
    "unknown-option": (["--threads", "2"], "--threads"),
}


@pytest.mark.parametrize("case", sorted(KARATE_BAD_OPTIONS))
def test_karate_bad_option_is_one_line(case):
    argv, needle = KARATE_BAD_OPTIONS[case]
    p = run_python([*KARATE, *argv])
    assert_one_line_error(p, "rtx-karate", 2, needle)


def test_karate_non_finite_loss_stops_with_one_line():
    p = run_python([*KARATE, "--epochs", "50", "--lr", "1e30"])
    line = assert_one_line_error(p, "rtx-karate", 1, "training loss is nan")
    assert "at epoch" in line
    assert "trained" not in p.stdout


def test_help_texts():
    p = run_python([*KARATE, "--help"])
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.startswith("usage: rtx-karate")
    description = p.stdout.split("\n\n")[1]
    assert description.startswith("A small example") and "karate club" in description
    assert "rtx's main job: " not in p.stdout  # that is rtx-hetgat
    p = run_python([*HETGAT, "--help"])
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.startswith("usage: rtx-hetgat") and "rtx's main job" in p.stdout


# ------------------------------------------------------------ bad files
def _graph_arrays() -> dict[str, np.ndarray]:
    g = synthetic_hetgraph(40, seed=1)
    out = {f"x/{nt}": x for nt, x in g.x_dict.items()}
    out.update({"edge_index/" + "__".join(et): ei for et, ei in g.edge_index_dict.items()})
    out.update(y=g.y, train_mask=g.train_mask, val_mask=g.val_mask, test_mask=g.test_mask,
               target=np.array(g.target))
    return out


def _without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


CITES = "edge_index/paper__cites__paper"


def _bad_graphs() -> dict[str, dict[str, np.ndarray]]:
    """One crafted archive per validation rtx.datasets.load_hetgraph (and HeteroGraph)
    makes, named by what is wrong."""
    g = _graph_arrays()
    n = g["y"].shape[0]
    cites = g[CITES]
    out = {
        "edge-key-not-three-parts": {**g, "edge_index/paper__cites": cites},
        "unexpected-key": {**g, "weights": np.ones(3)},
        "no-features": {k: v for k, v in g.items() if not k.startswith("x/")},
        "no-labels": _without(g, "y"),
        "no-target-several-node-types": _without(g, "target"),
        "integer-features": {**g, "x/paper": np.ones((n, 4), np.int64)},
        "1-d-features": {**g, "x/paper": np.ones(n, np.float32)},
        "edge-to-unknown-node-type": {**g, "edge_index/paper__likes__venue": cites},
        "float-edge-index": {**g, CITES: cites.astype(np.float64)},
        "edge-index-3-rows": {**g, CITES: np.concatenate([cites, cites[:1]])},
        "edge-index-out-of-range": {**g, CITES: np.where(cites == cites.max(), 10**6, cites)},
        "target-not-a-node-type": {**g, "target": np.array("venue")},
        "labels-wrong-length": {**g, "y": g["y"][:-1]},
        "float-labels": {**g, "y": g["y"].astype(np.float64)},
        "negative-label": {**g, "y": np.where(np.arange(n) == 0, -1, g["y"])},
        "0-d-labels": {**g, "y": np.array(3)},
        "mask-wrong-length": {**g, "val_mask": g["val_mask"][:-1]},
        "mask-not-bool": {**g, "val_mask": g["val_mask"].astype(np.int64)},
        "node-type-name-with-slash": {**_without(g, "x/author"), "x/auth/or": g["x/author"]},
        "no-training-nodes": {**g, "train_mask": np.zeros(n, bool)},
    }
    return out


BAD_GRAPHS = _bad_graphs()


def _write_bad_file(kind: str, path) -> None:
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "text-renamed":
        path.write_text("paper,author\n1,2\n")
    elif kind == "npy-renamed":
        with open(path, "wb") as fh:
            np.save(fh, np.arange(4))
    elif kind == "truncated-archive":
        save_hetgraph(synthetic_hetgraph(40, seed=1), path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind == "zip-without-arrays":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("readme.txt", "hello")
    else:
        np.savez(path, **BAD_GRAPHS[kind])


BAD_FILES = ["empty", "text-renamed", "npy-renamed", "truncated-archive",
             "zip-without-arrays", *sorted(BAD_GRAPHS)]


@pytest.mark.parametrize("kind", BAD_FILES)
def test_hetgat_bad_data_file_is_one_line(kind, tmp_path):
    path = tmp_path / f"{kind}.npz"
    _write_bad_file(kind, path)
    p = run_python([*HETGAT, *TINY, "--data", str(path), "--out", str(tmp_path / "run")])
    line = assert_one_line_error(p, "rtx-hetgat", 2, f"--data {path}: ")
    assert "pickle" not in line  # numpy's message for a text file misleads
    assert not (tmp_path / "run" / "best.npz").exists()


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_hetgat_data_path_that_is_no_file_is_one_line(kind, tmp_path):
    path = tmp_path / "graph.npz"
    if kind == "directory":
        path.mkdir()
    p = run_python([*HETGAT, *TINY, "--data", str(path), "--out", str(tmp_path / "run")])
    assert_one_line_error(p, "rtx-hetgat", 2, f"--data {path}: ")


# ------------------------------------------------------------ runs that cannot finish
def _previous_run(out) -> dict[str, bytes]:
    """A good run's files in ``out`` (what a failed run must leave alone)."""
    example.main([*TINY, "--out", str(out)])
    return {f: (out / f).read_bytes() for f in os.listdir(out)}


def test_non_finite_loss_stops_and_keeps_the_previous_run(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    before = _previous_run(out)
    assert "best.npz" in before and "metrics.json" in before
    capsys.readouterr()
    real = example._load_data

    def poisoned(*args, **kwargs):  # NaN features past every check at load time
        g, source = real(*args, **kwargs)
        g.x_dict["paper"][5, 2] = np.nan
        return g, source

    monkeypatch.setattr(example, "_load_data", poisoned)
    with pytest.raises(SystemExit) as ei:
        example.main([*TINY, "--out", str(out), "--epochs", "5"])
    assert ei.value.code == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("rtx-hetgat: error: the training loss is nan "
                                               "at epoch 1"), err
    assert {f: (out / f).read_bytes() for f in os.listdir(out)} == before


def test_non_finite_loss_from_a_huge_learning_rate(tmp_path):
    p = run_python([*HETGAT, *TINY, "--epochs", "6", "--lr", "1e30", "--out",
                    str(tmp_path / "run")])
    assert_one_line_error(p, "rtx-hetgat", 1, "training loss is", "nothing written")
    assert not (tmp_path / "run" / "best.npz").exists()
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_nan_features_in_a_file_never_train_silently(tmp_path):
    good = tmp_path / "good.npz"
    save_hetgraph(synthetic_hetgraph(60, seed=2), good)  # save_hetgraph refuses inf itself
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["x/author"][0, 0] = np.inf
    path = tmp_path / "inf.npz"
    np.savez(path, **arrays)
    out = tmp_path / "run"
    p = run_python([*HETGAT, *TINY, "--data", str(path), "--out", str(out)])
    # refused at load (exit 2) or stopped at the first non-finite loss (exit 1)
    assert p.returncode in (1, 2), p.stderr
    assert_one_line_error(p, "rtx-hetgat", p.returncode)
    assert not out.exists() or not (out / "best.npz").exists()


def test_empty_validation_split_selects_by_training_loss(tmp_path, capsys):
    g = synthetic_hetgraph(120, seed=5)
    g.val_mask[:] = False
    path = tmp_path / "noval.npz"
    save_hetgraph(g, path)
    out = tmp_path / "run"
    m = example.main(["--data", str(path), "--epochs", "4", "--hidden", "8", "--heads", "2",
                      "--progress", "none", "--out", str(out)])
    text = capsys.readouterr().out
    assert "no validation nodes" in text and "by training loss" in text
    assert "val accuracy n/a" in text
    with open(out / "metrics.json") as f:
        written = json.load(f)  # strict JSON: an empty split's accuracy is null, not NaN
    assert written["best_by"] == m["best_by"] == "train_loss"
    losses = [r["loss"] for r in written["history"]]
    assert written["best_epoch"] == 1 + losses.index(min(losses))
    assert all(r["val_acc"] is None for r in written["history"])
    assert written["final"]["val_acc"] is None
    best = written["history"][written["best_epoch"] - 1]
    assert written["final"]["train_acc"] == best["train_acc"]
    assert set(rtx.load(out / "best.npz")) == set(
        example.HetGAT(g.metadata(), g.num_features_dict, 8, g.num_classes,
                       heads=2).state_dict())


# ------------------------------------------------------------ atomic outputs
def _failing_midway(data: bytes, target_arg: int):
    """A writer that puts the first bytes of ``data`` into its ``target_arg``-th
    argument (an open file, or a path it opens as a plain ``open`` would), then
    hits a full disk."""
    def fail(*args, **kwargs):
        target = args[target_arg]
        if isinstance(target, (str, os.PathLike)):
            with open(target, "wb") as fh:
                fh.write(data)
        else:
            target.write(data if "b" in getattr(target, "mode", "b") else data.decode())
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return fail


def test_failed_checkpoint_write_keeps_the_previous_one(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    before = _previous_run(out)
    capsys.readouterr()
    monkeypatch.setattr(example.rtx, "save", _failing_midway(b"PK\x03\x04 half a zip", 1))
    with pytest.raises(SystemExit) as ei:
        example.main([*TINY, "--out", str(out), "--seed", "9"])
    assert ei.value.code == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "cannot write" in err[0] and "best.npz" in err[0], err
    assert (out / "best.npz").read_bytes() == before["best.npz"]
    assert sorted(os.listdir(out)) == sorted(before)  # no temporary file left behind
    monkeypatch.undo()
    rtx.load(out / "best.npz")


def test_failed_metrics_write_keeps_the_previous_one(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    before = _previous_run(out)
    capsys.readouterr()
    monkeypatch.setattr(example.json, "dump", _failing_midway(b'{"config": ', 1))
    with pytest.raises(SystemExit) as ei:
        example.main([*TINY, "--out", str(out), "--seed", "9"])
    assert ei.value.code == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("rtx-hetgat: error: cannot write"), err
    assert (out / "metrics.json").read_bytes() == before["metrics.json"]
    assert sorted(os.listdir(out)) == sorted(before)


def test_failed_plot_write_keeps_the_previous_one(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure
    out = tmp_path / "run"
    before = _previous_run(out)
    assert before["curves.png"][:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    monkeypatch.setattr(Figure, "savefig", _failing_midway(b"\x89PNG", 1))
    with pytest.raises(SystemExit) as ei:
        example.main([*TINY, "--out", str(out), "--seed", "9"])
    assert ei.value.code == 1
    assert (out / "curves.png").read_bytes() == before["curves.png"]
    assert sorted(os.listdir(out)) == sorted(before)


# ------------------------------------------------------------ optional libraries
def test_missing_optional_libraries_are_one_line_notes(tmp_path, monkeypatch, capsys):
    for name in ("tqdm", "tqdm.auto", "matplotlib", "matplotlib.pyplot"):
        monkeypatch.setitem(sys.modules, name, None)
    out = tmp_path / "run"
    example.main(["--num-papers", "160", "--epochs", "4", "--hidden", "8", "--heads", "2",
                  "--out", str(out)])
    cap = capsys.readouterr()
    notes = cap.err.splitlines()
    assert len(notes) == 2, notes
    assert notes[0].startswith("rtx-hetgat: note: tqdm is not installed")
    assert notes[1].startswith("rtx-hetgat: note: no curves.png: matplotlib is not installed")
    assert all('pip install "rtx-gnn[examples]"' in n for n in notes)
    # the plain progress lines (auto without tqdm) say how long is left
    lines = [ln for ln in cap.out.splitlines() if ln.startswith("epoch ")]
    assert len(lines) == 4 and all(" eta " in ln and ln.endswith(" s") for ln in lines), lines
    assert lines[-1].endswith("eta 0.0 s")
    assert not (out / "curves.png").exists()


def test_eta_formatting():
    assert _cli.duration(4.21) == "4.2 s"
    assert _cli.duration(59.94) == "59.9 s"
    assert _cli.duration(185) == "3 min 05 s"
    assert _cli.duration(7380) == "2 h 03 min"


# ------------------------------------------------------------ the pieces, directly
def _rows(losses, val=None):
    for i, loss in enumerate(losses, 1):
        yield ({"epoch": i, "loss": loss, "train_acc": 0.5,
                "val_acc": (val or [0.5] * len(losses))[i - 1], "test_acc": 0.5,
                "seconds": 0.1}, {"w": np.full(2, i)})


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_any_non_finite_loss_stops_the_run(bad, capsys):
    ap = example.build_parser()
    best = example._Best(True)
    with pytest.raises(SystemExit) as ei:
        example._run_epochs(ap, _rows([1.0, 0.9, bad, 0.5]), best)
    assert ei.value.code == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"the training loss is {bad} at epoch 3" in err[0], err
    assert best.epoch == 1  # what the finite epochs selected, never the bad one


def test_best_epoch_is_the_first_of_equals():
    ap = example.build_parser()
    best = example._Best(True)
    hist = example._run_epochs(ap, _rows([1.0, 0.9, 0.8, 0.7], val=[0.2, 0.6, 0.6, 0.4]), best)
    assert len(hist) == 4 and (best.epoch, best.value, best.described) == (
        2, 0.6, "validation accuracy")
    assert best.state["w"].tolist() == [2, 2]
    best = example._Best(False)  # no validation nodes: the lowest training loss
    example._run_epochs(ap, _rows([1.0, 0.7, 0.7, 0.9], val=[float("nan")] * 4), best)
    assert (best.epoch, best.value, best.described) == (2, 0.7, "training loss")


def test_plain_progress_eta(monkeypatch, capsys):
    clock = iter([100.0, 102.0, 104.0, 110.0])  # start, then after epochs 1, 2 and 10
    monkeypatch.setattr(example.time, "perf_counter", lambda: next(clock))
    bar = example._Progress(10, "plain")
    row = {"loss": 1.0, "train_acc": 0.5, "val_acc": 0.5, "seconds": 2.0}
    for epoch in (1, 2, 10):
        bar.update(epoch, row)
    lines = capsys.readouterr().out.splitlines()
    # 2 s for epoch 1: 9 epochs left; 4 s for 2: 8 left (2 s each); all done after 10
    assert [ln.rsplit("eta ", 1)[1] for ln in lines] == ["18.0 s", "16.0 s", "0.0 s"], lines
    assert lines[0].startswith("epoch    1/10  loss 1.0000")


def test_ctrl_c_is_one_line_and_exit_130(capsys):
    """Every console script's body (rtx.examples._cli.run_console): an interrupt
    ends it with one line and status 130, never a traceback."""
    from rtx.examples import _cli, hetgat, hetlink, karate

    def interrupted():
        raise KeyboardInterrupt

    assert _cli.run_console(interrupted, "rtx-x") == 130
    assert capsys.readouterr().err == "rtx-x: interrupted\n"
    assert _cli.run_console(lambda: None, "rtx-x") == 0
    for mod in (hetgat, hetlink, karate):
        assert "run_console" in mod.cli.__code__.co_names
