"""``HeteroData``: a heterogeneous graph, PyTorch Geometric's data object.

Node stores are keyed by node type (``data["paper"]``), edge stores by
``(src_type, relation, dst_type)`` (``data["author", "writes", "paper"]``, or
``data["writes"]`` / ``data["author", "paper"]`` when that names one edge type),
and graph-level attributes live on the object itself (``data.target``).  A store
holds any attributes (``x``, ``y``, ``train_mask``, ``edge_index``, ``edge_attr``,
``num_nodes``, ...); ``data.<attr>_dict`` collects one attribute over the stores
that have it (``x_dict``, ``edge_index_dict``, ``y_dict``), as in PyG.

Values are kept as they are assigned (rtx tensors, numpy arrays, numbers); rtx's
readers and generators fill stores with rtx tensors (zero-copy over their arrays),
so ``model(data.x_dict, data.edge_index_dict)`` works as it does in PyG.  Node
types without features are stores with only ``num_nodes`` (and maybe labels).

``validate()`` checks what the layers rely on (names, ``edge_index`` shapes,
dtypes and ranges, attribute lengths, finite features) and raises ``ValueError``,
``TypeError`` or ``IndexError`` naming the store and attribute.
"""

from __future__ import annotations

import copy as _copy
import importlib
import math
import os
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from .._device import check_device
from ..backend.index_plan import EdgeIndex
from ..creation import from_numpy
from ..serialization import load as _load
from ..serialization import save as _save
from ..tensor import Tensor
from .naming import EdgeType, check_edge_type, check_name

__all__ = ["EdgeStore", "HeteroData", "NodeStore"]

_FORMAT = "rtx.HeteroData/1"
# node-level attributes PyG looks at (in this order) to infer a store's num_nodes
_NODE_ATTRS = ("x", "y", "train_mask", "val_mask", "test_mask", "n_id", "batch", "year", "pos")


def _shape(v: Any) -> tuple[int, ...] | None:
    """The shape of an array-like value (rtx tensor, numpy array, torch tensor, an
    ``EdgeIndex`` as the ``[2, E]`` array it stands for), else None."""
    if isinstance(v, (Tensor, np.ndarray)):
        return tuple(v.shape)
    if isinstance(v, EdgeIndex):   # a sampled batch's edge_index (rtx.loader)
        return (2, v.num_edges)
    s = getattr(v, "shape", None)
    if isinstance(s, tuple) or (s is not None and type(s).__name__ == "Size"):
        try:
            return tuple(int(d) for d in s)
        except TypeError:
            return None
    return None


def _host(v: Any) -> np.ndarray:
    """A numpy view of an array-like value (zero-copy for rtx tensors and arrays; an
    ``EdgeIndex`` becomes its int64 ``[2, E]`` array, a copy)."""
    if isinstance(v, Tensor):
        return v.numpy()
    if isinstance(v, EdgeIndex):
        return np.stack([v.src.indices, v.dst.indices])
    if isinstance(v, np.ndarray):
        return v
    if hasattr(v, "detach") and hasattr(v, "cpu"):  # a torch tensor
        return np.asarray(v.detach().cpu().numpy())
    return np.asarray(v)


