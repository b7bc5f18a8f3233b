"""The per-op path's pure-Python modules, compiled by Cython (rtx/_compiled.py).

In a build that compiled them, every module of ``MODULES`` runs compiled and
from its current source; ``RTX_PURE_PYTHON=1`` runs the ``.py`` files; and a
forward and backward through every compiled op rule gives the same bits both ways.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import os
import subprocess
import sys

import pytest

import rtx
from rtx import _compiled

BUILT = _compiled.manifest() is not None
PURE = _compiled.pure_requested()
needs_compiled = pytest.mark.skipif(
    not BUILT or PURE, reason="built with RTX_COMPILE_PY=0 or run with RTX_PURE_PYTHON=1")

# Every rule module of MODULES on both dtypes: matmul, the binary ops with broadcasting
# and scalars, the unary activations, reductions; then backward through all of it.
SCRIPT = r"""
import hashlib, json, sys
import numpy as np
import rtx
from rtx import _compiled
out = {"loaded": _compiled.loaded()}
for dt in (np.float32, np.float64):
    rng = np.random.default_rng(0)
    x = rtx.tensor(rng.standard_normal((7, 5)).astype(dt), requires_grad=True)
    w = rtx.tensor(rng.standard_normal((5, 5)).astype(dt), requires_grad=True)
    b = rtx.tensor(rng.standard_normal(5).astype(dt), requires_grad=True)
    h = (x @ w + b).tanh() * x - 0.5 * x.sigmoid() / (1.5 + x.exp())
    h = h.relu() + h.leaky_relu(0.1) + h.elu() + abs(h) ** 2
    loss = h.softmax(-1).log().mean() + h.sum(0).max() + (h * h).sum()
    loss.backward()
    with rtx.no_grad():
        ng = ((x @ w).tanh() + b).sum(1)
    digest = hashlib.sha256()
    for a in (loss, x.grad, w.grad, b.grad, ng):
        digest.update(a.numpy().tobytes())
    out[np.dtype(dt).name] = digest.hexdigest()
json.dump(out, sys.stdout)
"""


def _run(pure: bool) -> dict:
    env = dict(os.environ)
    env.pop(_compiled.ENV, None)
    if pure:
        env[_compiled.ENV] = "1"
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                       text=True, cwd=os.path.dirname(os.path.abspath(__file__)), timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


@needs_compiled
def test_every_listed_module_runs_compiled_from_its_current_source():
    for name in _compiled.MODULES:
        mod = importlib.import_module(name)
        assert mod.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), name
        assert os.path.isfile(_compiled.source_path(name)), name  # the source ships too
    assert set(_compiled.loaded().values()) == {"compiled"}
    assert _compiled.stale() == [], (
        "compiled modules older than their .py: rebuild (pip install -e . or "
        "python setup.py build_ext --inplace)")
    assert set(_compiled.manifest()) == set(_compiled.MODULES)


@needs_compiled
def test_a_changed_source_is_reported_stale(monkeypatch):
    real = _compiled.sha256
    target = _compiled.MODULES[0]
    monkeypatch.setattr(_compiled, "sha256", lambda path: "edited" if path ==
                        _compiled.source_path(target) else real(path))
    assert _compiled.stale() == [target]


@needs_compiled
def test_pure_python_mode_gives_the_same_bits():
    compiled, pure = _run(False), _run(True)
    assert set(compiled["loaded"].values()) == {"compiled"}
    assert set(pure["loaded"]) == set(_compiled.MODULES)   # every one imported ...
    assert set(pure["loaded"].values()) == {"pure"}        # ... from its .py
    for dt in ("float32", "float64"):
        assert compiled[dt] == pure[dt], dt


def test_the_source_finder_takes_only_the_listed_modules():
    f = _compiled._SourceFinder()
    pkg = os.path.dirname(rtx.__file__)
    assert f.find_spec("rtx._config", [pkg]) is None
    assert f.find_spec("json", None) is None
    spec = f.find_spec("rtx.tensor", [pkg])
    assert spec is not None and spec.origin == os.path.join(pkg, "tensor.py")
    assert isinstance(spec.loader, importlib.machinery.SourceFileLoader)
    assert f.find_spec("rtx.tensor", [os.path.join(pkg, "nn")]) is None  # not on that path


def test_pure_requested_reads_the_environment(monkeypatch):
    for value, want in (("1", True), ("yes", True), ("0", False), ("", False), (" ", False)):
        monkeypatch.setenv(_compiled.ENV, value)
        assert _compiled.pure_requested() is want, value
    monkeypatch.delenv(_compiled.ENV)
    assert _compiled.pure_requested() is False
