"""``load_hgb``: read a dataset of HGB, the Heterogeneous Graph Benchmark (Lv et al.,
KDD 2021), from its own directory format into a ``HeteroData``.

The files (as written and read by HGB's ``NC/benchmark/scripts/data_loader.py``;
fields separated by tabs, one record per line)::

    node.dat        node_id  node_name  node_type  [f1,f2,...]   attributes optional
    link.dat        src_id   dst_id     link_type  weight
    label.dat       node_id  node_name  node_type  label[,label...]   training labels
    label.dat.test  the same, the test labels
    info.dat        names: JSON {"node.dat": {"node type": {"0": "paper", ...}},
                    "link.dat": {"link type": {"0": {"start": 0, "end": 1,
                    "meaning": "paper-author"}, ...}}, "label.dat": {...}}
                    (ACM, DBLP, IMDB) or text tables "TYPE<TAB>MEANING" and
                    "LINK<TAB>START<TAB>END<TAB>MEANING" (Freebase); optional

Node ids are global: the nodes of type ``t`` hold the ids ``[shift_t, shift_t +
count_t)``, type 0 first.  A type has features when its nodes carry attributes
(all of them, of one width); multi-label datasets (IMDB) list several labels per
line.  Every file is read line by line, each value parsed once into its final
array; a malformed line is a ``ValueError`` naming the file and the line.
"""

from __future__ import annotations

import json
import math
import os
import re
from array import array
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..creation import Generator, _rng, from_numpy
from ..data import HeteroData
from ..data.naming import check_edge_type, check_name

__all__ = ["load_hgb"]

_CANONICAL = {"acm": "ACM", "dblp": "DBLP", "imdb": "IMDB", "freebase": "Freebase"}
_ONE_HOT_LIMIT = 2**31      # bytes of one dense one-hot feature matrix [N, N] float32
_FEATS_TYPES = (0, 1, 2, 3, 4, 5)


