"""``rtx.save(obj, path)`` / ``rtx.load(path)``: state dicts as ``.npz`` files.

Nothing is pickled, so loading a file never runs code.  ``obj`` is a tree of
dicts (string or int keys), lists and tuples whose leaves are numpy arrays, rtx
tensors (saved as their values), numpy scalars, Python ``int`` / ``float`` /
``bool`` / ``str`` or ``None`` — a module's ``state_dict()``, an optimiser's
``state_dict()`` or a dict holding several.

Key scheme (format ``rtx.save/2``)
----------------------------------
Every array leaf is stored as one ``.npy`` member named by its path from the
root: the keys along the path joined with ``/`` (list and tuple positions and
int dict keys written in decimal), then ``.npy``.  Inside a str key, ``%``,
``/``, ``\\``, control characters and lone surrogates are escaped (``%XX``,
``%uXXXX``), and so is the first character of a str key that reads as a
decimal integer (``"1"`` is ``%31``, so it cannot meet the int key ``1``); a
path ending in ``.npy`` has that dot escaped (``%2E``) and a path equal to a
reserved member name its first character.  Since every ``%`` in a name starts
an escape, names decode uniquely: two leaves never share a member.  A module
state dict ``{"fc.weight": w}`` is therefore the member ``fc.weight.npy`` and an
optimiser's ``{"state": {0: {"exp_avg": m}}}`` the member
``state/0/exp_avg.npy``: plain ``numpy.load`` reads them as ``fc.weight`` and
``state/0/exp_avg``.

The first member, ``__rtx_save__``, marks the file as rtx's; the last,
``__rtx_tree__`` (a 0-d unicode array), is the JSON manifest: the tree's
structure — container types, int vs str keys, and the non-array leaves — in
which each array leaf is ``{"t": "array", "key": <member name less .npy>}``.
A file with the mark but no manifest (a write cut short) does not load, nor
does one whose members differ from those the manifest names.  Files of format
``rtx.save/1`` (no mark, no escaping of digit keys or ``.npy``) still load.

Reading is defensive: every member must be a ``.npy`` array of a plain
numeric, bool, string or datetime dtype, stored or deflated, each named once;
the sizes a member declares (in the zip directory and in its ``.npy`` header)
are checked against each other and against the file's own size before
anything is read, so a malformed or hostile file is a ``ValueError`` naming the
member (or a ``MemoryError`` when it truly declares more than the machine has),
never a large allocation.
"""

from __future__ import annotations

import ast
import io
import json
import math
import os
import re
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterable
from typing import IO, Any

import numpy as np

from ._fileio import atomic_write
from .tensor import Tensor

TREE_KEY = "__rtx_tree__"
MARK_KEY = "__rtx_save__"
_FORMAT = "rtx.save/2"
_FORMAT_1 = "rtx.save/1"
_RESERVED = (TREE_KEY, MARK_KEY)
_MAX_DEPTH = 100  # tree levels; a state dict nests 2-4 (the manifest JSON nests 3x this)
_MAX_NAME_BYTES = 0xFFFF  # a zip header's name length is 16 bits
_NPY_MAGIC = b"\x93NUMPY"
_MAX_HEADER = 10000  # numpy's own limit on a .npy header (np.load's max_header_size)
_DEFLATE_RATIO = 1032  # deflate's largest possible expansion (1032 : 1)
_DEFLATE_SLACK = 4096
_LOCAL_HEADER = 30  # the fixed part of a zip local file header
_ZIP_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
_LOAD_KINDS = "biufcSUmM"  # plain dtypes; no objects, no structured / void records
_CHUNK = 1 << 20  # read size per call (1 MiB measured fastest, 64 KiB to 16 MiB)
_INT_KEY = re.compile(r"-?[0-9]+")
_INTP_MAX = int(np.iinfo(np.intp).max)

# what zipfile / zlib raise on a malformed archive (OSError and MemoryError pass)
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, TypeError, KeyError,
               IndexError, struct.error, EOFError, NotImplementedError, UnicodeError,
               OverflowError, RuntimeError, zlib.error)


