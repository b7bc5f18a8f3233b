"""``Fusion(inner)``: a backend decorator that fuses elementwise chains.

Its primitive is a :class:`Lazy` node: shape and dtype are known at once
(broadcasting is resolved when the op is recorded), the values only when
something needs them.  Elementwise ops on float32/float64 (unary, binary with
broadcasting and Python scalars, comparisons, ``where``, the activations)
are *recorded* into an expression DAG.  Everything else — matmul,
reductions, shape ops, index, segment and message-passing ops, and any op
the inner backend has that this class does not know — is *forwarded* to the
inner backend after its arguments are materialised.

A pending DAG is materialised when its value is needed (a forwarded op,
``to_numpy`` / ``.numpy()`` / DLPack, an in-place write, ``flush()``): it is
compiled to a register-machine program (cached by the expression's structure,
not its data) and run by ``rtx.fused_eval`` as one pass over
cache-sized blocks, in parallel.  Intermediates that nothing else reads are
never stored; a node that something else still holds (a user's tensor,
another pending expression, the autograd tape) is stored once, as an extra
output of the same pass.
"""

from __future__ import annotations

import itertools
import math
import sys
import threading
import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

from .._kernels import FUSED_OPS, fused_eval
from .._threads import get_num_threads
from ..backend.base import Backend
from ..backend.cpu import empty as _owned_empty

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)
_FLOATS = (_F32, _F64)
_PY_SCALARS = (int, float, bool)

# The elementwise ops recorded lazily (everything else is forwarded).
UNARY_OPS = ("neg", "exp", "log", "sqrt", "abs", "sign", "tanh", "sigmoid", "relu")
PARAM_OPS = {"leaky_relu": ("negative_slope", 0.01), "elu": ("alpha", 1.0)}
BINARY_OPS = ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
FUSABLE_OPS = UNARY_OPS + tuple(PARAM_OPS) + BINARY_OPS + COMPARE_OPS + ("where",)

# Backend methods Fusion implements itself (never forwarded).
# The activations' backward ops are composed of recorded ops (Backend's default
# bodies) so that they fuse with the rest of the backward.
COMPOSED_OPS = ("relu_backward", "leaky_relu_backward", "elu_backward")
_OWN = set(FUSABLE_OPS) | set(COMPOSED_OPS) | {
    "from_numpy", "to_numpy", "shape", "dtype", "is_prim", "inplace", "broadcast_to", "copy",
    "aliases"}

_OPCODES = {name: spec[0] for name, spec in FUSED_OPS.items()}
_CACHE_SIZE = 1024
# Largest pending DAG one program covers: a longer chain is cut (its largest
# operand materialised) when recorded, which bounds program length and registers.
MAX_NODES = 256
# fused_eval's register file (FX_MAX_REGS in rtx/_fused.pxi).  A node uses at
# most 4 registers (its result and up to 3 operand slots: inputs, constants), so
# one pass over several roots (a flush) takes roots while the nodes under them
# stay within MAX_PASS_NODES; more roots get more passes.  One root's DAG is at
# most 2 * MAX_NODES + 1 nodes (``_record``): always within the register file.
MAX_REGS = 4096
MAX_PASS_NODES = MAX_REGS // 4 - 24
# Ops whose result has fewer elements run eagerly on the inner backend: below
# this, a fused pass's fixed cost (planning ~30-60 us of Python) exceeds the
# memory traffic it saves (docs/fusion.md).  Fusion(inner, min_elements=0)
# fuses everything.
DEFAULT_MIN_ELEMENTS = 1 << 14


_SEQ = itertools.count()


class Lazy:
    """A Fusion primitive: a leaf holding an inner primitive (``value``), or a
    pending elementwise op over other ``Lazy`` nodes and Python scalars."""

    __slots__ = ("shape", "dtype", "ctype", "op", "args", "imm", "value", "size", "seq",
                 "__weakref__")

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

    @property
    def pending(self) -> bool:
        return self.value is None

    def __repr__(self) -> str:
        state = f"pending {self.op}" if self.value is None else "materialised"
        return f"<Lazy {state} shape={self.shape} dtype={self.dtype}>"


