"""Hardening 3 (issue 17), files: checkpoints and graph files.

rtx.save / rtx.load and save_hetgraph / load_hetgraph: injective member names,
atomic writes, a partial or truncated file never loads, duplicate members, crafted
and hostile files (a ValueError naming the member, or a MemoryError; never another
exception, never a big allocation), label / mask / feature validation, compression.
"""

from __future__ import annotations

import io
import json
import math
import os
import struct
import warnings
import zipfile
import zlib

import numpy as np
import pytest
from conftest import run_child
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rtx
import rtx.serialization as ser
from rtx.datasets import HeteroGraph, from_pyg, load_hetgraph, save_hetgraph, synthetic_hetgraph


# ----------------------------------------------------------------- helpers
def _npy(arr: np.ndarray) -> bytes:
    b = io.BytesIO()
    np.lib.format.write_array(b, arr, allow_pickle=False)
    return b.getvalue()


def _npy_raw(header: str, data: bytes = b"", version: tuple[int, int] = (1, 0),
             hlen: int | None = None) -> bytes:
    """A .npy stream with a hand-written header (padded as numpy pads it)."""
    h = header.encode("utf-8" if version == (3, 0) else "latin1")
    fmt = "<H" if version == (1, 0) else "<I"
    n = len(h) if hlen is None else hlen
    return b"\x93NUMPY" + bytes(version) + struct.pack(fmt, n) + h + data


def _zip(members: list[tuple[str, bytes]], method: int = zipfile.ZIP_STORED) -> bytes:
    """A zip of (name, bytes) members written by zipfile (duplicates allowed)."""
    b = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns on a duplicate name
        with zipfile.ZipFile(b, "w", compression=method) as zf:
            for name, data in members:
                zf.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    return b.getvalue()


def _raw_zip(entries: list[dict]) -> bytes:
    """A zip built byte by byte, so its directory can declare anything.

    Each entry: name, data (the stored / compressed bytes), method (default 0),
    crc (default the CRC of ``plain`` or ``data``), usize / csize (declared sizes,
    default the true ones; zip64 extras when they need 64 bits), offset (point the
    directory entry at another entry's local header: an index), flags.
    """
    out = io.BytesIO()
    offsets = []
    for e in entries:
        name = e["name"].encode()
        data = e["data"]
        crc = e.get("crc", zlib.crc32(e.get("plain", data)))
        e["_crc"] = crc
        offsets.append(out.tell())
        out.write(struct.pack("<4s5H3L2H", b"PK\x03\x04", 45, e.get("flags", 0),
                              e.get("method", 0), 0, 0x21, crc, 0, 0, len(name), 0))
        out.write(name)
        out.write(data)
    cd_start = out.tell()
    for i, e in enumerate(entries):
        name = e["name"].encode()
        usize = e.get("usize", len(e.get("plain", e["data"])))
        csize = e.get("csize", len(e["data"]))
        extra = b""
        u32, c32 = usize, csize
        if usize > 0xFFFFFFFF or csize > 0xFFFFFFFF:
            extra = struct.pack("<2H2Q", 1, 16, usize, csize)
            u32 = c32 = 0xFFFFFFFF
        off = offsets[e.get("offset", i)]
        out.write(struct.pack("<4s4B4HL2L5H2L", b"PK\x01\x02", 45, 3, 45, 0,
                              e.get("flags", 0), e.get("method", 0), 0, 0x21, e["_crc"],
                              c32, u32, len(name), len(extra), 0, 0, 0, 0, off))
        out.write(name)
        out.write(extra)
    cd_size = out.tell() - cd_start
    out.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries), len(entries),
                          cd_size, cd_start, 0))
    return out.getvalue()


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def _u8_header(n: int) -> bytes:
    """A .npy v1 header (magic included) for a uint8 array of n items, 128 bytes long."""
    h = f"{{'descr': '|u1', 'fortran_order': False, 'shape': ({n},), }}"
    h = h + " " * (128 - 10 - len(h) - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode("latin1")


def _quoted_overlap_bomb(n: int, kernel: int) -> bytes:
    """Fifield's quoted-overlap zip bomb made of .npy members.

    Member i's deflate stream is its own .npy header (a uint8 array), a stored
    block quoting member i+1's local header, then member i+1's stream, and so on
    down to one shared kernel of ``kernel`` zero bytes.  Every member's name,
    sizes, CRC and .npy header agree and each stays within deflate's ratio; only
    the members overlap in the file, so ``n`` members expand to ``n`` kernels.
    """
    names = [f"m{i:05d}.npy".encode() for i in range(n)]

    def local(i: int, crc: int, cs: int, us: int) -> bytes:
        return struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc, cs, us,
                           len(names[i]), 0) + names[i]

    def block(data: bytes) -> bytes:  # complete, byte-aligned, not final
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)

    out_tail, stream_tail = bytes(kernel), _deflate(bytes(kernel))
    info: list = [None] * n
    heads: list = [b""] * n
    for i in range(n - 1, -1, -1):  # from the kernel back to the first member
        hdr = _u8_header(len(out_tail))
        heads[i] = block(hdr)
        output, stream = hdr + out_tail, heads[i] + stream_tail
        info[i] = (zlib.crc32(output), len(stream), len(output))
        h = local(i, *info[i])
        if i:
            out_tail = h + output
            stream_tail = b"\x00" + struct.pack("<HH", len(h), 0xFFFF ^ len(h)) + h + stream
        else:
            body = h + stream
    offsets, pos = [0], 30 + len(names[0])
    for i in range(1, n):  # member i's header follows member i-1's header block + quote
        pos += len(heads[i - 1]) + 5
        offsets.append(pos)
        pos += 30 + len(names[i])
    cd = b"".join(struct.pack("<4s4B4HL2L5H2L", b"PK\x01\x02", 20, 3, 20, 0, 0, 8, 0, 0x21,
                              *info[i], len(names[i]), 0, 0, 0, 0, 0, offsets[i]) + names[i]
                  for i in range(n))
    return body + cd + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n, n, len(cd), len(body), 0)


