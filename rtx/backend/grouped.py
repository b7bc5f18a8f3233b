"""Grouped (segment) matmul: ``out[i] = x[i] @ weight[index[i]]``.

``x`` is ``[N, K]``, ``weight`` ``[T, K, M]`` (one ``[K, M]`` block per type,
PyG's ``HeteroLinear.weight`` layout) and ``index`` a checked ``IndexPlan`` of
the ``N`` rows' types over ``T`` (the face makes it; ``grouped_plan``: no index
is checked again).  Backward: ``grad_x[i] = g[i] @ weight[index[i]].T`` and
``grad_weight[t] = x_t.T @ g_t`` over the rows of type ``t``.

Each op has one body (``host_body``), run as is on the CPU backend's arrays and
through a host round-trip on any other backend.  Rows already in type order (the
grouping is the identity: ``HeteroDictLinear``'s stacked input, ``RGCNConv``'s
relation-major pairs) are contiguous blocks, one per type: each block is one BLAS
GEMM (``matmul_2d``, the threads split its rows), as a grouped GEMM does.  Rows
in any other order are gathered into the grouping's order first (one threaded
row copy), run as those GEMMs, and the results gathered back through the
grouping's inverse permutation (cached on the plan) -- when the blocks are wide
and tall enough for BLAS to beat the row kernels of ``rtx/_grouped.pxi`` (one pass
over the rows in the grouping's order, consecutive rows sharing a weight block,
no copies), which take the rest.  Either way the bits do not depend on the
thread count.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._kernels import (
    gather_rows,
    scatter_accumulate_rows,
    segment_matmul_rows,
    segment_matmul_weight_grad,
)
from .._threads import get_num_threads
from ._family import Family, host_body, host_body_of
from ._host import check_output
from ._matmul import matmul_2d
from .index import IndexOps, add_plan
from .index_plan import IndexPlan
from .segment import segment_plan


def grouped_plan(x: np.ndarray, index: Any, weight: np.ndarray, op: str) -> IndexPlan:
    """The backend's contract: ``x`` ``[N, K]``, ``weight`` ``[T, K, M]`` and
    ``index`` a checked ``IndexPlan`` of ``N`` entries over ``T`` rows.  O(1)."""
    xs, ws = x.shape, weight.shape
    if len(xs) != 2 or len(ws) != 3 or ws[1] != xs[1]:
        raise ValueError(f"{op}(): input [N, K] and weight [T, K, M] do not match: "
                         f"{xs}, {ws}")
    return segment_plan(index, ws[0], op, xs[0])


Blocks = list[tuple[int, int, int]]


def _nonempty(ptr: np.ndarray) -> Blocks:
    """``[(type, start, end)]`` of the types with rows, from the grouping's pointers."""
    return [(int(t), int(ptr[t]), int(ptr[t + 1])) for t in np.flatnonzero(np.diff(ptr))]


def _type_blocks(plan: Any) -> Blocks | None:
    """The non-empty types' rows when the rows are already sorted by type (the
    grouping is the identity), else None."""
    ptr, perm = plan._grouping()
    n = perm.shape[0]
    if n == 0 or not np.array_equal(perm, np.arange(n, dtype=perm.dtype)):
        return None
    return _nonempty(ptr)


# segment_matmul_sum's chunks: at most this many bytes of [rows, max(K, M)]
# (the scratch block of the product or of its gradient), at least this many rows
SUM_CHUNK_BYTES = 16 << 20
SUM_CHUNK_MIN_ROWS = 1024


# The gathered GEMMs run when both sides of each weight block are at least this
# wide and the types average at least GEMM_MIN_ROWS rows: the row kernels' dot
# products of short rows beat two extra copies of the rows otherwise.
GEMM_MIN_WIDTH = 16
GEMM_MIN_ROWS = 256


def _gathered_blocks(plan: Any, K: int, M: int) -> Blocks | None:
    """The non-empty types' rows in the grouping's order, when the gathered GEMMs
    pay (see ``GEMM_MIN_WIDTH``), else None."""
    if K < GEMM_MIN_WIDTH or M < GEMM_MIN_WIDTH:
        return None
    blocks = _nonempty(plan._grouping()[0])
    if not blocks or len(plan) < GEMM_MIN_ROWS * len(blocks):
        return None
    return blocks


def _blocks(w: np.ndarray) -> np.ndarray:
    """``[T, K, M]`` as a C-contiguous ``(T*K, M)`` view (a copy only if needed)."""
    w = np.ascontiguousarray(w)
    return w.reshape(w.shape[0] * w.shape[1], w.shape[2])


