"""benchmarks/roofline.py's profile times every public method of the CPU backend,
compiled ones included (rtx/_compiled.py: a compiled method is no
``inspect.isfunction``, and the profile once left matmul, the elementwise ops and
more out of its families, counting their time as Python outside the backend)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import rtx
from rtx.backend._family import is_def

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not os.path.isfile(os.path.join(ROOT, "benchmarks", "roofline.py")):
    pytest.skip("needs the source tree's benchmarks/", allow_module_level=True)


@pytest.fixture
def roofline(monkeypatch):
    monkeypatch.syspath_prepend(ROOT)
    import benchmarks.roofline as r

    return r


def test_every_public_backend_method_is_timed(roofline):
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
