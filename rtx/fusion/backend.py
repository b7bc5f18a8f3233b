"""``Fusion(inner)``: a backend decorator that fuses elementwise chains.

Its primitive is a :class:`Lazy` node (``ir.py``): shape and dtype are known at
once (broadcasting is resolved when the op is recorded), the values only when
something needs them.  The fused evaluator's ops (``rtx._kernels.FUSED_OPS``:
unary, binary with broadcasting and Python scalars, comparisons, ``where``, the
activations) on float32/float64 are *recorded* into an expression DAG.  Every
other op of the families' ``OPS`` -- matmul, reductions, shape ops, index,
segment and message-passing ops, and the ops of any family the inner backend
adds -- is *forwarded* to the inner backend after its arguments are
materialised.  The methods are generated from those tables (the bottom of this
file); only the core, ``copy`` / ``broadcast_to`` / ``inplace`` and the queries
are written by hand.

A pending DAG is materialised when its value is needed (a forwarded op,
``to_numpy`` / ``.numpy()`` / DLPack, an in-place write, ``flush()``): it is
compiled to a register-machine program (``compile.py``: cached by the
expression's structure, not its data) and run by ``rtx.fused_eval`` as one pass over
cache-sized blocks, in parallel.  Intermediates that nothing else reads are
never stored; a node that something else still holds (a user's tensor,
another pending expression, the autograd tape) is stored once, as an extra
output of the same pass.
"""

from __future__ import annotations

import inspect
import math
import threading
import weakref
from typing import Any

import numpy as np

from .._kernels import FUSED_OPS, fused_eval
from .._threads import get_num_threads
from ..backend._family import is_composed, is_query
from ..backend.base import Backend
from ..backend.cpu import empty as _owned_empty
from ..backend.cpu.reduction import CpuReduction
from .compile import MAX_PASS_NODES, MAX_REGS, ProgramCache, collect, lower_dag, stored
from .ir import (
    _BOOL,
    _FLOATS,
    _PY_SCALARS,
    KERNEL_OPS,
    MAX_NODES,
    PREDICATES,
    TOTAL_OPS,
    Lazy,
    leaf,
    result_dtype,
    tops,
)

__all__ = ["DEFAULT_MIN_ELEMENTS", "FUSABLE_OPS", "MAX_NODES", "MAX_PASS_NODES", "MAX_REGS",
           "Fusion", "Lazy"]

# opcode by name, as the programs hold them
_OPCODES = {name: spec.opcode for name, spec in FUSED_OPS.items()}
# Ops whose result has fewer elements run eagerly on the inner backend: below
# this, a fused pass's fixed cost (planning ~30-60 us of Python) exceeds the
# memory traffic it saves (docs/fusion.md).  Fusion(inner, min_elements=0)
# fuses everything.
DEFAULT_MIN_ELEMENTS = 1 << 14


