"""The Backend interface.

A backend computes on *primitives* (its own array objects) and is split by op
family, one mixin per family (``elementwise.py``, ``activation.py``,
``reduction.py``, ``linalg.py``, ``shape.py``, ``index.py``, ``loss.py``,
``segment.py``, ``message.py``, ``gatv2.py``, ``grouped.py``).  Only the
*core* below is abstract: moving data between the backend and the host
(``from_numpy`` / ``to_numpy``) and describing a primitive (``shape`` /
``dtype``).  Every other op has a default body, written against other ops or
as a host round-trip through numpy, so a backend that implements only the
core is complete and correct; a fast backend overrides what it does better.
See ``docs/backends.md``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from ._family import Family, bind_host_bodies, families_of, query
from .activation import ActivationOps
from .elementwise import ElementwiseOps
from .gatv2 import Gatv2Ops
from .grouped import GroupedOps
from .index import IndexOps
from .linalg import LinalgOps
from .loss import LossOps
from .message import MessageOps
from .optim import OptimOps
from .reduction import ReductionOps
from .segment import SegmentOps
from .shape import ShapeOps

Prim = Any


class CreationOps(Family):
    """Creation and the one mutating op."""

    FAMILY = "creation"

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Prim:
        return self.from_numpy(np.empty(shape, dtype))  # type: ignore[attr-defined]

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> Prim:
        return self.from_numpy(np.zeros(shape, dtype))  # type: ignore[attr-defined]

    def full(self, shape: tuple[int, ...], value: Any, dtype: np.dtype) -> Prim:
        return self.from_numpy(np.full(shape, value, dtype))  # type: ignore[attr-defined]

    def inplace(self, op: str, dst: Prim, src: Any) -> Prim:
        """``dst op= src`` for op in add/sub/mul/div/copy/fill.

        Returns the primitive that now holds the result.  The default computes
        a new primitive (the caller rebinds to it); backends with mutable
        buffers override this to write into ``dst``.
        """
        B: Any = self
        shape, dt = tuple(B.shape(dst)), np.dtype(B.dtype(dst))
        if op == "fill":
            return B.full(shape, src, dt)
        if op == "copy":
            new = B.broadcast_to(src, shape) if B.is_prim(src) else B.full(shape, src, dt)
        else:
            new = getattr(B, op)(dst, src)
        if tuple(B.shape(new)) != shape:
            raise ValueError(f"in-place {op}: result shape {tuple(B.shape(new))} != {shape}")
        return new if np.dtype(B.dtype(new)) == dt else B.cast(new, dt)


_MIXINS = (ElementwiseOps, ActivationOps, ReductionOps, LinalgOps, ShapeOps, IndexOps, LossOps,
           SegmentOps, MessageOps, Gatv2Ops, GroupedOps, OptimOps, CreationOps)


class Backend(ElementwiseOps, ActivationOps, ReductionOps, LinalgOps, ShapeOps, IndexOps,
              LossOps, SegmentOps, MessageOps, Gatv2Ops, GroupedOps, OptimOps, CreationOps,
              ABC):
    """Abstract backend.  Subclasses implement the four core methods.

    ``FAMILIES`` maps each op family to its op names (each family mixin's
    ``OPS``, derived from its methods: ``_family.py``); ``OPS`` is all of them.
    A subclass that mixes in a family of its own gets it in its ``FAMILIES``
    too.  A decorator backend (one that wraps an ``inner`` backend) forwards
    whole families by name instead of listing their methods.
    """

    name: str = "backend"
    FAMILIES: ClassVar[dict[str, tuple[str, ...]]]
    OPS: ClassVar[tuple[str, ...]]
    #: Whether the tape tells this backend which of its primitives a node saves for
    #: its backward (``mark_saved``).  A lazy backend (``Fusion``) uses it to
    #: recompute a pending value that only the tape holds instead of storing it.
    MARKS_SAVED: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.FAMILIES = families_of(cls)
        cls.OPS = tuple(n for names in cls.FAMILIES.values() for n in names)
        if cls.HOST_ARRAYS:
            bind_host_bodies(cls)

    # ----------------------------------------------------------------- core
    @abstractmethod
    def from_numpy(self, a: np.ndarray) -> Prim:
        """A primitive holding ``a``'s values (it may share ``a``'s memory)."""

    @abstractmethod
    def to_numpy(self, p: Prim) -> np.ndarray:
        """``p``'s values as a numpy array (a view where the backend can)."""

    @abstractmethod
    def shape(self, p: Prim) -> tuple[int, ...]:
        """``p``'s shape."""

    @abstractmethod
    def dtype(self, p: Prim) -> np.dtype:
        """``p``'s dtype (a numpy dtype)."""

    def adopt(self, p: Any, src: Backend) -> Prim:
        """``p``, a primitive of backend ``src``, as one of this backend (the same
        values, no copy where the data is shared).

        Two backends share data only when one decorates the other (``Fusion(inner)``'s
        lazy nodes hold ``inner``'s arrays): then ``src.lower(p)`` gives the inner
        primitive.  Any other pair raises ``TypeError``: their tensors cannot mix."""
        if src is self:
            return p
        if getattr(src, "inner", None) is self and hasattr(src, "lower"):
            return src.lower(p)
        raise TypeError(f"tensors live on different backends ({src.name} vs {self.name})")

    def mark_saved(self, p: Any, holder: Any) -> None:
        """The tape saved ``p`` (an op's input or output) for a backward rule, in
        ``holder`` (the node's saved state): ``p`` counts as saved while
        ``holder`` lives.  Called only when ``MARKS_SAVED``; the default does
        nothing."""

    # -------------------------------------------------------------- queries
    @query
    def aliases(self, view: Prim, base: Prim) -> bool:
        """Whether ``view`` (a reshape/permute/getitem result) shares ``base``'s
        buffer, so that an in-place write to one changes the other (default: no)."""
        return False

    @query
    def is_prim(self, p: Any) -> bool:
        """Whether ``p`` is one of this backend's primitives (default: not a scalar)."""
        return not isinstance(p, (int, float, bool, np.generic))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


Backend.FAMILIES = families_of(Backend)
Backend.OPS = tuple(n for names in Backend.FAMILIES.values() for n in names)
