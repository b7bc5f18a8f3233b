"""Op families: the one registry of backend op names.

A family is a mixin of ``Backend`` (``elementwise.py``, ``activation.py``, ...)
that sets ``FAMILY``; its ops are its public methods, so its ``OPS`` tuple is
derived from them when the class is created (in definition order), never kept
by hand.  Methods that answer a question about a primitive (``is_contiguous``,
``can_view``, ...) are marked :func:`query` and are not ops.  A default body
written as a composition of elementwise ops is marked :func:`composed`, so a
decorator backend that records those ops (Fusion) may run the default body
instead of forwarding.  ``Backend.FAMILIES`` / ``Backend.OPS`` are collected
from the families in a backend class's MRO (``families_of``)."""

from __future__ import annotations

import inspect
from typing import Any, ClassVar, TypeVar

from ._host import HostRoundTrip

F = TypeVar("F")


def query(fn: F) -> F:
    """Mark a family method as a query (not an op: nothing to record or forward
    as a computation; answered by the backend holding the primitive)."""
    fn._rtx_query = True  # type: ignore[attr-defined]
    return fn


def composed(fn: F) -> F:
    """Mark a default body written with other (elementwise) ops only."""
    fn._rtx_composed = True  # type: ignore[attr-defined]
    return fn


def is_query(fn: Any) -> bool:
    return bool(getattr(fn, "_rtx_query", False))


def is_composed(fn: Any) -> bool:
    return bool(getattr(fn, "_rtx_composed", False))


def family_ops(cls: type) -> tuple[str, ...]:
    """The ops a family class defines itself: its public, non-query methods."""
    return tuple(n for n, v in vars(cls).items()
                 if inspect.isfunction(v) and not n.startswith("_") and not is_query(v))


class Family(HostRoundTrip):
    """Base of an op family mixin (set ``FAMILY``; ``OPS`` is derived)."""

    FAMILY: ClassVar[str]
    OPS: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "FAMILY" in vars(cls):
            cls.OPS = family_ops(cls)


def families_of(cls: type) -> dict[str, tuple[str, ...]]:
    """``{family: ops}`` of the family mixins in ``cls``'s MRO, in MRO order."""
    out: dict[str, tuple[str, ...]] = {}
    for k in cls.__mro__:
        if k is not Family and issubclass(k, Family) and "FAMILY" in vars(k):
            out.setdefault(k.FAMILY, k.OPS)
    return out