class _Sentinel(Lazy):
    """Held like a DAG's nodes to measure the materialiser's own references
    (see ``_stored``)."""


def _leaf(value: Any, shape: tuple[int, ...], dtype: np.dtype) -> Lazy:
    return Lazy(shape, dtype, None, None, None, None, value)


class _Program:
    __slots__ = ("prog", "nregs", "out_regs", "outputs")

    def __init__(self, prog: np.ndarray, nregs: int, out_regs: np.ndarray,
                 outputs: tuple[int, ...]) -> None:
        self.prog = prog
        self.nregs = nregs
        self.out_regs = out_regs
        self.outputs = outputs


def _compile(nodes: list[tuple[str, tuple[tuple[str, int], ...], bool]], nin: int,
             nconst: int, outputs: tuple[int, ...]) -> _Program:
    """Register allocation for a topologically ordered node list.

    ``nodes[i] = (op, args, has_imm)`` with args ``("n", j)`` (node j < i),
    ``("i", k)`` (input k) or ``("c", k)`` (constant k).
    """
    base = nin + nconst
    last_use = [-1] * len(nodes)
    for i, (_, args, _) in enumerate(nodes):
        for kind, j in args:
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
        row = [_OPCODES[op], reg[i], -1, -1, -1, -1]
        row[2:2 + len(operands)] = operands
        if has_imm:
            row[5] = nimm
            nimm += 1
        prog.append(row)
    return _Program(np.asarray(prog, dtype=np.int32).reshape(-1, 6), nregs,
                    np.asarray([out_regs[i] for i in outputs], dtype=np.int32), outputs)


def _result_dtype(args: tuple[Any, ...]) -> Any:
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


def _tops(pending: Any) -> list[Lazy]:
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