def _manifest(tree: dict, fmt: str = "rtx.save/2") -> bytes:
    return _npy(np.array(json.dumps({"format": fmt, "tree": tree})))


def _checkpoint(members: list[tuple[str, bytes]], tree: dict) -> bytes:
    """A format-2 file: the mark, the members, the manifest."""
    return _zip([("__rtx_save__.npy", _npy(np.array("rtx.save/2"))), *members,
                 ("__rtx_tree__.npy", _manifest(tree))])


def _leaf(key: str) -> dict:
    return {"t": "array", "key": key}


def _dict(*items) -> dict:
    return {"t": "dict", "items": [list(i) for i in items]}


def _load_bytes(data: bytes, tmp_path, name: str = "f.npz"):
    p = tmp_path / name
    p.write_bytes(data)
    return rtx.load(p)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


# ----------------------------------------------------------------- 1. member names
def test_npy_suffix_keys_do_not_collide(tmp_path):
    """{'a.npy': A, 'a': B} came back as B twice (np.savez's a.npy.npy / a.npy)."""
    a, b = np.arange(3.0), np.full(2, 7.0)
    tree = {"a.npy": a, "a": b, "d": {"w.npy": a + 1, "w": b + 1, "w.npy.npy": a + 2}}
    p = tmp_path / "k.npz"
    rtx.save(tree, p)
    assert _same(tree, rtx.load(p))
    with np.load(p, allow_pickle=False) as z:  # plain numpy sees distinct names too
        np.testing.assert_array_equal(z["a"], b)
        np.testing.assert_array_equal(z["a%2Enpy"], a)
        np.testing.assert_array_equal(z["d/w"], b + 1)


def test_escaped_keys_do_not_collide(tmp_path):
    """Keys that a missing escape would merge ('%' unescaped: '%2F' and '/' are one
    name) and keys shaped like the reserved members or like int keys."""
    keys = ["%2F", "/", "a%", "a%25", "%", "%25", "\\", "%5C", "\x00", "%00", "1", "%31",
            "-1", "%2D1", "__rtx_tree__", "%5F_rtx_tree__", "__rtx_save__", "__root__",
            "x.npy", "x%2Enpy", "\ud800", "%uD800", "", "01"]
    tree = {k: np.full(1, float(i)) for i, k in enumerate(keys)}
    tree[1] = np.full(1, -1.0)
    tree[-1] = np.full(1, -2.0)
    p = tmp_path / "e.npz"
    rtx.save(tree, p)
    back = rtx.load(p)
    assert _same(tree, back)
    with zipfile.ZipFile(p) as zf:
        names = zf.namelist()
    assert len(names) == len(set(names)) == len(tree) + 2


_tricky = st.one_of(
    st.sampled_from(["1", "-1", "%31", "a", "a.npy", "a%2Enpy", "a.npy.npy", "%", "%25", "/",
                     "%2F", "__rtx_tree__", "__rtx_save__", "%5F_rtx_tree__", ""]),
    st.text(alphabet="%/\\.npy1-_0\x00aF2E", max_size=6))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.dictionaries(st.one_of(_tricky, st.integers(-3, 3)),
                       st.one_of(st.just(0), st.dictionaries(_tricky, st.just(0),
                                                             max_size=4)),
                       min_size=2, max_size=8))
def test_naming_is_injective(shape, tmp_path_factory):
    """Any two leaves get two members: the tree round-trips, whatever the keys."""
    counter = iter(range(10**6))

    def fill(node):
        if isinstance(node, dict):
            return {k: fill(v) for k, v in node.items()}
        return np.full(1, float(next(counter)))

    tree = fill(shape)
    p = tmp_path_factory.mktemp("inj") / "t.npz"
    rtx.save(tree, p)
    assert _same(tree, rtx.load(p))


def _save_format_1(obj, path) -> None:
    """rtx.save as it was (format rtx.save/1: np.savez, key = path, '%' / '/' / '\\'
    and control characters escaped): the files earlier rtx versions wrote."""
    arrays: dict = {}

    def esc(k):
        return "".join(f"%{ord(c):02X}" if c in "%/\\" or ord(c) < 32 or ord(c) == 127
                       else c for c in str(k))

    def enc(o, path):
        if isinstance(o, np.ndarray):
            key = "/".join(path) if path else "__root__"
            assert key not in arrays
            arrays[key] = o
            return {"t": "array", "key": key}
        if isinstance(o, dict):
            return {"t": "dict", "items": [[k, enc(v, path + [esc(k)])] for k, v in o.items()]}
        if isinstance(o, (list, tuple)):
            return {"t": "list" if isinstance(o, list) else "tuple",
                    "items": [enc(v, path + [str(i)]) for i, v in enumerate(o)]}
        if isinstance(o, float) and not math.isfinite(o):
            return {"t": "float", "v": repr(o)}
        return {"t": "value", "v": o}

    tree = enc(obj, [])
    arrays["__rtx_tree__"] = np.array(json.dumps({"format": "rtx.save/1", "tree": tree}))
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def test_format_1_checkpoints_still_load(tmp_path):
    m, w = np.ones(2, np.float32), np.arange(6.0).reshape(2, 3)
    obj = {"model": {"fc.weight": w, "a/b%c": w + 1},
           "optim": {"state": {0: {"step": 3, "exp_avg": m}},
                     "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0],
                                       "inf": math.inf, "x": None}]},
           "a.npy": m + 1, "a": m + 2}  # the pair format 1 wrote as a.npy.npy / a.npy
    p = tmp_path / "v1.npz"
    _save_format_1(obj, p)
    assert _same(obj, rtx.load(p))