# ----------------------------------------------------------------- member names
def _esc_char(c: str) -> str:
    o = ord(c)
    return f"%u{o:04X}" if o > 0xFF else f"%{o:02X}"


def _escape(key: Any) -> str:
    """``key`` as one path segment of a member name.

    ``%``, ``/``, ``\\``, control characters (a NUL would end the zip name) and
    lone surrogates (no UTF-8 form) become ``%XX`` / ``%uXXXX``; a str key that
    reads as a decimal integer has its first character escaped, so it differs
    from the int key's segment.  Every ``%`` starts an escape, so the segment
    decodes back to exactly one key: the naming is injective.
    """
    if isinstance(key, int):
        return str(key)
    s = "".join(_esc_char(c) if c in "%/\\" or ord(c) < 32 or ord(c) == 127
                or 0xD800 <= ord(c) <= 0xDFFF else c for c in key)
    if _INT_KEY.fullmatch(s):
        s = _esc_char(s[0]) + s[1:]
    return s


def _member_key(path: list[str]) -> str:
    """The member name (less ``.npy``) of the leaf at ``path``."""
    if not path:
        return "__root__"
    key = "/".join(path)
    if key in _RESERVED:
        key = _esc_char(key[0]) + key[1:]
    if key.endswith(".npy"):  # numpy strips one ".npy": keep names it shows distinct
        key = key[:-4] + "%2Enpy"
    return key


def _check_name(name: str, who: str) -> None:
    """A zip member name that writes and reads back as itself, or ``ValueError``."""
    if "\x00" in name or "\\" in name:
        raise ValueError(f"{who}: name {name[:80]!r} holds a NUL or a backslash, which a "
                         "zip member name cannot keep")
    try:
        n = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"{who}: name {name[:80]!r} has no UTF-8 form (a lone "
                         "surrogate)") from None
    if n > _MAX_NAME_BYTES:
        raise ValueError(f"{who}: name {name[:40]!r}... is {n} bytes long; a zip member "
                         f"name holds at most {_MAX_NAME_BYTES} bytes")


# ----------------------------------------------------------------- writing
def _zip_into(fh: IO[bytes], members: list[tuple[str, np.ndarray]], compress: bool) -> None:
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(fh, mode="w", compression=method, allowZip64=True) as zf:
        for name, arr in members:
            with zf.open(name, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, arr, allow_pickle=False)


def _write_npz(target: str | os.PathLike[str] | IO[bytes],
               members: Iterable[tuple[str, np.ndarray]], compress: bool, who: str) -> None:
    """Write ``(member name, array)`` pairs as a zip of ``.npy`` members.

    Every name and array is checked first, so nothing is written for bad input;
    a path is written atomically (``rtx._fileio.atomic_write``: the previous
    file survives any failure).  A file object is written in place.
    """
    if not isinstance(compress, bool):
        raise TypeError(f"{who}: compress must be a bool, got {compress!r}")
    checked: list[tuple[str, np.ndarray]] = []
    for name, arr in members:
        _check_name(name, who)
        if not isinstance(arr, np.ndarray) or arr.dtype.hasobject:
            raise TypeError(f"{who}: member {name[:80]!r} is not a numeric array")
        checked.append((name, arr))
    if isinstance(target, (str, os.PathLike)):
        with atomic_write(target, "wb") as fh:
            _zip_into(fh, checked, compress)
    else:
        _zip_into(target, checked, compress)