def _stored(order: list[Lazy], uses: list[int], roots: list[Lazy]) -> tuple[int, ...]:
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
        self._lock = threading.RLock()
        self._cache: OrderedDict[Any, _Program] = OrderedDict()
        self.stats = {"kernel_calls": 0, "cache_hits": 0, "cache_misses": 0,
                      "nodes_fused": 0, "outputs": 0, "eager_ops": 0, "forwarded": 0,
                      "unfused_fallbacks": 0}

    def __repr__(self) -> str:
        return f"<Fusion over {self.inner!r}>"

    # ------------------------------------------------------------- core
    def from_numpy(self, a: np.ndarray) -> Lazy:
        v = self.inner.from_numpy(a)
        return _leaf(v, tuple(self.inner.shape(v)), np.dtype(self.inner.dtype(v)))

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

    # --------------------------------------------------- wrapping helpers
    def _wrap(self, r: Any) -> Any:
        if type(r) is not Lazy and self.inner.is_prim(r) and not isinstance(r, (tuple, list)):
            return _leaf(r, tuple(self.inner.shape(r)), np.dtype(self.inner.dtype(r)))
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

    def __getattr__(self, name: str) -> Any:
        # Ops the inner backend has and Backend does not (added by other
        # families later): forwarded generically.
        if name.startswith("_") or "inner" not in self.__dict__:
            raise AttributeError(name)
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def fwd(*args: Any, **kwargs: Any) -> Any:
            return self.forward(name, *args, **kwargs)

        fwd.__name__ = name
        return fwd

    # ------------------------------------------------------------ recording
    def _record(self, op: str, args: tuple[Any, ...], imm: Any = None,
                out_shape: tuple[int, ...] | None = None) -> Any:
        """A pending node for ``op(*args)``, or the eager result when not fusable."""
        if op == "where":
            cond, a, b = args
            dt = _result_dtype((a, b))
            ok = (dt is not None and type(cond) is Lazy and cond.dtype == _BOOL
                  and (cond.value is not None or cond.ctype == dt)
                  and (type(a) is Lazy or type(b) is Lazy))
        else:
            dt = _result_dtype(args)
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
        node = Lazy(shape, _BOOL if op in COMPARE_OPS else dt, dt, op, args, imm, None, size)
        with self._lock:  # another thread's flush may be iterating the set
            self._pending.add(node)
        return node

    def _eager(self, op: str, args: tuple[Any, ...], extra: tuple[Any, ...] = ()) -> Any:
        """``op`` run now on the inner backend (not fusable: dtypes, scalars)."""
        self.stats["eager_ops"] += 1
        vals = [self._force(a) if type(a) is Lazy else a for a in args]
        return self._wrap(getattr(self.inner, op)(*vals, *extra))

    # ------------------------------------------------------- materialising
    def _force(self, p: Lazy) -> Any:
        """``p``'s inner primitive, running its pending expression if needed."""
        if p.value is None:
            with self._lock:
                if p.value is None:
                    if p.dtype == _BOOL:
                        # a comparison someone wants as a bool array: run it eagerly
                        # on its (fused) operands
                        vals = [self._force(a) if type(a) is Lazy else a for a in p.args]
                        p.value = getattr(self.inner, p.op)(*vals)
                        p.args = None
                        self._pending.discard(p)
                    else:
                        self._run_safely([p])
        return p.value

    def flush(self) -> None:
        """Materialise every pending expression something still holds."""
        with self._lock:
            while True:
                tops = _tops(self._pending)
                if not tops:
                    return
                groups: dict[Any, list[Lazy]] = {}
                for n in tops:
                    groups.setdefault((n.shape, n.ctype, n.dtype == _BOOL), []).append(n)
                del tops
                for (_, _, is_bool), nodes in groups.items():
                    if is_bool:
                        for n in nodes:
                            self._force(n)
                    else:
                        # passes of at most MAX_PASS_NODES nodes: thousands of live
                        # results of one shape never make a program larger than
                        # the kernel's register file
                        batch: list[Lazy] = []
                        total = 0
                        for n in nodes:
                            if batch and total + n.size > MAX_PASS_NODES:
                                self._run_safely(batch)
                                batch, total = [], 0
                            batch.append(n)
                            total += n.size
                        if batch:
                            self._run_safely(batch)
                        del batch
                del groups

    def _run_safely(self, roots: list[Lazy]) -> None:
        """``_run``, and if the fused pass fails, the same nodes evaluated op by op
        on the inner backend: a pending expression the fused kernel refuses must
        never stay pending, or every later materialisation on this backend (each
        finishes all pending work first) would fail on it too."""
        try:
            self._run(roots)
        except Exception:  # e.g. the kernel refusing a program; not KeyboardInterrupt
            self.stats["unfused_fallbacks"] += 1
            self._run_unfused(roots)

    def _run(self, roots: list[Lazy]) -> None:
        """Materialise ``roots`` (one shape and ctype, none inside another's DAG)
        in one fused pass; nodes inside their DAG that something else holds are
        stored by the same pass."""
        order, index, uses = self._collect(roots)
        if order:
            self._execute(order, index, _stored(order, uses, roots), roots[0].shape,
                          roots[0].ctype)

    def _run_unfused(self, roots: list[Lazy]) -> None:
        """Every pending node under ``roots`` computed by the inner backend's own
        op (same op, operands and order: IEEE-exact ops give the fused bits,
        transcendentals the inner backend's rounding)."""
        order, _, _ = self._collect(roots)
        B = self.inner
        for n in order:
            vals = [a.value if type(a) is Lazy else a for a in n.args]
            if n.op == "copy":
                v = vals[0]
                if tuple(B.shape(v)) != n.shape:
                    v = B.broadcast_to(v, n.shape)
                r = B.copy(v)
            elif n.imm is not None:
                r = getattr(B, n.op)(*vals, n.imm)
            else:
                r = getattr(B, n.op)(*vals)
            n.value = r
            n.args = None
            self._pending.discard(n)

    def _collect(self, roots: list[Lazy]) -> tuple[list[Lazy], dict[int, int], list[int]]:
        """The pending DAG under ``roots`` in topological order (operands of
        another shape are materialised first, by their own pass), each node's
        position, and how often each is an operand inside the DAG."""
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
                        self._force(a)   # a broadcast (smaller) operand: its own pass
        uses = [0] * len(order)
        for n in order:
            for a in n.args:
                if type(a) is Lazy and a.value is None:
                    j = index.get(id(a))
                    if j is not None:
                        uses[j] += 1
        return order, index, uses

    def _execute(self, order: list[Lazy], index: dict[int, int], outputs: tuple[int, ...],
                 shape: tuple[int, ...], T: np.dtype) -> None:
        # structure key, inputs and constants (one walk)
        inputs: list[Any] = []
        in_index: dict[int, int] = {}
        consts: list[float] = []
        imms: list[float] = []
        key_nodes = []
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
            key_nodes.append((n.op, tuple(codes), n.imm is not None))
        key = (T.char, len(inputs), len(consts), tuple(key_nodes), outputs)
        prog = self._cache.get(key)
        if prog is None:
            self.stats["cache_misses"] += 1
            prog = _compile(key_nodes, len(inputs), len(consts), outputs)
            self._cache[key] = prog
            if len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        else:
            self.stats["cache_hits"] += 1
            self._cache.move_to_end(key)
        arrays = []
        for leaf in inputs:
            a = self.inner.to_numpy(leaf.value)
            if a.dtype != T or any(s % T.itemsize for s in a.strides):
                a = np.array(a, dtype=T, order="C")   # (keeps a 0-d array 0-d)
            arrays.append(a)
        if prog.nregs > MAX_REGS:
            raise ValueError(f"Fusion: a program of {prog.nregs} registers (at most {MAX_REGS})")
        outs = [_owned_empty(shape, T) for _ in outputs]
        fused_eval(prog.prog, prog.nregs, arrays, consts, imms, outs, prog.out_regs,
                            shape, get_num_threads(), self.block)
        self.stats["kernel_calls"] += 1
        self.stats["nodes_fused"] += len(order)
        self.stats["outputs"] += len(outputs)
        for i, arr in zip(outputs, outs, strict=True):
            n = order[i]
            n.value = self.inner.from_numpy(arr)
            n.args = None
            self._pending.discard(n)

    # ----------------------------------------------------- recorded ops
    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return self._record("where", (cond, a, b))

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


