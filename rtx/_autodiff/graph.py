"""The tape: one ``Node`` per recorded op, and the backward walk.

A non-leaf tensor points to the ``Node`` that made it (or, for one output of a
multi-output ``Function``, to an ``OutputEdge`` naming the node and the output
index).  A node points to its inputs' nodes, or to the leaf tensors themselves
(where gradients accumulate).  Nothing points back from a node to its outputs
and saved state holds backend primitives, never ``Tensor`` s, so there are no
reference cycles: dropping the output tensor frees the graph.

The engine walks the graph without recursion (no depth limit): nodes wait in a
heap ordered by creation sequence, so each node's rule runs once all its
consumers have contributed (fan-out gradients are *summed*).  Each
intermediate gradient is freed as soon as it is consumed, and the graph's
saved state is released unless ``retain_graph=True``.

Gradient buffers handed to leaves never alias each other or a user's buffer:
a rule that may pass its incoming gradient through (``Op.fresh_grads`` False,
e.g. ``add`` giving the same buffer to both inputs, or ``reshape`` returning a
view) marks what it returns as possibly shared, and a possibly-shared buffer is
copied before it becomes a leaf's ``.grad``.  So an in-place update of one
``.grad`` (``zero_()``, gradient clipping) never changes another.
"""

from __future__ import annotations

import itertools
import threading
from heapq import heappop, heappush
from typing import Any

import numpy as np

from .._kernels import SlotMaker
from .sparse import RowSparseGrad, add_grads, densify

# Guards the read-modify-write of leaves' ``.grad`` so that concurrent
# backward() calls sharing a leaf all land (the sum of every call's gradient).
_grad_lock = threading.RLock()


_next_seq = itertools.count().__next__


class Node:
    """One recorded op: its backward rule, saved state and inputs (made by
    ``new_node``).

    ``seq`` increases with creation, and a node is always created after the
    nodes of its inputs, so processing nodes in decreasing ``seq`` visits every
    consumer before what it consumes (a reverse topological order).
    """

    __slots__ = ("op", "ctx", "parents", "released", "seq", "versions", "dtype",
                 "backend", "mixed", "__weakref__")

    op: Any          # has .name and .backward(ctx, B, grad) -> tuple of grads
    ctx: Any         # saved state (None once released)
    parents: tuple[Any, ...]   # per input: Node, OutputEdge, leaf Tensor, or None (no grad)
    released: bool
    seq: int
    # the (single) output's dtype: the gradient reaching the node is cast to it
    # before the rule runs, as PyTorch's engine does (None: multi-output nodes,
    # whose rule casts each output's gradient itself)
    dtype: Any
    # [(version counter, version at save, input index or -1 = output, prim)] of
    # the buffers the forward saved, checked before backward (None: none saved)
    versions: list[tuple[list[int], int, Any, Any]] | None
    # the backend the forward ran on, whose primitives ``ctx`` holds (None: the
    # backward's, as for a ``Function``); ``mixed``: an input lives on another
    # backend (a Fusion and its inner one, ``Backend.adopt``), so the gradients
    # sent to the inputs are moved to each input's backend
    backend: Any
    mixed: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("nodes are made by new_node()")

    def name(self) -> str:
        return getattr(self.op, "name", type(self.op).__name__)

    @property
    def next_functions(self) -> tuple[Any, ...]:
        """The inputs' nodes / leaf tensors (``None`` for inputs needing no grad)."""
        return self.parents

    def __repr__(self) -> str:
        return f"<{self.name()}Backward>"


# One node per recorded op: object.__new__ and the slot stores in C (rtx/_record.pxi)
_make_node = SlotMaker(Node, ("op", "ctx", "parents", "dtype", "backend", "mixed", "seq",
                              "released", "versions"), (False, None)).make


def new_node(op: Any, ctx: Any, parents: tuple[Any, ...], dtype: Any = None,
             backend: Any = None, mixed: bool = False) -> Node:
    """A node of ``op``, next in ``seq``, not released, no saved versions yet."""
    return _make_node(Node, op, ctx, parents, dtype, backend, mixed, _next_seq())


