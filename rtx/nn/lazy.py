"""Lazy sizes: parameters whose shape is known only at the first forward.

PyTorch Geometric lets every layer take ``-1`` for an input size
(``Linear(-1, 64)``, ``SAGEConv((-1, -1), 64)``): the weight is created when the
first input arrives.  rtx does the same with an ``UninitializedParameter``: a
placeholder ``Parameter`` that a module registers like any other and that
``materialize(shape)`` turns, **in place**, into an ordinary ``Parameter`` of
that shape (the same Python object: its class changes, as in PyTorch).

What follows from "the same object":

- ``model.parameters()`` before the first forward lists the placeholders;
  an optimiser built from them holds the objects that become the real
  parameters, so ``opt = Adam(model.parameters())`` works before or after the
  dry run (rtx's optimisers create their state at the first ``step``).
  PyTorch documents a dry run first; rtx does not need one, and the PyG
  pattern (``with rtx.no_grad(): model(x_dict, edge_index_dict)`` then the
  optimiser) works too.
- Reading a placeholder's values or shape (``.shape``, ``.numpy()``, and so
  the ops that read the shape: matmul, ``.T``, reductions) raises
  ``RuntimeError`` naming the fix; an elementwise op sees the empty ``[0]``
  buffer behind it (a broadcast error, or an empty result).  ``state_dict()``
  of a module that still has one raises ``RuntimeError`` naming the key (an
  array cannot stand for "not yet sized").
- ``load_state_dict`` into a lazy module materialises each placeholder with
  the checkpoint's shape (PyG's ``Linear._load_from_state_dict``), after every
  key has been checked against the placeholder's template (``[out, -1]`` for
  a ``Linear`` weight: any width, the right number of rows).

A module adopts the mechanism by registering ``UninitializedParameter(template)``
where a size is unknown and calling ``materialize`` (then its own
initialisation) when the first input arrives; ``Linear`` does this for
``in_features=-1``, and layers built on ``Linear`` get it by calling
``lin.materialize(width)`` (or just ``lin(x)``) before reading ``lin.weight``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._dtypes import check_dtype
from ..creation import empty
from ..tensor import Tensor
from .parameter import Parameter

__all__ = ["UninitializedParameter", "check_lazy_channels", "check_lazy_in_channels",
           "has_uninitialized_params", "is_lazy"]

_HELP = ("run one forward pass first (e.g. `with rtx.no_grad(): model(x)`) or "
         "load_state_dict, which sizes it")


class UninitializedParameter(Parameter):
    """A ``Parameter`` whose shape is not known yet (PyTorch's name).

    ``template`` is the expected shape with ``-1`` for every unknown size
    (``(out_features, -1)`` for a lazy ``Linear`` weight); it is what
    ``load_state_dict`` checks a checkpoint's array against.  ``dtype`` is the
    dtype the parameter will have (``Module.to`` changes it, as for any
    parameter).  ``materialize(shape)`` allocates the values (uninitialised:
    the owning module initialises them) and turns this object into a plain
    ``Parameter``.
    """

    __slots__ = ()

    def __new__(cls, template: Sequence[int] = (-1,), requires_grad: bool = True,
                dtype: Any = None) -> UninitializedParameter:
        p = super().__new__(cls, empty(0, dtype=dtype), requires_grad)
        _TEMPLATES[id(p)] = _check_template(template)
        return p  # type: ignore[return-value]

    def __init__(self, template: Sequence[int] = (-1,), requires_grad: bool = True,
                 dtype: Any = None) -> None:
        pass

    def __del__(self) -> None:
        _TEMPLATES.pop(id(self), None)

    @property
    def template(self) -> tuple[int, ...]:
        """The expected shape, ``-1`` where unknown."""
        return _TEMPLATES.get(id(self), (-1,))

    def shape_error(self, shape: Sequence[int]) -> str | None:
        """Why ``shape`` cannot be this parameter's shape (``None`` if it can)."""
        t = self.template
        s = tuple(int(d) for d in shape)
        if len(s) != len(t) or any(d < 0 or (k >= 0 and d != k) for d, k in zip(s, t, strict=True)):
            want = "[" + ", ".join("*" if k < 0 else str(k) for k in t) + "]"
            return f"expected a shape {want} (* = any size), got {list(s)}"
        return None

    def materialize(self, shape: Sequence[int], dtype: Any = None) -> None:
        """Allocate ``shape`` (checked against the template) in place: this object
        becomes a plain ``Parameter`` (values uninitialised)."""
        err = self.shape_error(shape)
        if err is not None:
            raise ValueError(f"UninitializedParameter.materialize(): {err}")
        dt = self.dtype if dtype is None else check_dtype(dtype)
        B = self._ad.inner
        self._value = B.empty(tuple(int(d) for d in shape), dt)
        self._vc = None  # a new buffer: a fresh version counter
        _TEMPLATES.pop(id(self), None)
        object.__setattr__(self, "__class__", Parameter)

    # ------------------------------------------------- no values to read yet
    @property
    def shape(self) -> tuple[int, ...]:
        raise RuntimeError(f"can't access the shape of an uninitialized (lazy) parameter: "
                           f"{_HELP}")

    def numpy(self) -> np.ndarray:
        raise RuntimeError(f"can't read the values of an uninitialized (lazy) parameter: "
                           f"{_HELP}")

    def __repr__(self) -> str:
        return "<UninitializedParameter>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_rebuild_uninitialized, (self.template, self._rg, self.dtype.str))

    def __deepcopy__(self, memo: dict[int, Any]) -> UninitializedParameter:
        p = UninitializedParameter(self.template, self._rg, self.dtype)
        memo[id(self)] = p
        return p


# Templates live beside the objects (a Parameter has no spare slot): keyed by
# id, dropped by __del__ or when the parameter is materialised.
_TEMPLATES: dict[int, tuple[int, ...]] = {}


def _check_template(template: Sequence[int]) -> tuple[int, ...]:
    try:
        t = tuple(int(d) for d in template)
    except (TypeError, ValueError):
        raise TypeError(f"UninitializedParameter: template must be a sequence of ints, "
                        f"got {template!r}") from None
    if any(d < -1 for d in t):
        raise ValueError(f"UninitializedParameter: template sizes must be >= 0 or -1, got {t}")
    return t


def _rebuild_uninitialized(template: tuple[int, ...], requires_grad: bool,
                           dtype: str) -> UninitializedParameter:
    return UninitializedParameter(template, requires_grad, np.dtype(dtype))


def is_lazy(p: Any) -> bool:
    """Whether ``p`` is a parameter still waiting for its shape."""
    return isinstance(p, UninitializedParameter)


def has_uninitialized_params(module: Any) -> bool:
    """Whether ``module`` (or any sub-module) still has a lazy parameter."""
    return any(is_lazy(p) for p in module.parameters())


def check_lazy_channels(v: Any, name: str, layer: str, minimum: int = 1) -> int:
    """An input size argument: an int ``>= minimum`` or ``-1`` (lazy, PyG's
    convention: sized by the first input)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or (v < minimum and v != -1):
        raise ValueError(f"{layer}: {name} must be an int >= {minimum} or -1 (lazy: sized by the "
                         f"first input), got {v!r}")
    return int(v)


def check_lazy_in_channels(v: Any, layer: str) -> tuple[int | tuple[int, int], int, int]:
    """A conv layer's ``in_channels``: an int or a ``(src, dst)`` pair, each ``>= 1``
    or ``-1`` (lazy).  Returns ``(as stored, src size, dst size)``."""
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{layer}: in_channels must be an int or a (src, dst) pair, "
                             f"got {v!r}")
        pair = (check_lazy_channels(v[0], "in_channels[0]", layer),
                check_lazy_channels(v[1], "in_channels[1]", layer))
        return pair, pair[0], pair[1]
    n = check_lazy_channels(v, "in_channels", layer)
    return n, n, n


def lazy_state_errors(targets: Any, state_dict: Any) -> tuple[list[str], set[str]]:
    """For ``Module.load_state_dict``: the size errors of checkpoint arrays meant
    for lazy parameters, and the keys that are lazy (checked here, so the
    regular shape check skips them).  A lazy parameter reached under two keys
    (a shared layer) must get one shape."""
    errors: list[str] = []
    lazy_keys: set[str] = set()
    seen: dict[int, tuple[str, tuple[int, ...]]] = {}
    for key, (_, _, t) in targets.items():
        if not is_lazy(t) or key not in state_dict:
            continue
        lazy_keys.add(key)
        v = state_dict[key]
        try:
            shape = tuple(np.shape(v.numpy() if isinstance(v, Tensor) else v))
        except Exception:  # noqa: BLE001 - the regular value check reports it
            lazy_keys.discard(key)
            continue
        err = t.shape_error(shape)
        if err is not None:
            errors.append(f"size mismatch for {key}: the uninitialized (lazy) parameter "
                          f"{err}.")
        elif id(t) in seen and seen[id(t)][1] != shape:
            errors.append(f"size mismatch for {key}: the same lazy parameter is also "
                          f"{seen[id(t)][0]} with shape {list(seen[id(t)][1])}, got "
                          f"{list(shape)}.")
        else:
            seen[id(t)] = (key, shape)
    return errors, lazy_keys
