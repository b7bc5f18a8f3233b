"""The tape: one ``Node`` per recorded op, and the backward walk.

A non-leaf tensor points to the ``Node`` that made it; a node points to its
inputs' nodes, or to the leaf tensors themselves (where gradients
accumulate).  Nothing points back from a node to its output, so there are no
reference cycles: dropping the output tensor frees the graph.

``backward`` orders the graph iteratively (no recursion limit), runs each
node's rule once all its consumers have contributed (fan-out gradients are
*summed*), frees each intermediate gradient as soon as it is consumed, and
releases the graph unless ``retain_graph=True``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..tensor import Tensor


class Node:
    """One recorded op: its backward rule, saved state and inputs."""

    __slots__ = ("op", "ctx", "parents", "released", "__weakref__")

    def __init__(self, op: Any, ctx: Any, parents: tuple[Any, ...]) -> None:
        self.op = op            # has .name and .backward(ctx, B, grad) -> tuple of grads
        self.ctx = ctx          # saved state (None once released)
        self.parents = parents  # per input: Node, leaf Tensor, or None (no grad)
        self.released = False

    def name(self) -> str:
        return getattr(self.op, "name", type(self.op).__name__)

    def __repr__(self) -> str:
        return f"<{self.name()}Backward>"


def _topo_order(root: Node) -> list[Node]:
    """Nodes reachable from ``root``, inputs before consumers (iterative DFS)."""
    order: list[Node] = []
    visited = {id(root)}
    stack: list[tuple[Node, int]] = [(root, 0)]
    while stack:
        node, i = stack.pop()
        parents = node.parents
        while i < len(parents):
            p = parents[i]
            i += 1
            if type(p) is Node and id(p) not in visited:
                visited.add(id(p))
                stack.append((node, i))
                stack.append((p, 0))
                break
        else:
            order.append(node)
    return order


def run_backward(root: Tensor, grad: Any, retain_graph: bool) -> None:
    """Accumulate d(root)/d(leaf) . grad into every reachable leaf's ``.grad``."""
    from ..tensor import Tensor

    B = root._ad.inner
    node = root._node
    leaf_grads: dict[int, list[Any]] = {}
    if node is None:  # backward on a leaf
        leaf_grads[id(root)] = [root, grad]
    else:
        grads: dict[int, Any] = {id(node): grad}
        for n in reversed(_topo_order(node)):
            g = grads.pop(id(n), None)
            if g is None:
                continue
            if n.released:
                raise RuntimeError(
                    f"Trying to backward through the graph a second time ({n.name()} was "
                    "released after the first backward). Pass retain_graph=True to the "
                    "first backward() if you need to call it again."
                )
            in_grads = n.op.backward(n.ctx, B, g)
            del g
            for parent, ig in zip(n.parents, in_grads):
                if parent is None or ig is None:
                    continue
                if type(parent) is Node:
                    key = id(parent)
                    prev = grads.get(key)
                    grads[key] = ig if prev is None else B.add(prev, ig)
                else:  # a leaf tensor
                    entry = leaf_grads.get(id(parent))
                    if entry is None:
                        leaf_grads[id(parent)] = [parent, ig]
                    else:
                        entry[1] = B.add(entry[1], ig)
            if not retain_graph:
                n.ctx = None
                n.released = True
    for leaf, g in leaf_grads.values():
        gshape = tuple(B.shape(g))
        if gshape != leaf.shape:
            raise RuntimeError(
                f"internal error: gradient of shape {gshape} for a leaf of shape {leaf.shape}"
            )
        if leaf.grad is None:
            leaf.grad = Tensor._make(g, leaf._ad)
        else:
            leaf.grad = Tensor._make(B.add(leaf.grad._value, g), leaf._ad)
