"""Op rules, index family: index_select, index_add (each other's adjoint), and
embedding (index_select whose weight gradient may be row-sparse).

Each rule's forward and backward side by side (see ``base.py``).

The saved indices are an immutable snapshot the backends reuse without copying
(``rtx.backend.index.snapshot``); a numpy array over it can still be exported
writable (``torch.from_dlpack`` ignores numpy's read-only flag), so it is kept
under a private name (``ctx._indices``), never a public attribute of
``grad_fn.ctx``."""

from __future__ import annotations

import numpy as np

from .base import Op, coalesce_rows, row_plan


# -------------------------------------------------------------------- index
class IndexSelect(Op):
    """Row gather along dim 0: ``out[i] = x[indices[i]]``.

    ``indices``: an ``IndexPlan`` or 1-D int32/int64 indices (rtx tensor, numpy
    array or sequence), each in ``[0, x.shape[0])``.  Its gradient is
    ``index_add`` of the output gradient (the adjoint).
    """

    signature = "x: Tensor, indices: Index(rows=x)"
    faces = ("function",)   # Tensor.index_select(dim, index) is hand-written (its dim)
    name = "index_select"
    saves = ()
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, x, indices):
        out = B.index_select(x, indices)
        ctx._indices, ctx.n = indices, B.shape(x)[0]
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.index_add(g, ctx._indices, ctx.n), None)


class IndexAdd(Op):
    """Row scatter-add along dim 0 into ``num_rows`` zero rows.

    ``out[indices[i]] += src[i]``; repeated indices accumulate in index order
    (deterministic for any thread count).  Its gradient is ``index_select``.
    """

    signature = "src: Tensor, indices: Index(rows=num_rows, length=src), num_rows: Rows"
    faces = ("function",)
    aliases = {"segment_sum": (
        "src: Tensor, index: Index(rows=num_segments, length=src), num_segments: Rows",
        ("function", "nn"),
        """``out[r] = sum of src[i] with index[i] == r`` (``num_segments`` rows; empty -> 0).

    This is ``rtx.index_add(src, index, num_segments)`` (the same rule and kernel).
    """)}
    name = "index_add"
    saves = ()
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, src, indices, num_rows):
        out = B.index_add(src, indices, num_rows)
        ctx._indices = indices
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.index_select(g, ctx._indices), None, None)


class IndexAddInto(Op):
    """``input`` with ``alpha * source[i]`` added to its slice ``index[i]`` along
    ``dim`` (PyTorch's ``Tensor.index_add``); repeated indices accumulate in
    index order, deterministically.  ``source`` has ``input``'s dtype and shape
    except along ``dim``, where it has ``len(index)`` entries; ``index_add_``
    writes the result into ``input``.  Gradients: ``grad`` for ``input``,
    ``alpha * grad.index_select(dim, index)`` for ``source``.
    """

    signature = ("input: Tensor, dim: Dim, index: Index(rows=input, length=source, dim=dim), "
                 "source: Tensor, *, alpha: float = 1")
    faces = ("method:index_add", "inplace")
    name = "index_add_into"
    saves = ()

    @staticmethod
    def check(x, dim, index, source, alpha):
        if source.dtype != x.dtype:
            raise TypeError(f"index_add(): self (rtx.{x.dtype}) and source (rtx.{source.dtype}) "
                            "must have the same dtype")
        same = source.ndim == x.ndim and all(
            a == b for i, (a, b) in enumerate(zip(source.shape, x.shape, strict=True))
            if i != dim)
        if not same:
            raise ValueError(f"index_add(): source of shape {source.shape} does not match self "
                             f"of shape {x.shape} outside dim {dim}")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            raise TypeError(f"index_add(): alpha must be a number, got {type(alpha).__name__}")
        if x.dtype.kind != "f" and not isinstance(alpha, int):
            raise TypeError("index_add(): for integral tensors alpha must not be a floating "
                            "point number")

    @staticmethod
    def forward(ctx, B, x, indices, source, dim=0, alpha=1):
        nd = len(B.shape(x))
        perm = None
        if dim and nd > 1:  # work along dim 0 of a transposed view
            p = list(range(nd))
            p[0], p[dim] = dim, 0
            perm = tuple(p)
            x, source = B.permute(x, perm), B.permute(source, perm)
        if not nd:  # 0-d: one slice, itself
            x, source = B.reshape(x, (1,)), B.reshape(source, (1,))
        src = source if alpha == 1 else B.mul(source, alpha)
        out = B.add(x, B.index_add(src, indices, B.shape(x)[0]))
        ctx._indices, ctx.perm, ctx.alpha, ctx.nd = indices, perm, alpha, nd
        if perm is not None:
            out = B.permute(out, perm)
        return out if nd else B.reshape(out, ())

    @staticmethod
    def backward(ctx, B, g):
        _, _, ns = ctx.needs_input_grad
        gs = None
        if ns:
            gt = g if ctx.perm is None else B.permute(g, ctx.perm)
            if not ctx.nd:
                gt = B.reshape(gt, (1,))
            gs = B.index_select(gt, ctx._indices)
            if ctx.alpha != 1:
                gs = B.mul(gs, ctx.alpha)
            if ctx.perm is not None:
                gs = B.permute(gs, ctx.perm)
            elif not ctx.nd:
                gs = B.reshape(gs, ())
        return (g, None, gs)


class Embedding(Op):
    """``nn.functional.embedding``'s rule: ``out[i] = weight[indices[i]]``.

    The weight's gradient is the scatter-add of the output gradient into its
    rows, without the rows of ``padding_idx`` (``-1``: none; such rows get no
    gradient, as in PyTorch).  With ``sparse=True`` it is a ``RowSparseGrad``
    over the distinct rows of the batch (``rtx/_autodiff/sparse.py``): nothing
    of the weight's size is allocated.  The face is hand-written
    (``rtx.nn.functional.embedding(input, weight, ...)``: PyTorch's argument
    order, indices of any shape).
    """

    signature = ("weight: Tensor, indices: Index(rows=weight), padding_idx: int = -1, "
                 "sparse: bool = False")
    faces = ()
    name = "embedding"
    saves = ()
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, weight, indices, padding_idx=-1, sparse=False):
        out = B.index_select(weight, indices)
        ctx._indices, ctx.shape = indices, tuple(B.shape(weight))
        ctx.padding_idx, ctx.sparse = padding_idx, sparse
        return out

    @staticmethod
    def backward(ctx, B, g):
        plan, shape, n = ctx._indices, ctx.shape, ctx.shape[0]
        rows = plan._idx
        if ctx.padding_idx >= 0:
            keep = np.flatnonzero(rows != ctx.padding_idx)
            if len(keep) != len(rows):
                g = B.index_select(g, row_plan(keep, len(rows)))
                rows = rows[keep]
                plan = None
        if ctx.sparse:
            res = coalesce_rows(B, rows, g, shape)
            if res._vals is g:  # (already distinct and sorted): never hand out g itself
                res._vals = B.copy(g)
            return (res, None)
        if plan is None:
            plan = row_plan(rows, n)
        return (B.index_add(g, plan, n), None)