class OutputEdge:
    """Output ``index`` of a multi-output ``node`` (what such an output's ``_node`` is)."""

    __slots__ = ("node", "index", "n", "__weakref__")

    def __init__(self, node: Node, index: int, n: int) -> None:
        self.node = node
        self.index = index
        self.n = n

    def name(self) -> str:
        return self.node.name()

    def __repr__(self) -> str:
        return f"<{self.name()}Backward output {self.index}>"


def _released_error(n: Node) -> RuntimeError:
    return RuntimeError(
        f"Trying to backward through the graph a second time ({n.name()}Backward's saved "
        "state was freed by the first backward()). Pass retain_graph=True to the first "
        "backward() (or grad()) if you need to go through the graph again."
    )


def _check_versions(B: Any, n: Node) -> None:
    """Raise if a buffer ``n`` saved for backward was modified in place since."""
    for vc, saved, i, prim in n.versions or ():
        now = vc[0]
        if now != saved:
            what = i if isinstance(i, str) else "its output" if i < 0 else f"its input {i}"
            dt = np.dtype(B.dtype(prim))
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified "
                f"by an inplace operation: [rtx.{dt} {list(B.shape(prim))}], {what} saved "
                f"by {n.name()}Backward, is at version {now}; expected version {saved} "
                "instead. Hint: do the in-place update (an optimiser step, x.add_(), "
                "x -= ...) after backward(), or clone() the tensor before modifying it."
            )


def _runs_needed(roots: list[Any], targets: dict[int, Any]) -> set[int]:
    """For ``grad()``: ids of the nodes whose backward must run to reach ``targets``
    (a node runs iff one of its inputs is a target or itself runs); iterative."""
    reach: dict[int, bool] = {}  # node id -> some target at or below it
    run: set[int] = set()
    stack: list[tuple[Node, int]] = []
    for r in roots:
        if type(r) is OutputEdge:
            r = r.node
        if type(r) is Node and id(r) not in reach:
            stack.append((r, 0))
            reach[id(r)] = False  # provisional (the graph is a DAG: no cycle can see it)
        while stack:
            node, i = stack.pop()
            parents = node.parents
            while i < len(parents):
                p = parents[i]
                i += 1
                if type(p) is OutputEdge:
                    p = p.node
                if type(p) is Node and id(p) not in reach:
                    reach[id(p)] = False
                    stack.append((node, i))
                    stack.append((p, 0))
                    break
            else:
                runs = False
                for p in parents:
                    if p is None:
                        continue
                    if type(p) is OutputEdge:
                        p = p.node
                    k = id(p)
                    if k in targets or reach.get(k, False):
                        runs = True
                        break
                if runs:
                    run.add(id(node))
                reach[id(node)] = runs or id(node) in targets
    return run


