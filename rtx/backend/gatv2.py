"""Fused GATv2 attention scores (the op ``GATv2Conv`` is built on)::

    score[e, h] = sum_c att[h, c] * leaky_relu(xl[src[e], h, c] + xr[dst[e], h, c]
                                               [+ xe[e, h, c]])

``xl`` is ``[N_src, H, C]``, ``xr`` ``[N_dst, H, C]``, ``att`` ``[H, C]``,
``xe`` (optional) ``[E, H, C]``; ``edge_index`` a checked ``EdgeIndex`` over
(``N_src``, ``N_dst``) (the face makes it; ``edge_plan``: no index is checked
again; the declaration's ``check`` did the shapes and dtypes).  The backward
pass (``d`` = leaky_relu' of the sum, ``gz[e, h, c] = g[e, h] * att[h, c] *
d``): ``grad_xl[n] = sum over edges from n of gz``, ``grad_xr[n] = sum over
edges into n of gz``, ``grad_att = sum_e g[e, h] * leaky_relu(z)``, ``grad_xe
= gz``.

The default bodies run numpy on host copies (materialising ``[E, H, C]``);
``CpuBackend`` overrides them with the kernels of ``rtx/_gatv2.pxi``
(``rtx/backend/cpu/gatv2.py``), which never form the per-edge sum.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._family import Family
from .index_plan import EdgeIndex
from .message import edge_plan


def gatv2_plan(B: Any, xl: Any, xr: Any, att: Any, edge_index: Any, xe: Any,
               op: str) -> EdgeIndex:
    """The backend's contract: ``edge_index`` a checked ``EdgeIndex`` over ``xl``'s
    and ``xr``'s rows, ``att`` ``[H, C]`` matching both, ``xe`` one row per edge.
    O(1) (the kernels re-check the shapes they index by)."""
    xs, rs, a_s = tuple(B.shape(xl)), tuple(B.shape(xr)), tuple(B.shape(att))
    if len(xs) != 3 or len(rs) != 3 or a_s != xs[1:] or rs[1:] != xs[1:]:
        raise ValueError(f"{op}(): xl [N_src, H, C], xr [N_dst, H, C] and att [H, C] do not "
                         f"match: {xs}, {rs}, {a_s}")
    ei = edge_plan(edge_index, xs[0], rs[0], op)
    if xe is not None and tuple(B.shape(xe)) != (ei.num_edges,) + xs[1:]:
        raise ValueError(f"{op}(): xe must be [{ei.num_edges}, {xs[1]}, {xs[2]}], got "
                         f"{tuple(B.shape(xe))}")
    return ei


def np_gatv2_z(xl: np.ndarray, xr: np.ndarray, ei: EdgeIndex,
               xe: np.ndarray | None) -> np.ndarray:
    z = xl[ei.src._idx] + xr[ei.dst._idx]
    return z if xe is None else z + xe


def np_gatv2_scores(xl: np.ndarray, xr: np.ndarray, att: np.ndarray, ei: EdgeIndex,
                    slope: float, xe: np.ndarray | None) -> np.ndarray:
    z = np_gatv2_z(xl, xr, ei, xe)
    lz = np.where(z > 0, z, z * xl.dtype.type(slope))
    return np.ascontiguousarray((lz * att).sum(-1), dtype=xl.dtype)


class Gatv2Ops(Family):
    """The fused GATv2 score op and its backward pass, over a checked ``EdgeIndex``."""

    FAMILY = "gatv2"  # its ops: the public methods below (``_family.py``)

    def gatv2_scores(self, xl: Any, xr: Any, att: Any, edge_index: Any,
                     negative_slope: float, xe: Any = None) -> Any:
        ei = gatv2_plan(self, xl, xr, att, edge_index, xe, "gatv2_scores")
        out = np_gatv2_scores(self._h(xl), self._h(xr), self._h(att), ei, float(negative_slope),
                              None if xe is None else self._h(xe))
        return self.from_numpy(out)  # type: ignore[attr-defined]

    def gatv2_scores_backward(self, grad: Any, xl: Any, xr: Any, att: Any, edge_index: Any,
                              negative_slope: float, xe: Any = None,
                              need: tuple[bool, bool, bool, bool] = (True, True, True, True)
                              ) -> tuple[Any, Any, Any, Any]:
        """``(grad_xl, grad_xr, grad_att, grad_xe)``; ``None`` where ``need`` is
        false (and ``grad_xe`` without ``xe``)."""
        ei = gatv2_plan(self, xl, xr, att, edge_index, xe, "gatv2_scores_backward")
        a_xl, a_xr, a_att = self._h(xl), self._h(xr), self._h(att)
        a_xe = None if xe is None else self._h(xe)
        g = self._h(grad)
        H = a_att.shape[0]
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
            np.add.at(gxl, ei.src._idx, gz)
            outs[0] = gxl
        if need[1]:
            gxr = np.zeros_like(a_xr)
            np.add.at(gxr, ei.dst._idx, gz)
            outs[1] = gxr
        if need[2]:
            outs[2] = (g[:, :, None] * np.where(pos, z, z * slope)).sum(0)
        if need[3] and a_xe is not None:
            outs[3] = gz
        return tuple(None if o is None else self.from_numpy(  # type: ignore[attr-defined]
            np.ascontiguousarray(o, dtype=a_xl.dtype)) for o in outs)  # type: ignore[return-value]
