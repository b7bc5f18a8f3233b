"""The naming rules of heterogeneous graphs: the one place that says what a node
type or a relation may be called, and how an edge type becomes a key.

A name is a non-empty ``str`` without ``/`` or ``.``, without control characters,
without ``__`` and without a leading or trailing ``_``.  These rules make every
key derived from names injective:

* ``"<src___rel___dst>"`` (PyG's ``ModuleDict`` key for a tuple: the state_dict
  path of a per-relation layer, where ``.`` separates modules),
* ``"src__rel__dst"`` (the ``.npz`` member of an edge type, under ``edge_index/``,
  where ``/`` separates the path).

Without the rule on ``_`` the types ``("a_", "r", "b")`` and ``("a", "r", "_b")``
would share a key; without the one on ``__`` a name could contain the separator.
"""

from __future__ import annotations

from typing import Any

EdgeType = tuple[str, str, str]
NodeType = str

__all__ = ["EdgeType", "NodeType", "check_edge_type", "check_name", "edge_key",
           "edge_module_key", "parse_edge_key"]


def check_name(name: Any, what: str = "node type") -> str:
    """``name`` if it is a valid node type / relation name, else ``TypeError``
    (not a non-empty str) or ``ValueError`` (a forbidden character or sequence)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what} must be a non-empty str, got {name!r}")
    bad = next((c for c in name if c in "/." or ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise ValueError(f"{what} {name!r} may not contain {bad!r} (names may not hold '/', "
                         "'.' or control characters)")
    if "__" in name or name.startswith("_") or name.endswith("_"):
        raise ValueError(f"{what} {name!r} may not contain '__' or start or end with '_'")
    return name


def check_edge_type(edge_type: Any, what: str = "edge type") -> EdgeType:
    """``edge_type`` as a ``(src_type, relation, dst_type)`` tuple of valid names."""
    if (not isinstance(edge_type, (tuple, list)) or len(edge_type) != 3):
        raise ValueError(f"{what} {edge_type!r} must be a (src_type, relation, dst_type) "
                         "tuple")
    s, r, d = edge_type
    check_name(s, f"{what} {tuple(edge_type)!r}: source type")
    check_name(r, f"{what} {tuple(edge_type)!r}: relation")
    check_name(d, f"{what} {tuple(edge_type)!r}: destination type")
    return (s, r, d)


def edge_key(edge_type: EdgeType) -> str:
    """``"src__rel__dst"``: an edge type as one path segment (file member names)."""
    return "__".join(check_edge_type(edge_type))


def parse_edge_key(key: str, what: str = "edge key") -> EdgeType:
    """The inverse of ``edge_key`` (``ValueError`` when ``key`` is not one)."""
    parts = key.split("__")
    if len(parts) != 3:
        raise ValueError(f"{what} {key!r} must be '<src>__<relation>__<dst>'")
    return check_edge_type(tuple(parts), what)


def edge_module_key(edge_type: EdgeType) -> str:
    """``"<src___rel___dst>"``: PyG's (2.4+) ``ModuleDict`` key for an edge type."""
    return "<" + "___".join(check_edge_type(edge_type)) + ">"
