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
from .ir import _BOOL, _F32, TOTAL_OPS, Lazy, _Sentinel

__all__ = ["MAX_PASS_NODES", "MAX_REGS", "ProgramCache", "collect", "compile_program",
           "lower_dag", "stored"]

# A node uses at most 4 registers (its result and up to 3 operand slots: inputs,
# constants), so one pass over several roots (a flush) takes roots while the
# nodes under them stay within MAX_PASS_NODES; more roots get more passes.  One
# root's DAG is at most 2 * MAX_NODES + 1 nodes (``Fusion._record``): always
# within the register file.
MAX_PASS_NODES = MAX_REGS // 4 - 24
CACHE_SIZE = 1024
# A pending node only the tape holds is recomputed in the backward (not stored)
# when that runs at most this many pending nodes again (``stored``).
RECOMPUTE_MAX_NODES = 16


def collect(roots: list[Lazy], force: Callable[[Lazy], Any]
            ) -> tuple[list[Lazy], dict[int, int], list[int]]:
    """The pending DAG under ``roots`` in topological order (operands of another
    shape or dtype, and pending totals, are materialised first by ``force``:
    their own pass), each node's position, and how often each is an operand
    inside the DAG."""
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
                if (a.shape == shape and a.ctype == T and a.dtype in (T, _BOOL)
                        and a.op not in TOTAL_OPS):
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


def stored(order: list[Lazy], index: dict[int, int], uses: list[int],
           roots: list[Lazy], summed: int | None = None,
           recompute: bool = True) -> tuple[int, ...]:
    """Positions in ``order`` of the nodes a fused pass must store: the roots,
    and every node referenced from outside the DAG (a user's tensor, the
    autograd tape, another pending expression) -- except a node that only the
    tape holds and that is cheap to recompute (``_recomputable``): that one
    stays pending, and the backward's pass that reads it computes it again in
    registers from the same operands (the same bits), which saves writing it
    out and reading it back.  A node's references are the DAG's own
    (``uses``), this frame's (``order``, ``n``, getrefcount's argument: measured
    on a sentinel held the same way) and external ones.  ``summed``: the position
    of the node a pending total (``TOTAL_OPS``) reads, which this pass sums: that
    total's reference to it is not an external one.  ``recompute=False`` (a
    flush, which materialises everything held anyway) stores the tape's nodes
    too."""
    order.append(_Sentinel((), _F32, None, None, (), None, None))
    n = order[len(order) - 1]
    base = sys.getrefcount(n)
    order.pop()
    root_ids = {id(r) for r in roots}
    ext = [0] * len(order)
    for i in range(len(order)):
        n = order[i]
        ext[i] = sys.getrefcount(n) - base - uses[i]
    del n
    if summed is not None:
        ext[summed] -= 1
    keep = _recomputable(order, index, ext, root_ids) if recompute else set()
    return tuple(i for i in range(len(order))
                 if id(order[i]) in root_ids or (ext[i] > 0 and i not in keep))


def _held_leaves(order: list[Lazy]) -> set[int]:
    """Ids of the DAG's materialised operands (leaves) that something outside
    the pending graph also holds: the leaf itself (a tensor of this backend) or
    its inner primitive (a tensor of the inner backend: a parameter, an input
    made before ``enabled()``).  Recomputing from those keeps nothing alive
    that would otherwise be freed."""
    entries, wraps = _leaf_reads(order)
    # this frame's references, measured on a sentinel leaf held the same way
    entries.append([_Sentinel((), _F32, None, None, None, None, object()), 0])
    x = entries[len(entries) - 1][0]
    base_leaf = sys.getrefcount(x)
    v = x.value
    base_value = sys.getrefcount(v)
    entries.pop()
    held: set[int] = set()
    for e in entries:
        x = e[0]
        if sys.getrefcount(x) - base_leaf - e[1] > 0:
            held.add(id(x))
            continue
        v = x.value
        if sys.getrefcount(v) - base_value - (wraps[id(v)] - 1) > 0:
            held.add(id(x))
    return held


def _leaf_reads(order: list[Lazy]) -> tuple[list[list[Any]], dict[int, int]]:
    """``[leaf, reads by the DAG]`` for each materialised operand, and how many
    of them wrap each inner primitive (by id).  (A function of its own: no name
    of its loops still holds a leaf while ``_held_leaves`` counts references.)"""
    reads: dict[int, list[Any]] = {}
    wraps: dict[int, int] = {}
    for n in order:
        for a in n.args:
            if type(a) is Lazy and a.value is not None:
                e = reads.get(id(a))
                if e is None:
                    reads[id(a)] = [a, 1]
                    wraps[id(a.value)] = wraps.get(id(a.value), 0) + 1
                else:
                    e[1] += 1
    return list(reads.values()), wraps


def _recomputable(order: list[Lazy], index: dict[int, int], ext: list[int],
                  root_ids: set[int]) -> set[int]:
    """Positions of the nodes held from outside only by the tape (``Lazy.saved``
    counts its references: ``Fusion.mark_saved``) that can be left pending: at
    most ``RECOMPUTE_MAX_NODES`` pending nodes to compute again, each reading
    only Python scalars, leaves held elsewhere (``_held_leaves``), nodes this
    pass stores or nodes that can themselves be recomputed."""
    if not any(ext[i] > 0 and order[i].saved for i in range(len(order))):
        return set()
    held = _held_leaves(order)
    cost = [0] * len(order)   # pending nodes a recomputation runs (0: not recomputable)
    keep: set[int] = set()
    for i, n in enumerate(order):
        c = 1
        for a in n.args:
            if type(a) is not Lazy:
                continue
            j = index.get(id(a)) if a.value is None else None
            if j is None:
                if id(a) not in held:
                    c = 0
                    break
            elif id(order[j]) in root_ids or (ext[j] > 0 and j not in keep):
                continue      # stored by this pass: a leaf its holder keeps
            elif cost[j]:
                c += cost[j]
            else:
                c = 0
                break
        if c > RECOMPUTE_MAX_NODES:
            c = 0
        cost[i] = c
        if c and id(n) not in root_ids and 0 < ext[i] <= n.saved:
            keep.add(i)
    return keep


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
