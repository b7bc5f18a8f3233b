"""The op rules (forward + backward), one module per family, as in ``rtx/backend/``.

Importing this package registers every rule in ``OPS`` (name -> rule class).
A family module imports only ``base`` (never ``Tensor``).
"""

from . import activation, elementwise, index, linalg, loss, reduction, shape  # noqa: F401  (registers the rules)
from .base import OPS, Op, unbroadcast

__all__ = ["OPS", "Op", "unbroadcast"]
