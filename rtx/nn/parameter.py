"""``Parameter``: a leaf tensor that a ``Module`` registers as learnable."""

from __future__ import annotations

from typing import Any

from ..creation import empty
from ..tensor import Tensor, version_counter


class Parameter(Tensor):
    """A leaf ``Tensor`` with ``requires_grad=True`` (by default) that a ``Module``
    registers when it is assigned as an attribute.

    ``Parameter(data)`` shares ``data``'s values (no copy), like PyTorch.  A
    Parameter *is* a Tensor (a ``Tensor`` subclass with no extra slots), so it is
    accepted everywhere a tensor is; ops on it return plain tensors.  In-place
    updates (``p.sub_(...)`` under ``rtx.no_grad()``, as the optimisers do) rebind
    the tensor's own buffer, so the Parameter object — the one a module and an
    optimiser both hold — stays the same object.
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(
                f"Parameter(data): data must be an rtx.Tensor, got {type(data).__name__}"
            )
        if requires_grad and data.dtype.kind != "f":
            raise TypeError(
                f"Parameter: only floating point tensors can require gradients, got {data.dtype}"
            )
        p = cls._make(data._value, data._ad)
        p._vc = version_counter(data)  # an alias of data's buffer: one version counter
        p._rg = bool(requires_grad)
        return p  # type: ignore[return-value]

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass  # everything is done in __new__ (Tensor.__init__ refuses direct construction)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickles like a tensor and unpickles as a Parameter."""
        return (_rebuild_parameter, (super().__reduce_ex__(protocol),))


def _rebuild_parameter(reduced: Any) -> Parameter:
    fn, args = reduced[0], reduced[1]
    t = fn(*args)
    p = Parameter(t, requires_grad=t.requires_grad)
    p.grad = t.grad
    return p


__all__ = ["Parameter"]
