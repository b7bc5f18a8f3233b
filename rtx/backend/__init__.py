"""Backends: the interface (``Backend``) and the CPU implementation."""

from .base import Backend
from .cpu import CpuBackend
from .reference import MinimalBackend

__all__ = ["Backend", "CpuBackend", "MinimalBackend"]
