"""Backends: the interface (``Backend``), the CPU implementation and the registry."""

from .base import Backend
from .cpu import CpuBackend
from .reference import MinimalBackend
from .registry import create_backend, register_backend, registered_backends

register_backend("cpu", CpuBackend)
register_backend("minimal", MinimalBackend)

__all__ = ["Backend", "CpuBackend", "MinimalBackend", "create_backend", "register_backend",
           "registered_backends"]
