"""Fused GATv2 score rule: ``score[e, h] = sum_c att[h, c] * leaky_relu(xl[src[e], h, c]
+ xr[dst[e], h, c] [+ xe[e, h, c]])``, GAT's per-head attention dot ``head_dot`` and
GAT's edge scores ``gat_scores`` (backend family ``rtx/backend/gatv2.py``).

``edge_index`` reaching the rule is always an ``EdgeIndex`` (checked once by
the face); the backward recomputes the per-edge sums from the saved inputs, so
nothing ``[E, H, C]``-sized is kept between the passes.
"""

from __future__ import annotations

import math

from .base import Op


def _check_slope(op: str, negative_slope: object) -> None:
    """A leaky ReLU slope: a finite int or float (not a bool)."""
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)):
        raise TypeError(f"{op}(): negative_slope must be a number, got {negative_slope!r}")
    if not math.isfinite(float(negative_slope)):
        raise ValueError(f"{op}(): negative_slope must be finite, got {negative_slope!r}")


class Gatv2Scores(Op):
    """GATv2's attention logits, fused: ``[E, H]`` with

    ``score[e, h] = sum_c att[h, c] * leaky_relu(xl[src[e], h, c] + xr[dst[e], h, c]
    (+ xe[e, h, c]))``

    ``xl``: ``[N_src, H, C]`` (transformed sources), ``xr``: ``[N_dst, H, C]``
    (transformed targets), ``att``: ``[H, C]``, ``xe``: optional ``[E, H, C]``
    (transformed edge features); ``edge_index``: int ``[2, E]`` or an
    ``EdgeIndex``.  Neither pass forms the ``[E, H, C]`` sum (PyG's
    ``GATv2Conv`` does): the backward recomputes it edge by edge (``grad_xr``
    and ``grad_att`` over the target grouping, ``grad_xl`` over the source
    grouping).
    """

    signature = ("xl: Data, xr: Tensor, att: Tensor, edge_index: EdgeIndex(src=xl, dst=xr), "
                 "negative_slope: float, xe: OptTensor = None")
    faces = ("function", "nn")
    name = "gatv2_scores"
    saves = (0, 1, 2, 4)
    fresh_grads = True

    @staticmethod
    def check(xl, xr, att, edge_index, negative_slope, xe):
        op = "gatv2_scores"
        dt = xl.dtype
        for what, t in (("xr", xr), ("att", att), ("xe", xe)):
            if t is not None and t.dtype != dt:
                raise TypeError(f"{op}(): {what} dtype {t.dtype} != xl dtype {dt}")
        if xl.ndim != 3:
            raise ValueError(f"{op}(): xl must be [N_src, H, C], got shape {xl.shape}")
        H, C = xl.shape[1], xl.shape[2]
        if xr.ndim != 3 or tuple(xr.shape[1:]) != (H, C):
            raise ValueError(f"{op}(): xr must be [N_dst, {H}, {C}], got shape {xr.shape}")
        if tuple(att.shape) != (H, C):
            raise ValueError(f"{op}(): att must be [{H}, {C}], got shape {att.shape}")
        _check_slope(op, negative_slope)
        if xe is not None and tuple(xe.shape) != (edge_index.num_edges, H, C):
            raise ValueError(f"{op}(): xe must be [{edge_index.num_edges}, {H}, {C}] (one row "
                             f"per edge), got shape {xe.shape}")

    @staticmethod
    def forward(ctx, B, xl, xr, att, edge_index, xe, negative_slope):
        slope = float(negative_slope)
        out = B.gatv2_scores(xl, xr, att, edge_index, slope, xe)
        ctx.xl, ctx.xr, ctx.att, ctx.xe = xl, xr, att, xe
        ctx.edge_index, ctx.slope = edge_index, slope
        return out

    @staticmethod
    def backward(ctx, B, g):
        nxl, nxr, natt, _, nxe = ctx.needs_input_grad
        need = (bool(nxl), bool(nxr), bool(natt), bool(nxe) and ctx.xe is not None)
        gxl, gxr, gatt, gxe = B.gatv2_scores_backward(g, ctx.xl, ctx.xr, ctx.att,
                                                      ctx.edge_index, ctx.slope, ctx.xe,
                                                      need=need)
        return (gxl, gxr, gatt, None, gxe)


