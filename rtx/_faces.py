"""The declared ops' public faces, generated once at import from their declarations.

Every rule in ``rtx._autodiff.ops`` with a ``signature`` (see ``_autodiff/ops/base.py``)
gets the faces it names, as real functions compiled from source text when this
module is imported (as ``dataclasses`` writes ``__init__``), with the declared
parameter names, defaults and docstring:

- ``"method"`` / ``"__add__"`` ...: methods of ``TensorFaces``, the base class of
  ``rtx.Tensor``; ``"inplace"``: ``Tensor.<name>_`` (computed, then written into
  the tensor; never recorded);
- ``"function"``: ``rtx.<name>`` (this module's ``__all__``; ``rtx.functional``
  and ``rtx`` star-import it);
- ``"nn"``: ``rtx.nn.functional.<name>`` (``NN_FUNCTIONAL``, exported through
  ``rtx/nn/_faces.py``) -- the same function object as ``rtx.<name>``: no face
  calls another.

A face converts each argument once, by its declared kind: array-likes become
tensors, integer tensors become float32 where the op is float-valued, indices
become an ``IndexPlan`` / ``EdgeIndex`` (checked once: the rules and backends
take only plans), dims and row counts are checked; then it runs the
declaration's ``check`` and calls the rule through the tensor's ``Autodiff``.
No dict dispatch, no ``*args``: the per-call work is what the old hand-written
faces did.

Type checkers read ``_faces.pyi`` / ``nn/_faces.pyi``, generated from the same
declarations (``python tools/gen_faces.py``; ``tests/autograd/test_faces.py`` fails when
they are stale).

This module sits just below ``rtx.tensor``: it never imports it.  ``Tensor``
and its operand helpers are bound here by ``rtx/tensor.py`` (``bind``) before
any face can run.
"""

from __future__ import annotations

from typing import Any

from . import _backend_state
from ._autodiff.ops import OPS
from ._autodiff.ops.base import EMPTY, Op, Param, parse_signature
from ._dtypes import FLOAT_DTYPES, check_dim, check_dims, check_rows, float32
from .backend.index_plan import as_edge_index, as_plan

# The generated faces' globals: the helpers below, each rule as ``_op_<name>`` and its
# check as ``_check_<name>``, and what rtx/tensor.py binds (``bind``) before any face runs.
_NS: dict[str, Any] = {"Tensor": None, "_operand": None, "_inplace_guard": None,
                       "_inplace_write": None}
_BOUND = frozenset(_NS)


def bind(**names: Any) -> None:
    """Called once by ``rtx/tensor.py``: ``Tensor`` and its helpers ``_operand(x, ad,
    scalars=True)``, ``_inplace_guard(name, self, *inputs)`` and
    ``_inplace_write(name, self, result)``."""
    unknown = set(names) - _BOUND
    if unknown:
        raise KeyError(f"bind(): unknown names {sorted(unknown)}")
    _NS.update(names)


def _data(t: Any, op: str, what: str) -> None:
    """A graph op's data: float32 / float64 with at least one dim."""
    B = t._ad.inner
    dt = B.dtype(t._value)
    if dt not in FLOAT_DTYPES:
        raise TypeError(f"{op}(): {what} must be float32 or float64, got {dt}")
    if not B.shape(t._value):
        raise ValueError(f"{op}(): {what} must have at least 1 dimension, got a 0-d tensor")


def _size(t: Any, op: str, what: str, dim: int = 0, scalar_ok: bool = False) -> int:
    """``t.shape[dim]``; a 0-d tensor is one slice when ``scalar_ok`` (its dim was
    checked as 0 / -1), else a ValueError naming ``what``."""
    shape = t._ad.inner.shape(t._value)
    if not shape:
        if scalar_ok:
            return 1
        raise ValueError(f"{op}(): {what} must have at least 1 dimension, got a 0-d tensor")
    if not -len(shape) <= dim < len(shape):
        raise ValueError(f"{op}(): {what} of shape {tuple(shape)} has no dim {dim}")
    return int(shape[dim])


_NS.update({"_default_ad": _backend_state.default_autodiff, "_f32": float32, "_data": _data,
            "_size": _size, "_check_rows": check_rows, "_check_dim": check_dim,
            "_check_dims": check_dims, "_as_plan": as_plan, "_as_edge_index": as_edge_index})


