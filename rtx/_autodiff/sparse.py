"""Row-sparse gradients: what ``Embedding(..., sparse=True)`` gives its weight.

A ``RowSparseGrad`` stands for a dense ``[N, *rest]`` tensor that is zero except
in the rows ``indices`` (sorted, unique int64: always coalesced), which hold
``values`` (``[nnz, *rest]``, a backend primitive).  It is PyTorch's sparse COO
gradient with one sparse dimension, as ``nn.Embedding(sparse=True)`` makes:
``grad.is_sparse``, ``grad._indices()`` (``[1, nnz]``), ``grad._values()``,
``coalesce()``, ``to_dense()``.  Nothing of the dense size is allocated unless
``to_dense()`` is asked for.

The engine (``graph._engine``) passes one through to a leaf and sums two of
them by concatenating and coalescing (``add_grads``); a row-sparse gradient
that would enter another op's backward (a weight that is itself computed) is
made dense first.  ``backward()`` accumulates over calls with ``add_grads``
too: sparse + sparse stays sparse, sparse + dense is dense, as PyTorch's
``AccumulateGrad`` does.  Part of the engine layer: it creates tensors through
the class ``rtx/tensor.py`` registers, never importing it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..backend.index_plan import IndexPlan

_tensor_type: Any = None  # rtx.tensor.Tensor (set by autodiff.register_tensor_type)

__all__ = ["RowSparseGrad", "add_grads", "coalesce_rows", "densify", "row_plan"]


def row_plan(rows: np.ndarray, num_rows: int) -> IndexPlan:
    """A checked plan of ``rows`` over ``num_rows`` (for the op rules)."""
    return IndexPlan(rows, num_rows)


def coalesce_rows(B: Any, rows: np.ndarray, values: Any,
                  shape: tuple[int, ...]) -> RowSparseGrad:
    """``values[i]`` at row ``rows[i]`` (rows may repeat, any order) summed per row
    (in the given order: deterministic) into a coalesced ``RowSparseGrad``."""
    rows = np.asarray(rows, dtype=np.int64)
    uniq, inv = np.unique(rows, return_inverse=True)
    if len(uniq) != len(rows) or not np.array_equal(uniq, rows):
        values = B.index_add(values, IndexPlan(inv.reshape(-1), len(uniq)), len(uniq))
    return RowSparseGrad(uniq, values, shape)


def densify(B: Any, g: Any) -> Any:
    """``g`` as a dense primitive (a ``RowSparseGrad`` scattered into zeros)."""
    if type(g) is not RowSparseGrad:
        return g
    return B.index_add(g._vals, IndexPlan(g._idx, g._shape[0]), g._shape[0])


def add_grads(B: Any, a: Any, b: Any) -> Any:
    """``a + b`` for gradients, either of which may be a ``RowSparseGrad``."""
    sa, sb = type(a) is RowSparseGrad, type(b) is RowSparseGrad
    if not (sa or sb):
        return B.add(a, b)
    if sa and sb:
        vals = B.concat([a._vals, B.cast(b._vals, B.dtype(a._vals))]
                        if B.dtype(b._vals) != B.dtype(a._vals) else [a._vals, b._vals], 0)
        return coalesce_rows(B, np.concatenate([a._idx, b._idx]), vals, a._shape)
    return B.add(densify(B, a), densify(B, b))


class RowSparseGrad:
    """A coalesced row-sparse tensor (PyTorch's sparse COO layout with
    ``sparse_dim() == 1``): rows ``_indices()[0]`` hold ``_values()``, every other
    row is zero.  Made by the engine for ``Embedding(sparse=True)``'s weight."""

    __slots__ = ("_idx", "_vals", "_shape", "_ad")
    is_sparse = True
    layout = "sparse_coo"
    requires_grad = False
    grad = None

    def __init__(self, indices: np.ndarray, values: Any, shape: tuple[int, ...],
                 ad: Any = None) -> None:
        self._idx = indices      # host int64 [nnz], sorted, unique, in [0, shape[0])
        self._vals = values      # backend primitive [nnz, *shape[1:]]
        self._shape = tuple(int(s) for s in shape)
        self._ad = ad            # the Autodiff of the leaf it belongs to (set on storing)

    def _bound(self, ad: Any) -> RowSparseGrad:
        return RowSparseGrad(self._idx, self._vals, self._shape, ad)

    def _tensor(self, prim: Any) -> Any:
        return _tensor_type._make(prim, self._ad)

    # ------------------------------------------------------------ metadata
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    def size(self, dim: int | None = None) -> Any:
        return self._shape if dim is None else self._shape[dim]

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._ad.inner.dtype(self._vals))

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        return math.prod(self._shape)

    def sparse_dim(self) -> int:
        return 1

    def dense_dim(self) -> int:
        return len(self._shape) - 1

    def _nnz(self) -> int:
        return len(self._idx)

    def is_coalesced(self) -> bool:
        return True

    # ------------------------------------------------------------- content
    def coalesce(self) -> RowSparseGrad:
        """Itself: a ``RowSparseGrad`` is always coalesced."""
        return self

    def _indices(self) -> Any:
        """The rows, int64 ``[1, nnz]`` (a copy)."""
        B = self._ad.inner
        return self._tensor(B.from_numpy(self._idx.reshape(1, -1).copy()))

    def _values(self) -> Any:
        """The rows' values ``[nnz, *shape[1:]]`` (a copy)."""
        return self._tensor(self._ad.inner.copy(self._vals))

    indices = _indices
    values = _values

    def to_dense(self) -> Any:
        """The dense tensor it stands for (allocates ``shape``)."""
        return self._tensor(densify(self._ad.inner, self))

    def zero_(self) -> RowSparseGrad:
        """Empty it (no rows), as ``zero_()`` on a sparse tensor does."""
        B = self._ad.inner
        self._idx = np.zeros(0, np.int64)
        self._vals = B.zeros((0,) + self._shape[1:], B.dtype(self._vals))
        return self

    def to(self, dtype: Any) -> RowSparseGrad:
        B = self._ad.inner
        return RowSparseGrad(self._idx, B.cast(self._vals, np.dtype(dtype)), self._shape,
                             self._ad)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles (and deep-copies) as its rows and a values tensor."""
        return (_rebuild, (self._idx.copy(), self._values(), self._shape))

    def numpy(self) -> np.ndarray:
        raise TypeError("a sparse gradient has no numpy(): call .to_dense().numpy(), or "
                        "read ._indices() and ._values()")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError("a sparse gradient is not an array: call .to_dense() first")

    def __repr__(self) -> str:
        rows = self._idx[:6].tolist()
        more = ", ..." if len(self._idx) > 6 else ""
        return (f"RowSparseGrad(rows=[{', '.join(map(str, rows))}{more}], "
                f"shape={list(self._shape)}, nnz={len(self._idx)}, layout=sparse_coo)")


def _rebuild(rows: np.ndarray, values: Any, shape: tuple[int, ...]) -> RowSparseGrad:
    return RowSparseGrad(rows, values._value, shape, values._ad)