class Fusion(Backend):
    """Backend decorator: records elementwise ops over ``inner`` and runs each
    chain as one fused, parallel pass when its value is needed."""

    def __init__(self, inner: Backend, block: int = 2048,
                 min_elements: int = DEFAULT_MIN_ELEMENTS) -> None:
        if not isinstance(inner, Backend):
            raise TypeError(f"Fusion wraps a Backend, got {type(inner).__name__}")
        if isinstance(inner, Fusion):
            raise TypeError("Fusion(Fusion(...)): the inner backend is already fused")
        if not 16 <= int(block) <= 65536:
            raise ValueError("block must be in [16, 65536] elements")
        self.inner = inner
        self.name = f"fusion<{inner.name}>"
        self.block = int(block)
        if int(min_elements) < 0:
            raise ValueError("min_elements must be >= 0")
        self.min_elements = int(min_elements)
        self._pending: weakref.WeakSet[Lazy] = weakref.WeakSet()
        self._totals: weakref.WeakSet[Lazy] = weakref.WeakSet()   # pending sums and means
        self._lock = threading.RLock()
        self._cache = ProgramCache()
        self.stats = {"kernel_calls": 0, "cache_hits": 0, "cache_misses": 0,
                      "nodes_fused": 0, "outputs": 0, "eager_ops": 0, "forwarded": 0,
                      "unfused_fallbacks": 0, "sums_fused": 0}
        # ops of families the inner backend adds (its own family mixins): forwarded
        # like Backend's own families, by name
        for name in type(inner).OPS:
            if not hasattr(Fusion, name):
                setattr(self, name, _bound_forwarder(self, name))

    def __repr__(self) -> str:
        return f"<Fusion over {self.inner!r}>"

    # ------------------------------------------------------------- core
    def from_numpy(self, a: np.ndarray) -> Lazy:
        v = self.inner.from_numpy(a)
        return leaf(v, tuple(self.inner.shape(v)), np.dtype(self.inner.dtype(v)))

    def to_numpy(self, p: Lazy) -> np.ndarray:
        # Data leaves rtx: finish every pending expression first, so a caller
        # that writes into the returned buffer cannot change them.
        self.flush()
        return self.inner.to_numpy(self._force(p))

    def shape(self, p: Lazy) -> tuple[int, ...]:
        return p.shape

    def dtype(self, p: Lazy) -> np.dtype:
        return p.dtype

    def is_prim(self, p: Any) -> bool:
        return type(p) is Lazy

    MARKS_SAVED = True

    def mark_saved(self, p: Any, holder: Any) -> None:
        """Counted on a pending node while ``holder`` lives (``Lazy.saved``): a pass
        that finds only the tape holding it may leave it pending, to be recomputed
        inside the backward's pass (``compile.stored``)."""
        if type(p) is Lazy and p.value is None:
            ref = weakref.ref(holder)
            if p.savers is None:
                p.savers = [ref]
            else:
                p.savers.append(ref)

    def adopt(self, p: Any, src: Backend) -> Any:
        """An inner primitive as a (materialised) lazy leaf; see ``Backend.adopt``."""
        if src is self.inner:
            return self._wrap(p)
        return super().adopt(p, src)

    def lower(self, p: Any) -> Any:
        """``p`` as an inner primitive (its pending expression run first)."""
        return self._force(p) if type(p) is Lazy else p

    # --------------------------------------------------- wrapping helpers
    def _wrap(self, r: Any) -> Any:
        if type(r) is not Lazy and self.inner.is_prim(r) and not isinstance(r, (tuple, list)):
            return leaf(r, tuple(self.inner.shape(r)), np.dtype(self.inner.dtype(r)))
        if isinstance(r, tuple):
            return type(r)(self._wrap(x) for x in r) if type(r) is tuple else type(r)(
                *(self._wrap(x) for x in r))
        if isinstance(r, list):
            return [self._wrap(x) for x in r]
        return r

    def _unwrap(self, x: Any) -> Any:
        if type(x) is Lazy:
            return self._force(x)
        if isinstance(x, list):
            return [self._unwrap(v) for v in x]
        if type(x) is tuple:
            return tuple(self._unwrap(v) for v in x)
        if isinstance(x, dict):
            return {k: self._unwrap(v) for k, v in x.items()}
        return x

    def forward(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run ``name`` on the inner backend, arguments materialised, results wrapped."""
        self.stats["forwarded"] += 1
        fn = getattr(self.inner, name)
        return self._wrap(fn(*[self._unwrap(a) for a in args],
                             **{k: self._unwrap(v) for k, v in kwargs.items()}))

    # ------------------------------------------------------------ recording
    def _record(self, op: str, args: tuple[Any, ...], imm: Any = None,
                out_shape: tuple[int, ...] | None = None) -> Any:
        """A pending node for ``op(*args)``, or the eager result when not fusable."""
        if op == "where":
            cond, a, b = args
            dt = result_dtype((a, b))
            ok = (dt is not None and type(cond) is Lazy and cond.dtype == _BOOL
                  and (cond.value is not None or cond.ctype == dt)
                  and (type(a) is Lazy or type(b) is Lazy))
        else:
            dt = result_dtype(args)
            ok = dt is not None
        if not ok:
            return self._eager(op, args, () if imm is None else (imm,))
        shapes = [a.shape for a in args if type(a) is Lazy]
        shape = shapes[0] if out_shape is None else out_shape
        for s in shapes[1:] if out_shape is None else ():
            if s != shape:
                shape = tuple(np.broadcast_shapes(shape, s))
        if self.min_elements and math.prod(shape) < self.min_elements:
            if out_shape is not None:
                return self.forward("broadcast_to", args[0], out_shape)
            return self._eager(op, args, () if imm is None else (imm,))
        size = 1
        for a in args:
            if type(a) is Lazy and a.value is None:
                size += a.size
        if size > MAX_NODES:
            big = max((a for a in args if type(a) is Lazy and a.value is None),
                      key=lambda a: a.size)
            self._force(big)
            size = 1 + sum(a.size for a in args if type(a) is Lazy and a.value is None)
        node = Lazy(shape, _BOOL if op in PREDICATES else dt, dt, op, args, imm, None, size)
        with self._lock:  # another thread's flush may be iterating the set
            self._pending.add(node)
        return node

    def _eager(self, op: str, args: tuple[Any, ...], extra: tuple[Any, ...] = ()) -> Any:
        """``op`` run now on the inner backend (not fusable: dtypes, scalars)."""
        self.stats["eager_ops"] += 1
        vals = [self._force(a) if type(a) is Lazy else a for a in args]
        return self._wrap(self._inner_op(op, vals, extra))

    def _inner_op(self, op: str, vals: list[Any], extra: tuple[Any, ...] = ()) -> Any:
        """The inner backend's ``op`` on materialised operands: its own method, or
        ``elementwise`` for an evaluator op that has none."""
        if op in Backend.OPS:
            return getattr(self.inner, op)(*vals, *extra)
        return self.inner.elementwise(op, *vals, imm=extra[0] if extra else None)

    # ------------------------------------------------------- materialising
    def _force(self, p: Lazy) -> Any:
        """``p``'s inner primitive, running its pending expression if needed (with
        a pending total of an expression of ``p``'s shape, in the same pass)."""
        if p.value is None:
            with self._lock:
                if p.value is None:
                    if p.op in TOTAL_OPS:
                        self._run_safely([], p)
                    elif p.dtype == _BOOL:
                        # a comparison someone wants as a bool array: run it eagerly
                        # on its (fused) operands
                        vals = [self._force(a) if type(a) is Lazy else a for a in p.args]
                        p.value = self._inner_op(p.op, vals)
                        p.args = None
                        self._pending.discard(p)
                    else:
                        self._run_safely([p], self._total_for(p.shape, p.ctype, p.size))
        return p.value

    def _total_for(self, shape: tuple[int, ...], T: Any, size: int) -> Lazy | None:
        """The oldest pending total (``TOTAL_OPS``) of an expression of this shape
        and ctype that fits in one pass beside ``size`` nodes, or None."""
        best = None
        for t in list(self._totals):
            a = t.args[0] if t.value is None else None
            if (a is not None and a.shape == shape and a.ctype == T
                    and a.size + size <= MAX_PASS_NODES and (best is None or t.seq < best.seq)):
                best = t
        return best

    def flush(self) -> None:
        """Materialise every pending expression something still holds; a pending
        total runs in the first pass over expressions of its operand's shape."""
        with self._lock:
            while True:
                roots = tops(self._pending)
                if not roots:
                    return
                groups: dict[Any, list[Lazy]] = {}
                totals: list[Lazy] = []
                for n in roots:
                    if n.op in TOTAL_OPS:
                        totals.append(n)
                        groups.setdefault((n.args[0].shape, n.args[0].ctype, False), [])
                    else:
                        groups.setdefault((n.shape, n.ctype, n.dtype == _BOOL), []).append(n)
                del roots
                for (shape, ctype, is_bool), nodes in groups.items():
                    if is_bool:
                        for n in nodes:
                            self._force(n)
                        continue
                    # passes of at most MAX_PASS_NODES nodes: thousands of live
                    # results of one shape never make a program larger than the
                    # kernel's register file; the oldest total of this shape
                    # joins the first.  Nodes only the tape holds are stored
                    # too (not left to recompute): the flush would otherwise
                    # run again for each of them.
                    red = next((t for t in totals if t.args is not None
                                and t.args[0].shape == shape and t.args[0].ctype == ctype),
                               None)
                    batch: list[Lazy] = []
                    total = 0 if red is None else red.args[0].size
                    for n in nodes:
                        if (batch or red is not None) and total + n.size > MAX_PASS_NODES:
                            self._run_safely(batch, red, recompute=False)
                            batch, total, red = [], 0, None
                        batch.append(n)
                        total += n.size
                    if batch or red is not None:
                        self._run_safely(batch, red, recompute=False)
                    del batch, red
                del groups, totals   # totals left pending: the next round

    def _run_safely(self, roots: list[Lazy], red: Lazy | None = None,
                    recompute: bool = True) -> None:
        """``_run``, and if the fused pass fails, the same nodes evaluated op by op
        on the inner backend: a pending expression the fused kernel refuses must
        never stay pending, or every later materialisation on this backend (each
        finishes all pending work first) would fail on it too."""
        try:
            self._run(roots, red, recompute)
        except Exception:  # e.g. the kernel refusing a program; not KeyboardInterrupt
            self.stats["unfused_fallbacks"] += 1
            if red is not None and red.value is None:
                self._run_unfused(roots + [red.args[0]])
                self._total_of_stored(red)
            else:
                self._run_unfused(roots)

    def _run(self, roots: list[Lazy], red: Lazy | None = None,
             recompute: bool = True) -> None:
        """Materialise ``roots`` (one shape and ctype, none inside another's DAG)
        in one fused pass; nodes inside their DAG that something else holds are
        stored by the same pass.  With ``red`` (a pending total of an expression
        of that shape), the pass also sums that expression (numpy's order: the
        inner backend's bits), storing it only if something besides ``red``
        holds it.  ``recompute``: see ``compile.stored``."""
        order, index, uses = self._collect(roots if red is None else roots + [red.args[0]])
        if red is not None and (red.value is not None or red.args[0].value is not None):
            # a root reads the total (collect ran its pass), or a pass collect ran
            # stored its operand: the total needs no share of this one
            if red.value is None:
                self._total_of_stored(red)
            red = None
            order, index, uses = self._collect(roots)
        if not order:
            return
        shape, T = order[0].shape, order[0].ctype
        if red is None:
            self._execute(order, index, stored(order, index, uses, roots, None, recompute),
                          shape, T)
            return
        pos = index[id(red.args[0])]
        total = self._execute(order, index, stored(order, index, uses, roots, pos, recompute),
                              shape, T, summed=pos)
        if red.op == "mean":
            # numpy's mean: true_divide by an intp count into the sum's float buffer
            np.true_divide(total, np.intp(math.prod(shape)), out=total, casting="unsafe")
        self._set_total(red, self.inner.from_numpy(total))

    def _collect(self, roots: list[Lazy]) -> tuple[list[Lazy], dict[int, int], list[int]]:
        """``collect``, again if the passes it ran for other operands (a pending
        total is one: its operand has this shape) stored nodes it had walked."""
        while True:
            order, index, uses = collect(roots, self._force)
            if all(n.value is None for n in order):
                return order, index, uses

    def _total_of_stored(self, red: Lazy) -> None:
        """``red`` from its materialised operand: the inner backend's own sum or
        mean (numpy's order, the bits a fused pass gives)."""
        self._set_total(red, getattr(self.inner, red.op)(red.args[0].value))

    def _set_total(self, red: Lazy, value: Any) -> None:
        red.value = value
        red.args = None
        self._pending.discard(red)
        self._totals.discard(red)

    def _run_unfused(self, roots: list[Lazy]) -> None:
        """Every pending node under ``roots`` computed by the inner backend's own
        op (same op, operands and order: IEEE-exact ops give the fused bits,
        transcendentals the inner backend's rounding)."""
        if not roots:
            return
        order, _, _ = collect(roots, self._force)
        B = self.inner
        for n in order:
            vals = [a.value if type(a) is Lazy else a for a in n.args]
            if n.op == "copy":
                v = vals[0]
                if tuple(B.shape(v)) != n.shape:
                    v = B.broadcast_to(v, n.shape)
                r = B.copy(v)
            elif n.op not in Backend.OPS:      # an evaluator op with no method of its own
                r = B.elementwise(n.op, *vals, imm=n.imm)
            elif n.imm is not None:
                r = getattr(B, n.op)(*vals, n.imm)
            else:
                r = getattr(B, n.op)(*vals)
            n.value = r
            n.args = None
            self._pending.discard(n)

    def _execute(self, order: list[Lazy], index: dict[int, int], outputs: tuple[int, ...],
                 shape: tuple[int, ...], T: np.dtype, summed: int | None = None) -> Any:
        """One fused pass storing the nodes at ``outputs``; with ``summed`` (a node
        position) it also returns that node's sum over every element as a 0-d
        array (``fused_eval``'s ``sum_reg``: numpy's order and bits), the node
        itself stored only if it is in ``outputs``."""
        compiled = outputs
        if summed is not None and summed not in outputs:
            compiled = outputs + (summed,)   # a register of its own, not stored
        key, nodes, inputs, consts, imms = lower_dag(order, index, compiled, T)
        prog, hit = self._cache.get(key, nodes, len(inputs), len(consts), compiled)
        self.stats["cache_hits" if hit else "cache_misses"] += 1
        arrays = []
        for leaf_ in inputs:
            a = self.inner.to_numpy(leaf_.value)
            if a.dtype != T or any(s % T.itemsize for s in a.strides):
                a = np.array(a, dtype=T, order="C")   # (keeps a 0-d array 0-d)
            arrays.append(a)
        if prog.nregs > MAX_REGS:
            raise ValueError(f"Fusion: a program of {prog.nregs} registers (at most {MAX_REGS})")
        outs = [_owned_empty(shape, T) for _ in outputs]
        total = None
        if summed is None:
            fused_eval(prog.prog, prog.nregs, arrays, consts, imms, outs, prog.out_regs,
                       shape, get_num_threads(), self.block)
        else:
            total = _owned_empty((), T)
            fused_eval(prog.prog, prog.nregs, arrays, consts, imms, outs,
                       prog.out_regs[:len(outputs)], shape, get_num_threads(), self.block,
                       sum_reg=int(prog.out_regs[compiled.index(summed)]), sum_out=total)
            self.stats["sums_fused"] += 1
        self.stats["kernel_calls"] += 1
        self.stats["nodes_fused"] += len(order)
        self.stats["outputs"] += len(outputs)
        for i, arr in zip(outputs, outs, strict=True):
            n = order[i]
            n.value = self.inner.from_numpy(arr)
            n.args = None
            self._pending.discard(n)
        return total

    def sum(self, a: Any, dim: Any = None, keepdim: bool = False) -> Any:
        """A pending float expression summed over all its elements (a loss:
        ``chain.sum()``) is a pending total: it is summed, in numpy's order (the
        CPU backend's bits), by the first pass over an expression of its
        operand's shape -- the backward's, when the loss is not read before --
        or when it is read; the operand is stored only if something else holds
        it.  Every other sum is forwarded to the inner backend."""
        if self._total_applies(a, dim, keepdim):
            return self._record_total("sum", a)
        return self.forward("sum", a, dim, keepdim)

    def mean(self, a: Any, dim: Any = None, keepdim: bool = False) -> Any:
        """Like ``sum``: the pending total divided by the element count as numpy's
        ``mean`` divides (``true_divide`` by an ``intp`` count into the sum's
        float buffer), so the CPU backend's bits."""
        if self._total_applies(a, dim, keepdim):
            return self._record_total("mean", a)
        return self.forward("mean", a, dim, keepdim)

    def _total_applies(self, a: Any, dim: Any, keepdim: bool) -> bool:
        """Whether ``a``'s sum is a pending total: a whole-tensor sum of a pending
        float expression, over an inner backend that sums in numpy's order."""
        return (dim is None and not keepdim and type(a) is Lazy and a.value is None
                and a.op not in TOTAL_OPS and a.dtype in _FLOATS and a.ctype == a.dtype
                and math.prod(a.shape) > 0 and self._numpy_reductions)

    def _record_total(self, op: str, a: Lazy) -> Lazy:
        node = Lazy((), a.dtype, a.ctype, op, (a,), None, None, 1)
        with self._lock:
            self._pending.add(node)
            self._totals.add(node)
        return node

    @property
    def _numpy_reductions(self) -> bool:
        """Whether the inner backend sums with numpy's ``add.reduce`` over a
        C-contiguous buffer (the order ``fused_eval``'s sum reproduces)."""
        cls = type(self.inner)
        return (getattr(cls, "sum", None) is CpuReduction.sum
                and getattr(cls, "mean", None) is CpuReduction.mean)

    def _record_param(self, op: str, a: Any, value: Any) -> Any:
        """An op with one scalar parameter (the kernel's immediate): recorded for a
        Python number, run at once on the inner backend otherwise."""
        if type(value) not in _PY_SCALARS:
            return self._eager(op, (a,), (value,))
        return self._record(op, (a,), value)

    # ----------------------------------------------- hand-written family ops
    def elementwise(self, name: str, *operands: Any, imm: float | None = None) -> Any:
        """Recorded like the evaluator's named ops (``Backend.elementwise``)."""
        spec = FUSED_OPS.get(name)
        if spec is None or len(operands) != spec.arity or (imm is not None) != spec.immediate:
            return self.forward("elementwise", name, *operands, imm=imm)   # its error
        if imm is not None:
            if type(imm) not in _PY_SCALARS:
                return self.forward("elementwise", name, *operands, imm=imm)
            return self._record(name, operands, imm)
        return self._record(name, operands)

    def broadcast_to(self, a: Any, shape: tuple[int, ...]) -> Any:
        """Lazy for floats: the operand is read with stride 0 along broadcast dims."""
        shape = tuple(shape)
        if type(a) is Lazy and a.dtype in _FLOATS:
            if (len(shape) < len(a.shape)
                    or tuple(np.broadcast_shapes(a.shape, shape)) != shape):
                raise ValueError(f"broadcast_to: cannot broadcast shape {a.shape} to {shape}")
            return self._record("copy", (a,), out_shape=shape)
        return self.forward("broadcast_to", a, shape)

    def copy(self, a: Any) -> Any:
        """Lazy for a pending float expression; a materialised one is copied now
        (a snapshot: it may share memory with a user's array)."""
        if type(a) is Lazy and a.value is None and a.dtype in _FLOATS:
            return self._record("copy", (a,))
        return self.forward("copy", a)

    def inplace(self, op: str, dst: Any, src: Any) -> Any:
        # Every pending expression is finished first: none may see the write.
        self.flush()
        dv = self._force(dst)
        sv = self._force(src) if type(src) is Lazy else src
        nv = self.inner.inplace(op, dv, sv)
        return dst if nv is dv else self._wrap(nv)

    def aliases(self, view: Any, base: Any) -> bool:
        """A pending expression owns no buffer yet: it aliases nothing."""
        if type(view) is not Lazy or type(base) is not Lazy:
            return False
        if view.value is None or base.value is None:
            return False
        return bool(self.inner.aliases(view.value, base.value))

    def cache_info(self) -> dict[str, int]:
        """Program cache and kernel counters (``size``: programs cached)."""
        return dict(self.stats, size=len(self._cache))

    def clear_cache(self) -> None:
        with self._lock:  # a flush in another thread may be using the cache
            self._cache.clear()




# ------------------------------------------------- methods from the families
# One mechanism: every Backend op (the families' OPS) and query that the class
# body above does not write by hand gets a generated method --
#   * recorded: an op of the fused evaluator (KERNEL_OPS, from FUSED_OPS), with
#     the Backend method's own signature (operands, then the immediate's name);
#   * composed: a default body written with recorded ops (marked @composed where
#     it is written), run here so it fuses with its neighbours when large enough;
#   * forwarded: everything else, to the inner backend, arguments materialised.
# Ops of families the inner backend adds itself are forwarded per instance
# (Fusion.__init__).


def _recorded(name: str) -> Any:
    spec = KERNEL_OPS[name]
    base = getattr(Backend, name)
    params = list(inspect.signature(base).parameters)[1:]
    if len(params) != spec.arity + spec.immediate or (spec.immediate and spec.arity != 1):
        raise TypeError(f"Fusion: Backend.{name}{inspect.signature(base)} does not match the "
                        f"fused op ({spec.arity} operands, immediate={spec.immediate})")
    if spec.immediate:
        a, p = params
        src = f"def {name}(self, {a}, {p}):\n    return self._record_param({name!r}, {a}, {p})\n"
    else:
        args = ", ".join(params)
        src = f"def {name}(self, {args}):\n    return self._record({name!r}, ({args},))\n"
    ns: dict[str, Any] = {}
    exec(src, ns)  # noqa: S102 - a fixed template over the Backend's own parameter names
    method = ns[name]
    method.__qualname__ = f"Fusion.{name}"
    method.__doc__ = f"Recorded lazily (fused opcode {spec.opcode}); see ``Backend.{name}``."
    return method


def _composed(name: str) -> Any:
    default = getattr(Backend, name)

    def method(self: Fusion, *args: Any) -> Any:
        x = args[0]
        if (type(x) is Lazy and x.dtype in _FLOATS
                and not (self.min_elements and math.prod(x.shape) < self.min_elements)):
            return default(self, *args)     # recorded: fuses with its neighbours
        return self.forward(name, *args)    # small or not float: the inner's one kernel

    method.__name__ = name
    method.__qualname__ = f"Fusion.{name}"
    method.__doc__ = default.__doc__
    return method


def _forwarder(name: str) -> Any:
    def method(self: Fusion, *args: Any, **kwargs: Any) -> Any:
        return self.forward(name, *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"Fusion.{name}"
    method.__doc__ = f"Forwarded to the inner backend's ``{name}`` (arguments materialised)."
    return method


def _bound_forwarder(fz: Fusion, name: str) -> Any:
    ref = weakref.ref(fz)   # held by fz itself: no reference cycle

    def method(*args: Any, **kwargs: Any) -> Any:
        f = ref()
        assert f is not None
        return f.forward(name, *args, **kwargs)

    method.__name__ = name
    return method


_HAND_WRITTEN = frozenset(n for n, v in vars(Fusion).items() if callable(v))
_QUERIES = tuple(n for n in dir(Backend) if is_query(getattr(Backend, n, None)))
for _name in Backend.OPS + _QUERIES:
    if _name in _HAND_WRITTEN:
        continue
    if _name in KERNEL_OPS:
        _method = _recorded(_name)
    elif is_composed(getattr(Backend, _name)):
        _method = _composed(_name)
    else:
        _method = _forwarder(_name)
    setattr(Fusion, _name, _method)

# The elementwise ops recorded lazily (everything else is forwarded or composed).
FUSABLE_OPS: tuple[str, ...] = tuple(n for n in KERNEL_OPS if n not in _HAND_WRITTEN)
