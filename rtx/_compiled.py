"""The pure-Python modules of the per-op path that rtx also ships compiled.

Each op on a small tensor runs a few Python functions: the face, ``Autodiff.apply``,
the op's rule, the backend method, then the backward engine and the rule's
backward.  On 16x16 operands that interpretation is most of the op's time (the
kernel is about a microsecond), so setup.py also compiles the modules below with
Cython, as mypy and black ship mypyc-compiled copies of their own modules: the
``.py`` file stays the one source, Cython translates it unchanged (no ``cdef``,
annotations not used as C types), and Python imports the extension module that
sits beside it.  The same tests pass either way; ``tests/project/test_compiled.py``
runs a forward and backward both ways and compares the bits.

``RTX_PURE_PYTHON=1`` in the environment, before ``import rtx``, loads the ``.py``
files instead (for a debugger, coverage, or the mutation pass of
``tools/mutation_pass.py``, which edits them).  setup.py skips compiling them when
``RTX_COMPILE_PY=0`` is set at build time.

The build records the SHA-256 of each source it compiled in ``rtx/_compiled.json``;
``stale()`` names the modules whose ``.py`` changed since (an edit without a
rebuild would otherwise run the old compiled code).  This module imports only the
standard library: setup.py reads ``MODULES`` from it before rtx is built.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

# (``import rtx`` runs this module first: what only the pure mode or the checks below
# use -- importlib.util, hashlib, json -- is imported where they run, not here)

MODULES: tuple[str, ...] = (
    "rtx._autodiff.autodiff",
    "rtx._autodiff.backward",
    "rtx._autodiff.grad_mode",
    "rtx._autodiff.graph",
    "rtx._autodiff.ops.activation",
    "rtx._autodiff.ops.base",
    "rtx._autodiff.ops.elementwise",
    "rtx._autodiff.ops.linalg",
    "rtx._autodiff.ops.reduction",
    "rtx._autodiff.sparse",
    "rtx._threads",
    "rtx.backend.cpu._alloc",
    "rtx.backend.cpu.activation",
    "rtx.backend.cpu.backend",
    "rtx.backend.cpu.elementwise",
    "rtx.backend.cpu.linalg",
    "rtx.backend.cpu.reduction",
    "rtx.backend.cpu.shape",
    "rtx.tensor",
)

ENV = "RTX_PURE_PYTHON"
MANIFEST = "_compiled.json"
_HERE = os.path.dirname(os.path.abspath(__file__))


def source_path(name: str, root: str | None = None) -> str:
    """The ``.py`` file of module ``name`` (``rtx.x.y``) under ``root`` (the directory
    holding the ``rtx`` package; this one's by default)."""
    root = os.path.dirname(_HERE) if root is None else root
    return os.path.join(root, *name.split(".")) + ".py"


def pure_requested() -> bool:
    """Whether ``RTX_PURE_PYTHON`` asks for the ``.py`` files (set, not empty or 0)."""
    return os.environ.get(ENV, "").strip() not in ("", "0")


class _SourceFinder:
    """A meta path finder (``find_spec`` is the whole protocol) of the modules of
    ``MODULES`` as their ``.py`` files, ahead of the path finder, which prefers an
    extension module beside them."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        import importlib.util

        last = fullname.rpartition(".")[2]
        for d in path or ():
            f = os.path.join(d, last + ".py")
            if os.path.isfile(f):
                return importlib.util.spec_from_file_location(fullname, f)
        return None


_FINDER = _SourceFinder()


def install() -> None:
    """Called first by ``rtx/_loader.py`` (so first at ``import rtx``): puts the
    source finder in front when ``RTX_PURE_PYTHON`` is set (nothing otherwise)."""
    if pure_requested() and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def _is_extension(path: str | None) -> bool:
    return path is not None and path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def loaded() -> dict[str, str]:
    """Each imported module of ``MODULES``: ``"compiled"`` or ``"pure"``."""
    out = {}
    for name in MODULES:
        mod = sys.modules.get(name)
        if mod is not None:
            out[name] = "compiled" if _is_extension(getattr(mod, "__file__", None)) else "pure"
    return out


def sha256(path: str) -> str:
    import hashlib

    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def manifest() -> dict[str, str] | None:
    """``{module: SHA-256 of the .py it was compiled from}`` as the build wrote it, or
    None when this rtx was built without compiled modules."""
    import json

    try:
        with open(os.path.join(_HERE, MANIFEST)) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def stale() -> list[str]:
    """The compiled modules in use whose ``.py`` is not the source they were built
    from (rebuild: ``pip install -e .`` or ``python setup.py build_ext --inplace``)."""
    built = manifest() or {}
    return [name for name, how in loaded().items()
            if how == "compiled" and built.get(name) != sha256(source_path(name))]