# ----------------------------------------------------------------- reading
def _memory_budget() -> int | None:
    """Bytes of physical memory, or ``None`` where the OS does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def _read_exact(f: IO[bytes], n: int, what: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise ValueError(f"{what}: ends early (truncated)")
    return data


def _parse_header(f: IO[bytes], what: str) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    """``(dtype, shape, fortran_order, header bytes)`` of a ``.npy`` stream."""
    if f.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
        raise ValueError(f"{what}: not a .npy array (no .npy magic)")
    major, minor = _read_exact(f, 2, what)
    if (major, minor) not in ((1, 0), (2, 0), (3, 0)):
        raise ValueError(f"{what}: unknown .npy version {major}.{minor}")
    fmt = "<H" if major == 1 else "<I"
    (hlen,) = struct.unpack(fmt, _read_exact(f, struct.calcsize(fmt), what))
    if hlen > _MAX_HEADER:
        raise ValueError(f"{what}: .npy header of {hlen} bytes (at most {_MAX_HEADER})")
    raw = _read_exact(f, hlen, what)
    try:
        text = raw.decode("utf-8" if major == 3 else "latin1")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                d = ast.literal_eval(text.lstrip(" \t"))
            except MemoryError:  # the parser's own stack ("s_push"), not an array
                raise ValueError("the header nests too deeply") from None
        if not isinstance(d, dict) or set(d) != {"descr", "fortran_order", "shape"}:
            raise ValueError("the header must be a dict of 'descr', 'fortran_order', 'shape'")
        descr, order, shape = d["descr"], d["fortran_order"], d["shape"]
        if not isinstance(order, bool):
            raise ValueError(f"fortran_order {order!r} is not a bool")
        if not (isinstance(shape, tuple) and all(type(s) is int and s >= 0 for s in shape)):
            raise ValueError(f"shape {shape!r} is not a tuple of non-negative ints")
        if len(shape) > 64:
            raise ValueError(f"shape of {len(shape)} dimensions (numpy holds 64)")
        if not isinstance(descr, str):
            raise ValueError(f"dtype {descr!r} is not a plain dtype (records are not read)")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            dtype = np.dtype(descr)
    except (ValueError, TypeError, SyntaxError, RecursionError, UnicodeError, Warning,
            OverflowError) as exc:
        raise ValueError(f"{what}: bad .npy header ({exc})") from None
    if (dtype.kind not in _LOAD_KINDS or dtype.hasobject or dtype.fields is not None
            or dtype.subdtype is not None or dtype.itemsize == 0):
        raise ValueError(f"{what}: dtype {dtype} is not loaded (only plain numeric, bool, "
                         "string and datetime arrays; nothing is unpickled: allow_pickle=False)")
    if math.prod(s for s in shape if s) * dtype.itemsize > _INTP_MAX:  # numpy's own bound
        raise ValueError(f"{what}: shape {shape} of {dtype} is beyond what numpy can hold")
    return dtype, shape, order, len(_NPY_MAGIC) + 2 + struct.calcsize(fmt) + hlen


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, what: str) -> np.ndarray:
    with zf.open(info) as f:
        dtype, shape, fortran, head = _parse_header(f, what)
        count = math.prod(shape)
        if count * dtype.itemsize != info.file_size - head:
            raise ValueError(f"{what}: the .npy header declares shape {shape} of {dtype} "
                             f"({count * dtype.itemsize} bytes) but the member holds "
                             f"{info.file_size - head} bytes of data")
        arr = np.empty(count, dtype=dtype)  # at most the member's size, checked above
        buf = arr.view(np.uint8).data if arr.size else memoryview(b"")
        pos = 0
        while pos < len(buf):
            n = f.readinto(buf[pos:pos + _CHUNK])  # type: ignore[attr-defined]
            if not n:
                raise ValueError(f"{what}: ends early (truncated)")
            pos += n
        if f.read(1):
            raise ValueError(f"{what}: data past the array's end")
    if fortran:
        return arr.reshape(shape[::-1]).T
    return arr.reshape(shape)


def _source_label(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)):
        return str(os.fspath(source))
    return str(getattr(source, "name", type(source).__name__))


def _read_npz(source: str | os.PathLike[str] | IO[bytes], who: str,
              check_names: Callable[[list[str], str], None] | None = None
              ) -> dict[str, np.ndarray]:
    """Every member of an ``.npz`` as an array, in order, keyed by its zip name.

    ``check_names(names, label)`` sees the member names (directory checked, nothing
    read yet) and may raise.

    Raises ``ValueError`` naming the file and the member for anything malformed
    (see the module doc), ``MemoryError`` when the arrays declare more bytes
    than the machine's memory, ``FileNotFoundError`` for a missing path.
    """
    label = _source_label(source)
    close = isinstance(source, (str, os.PathLike))
    fh: Any = open(source, "rb") if isinstance(source, (str, os.PathLike)) else source
    try:
        try:
            start = fh.tell()
            size = fh.seek(0, os.SEEK_END)  # zip offsets count from the file's start
            fh.seek(start)
        except (OSError, AttributeError, ValueError) as exc:
            raise ValueError(f"{who}: {label}: cannot seek in the file ({exc})") from None
        if size <= start:
            raise ValueError(f"{who}: {label}: the file is empty, not an .npz (zip) file")
        try:
            zf = zipfile.ZipFile(fh)
        except _ZIP_ERRORS as exc:
            raise ValueError(f"{who}: {label}: not an .npz (zip) file ({exc})") from None
        with zf:
            infos = _check_directory(zf.infolist(), size, who, label)
            if check_names is not None:
                check_names([i.filename for i in infos], label)
            out: dict[str, np.ndarray] = {}
            for info in infos:
                what = f"{who}: {label}: member {info.filename!r}"
                try:
                    out[info.filename] = _read_member(zf, info, what)
                except _ZIP_ERRORS as exc:
                    if isinstance(exc, ValueError) and str(exc).startswith(what):
                        raise
                    raise ValueError(f"{what}: corrupt or truncated ({exc})") from None
            return out
    finally:
        if close:
            fh.close()


def _check_directory(infos: list[zipfile.ZipInfo], size: int, who: str,
                     label: str) -> list[zipfile.ZipInfo]:
    """The zip directory's entries, checked before any member is read."""
    seen: set[str] = set()
    for info in infos:
        what = f"{who}: {label}: member {info.filename!r}"
        if info.filename in seen:
            raise ValueError(f"{what} appears twice in the archive")
        seen.add(info.filename)
        if not info.filename.endswith(".npy"):
            raise ValueError(f"{what} is not a .npy array (its name lacks .npy)")
        if info.flag_bits & 0x1:
            raise ValueError(f"{what} is encrypted")
        if info.compress_type not in _ZIP_METHODS:
            raise ValueError(f"{what} uses compression method {info.compress_type}; only "
                             "stored and deflated members are read")
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise ValueError(f"{what} is stored but declares {info.file_size} bytes in "
                             f"{info.compress_size}")
        if info.file_size > _DEFLATE_RATIO * info.compress_size + _DEFLATE_SLACK:
            raise ValueError(f"{what} declares {info.file_size} bytes from "
                             f"{info.compress_size} compressed: more than deflate can "
                             "expand (a zip bomb or a corrupt directory)")
        if info.header_offset < 0 or info.header_offset + info.compress_size > size:
            raise ValueError(f"{what} extends past the end of the file (truncated?)")
    end = -1
    prev = ""
    for info in sorted(infos, key=lambda i: i.header_offset):
        if info.header_offset < end:
            raise ValueError(f"{who}: {label}: members {prev!r} and {info.filename!r} "
                             "overlap in the file (a zip bomb or a corrupt directory)")
        end = info.header_offset + _LOCAL_HEADER + info.compress_size
        prev = info.filename
    total = sum(i.file_size for i in infos)
    budget = _memory_budget()
    if budget is not None and total > budget:
        raise MemoryError(f"{who}: {label}: the arrays declare {total} bytes, more than this "
                          f"machine's {budget} bytes of memory")
    return infos