# ------------------------------------------------------------------ lines
class _Lines:
    """The non-blank lines of a text file, streamed, with their 1-based numbers."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __iter__(self) -> Iterator[tuple[int, list[str]]]:
        with open(self.path, encoding="utf-8", newline=None) as f:
            for n, line in enumerate(f, 1):
                line = line.rstrip("\n")
                if line.strip():
                    yield n, line.split("\t")

    def fail(self, lineno: int | None, msg: str) -> ValueError:
        where = f"{self.path}: line {lineno}" if lineno is not None else self.path
        return ValueError(f"{where}: {msg}")


def _int(lines: _Lines, n: int, s: str, what: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise lines.fail(n, f"{what} {s!r} is not an integer") from None
    if v < 0:
        raise lines.fail(n, f"{what} {v} is negative")
    if v >= 2**62:
        raise lines.fail(n, f"{what} {v} is too large")
    return v


class _Rows:
    """A growable float32 matrix, grown and trimmed in place (``ndarray.resize``:
    realloc, no second copy of the rows)."""

    def __init__(self, dim: int) -> None:
        self.buf = np.empty((64, dim), dtype=np.float32)
        self.n = 0

    def append(self, row: np.ndarray) -> None:
        if self.n == self.buf.shape[0]:
            self.buf.resize((2 * self.n, self.buf.shape[1]), refcheck=False)
        self.buf[self.n] = row
        self.n += 1

    def finish(self) -> np.ndarray:
        self.buf.resize((self.n, self.buf.shape[1]), refcheck=False)
        return self.buf


def _floats(lines: _Lines, n: int, s: str) -> np.ndarray:
    toks = s.split(",")
    try:
        row = np.array(toks, dtype=np.float32)   # Python's float() syntax, as HGB's loader
    except ValueError:
        for i, tok in enumerate(toks):
            try:
                float(tok)
            except ValueError:
                raise lines.fail(n, f"attribute {i} ({tok!r}) is not a number") from None
        raise lines.fail(n, "malformed attribute list") from None
    if not np.isfinite(row).all():
        raise lines.fail(n, "attributes hold NaN or infinite values")
    return row


# ------------------------------------------------------------------ names
def _sanitize(name: str, fallback: str) -> str:
    """A valid rtx name for ``name`` (rtx.data.naming): '/', '.', control
    characters and whitespace become '_', runs of '_' one '_', no '_' at either end;
    the fallback when nothing is left."""
    s = re.sub(r"[/.\x00-\x1f\x7f\s]", "_", str(name))
    s = re.sub(r"_+", "_", s).strip("_")
    if not s:
        return fallback
    check_name(s)
    return s


def _unique(names: dict[int, str]) -> dict[int, str]:
    """Distinct names: a repeated one gets its id appended (``name_<id>``), in id order."""
    out: dict[int, str] = {}
    used: set[str] = set()
    for k in sorted(names):
        s = names[k]
        while s in used:
            s = f"{s}_{k}"
        used.add(s)
        out[k] = s
    return out


def _read_info(path: str) -> tuple[dict[int, str], dict[int, tuple[int, int, str]],
                                   int, bool]:
    """``(node type names, link types {id: (start, end, meaning)}, number of classes
    named, is_json)`` from ``info.dat`` (empty when the file is absent)."""
    if not os.path.exists(path):
        return {}, {}, 0, False
    with open(path, encoding="utf-8") as f:   # a few hundred bytes: read whole
        text = f.read()
    try:
        info = json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip().startswith("{"):
            raise ValueError(f"{path}: line {exc.lineno}: malformed JSON ({exc.msg})") from None
        return (*_read_info_text(path, text), 0, False)
    if not isinstance(info, dict):
        raise ValueError(f"{path}: line 1: expected a JSON object")
    ntypes: dict[int, str] = {}
    ltypes: dict[int, tuple[int, int, str]] = {}
    n_classes = 0
    try:
        for k, v in (info.get("node.dat", {}).get("node type", {}) or {}).items():
            ntypes[int(k)] = str(v)
        for k, v in (info.get("link.dat", {}).get("link type", {}) or {}).items():
            if isinstance(v, dict) and {"start", "end", "meaning"} <= set(v):
                s, e, m = v["start"], v["end"], v["meaning"]
            else:
                s, e, m = tuple(v.values()) if isinstance(v, dict) else tuple(v)
            ltypes[int(k)] = (int(s), int(e), str(m))
        classes = (info.get("label.dat", {}).get("node type", {}) or {})
        if classes:
            first = next(iter(classes.values()))
            n_classes = len(first) if isinstance(first, (dict, list)) else 0
    except (AttributeError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: unexpected info.dat layout ({exc})") from None
    return ntypes, ltypes, n_classes, True


def _read_info_text(path: str, text: str) -> tuple[dict[int, str],
                                                   dict[int, tuple[int, int, str]]]:
    """The text tables of HGB's Freebase ``info.dat``: ``TYPE  MEANING`` rows
    ``id  name`` and ``LINK  START  END  MEANING`` rows ``id  start  end  meaning``."""
    lines = text.split("\n")
    ntypes: dict[int, str] = {}
    ltypes: dict[int, tuple[int, int, str]] = {}

    def table(header: list[str]) -> Iterator[tuple[int, list[str]]]:
        for i, ln in enumerate(lines):
            if ln.split() == header:
                for j in range(i + 1, len(lines)):
                    if not lines[j].strip():
                        return
                    yield j + 1, lines[j].split(None, len(header) - 1)
                return

    try:
        for n, parts in table(["TYPE", "MEANING"]):
            if len(parts) != 2:
                raise ValueError(f"{path}: line {n}: expected 'id  name'")
            ntypes[int(parts[0])] = parts[1].strip().lower()
        for n, parts in table(["LINK", "START", "END", "MEANING"]):
            if len(parts) != 4:
                raise ValueError(f"{path}: line {n}: expected 'id  start  end  meaning'")
            ltypes[int(parts[0])] = (int(parts[1]), int(parts[2]), parts[3].strip())
    except ValueError as exc:
        if str(exc).startswith(path):
            raise
        raise ValueError(f"{path}: malformed table row ({exc})") from None
    if not ntypes:
        raise ValueError(f"{path}: neither JSON nor a 'TYPE<TAB>MEANING' table")
    return ntypes, ltypes


def _relation(meaning: str, dst: str, rule_to: bool, fallback: str) -> str:
    """PyG's ``HGBDataset`` naming: the part after the first '-' of the meaning
    (``"paper-cite-paper"`` -> ``"cite"``); ``"to"`` when that is the destination
    type itself (``"paper-author"``, ``"movie->director"``)."""
    parts = meaning.split("-")
    rel = parts[1] if len(parts) >= 2 else meaning
    if (rule_to or len(parts) == 2) and (rel == dst or rel[1:] == dst):
        rel = "to"
    return _sanitize(rel, fallback)


# ------------------------------------------------------------------ reader
def _resolve_dir(path: str | os.PathLike[str], name: str | None) -> str:
    root = os.fspath(path)
    if name is None:
        cands = [root]
    else:
        canon = _CANONICAL.get(name.lower(), name)
        cands = [os.path.join(root, name), os.path.join(root, canon),
                 os.path.join(root, name.lower(), "raw", canon)]   # PyG's HGBDataset root
    for d in dict.fromkeys(cands):
        if os.path.isfile(os.path.join(d, "node.dat")):
            return d
    raise FileNotFoundError(f"load_hgb: no node.dat in {' or '.join(dict.fromkeys(cands))} "
                            "(download and unzip the dataset from HGB first)")


def _read_nodes(lines: _Lines) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, Any]]:
    """``(ids, types, line numbers, {type: _Rows or None})`` in file order; feature
    rows of a type are in its file order."""
    ids, types, nums = array("q"), array("q"), array("q")
    feats: dict[int, Any] = {}
    first_line: dict[int, int] = {}
    for n, f in lines:
        if len(f) not in (3, 4):
            raise lines.fail(n, f"expected 3 or 4 tab-separated fields (node_id, "
                                f"node_name, node_type[, attributes]), got {len(f)}")
        nid = _int(lines, n, f[0], "node id")
        t = _int(lines, n, f[2], "node type")
        has = len(f) == 4
        if t not in feats:
            first_line[t] = n
            feats[t] = _Rows(f[3].count(",") + 1) if has else None
        rows = feats[t]
        if (rows is not None) != has:
            raise lines.fail(n, f"node type {t} has {'no ' if has else ''}attributes on line "
                                f"{first_line[t]} but {'some' if has else 'none'} on this line")
        if rows is not None:
            row = _floats(lines, n, f[3])
            if row.size != rows.buf.shape[1]:
                raise lines.fail(n, f"{row.size} attributes, but node type {t} has "
                                    f"{rows.buf.shape[1]} (line {first_line[t]})")
            rows.append(row)
        ids.append(nid)
        types.append(t)
        nums.append(n)
    return (np.frombuffer(ids, dtype=np.int64), np.frombuffer(types, dtype=np.int64),
            np.frombuffer(nums, dtype=np.int64), feats)


def _layout(lines: _Lines, ids: np.ndarray, types: np.ndarray, nums: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check HGB's id layout; ``(type of each global id, shift per type, count per type)``."""
    N = ids.size
    if N == 0:
        raise lines.fail(None, "no nodes")
    T = int(types.max()) + 1
    present = np.bincount(types, minlength=T)
    if (present == 0).any():
        raise lines.fail(None, f"node types must be 0 .. {T - 1}; type "
                               f"{int(np.flatnonzero(present == 0)[0])} has no nodes")
    order = np.argsort(ids, kind="stable")
    sid = ids[order]
    dup = np.flatnonzero(sid[1:] == sid[:-1])
    if dup.size:
        a, b = order[dup[0]], order[dup[0] + 1]
        raise lines.fail(int(nums[b]), f"node id {int(sid[dup[0] + 1])} already given on line "
                                       f"{int(nums[a])}")
    if int(sid[-1]) != N - 1:
        gap = int(np.flatnonzero(sid != np.arange(N))[0])
        raise lines.fail(None, f"node ids must be 0 .. {N - 1} (the {N} nodes); id {gap} is "
                               "missing")
    type_of = types[order]
    bad = np.flatnonzero(type_of[1:] < type_of[:-1])
    if bad.size:
        i = int(bad[0]) + 1
        raise lines.fail(int(nums[order[i]]), f"node {i} of type {int(type_of[i])} follows node "
                                              f"{i - 1} of type {int(type_of[i - 1])}: HGB's "
                                              "node ids run type by type (type 0 first)")
    shift = np.searchsorted(type_of, np.arange(T))
    return type_of, shift, present