_v1_trees = st.recursive(
    st.one_of(st.none(), st.integers(-5, 5), st.floats(allow_nan=True), st.text(max_size=3),
              st.integers(0, 3).map(lambda n: np.arange(n, dtype=np.float64))),
    lambda kids: st.one_of(st.lists(kids, max_size=3), st.lists(kids, max_size=3).map(tuple),
                           st.dictionaries(st.text(max_size=4), kids, max_size=3),
                           st.dictionaries(st.integers(0, 4), kids, max_size=3)),
    max_leaves=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=_v1_trees)
def test_any_format_1_tree_loads(tree, tmp_path_factory):
    p = tmp_path_factory.mktemp("v1") / "t.npz"
    _save_format_1(tree, p)
    assert _same(tree, rtx.load(p))


# ----------------------------------------------------------------- 2. atomic, never partial
def test_long_key_is_refused_before_writing(tmp_path):
    """A key of 64 KiB made zipfile fail midway; the truncated target then loaded as
    a flat dict {'w': ...}.  Now: ValueError up front, the previous file intact."""
    p = tmp_path / "ck.npz"
    rtx.save({"w": np.ones(3)}, p)
    before = p.read_bytes()
    with pytest.raises(ValueError, match="65535 bytes"):
        rtx.save({"w": np.ones(2), "k" * 65536: np.ones(1), "z": np.ones(1)}, p)
    assert p.read_bytes() == before
    assert os.listdir(tmp_path) == ["ck.npz"]
    with pytest.raises(ValueError, match="65535 bytes"):  # UTF-8 bytes count, not chars
        rtx.save({"\u00e9" * 32766: np.ones(1)}, p)
    rtx.save({"k" * 65531: np.ones(1)}, p)  # 65531 + ".npy": the longest name that fits
    np.testing.assert_array_equal(rtx.load(p)["k" * 65531], np.ones(1))


