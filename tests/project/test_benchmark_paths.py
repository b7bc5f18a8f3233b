"""benchmarks/_proc.use_checkout_build: which rtx a benchmark measures.  An rtx build
named by PYTHONPATH wins (the ASan job's instrumented copy: a benchmark smoke test under
it must not load the checkout's plain build); else the checkout's in-place build; else
the installed rtx (nothing changes)."""

from __future__ import annotations

import os
import sys

import pytest

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
