"""Op rules, index family: index_select, index_add (each other's adjoint).

Each rule's forward and backward side by side (see ``base.py``).

The saved indices are an immutable snapshot the backends reuse without copying
(``rtx.backend.index.snapshot``); a numpy array over it can still be exported
writable (``torch.from_dlpack`` ignores numpy's read-only flag), so it is kept
under a private name (``ctx._indices``), never a public attribute of
``grad_fn.ctx``."""

from __future__ import annotations

from .base import Op


# -------------------------------------------------------------------- index
class IndexSelect(Op):
    """Row gather; its backward is ``index_add`` (the adjoint)."""

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
    """Row scatter-add; its backward is ``index_select`` (the adjoint)."""

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