class HeadDot(Op):
    """Per-head dot products with one vector per head: ``[N, H]`` with

    ``out[n, h] = sum_c input[n, h, c] * att[h, c]``

    ``input``: ``[N, H, C]``, ``att``: ``[H, C]``.  GAT's attention logits per node
    and head (PyG's ``(x * att_src).sum(-1)``), in one pass over ``input`` without
    forming the ``[N, H, C]`` product; ``grad_att`` is summed in float64 per fixed
    chunk of rows, so its bits do not depend on the thread count.
    """

    signature = "input: Data, att: Tensor"
    faces = ("function", "nn")
    name = "head_dot"
    saves = (0, 1)
    fresh_grads = True

    @staticmethod
    def check(input, att):
        if att.dtype != input.dtype:
            raise TypeError(f"head_dot(): att dtype {att.dtype} != input dtype {input.dtype}")
        if input.ndim != 3:
            raise ValueError(f"head_dot(): input must be [N, H, C], got shape {input.shape}")
        if tuple(att.shape) != tuple(input.shape[1:]):
            raise ValueError(f"head_dot(): att must be [{input.shape[1]}, {input.shape[2]}], "
                             f"got shape {att.shape}")

    @staticmethod
    def forward(ctx, B, x, att):
        ctx.x, ctx.att = x, att
        return B.head_dot(x, att)

    @staticmethod
    def backward(ctx, B, g):
        nx, natt = ctx.needs_input_grad
        return B.head_dot_backward(g, ctx.x, ctx.att, need=(bool(nx), bool(natt)))


class GatScores(Op):
    """GAT's edge scores from its per-node attention logits, fused: ``[E, H]`` with

    ``score[e, h] = leaky_relu(src_logits[src_index[e], h] + dst_logits[dst_index[e], h])``

    ``src_logits``: ``[N_src, H]``, ``dst_logits``: ``[N_dst, H]`` (one dtype);
    ``src_index`` / ``dst_index``: one index per edge into their rows.  One pass
    over the edges where ``leaky_relu(index_select(src_logits, src_index) +
    index_select(dst_logits, dst_index))`` takes four, with the same bits; the
    backward is that composition's (the leaky ReLU's rule, then ``index_add`` per
    side), from the output when ``negative_slope >= 0`` (it has the sum's sign);
    a negative slope keeps the sum (its forward: the sum, then ``leaky_relu``).
    """

    signature = ("src_logits: Data, dst_logits: Tensor, src_index: Index(rows=src_logits), "
                 "dst_index: Index(rows=dst_logits), negative_slope: float")
    faces = ("function", "nn")
    name = "gat_scores"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def check(src_logits, dst_logits, src_index, dst_index, negative_slope):
        op = "gat_scores"
        if dst_logits.dtype != src_logits.dtype:
            raise TypeError(f"{op}(): dst_logits dtype {dst_logits.dtype} != src_logits dtype "
                            f"{src_logits.dtype}")
        if src_logits.ndim != 2 or dst_logits.ndim != 2 \
                or dst_logits.shape[1] != src_logits.shape[1]:
            raise ValueError(f"{op}(): src_logits [N_src, H] and dst_logits [N_dst, H] do not "
                             f"match: {src_logits.shape}, {dst_logits.shape}")
        if len(src_index) != len(dst_index):
            raise ValueError(f"{op}(): src_index and dst_index must have one length (one "
                             f"entry per edge), got {len(src_index)} and {len(dst_index)}")
        _check_slope(op, negative_slope)

    @staticmethod
    def forward(ctx, B, a_src, a_dst, src_index, dst_index, negative_slope):
        slope = float(negative_slope)
        if slope >= 0:
            # leaky_relu's rule reads its input's sign: here the output's
            out = z = B.gat_scores(a_src, a_dst, src_index, dst_index, slope)
        else:               # the sum (slope 1: x * 1 == x), private to the rule
            z = B.gat_scores(a_src, a_dst, src_index, dst_index, 1.0)
            out = B.leaky_relu(z, slope)
        ctx.z, ctx.src, ctx.dst, ctx.slope = z, src_index, dst_index, slope
        ctx.n_src, ctx.n_dst = B.shape(a_src)[0], B.shape(a_dst)[0]
        return out

    @staticmethod
    def backward(ctx, B, g):
        n_src, n_dst = ctx.needs_input_grad[:2]
        dz = B.leaky_relu_backward(ctx.z, g, ctx.slope)
        return (B.index_add(dz, ctx.src, ctx.n_src) if n_src else None,
                B.index_add(dz, ctx.dst, ctx.n_dst) if n_dst else None, None, None)
