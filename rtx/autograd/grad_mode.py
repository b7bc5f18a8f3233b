"""Grad mode lives in the engine (``rtx._autodiff.grad_mode``); the public names
stay importable here."""

from .._autodiff.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled

__all__ = ["enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled"]
