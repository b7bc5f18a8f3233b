"""Generate ``rtx/_kernels.pyi`` from the Cython sources, read as text.

``stub_text(root)`` returns the stub of the compiled module ``rtx._kernels``:
``tools/gen_faces.py`` writes it (and checks it with ``--check``) with the faces'
stubs.  Nothing is imported or built: the ``.pxi`` files ``rtx/_kernels.pyx``
includes are read in its include order, one stub section per file.

What is generated, per file:

* every top-level ``def`` / ``cpdef`` whose name does not start with ``_``:
  parameter names and defaults as written, types mapped from the Cython types
  (memoryviews of a fused type ``real`` / ``index_t`` -> ``_Real`` / ``_Index``,
  aliases derived from the ``ctypedef fused`` blocks; of ``int64_t`` / ``double``
  -> ``_I64`` / ``_F64``; of ``uint8_t`` / ``unsigned char`` ->
  ``npt.NDArray[np.uint8]``; C integers -> ``int``, ``float`` / ``double`` ->
  ``float``, ``bint`` -> ``bool``; untyped or ``object`` -> ``Any`` unless stated);
* every ``cdef class`` (public name): ``@disjoint_base``, the first sentence of
  its docstring, ``cdef readonly`` attributes as properties, ``__cinit__`` as
  ``__new__``, its ``def`` methods and ``@property`` getters;
* every public top-level assignment ``NAME = ...`` with its stated type.

What the Cython source cannot say is stated next to it in ``#:`` comments (the
one convention; the generator refuses sources that leave a type unsaid):

* right under a ``def`` line (the first lines of the body, before the docstring):
  ``#: -> T`` the return type (without one: ``None``; a function with
  ``return <value>`` and no ``#: -> T`` is an error), and ``#: name: T`` the
  type of an untyped, ``object`` or builtin-container (``list`` / ``tuple`` /
  ``dict``) parameter.  (Not a Python annotation: Cython 3 turns ``-> int``,
  ``-> str``, ``-> tuple[...]``, ``-> dict[...]``, ``-> list[...]`` on a ``def``
  into a runtime check or conversion of the returned value.)
* directly above a public top-level assignment: ``#: T`` its stub type
  (``SCATTER_STRATEGIES: Final[dict[str, int]]`` from ``#: Final[dict[str, int]]``);
* a block of column-0 lines starting with ``#: stub`` and continuing while lines
  start with ``#:``: copied verbatim (without the ``#: `` prefix) into the stub at
  that place: TypedDicts, aliases, NamedTuples built at run time.  A public
  assignment of a name such a block defines needs no type line.
"""

from __future__ import annotations

import os
import re

WIDTH = 100

HEADER = '''"""Type stubs for rtx's compiled extension module ``rtx._kernels``.

Generated from the Cython sources (``rtx/*.pxi``, in ``rtx/_kernels.pyx``'s include
order) by ``python tools/gen_faces.py``: do not edit by hand; change the ``.pxi``
(types the Cython signature cannot say go in ``#:`` comments, see
``tools/kernel_stubs.py``).  ``tests/autograd/test_faces.py`` fails when this file
is stale and ``tests/project/test_wheel_contents.py`` compares it with the built module.
"""
'''

C_INTS = {"int", "long", "short", "char", "Py_ssize_t", "size_t", "ssize_t", "Py_hash_t",
          "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
          "uint64_t", "uintptr_t", "intptr_t", "long long", "unsigned", "unsigned int",
          "unsigned long", "unsigned long long", "unsigned char", "unsigned short"}
C_FLOATS = {"float", "double", "long double"}
NP_DTYPES = {"float": "np.float32", "double": "np.float64", "int8_t": "np.int8",
             "int16_t": "np.int16", "int32_t": "np.int32", "int64_t": "np.int64",
             "uint8_t": "np.uint8", "unsigned char": "np.uint8", "uint16_t": "np.uint16",
             "uint32_t": "np.uint32", "uint64_t": "np.uint64"}
# memoryview element types with a short alias (emitted in the _common.pxi section)
VIEW_ALIASES = {"int64_t": ("_I64", "npt.NDArray[np.int64]"),
                "double": ("_F64", "npt.NDArray[np.float64]")}
