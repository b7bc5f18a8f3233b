"""Elementwise fusion: ``Fusion(inner)`` records elementwise chains and runs
each as one fused, parallel Cython pass (see ``docs/fusion.md``).

>>> import rtx
>>> with rtx.fusion.enabled():
...     a, b = rtx.randn(1000, seed=0), rtx.randn(1000, seed=1)
...     y = (rtx.leaky_relu(a + b) * a - b).numpy()   # one pass, no temporaries

``RTX_FUSION=1`` in the environment at import makes ``Fusion(CpuBackend())``
the default backend.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Iterator

from .._backend_state import get_default_backend, set_default_backend, use_backend
from ..backend.base import Backend
from .backend import FUSABLE_OPS, Fusion, Lazy

__all__ = ["FUSABLE_OPS", "Fusion", "Lazy", "enabled", "env_enabled", "fusion_for"]

# id(inner) -> its Fusion, held weakly: a Fusion lives while something uses it (its
# tensors, the backend state); it holds ``inner``, so the id is not reused meanwhile.
_fusions: weakref.WeakValueDictionary[int, Fusion] = weakref.WeakValueDictionary()
_fusions_lock = threading.Lock()


def fusion_for(inner: Backend) -> Fusion:
    """The (unique) Fusion decorator over ``inner`` (``inner`` itself if it is one)."""
    if isinstance(inner, Fusion):
        return inner
    f = _fusions.get(id(inner))
    if f is None or f.inner is not inner:
        with _fusions_lock:  # check-then-insert: two threads must not make two
            f = _fusions.get(id(inner))
            if f is None or f.inner is not inner:
                f = Fusion(inner)
                _fusions[id(inner)] = f
    return f


@contextlib.contextmanager
def enabled(inner: Backend | None = None) -> Iterator[Fusion]:
    """Create new tensors on the fused stack inside the block (this thread).

    ``inner``: the backend to fuse over (default: the current default backend).
    Tensors created outside the block live on another backend and cannot be
    mixed with the ones created inside.
    """
    f = fusion_for(inner if inner is not None else get_default_backend())
    with use_backend(f):
        yield f


def env_enabled() -> bool:
    """Whether ``RTX_FUSION`` asks for fusion by default (``1``/``on``/``true``/``yes``)."""
    return os.environ.get("RTX_FUSION", "0").strip().lower() in ("1", "on", "true", "yes")


def _fusion_from_env() -> None:
    """``RTX_FUSION=1``: the fused CPU stack is the default (docs/fusion.md).  Runs
    when ``import rtx`` imports this package (the backend state below knows nothing
    of fusion: imports run one way)."""
    if env_enabled():
        set_default_backend(fusion_for(get_default_backend()))


_fusion_from_env()