def _engine(
    B: Any,
    roots: list[tuple[Any, Any, bool]],
    retain_graph: bool,
    capture: dict[int, Any] | None = None,
) -> dict[int, list[Any]]:
    """Run backward from ``roots`` = [(node | edge | leaf tensor, grad prim, shared)].

    Nodes are run from a heap ordered by decreasing ``seq``: a node runs only
    after every node that consumed it (all have larger ``seq``), so its
    gradient is complete (the sum over all paths); nodes no gradient reaches
    are never visited.  No recursion, so graph depth is unlimited.

    Without ``capture``: returns ``{id(leaf): [leaf, grad, shared]}`` for every
    reached leaf.  With ``capture`` (``{id(node or leaf): output index or
    None}``): returns ``{id: [grad, shared]}`` for those targets instead, and
    runs (and releases) only the nodes on a path to a target, as
    ``torch.autograd.grad`` does.
    """
    needed = None if capture is None else _runs_needed([r[0] for r in roots], capture)
    grads: dict[int, Any] = {}
    shared: set[int] = set()
    leaf_grads: dict[int, list[Any]] = {}
    captured: dict[int, list[Any]] = {}
    heap: list[tuple[int, Node]] = []
    # Each node's rule runs on the backend its forward ran on (``Node.backend``; B
    # when unset), and the gradients it receives are that backend's primitives: a
    # node whose inputs lived on another backend (``Node.mixed``: a Fusion and its
    # inner backend) has each gradient moved to its input's backend.  Leaves'
    # gradients are moved at the end, all of one backend after one flush (a
    # Fusion's pending gradients computed in one pass).
    # Sums of a node's gradient paths go into the first one's buffer when the
    # engine owns it alone (never shared: not a user's gradient, not one buffer
    # sent to two inputs); not with ``capture``, whose captured gradients may be
    # the very buffers a rule passes on.
    own_sums = capture is None

    def deliver_slow(parent: Any, ig: Any, sh: bool, src: Any) -> None:
        """An edge into one output of a multi-output node, or a leaf (``ig`` a
        primitive of backend ``src``)."""
        if type(parent) is OutputEdge:
            node = parent.node
            Bn = node.backend or B
            if src is not Bn:
                ig = _move(Bn, src, ig)
            k = id(node)
            slot = grads.get(k)
            if slot is None:
                slot = grads[k] = [None] * parent.n
                heappush(heap, (-node.seq, node))
            if type(ig) is RowSparseGrad:  # only a leaf keeps a row-sparse gradient
                ig = densify(Bn, ig)
            prev = slot[parent.index]
            if prev is None:
                slot[parent.index] = ig
                if sh:
                    shared.add(k)  # conservative: any shared output marks the node
            else:
                slot[parent.index] = Bn.add(prev, ig)
        else:  # a leaf tensor
            entry = leaf_grads.get(id(parent))
            if entry is None:
                leaf_grads[id(parent)] = [parent, ig, sh, src]
            else:
                Bl = entry[3]
                if src is not Bl:  # two backends' gradients: summed on the leaf's
                    Bl = parent._ad.inner
                    entry[1] = _move(Bl, entry[3], entry[1])
                    ig = _move(Bl, src, ig)
                    entry[3] = Bl
                entry[1] = add_grads(Bl, entry[1], ig)
                entry[2] = False

    def deliver_node(node: Node, ig: Any, sh: bool) -> None:
        """A gradient into a single-output node: sum on fan-out, queue on first arrival."""
        k = id(node)
        Bn = node.backend or B
        if type(ig) is RowSparseGrad:  # only a leaf keeps a row-sparse gradient
            ig = densify(Bn, ig)
        prev = grads.get(k)
        if prev is None:
            grads[k] = ig
            heappush(heap, (-node.seq, node))
            if sh:
                shared.add(k)
        elif (own_sums and k not in shared and Bn.dtype(prev) == Bn.dtype(ig)
              and tuple(Bn.shape(prev)) == tuple(Bn.shape(ig)) and Bn.is_contiguous(prev)):
            # prev is the engine's own buffer (a fresh gradient, or a sum it made):
            # add into it instead of allocating a second [shape] array for the sum
            grads[k] = Bn.inplace("add", prev, ig)
        else:
            grads[k] = Bn.add(prev, ig)
            shared.discard(k)

    for target, g, sh in roots:
        if type(target) is Node:
            deliver_node(target, g, sh)
        else:
            deliver_slow(target, g, sh, _backend_of(target, B))

    v: Any = None   # (the version loop's entry: cleared after the walk)
    while heap:
        n = heappop(heap)[1]
        key = id(n)
        g = grads.pop(key)
        ctx = n.ctx  # read once: another thread's backward may release it meanwhile
        if ctx is None or n.released:
            raise _released_error(n)
        Bn = n.backend or B
        vs = n.versions
        if vs is not None:
            for v in vs:
                if v[0][0] != v[1]:  # a saved buffer was modified in place since
                    _check_versions(Bn, n)
        dt = n.dtype
        if dt is not None and Bn.dtype(g) != dt:
            # a consumer of another dtype (a float32 output times a float64 tensor)
            # sent a gradient of its own dtype: every rule gets its output's dtype
            g = Bn.cast(g, dt)
        g_shared = key in shared
        if g_shared:
            shared.discard(key)
        if needed is not None and capture is not None:
            if key in capture:
                captured[key] = [list(g) if type(g) is list else g, g_shared]
            if key not in needed:
                continue
        op = n.op
        in_grads = op.backward(ctx, Bn, g)
        del g
        fresh = op.fresh_grads
        if fresh:
            sh = False
        elif fresh is None:  # unknown (user code): may even return its saved state
            sh = True
        else:
            sh = g_shared or sum(1 for ig in in_grads if ig is not None) > 1
        mixed = n.mixed
        for parent, ig in zip(n.parents, in_grads, strict=False):
            if ig is None or parent is None:
                continue
            if type(parent) is Node:
                if mixed:
                    Bp = parent.backend or B
                    if Bp is not Bn:
                        ig = _move(Bp, Bn, ig)
                deliver_node(parent, ig, sh)
            else:
                deliver_slow(parent, ig, sh, Bn)
        del in_grads, ctx
        if not retain_graph:
            n.ctx = None
            n.versions = None  # holds saved buffers too
            n.released = True
    # the walk's last gradient and version entry: a pending value still held here
    # would be stored by the flush below (a Fusion's pass of the leaves' gradients)
    ig = v = vs = None
    _leaves_home(leaf_grads)
    if capture is not None:
        for k, entry in leaf_grads.items():
            if k in capture:
                captured[k] = [entry[1], entry[2]]
        return captured
    return leaf_grads