PY_BUILTINS = {"list": "list[Any]", "tuple": "tuple[Any, ...]", "dict": "dict[Any, Any]",
               "str": "str", "bytes": "bytes", "object": "Any", "bool": "bool",
               "int": "int", "float": "float"}
SKIPPED_DUNDERS = {"__dealloc__", "__getbuffer__", "__releasebuffer__", "__repr__", "__str__",
                   "__reduce__", "__reduce_cython__", "__setstate_cython__"}
TYPING = ("Any", "Final", "Literal", "NamedTuple", "TypedDict")


class StubError(ValueError):
    """A ``.pxi`` the generator cannot turn into a stub (says file and line)."""


def include_order(root: str) -> list[str]:
    """The ``.pxi`` files ``rtx/_kernels.pyx`` includes, in order."""
    with open(os.path.join(root, "rtx", "_kernels.pyx"), encoding="utf-8") as f:
        return re.findall(r'^include\s+"([^"]+)"', f.read(), re.M)


def _strip_comment(line: str) -> str:
    """``line`` without a trailing ``# ...`` comment (quotes respected)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#":
            return line[:i]
    return line


def _split_top(s: str, sep: str = ",") -> list[str]:
    """``s`` split at ``sep`` outside brackets and quotes."""
    out: list[str] = []
    cur: list[str] = []
    depth, quote = 0, None
    for c in s:
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(c)
    out.append("".join(cur))
    return [p.strip() for p in out]


def _signature(lines: list[str], i: int) -> tuple[str, str, int]:
    """From the ``def`` line ``i``: (parameter text, text after the ``)``, index of the
    last signature line)."""
    text, depth, j, start = "", 0, i, None
    while j < len(lines):
        s = _strip_comment(lines[j])
        for k, c in enumerate(s):
            if c == "(":
                depth += 1
                if start is None:
                    start = len(text) + k + 1
            elif c == ")":
                depth -= 1
                if depth == 0 and start is not None:
                    whole = text + s
                    end = len(text) + k
                    return whole[start:end], whole[end + 1:], j
        text += s + " "
        j += 1
    raise StubError(f"line {i + 1}: unterminated signature")


def _body(lines: list[str], last: int, indent: int) -> tuple[list[str], list[str], int]:
    """After a signature ending at ``last``: its ``#:`` lines (first body lines), the
    body's lines, and the index after the body."""
    j = last + 1
    stub: list[str] = []
    while j < len(lines) and lines[j].strip().startswith("#"):
        s = lines[j].strip()
        if s.startswith("#:"):
            stub.append(s[2:].strip())
        j += 1
    k = j
    while k < len(lines):
        s = lines[k]
        if s.strip() and not s.lstrip().startswith("#") and len(s) - len(s.lstrip()) <= indent:
            break
        k += 1
    return stub, lines[last + 1:k], k


def _returns_value(body: list[str]) -> bool:
    """Whether the body has a ``return <value>`` (outside strings; nested defs count too)."""
    in_str = None
    for line in body:
        s = line
        if in_str:
            if in_str in s:
                s = s.split(in_str, 1)[1]
                in_str = None
            else:
                continue
        for q in ('"""', "'''"):
            if s.count(q) % 2 == 1:
                in_str = q
                s = s.split(q, 1)[0]
        if re.match(r"\s*return\s+[^\s#]", s):
            return True
    return False


class _Types:
    """The Cython -> stub type mapping (fused types from ``ctypedef fused`` blocks)."""

    def __init__(self) -> None:
        self.fused: dict[str, list[str]] = {}
        self.classes: set[str] = set()

    def alias(self, name: str) -> str:
        return "_" + name.removesuffix("_t").capitalize()

    def view(self, base: str, where: str) -> str:
        if base in self.fused:
            return self.alias(base)
        if base in VIEW_ALIASES:
            return VIEW_ALIASES[base][0]
        if base in NP_DTYPES:
            return f"npt.NDArray[{NP_DTYPES[base]}]"
        raise StubError(f"{where}: no stub type for a memoryview of {base!r}")

    def scalar(self, ctype: str, where: str) -> str | None:
        """The stub type of a C / Python-builtin parameter type (None: untyped/object)."""
        if ctype in self.fused:
            members = self.fused[ctype]
            if all(m in C_FLOATS for m in members):
                return "float"
            if all(m in C_INTS for m in members):
                return "int"
        if ctype in C_INTS:
            return "int"
        if ctype in C_FLOATS:
            return "float"
        if ctype == "bint":
            return "bool"
        if ctype in self.classes:
            return ctype
        raise StubError(f"{where}: no stub type for the Cython type {ctype!r}")


