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

Each op has one body (``host_body``): the kernels of ``rtx/_gatv2.pxi``, run as
is on the CPU backend's arrays and through a host round-trip on any other
backend.  Neither pass forms the ``[E, H, C]`` per-edge sum: the forward is one
pass over the target grouping, the backward one over the target grouping
(``grad_xr``, ``grad_xe``, ``grad_att`` partials) and one over the source
grouping (``grad_xl``), each recomputing the sum edge by edge.

``head_dot(x, att)``: ``out[n, h] = sum_c x[n, h, c] * att[h, c]``, GAT's
attention logits per node and head from its transformed features (one pass over
``x``, no ``[N, H, C]`` product), and its backward pass.

``gat_scores(a_src, a_dst, src_index, dst_index, negative_slope)``: GAT's edge
scores ``leaky_relu(a_src[src] + a_dst[dst])`` from those logits in one pass over
the edges (``rtx/_gatv2.pxi``'s ``gat_scores_rows``: the composed ops' bits);
its backward is the composed ops' (``rtx/_autodiff/ops/gatv2.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._kernels import (
    gat_scores_rows,
    gatv2_att_chunks,
    gatv2_bwd_dst,
    gatv2_bwd_src,
    gatv2_scores_csr,
    head_dot_backward,
    head_dot_chunks,
    head_dot_rows,
)
from .._threads import get_num_threads
from ._family import Family, host_body
from ._host import rows2d
from .index_plan import EdgeIndex, IndexPlan
from .message import edge_plan

_NONE: dict[str, np.ndarray] = {
    "f": np.zeros((0, 1), np.float32), "d": np.zeros((0, 1), np.float64)}


def gatv2_plan(xl: np.ndarray, xr: np.ndarray, att: np.ndarray, edge_index: Any,
               xe: np.ndarray | None, op: str) -> EdgeIndex:
    """The backend's contract: ``edge_index`` a checked ``EdgeIndex`` over ``xl``'s
    and ``xr``'s rows, ``att`` ``[H, C]`` matching both, ``xe`` one row per edge.
    O(1) (the kernels re-check the shapes they index by)."""
    xs, rs, a_s = xl.shape, xr.shape, att.shape
    if len(xs) != 3 or len(rs) != 3 or a_s != xs[1:] or rs[1:] != xs[1:]:
        raise ValueError(f"{op}(): xl [N_src, H, C], xr [N_dst, H, C] and att [H, C] do not "
                         f"match: {xs}, {rs}, {a_s}")
    ei = edge_plan(edge_index, xs[0], rs[0], op)
    if xe is not None and xe.shape != (ei.num_edges,) + xs[1:]:
        raise ValueError(f"{op}(): xe must be [{ei.num_edges}, {xs[1]}, {xs[2]}], got "
                         f"{xe.shape}")
    return ei


def _head_dot_shapes(x: np.ndarray, att: np.ndarray, op: str) -> None:
    if x.ndim != 3 or att.shape != x.shape[1:] or att.dtype != x.dtype:
        raise ValueError(f"{op}(): x [N, H, C] and att [H, C] of one dtype do not match: "
                         f"{x.shape} {x.dtype}, {att.shape} {att.dtype}")


