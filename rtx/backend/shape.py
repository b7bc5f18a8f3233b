"""Shape and view ops.  A backend may return views; the defaults copy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._family import Family, query
from ._host import contiguous


def _basic(k: Any) -> bool:
    return (k is None or k is Ellipsis or isinstance(k, slice)
            or (isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))))


def slice_backward_np(g: np.ndarray, shape: tuple[int, ...], key: Any) -> np.ndarray:
    """The adjoint of ``x[key]``: a zero array of ``shape`` with ``g`` added at ``key``.

    A basic index (ints, slices, ``...``, ``None``) reaches each element at most
    once: ``g`` is assigned; an advanced one may repeat positions, which
    accumulate (``np.add.at``)."""
    out = np.zeros(shape, dtype=g.dtype)
    if _basic(key) or (isinstance(key, tuple) and all(_basic(k) for k in key)):
        out[key] = g
    else:
        np.add.at(out, key, g)
    return out


class ShapeOps(Family):
    FAMILY = "shape"  # its ops: the public methods below (``_family.py``)

    def reshape(self, a: Any, shape: tuple[int, ...]) -> Any:
        """``a`` with a new shape: a view of ``a`` when ``can_view`` says so, else a copy."""
        return self._host(np.reshape, a, shape=shape)

    # ---------------------------------------------- layout queries (not ops)
    @query
    def is_contiguous(self, a: Any) -> bool:
        """Whether ``a`` is laid out C-contiguously.  The default: a backend
        without strided views holds every primitive contiguously."""
        return True

    @query
    def can_view(self, a: Any, shape: tuple[int, ...]) -> bool:
        """Whether ``reshape(a, shape)`` returns a view of ``a`` (no copy).  The
        default: when ``a`` is contiguous (then any shape of the same size is)."""
        return self.is_contiguous(a)

    def permute(self, a: Any, dims: tuple[int, ...]) -> Any:
        return self._host(np.transpose, a, axes=dims)

    def broadcast_to(self, a: Any, shape: tuple[int, ...]) -> Any:
        """``a`` broadcast to ``shape`` as a new array (the op rules' internal use)."""
        return self._host(lambda x: np.array(np.broadcast_to(x, shape)), a)

    def expand(self, a: Any, shape: tuple[int, ...]) -> Any:
        """``a`` broadcast to ``shape`` for ``Tensor.expand`` / ``broadcast_to``.

        A backend with strided views returns a VIEW (stride 0 along the
        broadcast dims, sharing ``a``'s memory, reported by ``aliases``), as
        PyTorch does; in-place writes into a view whose elements share memory
        must then raise.  The default: a copy (``broadcast_to``)."""
        return self.broadcast_to(a, shape)

    def getitem(self, a: Any, key: Any) -> Any:
        return self._host(lambda x: np.array(x[key]), a)

    def slice_backward(self, g: Any, shape: tuple[int, ...], key: Any) -> Any:
        return self._host(slice_backward_np, g, shape=shape, key=key)

    def concat(self, xs: Sequence[Any], dim: int = 0) -> Any:
        return self.from_numpy(  # type: ignore[attr-defined]
            contiguous(np.concatenate([self._h(x) for x in xs], axis=dim))
        )

    def stack(self, xs: Sequence[Any], dim: int = 0) -> Any:
        return self.from_numpy(  # type: ignore[attr-defined]
            contiguous(np.stack([self._h(x) for x in xs], axis=dim))
        )
