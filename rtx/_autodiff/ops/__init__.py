"""The op rules (forward + backward), one module per family, as in ``rtx/backend/``.

Importing this package imports every module in it, which registers each rule in
``OPS`` (name -> rule class): a new family is one new file here (``segment.py``,
``message.py``, ...).  A family module imports only ``.base`` (``Op``, helpers),
numpy and the standard library: never ``Tensor`` or anything above the engine.
"""

import importlib
import pkgutil

from .base import OPS, Op, unbroadcast

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _mod != "base":
        importlib.import_module(f"{__name__}.{_mod}")

__all__ = ["OPS", "Op", "unbroadcast"]