class Gatv2Ops(Family):
    """The fused GATv2 score op and its backward pass, over a checked ``EdgeIndex``,
    GAT's per-head attention dot (``head_dot``) and GAT's edge scores
    (``gat_scores``)."""

    FAMILY = "gatv2"  # its ops: the public methods below (``_family.py``)

    @host_body("xl", "xr", "att", "xe")
    def gatv2_scores(self, xl: np.ndarray, xr: np.ndarray, att: np.ndarray, edge_index: Any,
                     negative_slope: float, xe: Any = None) -> Any:
        ei = gatv2_plan(xl, xr, att, edge_index, xe, "gatv2_scores")
        H = xl.shape[1]
        out = self._host_empty((ei.num_edges, H), xl.dtype)
        xe2 = _NONE[xl.dtype.char] if xe is None else rows2d(xe)
        ptr, perm = ei.dst._grouping()
        src, in_order = ei._other_indices("dst")    # the sources, over the target grouping
        gatv2_scores_csr(rows2d(xl), rows2d(xr), np.ascontiguousarray(att), src, xe2,
                         xe is not None, float(negative_slope), perm, ptr, out,
                         get_num_threads(), in_order)
        return out

    @host_body("grad", "xl", "xr", "att", "xe")
    def gatv2_scores_backward(self, grad: np.ndarray, xl: np.ndarray, xr: np.ndarray,
                              att: np.ndarray, edge_index: Any, negative_slope: float,
                              xe: Any = None,
                              need: tuple[bool, bool, bool, bool] = (True, True, True, True)
                              ) -> tuple[Any, Any, Any, Any]:
        """``(grad_xl, grad_xr, grad_att, grad_xe)``; ``None`` where ``need`` is
        false (and ``grad_xe`` without ``xe``)."""
        ei = gatv2_plan(xl, xr, att, edge_index, xe, "gatv2_scores_backward")
        E, H = ei.num_edges, xl.shape[1]
        if grad.shape != (E, H) or grad.dtype != xl.dtype:
            raise ValueError(f"gatv2_scores_backward(): grad must be [{E}, {H}] {xl.dtype}, "
                             f"got {grad.shape} {grad.dtype}")
        none = _NONE[xl.dtype.char]
        has_e = xe is not None
        need_xl, need_xr, need_att, need_e = (bool(n) for n in need)
        need_e = need_e and has_e
        g = np.ascontiguousarray(grad)
        xl2, xr2, att2 = rows2d(xl), rows2d(xr), np.ascontiguousarray(att)
        xe2 = rows2d(xe) if has_e else none
        T = get_num_threads()
        gxl = gxr = gatt = gxe = None
        if need_xr or need_att or need_e:
            ptr, perm = ei.dst._grouping()
            gxr = self._host_empty(xr.shape, xr.dtype) if need_xr else None
            gxe = self._host_empty(xe.shape, xe.dtype) if need_e else None
            part = (np.empty((gatv2_att_chunks(E, ei.num_dst), xl2.shape[1]), np.float64)
                    if need_att else _NONE["d"])
            src, in_order = ei._other_indices("dst")
            gatv2_bwd_dst(g, xl2, xr2, att2, src, xe2, has_e, float(negative_slope), perm, ptr,
                          none if gxr is None else rows2d(gxr), need_xr,
                          none if gxe is None else rows2d(gxe), need_e, part, need_att, T,
                          in_order)
            if need_att:
                # the chunks (float64 partials) in order: the bits do not depend on
                # the thread count
                gatt = np.add.reduce(part, axis=0).reshape(att.shape).astype(xl.dtype)
        if need_xl:
            ptr, perm = ei.src._grouping()
            gxl = self._host_empty(xl.shape, xl.dtype)
            dst, in_order = ei._other_indices("src")
            gatv2_bwd_src(g, xl2, xr2, att2, dst, xe2, has_e, float(negative_slope), perm, ptr,
                          rows2d(gxl), T, in_order)
        return gxl, gxr, gatt, gxe

    @host_body("x", "att")
    def head_dot(self, x: np.ndarray, att: np.ndarray) -> Any:
        """``out[n, h] = sum_c x[n, h, c] * att[h, c]``: ``x`` ``[N, H, C]``, ``att``
        ``[H, C]`` (GAT's attention logits per node and head)."""
        _head_dot_shapes(x, att, "head_dot")
        out = self._host_empty((x.shape[0], x.shape[1]), x.dtype)
        head_dot_rows(rows2d(x), np.ascontiguousarray(att), out, get_num_threads())
        return out

    @host_body("grad", "x", "att")
    def head_dot_backward(self, grad: np.ndarray, x: np.ndarray, att: np.ndarray,
                          need: tuple[bool, bool] = (True, True)) -> tuple[Any, Any]:
        """``(grad_x, grad_att)``: ``grad[n, h] * att[h, c]`` and ``sum_n grad[n, h] *
        x[n, h, c]`` (float64 partial sums per chunk of rows, added in order: the
        bits do not depend on the thread count); ``None`` where ``need`` is false."""
        _head_dot_shapes(x, att, "head_dot_backward")
        N, H = x.shape[0], x.shape[1]
        if grad.shape != (N, H) or grad.dtype != x.dtype:
            raise ValueError(f"head_dot_backward(): grad must be [{N}, {H}] {x.dtype}, got "
                             f"{grad.shape} {grad.dtype}")
        need_x, need_att = (bool(n) for n in need)
        none = _NONE[x.dtype.char]
        gx = self._host_empty(x.shape, x.dtype) if need_x else None
        part = (np.empty((head_dot_chunks(N), H * x.shape[2]), np.float64) if need_att
                else _NONE["d"])
        head_dot_backward(np.ascontiguousarray(grad), rows2d(x), np.ascontiguousarray(att),
                          none if gx is None else rows2d(gx), need_x, part, need_att,
                          get_num_threads())
        gatt = (np.add.reduce(part, axis=0).reshape(att.shape).astype(x.dtype)
                if need_att else None)
        return gx, gatt

    @host_body("a_src", "a_dst")
    def gat_scores(self, a_src: np.ndarray, a_dst: np.ndarray, src_index: IndexPlan,
                   dst_index: IndexPlan, negative_slope: float) -> Any:
        """``leaky_relu(a_src[src_index] + a_dst[dst_index], negative_slope)``:
        ``a_src`` ``[N_src, H]``, ``a_dst`` ``[N_dst, H]`` of one float dtype, the
        indices checked plans over their rows, of one length ``E``; ``[E, H]``."""
        if (a_src.ndim != 2 or a_dst.ndim != 2 or a_src.shape[1] != a_dst.shape[1]
                or a_src.dtype != a_dst.dtype):
            raise ValueError(f"gat_scores(): a_src [N_src, H] and a_dst [N_dst, H] of one dtype "
                             f"do not match: {a_src.shape} {a_src.dtype}, {a_dst.shape} "
                             f"{a_dst.dtype}")
        for what, plan, rows in (("src_index", src_index, a_src.shape[0]),
                                 ("dst_index", dst_index, a_dst.shape[0])):
            if type(plan) is not IndexPlan:
                raise TypeError(f"gat_scores(): {what} must be a checked rtx.IndexPlan, got "
                                f"{type(plan).__name__} (rtx.gat_scores makes one)")
            if plan.num_rows != rows:
                raise ValueError(f"gat_scores(): {what} was checked against {plan.num_rows} "
                                 f"rows, but its logits have {rows}")
        src, dst = src_index._idx, dst_index._idx   # the plans' private arrays
        if len(src) != len(dst):
            raise ValueError(f"gat_scores(): src_index and dst_index must have one length, got "
                             f"{len(src)} and {len(dst)}")
        if src.dtype != dst.dtype:       # one index type per kernel call
            src, dst = src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False)
        out = self._host_empty((len(src), a_src.shape[1]), a_src.dtype)
        gat_scores_rows(np.ascontiguousarray(a_src), np.ascontiguousarray(a_dst), src, dst,
                        float(negative_slope), out, get_num_threads())
        return out
