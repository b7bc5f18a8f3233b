"""Fused GATv2 attention scores (the op ``GATv2Conv`` is built on)::

    score[e, h] = sum_c att[h, c] * leaky_relu(xl[src[e], h, c] + xr[dst[e], h, c]
                                               [+ xe[e, h, c]])

``xl`` is ``[N_src, H, C]``, ``xr`` ``[N_dst, H, C]``, ``att`` ``[H, C]``,
``xe`` (optional) ``[E, H, C]``; ``edge_index`` an int ``[2, E]`` array or an
``EdgeIndex``.  The backward pass (``d`` = leaky_relu' of the sum, ``gz[e, h,
c] = g[e, h] * att[h, c] * d``): ``grad_xl[n] = sum over edges from n of gz``,
``grad_xr[n] = sum over edges into n of gz``, ``grad_att = sum_e g[e, h] *
leaky_relu(z)``, ``grad_xe = gz``.

The default bodies run numpy on host copies (materialising ``[E, H, C]``);
``CpuBackend`` overrides them with the kernels of ``rtx/_gatv2.pxi``
(``rtx/backend/cpu_gatv2.py``), which never form the per-edge sum.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._host import HostRoundTrip
from .index_plan import EdgeIndex, as_edge_index
from .segment import FLOAT_DTYPES

_OP = "gatv2_scores"


def check_gatv2(xl_shape: tuple[int, ...], xl_dtype: Any, xr_shape: tuple[int, ...],
                xr_dtype: Any, att_shape: tuple[int, ...], att_dtype: Any, edge_index: Any,
                xe_shape: tuple[int, ...] | None, xe_dtype: Any,
                negative_slope: Any) -> EdgeIndex:
    """Validate the operands; returns the checked ``EdgeIndex``."""
    dt = np.dtype(xl_dtype)
    if dt not in FLOAT_DTYPES:
        raise TypeError(f"{_OP}(): xl must be float32 or float64, got {dt}")
    for what, d in (("xr", xr_dtype), ("att", att_dtype)) + (
            (("xe", xe_dtype),) if xe_shape is not None else ()):
        if np.dtype(d) != dt:
            raise TypeError(f"{_OP}(): {what} dtype {np.dtype(d)} != xl dtype {dt}")
    if len(xl_shape) != 3:
        raise ValueError(f"{_OP}(): xl must be [N_src, H, C], got shape {xl_shape}")
    H, C = xl_shape[1], xl_shape[2]
    if len(xr_shape) != 3 or tuple(xr_shape[1:]) != (H, C):
        raise ValueError(f"{_OP}(): xr must be [N_dst, {H}, {C}], got shape {xr_shape}")
    if tuple(att_shape) != (H, C):
        raise ValueError(f"{_OP}(): att must be [{H}, {C}], got shape {att_shape}")
    if isinstance(negative_slope, bool) or not isinstance(negative_slope,
                                                          (int, float, np.floating)):
        raise TypeError(f"{_OP}(): negative_slope must be a number, got {negative_slope!r}")
    if not np.isfinite(float(negative_slope)):
        raise ValueError(f"{_OP}(): negative_slope must be finite, got {negative_slope!r}")
    ei = as_edge_index(edge_index, xl_shape[0], xr_shape[0], _OP)
    if xe_shape is not None and tuple(xe_shape) != (ei.num_edges, H, C):
        raise ValueError(f"{_OP}(): xe must be [{ei.num_edges}, {H}, {C}] (one row per edge), "
                         f"got shape {xe_shape}")
    return ei


def np_gatv2_z(xl: np.ndarray, xr: np.ndarray, ei: EdgeIndex,
               xe: np.ndarray | None) -> np.ndarray:
    z = xl[ei.src.indices] + xr[ei.dst.indices]
    return z if xe is None else z + xe


def np_gatv2_scores(xl: np.ndarray, xr: np.ndarray, att: np.ndarray, ei: EdgeIndex,
                    slope: float, xe: np.ndarray | None) -> np.ndarray:
    z = np_gatv2_z(xl, xr, ei, xe)
    lz = np.where(z > 0, z, z * xl.dtype.type(slope))
    return np.ascontiguousarray((lz * att).sum(-1), dtype=xl.dtype)


class Gatv2Ops(HostRoundTrip):
    """The fused GATv2 score op and its backward pass."""

    FAMILY = "gatv2"  # the op names below: what a decorator backend forwards as a family
    OPS: tuple[str, ...] = ("gatv2_scores", "gatv2_scores_backward")

    def _check_gatv2(self, xl: Any, xr: Any, att: Any, edge_index: Any, xe: Any,
                     negative_slope: Any) -> EdgeIndex:
        s, d = self.shape, self.dtype  # type: ignore[attr-defined]
        return check_gatv2(tuple(s(xl)), d(xl), tuple(s(xr)), d(xr), tuple(s(att)), d(att),
                           edge_index, None if xe is None else tuple(s(xe)),
                           None if xe is None else d(xe), negative_slope)

    def gatv2_scores(self, xl: Any, xr: Any, att: Any, edge_index: Any,
                     negative_slope: float = 0.2, xe: Any = None) -> Any:
        ei = self._check_gatv2(xl, xr, att, edge_index, xe, negative_slope)
        out = np_gatv2_scores(self._h(xl), self._h(xr), self._h(att), ei, float(negative_slope),
                              None if xe is None else self._h(xe))
        return self.from_numpy(out)  # type: ignore[attr-defined]

    def gatv2_scores_backward(self, grad: Any, xl: Any, xr: Any, att: Any, edge_index: Any,
                              negative_slope: float = 0.2, xe: Any = None,
                              need: tuple[bool, bool, bool, bool] = (True, True, True, True)
                              ) -> tuple[Any, Any, Any, Any]:
        """``(grad_xl, grad_xr, grad_att, grad_xe)``; ``None`` where ``need`` is
        false (and ``grad_xe`` without ``xe``)."""
        ei = self._check_gatv2(xl, xr, att, edge_index, xe, negative_slope)
        a_xl, a_xr, a_att = self._h(xl), self._h(xr), self._h(att)
        a_xe = None if xe is None else self._h(xe)
        g = self._h(grad)
        H, C = a_att.shape
        if tuple(g.shape) != (ei.num_edges, H) or g.dtype != a_xl.dtype:
            raise ValueError(f"gatv2_scores_backward(): grad must be [{ei.num_edges}, {H}] "
                             f"{a_xl.dtype}, got {g.shape} {g.dtype}")
        z = np_gatv2_z(a_xl, a_xr, ei, a_xe)
        slope = a_xl.dtype.type(negative_slope)
        pos = z > 0
        gz = g[:, :, None] * a_att * np.where(pos, a_xl.dtype.type(1), slope)
        outs: list[Any] = [None, None, None, None]
        if need[0]:
            gxl = np.zeros_like(a_xl)
            np.add.at(gxl, ei.src.indices, gz)
            outs[0] = gxl
        if need[1]:
            gxr = np.zeros_like(a_xr)
            np.add.at(gxr, ei.dst.indices, gz)
            outs[1] = gxr
        if need[2]:
            outs[2] = (g[:, :, None] * np.where(pos, z, z * slope)).sum(0)
        if need[3] and a_xe is not None:
            outs[3] = gz
        return tuple(None if o is None else self.from_numpy(  # type: ignore[attr-defined]
            np.ascontiguousarray(o, dtype=a_xl.dtype)) for o in outs)  # type: ignore[return-value]