class _Store:
    """Attributes of one node type, one edge type, or the graph (PyG's storage)."""

    def __init__(self, parent: HeteroData | None, key: Any) -> None:
        object.__setattr__(self, "_mapping", {})
        # a weak reference, as PyG's storages hold theirs: a HeteroData and its
        # stores form no reference cycle, so a batch's buffers are freed as soon as
        # the batch is dropped (not at the cyclic collector's next full pass)
        object.__setattr__(self, "_parent", None if parent is None else weakref.ref(parent))
        object.__setattr__(self, "_key", key)

    def _data(self) -> HeteroData | None:
        """The HeteroData this store belongs to (None once it is gone)."""
        ref = self._parent
        return None if ref is None else ref()

    # attribute access = item access, as in PyG
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self._mapping[name]
        except KeyError:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute "
                                 f"'{name}'") from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__}: attribute names may not start "
                                 f"with '_' (got {name!r})")
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self._mapping[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> Any:
        return self._mapping[name]

    def __setitem__(self, name: str, value: Any) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"attribute names must be non-empty str, got {name!r}")
        if value is None:
            self._mapping.pop(name, None)  # PyG: assigning None deletes
        else:
            self._mapping[name] = value

    def __delitem__(self, name: str) -> None:
        del self._mapping[name]

    def __contains__(self, name: object) -> bool:
        return name in self._mapping

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping)

    def __len__(self) -> int:
        return len(self._mapping)

    def keys(self) -> list[str]:
        return list(self._mapping)

    def values(self) -> list[Any]:
        return list(self._mapping.values())

    def items(self) -> list[tuple[str, Any]]:
        return list(self._mapping.items())

    def get(self, name: str, default: Any = None) -> Any:
        return self._mapping.get(name, default)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._mapping)

    def __copy__(self) -> _Store:
        out = type(self)(self._data(), self._key)
        out._mapping.update(self._mapping)
        return out

    def __getstate__(self) -> dict[str, Any]:
        return {"mapping": self._mapping, "parent": self._data(), "key": self._key}

    def __setstate__(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "_mapping", state["mapping"])
        parent = state["parent"]
        object.__setattr__(self, "_parent", None if parent is None else weakref.ref(parent))
        object.__setattr__(self, "_key", state["key"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_body(self._mapping)})"


class NodeStore(_Store):
    """The attributes of one node type (``data["paper"]``)."""

    @property
    def node_type(self) -> str:
        return self._key

    @property
    def num_nodes(self) -> int | None:
        """``num_nodes`` when set, else the length of ``x`` (or of the first
        node-level attribute PyG would look at, then of any array attribute)."""
        if "num_nodes" in self._mapping:
            return int(self._mapping["num_nodes"])
        for name in _NODE_ATTRS:
            s = _shape(self._mapping.get(name))
            if s:
                return s[0]
        for v in self._mapping.values():
            s = _shape(v)
            if s:
                return s[0]
        return None

    @num_nodes.setter
    def num_nodes(self, n: int) -> None:
        self["num_nodes"] = n

    @property
    def num_node_features(self) -> int:
        """Feature width (``x.shape[-1]``; 0 without ``x``; 1 for a 1-D ``x``)."""
        s = _shape(self._mapping.get("x"))
        if s is None:
            return 0
        return 1 if len(s) == 1 else s[-1]

    num_features = num_node_features


class EdgeStore(_Store):
    """The attributes of one edge type (``data["author", "writes", "paper"]``)."""

    @property
    def edge_type(self) -> EdgeType:
        return self._key

    @property
    def num_edges(self) -> int:
        """``edge_index.shape[1]`` (else the length of ``edge_attr``; else 0)."""
        s = _shape(self._mapping.get("edge_index"))
        if s is not None and len(s) == 2:
            return s[1]
        s = _shape(self._mapping.get("edge_attr"))
        return s[0] if s else 0

    def size(self, dim: int | None = None) -> Any:
        """``(num_src_nodes, num_dst_nodes)`` (``None`` where unknown), as PyG."""
        p = self._data()
        src, _, dst = self._key
        sz = (p[src].num_nodes if p is not None and src in p.node_types else None,
              p[dst].num_nodes if p is not None and dst in p.node_types else None)
        return sz if dim is None else sz[dim]


