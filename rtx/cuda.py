"""``rtx.cuda``: what a PyTorch script asks before picking its device.

rtx runs on CPUs only, so ``device = rtx.device("cuda" if rtx.cuda.is_available()
else "cpu")`` picks the CPU.  Imports no rtx module (lowest layer).
"""

from __future__ import annotations


def is_available() -> bool:
    """``False``: rtx has no CUDA (as ``torch.cuda.is_available()`` on a CPU build)."""
    return False


def device_count() -> int:
    """``0``: no CUDA devices."""
    return 0


__all__ = ["device_count", "is_available"]