_SIMPLE_DEFAULT = re.compile(
    r"""^(None|True|False|-?\d+(\.\d*)?([eE][-+]?\d+)?|"[^"]*"|'[^']*')$""")
_PARAM = re.compile(r"^(?P<stars>\*{0,2})(?P<decl>[^=]*?)\s*(=\s*(?P<default>.+))?$")


def _params(text: str, stated: dict[str, str], types: _Types, where: str,
            method: bool) -> list[str]:
    out = []
    parts = [p for p in _split_top(" ".join(text.split())) if p]
    for n, part in enumerate(parts):
        if part == "*" or part == "/":
            out.append(part)
            continue
        m = _PARAM.match(part)
        assert m is not None
        decl = re.sub(r"\s+(not|or)\s+None$", "", m["decl"]).strip()
        default = m["default"]
        stars = m["stars"]
        if method and n == 0:
            out.append(decl)   # self / cls
            continue
        view = re.match(r"^(?:const\s+)?(?P<base>[\w ]+?)\s*\[[^\]]*\]\s*(?P<name>\w+)$", decl)
        if view:
            name, typ = view["name"], types.view(view["base"].strip(), f"{where}: {decl}")
            if name in stated:
                raise StubError(f"{where}: {name} is typed by Cython; drop its '#: {name}:'")
        else:
            words = decl.split()
            name = words[-1]
            ctype = " ".join(words[:-1])
            if ctype.startswith("const "):
                ctype = ctype[6:]
            if not ctype or ctype in PY_BUILTINS:
                typ = stated.pop(name, "") or PY_BUILTINS.get(ctype or "object", "Any")
            else:
                if name in stated:
                    raise StubError(f"{where}: {name} is typed by Cython; drop its '#: {name}:'")
                typ = types.scalar(ctype, f"{where}: {decl}") or "Any"
        if default is not None and default.strip() == "None" and "None" not in typ \
                and typ != "Any":
            typ += " | None"
        p = f"{stars}{name}: {typ}"
        if default is not None:
            d = default.strip()
            p += f" = {d if _SIMPLE_DEFAULT.match(d) else '...'}"
        out.append(p)
    return out


def _directives(stub: list[str], where: str) -> tuple[str | None, dict[str, str]]:
    ret, stated = None, {}
    for s in stub:
        if s.startswith("->"):
            ret = s[2:].strip()
        else:
            m = re.match(r"^(\*{0,2}\w+)\s*:\s*(.+)$", s)
            if not m:
                raise StubError(f"{where}: '#: {s}' is neither '#: -> T' nor '#: name: T'")
            stated[m[1].lstrip("*")] = m[2].strip()
    return ret, stated


def _format_def(name: str, params: list[str], ret: str, indent: str,
                decorators: tuple[str, ...] = ()) -> list[str]:
    lines = [f"{indent}@{d}" for d in decorators]
    one = f"{indent}def {name}({', '.join(params)}) -> {ret}: ..."
    if len(one) <= WIDTH:
        return [*lines, one]
    inner = indent + "    "
    flat = f"{inner}{', '.join(params)}"
    if len(flat) <= WIDTH:
        return [*lines, f"{indent}def {name}(", flat, f"{indent}) -> {ret}: ..."]
    if any(p in ("*", "/") or p.startswith("*") for p in params) or len(params) > 12:
        rows = [f"{inner}{p}," for p in params]   # one a line
    else:                                          # filled lines, a trailing comma
        rows, cur = [], inner
        for p in params:
            piece = f"{p},"
            if cur != inner and len(cur) + 1 + len(piece) > WIDTH:
                rows.append(cur)
                cur = inner
            cur += piece if cur == inner else " " + piece
        rows.append(cur)
    return [*lines, f"{indent}def {name}(", *rows, f"{indent}) -> {ret}: ..."]


