"""``rtx._kernels.memeq``: byte equality of two C-contiguous arrays without the GIL
(tests/kernels/test_threads.py probes it) and without a temporary (the raw-index cache
compares a caller's edges with its plan's private copy on every call)."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
from rtx import _kernels


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.float64, np.bool_])
def test_equal_and_unequal(dt):
    a = (np.arange(10_001) % 7).astype(dt)
    assert _kernels.memeq(a, a.copy())
    for pos in (0, 5_000, 10_000):
        b = a.copy()
        b[pos] = not b[pos] if dt == np.bool_ else b[pos] + 1
        assert not _kernels.memeq(a, b), pos
    assert not _kernels.memeq(a, a.astype(np.int8 if dt != np.int8 else np.int16))  # dtype
    assert not _kernels.memeq(a[:-1], a[1:].copy()) or np.array_equal(a[:-1], a[1:])
    assert not _kernels.memeq(a.reshape(1, -1), a)                                   # shape
    e = np.zeros(0, dt)
    assert _kernels.memeq(e, e.copy())
    assert _kernels.memeq(np.asarray(a[3]), np.asarray(a[3]))                        # 0-d


def test_reads_a_plans_private_snapshot_and_refuses_bad_arguments():
    idx = np.array([3, 1, 2, 2], np.int64)
    plan = rtx.IndexPlan(idx, 4)
    assert _kernels.is_index_snapshot(plan._idx)        # read-only memory
    assert _kernels.memeq(plan._idx, idx)
    assert not _kernels.memeq(plan._idx, idx[::-1].copy())
    with pytest.raises(ValueError, match="C-contiguous"):
        _kernels.memeq(idx[::2], idx[::2].copy())
    with pytest.raises(TypeError):
        _kernels.memeq(idx, list(idx))
