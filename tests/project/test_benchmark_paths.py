"""What the benchmarks measure.  benchmarks/_proc.use_checkout_build: which rtx.  An
rtx build named by PYTHONPATH wins (the ASan job's instrumented copy: a benchmark smoke
test under it must not load the checkout's plain build); else the checkout's in-place
build; else the installed rtx (nothing changes).  benchmarks/roofline.py's profile:
every public method of the CPU backend, compiled ones included (rtx/_compiled.py: a
compiled method is no ``inspect.isfunction``, and the profile once left matmul, the
elementwise ops and more out of its families, counted as Python outside the backend)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import rtx
from rtx.backend._family import is_def

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not os.path.isfile(os.path.join(ROOT, "benchmarks", "_proc.py")):
    pytest.skip("needs the source tree's benchmarks/", allow_module_level=True)


@pytest.fixture
def proc(monkeypatch):
    monkeypatch.syspath_prepend(ROOT)
    import benchmarks._proc as p

    monkeypatch.setattr(sys, "path", list(sys.path))
    return p


def _fake_build(d):
    os.makedirs(os.path.join(d, "rtx"))
    open(os.path.join(d, "rtx", "_kernels.cpython-311-x86_64-linux-gnu.so"), "w").close()
    return str(d)


def test_an_rtx_named_by_pythonpath_wins(proc, monkeypatch, tmp_path):
    other = _fake_build(tmp_path / "asan")
    monkeypatch.setenv("PYTHONPATH", other)
    monkeypatch.setattr(proc, "ROOT", _fake_build(tmp_path / "checkout"))
    path_before = list(sys.path)
    assert proc.use_checkout_build() is False
    assert os.environ["PYTHONPATH"] == other and sys.path == path_before


def test_the_checkout_build_goes_first_otherwise(proc, monkeypatch, tmp_path):
    checkout = _fake_build(tmp_path / "checkout")
    plain = str(tmp_path / "no-rtx-here")
    monkeypatch.setenv("PYTHONPATH", plain)
    monkeypatch.setattr(proc, "ROOT", checkout)
    assert proc.use_checkout_build() is True
    assert sys.path[0] == checkout
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [checkout, plain]


def test_no_checkout_build_changes_nothing(proc, monkeypatch, tmp_path):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setattr(proc, "ROOT", str(tmp_path))
    path_before = list(sys.path)
    assert proc.use_checkout_build() is False
    assert "PYTHONPATH" not in os.environ and sys.path == path_before


def test_the_roofline_profile_times_every_public_backend_method(monkeypatch):
    monkeypatch.syspath_prepend(ROOT)
    import benchmarks.roofline as roofline

    B, secs, calls = roofline.timed_backend()
    public = {n for n in dir(rtx.CpuBackend) if not n.startswith("_")
              and is_def(getattr(rtx.CpuBackend, n)) and n not in roofline._SKIP}
    assert {"matmul", "add", "message_passing", "index_select"} <= public
    assert public <= set(vars(type(B)))        # each wrapped in the timed subclass
    a = np.ones((4, 3), np.float32)
    B.matmul(a, a.T)
    B.add(a, a)
    assert calls["matmul"] == 1 and calls["add"] == 1 and secs["matmul"] > 0
    assert roofline.family_of("matmul") == "dense (matmul)"