@pytest.mark.parametrize("which", ["rtx.save", "save_hetgraph"])
def test_failure_midway_keeps_previous_file(tmp_path, monkeypatch, which):
    g = synthetic_hetgraph(40, seed=1)
    p = tmp_path / "f.npz"
    if which == "rtx.save":
        rtx.save({"w": np.ones(3)}, p)
    else:
        save_hetgraph(g, p)
    before = p.read_bytes()
    calls = []
    real = np.lib.format.write_array

    def failing(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(*a, **k)

    monkeypatch.setattr(np.lib.format, "write_array", failing)
    with pytest.raises(OSError, match="No space"):
        if which == "rtx.save":
            rtx.save({"a": np.zeros(4), "b": np.zeros(5), "c": np.zeros(6)}, p)
        else:
            save_hetgraph(synthetic_hetgraph(50, seed=2), p)
    monkeypatch.undo()
    assert len(calls) == 2
    assert p.read_bytes() == before
    assert os.listdir(tmp_path) == ["f.npz"]  # no temporary file left behind
    if which == "rtx.save":
        np.testing.assert_array_equal(rtx.load(p)["w"], np.ones(3))
    else:
        assert load_hetgraph(p).num_nodes_dict == g.num_nodes_dict


def test_cut_short_write_to_a_file_object_does_not_load(monkeypatch):
    """A file object cannot be replaced atomically; what a failure leaves there (a
    zip closed after the first members) must not load as a smaller dict."""
    buf = io.BytesIO()
    real = np.lib.format.write_array
    calls = []

    def failing(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(*a, **k)

    monkeypatch.setattr(np.lib.format, "write_array", failing)
    with pytest.raises(OSError):
        rtx.save({"a": np.zeros(4), "b": np.zeros(5), "c": np.zeros(6)}, buf)
    monkeypatch.undo()
    buf.seek(0)
    with pytest.raises(ValueError, match="incomplete"):
        rtx.load(buf)


def test_truncated_checkpoint_never_loads(tmp_path):
    obj = {"model": {"w": np.arange(300.0), "b": np.ones(7)}, "step": 3}
    for compress in (False, True):
        p = tmp_path / f"full{compress}.npz"
        rtx.save(obj, p, compress=compress)
        data = p.read_bytes()
        assert _same(obj, rtx.load(p))
        cuts = sorted(set(range(0, len(data), max(1, len(data) // 40)))
                      | set(range(len(data) - 120, len(data))))
        for cut in cuts:
            with pytest.raises(ValueError):
                _load_bytes(data[:cut], tmp_path, "cut.npz")


def test_save_and_load_file_objects():
    buf = io.BytesIO()
    tree = {"w": np.arange(4.0), "n": [1, 2.5, None]}
    rtx.save(tree, buf)
    buf.seek(0)
    assert _same(tree, rtx.load(buf))


def test_cycles_and_depth_are_value_errors(tmp_path):
    d: dict = {}
    d["self"] = d
    with pytest.raises(ValueError, match="cycle"):
        rtx.save(d, tmp_path / "c.npz")
    deep: list = [np.ones(1)]
    for _ in range(150):
        deep = [deep]
    with pytest.raises(ValueError, match="deeper"):
        rtx.save(deep, tmp_path / "c.npz")
    assert os.listdir(tmp_path) == []
    ok: list = [np.ones(1)]  # a shared (not cyclic) subtree is fine
    rtx.save({"a": ok, "b": ok}, tmp_path / "s.npz")
    assert _same({"a": ok, "b": ok}, rtx.load(tmp_path / "s.npz"))


# ----------------------------------------------------------------- 3. duplicate members
def test_duplicate_member_is_refused(tmp_path):
    data = _checkpoint([("w.npy", _npy(np.ones(2))), ("w.npy", _npy(np.zeros(2)))],
                       _dict(["w", _leaf("w")]))
    with pytest.raises(ValueError, match="'w.npy' appears twice"):
        _load_bytes(data, tmp_path)
    plain = _zip([("w.npy", _npy(np.ones(2))), ("w.npy", _npy(np.zeros(2)))])
    with pytest.raises(ValueError, match="'w.npy' appears twice"):
        _load_bytes(plain, tmp_path)
    g = _zip([("x/paper.npy", _npy(np.zeros((3, 2), np.float32))),
              ("y.npy", _npy(np.zeros(3, np.int64))), ("y.npy", _npy(np.ones(3, np.int64)))])
    (tmp_path / "g.npz").write_bytes(g)
    with pytest.raises(ValueError, match="'y.npy' appears twice"):
        load_hetgraph(tmp_path / "g.npz")


# ----------------------------------------------------------------- 4. crafted files
_W = _npy(np.ones(3))
_WT = _dict(["w", _leaf("w")])
_HDR = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"


def _crafted() -> list[tuple[str, bytes, str]]:
    """(case, file bytes, a regex the message must match: the member when there is one)."""
    full = _checkpoint([("w.npy", _W)], _WT)
    cd = full.rindex(b"PK\x01\x02")  # the manifest's directory entry
    bad_crc = bytearray(full)
    bad_crc[full.index(_W) + len(_W) - 1] ^= 0xFF
    bomb_plain = _npy_raw("{'descr': '<f8', 'fortran_order': False, 'shape': (8589934592,), }")
    bomb = _deflate(bomb_plain + bytes(1 << 16))
    return [
        ("empty file", b"", "empty"),
        ("a text file", b"x,y\n1,2\n", r"not an \.npz \(zip\) file"),
        ("half a zip", full[: len(full) // 2], r"not an \.npz|truncated|corrupt"),
        ("directory cut", full[:cd + 10], r"not an \.npz|truncated|corrupt"),
        ("no .npy magic (raw bytes)", _zip([("w.npy", b"raw bytes, no magic")]),
         r"'w\.npy'.*no \.npy magic"),
        ("a name without .npy", _zip([("w", _W)]), r"'w'.*lacks \.npy"),
        ("a directory entry", _zip([("d/", b"")]), r"'d/'"),
        ("unknown .npy version", _zip([("w.npy", b"\x93NUMPY\x09\x00" + _W[8:])]),
         r"'w\.npy'.*version"),
        ("header length 4 GiB", _zip([("w.npy", _npy_raw(_HDR, version=(2, 0),
                                                         hlen=0xFFFFFFF0))]),
         r"'w\.npy'.*header of"),
        ("header cut short", _zip([("w.npy", _npy_raw(_HDR, hlen=len(_HDR) + 40))]),
         r"'w\.npy'"),
        ("header not a dict", _zip([("w.npy", _npy_raw("[1, 2, 3]"))]), r"'w\.npy'.*header"),
        ("header keys missing", _zip([("w.npy", _npy_raw("{'descr': '<f8'}"))]),
         r"'w\.npy'.*header"),
        ("header extra key", _zip([("w.npy", _npy_raw(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (0,), 'x': 1}"))]),
         r"'w\.npy'.*header"),
        ("header nested 5000 deep", _zip([("w.npy", _npy_raw(
            "{'descr': '<f8', 'fortran_order': False, 'shape': " + "(" * 3000 + ")" * 3000
            + "}"))]), r"'w\.npy'.*header"),
        ("header syntax error", _zip([("w.npy", _npy_raw("{'descr': '<f8',,}"))]),
         r"'w\.npy'.*header"),
        ("header with a call", _zip([("w.npy", _npy_raw(
            "{'descr': __import__('os').system('echo hi'), 'fortran_order': False, "
            "'shape': (3,)}", bytes(24)))]), r"'w\.npy'.*header"),
        ("object dtype", _zip([("w.npy", _npy_raw(
            "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", bytes(8)))]),
         r"'w\.npy'.*allow_pickle"),
        ("record dtype (a list)", _zip([("w.npy", _npy_raw(
            "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1,), }",
            bytes(8)))]), r"'w\.npy'.*plain dtype"),
        ("record dtype (a string)", _zip([("w.npy", _npy_raw(
            "{'descr': 'f8,i4', 'fortran_order': False, 'shape': (1,), }", bytes(12)))]),
         r"'w\.npy'.*not loaded"),
        ("void dtype", _zip([("w.npy", _npy_raw(
            "{'descr': '|V8', 'fortran_order': False, 'shape': (1,), }", bytes(8)))]),
         r"'w\.npy'.*not loaded"),
        ("unknown dtype", _zip([("w.npy", _npy_raw(
            "{'descr': 'zz9', 'fortran_order': False, 'shape': (1,), }"))]),
         r"'w\.npy'.*header"),
        ("descr an int", _zip([("w.npy", _npy_raw(
            "{'descr': 8, 'fortran_order': False, 'shape': (1,), }"))]), r"'w\.npy'.*header"),
        ("fortran_order not a bool", _zip([("w.npy", _npy_raw(
            "{'descr': '<f8', 'fortran_order': 'yes', 'shape': (3,), }", bytes(24)))]),
         r"'w\.npy'.*fortran_order"),
        ("negative shape", _zip([("w.npy", _npy_raw(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }"))]),
         r"'w\.npy'.*shape"),
        ("float shape", _zip([("w.npy", _npy_raw(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (3.0,), }", bytes(24)))]),
         r"'w\.npy'.*shape"),
        ("bool shape", _zip([("w.npy", _npy_raw(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (True,), }", bytes(8)))]),
         r"'w\.npy'.*shape"),
        ("huge declared shape, tiny data", _zip([("w.npy", _npy_raw(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }", bytes(24)))]),
         r"'w\.npy'.*declares shape"),
        ("shape product past int64", _zip([("w.npy", _npy_raw(
            "{'descr': '<f8', 'fortran_order': False, "
            "'shape': (1099511627776, 1099511627776), }"))]),
         r"'w\.npy'.*beyond what numpy can hold"),
        ("zero-size dim and a huge one", _zip([("w.npy", _npy_raw(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 1180591620717411303424), }"))]),
         r"'w\.npy'.*beyond what numpy can hold"),
        ("65 dimensions", _zip([("w.npy", _npy_raw(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (" + "1, " * 65 + "), }",
            bytes(8)))]), r"'w\.npy'.*65 dimensions"),
        ("zero-itemsize dtype, 10**16 items", _zip([("w.npy", _npy_raw(
            "{'descr': '|S0', 'fortran_order': False, 'shape': (10000000000000000,), }"))]),
         r"'w\.npy'.*not loaded"),
        ("header of 9990 unary minuses", _zip([("w.npy", _npy_raw("-" * 9990 + "1"))]),
         r"'w\.npy'.*header"),
        ("data short", _zip([("w.npy", _W[:-8])]), r"'w\.npy'.*declares shape"),
        ("data long", _zip([("w.npy", _W + bytes(8))]), r"'w\.npy'.*declares shape"),
        ("bad CRC", bytes(bad_crc), r"'w\.npy'.*corrupt"),
        ("bzip2 member", _zip([("w.npy", _W)], zipfile.ZIP_BZIP2), r"'w\.npy'.*method"),
        ("encrypted flag", _raw_zip([{"name": "w.npy", "data": _W, "flags": 1}]),
         r"'w\.npy'.*encrypted"),
        ("stored, sizes disagree", _raw_zip([{"name": "w.npy", "data": _W,
                                              "usize": len(_W) + 100}]),
         r"'w\.npy'.*stored but declares"),
        ("past the end of the file", _raw_zip([{"name": "w.npy", "data": _W,
                                                "usize": 10**6, "csize": 10**6}]),
         r"'w\.npy'.*past the end"),
        ("deflate bomb: 64 GiB declared from a few KB",
         _raw_zip([{"name": "w.npy", "data": bomb, "method": 8, "plain": bomb_plain,
                    "usize": len(bomb_plain) + 8 * 8589934592}]),
         r"'w\.npy'.*more than deflate can expand"),
        ("two directory entries on one local header",
         _raw_zip([{"name": "a.npy", "data": _W}, {"name": "b.npy", "data": b"",
                                                   "offset": 0, "csize": len(_W),
                                                   "usize": len(_W), "crc": zlib.crc32(_W)}]),
         r"overlap"),
        ("quoted-overlap bomb, every size honest", _quoted_overlap_bomb(4, 10000),
         r"'m00000\.npy' and 'm00001\.npy' overlap in the file"),
        ("deflated data corrupt", _raw_zip([{"name": "w.npy", "data": b"\xff" * 40,
                                             "method": 8, "plain": _W}]),
         r"'w\.npy'.*corrupt"),
        ("mark without manifest", _zip([("__rtx_save__.npy", _npy(np.array("rtx.save/2"))),
                                        ("w.npy", _W)]), r"incomplete"),
        ("manifest not JSON", _zip([("w.npy", _W),
                                    ("__rtx_tree__.npy", _npy(np.array("{not json")))]),
         r"'__rtx_tree__'.*JSON"),
        ("manifest a number array", _zip([("w.npy", _W), ("__rtx_tree__.npy", _W)]),
         r"'__rtx_tree__'.*0-d string"),
        ("manifest a JSON list", _zip([("w.npy", _W),
                                       ("__rtx_tree__.npy", _npy(np.array("[1, 2]")))]),
         r"'__rtx_tree__'.*manifest"),
        ("manifest nested 100000 deep", _zip([("__rtx_tree__.npy", _npy(np.array(
            '{"format": "rtx.save/1", "tree": ' + "[" * 100000 + "]" * 100000 + "}")))]),
         r"'__rtx_tree__'|tree node"),
        ("tree nested 150 levels", _zip([("__rtx_tree__.npy", _npy(np.array(
            '{"format": "rtx.save/1", "tree": ' + '{"t": "list", "items": [' * 150
            + "]}" * 150 + "}")))]), r"deeper"),
        ("unknown format", _zip([("w.npy", _W), ("__rtx_tree__.npy", _manifest(_WT,
                                                                            "rtx.save/9"))]),
         r"unknown format"),
        ("format an object", _zip([("__rtx_tree__.npy", _npy(np.array(
            '{"format": {"a": 1}, "tree": {}}')))]), r"unknown format"),
        ("node type unknown", _checkpoint([], {"t": "pickle", "v": "x"}), r"unknown node type"),
        ("node not a dict", _checkpoint([], ["t", "array"]), r"tree node"),
        ("node type not a str", _checkpoint([], {"t": ["array"]}), r"tree node"),
        ("array key not a str", _checkpoint([("w.npy", _W)], _dict(["w", {"t": "array",
                                                                         "key": ["w"]}])),
         r"lacks"),
        ("array names a missing member", _checkpoint([], _dict(["w", _leaf("w")])),
         r"'w'.*lacks"),
        ("array named twice", _checkpoint([("w.npy", _W)],
                                          _dict(["a", _leaf("w")], ["b", _leaf("w")])),
         r"'w' twice"),
        ("a member the manifest lacks", _checkpoint([("w.npy", _W), ("v.npy", _W)], _WT),
         r"'v' is not in the manifest"),
        ("items not a list", _checkpoint([], {"t": "dict", "items": {"a": 1}}), r"items"),
        ("dict item not a pair", _checkpoint([], {"t": "dict", "items": [["a"]]}), r"pair"),
        ("dict key a list", _checkpoint([], {"t": "dict", "items": [[["k"], _leaf("w")]]}),
         r"dict key"),
        ("dict key a bool", _checkpoint([], {"t": "dict", "items": [[True, {"t": "value",
                                                                           "v": 1}]]}),
         r"dict key"),
        ("dict key twice", _checkpoint([], _dict(["a", {"t": "value", "v": 1}],
                                                 ["a", {"t": "value", "v": 2}])), r"twice"),
        ("value a dict", _checkpoint([], {"t": "value", "v": {"a": 1}}), r"value node"),
        ("float not nan / inf", _checkpoint([], {"t": "float", "v": "1e400"}), r"float node"),
        ("float a number", _checkpoint([], {"t": "float", "v": 3}), r"float node"),
        ("mark not first", _zip([("w.npy", _W),
                                 ("__rtx_save__.npy", _npy(np.array("rtx.save/2"))),
                                 ("__rtx_tree__.npy", _manifest(_WT))]), r"starts with"),
        ("mark says another format", _zip([("__rtx_save__.npy", _npy(np.array("rtx.save/3"))),
                                           ("w.npy", _W), ("__rtx_tree__.npy",
                                                           _manifest(_WT))]),
         r"'__rtx_save__' does not say"),
        ("format 2 without mark", _zip([("w.npy", _W), ("__rtx_tree__.npy", _manifest(_WT))]),
         r"starts with"),
        ("an int of 5000 digits in the manifest", _zip([
            ("__rtx_save__.npy", _npy(np.array("rtx.save/2"))),
            ("__rtx_tree__.npy", _npy(np.array('{"format": "rtx.save/2", "tree": {"t": '
                                               '"value", "v": ' + "9" * 5000 + "}}")))]),
         r"'__rtx_tree__'.*JSON"),
    ]


_CASES = _crafted()


@pytest.mark.parametrize("case,data,match", _CASES, ids=[c[0] for c in _CASES])
def test_crafted_file_is_a_value_error(case, data, match, tmp_path):
    with pytest.raises(ValueError, match=match) as info:
        _load_bytes(data, tmp_path)
    assert str(tmp_path) in str(info.value)  # the message names the file


def test_crafted_table_is_large_enough():
    assert len(_CASES) >= 30


def test_valid_edge_cases_still_load(tmp_path):
    """What the checks must not refuse: Fortran order, big-endian, 0-d, empty,
    strings, datetimes, complex, .npy versions 2 and 3, compressed plain npz."""
    f = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    arrays = {"f": f, "be": np.arange(3, dtype=">i4"), "s": np.array(2.5), "e": np.zeros((0, 3)),
              "u": np.array(["ab", "\u00e9"]), "t": np.array(["2020-01-01"], "M8[D]"),
              "c": np.array([1 + 2j]), "b": np.array([True, False])}
    np.savez(tmp_path / "p.npz", **arrays)
    back = rtx.load(tmp_path / "p.npz")
    assert _same(arrays, back) and back["f"].flags.f_contiguous
    np.savez_compressed(tmp_path / "c.npz", **arrays)
    assert _same(arrays, rtx.load(tmp_path / "c.npz"))
    v2 = _npy_raw("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
                  np.arange(3.0).tobytes(), version=(2, 0))
    v3 = _npy_raw("{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }",
                  np.array(["\u00e9"]).tobytes(), version=(3, 0))
    back = _load_bytes(_zip([("a.npy", v2), ("b.npy", v3)]), tmp_path)
    np.testing.assert_array_equal(back["a"], np.arange(3.0))
    assert back["b"][0] == "\u00e9"


@settings(max_examples=int(os.environ.get("RTX_FUZZ_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data(), compress=st.booleans())
def test_mutated_checkpoints_load_or_raise_value_error(data, compress, tmp_path):
    """Random byte flips, cuts and insertions in a real checkpoint: it loads (a flip
    the format does not check, e.g. a timestamp) or raises ValueError / MemoryError."""
    buf = io.BytesIO()
    rtx.save({"m": {"w": np.arange(6.0).reshape(2, 3), "b": np.ones(2, np.float32)},
              "n": [1, None, "s"]}, buf, compress=compress)
    raw = bytearray(buf.getvalue())
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert", "set"]))
        i = data.draw(st.integers(0, max(0, len(raw) - 1)))
        if op == "flip":
            raw[i] ^= data.draw(st.integers(1, 255))
        elif op == "cut":
            del raw[i:i + data.draw(st.integers(1, 64))]
        elif op == "insert":
            raw[i:i] = data.draw(st.binary(min_size=1, max_size=16))
        else:
            raw[i:i + 4] = struct.pack("<L", data.draw(st.sampled_from(
                [0, 1, 0xFFFF, 0xFFFFFFFF, 0x7FFFFFFF, len(raw)])))
    try:
        rtx.load(io.BytesIO(bytes(raw)))
    except (ValueError, MemoryError):
        pass


def test_memory_budget_is_a_memory_error(tmp_path, monkeypatch):
    p = tmp_path / "m.npz"
    rtx.save({"w": np.zeros(1000)}, p)
    with zipfile.ZipFile(p) as zf:
        total = sum(i.file_size for i in zf.infolist())
    monkeypatch.setattr(ser, "_memory_budget", lambda: total - 1)
    with pytest.raises(MemoryError, match="more than this machine's"):
        rtx.load(p)
    monkeypatch.setattr(ser, "_memory_budget", lambda: total)  # exactly enough
    np.testing.assert_array_equal(rtx.load(p)["w"], np.zeros(1000))
    monkeypatch.setattr(ser, "_memory_budget", lambda: None)  # the OS does not say: no cap
    np.testing.assert_array_equal(rtx.load(p)["w"], np.zeros(1000))


_BOMB_CHILD = r"""
import io, json, os, resource, struct, sys, zipfile, zlib
import numpy as np
import rtx, rtx.datasets
def vm():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
plain = b"\x93NUMPY\x01\x00"
h = b"{'descr': '<f8', 'fortran_order': False, 'shape': (8589934592,), }"
plain += struct.pack("<H", len(h)) + h
c = zlib.compressobj(9, zlib.DEFLATED, -15)
data = c.compress(plain + bytes(1 << 20)) + c.flush()
files = json.loads(sys.argv[1])
limit = vm() + (1 << 30)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
out = {"compressed": len(data)}
try:
    np.empty(1 << 31)  # 16 GiB: the limit bites
    out["limit"] = "no effect"
except MemoryError:
    out["limit"] = "bites"
for name, path in files.items():
    try:
        (rtx.datasets.load_hetgraph if name.startswith("hetgraph") else rtx.load)(path)
        out[name] = "loaded"
    except BaseException as exc:
        out[name] = type(exc).__name__ + ": " + str(exc)[:300]
print(json.dumps(out))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_zip_bombs_under_an_address_space_limit(tmp_path):
    """A few KB declaring 64 GiB (directory sizes, or a consistent directory with a
    .npy header that lies, or overlapping members) is refused before any big
    allocation: a child under RLIMIT_AS (its size + 1 GiB) gets ValueError, where
    reading first would be a MemoryError there (and an out-of-memory kill without it)."""
    hdr = b"{'descr': '<f8', 'fortran_order': False, 'shape': (8589934592,), }"
    plain = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr
    body = plain + bytes(1 << 20)
    comp = _deflate(body)
    assert len(comp) < 8192
    files = {
        # the directory declares the 64 GiB the header does
        "sizes": _raw_zip([{"name": "w.npy", "data": comp, "method": 8, "plain": body,
                            "usize": len(plain) + 8 * 8589934592}]),
        # the directory is honest (1 MiB); the .npy header still declares 64 GiB
        "header": _raw_zip([{"name": "w.npy", "data": comp, "method": 8, "plain": body}]),
        # 1500 overlapping members, each honest, over one 1 MiB kernel: 1.5 GiB if read
        "overlap": _quoted_overlap_bomb(1500, 1 << 20),
        "hetgraph-sizes": _raw_zip([{"name": "y.npy", "data": comp, "method": 8,
                                     "plain": body, "usize": len(plain) + 8 * 8589934592}]),
    }
    paths = {}
    for name, data in files.items():
        assert len(data) < 400_000
        paths[name] = str(tmp_path / f"{name}.npz")
        (tmp_path / f"{name}.npz").write_bytes(data)
    r = run_child(_BOMB_CHILD.replace("json.loads(sys.argv[1])", repr(paths)), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["limit"] == "bites", out
    assert out["sizes"].startswith("ValueError") and "deflate can expand" in out["sizes"], out
    assert out["header"].startswith("ValueError") and "declares shape" in out["header"], out
    assert out["overlap"].startswith("ValueError"), out["overlap"]
    assert "overlap in the file" in out["overlap"], out
    assert out["hetgraph-sizes"].startswith("ValueError") and "'y.npy'" in out[
        "hetgraph-sizes"], out


# ----------------------------------------------------------------- 5. graph files
def _graph(**over):
    kw = dict(
        x_dict={"paper": np.zeros((4, 3), np.float32), "author": np.zeros((2, 5), np.float32)},
        edge_index_dict={("author", "writes", "paper"): np.array([[0, 1], [2, 3]])},
        y=np.array([0, 1, 0, 1]), train_mask=np.ones(4, bool), val_mask=np.zeros(4, bool),
        test_mask=np.zeros(4, bool), target="paper")
    kw.update(over)
    return HeteroGraph(**kw)


def _graph_npz(path, **over):
    g = synthetic_hetgraph(60, seed=3)
    arrays = {f"x/{nt}": x for nt, x in g.x_dict.items()}
    arrays.update({"edge_index/" + "__".join(et): ei for et, ei in g.edge_index_dict.items()})
    arrays.update(y=g.y, train_mask=g.train_mask, val_mask=g.val_mask, test_mask=g.test_mask,
                  target=np.array(g.target))
    for k, v in over.items():
        k = k.replace("__x_", "x/")
        if v is None:
            arrays.pop(k)
        else:
            arrays[k] = v
    np.savez(path, **arrays)
    return g


def test_uint64_labels_beyond_int64(tmp_path):
    p = tmp_path / "g.npz"
    _graph_npz(p, y=np.array([0, 2**63, 1] + [0] * 57, np.uint64))
    with pytest.raises(ValueError, match="beyond int64"):
        load_hetgraph(p)
    with pytest.raises(ValueError, match="beyond int64"):
        _graph(y=np.array([0, 2**63, 1, 0], np.uint64))
    g = _graph(y=np.array([0, 2, 1, 0], np.uint64))  # in range: cast, 3 classes
    assert g.y.dtype == np.int64 and g.num_classes == 3
    g = _graph(y=np.array([0, 2**63 - 1, 1, 0], np.uint64))  # the largest int64 is a class
    assert int(g.y.max()) == 2**63 - 1


@pytest.mark.parametrize("given_masks", [("train_mask",), ("val_mask", "test_mask"),
                                         ("train_mask", "test_mask")])
def test_partial_masks_are_refused(tmp_path, given_masks):
    p = tmp_path / "g.npz"
    _graph_npz(p, **{m: None for m in ("train_mask", "val_mask", "test_mask")
                     if m not in given_masks})
    with pytest.raises(ValueError, match=f"gives {', '.join(given_masks)} but not"):
        load_hetgraph(p)


def test_from_pyg_partial_masks_are_refused():
    pytest.importorskip("torch_geometric")
    import torch
    from torch_geometric.data import HeteroData

    d = HeteroData()
    d["paper"].x = torch.zeros(4, 3)
    d["paper"].y = torch.tensor([0, 1, 0, 1])
    d["paper"].train_mask = torch.ones(4, dtype=torch.bool)
    with pytest.raises(ValueError, match="has train_mask but not val_mask, test_mask"):
        from_pyg(d)
    d["paper"].x = torch.tensor([[0.0, float("nan"), 1]] * 4)
    d["paper"].val_mask = d["paper"].test_mask = torch.zeros(4, dtype=torch.bool)
    with pytest.raises(ValueError, match="'paper'.*non-finite"):
        from_pyg(d)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_features_are_refused(tmp_path, bad):
    x = np.zeros((2, 5), np.float32)
    x[1, 3] = bad
    with pytest.raises(ValueError, match="node type 'author' hold 1 non-finite"):
        _graph(x_dict={"paper": np.zeros((4, 3), np.float32), "author": x})
    p = tmp_path / "g.npz"
    g = synthetic_hetgraph(60, seed=3)
    xa = g.x_dict["author"].copy()
    xa[0, 0] = bad
    _graph_npz(p, **{"__x_author": xa})
    with pytest.raises(ValueError, match=f"{p}.*'author'.*non-finite"):
        load_hetgraph(p)


def test_graph_file_errors_are_clear(tmp_path):
    p = tmp_path / "notes.npz"
    p.write_text("paper,author\n1,2\n")
    with pytest.raises(ValueError, match=r"not an \.npz \(zip\) file") as info:
        load_hetgraph(p)
    assert "pickle" not in str(info.value) and str(p) in str(info.value)
    (tmp_path / "empty.npz").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.npz: the file is empty"):
        load_hetgraph(tmp_path / "empty.npz")
    with pytest.raises(FileNotFoundError, match="missing.npz"):
        load_hetgraph(tmp_path / "missing.npz")
    q = tmp_path / "g.npz"
    _graph_npz(q, y=np.array(3))
    with pytest.raises(ValueError, match="member 'y' must be 1-D"):
        load_hetgraph(q)
    q.write_bytes(_zip([("x/paper.npy", _npy(np.zeros((3, 2), np.float32))),
                        ("y.npy", b"0 1 2")]))
    with pytest.raises(ValueError, match=r"'y\.npy'.*no \.npy magic"):
        load_hetgraph(q)
    _graph_npz(q, target=np.array(7))
    with pytest.raises(ValueError, match="member 'target' must be a 0-d string"):
        load_hetgraph(q)
    g = synthetic_hetgraph(60, seed=3)
    ei = g.edge_index_dict[("paper", "cites", "paper")].copy()
    ei[0, 0] = 60
    _graph_npz(q, **{"edge_index/paper__cites__paper": ei})
    with pytest.raises(ValueError, match=r"g\.npz: edge_index of \('paper', 'cites'"):
        load_hetgraph(q)  # an index out of range in a file: a ValueError too
    _graph_npz(q, **{"__x_paper": g.x_dict["paper"].astype(np.int64)})
    with pytest.raises(ValueError, match="'paper' must be floating point"):
        load_hetgraph(q)


# ----------------------------------------------------------------- 6. graph writes
def test_save_hetgraph_writes_exactly_the_path(tmp_path):
    g = synthetic_hetgraph(60, seed=3)
    save_hetgraph(g, tmp_path / "graph")
    assert os.listdir(tmp_path) == ["graph"]  # np.savez would have written graph.npz
    h = load_hetgraph(tmp_path / "graph")
    assert h.num_nodes_dict == g.num_nodes_dict and np.array_equal(h.y, g.y)


def test_save_hetgraph_checks_first(tmp_path):
    g = synthetic_hetgraph(60, seed=3)
    p = tmp_path / "g.npz"
    save_hetgraph(g, p)
    before = p.read_bytes()
    g["author"].x = g["author"].x.copy()
    g["author"].x[0, 0] = np.nan  # changed after it was built
    with pytest.raises(ValueError, match="'author'.*non-finite"):
        save_hetgraph(g, p)
    # zipfile would cut a member name at a NUL: such a name is refused when the graph is
    # built (rtx.data.naming), so it can never reach the file
    with pytest.raises(ValueError, match="may not contain"):
        _graph(x_dict={"paper": np.zeros((4, 3), np.float32),
                       "au\x00thor": np.zeros((2, 5), np.float32)}, edge_index_dict={})
    with pytest.raises(TypeError, match="HeteroGraph"):
        save_hetgraph({"x": 1}, p)
    assert p.read_bytes() == before and os.listdir(tmp_path) == ["g.npz"]


# ----------------------------------------------------------------- 7. compression
def test_compressed_checkpoint(tmp_path):
    obj = {"w": np.zeros((200, 50)), "b": np.arange(10.0), "n": {"step": 3}}
    rtx.save(obj, tmp_path / "s.npz")
    rtx.save(obj, tmp_path / "c.npz", compress=True)
    assert _same(obj, rtx.load(tmp_path / "c.npz"))
    with zipfile.ZipFile(tmp_path / "c.npz") as zf:
        assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_DEFLATED}
    with zipfile.ZipFile(tmp_path / "s.npz") as zf:
        assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_STORED}
    assert (tmp_path / "c.npz").stat().st_size * 20 < (tmp_path / "s.npz").stat().st_size
    with np.load(tmp_path / "c.npz", allow_pickle=False) as z:  # numpy reads it too
        np.testing.assert_array_equal(z["b"], obj["b"])
    with pytest.raises(TypeError, match="compress"):
        rtx.save(obj, tmp_path / "x.npz", compress="yes")
    assert not (tmp_path / "x.npz").exists()


def test_compressed_graph(tmp_path):
    g = synthetic_hetgraph(300, seed=2)
    save_hetgraph(g, tmp_path / "s.npz")
    save_hetgraph(g, tmp_path / "c.npz", compress=True)
    with zipfile.ZipFile(tmp_path / "c.npz") as zf:
        assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_DEFLATED}
    assert (tmp_path / "c.npz").stat().st_size < (tmp_path / "s.npz").stat().st_size
    h = load_hetgraph(tmp_path / "c.npz")
    for nt in g.node_types:
        np.testing.assert_array_equal(h.x_dict[nt], g.x_dict[nt])
    for et in g.edge_types:
        np.testing.assert_array_equal(h.edge_index_dict[et], g.edge_index_dict[et])
    np.testing.assert_array_equal(h.y, g.y)
    np.testing.assert_array_equal(h.test_mask, g.test_mask)