def _link_error(lines: _Lines, n: int, f: list[str], N: int) -> ValueError:
    """The precise complaint about a link.dat line the fast path refused."""
    if len(f) != 4:
        return lines.fail(n, f"expected 4 tab-separated fields (src_id, dst_id, link_type, "
                             f"weight), got {len(f)}")
    h = _int(lines, n, f[0], "source node id")
    t = _int(lines, n, f[1], "destination node id")
    for v, what in ((h, "source"), (t, "destination")):
        if v >= N:
            return lines.fail(n, f"{what} node id {v} is not a node (node.dat has {N})")
    _int(lines, n, f[2], "link type")
    try:
        wt = float(f[3])
    except ValueError:
        return lines.fail(n, f"weight {f[3]!r} is not a number")
    if not math.isfinite(wt):
        return lines.fail(n, f"weight {f[3]!r} is not finite")
    return lines.fail(n, "malformed link")   # pragma: no cover - the fast path accepts it


def _read_links(lines: _Lines, N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                np.ndarray]:
    """The links in file order; the per-line loop only converts (the biggest file:
    a million lines for Freebase), the range checks run on the arrays after."""
    src, dst, rel, nums = array("q"), array("q"), array("q"), array("q")
    w = array("d")
    for n, f in lines:
        try:
            if len(f) != 4:
                raise ValueError
            h, t, r, wt = int(f[0]), int(f[1]), int(f[2]), float(f[3])
            src.append(h)
            dst.append(t)
            rel.append(r)
        except (ValueError, OverflowError):
            raise _link_error(lines, n, f, N) from None
        w.append(wt)
        nums.append(n)
    out = (np.frombuffer(src, dtype=np.int64), np.frombuffer(dst, dtype=np.int64),
           np.frombuffer(rel, dtype=np.int64), np.frombuffer(w, dtype=np.float64),
           np.frombuffer(nums, dtype=np.int64))
    bad = (out[0] < 0) | (out[0] >= N) | (out[1] < 0) | (out[1] >= N) | (out[2] < 0) \
        | ~np.isfinite(out[3])
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        n = int(out[4][i])
        raise _link_error(lines, n, [str(out[0][i]), str(out[1][i]), str(out[2][i]),
                                     repr(float(out[3][i]))], N)
    return out


