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

from .._autodiff.autodiff import redirected
from .._autodiff.ops import OPS as _TAPE_OPS
from .._backend_state import (
    autodiff_for,
    get_default_backend,
    register_write_hook,
    set_default_backend,
    use_backend,
)
from ..backend.base import Backend
from .backend import FUSABLE_OPS, Fusion, Lazy

__all__ = ["FUSABLE_OPS", "Fusion", "Lazy", "enabled", "env_enabled", "fusion_for"]

# the tape's ops that enabled() moves onto the Fusion: those it records
_REDIRECTED = frozenset(n for n in _TAPE_OPS if n in FUSABLE_OPS)

# id(inner) -> the Fusion over it, held WEAKLY (the Fusion holds ``inner``: a
# strong map kept every inner backend ever fused alive).  The Fusion lives while
# anything uses it (its tensors, a default backend); after that the next
# ``fusion_for(inner)`` makes a new one (its program cache starts empty).
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
                f = _fusions[id(inner)] = Fusion(inner)
    return f


def _finish_before_write(backend: Backend) -> None:
    """A write hook (``rtx._backend_state.before_write``): before rtx writes a
    buffer of ``backend`` in place, the Fusion over it materialises its pending
    expressions, which may read that buffer (a parameter made before
    ``enabled()``, written by the optimiser's step).  A write to a Fusion's own
    tensor goes through ``Fusion.inplace``, which does the same."""
    f = _fusions.get(id(backend))
    if f is not None and f.inner is backend and len(f._pending):
        f.flush()


register_write_hook(_finish_before_write)


@contextlib.contextmanager
def enabled(inner: Backend | None = None) -> Iterator[Fusion]:
    """Fuse the elementwise ops of this thread inside the block.

    ``inner``: the backend to fuse over (default: the current default backend).
    Inside the block every elementwise op (``FUSABLE_OPS``) on a tensor of
    ``inner`` -- model parameters, inputs made before the block -- is recorded on
    ``Fusion(inner)`` like one on a tensor made inside it, and new tensors are made
    on the Fusion; other ops run where their operands live.  Results are materialised
    when something reads them and at the end of the block.  Tensors of the Fusion and
    of ``inner`` mix anywhere, inside the block or after it (``Backend.adopt``); the
    tape runs each op's backward rule on the backend its forward ran on, and every
    leaf gets its gradient on its own backend.
    """
    src = inner if inner is not None else get_default_backend()
    if isinstance(src, Fusion):
        src = src.inner
    f = fusion_for(src)
    try:
        with use_backend(f), redirected(autodiff_for(src), autodiff_for(f), _REDIRECTED):
            yield f
    finally:
        f.flush()


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