# ------------------------------------------------------------------ codegen
_TENSORS = ("Tensor", "FloatTensor", "Data", "Operand", "OptTensor")
# conversion order: tensors first (the rest read their shapes), then row counts and
# dims, then indices (which need both)
_ORDER = {"Rows": 1, "Dim": 2, "Dims": 2, "Index": 3, "EdgeIndex": 3}


def _convert(p: Param, params: dict[str, Param], anchor: str, op: str, first: bool,
             method: bool) -> list[str]:
    """Source lines converting parameter ``p`` (``anchor``: the first tensor's name)."""
    n, k = p.name, p.kind
    lines = []
    if k in _TENSORS:
        if first and not method:
            lines.append(f"if not isinstance({n}, Tensor): "
                         f"{n} = _operand({n}, _default_ad(), False)")
        elif not first and k == "Operand":
            # (a Python float is an operand as it is: _operand returns it unchanged)
            lines.append(f"if not isinstance({n}, Tensor) and type({n}) is not float: "
                         f"{n} = _operand({n}, {anchor}._ad)")
        elif not first and k == "OptTensor":
            lines.append(f"if {n} is not None and not isinstance({n}, Tensor): "
                         f"{n} = _operand({n}, {anchor}._ad, False)")
        elif not first:
            lines.append(f"if not isinstance({n}, Tensor): "
                         f"{n} = _operand({n}, {anchor}._ad, False)")
        if k == "FloatTensor":
            lines.append(f"if {n}._ad.inner.dtype({n}._value).kind != 'f': {n} = {n}.to(_f32)")
        elif k == "Data":
            lines.append(f"_data({n}, {op!r}, {n!r})")
    elif k == "Rows":
        lines.append(f"{n} = _check_rows({n}, {op!r}, {n!r})")
    elif k == "Dim":
        lines.append(f"{n} = _check_dim({n}, {anchor}.ndim)")
    elif k == "Dims":   # (None, the default, needs no check: it stays None)
        lines.append(f"if {n} is not None: {n} = _check_dims({n}, {anchor}.ndim)")
    elif k == "Index":
        rows, length = p.args["rows"], p.args.get("length")
        dim = p.args.get("dim", "0")
        ok = "True" if "dim" in p.args else "False"
        rows_expr = (rows if params[rows].kind == "Rows"
                     else f"_size({rows}, {op!r}, {rows!r}, {dim}, {ok})")
        len_expr = what = "None"
        if length is not None:
            len_expr = f"_size({length}, {op!r}, {length!r}, {dim}, {ok})"
            what = repr(f"{length}.shape[{'dim' if 'dim' in p.args else 0}]")
        lines.append(f"{n} = _as_plan({n}, {rows_expr}, {op!r}, {len_expr}, {what})")
    elif k == "EdgeIndex":
        src, dst = p.args["src"], p.args["dst"]   # dst: a Rows parameter or a tensor's rows
        dst_expr = dst if params[dst].kind == "Rows" else f"_size({dst}, {op!r}, {dst!r})"
        lines.append(f"{n} = _as_edge_index({n}, _size({src}, {op!r}, {src!r}), {dst_expr}, "
                     f"{op!r})")
    return lines


def _annotation(p: Param) -> str:
    return {"Rows": "int", "Dim": "int", "Dims": "int | Sequence[int] | None",
            "float": "float", "int": "int", "bool": "bool", "str": "str"}.get(p.kind, "Any")


def _param_list(params: tuple[Param, ...], method: bool, annotate: bool = False) -> str:
    parts = []
    star = False
    for i, p in enumerate(params):
        if p.kwonly and not star:
            parts.append("*")
            star = True
        if method and i == 0:
            parts.append("self")
            continue
        if annotate:
            ann = f"{p.name}: {_annotation(p)}"
            parts.append(ann if p.default is EMPTY else f"{ann} = {p.default!r}")
        else:
            parts.append(p.name if p.default is EMPTY else f"{p.name}={p.default!r}")
    return ", ".join(parts)


def _is_method(face: str) -> bool:
    return face in ("method", "inplace") or face.startswith("__")