def _read_labels(lines: _Lines, N: int, type_of: np.ndarray, multilabel: bool | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int | None, bool]:
    """``(node ids, flat labels, offsets, labelled type, several labels seen)``."""
    ids, flat, offs = array("q"), array("q"), array("q", [0])
    ltype: int | None = None
    lt_line = 0
    seen: dict[int, int] = {}
    several = False
    for n, f in lines:
        if len(f) != 4:
            raise lines.fail(n, f"expected 4 tab-separated fields (node_id, node_name, "
                                f"node_type, labels), got {len(f)}")
        nid = _int(lines, n, f[0], "node id")
        if nid >= N:
            raise lines.fail(n, f"node id {nid} is not a node (node.dat has {N})")
        t = _int(lines, n, f[2], "node type")
        if t != int(type_of[nid]):
            raise lines.fail(n, f"node {nid} has type {int(type_of[nid])} in node.dat, not {t}")
        if ltype is None:
            ltype, lt_line = t, n
        elif t != ltype:
            raise lines.fail(n, f"labels on node type {t}, but line {lt_line} labels type "
                                f"{ltype} (HGB labels one node type)")
        if nid in seen:
            raise lines.fail(n, f"node {nid} is already labelled on line {seen[nid]}")
        seen[nid] = n
        toks = f[3].split(",")
        if len(toks) > 1:
            several = True
            if multilabel is False:
                raise lines.fail(n, f"{len(toks)} labels for one node, but multilabel=False")
        for tok in toks:
            flat.append(_int(lines, n, tok.strip(), "label"))
        ids.append(nid)
        offs.append(len(flat))
    return (np.frombuffer(ids, dtype=np.int64), np.frombuffer(flat, dtype=np.int64),
            np.frombuffer(offs, dtype=np.int64), ltype, several)


