"""Which backend new tensors are created on."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator

from ._autodiff.autodiff import Autodiff
from .backend import Backend, CpuBackend

# id(backend) -> its Autodiff, held WEAKLY: the Autodiff holds the backend, so a
# strong map kept every backend ever used alive (about 3.5 KB per
# ``with rtx.use_backend(Fusion(CpuBackend())):``).  Whatever uses an Autodiff
# (a tensor, the thread's or the process's default) holds it; once nothing does,
# its entry goes, and the next use of the backend gets a new one (no tensor can
# tell: none holds the old one).  ``ad.inner is backend`` guards against a
# recycled id.
_autodiffs: weakref.WeakValueDictionary[int, Autodiff] = weakref.WeakValueDictionary()
_local = threading.local()
_CPU = CpuBackend()


_lock = threading.Lock()


def autodiff_for(backend: Backend) -> Autodiff:
    """The (unique) Autodiff decorator wrapping ``backend``."""
    ad = _autodiffs.get(id(backend))
    if ad is None or ad.inner is not backend:
        with _lock:  # check-then-insert: two threads must not make two decorators
            ad = _autodiffs.get(id(backend))
            if ad is None or ad.inner is not backend:
                ad = Autodiff(backend)
                _autodiffs[id(backend)] = ad
    return ad


def autodiff_of_class(cls: type) -> Autodiff:
    """For unpickling: the Autodiff of a backend of class ``cls`` -- this thread's
    default if it is one, the CPU backend for CpuBackend, else the most recently
    registered instance (a new instance if there is none)."""
    cur = default_autodiff()
    if type(cur.inner) is cls:
        return cur
    if cls is CpuBackend:
        return _DEFAULT
    with _lock:
        found = [ad for ad in _autodiffs.values() if type(ad.inner) is cls]
    return found[-1] if found else autodiff_for(cls())


_DEFAULT = autodiff_for(_CPU)
_global_default = _DEFAULT


def default_autodiff() -> Autodiff:
    return getattr(_local, "ad", None) or _global_default


def get_default_backend() -> Backend:
    """The backend that new tensors are created on (CpuBackend unless changed)."""
    return default_autodiff().inner


def set_default_backend(backend: Backend | None) -> None:
    """Set the process-wide default backend (``None``: the CPU backend)."""
    global _global_default
    _global_default = autodiff_for(backend) if backend is not None else _DEFAULT


@contextlib.contextmanager
def use_backend(backend: Backend) -> Iterator[Backend]:
    """Create tensors on ``backend`` inside the block (this thread only)."""
    if not isinstance(backend, Backend):
        raise TypeError(f"use_backend expects a Backend, got {type(backend).__name__}")
    prev = getattr(_local, "ad", None)
    _local.ad = autodiff_for(backend)
    try:
        yield backend
    finally:
        _local.ad = prev


# In-place writes and deferred reads.  A backend decorator that defers work (a
# Fusion's pending expressions) reads its inner backend's buffers later; before
# rtx writes a tensor's buffer in place (the Tensor's in-place ops, the
# optimisers, MPI receives), ``before_write(backend)`` runs every registered
# hook, and a Fusion over that backend finishes its pending work.  A write through
# a numpy view of a tensor bypasses this, as it bypasses version counters.
write_hooks: list[Callable[[Backend], None]] = []


def register_write_hook(fn: Callable[[Backend], None]) -> None:
    """Call ``fn(backend)`` before every in-place write rtx makes to a buffer of ``backend``."""
    write_hooks.append(fn)


def before_write(backend: Backend) -> None:
    """Run the write hooks for a buffer of ``backend`` about to be written in place."""
    for fn in write_hooks:
        fn(backend)