def _unary(op: str) -> Any:
    def method(self: Fusion, a: Any) -> Any:
        return self._record(op, (a,))

    method.__name__ = op
    return method


def _param(op: str, pname: str, default: float) -> Any:
    def method(self: Fusion, a: Any, value: float = default) -> Any:
        if type(value) not in _PY_SCALARS:
            return self._eager(op, (a,), (value,))
        return self._record(op, (a,), value)

    method.__name__ = op
    return method


def _binary(op: str) -> Any:
    def method(self: Fusion, a: Any, b: Any) -> Any:
        return self._record(op, (a, b))

    method.__name__ = op
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
    method.__doc__ = default.__doc__
    return method


def _forwarder(name: str) -> Any:
    def method(self: Fusion, *args: Any, **kwargs: Any) -> Any:
        return self.forward(name, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"Forwarded to the inner backend's ``{name}`` (arguments materialised)."
    return method


for _op in UNARY_OPS:
    setattr(Fusion, _op, _unary(_op))
for _op, (_pname, _default) in PARAM_OPS.items():
    setattr(Fusion, _op, _param(_op, _pname, _default))
for _op in BINARY_OPS + COMPARE_OPS:
    setattr(Fusion, _op, _binary(_op))
for _op in COMPOSED_OPS:
    setattr(Fusion, _op, _composed(_op))
# Every other public Backend method goes to the inner backend (its fast path,
# never Backend's host round-trip default).
for _name in dir(Backend):
    if _name.startswith("_") or _name in _OWN or not callable(getattr(Backend, _name)):
        continue
    setattr(Fusion, _name, _forwarder(_name))