class GroupedOps(Family):
    """The grouped matmul and its backward pass, over a checked ``IndexPlan``."""

    FAMILY = "grouped"  # its ops: the public methods below (``_family.py``)

    def _mm(self, a: np.ndarray, b: np.ndarray, out: np.ndarray, T: int) -> None:
        matmul_2d(a, b, out, T, lambda shape: self._host_empty(shape, out.dtype))

    def _gather(self, x: np.ndarray, idx: np.ndarray, T: int) -> np.ndarray:
        out = self._host_empty((idx.shape[0], x.shape[1]), x.dtype)
        gather_rows(x, idx, out, T)
        return out

    # one GEMM per type over rows in type order (sorted input, or gathered into it)
    def _out_by_type(self, a: np.ndarray, w: np.ndarray, blocks: Blocks, T: int
                     ) -> np.ndarray:
        out = self._host_empty((a.shape[0], w.shape[2]), a.dtype)
        for t, r0, r1 in blocks:
            self._mm(a[r0:r1], w[t], out[r0:r1], T)
        return out

    def _grad_x_by_type(self, g: np.ndarray, w: np.ndarray, blocks: Blocks, T: int
                        ) -> np.ndarray:
        gx = self._host_empty((g.shape[0], w.shape[1]), g.dtype)
        for t, r0, r1 in blocks:
            self._mm(g[r0:r1], w[t].T, gx[r0:r1], T)
        return gx

    def _grad_w_by_type(self, a: np.ndarray, g: np.ndarray, w: np.ndarray, blocks: Blocks,
                        T: int) -> np.ndarray:
        gw = self._host_empty(w.shape, w.dtype, zero=True)   # types without rows: 0
        for t, r0, r1 in blocks:
            self._mm(a[r0:r1].T, g[r0:r1], gw[t], T)
        return gw

    @host_body("x", "weight")
    def segment_matmul(self, x: np.ndarray, index: Any, weight: np.ndarray) -> Any:
        plan = grouped_plan(x, index, weight, "segment_matmul")
        _, perm = plan._grouping()
        a, T = np.ascontiguousarray(x), get_num_threads()
        blocks = _type_blocks(plan)
        if blocks is not None and weight.shape[1] and weight.shape[2]:
            return self._out_by_type(a, np.ascontiguousarray(weight), blocks, T)
        out = self._host_empty((x.shape[0], weight.shape[2]), x.dtype)
        gathered = _gathered_blocks(plan, weight.shape[1], weight.shape[2])
        if gathered is not None:
            os_ = self._out_by_type(self._gather(a, perm, T),     # rows in type order
                                    np.ascontiguousarray(weight), gathered, T)
            gather_rows(os_, plan._grouping_ranks(), out, T)   # back to the rows' order
            return out
        segment_matmul_rows(a, plan._idx, perm, _blocks(weight), out, T)
        return out

    @host_body("grad", "x", "weight")
    def segment_matmul_backward(self, grad: np.ndarray, x: np.ndarray, index: Any,
                                weight: np.ndarray, need_x: bool = True,
                                need_weight: bool = True) -> tuple[Any, Any]:
        """``(grad_x, grad_weight)`` (``None`` for what is not needed)."""
        plan = grouped_plan(x, index, weight, "segment_matmul_backward")
        if grad.shape != (x.shape[0], weight.shape[2]) or grad.dtype != x.dtype:
            raise ValueError(f"segment_matmul_backward(): grad must be "
                             f"{(x.shape[0], weight.shape[2])} {x.dtype}, got {grad.shape} "
                             f"{grad.dtype}")
        ptr, perm = plan._grouping()
        g = np.ascontiguousarray(grad)
        a = np.ascontiguousarray(x)
        T = get_num_threads()
        gx = gw = None
        blocks = _type_blocks(plan)
        if blocks is not None and weight.shape[1] and weight.shape[2]:
            w = np.ascontiguousarray(weight)
            if need_x:
                gx = self._grad_x_by_type(g, w, blocks, T)
            if need_weight:
                gw = self._grad_w_by_type(a, g, w, blocks, T)
            return gx, gw
        gathered = _gathered_blocks(plan, weight.shape[1], weight.shape[2])
        if gathered is not None:
            w = np.ascontiguousarray(weight)
            gs = self._gather(g, perm, T)                      # rows in type order
            if need_x:
                gxs = self._grad_x_by_type(gs, w, gathered, T)
                gx = self._host_empty(x.shape, x.dtype)
                gather_rows(gxs, plan._grouping_ranks(), gx, T)   # back to the rows' order
                del gxs
            if need_weight:
                gw = self._grad_w_by_type(self._gather(a, perm, T), gs, w, gathered, T)
            return gx, gw
        if need_x:
            gx = self._host_empty(x.shape, x.dtype)
            # g @ W[t].T through the transposed blocks ([T, M, K]: T*K*M copied, so the
            # kernel's inner loop runs along contiguous rows)
            wt = np.ascontiguousarray(weight.transpose(0, 2, 1))
            segment_matmul_rows(g, plan._idx, perm, _blocks(wt), gx, T)
        if need_weight:
            gw = self._host_empty(weight.shape, weight.dtype)
            segment_matmul_weight_grad(a, g, perm, ptr, _blocks(gw), T)
        return gx, gw

    # ------------------------------------------------ the grouped matmul, summed
    # ``segment_matmul_sum``: ``index_add(segment_matmul(x, index, w), dst, n)``
    # without the ``[N, M]`` product.  Rows in type order (RGCNConv's
    # relation-major pairs) run in chunks of at most SUM_CHUNK_BYTES of product:
    # each chunk one GEMM into a scratch block, added into the output rows by
    # ``scatter_accumulate_rows`` (each target's rows in increasing position, as
    # ``index_add`` adds them).  The chunks come from the shapes alone, so the
    # bits never depend on the thread count (the values are the two ops' to
    # rounding: BLAS may round a chunk's GEMM otherwise than the whole block's).
    # The backward gathers each chunk's output gradient into a scratch block
    # the same way.  Other row orders run the two ops one after the other.

    def _sum_chunks(self, plan: IndexPlan, K: int, M: int, itemsize: int) -> Blocks | None:
        """``[(type, start, end)]``: the type blocks of rows in type order, cut
        into chunks of at most ``SUM_CHUNK_BYTES`` of ``[rows, max(K, M)]``
        (from the shapes alone); None when the rows are not in type order."""
        blocks = _type_blocks(plan)
        if blocks is None or not K or not M:
            return None
        step = max(SUM_CHUNK_MIN_ROWS, SUM_CHUNK_BYTES // (max(K, M) * itemsize))
        return [(t, r, min(r + step, r1)) for t, r0, r1 in blocks for r in range(r0, r1, step)]

    @host_body("x", "weight")
    def segment_matmul_sum(self, x: np.ndarray, index: Any, weight: np.ndarray, dst: Any,
                           num_rows: int) -> Any:
        plan = grouped_plan(x, index, weight, "segment_matmul_sum")
        dplan = add_plan((x.shape[0],), dst, num_rows)
        n, M = dplan.num_rows, weight.shape[2]
        check_output(n, (x.shape[0], M), x.dtype.itemsize, "segment_matmul_sum")
        chunks = self._sum_chunks(plan, weight.shape[1], M, x.dtype.itemsize)
        if chunks is None:
            h = host_body_of(GroupedOps.segment_matmul)(self, x, plan, weight)
            return host_body_of(IndexOps.index_add)(self, h, dplan, n)
        a, w, T = np.ascontiguousarray(x), np.ascontiguousarray(weight), get_num_threads()
        out = self._host_empty((n, M), x.dtype)    # zero-filled with the first chunk
        scratch = self._host_empty((max(r1 - r0 for _, r0, r1 in chunks), M), x.dtype)
        for i, (t, r0, r1) in enumerate(chunks):
            h = scratch[:r1 - r0]
            self._mm(a[r0:r1], w[t], h, T)
            scatter_accumulate_rows(h, dplan._idx[r0:r1], out, T, i == 0)
        return out

    @host_body("grad", "x", "weight")
    def segment_matmul_sum_backward(self, grad: np.ndarray, x: np.ndarray, index: Any,
                                    weight: np.ndarray, dst: Any, need_x: bool = True,
                                    need_weight: bool = True) -> tuple[Any, Any]:
        """``(grad_x, grad_weight)`` (``None`` for what is not needed): the rows'
        gradient is ``grad[dst]``, then ``segment_matmul_backward``'s."""
        plan = grouped_plan(x, index, weight, "segment_matmul_sum_backward")
        M = weight.shape[2]
        if grad.ndim != 2 or grad.shape[1] != M or grad.dtype != x.dtype:
            raise ValueError(f"segment_matmul_sum_backward(): grad must be [rows, {M}] "
                             f"{x.dtype}, got {grad.shape} {grad.dtype}")
        dplan = add_plan((x.shape[0],), dst, grad.shape[0])
        if not need_x and not need_weight:
            return None, None
        chunks = self._sum_chunks(plan, weight.shape[1], M, x.dtype.itemsize)
        if chunks is None:
            gh = host_body_of(IndexOps.index_select)(self, grad, dplan)
            return host_body_of(GroupedOps.segment_matmul_backward)(
                self, gh, x, plan, weight, need_x, need_weight)
        g, a = np.ascontiguousarray(grad), np.ascontiguousarray(x)
        w, T = np.ascontiguousarray(weight), get_num_threads()
        gx = self._host_empty(x.shape, x.dtype) if need_x else None
        # (types without rows: 0)
        gw = self._host_empty(w.shape, w.dtype, zero=True) if need_weight else None
        scratch = self._host_empty((max(r1 - r0 for _, r0, r1 in chunks), M), x.dtype)
        part = self._host_empty(w.shape[1:], w.dtype) if need_weight else None
        for i, (t, r0, r1) in enumerate(chunks):
            gh = scratch[:r1 - r0]
            gather_rows(g, dplan._idx[r0:r1], gh, T)
            if gx is not None:
                self._mm(gh, w[t].T, gx[r0:r1], T)
            if gw is not None and part is not None:
                # a type's chunks are consecutive: its first writes gw[t], the
                # later ones' partials are added in order
                if i > 0 and chunks[i - 1][0] == t:
                    self._mm(a[r0:r1].T, gh, part, T)
                    np.add(gw[t], part, out=gw[t])
                else:
                    self._mm(a[r0:r1].T, gh, gw[t], T)
        return gx, gw
