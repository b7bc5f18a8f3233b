"""Differentiable ops: each forward sits next to its backward rule.

``forward(ctx, B, *inputs, **attrs)`` computes on the inner backend ``B``'s
primitives and may save state on ``ctx`` (primitives, shapes and attributes,
never ``Tensor`` s); ``backward(ctx, B, g)`` returns one gradient (or ``None``)
per positional input.  ``ctx.needs_input_grad[i]`` says whether input ``i``
needs a gradient, so a rule computes only what is used.  On the untracked path
``ctx`` is a sink that stores nothing: a forward must never read back what it
saved (write ``out = ctx.out = ...; return out``).

Gradients are reduced back to each input's shape (``unbroadcast``) explicitly,
never left to luck.  ``fresh_grads = True`` declares that a rule returns only
newly computed buffers (no alias of ``g`` or of each other); rules that pass
``g`` (or a view of it) through keep the default ``False`` and the engine
copies such a buffer before it becomes a leaf's ``.grad`` when ``g`` was
shared or went to several inputs; ``None`` (custom ``Function`` s) means
anything may be returned, even saved state, so the engine always copies.
"""

from __future__ import annotations

from typing import Any

import numpy as np

OPS: dict[str, type[Op]] = {}


_SCALARS = (int, float, bool, np.generic)


def _is_prim(x: Any) -> bool:
    return not isinstance(x, _SCALARS)


def unbroadcast(B: Any, g: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``g`` over the dims along which an input of ``shape`` was broadcast."""
    gshape = tuple(B.shape(g))
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    dims = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and gshape[i + lead] != 1
    )
    if dims:
        g = B.sum(g, dims, keepdim=True)
    return B.reshape(g, shape)


class Op:
    """Base of every recorded op.  ``name`` is the registry key."""

    name = "op"
    differentiable = True
    fresh_grads = False
    view = False  # True: the result may alias the first input's buffer (a view)
    # Which buffers the forward saves on ctx (input positions; -1 = the output), for
    # the version-counter check; None = find out by inspecting ctx (slower).
    # tests/test_version_counter.py checks each declaration against the inspection.
    saves: tuple[int, ...] | None = None

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.__dict__.get("name"):
            OPS[cls.name] = cls

    @staticmethod
    def forward(ctx: Any, B: Any, *args: Any, **attrs: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Any, B: Any, g: Any) -> tuple[Any, ...]:
        raise NotImplementedError