def _backend_of(target: Any, B: Any) -> Any:
    """The backend whose primitives a gradient for ``target`` is (engine default B)."""
    if type(target) is Node:
        return target.backend or B
    if type(target) is OutputEdge:
        return target.node.backend or B
    return target._ad.inner  # a leaf tensor


def _move(dst: Any, src: Any, g: Any) -> Any:
    """Gradient ``g`` (a primitive of backend ``src``, or a ``RowSparseGrad``) as
    one of ``dst`` (``Backend.adopt``)."""
    if type(g) is RowSparseGrad:
        return RowSparseGrad(g._idx, dst.adopt(g._vals, src), g._shape)
    return dst.adopt(g, src)


def _leaves_home(leaf_grads: dict[int, list[Any]]) -> None:
    """Each ``[leaf, grad, shared, grad's backend]`` entry -> ``[leaf, grad, shared]``
    with the gradient on the leaf's backend; a backend with pending work (a Fusion)
    is flushed once first, so its leaves' gradients (and the copies of shared ones)
    are computed together."""
    away = [e for e in leaf_grads.values() if e[3] is not e[0]._ad.inner]
    if away:
        for e in away:
            if e[2] and type(e[1]) is not RowSparseGrad:
                # a possibly shared buffer is copied before it becomes a .grad: on its
                # own backend, before the flush (a Fusion's copy of a pending
                # gradient is one more output of the same pass, not a second pass)
                e[1] = e[3].copy(e[1])
                e[2] = False
        flushed: set[int] = set()
        for e in away:
            src = e[3]
            if id(src) not in flushed:
                flushed.add(id(src))
                flush = getattr(src, "flush", None)
                if flush is not None:
                    flush()
        for e in away:
            e[1] = _move(e[0]._ad.inner, e[3], e[1])
    for e in leaf_grads.values():
        del e[3]


class _HookHandle:
    """What ``register_post_backward_hook`` returns: ``remove()`` unregisters."""

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        self.key = key

    def remove(self) -> None:
        _post_backward_hooks.pop(self.key, None)


_post_backward_hooks: dict[int, Any] = {}


_next_hook = itertools.count().__next__


def register_post_backward_hook(fn: Any) -> _HookHandle:
    """Call ``fn(leaves)`` at the end of every ``backward()``, once every reached
    leaf's ``.grad`` is accumulated; ``leaves`` is the list of those leaf tensors.

    Hooks run in registration order, outside the engine's walk (so a hook sees
    final gradients, never partial sums); ``autograd.grad()`` (which touches no
    ``.grad``) runs none.  Used by ``rtx.distributed.DistributedDataParallel`` to
    all-reduce gradients.  Returns a handle whose ``remove()`` unregisters ``fn``.
    """
    key = _next_hook()
    _post_backward_hooks[key] = fn
    return _HookHandle(key)
