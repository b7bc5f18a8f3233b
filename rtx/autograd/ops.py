"""The op rules live in ``rtx._autodiff.ops`` (one module per family); this name
stays importable: ``Op`` (the base of a rule), ``OPS`` (name -> rule), ``unbroadcast``."""

from .._autodiff.ops import OPS, Op, unbroadcast

__all__ = ["OPS", "Op", "unbroadcast"]
