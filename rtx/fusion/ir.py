"""Fusion's IR: the lazy primitive (:class:`Lazy`), which ops are recorded, and
the dtype rule of a recorded node.

Which ops are recorded comes from the fused evaluator's own table,
``rtx._kernels.FUSED_OPS`` (name -> opcode, arity, immediate, predicate): every
one that is also a ``Backend`` op of the same name.  A predicate's node holds a
bool; an op with an immediate takes one scalar parameter (the slope of
leaky_relu, the alpha of elu), whose name is the Backend method's own.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from .._dtypes import FLOAT_DTYPES, bool_, float32
from .._kernels import FUSED_OPS, FusedOp
from ..backend.base import Backend

_F32 = float32
_BOOL = bool_
_FLOATS = FLOAT_DTYPES
_PY_SCALARS = (int, float, bool)

# Largest pending DAG one program covers: a longer chain is cut (its largest
# operand materialised) when recorded, which bounds program length and registers.
MAX_NODES = 256

# The evaluator's ops that are Backend ops of the same name (all of them: the
# kernel's op names are the backend's).  Fusion records each by that name;
# "copy" also backs Fusion's broadcast_to (a stride-0 read of its operand).
KERNEL_OPS: dict[str, FusedOp] = {n: s for n, s in FUSED_OPS.items() if n in Backend.OPS}
PREDICATES = frozenset(n for n, s in KERNEL_OPS.items() if s.predicate)
# A pending whole-tensor sum or mean of a pending float expression (0-d, its one
# operand that expression): computed by a pass over its operand's DAG, never an
# op of a program (``Fusion.sum``).
TOTAL_OPS = frozenset(("sum", "mean"))

_SEQ = itertools.count()


class Lazy:
    """A Fusion primitive: a leaf holding an inner primitive (``value``), a
    pending elementwise op over other ``Lazy`` nodes and Python scalars, or a
    pending total (``TOTAL_OPS``) of one pending node."""

    __slots__ = ("shape", "dtype", "ctype", "op", "args", "imm", "value", "size", "seq",
                 "savers", "__weakref__")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, ctype: Any, op: Any,
                 args: Any, imm: Any, value: Any, size: int = 0) -> None:
        self.shape = shape
        self.dtype = dtype
        self.ctype = ctype      # the float dtype a pending node computes in
        self.op = op
        self.args = args
        self.imm = imm
        self.value = value
        self.size = size        # pending nodes under this one (an upper bound)
        self.seq = next(_SEQ)   # creation order: flush() plans in a deterministic order
        self.savers: list[Any] | None = None   # weakrefs to the tape's holders of it

    @property
    def saved(self) -> int:
        """How many of the tape's references hold it now (``Fusion.mark_saved``:
        one per mark whose holder, a node's saved state, is not yet released)."""
        s = self.savers
        return 0 if s is None else sum(1 for r in s if r() is not None)

    @property
    def pending(self) -> bool:
        return self.value is None

    def __repr__(self) -> str:
        state = f"pending {self.op}" if self.value is None else "materialised"
        return f"<Lazy {state} shape={self.shape} dtype={self.dtype}>"


class _Sentinel(Lazy):
    """Held like a DAG's nodes to measure the materialiser's own references
    (see ``compile.stored``)."""


def leaf(value: Any, shape: tuple[int, ...], dtype: np.dtype) -> Lazy:
    return Lazy(shape, dtype, None, None, None, None, value)


def result_dtype(args: tuple[Any, ...]) -> Any:
    """The common float dtype of the array args, or None when not fusable:
    every array arg is the same float dtype and every scalar a Python number."""
    dt = None
    for a in args:
        if type(a) is Lazy:
            if a.dtype not in _FLOATS:
                return None
            if dt is None:
                dt = a.dtype
            elif a.dtype != dt:
                return None
        elif type(a) not in _PY_SCALARS:
            return None
    return dt


def tops(pending: Any) -> list[Lazy]:
    """Live pending nodes that no other pending node reads."""
    # sorted by creation: a WeakSet iterates in address order, which would give
    # the same expression a different program (a cache miss) from run to run
    live = sorted((n for n in list(pending) if n.value is None), key=lambda n: n.seq)
    inner = set()
    for n in live:
        for a in n.args:
            if type(a) is Lazy:
                inner.add(id(a))
    return [n for n in live if id(n) not in inner]