class HeteroData:
    """A heterogeneous graph (PyTorch Geometric's ``HeteroData``).

    >>> import numpy as np, rtx
    >>> data = rtx.data.HeteroData()
    >>> data["paper"].x = rtx.randn(4, 8, seed=0)
    >>> data["author"].num_nodes = 3            # a node type without features
    >>> data["author", "writes", "paper"].edge_index = np.array([[0, 1, 2], [0, 0, 3]])
    >>> data.metadata()
    (['paper', 'author'], [('author', 'writes', 'paper')])

    ``HeteroData(dict)`` builds from ``{node_type: {attr: value}, edge_type:
    {attr: value}, attr: value}`` (keyword arguments too), as PyG's constructor.
    """

    def __init__(self, _mapping: Mapping[Any, Any] | None = None, **kwargs: Any) -> None:
        object.__setattr__(self, "_global", _Store(self, None))
        object.__setattr__(self, "_nodes", {})
        object.__setattr__(self, "_edges", {})
        for key, value in {**dict(_mapping or {}), **kwargs}.items():
            if isinstance(value, Mapping) and not isinstance(value, _Store):
                store = self[key]
                for k, v in value.items():
                    store[k] = v
            elif isinstance(value, _Store):
                self[key]._mapping.update(value._mapping)
            else:
                self[key] = value

    # ------------------------------------------------------------ stores
    def _edge_lookup(self, key: Any) -> EdgeType | None:
        """The one edge type a relation name or a (src, dst) pair names, if any."""
        if isinstance(key, str):
            hits = [et for et in self._edges if et[1] == key]
        else:
            hits = [et for et in self._edges if (et[0], et[2]) == tuple(key)]
        if len(hits) > 1:
            raise KeyError(f"HeteroData: {key!r} names several edge types {hits}; "
                           "use the full (src_type, relation, dst_type)")
        return hits[0] if hits else None

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            if key in self._nodes:
                return self._nodes[key]
            et = self._edge_lookup(key)
            if et is not None:
                return self._edges[et]
            if key in self._global:
                return self._global[key]
            node = self._nodes[check_name(key)] = NodeStore(self, key)
            return node
        if isinstance(key, tuple) and len(key) == 3:
            if key in self._edges:
                return self._edges[key]
            et = check_edge_type(key)
            edge = self._edges[et] = EdgeStore(self, et)
            return edge
        if isinstance(key, tuple) and len(key) == 2:
            et = self._edge_lookup(key)
            return self[et if et is not None else (key[0], "to", key[1])]
        raise KeyError(f"HeteroData: a key is a node type (str), an edge type (src, rel, dst) "
                       f"or (src, dst); got {key!r}")

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, str) and key not in self._nodes and self._edge_lookup(key) is None:
            setattr(self, key, value)  # a graph-level attribute (PyG)
            return
        if not isinstance(value, Mapping):
            raise TypeError(f"HeteroData: {key!r} is a node or edge type; assign its "
                            f"attributes (data[{key!r}].x = ...) or a dict of them")
        store = self[key]
        store._mapping.clear()
        for k, v in value.items():
            store[k] = v

    def __delitem__(self, key: Any) -> None:
        if isinstance(key, str) and key in self._nodes:
            del self._nodes[key]
        elif isinstance(key, tuple) and key in self._edges:
            del self._edges[key]
        elif isinstance(key, str) and key in self._global:
            del self._global[key]
        else:
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self._nodes or key in self._edges or (
            isinstance(key, str) and key in self._global)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        g = self.__dict__["_global"]
        if name in g:
            return g[name]
        if name.endswith("_dict") and len(name) > 5:
            return self.collect(name[:-5])
        raise AttributeError(f"'HeteroData' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            raise AttributeError(f"HeteroData: attribute names may not start with '_' "
                                 f"(got {name!r})")
        if name in self._nodes:
            raise AttributeError(f"HeteroData: {name!r} is a node type; set its attributes "
                                 f"with data[{name!r}].<attr> = ...")
        prop = getattr(type(self), name, None)
        if isinstance(prop, property):
            raise AttributeError(f"HeteroData: {name!r} is read-only")
        self._global[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self._global[name]
        except KeyError:
            raise AttributeError(name) from None

    # ------------------------------------------------------- PyG's views
    @property
    def node_types(self) -> list[str]:
        return list(self._nodes)

    @property
    def edge_types(self) -> list[EdgeType]:
        return list(self._edges)

    def metadata(self) -> tuple[list[str], list[EdgeType]]:
        """``(node_types, edge_types)``."""
        return self.node_types, self.edge_types

    @property
    def node_stores(self) -> list[NodeStore]:
        return list(self._nodes.values())

    @property
    def edge_stores(self) -> list[EdgeStore]:
        return list(self._edges.values())

    def node_items(self) -> list[tuple[str, NodeStore]]:
        return list(self._nodes.items())

    def edge_items(self) -> list[tuple[EdgeType, EdgeStore]]:
        return list(self._edges.items())

    def keys(self) -> list[str]:
        """Attribute names present in any store (graph-level ones first)."""
        out = dict.fromkeys(self._global.keys())
        for s in (*self._nodes.values(), *self._edges.values()):
            out.update(dict.fromkeys(s.keys()))
        return list(out)

    def collect(self, key: str, allow_empty: bool = True) -> dict[Any, Any]:
        """``{type: store[key]}`` over the node and edge stores holding ``key``."""
        out: dict[Any, Any] = {}
        for t, s in (*self._nodes.items(), *self._edges.items()):
            if key == "num_nodes" and isinstance(s, NodeStore):
                n = s.num_nodes
                if n is not None:
                    out[t] = n
            elif key in s:
                out[t] = s[key]
        if not out and not allow_empty:
            raise KeyError(f"HeteroData: no store has an attribute {key!r}")
        return out

    @property
    def num_nodes_dict(self) -> dict[str, int]:
        """Node type -> node count (``ValueError`` for a type whose count is unknown)."""
        out = {}
        for nt, s in self._nodes.items():
            n = s.num_nodes
            if n is None:
                raise ValueError(f"HeteroData: node type {nt!r} has no num_nodes, x or other "
                                 "node-level attribute to count its nodes")
            out[nt] = n
        return out

    @property
    def num_nodes(self) -> int:
        return sum(self.num_nodes_dict.values())

    @property
    def num_edges_dict(self) -> dict[EdgeType, int]:
        return {et: s.num_edges for et, s in self._edges.items()}

    @property
    def num_edges(self) -> int:
        return sum(self.num_edges_dict.values())

    @property
    def num_node_features(self) -> dict[str, int]:
        """Node type -> feature width (0 for a type without ``x``), as PyG."""
        return {nt: s.num_node_features for nt, s in self._nodes.items()}

    num_features = num_node_features

    # --------------------------------------------------------------- copies
    def copy(self) -> HeteroData:
        """A shallow copy: new stores, the same values (as ``copy.copy``)."""
        out = HeteroData()
        out._global._mapping.update(self._global._mapping)
        for nt, s in self._nodes.items():
            out[nt]._mapping.update(s._mapping)
        for et, s in self._edges.items():
            out[et]._mapping.update(s._mapping)
        return out

    __copy__ = copy

    def clone(self) -> HeteroData:
        """A deep copy (every array and tensor copied), as PyG's ``clone``."""
        return _copy.deepcopy(self)

    def apply(self, func: Any, *keys: str) -> HeteroData:
        """Replace every array-like attribute ``v`` (of ``keys``, or all) by ``func(v)``."""
        for s in (self._global, *self._nodes.values(), *self._edges.values()):
            for k, v in list(s._mapping.items()):
                if (not keys or k in keys) and _shape(v) is not None:
                    s._mapping[k] = func(v)
        return self

    def to(self, device: Any, *args: Any, **kwargs: Any) -> HeteroData:
        """rtx runs on CPUs: ``to("cpu")`` returns ``self``; any other device is an error."""
        check_device(device)
        return self

    def cpu(self) -> HeteroData:
        return self

    def __getstate__(self) -> dict[str, Any]:
        return {"global": self._global._mapping, "nodes": dict(self._nodes),
                "edges": dict(self._edges)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "_global", _Store(self, None))
        self._global._mapping.update(state["global"])
        object.__setattr__(self, "_nodes", {})
        object.__setattr__(self, "_edges", {})
        for nt, s in state["nodes"].items():
            ns = self._nodes[nt] = NodeStore(self, nt)
            ns._mapping.update(s._mapping)
        for et, s in state["edges"].items():
            es = self._edges[et] = EdgeStore(self, et)
            es._mapping.update(s._mapping)

    # ------------------------------------------------------------ checking
    def validate(self, raise_on_error: bool = True) -> bool:
        """Check names, ``edge_index`` (int ``[2, E]``, every index in range of its
        node types), attribute lengths and finite float features.  Raises the first
        problem found (``ValueError`` / ``TypeError`` / ``IndexError``) or, with
        ``raise_on_error=False``, returns whether everything holds."""
        try:
            self._validate()
        except (ValueError, TypeError, IndexError):
            if raise_on_error:
                raise
            return False
        return True

    def _validate(self) -> None:
        counts: dict[str, int | None] = {}
        for nt, s in self._nodes.items():
            check_name(nt)
            n = s.num_nodes
            if "num_nodes" in s:
                v = s["num_nodes"]
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                    raise ValueError(f"HeteroData: data[{nt!r}].num_nodes must be an int >= 0, "
                                     f"got {v!r}")
            for k, v in s.items():
                sh = _shape(v)
                if sh is None:
                    continue
                if len(sh) == 0:
                    raise ValueError(f"HeteroData: data[{nt!r}].{k} is 0-d; node-level "
                                     "attributes have one row per node")
                if n is not None and sh[0] != n:
                    raise ValueError(f"HeteroData: data[{nt!r}].{k} has {sh[0]} rows but the "
                                     f"node type has {n} nodes")
                if k == "x":
                    _check_finite(_host(v), f"data[{nt!r}].x")
            counts[nt] = n
        for et, s in self._edges.items():
            check_edge_type(et)
            for nt in (et[0], et[2]):
                if nt not in self._nodes:
                    raise ValueError(f"HeteroData: edge type {et!r} uses node type {nt!r}, "
                                     f"which has no store (node types: {self.node_types})")
            if "edge_index" not in s:
                raise ValueError(f"HeteroData: edge type {et!r} has no edge_index")
            ei = _host(s["edge_index"])
            if ei.dtype.kind not in "iu" and not (ei.size == 0 and ei.dtype.kind == "f"):
                raise TypeError(f"HeteroData: edge_index of {et!r} must be integer, got "
                                f"{ei.dtype}")
            if ei.ndim != 2 or ei.shape[0] != 2:
                raise ValueError(f"HeteroData: edge_index of {et!r} must have shape [2, E], "
                                 f"got {ei.shape}")
            if ei.size:
                for row, nt in ((0, et[0]), (1, et[2])):
                    n = counts[nt]
                    lo, hi = int(ei[row].min()), int(ei[row].max())
                    if n is None:
                        raise ValueError(f"HeteroData: node type {nt!r} of {et!r} has no "
                                         "num_nodes or x to check edge_index against")
                    if lo < 0 or hi >= n:
                        raise IndexError(f"HeteroData: edge_index of {et!r}: row {row} holds "
                                         f"index {lo if lo < 0 else hi}, outside the {n} "
                                         f"{nt!r} nodes")
            E = ei.shape[1]
            for k, v in s.items():
                sh = _shape(v)
                if k != "edge_index" and sh and k.startswith("edge_") and sh[0] != E:
                    raise ValueError(f"HeteroData: {k} of {et!r} has {sh[0]} rows but there "
                                     f"are {E} edges")

    # ------------------------------------------------------------- files
    def save(self, path: str | os.PathLike[str], compress: bool = False) -> None:
        """Write to an ``.npz`` file with ``rtx.save`` (atomic; nothing pickled;
        ``compress=True`` deflates the members: real graphs shrink 10-100x).
        Read it back with ``HeteroData.load(path)``; rtx tensors come back as
        rtx tensors, numpy arrays as numpy arrays."""
        doc = {
            "format": _FORMAT,
            "global": _pack(self._global._mapping, "graph"),
            "nodes": [[nt, _pack(s._mapping, repr(nt))] for nt, s in self._nodes.items()],
            "edges": [[list(et), _pack(s._mapping, repr(et))] for et, s in self._edges.items()],
        }
        _save(doc, path, compress=compress)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> HeteroData:
        """Read what ``HeteroData.save`` wrote (``ValueError`` for any other file)."""
        doc = _load(path)
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
            raise ValueError(f"{os.fspath(path)}: not a HeteroData file (format "
                             f"{doc.get('format') if isinstance(doc, dict) else None!r})")
        try:
            out = cls()
            out._global._mapping.update(_unpack(doc["global"]))
            for nt, attrs in doc["nodes"]:
                out[check_name(nt)]._mapping.update(_unpack(attrs))
            for et, attrs in doc["edges"]:
                out[check_edge_type(tuple(et))]._mapping.update(_unpack(attrs))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{os.fspath(path)}: malformed HeteroData file ({exc})") from None
        return out

    # ---------------------------------------------------------------- PyG
    def to_pyg(self) -> Any:
        """The same graph as a ``torch_geometric.data.HeteroData`` (needs PyG);
        arrays become torch tensors (copies)."""
        torch = _import("torch", "to_pyg")
        pyg = _import("torch_geometric.data", "to_pyg")

        def conv(v: Any) -> Any:
            return torch.from_numpy(np.array(_host(v), copy=True)) if _shape(v) else v

        out = pyg.HeteroData()
        for k, v in self._global.items():
            out[k] = conv(v)
        for nt, s in self._nodes.items():
            for k, v in s.items():
                setattr(out[nt], k, conv(v))
        for et, s in self._edges.items():
            for k, v in s.items():
                setattr(out[et], k, conv(v))
        return out

    @classmethod
    def from_pyg(cls, data: Any, featureless: str | None = None) -> HeteroData:
        """A copy of a ``torch_geometric.data.HeteroData``: tensors become rtx tensors
        (bool, int32/int64, float32/float64; other integer dtypes become int64).

        ``featureless``: what a node type without features ``x`` (PyG's DBLP
        ``conference``: only ``num_nodes``) becomes: ``None`` (as it is),
        ``"ids"`` (``node_id = arange(num_nodes)``, int64: PyG's convention for the
        ids an ``Embedding`` looks up) or ``"one_hot"`` (``x = I``, float32
        ``[N, N]``, as HGB's code does; MemoryError past 2 GiB)."""
        if featureless not in (None, "ids", "one_hot"):
            raise ValueError(f"HeteroData.from_pyg: featureless must be None, 'ids' or "
                             f"'one_hot', got {featureless!r}")
        pyg = _import("torch_geometric.data", "from_pyg")
        if not isinstance(data, pyg.HeteroData):
            raise TypeError(f"HeteroData.from_pyg expects a torch_geometric.data.HeteroData, "
                            f"got {type(data).__name__}")

        def conv(v: Any) -> Any:
            if hasattr(v, "detach") and hasattr(v, "numpy"):
                return _to_rtx(np.array(v.detach().cpu().numpy(), copy=True))
            return v

        out = cls()
        for k, v in data._global_store.items():
            out[k] = conv(v)
        for nt in data.node_types:
            for k, v in data[nt].items():
                out[nt][k] = conv(v)
        for et in data.edge_types:
            for k, v in data[et].items():
                out[tuple(et)][k] = conv(v)
        if featureless is not None:
            for nt in out.node_types:
                fill_featureless(out[nt], featureless)
        return out

    # --------------------------------------------------------------- repr
    def __repr__(self) -> str:
        # PyG's layout: one entry per line, a store with one attribute on one line
        lines = [f"  {_item_repr(k, v)}" for k, v in self._global.items()]
        for key, s in (*self._nodes.items(), *self._edges.items()):
            name = key if isinstance(key, str) else "(" + ", ".join(key) + ")"
            if len(s) == 1:
                k, v = next(iter(s.items()))
                lines.append(f"  {name}={{ {_item_repr(k, v)} }}")
            else:
                inner = "".join(f"    {_item_repr(k, v)},\n" for k, v in s.items())
                lines.append(f"  {name}={{\n{inner}  }}")
        name = type(self).__name__
        return f"{name}(\n" + ",\n".join(lines) + "\n)" if lines else f"{name}()"


# ------------------------------------------------------------------ helpers
_ONE_HOT_LIMIT = 2**31      # bytes of one dense one-hot feature matrix [N, N] float32


def fill_featureless(store: NodeStore, featureless: str) -> None:
    """Give a node store without ``x`` its node ids (``"ids"``: ``node_id``) or
    one-hot features (``"one_hot"``: ``x = I``); a store with ``x`` is left alone.
    Checked before anything is set (ValueError without a node count, MemoryError
    for a one-hot matrix past 2 GiB)."""
    if "x" in store:
        return
    n = store.num_nodes
    if n is None:
        raise ValueError(f"node type {store.node_type!r} has neither features 'x' nor "
                         "num_nodes")
    if featureless == "ids":
        store.node_id = from_numpy(np.arange(n, dtype=np.int64))
        return
    if n * n * 4 > _ONE_HOT_LIMIT:
        raise MemoryError(f"one-hot features for the {n} nodes of {store.node_type!r} would "
                          f"take {n * n * 4 / 2**30:.1f} GiB; use featureless='ids' (and an "
                          "Embedding)")
    store.x = from_numpy(np.eye(n, dtype=np.float32))


def _item_repr(k: str, v: Any) -> str:
    s = _shape(v)
    if s is not None:
        return f"{k}=[{', '.join(str(d) for d in s)}]"
    if isinstance(v, str):
        return f"{k}='{v}'"
    return f"{k}={v!r}"


def _body(mapping: Mapping[str, Any]) -> str:
    return ", ".join(_item_repr(k, v) for k, v in mapping.items())


def _check_finite(a: np.ndarray, what: str) -> None:
    if a.dtype.kind == "f" and a.size and not np.isfinite(a).all():
        bad = np.flatnonzero(~np.isfinite(a.reshape(-1)))[0]
        row = int(bad // max(1, math.prod(a.shape[1:])))
        raise ValueError(f"HeteroData: {what} holds a non-finite value "
                         f"({a.reshape(-1)[bad]}) in row {row}")


def _to_rtx(a: np.ndarray) -> Any:
    """A numpy array as an rtx tensor when rtx has its dtype (else the array)."""
    if a.dtype.kind == "u" or (a.dtype.kind == "i" and a.dtype.itemsize < 4):
        a = a.astype(np.int64)
    elif a.dtype.kind == "f" and a.dtype.itemsize < 4:
        a = a.astype(np.float32)
    if a.dtype.kind in "biuf":
        return from_numpy(np.ascontiguousarray(a))
    return a


def _pack(mapping: Mapping[str, Any], where: str) -> list[Any]:
    out = []
    for k, v in mapping.items():
        if isinstance(v, Tensor):
            out.append([k, "tensor", v])
        elif isinstance(v, np.ndarray) or isinstance(v, np.generic):
            out.append([k, "array", np.asarray(v)])
        elif v is None or isinstance(v, (bool, int, float, str)):
            out.append([k, "value", v])
        else:
            raise TypeError(f"HeteroData.save: {where}.{k} is a {type(v).__name__}; only "
                            "tensors, arrays, numbers and strings are saved")
    return out


def _unpack(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, kind, v in items:
        if kind == "tensor":
            out[k] = _to_rtx(np.asarray(v))
        elif kind == "array":
            out[k] = np.asarray(v)
        elif kind == "value":
            out[k] = v
        else:
            raise ValueError(f"unknown value kind {kind!r} for {k!r}")
    return out


def _import(name: str, what: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"HeteroData.{what} needs PyTorch Geometric (pip install "
                          "torch_geometric)") from exc