# ----------------------------------------------------------------- the tree
def _where(path: list[str]) -> str:
    return "/".join(path) or "<root>"


def _encode(obj: Any, path: list[str], arrays: dict[str, np.ndarray],
            on_path: set[int]) -> Any:
    if isinstance(obj, Tensor):
        obj = np.array(obj.numpy(), copy=True)
    if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
        obj = np.asarray(obj)
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biufU" or obj.dtype.fields is not None:
            raise TypeError(f"rtx.save: cannot save an array of dtype {obj.dtype} at "
                            f"{_where(path)} (numeric arrays only)")
        key = _member_key(path)
        if key in arrays:  # unreachable while the naming is injective
            raise ValueError(f"rtx.save: two values map to the same key {key!r}")
        arrays[key] = obj
        return {"t": "array", "key": key}
    if isinstance(obj, (dict, list, tuple)):
        if len(path) >= _MAX_DEPTH:
            raise ValueError(f"rtx.save: the tree nests deeper than {_MAX_DEPTH} levels at "
                             f"{_where(path)[:200]}")
        if id(obj) in on_path:
            raise ValueError(f"rtx.save: the tree contains itself at {_where(path)[:200]} "
                             "(a cycle)")
        on_path.add(id(obj))
        try:
            if isinstance(obj, dict):
                items = []
                for k, v in obj.items():
                    if isinstance(k, bool) or not isinstance(k, (str, int)):
                        raise TypeError(f"rtx.save: dict keys must be str or int, got {k!r}")
                    items.append([k, _encode(v, path + [_escape(k)], arrays, on_path)])
                return {"t": "dict", "items": items}
            kind = "list" if isinstance(obj, list) else "tuple"
            return {"t": kind, "items": [_encode(v, path + [str(i)], arrays, on_path)
                                         for i, v in enumerate(obj)]}
        finally:
            on_path.discard(id(obj))
    if obj is None or isinstance(obj, (bool, int, str)):
        return {"t": "value", "v": obj}
    if isinstance(obj, float):
        if math.isfinite(obj):
            return {"t": "value", "v": obj}
        return {"t": "float", "v": repr(obj)}  # nan / inf / -inf, kept exact
    raise TypeError(
        f"rtx.save: cannot save a {type(obj).__name__} at {_where(path)}; "
        "only dicts, lists, tuples, arrays, tensors, numbers, strings and None are saved "
        "(no pickled objects)"
    )


