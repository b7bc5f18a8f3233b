"""From a pending DAG to a program of the fused evaluator.

``collect`` walks the DAG under the roots of one pass (topological order),
``stored`` picks the nodes the pass must write out (something outside the DAG
holds them), ``lower_dag`` turns the walk into the compiler's node list, the
pass's inputs and constants and a structure key, and ``ProgramCache`` keeps
compiled programs by that key (ops, operand wiring, dtype, stored nodes: not
data, shapes or constants).  The register allocation itself is the one
compiler the CPU backend's fixed programs use too:
``rtx.backend._program.compile_program``.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from ..backend._program import MAX_REGS, Node, Program, compile_program
from .ir import _BOOL, _F32, Lazy, _Sentinel

__all__ = ["MAX_PASS_NODES", "MAX_REGS", "ProgramCache", "collect", "compile_program",
           "lower_dag", "stored"]

# A node uses at most 4 registers (its result and up to 3 operand slots: inputs,
# constants), so one pass over several roots (a flush) takes roots while the
# nodes under them stay within MAX_PASS_NODES; more roots get more passes.  One
# root's DAG is at most 2 * MAX_NODES + 1 nodes (``Fusion._record``): always
# within the register file.
MAX_PASS_NODES = MAX_REGS // 4 - 24
CACHE_SIZE = 1024


def collect(roots: list[Lazy], force: Callable[[Lazy], Any]
            ) -> tuple[list[Lazy], dict[int, int], list[int]]:
    """The pending DAG under ``roots`` in topological order (operands of another
    shape or dtype are materialised first by ``force``: their own pass), each
    node's position, and how often each is an operand inside the DAG."""
    shape, T = roots[0].shape, roots[0].ctype
    order: list[Lazy] = []
    index: dict[int, int] = {}
    expanded: set[int] = set()
    stack: list[tuple[Lazy, bool]] = [(n, False) for n in reversed(roots)]
    while stack:
        n, done = stack.pop()
        if done:
            if id(n) not in index:
                index[id(n)] = len(order)
                order.append(n)
            continue
        if id(n) in index or id(n) in expanded or n.value is not None:
            continue
        expanded.add(id(n))
        stack.append((n, True))
        for a in reversed(n.args):
            if type(a) is Lazy and a.value is None and id(a) not in index:
                if a.shape == shape and a.ctype == T and a.dtype in (T, _BOOL):
                    stack.append((a, False))
                else:
                    force(a)   # a broadcast (smaller) operand: its own pass
    uses = [0] * len(order)
    for n in order:
        for a in n.args:
            if type(a) is Lazy and a.value is None:
                j = index.get(id(a))
                if j is not None:
                    uses[j] += 1
    return order, index, uses


def stored(order: list[Lazy], uses: list[int], roots: list[Lazy]) -> tuple[int, ...]:
    """Positions in ``order`` of the nodes a fused pass must store: the roots,
    and every node referenced from outside the DAG (a user's tensor, the
    autograd tape, another pending expression).  A node's references are the
    DAG's own (``uses``), this frame's (``order``, ``n``, getrefcount's
    argument: measured on a sentinel held the same way) and external ones."""
    order.append(_Sentinel((), _F32, None, None, (), None, None))
    n = order[len(order) - 1]
    base = sys.getrefcount(n)
    order.pop()
    root_ids = {id(r) for r in roots}
    out = []
    for i in range(len(order)):
        n = order[i]
        if id(n) in root_ids or sys.getrefcount(n) - base - uses[i] > 0:
            out.append(i)
    return tuple(out)


def lower_dag(order: list[Lazy], index: dict[int, int], outputs: tuple[int, ...],
              T: np.dtype) -> tuple[Any, list[Node], list[Lazy], list[float], list[float]]:
    """``(key, nodes, inputs, consts, imms)`` of a collected DAG: the compiler's
    node list (operands: earlier nodes, the pass's input leaves, its scalar
    constants), the structure key programs are cached by, and the values."""
    inputs: list[Lazy] = []
    in_index: dict[int, int] = {}
    consts: list[float] = []
    imms: list[float] = []
    nodes: list[Node] = []
    for n in order:
        codes = []
        for a in n.args:
            if type(a) is Lazy:
                j = index.get(id(a))
                if j is not None and a.value is None:
                    codes.append(("n", j))
                else:
                    k = in_index.get(id(a))
                    if k is None:
                        k = in_index[id(a)] = len(inputs)
                        inputs.append(a)
                    codes.append(("i", k))
            else:
                codes.append(("c", len(consts)))
                consts.append(float(a))
        if n.imm is not None:
            imms.append(float(n.imm))
        nodes.append((n.op, tuple(codes), n.imm is not None))
    key = (T.char, len(inputs), len(consts), tuple(nodes), outputs)
    return key, nodes, inputs, consts, imms


class ProgramCache:
    """Compiled programs by structure key, least recently used dropped first."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._programs: OrderedDict[Any, Program] = OrderedDict()

    def get(self, key: Any, nodes: list[Node], nin: int, nconst: int,
            outputs: tuple[int, ...]) -> tuple[Program, bool]:
        """``(program, hit)``: the cached program for ``key``, compiled on a miss."""
        prog = self._programs.get(key)
        if prog is not None:
            self._programs.move_to_end(key)
            return prog, True
        prog = compile_program(nodes, nin, nconst, outputs)
        self._programs[key] = prog
        if len(self._programs) > self.size:
            self._programs.popitem(last=False)
        return prog, False

    def clear(self) -> None:
        self._programs.clear()

    def __len__(self) -> int:
        return len(self._programs)
