"""Grouped (segment) matmul rule: ``out[i] = input[i] @ weight[index[i]]``
(backend family ``rtx/backend/grouped.py``).

``index`` reaching the rule is always an ``IndexPlan`` of the rows' types over
``weight.shape[0]`` (checked once by the face); its cached type grouping
serves the forward and both gradients.
"""

from __future__ import annotations

from .base import Op


class SegmentMatmul(Op):
    """Each row of ``input`` (``[N, K]``) times the ``[K, M]`` weight block of its
    type: ``out[i] = input[i] @ weight[index[i]]`` with ``weight`` ``[T, K, M]``
    and ``index`` ``N`` types in ``[0, T)`` (int ``[N]``, an rtx tensor or an
    ``IndexPlan``), in any order: rows need not be sorted by type.  All types in
    one pass over the rows in the index's type grouping (pyg_lib's
    ``segment_matmul(inputs, ptr, other)`` without the sort; what
    ``HeteroLinear`` and ``RGCNConv`` are built on).  Backward:
    ``grad_input[i] = g[i] @ weight[index[i]].T``, ``grad_weight[t] =
    input_t.T @ g_t`` over the rows of type ``t``.
    """

    signature = "input: Data, index: Index(rows=weight, length=input), weight: Tensor"
    faces = ("function", "nn")
    name = "segment_matmul"
    saves = (0, 2)
    fresh_grads = True

    @staticmethod
    def check(input, index, weight, op="segment_matmul"):
        if input.ndim != 2:
            raise ValueError(f"{op}(): input must be [N, K], got shape {input.shape}")
        if weight.dtype != input.dtype:
            raise TypeError(f"{op}(): weight dtype {weight.dtype} != input dtype {input.dtype}")
        if weight.ndim != 3 or weight.shape[1] != input.shape[1]:
            raise ValueError(f"{op}(): weight must be [T, {input.shape[1]}, M] (one [K, M] "
                             f"block per type), got shape {weight.shape}")

    @staticmethod
    def forward(ctx, B, input, index, weight):
        out = B.segment_matmul(input, index, weight)
        ctx.x, ctx.index, ctx.w = input, index, weight
        return out

    @staticmethod
    def backward(ctx, B, g):
        nx, _, nw = ctx.needs_input_grad
        gx, gw = B.segment_matmul_backward(g, ctx.x, ctx.index, ctx.w, need_x=bool(nx),
                                           need_weight=bool(nw))
        return (gx if nx else None, None, gw if nw else None)


class SegmentMatmulSum(Op):
    """The grouped matmul's rows summed into ``num_rows`` rows:
    ``out[dst[i]] += input[i] @ weight[index[i]]``, i.e.
    ``index_add(segment_matmul(input, index, weight), dst, num_rows)`` without
    the ``[N, M]`` product (and, in the backward pass, without its ``[N, M]``
    gradient ``grad[dst]``): rows in type order run in chunks, each one GEMM
    into a scratch block added into its output rows (``RGCNConv``'s
    relation-major (target, relation) pairs; other orders run the two ops).
    Repeated ``dst`` accumulate in row order; the values are the two ops' to
    rounding (BLAS may round a chunk's GEMM otherwise than the whole type
    block's), the bits depend on the shapes alone, never the thread count.
    Backward: ``grad_input[i] = grad[dst[i]] @ weight[index[i]].T``,
    ``grad_weight[t] = input_t.T @ grad[dst]_t``.
    """

    signature = ("input: Data, index: Index(rows=weight, length=input), weight: Tensor, "
                 "dst: Index(rows=num_rows, length=input), num_rows: Rows")
    faces = ("function", "nn")
    name = "segment_matmul_sum"
    saves = (0, 2)
    fresh_grads = True

    @staticmethod
    def check(input, index, weight, dst, num_rows):
        SegmentMatmul.check(input, index, weight, op="segment_matmul_sum")

    @staticmethod
    def forward(ctx, B, input, index, weight, dst, num_rows):
        out = B.segment_matmul_sum(input, index, weight, dst, num_rows)
        ctx.x, ctx.index, ctx.w, ctx.dst = input, index, weight, dst
        return out

    @staticmethod
    def backward(ctx, B, g):
        nx, _, nw, _, _ = ctx.needs_input_grad
        gx, gw = B.segment_matmul_sum_backward(g, ctx.x, ctx.index, ctx.w, ctx.dst,
                                               need_x=bool(nx), need_weight=bool(nw))
        return (gx if nx else None, None, gw if nw else None, None, None)
