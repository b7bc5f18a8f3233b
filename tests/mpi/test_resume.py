"""Checkpoint and resume: a run interrupted after 2 epochs and resumed for 2
more ends bitwise where an uninterrupted 4-epoch run ends (parameters, Adam's
state, the loss curve, the best model), on 1 and on 2 ranks."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import rtx
import rtx.distributed as dist
from rtx.distributed import _comm
from rtx.examples.hetgat import main

from .jobs import _show, mpi_job

ARGS = ["--distributed", "--num-papers", "150", "--hidden", "8", "--heads", "2",
        "--progress", "none", "--lr", "0.05"]


def _dirs(tmp_path_factory, n: int) -> list[str]:
    d = [str(tmp_path_factory.mktemp("run")) for _ in range(n)] if dist.rank() == 0 else []
    return _comm.broadcast_object(d, 0, "dirs")


def _flat(tree, prefix=""):
    if isinstance(tree, dict):
        out = {}
        for k, v in tree.items():
            out.update(_flat(v, f"{prefix}{k}/"))
        return out
    return {prefix: tree}


def _same_bits(a, b) -> None:
    fa, fb = _flat(a), _flat(b)
    assert fa.keys() == fb.keys()
    for k in fa:
        x, y = np.asarray(fa[k]), np.asarray(fb[k])
        assert x.dtype == y.dtype and x.shape == y.shape, k
        assert x.tobytes() == y.tobytes(), k


def _compare(whole: str, resumed: str) -> None:
    a = rtx.load(os.path.join(whole, "checkpoint", "epoch-000004", "state.npz"))
    b = rtx.load(os.path.join(resumed, "checkpoint", "epoch-000004", "state.npz"))
    _same_bits(a["model"], b["model"])
    _same_bits(a["optimizer"]["state"], b["optimizer"]["state"])
    _same_bits(rtx.load(os.path.join(whole, "best.npz")),
               rtx.load(os.path.join(resumed, "best.npz")))
    with open(os.path.join(whole, "metrics.json")) as f:
        ha = json.load(f)
    with open(os.path.join(resumed, "metrics.json")) as f:
        hb = json.load(f)
    for k in ("loss", "train_acc", "val_acc", "test_acc"):
        assert [r[k] for r in ha["history"]] == [r[k] for r in hb["history"]], k
    assert ha["final"] == hb["final"] and ha["best_epoch"] == hb["best_epoch"]
    assert hb["distributed"]["resumed_from_epoch"] == 2


@pytest.mark.parametrize("halo", ["exchange", "replicated"])
def test_resume_is_bit_identical_on_2_ranks(world, tmp_path_factory, halo):
    whole, first, resumed = _dirs(tmp_path_factory, 3)
    args = [*ARGS, "--halo", halo]
    main([*args, "--epochs", "4", "--checkpoint-every", "4", "--out", whole])
    main([*args, "--epochs", "2", "--checkpoint-every", "2", "--out", first])
    m = main([*args, "--epochs", "4", "--checkpoint-every", "2", "--out", resumed,
              "--resume", first])
    if dist.rank() == 0:
        assert m["distributed"]["resumed_from_epoch"] == 2
        _compare(whole, resumed)
        with open(os.path.join(first, "checkpoint", "latest.json")) as f:
            assert json.load(f)["epoch"] == 2
    dist.barrier()


def test_resume_is_bit_identical_on_1_rank(world, tmp_path_factory):
    whole, first, resumed = _dirs(tmp_path_factory, 3)
    py = [sys.executable, "-m", "rtx.examples.hetgat", *ARGS]
    for extra in (["--epochs", "4", "--checkpoint-every", "4", "--out", whole],
                  ["--epochs", "2", "--checkpoint-every", "2", "--out", first],
                  ["--epochs", "4", "--checkpoint-every", "2", "--out", resumed,
                   "--resume", os.path.join(first, "checkpoint")]):
        r = mpi_job([[*py, *extra]])
        assert r["rc"] == 0, _show(r)
    if dist.rank() == 0:
        _compare(whole, resumed)
    dist.barrier()


def test_resume_refuses_what_does_not_fit(world, tmp_path_factory, capsys):
    first, other = _dirs(tmp_path_factory, 2)
    main([*ARGS, "--epochs", "2", "--checkpoint-every", "1", "--out", first])
    cases = [(["--epochs", "4", "--hidden", "4"], "made with other options or another graph "
              "(hidden differ)"),
             (["--epochs", "2"], "the checkpoint is at epoch 2, --epochs 2: nothing left"),
             (["--epochs", "4", "--num-papers", "160"], "(graph, num_papers differ)")]
    for extra, want in cases:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main([*ARGS, *extra, "--out", other, "--resume", first])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        if dist.rank() == 0:
            assert err.count("rtx-hetgat: error:") == 1 and want in err, err
        else:
            assert "error" not in err, err
    with pytest.raises(SystemExit):
        main([*ARGS, "--epochs", "4", "--out", other, "--resume", other])
    assert not os.path.exists(os.path.join(other, "metrics.json"))
    dist.barrier()


def test_checkpoint_restores_each_ranks_random_stream(world, tmp_path_factory):
    """The random generator is per rank (its own file): after a restore every
    rank draws what it drew right after the save."""
    from rtx.distributed.checkpoint import load_checkpoint, save_checkpoint

    (d,) = _dirs(tmp_path_factory, 1)
    rank, size = world
    rtx.manual_seed(100 + rank)
    rtx.randn(3)  # some state that is not a fresh seed
    model = rtx.nn.Linear(2, 2)
    opt = rtx.optim.Adam(model.parameters(), lr=0.1)
    save_checkpoint(d, 1, model, opt, extra={"note": "x"}, rank_extra={"rank": rank})
    after_save = rtx.randn(5).numpy().copy()
    rtx.manual_seed(7)
    with rtx.no_grad():
        model.weight.add_(1.0)
    state = load_checkpoint(d, model, opt)
    assert state["epoch"] == 1 and state["extra"] == {"note": "x"}
    assert state["rank_extra"] == {"rank": rank}
    np.testing.assert_array_equal(rtx.randn(5).numpy(), after_save)
    draws = dist.all_gather(rtx.tensor(after_save)).numpy()
    assert not np.array_equal(draws[0], draws[1])  # the streams are per rank
    assert sorted(os.listdir(d)) == ["epoch-000001", "latest.json"]
    assert sorted(os.listdir(os.path.join(d, "epoch-000001"))) == [
        *(f"rank-{r:05d}.npz" for r in range(size)), "state.npz"]
