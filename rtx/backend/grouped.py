"""Grouped (segment) matmul: ``out[i] = x[i] @ weight[index[i]]``.

``x`` is ``[N, K]``, ``weight`` ``[T, K, M]`` (one ``[K, M]`` block per type,
PyG's ``HeteroLinear.weight`` layout) and ``index`` a checked ``IndexPlan`` of
the ``N`` rows' types over ``T`` (the face makes it; ``grouped_plan``: no index
is checked again).  Backward: ``grad_x[i] = g[i] @ weight[index[i]].T`` and
``grad_weight[t] = x_t.T @ g_t`` over the rows of type ``t``.

The default bodies run numpy on host copies, one matmul per type; ``CpuBackend``
overrides them with the kernels of ``rtx/_grouped.pxi``, one pass over the
rows in the plan's type grouping (``rtx/backend/cpu/grouped.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._family import Family
from .index_plan import IndexPlan
from .segment import segment_plan


def grouped_plan(B: Any, x: Any, index: Any, weight: Any, op: str) -> IndexPlan:
    """The backend's contract: ``x`` ``[N, K]``, ``weight`` ``[T, K, M]`` and
    ``index`` a checked ``IndexPlan`` of ``N`` entries over ``T`` rows.  O(1)."""
    xs, ws = tuple(B.shape(x)), tuple(B.shape(weight))
    if len(xs) != 2 or len(ws) != 3 or ws[1] != xs[1]:
        raise ValueError(f"{op}(): input [N, K] and weight [T, K, M] do not match: "
                         f"{xs}, {ws}")
    return segment_plan(index, ws[0], op, xs[0])


def np_segment_matmul(x: np.ndarray, idx: np.ndarray, w: np.ndarray) -> np.ndarray:
    out = np.zeros((x.shape[0], w.shape[2]), dtype=x.dtype)
    for t in range(w.shape[0]):
        rows = np.flatnonzero(idx == t)
        out[rows] = x[rows] @ w[t]
    return out


class GroupedOps(Family):
    """The grouped matmul and its backward pass, over a checked ``IndexPlan``."""

    FAMILY = "grouped"  # its ops: the public methods below (``_family.py``)

    def segment_matmul(self, x: Any, index: Any, weight: Any) -> Any:
        plan = grouped_plan(self, x, index, weight, "segment_matmul")
        return self._host(lambda a, w: np_segment_matmul(a, plan._idx, w), x, weight)

    def segment_matmul_backward(self, grad: Any, x: Any, index: Any, weight: Any,
                                need_x: bool = True, need_weight: bool = True
                                ) -> tuple[Any, Any]:
        """``(grad_x, grad_weight)`` (``None`` for what is not needed)."""
        plan = grouped_plan(self, x, index, weight, "segment_matmul_backward")
        g, a, w = self._h(grad), self._h(x), self._h(weight)
        if g.shape != (a.shape[0], w.shape[2]):
            raise ValueError(f"segment_matmul_backward(): grad must be "
                             f"{(a.shape[0], w.shape[2])}, got {g.shape}")
        gx = gw = None
        if need_x:
            gx = np_segment_matmul(g, plan._idx, np.ascontiguousarray(w.transpose(0, 2, 1)))
            gx = self.from_numpy(np.ascontiguousarray(gx))  # type: ignore[attr-defined]
        if need_weight:
            out = np.zeros_like(w)
            for t in range(w.shape[0]):
                rows = np.flatnonzero(plan._idx == t)
                out[t] = a[rows].T @ g[rows]
            gw = self.from_numpy(out)  # type: ignore[attr-defined]
        return gx, gw
