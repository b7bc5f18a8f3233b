"""``BaseTransform`` and ``Compose`` (PyG's), and the array helpers the transforms share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..creation import from_numpy
from ..data import HeteroData
from ..tensor import Tensor

__all__ = ["BaseTransform", "Compose"]


class BaseTransform:
    """A transform: ``transform(data)`` returns a transformed ``HeteroData``.

    As in PyG, ``__call__`` works on a shallow copy (``data.copy()``: new stores
    holding the same values), so the caller's object and arrays are never
    changed; subclasses implement ``forward(data)``.
    """

    def __call__(self, data: Any) -> Any:
        return self.forward(_checked(data, type(self).__name__).copy())

    def forward(self, data: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Compose(BaseTransform):
    """Apply ``transforms`` in order (a list or tuple of data objects: each of them)."""

    def __init__(self, transforms: Sequence[Callable[[Any], Any]]) -> None:
        transforms = list(transforms)
        for t in transforms:
            if not callable(t):
                raise TypeError(f"Compose: {t!r} is not callable")
        self.transforms = transforms

    def __call__(self, data: Any) -> Any:
        return self.forward(data)

    def forward(self, data: Any) -> Any:
        for t in self.transforms:
            if isinstance(data, (list, tuple)):
                data = [t(d) for d in data]
            else:
                data = t(data)
        return data

    def __repr__(self) -> str:
        args = [f"  {t}" for t in self.transforms]
        return "{}([\n{}\n])".format(type(self).__name__, ",\n".join(args))


# ------------------------------------------------------------------ helpers
def _checked(data: Any, who: str) -> HeteroData:
    if not isinstance(data, HeteroData):
        raise TypeError(f"{who} expects an rtx.data.HeteroData, got {type(data).__name__}")
    return data


def shape_of(v: Any) -> tuple[int, ...] | None:
    """The shape of an array-like value (rtx tensor, numpy, torch), else None."""
    if isinstance(v, (Tensor, np.ndarray)):
        return tuple(v.shape)
    s = getattr(v, "shape", None)
    if s is not None and hasattr(v, "dtype"):
        try:
            return tuple(int(d) for d in s)
        except TypeError:
            return None
    return None


def host(v: Any) -> np.ndarray:
    """A read-only-by-convention numpy view of an array-like value (never written)."""
    if isinstance(v, Tensor):
        return v.numpy()
    if isinstance(v, np.ndarray):
        return v
    if hasattr(v, "detach") and hasattr(v, "cpu"):  # a torch tensor
        return np.asarray(v.detach().cpu().numpy())
    return np.asarray(v)


def like(a: np.ndarray, old: Any) -> Any:
    """``a`` as the kind of value ``old`` was: a numpy array stays numpy, anything
    else (rtx or torch tensors) becomes an rtx tensor."""
    if isinstance(old, np.ndarray):
        return a
    return tensor(a)


def tensor(a: np.ndarray) -> Tensor:
    """A new rtx tensor over ``a`` (narrow ints widened as rtx needs)."""
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "u" or (a.dtype.kind == "i" and a.dtype.itemsize < 4):
        a = a.astype(np.int64)
    elif a.dtype.kind == "f" and a.dtype.itemsize < 4:
        a = a.astype(np.float32)
    return from_numpy(a)


def edge_index_of(store: Any, et: Any) -> np.ndarray:
    """The store's ``edge_index`` as int64 ``[2, E]`` (``ValueError`` / ``TypeError``)."""
    ei = host(store["edge_index"])
    if ei.size == 0 and ei.dtype.kind == "f":
        ei = ei.astype(np.int64)
    if ei.dtype.kind not in "iu":
        raise TypeError(f"edge_index of {et!r} must be integer, got {ei.dtype}")
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"edge_index of {et!r} must have shape [2, E], got {ei.shape}")
    return ei.astype(np.int64, copy=False)


def is_edge_attr(key: str, value: Any, num_edges: int) -> bool:
    """PyG's ``EdgeStorage.is_edge_attr``: an array whose concatenation dimension
    (the last for keys holding ``"index"``, else the first) has one entry per edge."""
    s = shape_of(value)
    if not s:
        return False
    return (s[-1] if "index" in key else s[0]) == num_edges


def cat_dim(key: str) -> int:
    return -1 if "index" in key else 0


def check_range(ei: np.ndarray, n_src: int | None, n_dst: int | None, et: Any) -> None:
    """``IndexError`` when ``edge_index`` points outside its node types."""
    if not ei.size:
        return
    for row, n in ((0, n_src), (1, n_dst)):
        if n is None:
            continue
        lo, hi = int(ei[row].min()), int(ei[row].max())
        if lo < 0 or hi >= n:
            raise IndexError(f"edge_index of {et!r}: row {row} holds index "
                             f"{lo if lo < 0 else hi}, outside the {n} nodes of its type")
