"""Backends by name: a registry that any backend (built in or not) can join.

``register_backend("fusion", lambda: Fusion(CpuBackend()))`` makes a backend
known by name; ``create_backend(name)`` builds a fresh instance.  The test suite
selects its backends by these names (``RTX_TEST_BACKENDS``, see
``docs/backends.md``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from .base import Backend

_FACTORIES: dict[str, Callable[[], Backend]] = {}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make ``factory()`` (a new Backend) available as ``name``."""
    if not isinstance(name, str) or not name or any(c in name for c in ",: "):
        raise ValueError(f"backend name must be a non-empty word, got {name!r}")
    if not callable(factory):
        raise TypeError(f"register_backend({name!r}): factory must be callable")
    old = _FACTORIES.get(name)
    if old is not None and old is not factory and _qualname(old) != _qualname(factory):
        # (the same function again, e.g. from a module imported twice, replaces it)
        raise ValueError(f"a backend named {name!r} is already registered")
    _FACTORIES[name] = factory


def _qualname(f: Callable[[], Backend]) -> tuple[str, str]:
    """Where ``f`` is defined: the same function of a module imported twice (under two
    names) has the same source file and qualified name."""
    code = getattr(f, "__code__", None)
    where = code.co_filename if code is not None else getattr(f, "__module__", "")
    return (where, getattr(f, "__qualname__", repr(f)))


def registered_backends() -> list[str]:
    """The names of the registered backends, in registration order."""
    return list(_FACTORIES)


def create_backend(name: str) -> Backend:
    """A new instance of the backend registered as ``name``.

    ``"package.module:name"`` imports ``package.module`` first (where it
    registers itself), so a backend outside rtx can be named too.
    """
    module, sep, short = name.rpartition(":")
    if sep:
        importlib.import_module(module)
        name = short
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise KeyError(f"no backend registered as {name!r}; registered: "
                       f"{', '.join(_FACTORIES) or 'none'}") from None
    backend = factory()
    if not isinstance(backend, Backend):
        raise TypeError(f"backend factory {name!r} returned {type(backend).__name__}, "
                        "not a Backend")
    return backend
