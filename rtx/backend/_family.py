"""Op families: the one registry of backend op names.

A family is a mixin of ``Backend`` (``elementwise.py``, ``activation.py``, ...)
that sets ``FAMILY``; its ops are its public methods, so its ``OPS`` tuple is
derived from them when the class is created (in definition order), never kept
by hand.  Methods that answer a question about a primitive (``is_contiguous``,
``can_view``, ...) are marked :func:`query` and are not ops.  A default body
written as a composition of elementwise ops is marked :func:`composed`, so a
decorator backend that records those ops (Fusion) may run the default body
instead of forwarding.  A body written over host numpy arrays that runs rtx's
own kernels (the graph families) is marked :func:`host_body`: it is the one
body of its op, run as is by a backend whose primitives are numpy arrays
(``HOST_ARRAYS``: the CPU backend) and through a host round-trip by any other.
``Backend.FAMILIES`` / ``Backend.OPS`` are collected from the families in a
backend class's MRO (``families_of``)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import numpy as np

from .._dtypes import contiguous
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


def host_body(*arrays: str) -> Callable[[F], F]:
    """Mark a family method as a body over host numpy arrays; ``arrays`` names its
    array parameters (primitives; ``None`` allowed).

    A backend with ``HOST_ARRAYS = True`` (its primitives are numpy arrays) gets
    the body itself as the method (``bind_host_bodies``: no wrapper call); any
    other backend gets the host round-trip: the named arguments as host arrays
    (``to_numpy``), the body run, its array results (alone or in a tuple, with
    ``None`` kept) back as primitives (``from_numpy``).  Outputs the body
    allocates come from ``self._host_empty`` (the CPU backend's caching
    allocator; numpy elsewhere)."""

    def mark(fn: Any) -> Any:
        sig = inspect.signature(fn)
        params = list(sig.parameters)
        missing = [a for a in arrays if a not in params]
        if missing:
            raise TypeError(f"host_body: {fn.__name__} has no parameter {missing[0]!r}")
        pos = tuple(params.index(a) - 1 for a in arrays)  # in ``args`` (after self)

        @functools.wraps(fn)
        def round_trip(self: Any, *args: Any, **kwargs: Any) -> Any:
            args_l = list(args)
            for i in pos:
                if i < len(args_l) and args_l[i] is not None:
                    args_l[i] = self.to_numpy(args_l[i])
            for name in arrays:
                if kwargs.get(name) is not None:
                    kwargs[name] = self.to_numpy(kwargs[name])
            res = fn(self, *args_l, **kwargs)
            if isinstance(res, tuple):
                return tuple(_to_prim(self, r) for r in res)
            return _to_prim(self, res)

        round_trip._rtx_host_body = fn  # type: ignore[attr-defined]
        return round_trip

    return mark


def _to_prim(B: Any, r: Any) -> Any:
    return B.from_numpy(contiguous(r)) if isinstance(r, np.ndarray) else r


def host_body_of(fn: Any) -> Any:
    """The body a :func:`host_body` method wraps (None for any other method)."""
    return getattr(fn, "_rtx_host_body", None)


def bind_host_bodies(cls: type) -> None:
    """For a backend class whose primitives are numpy arrays: every op it
    inherits as a :func:`host_body` round-trip becomes the body itself."""
    for name in getattr(cls, "OPS", ()):
        body = host_body_of(getattr(cls, name, None))
        if body is not None:
            setattr(cls, name, body)


def is_query(fn: Any) -> bool:
    return bool(getattr(fn, "_rtx_query", False))


def is_composed(fn: Any) -> bool:
    return bool(getattr(fn, "_rtx_composed", False))


def is_def(v: Any) -> bool:
    """Whether ``v`` (a class ``__dict__`` value) is a function defined there: a Python
    function or the one Cython compiles it into (the modules of rtx/_compiled.py), for
    which ``inspect.isfunction`` is False."""
    return inspect.isfunction(v) or type(v).__name__ == "cython_function_or_method"


def family_ops(cls: type) -> tuple[str, ...]:
    """The ops a family class defines itself: its public, non-query methods."""
    return tuple(n for n, v in vars(cls).items()
                 if is_def(v) and not n.startswith("_") and not is_query(v))


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
