"""CPU fused GATv2 scores: the kernels of ``rtx/_gatv2.pxi`` over a checked
``EdgeIndex``'s cached groupings (the family and its numpy defaults:
``rtx/backend/gatv2.py``).

Neither pass forms the ``[E, H, C]`` per-edge sum: the forward is one pass
over the target grouping, the backward one over the target grouping
(``grad_xr``, ``grad_xe``, ``grad_att`` partials) and one over the source
grouping (``grad_xl``), each recomputing the sum edge by edge.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._kernels import gatv2_att_chunks, gatv2_bwd_dst, gatv2_bwd_src, gatv2_scores_csr
from ..._threads import get_num_threads
from ..gatv2 import gatv2_plan
from ._alloc import empty

_NONE: dict[str, np.ndarray] = {
    "f": np.zeros((0, 1), np.float32), "d": np.zeros((0, 1), np.float64)}


def _rows(a: np.ndarray) -> np.ndarray:
    """``a`` (rows, H, C) as a C-contiguous (rows, H*C) view (a copy only if needed)."""
    a = np.ascontiguousarray(a)
    return a.reshape(a.shape[0], -1)


class CpuGatv2:
    def gatv2_scores(self, xl: np.ndarray, xr: np.ndarray, att: np.ndarray, edge_index: Any,
                     negative_slope: float, xe: Any = None) -> np.ndarray:
        ei = gatv2_plan(self, xl, xr, att, edge_index, xe, "gatv2_scores")
        H = xl.shape[1]
        out = empty((ei.num_edges, H), xl.dtype)
        xe2 = _NONE[xl.dtype.char] if xe is None else _rows(xe)
        ptr, perm = ei.dst._grouping()
        gatv2_scores_csr(_rows(xl), _rows(xr), np.ascontiguousarray(att), ei.src._idx, xe2,
                         xe is not None, float(negative_slope), perm, ptr, out,
                         get_num_threads())
        return out

    def gatv2_scores_backward(self, grad: np.ndarray, xl: np.ndarray, xr: np.ndarray,
                              att: np.ndarray, edge_index: Any, negative_slope: float,
                              xe: Any = None,
                              need: tuple[bool, bool, bool, bool] = (True, True, True, True)
                              ) -> tuple[Any, Any, Any, Any]:
        ei = gatv2_plan(self, xl, xr, att, edge_index, xe, "gatv2_scores_backward")
        E, H = ei.num_edges, xl.shape[1]
        if grad.shape != (E, H) or grad.dtype != xl.dtype:
            raise ValueError(f"gatv2_scores_backward(): grad must be [{E}, {H}] {xl.dtype}, "
                             f"got {grad.shape} {grad.dtype}")
        none = _NONE[xl.dtype.char]
        has_e = xe is not None
        need_xl, need_xr, need_att, need_e = (bool(n) for n in need)
        need_e = need_e and has_e
        g = np.ascontiguousarray(grad)
        xl2, xr2, att2 = _rows(xl), _rows(xr), np.ascontiguousarray(att)
        xe2 = _rows(xe) if has_e else none
        src, dst = ei.src._idx, ei.dst._idx  # the plans' private arrays (never handed out)
        T = get_num_threads()
        gxl = gxr = gatt = gxe = None
        if need_xr or need_att or need_e:
            ptr, perm = ei.dst._grouping()
            gxr = empty(xr.shape, xr.dtype) if need_xr else None
            gxe = empty(xe.shape, xe.dtype) if need_e else None
            part = (np.empty((gatv2_att_chunks(E, ei.num_dst), xl2.shape[1]), np.float64)
                    if need_att else _NONE["d"])
            gatv2_bwd_dst(g, xl2, xr2, att2, src, xe2, has_e, float(negative_slope), perm, ptr,
                          none if gxr is None else _rows(gxr), need_xr,
                          none if gxe is None else _rows(gxe), need_e, part, need_att, T)
            if need_att:
                # the chunks (float64 partials) in order: the bits do not depend on
                # the thread count
                gatt = np.add.reduce(part, axis=0).reshape(att.shape).astype(xl.dtype)
        if need_xl:
            ptr, perm = ei.src._grouping()
            gxl = empty(xl.shape, xl.dtype)
            gatv2_bwd_src(g, xl2, xr2, att2, dst, xe2, has_e, float(negative_slope), perm, ptr,
                          _rows(gxl), T)
        return gxl, gxr, gatt, gxe