def _body(op: type[Op], face: str, name: str, params: tuple[Param, ...]) -> list[str]:
    """The statements of one face (``face``: function, method, inplace or a dunder)."""
    method = _is_method(face)
    if method:  # the first parameter is ``self``: so are the references to it
        old = params[0].name
        params = tuple(Param("self" if i == 0 else p.name, p.kind, p.default, p.kwonly,
                             {k: "self" if v == old else v for k, v in p.args.items()})
                       for i, p in enumerate(params))
    by_name = {p.name: p for p in params}
    first = params[0]
    lines: list[str] = []
    if not method and len(params) >= 2 and first.kind == params[1].kind == "Operand":
        # either operand may be the tensor (rtx.add(2, t)): the other converts on its backend
        a, b = first.name, params[1].name
        lines += [f"if isinstance({a}, Tensor):",
                  f"    ad_ = {a}._ad",
                  f"    if not isinstance({b}, Tensor): {b} = _operand({b}, ad_)",
                  f"elif isinstance({b}, Tensor):",
                  f"    ad_ = {b}._ad",
                  f"    {a} = _operand({a}, ad_)",
                  "else:",
                  f"    {a} = _operand({a}, _default_ad(), False)",
                  f"    ad_ = {a}._ad",
                  f"    {b} = _operand({b}, ad_)"]
        rest = params[2:]
        ad = "ad_"
    else:
        lines += _convert(first, by_name, first.name, name, True, method)
        rest = params[1:]
        ad = f"{first.name}._ad"
    for p in sorted(rest, key=lambda p: _ORDER.get(p.kind, 0)):
        lines += _convert(p, by_name, first.name, name, False, method)
    if op.check is not None:
        lines.append(f"_check_{op.name}({', '.join(p.name for p in params)})")
    pos = [p.name for p in params if p.positional]
    if face.startswith("__r") and len(pos) == 2:  # a reflected operator: other op self
        pos.reverse()
    call = f"{ad}.apply(_op_{op.name}, " + ", ".join(
        pos + [f"{p.name}={p.name}" for p in params if not p.positional]) + ")"
    if face == "inplace":
        inputs = "".join(f", {p.name}" for p in params[1:] if p.kind in _TENSORS)
        lines.insert(0, f"_inplace_guard({name!r}, self{inputs})")
        lines.append(f"return _inplace_write({name!r}, self, {call})")
    else:
        lines.append(f"return {call}")
    return lines


class Face:
    """One generated face: where it goes, its name, signature and source."""

    __slots__ = ("op", "face", "name", "params", "doc", "fn")

    def __init__(self, op: type[Op], face: str, name: str, params: tuple[Param, ...],
                 doc: str) -> None:
        self.op, self.face, self.name, self.params, self.doc = op, face, name, params, doc
        _NS[f"_op_{op.name}"] = op
        if op.check is not None:
            _NS[f"_check_{op.name}"] = op.check
        src = self.source()
        code = compile(src, f"<rtx face {op.name}: {face} {name}>", "exec")
        local: dict[str, Any] = {}
        exec(code, _NS, local)  # noqa: S102 - our own declarations, compiled once
        fn = local[name]
        fn.__qualname__ = f"Tensor.{name}" if self.method else name
        fn.__module__ = "rtx.tensor" if self.method else "rtx"
        fn.__doc__ = doc or None
        self.fn = fn

    @property
    def method(self) -> bool:
        return _is_method(self.face)

    def source(self) -> str:
        body = _body(self.op, self.face, self.name, self.params)
        return f"def {self.name}({_param_list(self.params, self.method)}):\n" + "".join(
            f"    {ln}\n" for ln in body)

    def stub(self, indent: str = "") -> str:
        """The ``.pyi`` line(s) of this face (wrapped at 100 columns)."""
        ignore = "  # type: ignore[override]" if self.name in ("__eq__", "__ne__") else ""
        params = _param_list(self.params, self.method, True)
        line = f"{indent}def {self.name}({params}) -> Tensor: ...{ignore}\n"
        if len(line) <= 101:
            return line
        inner = indent + "    "
        parts = params.split(", ")
        return (f"{indent}def {self.name}(\n" + "".join(f"{inner}{p},\n" for p in parts)
                + f"{indent}) -> Tensor: ...{ignore}\n")