class _Decoder:
    """Rebuilds the tree from the manifest, checking every node; each member is
    used exactly once."""

    def __init__(self, arrays: dict[str, np.ndarray], what: str) -> None:
        self.arrays, self.what = arrays, what
        self.used: set[str] = set()

    def bad(self, msg: str) -> ValueError:
        return ValueError(f"{self.what}: {msg}")

    def node(self, node: Any, depth: int) -> Any:
        if not isinstance(node, dict) or not isinstance(node.get("t"), str):
            raise self.bad(f"a tree node is not {{'t': <type>, ...}}: {str(node)[:80]}")
        t = node["t"]
        if t == "array":
            key = node.get("key")
            if not isinstance(key, str) or key not in self.arrays:
                raise self.bad(f"the tree names member {str(key)[:80]!r}, which the file "
                               "lacks")
            if key in self.used:
                raise self.bad(f"the tree names member {key[:80]!r} twice")
            self.used.add(key)
            return self.arrays[key]
        if t in ("dict", "list", "tuple"):
            items = node.get("items")
            if not isinstance(items, list):
                raise self.bad(f"a {t} node has no list of items")
            if depth >= _MAX_DEPTH:
                raise self.bad(f"the tree nests deeper than {_MAX_DEPTH} levels")
            if t == "list":
                return [self.node(v, depth + 1) for v in items]
            if t == "tuple":
                return tuple(self.node(v, depth + 1) for v in items)
            out: dict[Any, Any] = {}
            for item in items:
                if not (isinstance(item, list) and len(item) == 2):
                    raise self.bad("a dict item is not a [key, node] pair")
                k, v = item
                if isinstance(k, bool) or not isinstance(k, (str, int)):
                    raise self.bad(f"a dict key is not a str or int: {str(k)[:80]}")
                if k in out:
                    raise self.bad(f"dict key {str(k)[:80]!r} appears twice")
                out[k] = self.node(v, depth + 1)
            return out
        if t == "value":
            v = node.get("v")
            if v is not None and not isinstance(v, (bool, int, float, str)):
                raise self.bad(f"a value node holds a {type(v).__name__}")
            return v
        if t == "float":
            v = node.get("v")
            if v not in ("nan", "inf", "-inf"):
                raise self.bad(f"a float node holds {str(v)[:80]!r} (nan, inf or -inf)")
            return float(v)
        raise self.bad(f"unknown node type {t[:80]!r} in the file's tree")