def _def_stub(lines: list[str], i: int, types: _Types, where: str, indent: str,
              method: bool, decorators: tuple[str, ...] = (),
              rename: str | None = None, ret_default: str = "None") -> tuple[list[str], int]:
    m = re.match(r"^\s*(?:def|cpdef)\s+(?:(?P<ctype>[\w ]+?)\s+)?(?P<name>\w+)\s*\(", lines[i])
    assert m is not None
    params_text, _, last = _signature(lines, i)
    stub, body, end = _body(lines, last, len(lines[i]) - len(lines[i].lstrip()))
    ret, stated = _directives(stub, where)
    params = _params(params_text, stated, types, where, method)
    if stated:
        raise StubError(f"{where}: '#: {next(iter(stated))}:' names no untyped parameter")
    if ret is None:
        if m["ctype"] and m["ctype"] not in ("object", "void"):
            ret = types.scalar(m["ctype"], where) or "Any"
        elif _returns_value(body):
            raise StubError(f"{where}: {m['name']} returns a value: say its type in a "
                            "'#: -> T' line right under the def line")
        else:
            ret = ret_default
    if rename == "__new__":
        params[0] = "cls"
    return _format_def(rename or m["name"], params, ret, indent, decorators), end


def _first_sentence(doc: str) -> str:
    text = " ".join(doc.split())
    m = re.match(r"^(.*?[.!?])(\s|$)", text)
    return m[1] if m else text


def _class_stub(lines: list[str], i: int, types: _Types, path: str) -> tuple[list[str], int]:
    m = re.match(r"^cdef class (\w+)\s*(\((?P<base>[^)]*)\))?\s*:", lines[i])
    assert m is not None
    name = m[1]
    out = ["@disjoint_base", f"class {name}{'(' + m['base'] + ')' if m['base'] else ''}:"]
    _, _, end = _body(lines, i, 0)
    members: list[str] = []
    doc_done = False
    j = i + 1
    decorators: list[str] = []
    while j < end:
        line = lines[j]
        s = line.strip()
        where = f"{path}:{j + 1}"
        if not s or s.startswith("#"):
            j += 1
            continue
        ind = len(line) - len(line.lstrip())
        if ind != 4:
            j += 1
            continue
        if not doc_done and s.startswith(('"""', "'''")):
            q = s[:3]
            doc = s[3:]
            k = j
            while q not in doc:
                k += 1
                doc += " " + lines[k].strip()
            out.append(f'    """{_first_sentence(doc.split(q)[0])}"""')
            out.append("")
            doc_done = True
            j = k + 1
            continue
        doc_done = True
        attr = re.match(r"^cdef\s+(readonly|public)\s+(.+?)\s+(\w+(\s*,\s*\w+)*)$",
                        _strip_comment(s).strip())
        if attr:
            for a in re.split(r"\s*,\s*", attr[3]):
                if a.startswith("_"):
                    continue
                typ = types.scalar(attr[2], where) if attr[2] not in PY_BUILTINS \
                    else PY_BUILTINS[attr[2]]
                if attr[1] == "readonly":
                    members += ["    @property", f"    def {a}(self) -> {typ}: ..."]
                else:
                    members.append(f"    {a}: {typ}")
            j += 1
            continue
        if s.startswith("@"):
            decorators.append(s[1:].strip())
            j += 1
            continue
        dm = re.match(r"^(?:def|cpdef)\s+(?:[\w ]+?\s+)?(\w+)\s*\(", s)
        if dm:
            meth = dm[1]
            decs = tuple(decorators)
            decorators = []
            if meth in SKIPPED_DUNDERS or (meth.startswith("_") and not meth.startswith("__")):
                _, _, last = _signature(lines, j)
                _, _, j = _body(lines, last, 4)
                continue
            if meth == "__cinit__":
                stub, j = _def_stub(lines, j, types, where, "    ", True, rename="__new__",
                                    ret_default=name)
            else:
                stub, j = _def_stub(lines, j, types, where, "    ", True, decs)
            members += stub
            continue
        if s.startswith("cdef ") or s.startswith("cpdef "):
            # C-level members (attributes, cdef methods): not visible from Python
            if s.endswith(":"):
                _, _, j = _body(lines, j, 4)
            else:
                j += 1
            continue
        raise StubError(f"{where}: cannot stub this class member: {s}")
    out += members or ["    ..."]
    return out, end


