"""The declared ops' ``rtx.nn.functional`` faces (``"nn"`` in a declaration's
``faces``), generated in ``rtx/_faces.py``; ``rtx.nn.functional`` star-imports
them.  Type checkers read ``_faces.pyi`` beside this file (generated too)."""

from .._faces import NN_FUNCTIONAL

globals().update(NN_FUNCTIONAL)
__all__ = sorted(NN_FUNCTIONAL)
