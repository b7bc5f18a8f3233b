"""Vectorised numpy references of the segment extremes (``segment_max`` /
``segment_min`` and their backward pass), independent of rtx's kernels.

Per segment and column: the max (min) and the FIRST position holding it (NaN
propagates: the first NaN wins); an empty segment gives 0 and -1.  (They were
the backends' numpy default bodies; every backend now runs the kernels, so the
reference lives with the tests.)"""

from __future__ import annotations

from typing import Any

import numpy as np


def _np_segment_extreme(s: np.ndarray, idx: np.ndarray, n: int, ufunc: Any,
                        init: float) -> tuple[np.ndarray, np.ndarray]:
    E = s.shape[0]
    s2 = s.reshape(E, int(np.prod(s.shape[1:])))
    F = s2.shape[1]
    m = np.full((n, F), init, dtype=s.dtype)
    ufunc.at(m, idx, s2)  # NaN propagates
    mi = m[idx]
    hit = (s2 == mi) | (np.isnan(s2) & np.isnan(mi))
    arg = np.full((n, F), E, dtype=np.int64)
    rows, cols = np.nonzero(hit)
    np.minimum.at(arg, (idx[rows], cols), rows)
    arg[arg == E] = -1
    m[arg < 0] = 0
    return m.reshape((n,) + s.shape[1:]), arg.reshape((n,) + s.shape[1:])


def np_segment_max(s: np.ndarray, idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    return _np_segment_extreme(s, idx, n, np.maximum, -np.inf)


def np_segment_min(s: np.ndarray, idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    return _np_segment_extreme(s, idx, n, np.minimum, np.inf)


def np_segment_arg_backward(g: np.ndarray, arg: np.ndarray, E: int) -> np.ndarray:
    """The backward of segment max / min: ``g`` to the ``arg`` positions, 0 elsewhere."""
    n = g.shape[0]
    g2 = g.reshape(n, int(np.prod(g.shape[1:])))
    a2 = arg.reshape(g2.shape)
    out = np.zeros((E, g2.shape[1]), dtype=g.dtype)
    r, c = np.nonzero(a2 >= 0)
    out[a2[r, c], c] = g2[r, c]
    return out.reshape((E,) + g.shape[1:])