def _file_stub(path: str, rel: str, types: _Types, defined_by_blocks: set[str]) -> list[str]:
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out: list[str] = []
    i = 0

    def gap() -> None:
        if out and out[-1] != "":
            out.append("")

    while i < len(lines):
        line = lines[i]
        where = f"{rel}:{i + 1}"
        fm = re.match(r"^ctypedef fused (\w+)\s*:", line)
        if fm:
            members = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                if lines[i].strip():
                    members.append(_strip_comment(lines[i]).strip())
                i += 1
            types.fused[fm[1]] = members
            dts = [NP_DTYPES.get(mm) for mm in members]
            if all(dts):
                out.append(f"{types.alias(fm[1])} = "
                           + " | ".join(f"npt.NDArray[{d}]" for d in dts))
            continue
        if line.startswith("#: stub"):
            gap()
            i += 1
            while i < len(lines) and lines[i].startswith("#:"):
                out.append(lines[i][3:] if lines[i].startswith("#: ") else lines[i][2:])
                i += 1
            out.append("")
            continue
        if re.match(r"^(def|cpdef)\s", line):
            name = re.match(r"^(?:def|cpdef)\s+(?:[\w ]+?\s+)?(\w+)\s*\(", line)
            if name is None:
                raise StubError(f"{where}: cannot read this def line")
            if name[1].startswith("_"):
                _, _, last = _signature(lines, i)
                _, _, i = _body(lines, last, 0)
                continue
            stub, i = _def_stub(lines, i, types, where, "", False)
            out += stub
            continue
        if line.startswith("cdef class "):
            cname = re.match(r"^cdef class (\w+)", line)
            assert cname is not None
            if cname[1].startswith("_"):
                _, _, i = _body(lines, i, 0)
                continue
            stub, i = _class_stub(lines, i, types, rel)
            gap()
            out += stub
            out.append("")
            continue
        am = re.match(r"^([A-Za-z]\w*)\s*=", line)
        if am and am[1] not in defined_by_blocks:
            prev = lines[i - 1] if i else ""
            if not prev.startswith("#: ") or prev.startswith("#: stub"):
                raise StubError(f"{where}: public module constant {am[1]} needs its stub type "
                                "in a '#: T' line directly above it")
            out.append(f"{am[1]}: {prev[3:].strip()}")
        i += 1
    while out and out[-1] == "":
        out.pop()
    return out


def _block_names(path: str) -> set[str]:
    names, inside = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#: stub"):
                inside = True
            elif inside and line.startswith("#:"):
                m = re.match(r"^#: (?:class\s+)?([A-Za-z_]\w*)\b", line)
                if m:
                    names.add(m[1])
            else:
                inside = False
    return names


def stub_text(root: str) -> str:
    """The text of ``rtx/_kernels.pyi`` for the source tree at ``root``."""
    types = _Types()
    files = include_order(root)
    for name in files:   # classes may type parameters before (or after) their definition
        with open(os.path.join(root, "rtx", name), encoding="utf-8") as f:
            types.classes.update(c for c in re.findall(r"^cdef class (\w+)", f.read(), re.M)
                                 if not c.startswith("_"))
    sections = []
    for name in files:
        path = os.path.join(root, "rtx", name)
        rel = os.path.relpath(path, root)
        body = _file_stub(path, rel, types, _block_names(path))
        if name == "_common.pxi":
            body += [f"{alias} = {t}" for alias, t in VIEW_ALIASES.values()]
        if not body:
            continue
        rule = "# " + "-" * max(3, 78 - 3 - len(name)) + " " + name
        sections.append("\n".join([rule, *body]))
    text = "\n\n".join(sections) + "\n"
    used = [t for t in TYPING if re.search(rf"\b{t}\b", text)]
    imports = []
    if used:
        imports.append(f"from typing import {', '.join(used)}")
        imports.append("")
    imports += ["import numpy as np", "import numpy.typing as npt"]
    if "@disjoint_base" in text:
        imports.append("from typing_extensions import disjoint_base")
    return HEADER + "\n" + "\n".join(imports) + "\n\n" + text


__all__ = ["StubError", "include_order", "stub_text"]