def _one_hot(n: int, what: str) -> np.ndarray:
    if n * n * 4 > _ONE_HOT_LIMIT:
        raise MemoryError(f"load_hgb: one-hot features for the {n} nodes of {what} would take "
                          f"{n * n * 4 / 2**30:.1f} GiB; use featureless='num_nodes' (and an "
                          "embedding) for this type")
    return np.eye(n, dtype=np.float32)


def load_hgb(path: str | os.PathLike[str], name: str | None = None, *,
             featureless: str = "num_nodes", feats_type: int | None = None,
             val_ratio: float = 0.2, multilabel: bool | None = None, seed: int | None = 0,
             generator: Generator | None = None) -> HeteroData:
    """Read an HGB node-classification dataset (ACM, DBLP, IMDB, Freebase, or your
    own in HGB's layout) into a ``HeteroData`` of rtx tensors.

    Args:
        path: the dataset's directory (holding ``node.dat``, ...), or, with
            ``name``, a directory holding it as ``<name>/`` (``ACM/``, ``DBLP/``,
            ...) or in PyG's ``HGBDataset`` layout ``<name>/raw/<NAME>/``.
        name: the dataset's name (``"IMDB"`` turns on ``multilabel``).
        featureless: node types without attributes get only ``num_nodes``
            (``"num_nodes"``, PyG's choice: learn an embedding), or one-hot
            features ``x = I`` (``"one_hot"``, HGB's ``load_data``).
        feats_type: HGB's ``--feats-type`` (overrides ``featureless``): 0 loaded
            features (one-hot where none), 1 node type 0's features and zeros
            ``[N, 10]`` for the others, 2 type 0's features and one-hot for the
            others, 3 one-hot everywhere, 4 / 5 as 2 / 1 keeping type 2's.
        val_ratio: the share of ``label.dat`` carved out for validation, as HGB's
            code (``int(n * val_ratio)`` nodes, at random).
        multilabel: labels as a multi-hot ``y [N, C]`` (float32, HGB's IMDB) or one
            class per node (``y [N]`` int64, -1 where unlabelled); ``None``: multi
            when ``name`` is IMDB or a label line lists several labels.
        seed, generator: the randomness of the validation split (an int seed, 0 by
            default, or an ``rtx.Generator``, which then takes precedence).

    Returns:
        ``HeteroData`` with ``x`` (float32) or ``num_nodes`` per node type,
        ``edge_index`` (int64; ``edge_weight`` float32 when a weight is not 1) per
        edge type, and on the labelled type ``y``, ``train_mask``, ``val_mask``,
        ``test_mask``; graph attributes ``target`` (the labelled type) and
        ``num_classes``.  Node types and relations are named from ``info.dat`` as
        PyG's ``HGBDataset`` names them (``("paper", "cite", "paper")``,
        ``("paper", "to", "author")``); names rtx does not allow are mapped
        (see docs/data.md).  Note that HGB publishes ``label.dat.test`` with
        placeholder labels: test scores come from HGB's online leaderboard.
    """
    if featureless not in ("num_nodes", "one_hot"):
        raise ValueError(f"load_hgb: featureless must be 'num_nodes' or 'one_hot', got "
                         f"{featureless!r}")
    if feats_type is not None and feats_type not in _FEATS_TYPES:
        raise ValueError(f"load_hgb: feats_type must be one of {_FEATS_TYPES} (HGB's "
                         f"--feats-type) or None, got {feats_type!r}")
    if isinstance(val_ratio, bool) or not isinstance(val_ratio, (int, float)) \
            or not 0.0 <= val_ratio < 1.0:
        raise ValueError(f"load_hgb: val_ratio must lie in [0, 1), got {val_ratio!r}")
    rng = _rng(None, generator) if generator is not None else _rng(seed, None)
    d = _resolve_dir(path, name)
    if multilabel is None and name is not None and name.lower() == "imdb":
        multilabel = True
    for fname in ("link.dat", "label.dat", "label.dat.test"):
        if not os.path.isfile(os.path.join(d, fname)):
            raise FileNotFoundError(f"load_hgb: {os.path.join(d, fname)} is missing")

    ntypes_info, ltypes_info, n_classes_info, is_json = _read_info(os.path.join(d, "info.dat"))
    nodes = _Lines(os.path.join(d, "node.dat"))
    ids, types, nums, feats = _read_nodes(nodes)
    type_of, shift, count = _layout(nodes, ids, types, nums)
    N, T = ids.size, count.size
    for t in ntypes_info:
        if t >= T:
            raise ValueError(f"{os.path.join(d, 'info.dat')}: node type {t} has no nodes in "
                             "node.dat")
    ntypes = _unique({t: _sanitize(ntypes_info.get(t, f"type{t}"), f"type{t}")
                      for t in range(T)})

    # ---- edges: group by link type, endpoints as indices within their types
    links = _Lines(os.path.join(d, "link.dat"))
    src, dst, rel, w, lnums = _read_links(links, N)
    for r, (s, e, _) in ltypes_info.items():
        for v, what in ((s, "start"), (e, "end")):
            if not 0 <= v < T:
                raise ValueError(f"{os.path.join(d, 'info.dat')}: link type {r} {what}s at "
                                 f"node type {v}, which has no nodes")
    rel_ids = sorted(set(np.unique(rel).tolist()) | set(ltypes_info))
    order = np.argsort(rel, kind="stable")
    bounds = np.searchsorted(rel[order], np.asarray(rel_ids, dtype=np.int64))
    bounds = np.append(bounds, order.size)
    groups: dict[int, np.ndarray] = {r: order[bounds[i]:bounds[i + 1]]
                                     for i, r in enumerate(rel_ids)}
    meta: dict[int, tuple[int, int]] = {}
    for r, idx in groups.items():
        info_r = ltypes_info.get(r)
        if ltypes_info and info_r is None:
            raise links.fail(int(lnums[idx[0]]), f"link type {r} is not listed in info.dat")
        if idx.size:
            hs, ts = type_of[src[idx]], type_of[dst[idx]]
            want = (int(hs[0]), int(ts[0])) if info_r is None else (info_r[0], info_r[1])
            bad = np.flatnonzero((hs != want[0]) | (ts != want[1]))
            if bad.size:
                i = idx[bad[0]]
                raise links.fail(int(lnums[i]), f"link type {r} joins node types "
                                                f"{want[0]} -> {want[1]}"
                                                f"{' (info.dat)' if info_r else ''}, but this "
                                                f"link joins {int(type_of[src[i]])} -> "
                                                f"{int(type_of[dst[i]])}")
            meta[r] = want
        else:
            assert info_r is not None      # listed in info.dat, no link in link.dat
            meta[r] = (info_r[0], info_r[1])
    rel_names = {}
    for r in rel_ids:
        s, e = meta[r]
        meaning = ltypes_info[r][2] if r in ltypes_info else ""
        rel_names[r] = (_relation(meaning, ntypes_info.get(e, ntypes[e]), is_json, f"rel{r}")
                        if meaning else f"rel{r}")
    seen_et: dict[tuple[str, str, str], int] = {}
    etypes: dict[int, tuple[str, str, str]] = {}
    for r in rel_ids:
        s, e = meta[r]
        name_r = rel_names[r]
        et = (ntypes[s], name_r, ntypes[e])
        while et in seen_et:            # two link types, one name: keep both, apart
            name_r = f"{name_r}_{r}"
            et = (ntypes[s], name_r, ntypes[e])
        seen_et[et] = r
        etypes[r] = check_edge_type(et)

    # ---- labels
    lab_tr = _Lines(os.path.join(d, "label.dat"))
    lab_te = _Lines(os.path.join(d, "label.dat.test"))
    tr_ids, tr_flat, tr_off, tr_type, tr_multi = _read_labels(lab_tr, N, type_of, multilabel)
    te_ids, te_flat, te_off, te_type, te_multi = _read_labels(lab_te, N, type_of, multilabel)
    if tr_type is None:
        raise lab_tr.fail(None, "no labels")
    if te_type is not None and te_type != tr_type:
        raise lab_te.fail(None, f"labels node type {te_type}, label.dat labels type {tr_type}")
    both = np.intersect1d(tr_ids, te_ids)
    if both.size:
        raise lab_te.fail(None, f"node {int(both[0])} is labelled in label.dat too (the "
                                "training and test nodes must be disjoint)")
    if multilabel is None:
        multilabel = tr_multi or te_multi
    num_classes = max(int(tr_flat.max()) + 1,
                      int(te_flat.max()) + 1 if te_flat.size else 0, n_classes_info)

    # ---- assemble
    data = HeteroData()
    keep = {1: 0, 2: 0, 4: 2, 5: 2}.get(feats_type) if feats_type is not None else None
    for t in range(T):
        nt, n_t = ntypes[t], int(count[t])
        rows = feats[t]
        x = None
        if rows is not None:
            x = rows.finish()
            mine = np.flatnonzero(types == t)           # this type's nodes, file order
            if (np.diff(ids[mine]) < 0).any():          # rows to id order
                x = x[np.argsort(ids[mine], kind="stable")]
        if feats_type is not None:
            if feats_type == 3 or (keep is not None and t != keep and feats_type in (2, 4)):
                x = _one_hot(n_t, repr(nt))
            elif keep is not None and t != keep:        # feats_type 1 / 5
                x = np.zeros((n_t, 10), dtype=np.float32)
            elif x is None:                             # a kept or loaded type without any
                x = _one_hot(n_t, repr(nt))
        elif x is None and featureless == "one_hot":
            x = _one_hot(n_t, repr(nt))
        if x is None:
            data[nt].num_nodes = n_t
        else:
            data[nt].x = from_numpy(x)
    for r in rel_ids:
        idx = groups[r]
        s, e = meta[r]
        et = etypes[r]
        ei = np.stack([src[idx] - shift[s], dst[idx] - shift[e]]) if idx.size \
            else np.empty((2, 0), dtype=np.int64)
        data[et].edge_index = from_numpy(np.ascontiguousarray(ei))
        wr = w[idx]
        if wr.size and not np.all(wr == 1.0):             # PyG: weights only when not all 1
            data[et].edge_weight = from_numpy(wr.astype(np.float32))

    nt = ntypes[tr_type]
    n_t = int(count[tr_type])
    base = int(shift[tr_type])

    def fill(y: np.ndarray, ids_: np.ndarray, flat: np.ndarray, off: np.ndarray) -> None:
        local = ids_ - base
        if multilabel:
            rows_ = np.repeat(local, np.diff(off))
            y[rows_, flat] = 1.0
        else:
            y[local] = flat[off[:-1]]

    y = (np.zeros((n_t, num_classes), dtype=np.float32) if multilabel
         else np.full(n_t, -1, dtype=np.int64))
    fill(y, tr_ids, tr_flat, tr_off)
    if te_ids.size:
        fill(y, te_ids, te_flat, te_off)
    train_idx = np.sort(tr_ids - base)
    perm = train_idx[rng.permutation(train_idx.size)]
    n_val = int(train_idx.size * val_ratio)
    masks = {k: np.zeros(n_t, dtype=bool) for k in ("train_mask", "val_mask", "test_mask")}
    masks["val_mask"][perm[:n_val]] = True
    masks["train_mask"][perm[n_val:]] = True
    masks["test_mask"][te_ids - base] = True
    data[nt].y = from_numpy(y)
    for k, m in masks.items():
        data[nt][k] = from_numpy(m)
    data.target = nt
    data.num_classes = num_classes
    return data
