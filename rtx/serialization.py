"""``rtx.save(obj, path)`` / ``rtx.load(path)``: state dicts as ``.npz`` files.

Nothing is pickled (the file is read with ``allow_pickle=False``), so loading
a file never runs code.  ``obj`` is a tree of dicts (string or int keys),
lists and tuples whose leaves are numpy arrays, rtx tensors (saved as their
values), numpy scalars, Python ``int`` / ``float`` / ``bool`` / ``str`` or
``None`` — a module's ``state_dict()``, an optimiser's ``state_dict()`` or a
dict holding several.

Key scheme
----------
Every array leaf is stored as one ``.npz`` member named by its path from the
root: the keys along the path joined with ``/`` (list and tuple positions and
int dict keys written in decimal; ``%``, ``/``, ``\\`` and control characters
inside a key escaped as ``%XX``, e.g. ``%25`` and ``%2F``).  A module state dict
``{"fc.weight": w}`` is therefore the member ``fc.weight`` and an optimiser's
``{"state": {0: {"exp_avg": m}}}`` the member ``state/0/exp_avg``: plain
``numpy.load`` reads them.  The tree's
structure — container types, int vs str keys, and the non-array leaves — is
one JSON document in the member ``__rtx_tree__`` (a 0-d unicode array), in
which each array leaf is ``{"t": "array", "key": <member name>}``.
"""

from __future__ import annotations

import io
import json
import math
import os
from typing import Any

import numpy as np

from .tensor import Tensor

TREE_KEY = "__rtx_tree__"
_FORMAT = "rtx.save/1"


def _escape(key: Any) -> str:
    """``key`` as one path segment of a zip member name: ``%``, ``/``, ``\\`` and
    control characters (which zip names cannot hold: a NUL ends the name) become
    ``%XX``; the tree keeps the key itself, so this need only be unique."""
    return "".join(f"%{ord(c):02X}" if c in "%/\\" or ord(c) < 32 or ord(c) == 127 else c
                   for c in str(key))


def _encode(obj: Any, path: list[str], arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(obj, Tensor):
        obj = np.array(obj.numpy(), copy=True)
    if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
        obj = np.asarray(obj)
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biufU":
            raise TypeError(f"rtx.save: cannot save an array of dtype {obj.dtype} at "
                            f"{'/'.join(path) or '<root>'} (numeric arrays only)")
        key = "/".join(path) if path else "__root__"
        if key == TREE_KEY or key in arrays:
            raise ValueError(f"rtx.save: two values map to the same key {key!r}")
        arrays[key] = obj
        return {"t": "array", "key": key}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(f"rtx.save: dict keys must be str or int, got {k!r}")
            items.append([k, _encode(v, path + [_escape(k)], arrays)])
        return {"t": "dict", "items": items}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {"t": kind,
                "items": [_encode(v, path + [str(i)], arrays) for i, v in enumerate(obj)]}
    if obj is None or isinstance(obj, (bool, int, str)):
        return {"t": "value", "v": obj}
    if isinstance(obj, float):
        if math.isfinite(obj):
            return {"t": "value", "v": obj}
        return {"t": "float", "v": repr(obj)}  # nan / inf / -inf, kept exact
    raise TypeError(
        f"rtx.save: cannot save a {type(obj).__name__} at {'/'.join(path) or '<root>'}; "
        "only dicts, lists, tuples, arrays, tensors, numbers, strings and None are saved "
        "(no pickled objects)"
    )


def _decode(node: Any, arrays: Any) -> Any:
    t = node["t"]
    if t == "array":
        return arrays[node["key"]]
    if t == "dict":
        return {k: _decode(v, arrays) for k, v in node["items"]}
    if t == "list":
        return [_decode(v, arrays) for v in node["items"]]
    if t == "tuple":
        return tuple(_decode(v, arrays) for v in node["items"])
    if t == "value":
        return node["v"]
    if t == "float":
        return float(node["v"])
    raise ValueError(f"rtx.load: unknown node type {t!r} in the file's tree")


def save(obj: Any, path: str | os.PathLike[str] | io.IOBase) -> None:
    """Save a state dict (or a tree of them) to an ``.npz`` file (see the module doc)."""
    arrays: dict[str, np.ndarray] = {}
    tree = _encode(obj, [], arrays)
    doc = json.dumps({"format": _FORMAT, "tree": tree})
    arrays[TREE_KEY] = np.array(doc)
    if isinstance(path, (str, os.PathLike)):
        # np.savez appends ".npz" to a name without it; write to the exact path
        with open(path, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]
    else:
        np.savez(path, **arrays)  # type: ignore[arg-type]


def load(path: str | os.PathLike[str] | io.IOBase) -> Any:
    """Load what ``rtx.save`` wrote: array leaves come back as numpy arrays.

    A plain ``.npz`` of arrays (no ``__rtx_tree__`` member) loads as a flat dict.
    Reading uses ``allow_pickle=False``: an object array in the file is an error.
    """
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    doc = arrays.pop(TREE_KEY, None)
    if doc is None:
        return arrays
    meta = json.loads(str(doc))
    if meta.get("format") != _FORMAT:
        raise ValueError(f"rtx.load: unknown format {meta.get('format')!r}")
    return _decode(meta["tree"], arrays)


__all__ = ["load", "save"]
