"""``rtx.device``: PyTorch's device habit on a library that runs on CPUs only.

``rtx.device("cpu")`` (or ``"cpu:0"``, ``rtx.device("cpu", 0)``, a
``torch.device("cpu")``) is accepted wherever PyTorch takes ``device=``:
the creation functions, ``Tensor.to`` / ``Module.to``, ``HeteroData.to``.
Any other device (``"cuda"``, ``"mps"``, ``torch.device("cuda")``, a bare
CUDA ordinal ``0``) is a one-line ``RuntimeError`` saying so, raised before
anything is done.  This module imports no rtx module (lowest layer).
"""

from __future__ import annotations

import operator
from typing import Any

# PyTorch's device types (torch/csrc/Device.cpp): a string naming one of them is a
# device (``Tensor.to("cuda")``), anything else goes to the dtype parser
DEVICE_TYPES = frozenset((
    "cpu", "cuda", "mps", "xpu", "xla", "meta", "hip", "ipu", "hpu", "mtia", "lazy",
    "vulkan", "mkldnn", "opengl", "opencl", "ideep", "fpga", "maia", "ve", "ort",
    "privateuseone",
))


class DeviceError(RuntimeError, ValueError):
    """A device rtx does not have.  Both a RuntimeError (what PyTorch raises for an
    unavailable device) and a ValueError (an argument out of rtx's domain)."""


def unavailable(name: str) -> DeviceError:
    return DeviceError(f"rtx runs on CPUs only: device {name!r} is not available "
                        "(use 'cpu')")


class device:  # noqa: N801 - torch.device's name
    """A device: always the CPU (``type == "cpu"``; ``index`` None or 0).

    >>> rtx.device("cpu")
    device(type='cpu')
    >>> rtx.device("cpu:0")
    device(type='cpu', index=0)
    """

    __slots__ = ("_type", "_index")
    _type: str
    _index: int | None

    def __init__(self, type: Any, index: int | None = None) -> None:  # noqa: A002
        if isinstance(type, device):
            if index is not None:
                raise ValueError("rtx.device(): pass an index with a device type string, "
                                 f"not with {type!r}")
            t, i = type._type, type._index
        elif isinstance(type, str):
            t, i = _parse(type)
            if index is not None:
                if i is not None:
                    raise ValueError(f"rtx.device(): type {type!r} already names an index")
                i = _index(index, type)
        elif hasattr(type, "type") and hasattr(type, "index") and \
                builtins_type(type).__name__ == "device":  # a torch.device
            t, i = _parse(str(type))
        elif isinstance(type, int) and not isinstance(type, bool):
            # torch.device(0) is cuda:0
            raise unavailable(f"cuda:{type}")
        else:
            raise TypeError(f"rtx.device(): expected a device string such as 'cpu', got "
                            f"{builtins_type(type).__name__}")
        if t != "cpu":
            raise unavailable(t if i is None else f"{t}:{i}")
        if i not in (None, 0):
            raise DeviceError(f"rtx runs on one CPU device: 'cpu:{i}' does not exist "
                               "(use 'cpu' or 'cpu:0')")
        object.__setattr__(self, "_type", t)
        object.__setattr__(self, "_index", i)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("rtx.device is immutable")

    @property
    def type(self) -> str:
        return self._type

    @property
    def index(self) -> int | None:
        return self._index

    def __repr__(self) -> str:
        if self._index is None:
            return f"device(type={self._type!r})"
        return f"device(type={self._type!r}, index={self._index})"

    def __str__(self) -> str:
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __eq__(self, other: object) -> bool:
        # (a string is not equal to a device, as in PyTorch: compare str(d) == "cpu")
        if isinstance(other, device):
            return (self._type, self._index) == (other._type, other._index)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self._type, self._index))

    def __reduce__(self) -> tuple[Any, ...]:
        return (device, (self._type, self._index))


builtins_type = type  # ``type`` is shadowed by device.__init__'s parameter name


def _index(i: Any, where: str) -> int:
    try:
        v = operator.index(i)
    except TypeError:
        raise TypeError(f"rtx.device(): device index must be an int, got {i!r}") from None
    if v < 0:
        raise DeviceError(f"rtx.device(): device index must be non-negative, got {v} "
                           f"({where!r})")
    return v


def _parse(s: str) -> tuple[str, int | None]:
    t, sep, rest = s.strip().partition(":")
    if t not in DEVICE_TYPES:
        raise DeviceError(f"rtx.device(): unknown device type {s!r} (rtx runs on 'cpu')")
    if not sep:
        return t, None
    if not rest.isdigit():
        raise DeviceError(f"rtx.device(): invalid device string {s!r}")
    return t, int(rest)


CPU = device("cpu")


def is_device_like(x: Any) -> bool:
    """Whether ``x`` names a device (so ``Tensor.to(x)`` / ``Module.to(x)`` move, not cast):
    an ``rtx.device`` / ``torch.device``, or a string of a device type (``"cpu"``,
    ``"cuda:1"``)."""
    if isinstance(x, device):
        return True
    if isinstance(x, str):
        return x.strip().partition(":")[0] in DEVICE_TYPES
    return builtins_type(x).__name__ == "device" and hasattr(x, "type")


def check_device(d: Any) -> device:
    """``d`` (None, a string, an ``rtx.device``, a ``torch.device``) as the CPU device;
    any other device is a one-line RuntimeError (rtx runs on CPUs only)."""
    if d is None:
        return CPU
    return d if isinstance(d, device) else device(d)