def _manifest(doc: np.ndarray, what: str) -> dict[str, Any]:
    if doc.dtype.kind != "U" or doc.ndim != 0:
        raise ValueError(f"{what}: member {TREE_KEY!r} is not a 0-d string")
    try:
        meta = json.loads(str(doc))
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{what}: member {TREE_KEY!r} is not valid JSON ({exc})") from None
    if not isinstance(meta, dict) or "tree" not in meta:
        raise ValueError(f"{what}: member {TREE_KEY!r} is not an rtx.save manifest")
    if meta.get("format") not in (_FORMAT, _FORMAT_1):
        raise ValueError(f"{what}: unknown format {str(meta.get('format'))[:80]!r} "
                         f"(this rtx reads {_FORMAT_1} and {_FORMAT})")
    return meta


def _check_complete(names: list[str], label: str) -> None:
    if MARK_KEY + ".npy" in names and TREE_KEY + ".npy" not in names:
        raise ValueError(f"rtx.load: {label}: incomplete rtx.save file (no {TREE_KEY!r} "
                         "manifest: the write was cut short)")


# ----------------------------------------------------------------- public
def save(obj: Any, path: str | os.PathLike[str] | io.IOBase, *,
         compress: bool = False) -> None:
    """Save a state dict (or a tree of them) to an ``.npz`` file (see the module doc).

    Everything is checked before anything is written, and a path is written
    atomically: a failure (bad input, a full disk) leaves the previous file as
    it was.  ``compress=True`` deflates the members (as ``numpy.savez_compressed``).
    """
    arrays: dict[str, np.ndarray] = {}
    tree = _encode(obj, [], arrays, set())
    doc = json.dumps({"format": _FORMAT, "tree": tree})
    members = [(MARK_KEY + ".npy", np.array(_FORMAT))]
    members += [(k + ".npy", a) for k, a in arrays.items()]
    members.append((TREE_KEY + ".npy", np.array(doc)))  # last: a cut-short file lacks it
    _write_npz(path, members, compress, "rtx.save")  # type: ignore[arg-type]


def load(path: str | os.PathLike[str] | io.IOBase) -> Any:
    """Load what ``rtx.save`` wrote: array leaves come back as numpy arrays.

    A plain ``.npz`` of arrays (no ``__rtx_tree__`` member) loads as a flat dict.
    Nothing is unpickled.  A malformed, truncated or incomplete file is a
    ``ValueError`` naming the member (see the module doc).
    """
    raw = _read_npz(path, "rtx.load", _check_complete)  # type: ignore[arg-type]
    what = f"rtx.load: {_source_label(path)}"
    names = list(raw)
    arrays = {n[:-4]: a for n, a in raw.items()}
    doc = arrays.pop(TREE_KEY, None)
    if doc is None:
        return arrays
    meta = _manifest(doc, what)
    if meta["format"] == _FORMAT:  # format 1 has no mark (a member of that name is data)
        mark = arrays.pop(MARK_KEY, None)
        if mark is None or names[0] != MARK_KEY + ".npy" or names[-1] != TREE_KEY + ".npy":
            raise ValueError(f"{what}: an {_FORMAT} file starts with {MARK_KEY!r} and ends "
                             f"with {TREE_KEY!r}")
        if mark.dtype.kind != "U" or mark.ndim != 0 or str(mark) != _FORMAT:
            raise ValueError(f"{what}: member {MARK_KEY!r} does not say {_FORMAT!r}")
    dec = _Decoder(arrays, what)
    tree = dec.node(meta["tree"], 0)
    extra = sorted(set(arrays) - dec.used)
    if extra:
        raise ValueError(f"{what}: member {extra[0][:80]!r} is not in the manifest "
                         f"({len(extra)} such)")
    return tree


__all__ = ["load", "save"]