def _faces() -> list[Face]:
    """Every declared face, in declaration order."""
    out = []
    for op in OPS.values():
        if op.signature is None:
            continue
        doc = (op.__doc__ or "").strip()
        method_name = op.name
        for f in op.faces:
            face, _, alias = f.partition(":")
            if face == "method" and alias:
                method_name = alias
        for f in op.faces:
            face, _, alias = f.partition(":")
            if face.startswith("__"):
                name = face
            elif face == "inplace":
                name = method_name + "_"
            else:
                name = alias or op.name
            out.append(Face(op, face, name, op.params, doc))
        for alias, (sig, faces, adoc) in getattr(op, "aliases", {}).items():
            params = parse_signature(alias, sig)
            out += [Face(op, face, alias, params, adoc.strip()) for face in faces]
    return out


class TensorFaces:
    """The declared methods and operators of ``rtx.Tensor`` (generated; see the module doc)."""

    __slots__ = ()


FACES = _faces()
__all__: list[str] = []
NN_FUNCTIONAL: dict[str, Any] = {}
for _f in FACES:
    if _f.face == "function":
        globals()[_f.name] = _f.fn
        __all__.append(_f.name)
    elif _f.face == "nn":
        # the same object as rtx.<name> when the op has both faces
        _f.fn = NN_FUNCTIONAL[_f.name] = globals().get(_f.name, _f.fn)
    else:
        setattr(TensorFaces, _f.name, _f.fn)
del _f


# ------------------------------------------------------------------ stubs
_STUB_HEAD = (
    "# Generated from the op declarations (rtx/_autodiff/ops/*.py) by tools/gen_faces.py:\n"
    "# do not edit.  tests/autograd/test_faces.py fails when this file is stale.\n"
)


def _names(var: str, names: list[str]) -> str:
    import textwrap

    body = textwrap.fill(", ".join(repr(n) for n in names), 95, initial_indent="    ",
                         subsequent_indent="    ", break_on_hyphens=False)
    return f"{var} = [\n{body},\n]\n\n"


def stub_text() -> str:
    """``rtx/_faces.pyi``: the generated methods and functions, typed."""
    methods = [f for f in FACES if f.method]
    functions = [f for f in FACES if f.face == "function"]
    lines = [_STUB_HEAD, "from collections.abc import Sequence\nfrom typing import Any\n\n",
             "from ._autodiff.ops.base import Op, Param\nfrom .tensor import Tensor\n\n",
             _names("__all__", __all__),
             "NN_FUNCTIONAL: dict[str, Any]\n\n\n",
             "class Face:\n    op: type[Op]\n    face: str\n    name: str\n",
             "    params: tuple[Param, ...]\n    doc: str\n    fn: Any\n",
             "    @property\n    def method(self) -> bool: ...\n",
             "    def source(self) -> str: ...\n",
             "    def stub(self, indent: str = ...) -> str: ...\n\n\n",
             "FACES: list[Face]\n\n\n",
             "def bind(**names: Any) -> None: ...\n",
             "def stub_text() -> str: ...\n",
             "def nn_stub_text() -> str: ...\n\n\n",
             "class TensorFaces:\n"]
    lines += [f.stub("    ") for f in methods]
    lines.append("\n\n")
    lines += [f.stub() for f in functions]
    return _imports_used("".join(lines))


def nn_stub_text() -> str:
    """``rtx/nn/_faces.pyi``: the ``rtx.nn.functional`` faces, typed."""
    nn = [f for f in FACES if f.face == "nn"]
    lines = [_STUB_HEAD, "from collections.abc import Sequence\nfrom typing import Any\n\n",
             "from ..tensor import Tensor\n\n",
             _names("__all__", sorted(NN_FUNCTIONAL)), "\n"]
    lines += [f.stub() for f in nn]
    return _imports_used("".join(lines))


def _imports_used(text: str) -> str:
    """Drop the ``Sequence`` import from a stub that does not use it."""
    if "Sequence[" not in text:
        text = text.replace("from collections.abc import Sequence\n", "", 1)
    return text
