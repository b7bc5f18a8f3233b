"""The one compiler for ``rtx._kernels.fused_eval`` programs.

Every user of the fused evaluator builds its programs here: the CPU backend's
fixed activation programs (``cpu/activation.py``: an activation or its
backward rule as one OpenMP pass), Fusion's programs for recorded DAGs
(``rtx/fusion/compile.py``) and ``Backend.elementwise``, any evaluator op on
any backend (``evaluate``: one op's program, compiled once).

A program is described by NODES in topological order, ``(op, args, has_imm)``:
``op`` a key of ``rtx._kernels.FUSED_OPS``, each arg ``("n", j)`` (the result
of node j < i), ``("i", k)`` (input k) or ``("c", k)`` (scalar constant k),
``has_imm`` whether the node reads the next immediate (the slope of
leaky_relu, the alpha of elu: immediates are numbered in node order).
:func:`compile_program` allocates the registers (inputs, then constants, then
temporaries; a temporary is reused once its last reader has run; each output
node gets a register of its own, which the kernel points into its output
array) and checks every node against the kernel's op table (name, arity,
immediate), so a malformed description fails here with the node it is about,
not in the kernel.  :func:`lower` turns a small expression tree into nodes
(what the fixed programs are written as).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtypes import float_type, result_type
from .._kernels import FUSED_OPS, fused_eval

Arg = tuple[str, int]
Node = tuple[str, tuple[Arg, ...], bool]

# fused_eval's register file (FX_MAX_REGS in rtx/_fused.pxi): it refuses more.
MAX_REGS = 4096


class Program:
    """A compiled program: ``prog`` ((n, 6) int32 rows ``op dst a b c imm``),
    ``nregs``, ``out_regs`` (one register per output, in ``outputs`` order) and
    ``outputs`` (the node positions they hold)."""

    __slots__ = ("prog", "nregs", "out_regs", "outputs")

    def __init__(self, prog: np.ndarray, nregs: int, out_regs: np.ndarray,
                 outputs: tuple[int, ...]) -> None:
        self.prog = prog
        self.nregs = nregs
        self.out_regs = out_regs
        self.outputs = outputs

    def __repr__(self) -> str:
        return f"<Program {len(self.prog)} instructions, {self.nregs} registers>"


def compile_program(nodes: list[Node] | tuple[Node, ...], nin: int, nconst: int,
                    outputs: tuple[int, ...]) -> Program:
    """Register allocation for a topologically ordered node list (see the module
    docstring); ``outputs``: distinct node positions whose results are stored."""
    base = nin + nconst
    if len(set(outputs)) != len(outputs) or not all(0 <= i < len(nodes) for i in outputs):
        raise ValueError(f"compile_program: outputs {outputs} must be distinct node positions")
    last_use = [-1] * len(nodes)
    for i, (op, args, has_imm) in enumerate(nodes):
        spec = FUSED_OPS.get(op)
        if spec is None:
            raise ValueError(f"compile_program: node {i}: {op!r} is not a fused op")
        if len(args) != spec.arity or bool(has_imm) != spec.immediate:
            raise ValueError(f"compile_program: node {i}: {op} takes {spec.arity} operands "
                             f"and {'an' if spec.immediate else 'no'} immediate")
        for kind, j in args:
            limit = {"n": i, "i": nin, "c": nconst}.get(kind)
            if limit is None or not 0 <= j < limit:
                raise ValueError(f"compile_program: node {i}: bad operand {(kind, j)}")
            if kind == "n":
                last_use[j] = i
    is_out = set(outputs)
    reg = [-1] * len(nodes)
    free: list[int] = []
    nregs = base
    out_regs = {}
    # outputs get dedicated registers (they point into the output arrays)
    for i in outputs:
        reg[i] = out_regs[i] = nregs
        nregs += 1
    prog = []
    nimm = 0
    for i, (op, args, has_imm) in enumerate(nodes):
        operands = []
        for kind, j in args:
            operands.append(reg[j] if kind == "n" else j if kind == "i" else nin + j)
        for kind, j in args:
            if kind == "n" and last_use[j] == i and j not in is_out and reg[j] not in free:
                free.append(reg[j])
        if i not in is_out:
            if free:
                reg[i] = free.pop()
            else:
                reg[i] = nregs
                nregs += 1
        row = [FUSED_OPS[op].opcode, reg[i], -1, -1, -1, -1]
        row[2:2 + len(operands)] = operands
        if has_imm:
            row[5] = nimm
            nimm += 1
        prog.append(row)
    return Program(np.asarray(prog, dtype=np.int32).reshape(-1, 6), nregs,
                   np.asarray([out_regs[i] for i in outputs], dtype=np.int32), outputs)


IMM = "imm"  # in an expression tree: this op reads the next immediate


def lower(inputs: tuple[str, ...], consts: tuple[str, ...], expr: Any) -> Program:
    """The one-output program of an expression tree over named leaves.

    ``expr`` is a leaf name (one of ``inputs`` / ``consts``) or a tuple
    ``(op, *operands)``, with :data:`IMM` as the last operand of an op that
    reads an immediate: e.g. ``("where", ("gt", "a", "zero"), "g", ("mul", "g",
    "slope"))`` or ``("leaky_relu", "a", IMM)``.
    """
    leaves: dict[str, Arg] = {n: ("i", k) for k, n in enumerate(inputs)}
    leaves.update({n: ("c", k) for k, n in enumerate(consts)})
    if len(leaves) != len(inputs) + len(consts):
        raise ValueError("lower: leaf names must be distinct")
    nodes: list[Node] = []

    def visit(e: Any) -> Arg:
        if isinstance(e, str):
            if e not in leaves:
                raise ValueError(f"lower: unknown leaf {e!r}")
            return leaves[e]
        op, *rest = e
        has_imm = bool(rest) and rest[-1] is IMM
        args = tuple(visit(a) for a in (rest[:-1] if has_imm else rest))
        nodes.append((op, args, has_imm))
        return ("n", len(nodes) - 1)

    if visit(expr)[0] != "n":
        raise ValueError("lower: the expression must apply at least one op")
    return compile_program(nodes, len(inputs), len(consts), (len(nodes) - 1,))


# ------------------------------------------------- one evaluator op, any backend
_OP_PROGRAMS: dict[tuple[str, tuple[str, ...], bool], Program] = {}


def op_program(name: str, kinds: tuple[str, ...], has_imm: bool) -> Program:
    """The one-node program of evaluator op ``name`` over operands of ``kinds``
    (``"i"``: an array input, ``"c"``: a scalar constant), compiled once."""
    key = (name, kinds, has_imm)
    p = _OP_PROGRAMS.get(key)
    if p is None:
        ni = kinds.count("i")
        args = []
        counts = {"i": 0, "c": 0}
        for k in kinds:
            args.append((k, counts[k]))
            counts[k] += 1
        p = _OP_PROGRAMS[key] = compile_program([(name, tuple(args), has_imm)], ni,
                                                len(kinds) - ni, (0,))
    return p


def evaluate(name: str, operands: tuple[Any, ...], imm: float | None,
             alloc: Any = np.empty, num_threads: int = 1) -> np.ndarray:
    """Evaluator op ``name`` (a key of ``rtx._kernels.FUSED_OPS``) on host
    ``operands`` (numpy arrays, broadcast, and Python numbers) with immediate
    ``imm``, as one ``fused_eval`` pass: the default body of
    ``Backend.elementwise`` (``alloc=np.empty``, one thread) and the CPU
    backend's (its allocator, rtx's threads).

    The result dtype is PyTorch's (``result_type`` of the operands -- of the two
    values for ``where`` --, ints and bools as float32: the evaluator computes
    in float32 / float64); a predicate's result is bool.
    """
    spec = FUSED_OPS.get(name)
    if spec is None:
        raise ValueError(f"elementwise(): {name!r} is not an op of the fused evaluator "
                         f"(rtx._kernels.FUSED_OPS)")
    if len(operands) != spec.arity or (imm is not None) != spec.immediate:
        raise TypeError(f"elementwise(): {name} takes {spec.arity} operands and "
                        f"{'an' if spec.immediate else 'no'} immediate")
    values = operands[1:] if name == "where" else operands
    dt = float_type(result_type(*values))
    arrays = [x for x in operands if isinstance(x, np.ndarray)]
    if not arrays:
        raise TypeError(f"elementwise(): {name} needs at least one array operand")
    shape = tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    inputs = []
    consts = []
    for x in operands:
        if isinstance(x, np.ndarray):
            if x.dtype != dt or any(s % dt.itemsize for s in x.strides):
                x = np.array(x, dtype=dt, order="C")   # (keeps a 0-d array 0-d)
            inputs.append(x)
        else:
            consts.append(float(x))
    p = op_program(name, tuple("i" if isinstance(x, np.ndarray) else "c" for x in operands),
                   imm is not None)
    out = alloc(shape, dt)
    fused_eval(p.prog, p.nregs, inputs, consts, [] if imm is None else [float(imm)], [out],
               p.out_regs, shape, num_threads, 2048)
    if spec.predicate:
        mask = alloc(shape, np.dtype(np.bool_))
        np.not_equal(out, 0, out=mask)
        return mask
    return out
