"""rtx.datasets.load_hgb: HGB's directory format (node.dat / link.dat / label.dat /
label.dat.test / info.dat), on small datasets the tests write in exactly HGB's
layout -- as HGB's own preprocessing scripts write it and its
NC/benchmark/scripts/data_loader.py reads it:

* node.dat: ``id \t name \t type \t f1,f2,...`` (no 4th field for a type without
  attributes), ids running type by type;
* link.dat: ``src \t dst \t link_type \t weight``;
* label.dat / label.dat.test: ``id \t name \t type \t label[,label...]`` (HGB's
  writer leaves the name empty);
* info.dat: ``json.dumps`` of ``{"node.dat": {"node type": {...}}, "link.dat":
  {"link type": {id: {"start", "end", "meaning"}}}, "label.dat": {"node type":
  {0: {class: name}}}}`` (ACM, DBLP, IMDB), or Freebase's text tables.

When torch_geometric is installed the result is compared with PyG's own
HGBDataset reading the same files.
"""

from __future__ import annotations

import builtins
import importlib.util
import json
import os
import re

import numpy as np
import pytest

import rtx
from rtx.datasets import hgb as hgb_mod
from rtx.datasets import load_hgb

HAVE_PYG = (importlib.util.find_spec("torch") is not None
            and importlib.util.find_spec("torch_geometric") is not None)
needs_pyg = pytest.mark.skipif(not HAVE_PYG, reason="needs torch and torch_geometric")


def write_hgb(d: str, *, types: list[tuple[str, int, int | None]],
              links: list[tuple[int, int, str, np.ndarray, np.ndarray | None]],
              labels: dict[int, list[int]], test_labels: dict[int, list[int]],
              label_type: int = 0, n_classes: int | None = None, seed: int = 0,
              info: str = "json", shuffle_nodes: bool = False) -> dict:
    """Write an HGB dataset into ``d``.

    types: ``(name, count, feature width or None)`` per node type (type id = index);
    links: ``(src_type, dst_type, meaning, [2, E] local indices, weights or None)``
    (link type id = index); labels / test_labels: local index of a ``label_type``
    node -> its labels.  Returns the arrays written (features per type, global
    shifts) for the tests' references."""
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    shift, feats, lines = {}, {}, []
    s = 0
    for t, (name, count, dim) in enumerate(types):
        shift[t] = s
        if dim is not None:
            feats[t] = np.round(rng.random((count, dim)), 3).astype(np.float32)
        for i in range(count):
            nid = s + i
            if dim is None:
                lines.append(f"{nid}\t{name}_{i}\t{t}\n")
            else:
                fs = ",".join(repr(float(v)) for v in feats[t][i])
                lines.append(f"{nid}\t{name} {i}\t{t}\t{fs}\n")
        s += count
    if shuffle_nodes:
        lines = [lines[i] for i in rng.permutation(len(lines))]
    with open(os.path.join(d, "node.dat"), "w", encoding="utf-8") as f:
        f.writelines(lines)
    with open(os.path.join(d, "link.dat"), "w", encoding="utf-8") as f:
        for r, (st, dt, _, ei, w) in enumerate(links):
            for j in range(ei.shape[1]):
                wt = 1.0 if w is None else float(w[j])
                f.write(f"{shift[st] + int(ei[0, j])}\t{shift[dt] + int(ei[1, j])}\t{r}\t{wt}\n")
    for fname, labs in (("label.dat", labels), ("label.dat.test", test_labels)):
        with open(os.path.join(d, fname), "w", encoding="utf-8") as f:
            for i, ys in labs.items():
                f.write(f"{shift[label_type] + i}\t\t{label_type}\t{','.join(map(str, ys))}\n")
    if n_classes is None:
        n_classes = 1 + max(max(v) for v in (*labels.values(), *test_labels.values()))
    if info == "json":
        doc = {"node.dat": {"node type": {t: name for t, (name, _, _) in enumerate(types)}},
               "link.dat": {"link type": {r: {"start": st, "end": dt, "meaning": m}
                                          for r, (st, dt, m, _, _) in enumerate(links)}},
               "label.dat": {"node type": {label_type: {c: f"class{c}"
                                                        for c in range(n_classes)}}}}
        with open(os.path.join(d, "info.dat"), "w", encoding="utf-8") as f:
            f.write(json.dumps(doc, indent=4))
    elif info == "text":   # Freebase's info.dat: text tables, fields split by tabs
        with open(os.path.join(d, "info.dat"), "w", encoding="utf-8") as f:
            f.write("node.dat\n\nTYPE\tMEANING\n")
            for t, (name, _, _) in enumerate(types):
                f.write(f"{t}\t\t{name.upper()}\n")
            f.write("\n-----\n\nlink.dat\n\nLINK\tSTART\tEND\tMEANING\n")
            for r, (st, dt, m, _, _) in enumerate(links):
                f.write(f"{r}\t\t{st}\t\t{dt}\t\t{m}\n")
            f.write("\n-----\n\nlabel.dat\n\nTYPE\tCLASS\tMEANING\n")
            for c in range(n_classes):
                f.write(f"{label_type}\t\t{c}\t\tclass{c}\n")
    return {"shift": shift, "feats": feats}


# ------------------------------------------------------------------ datasets
def _pairs(rng, ns, nd, e):
    return np.unique(np.stack([rng.integers(0, ns, e), rng.integers(0, nd, e)]), axis=1)


def acm_like(d: str, seed: int = 0, **kw) -> dict:
    """ACM's shape: papers (labelled) with cite / ref, authors, subjects with
    attributes, featureless terms, one weighted relation."""
    rng = np.random.default_rng(seed)
    types = [("paper", 14, 5), ("author", 8, 3), ("subject", 3, 2), ("term", 6, None)]
    pa = _pairs(rng, 14, 8, 24)
    links = [(0, 0, "paper-cite-paper", _pairs(rng, 14, 14, 18), None),
             (0, 0, "paper-ref-paper", _pairs(rng, 14, 14, 11), None),
             (0, 1, "paper-author", pa, None), (1, 0, "author-paper", pa[::-1].copy(), None),
             (0, 2, "paper-subject", _pairs(rng, 14, 3, 9), None),
             (0, 3, "paper-term", (e := _pairs(rng, 14, 6, 16)),
              np.round(rng.random(e.shape[1]) + 0.5, 2))]
    labels = {i: [int(rng.integers(0, 3))] for i in range(10)}
    test = {i: [int(rng.integers(0, 3))] for i in range(10, 14)}
    meta = write_hgb(d, types=types, links=links, labels=labels, test_labels=test, seed=seed,
                     **kw)
    return {**meta, "types": types, "links": links, "labels": labels, "test": test}


def imdb_like(d: str, seed: int = 0, **kw) -> dict:
    rng = np.random.default_rng(seed)
    types = [("movie", 12, 4), ("director", 5, 4), ("actor", 7, 4), ("keyword", 9, None)]
    md = _pairs(rng, 12, 5, 12)
    links = [(0, 1, "movie->director", md, None), (1, 0, "director->movie", md[::-1].copy(), None),
             (0, 2, "movie->actor", _pairs(rng, 12, 7, 20), None),
             (0, 3, "movie->keyword", _pairs(rng, 12, 9, 20), None)]
    labels = {i: sorted({int(v) for v in rng.integers(0, 4, 1 + i % 3)}) for i in range(8)}
    test = {i: sorted({int(v) for v in rng.integers(0, 4, 2)}) for i in range(8, 12)}
    meta = write_hgb(d, types=types, links=links, labels=labels, test_labels=test,
                     n_classes=5, seed=seed, **kw)
    return {**meta, "types": types, "links": links, "labels": labels, "test": test}


def freebase_like(d: str, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    types = [("book", 10, None), ("film", 6, None), ("music", 4, None)]
    links = [(0, 0, "book-and-book", _pairs(rng, 10, 10, 12), None),
             (0, 1, "book-to-film", _pairs(rng, 10, 6, 9), None),
             (1, 2, "film-has-music", _pairs(rng, 6, 4, 7), None)]
    labels = {i: [int(rng.integers(0, 3))] for i in range(6)}
    test = {i: [int(rng.integers(0, 3))] for i in range(6, 9)}
    meta = write_hgb(d, types=types, links=links, labels=labels, test_labels=test,
                     info="text", seed=seed)
    return {**meta, "types": types, "links": links, "labels": labels, "test": test}


def A(v):
    return v.numpy() if isinstance(v, rtx.Tensor) else np.asarray(v)


# ------------------------------------------------------------------ contents
def test_acm_like_contents(tmp_path):
    m = acm_like(str(tmp_path))
    data = load_hgb(tmp_path)
    data.validate()
    assert data.node_types == ["paper", "author", "subject", "term"]
    assert data.edge_types == [("paper", "cite", "paper"), ("paper", "ref", "paper"),
                               ("paper", "to", "author"), ("author", "to", "paper"),
                               ("paper", "to", "subject"), ("paper", "to", "term")]
    for t, (name, count, dim) in enumerate(m["types"]):
        if dim is None:
            assert data[name].num_nodes == count and "x" not in data[name]
        else:
            x = data[name].x
            assert isinstance(x, rtx.Tensor) and A(x).dtype == np.float32
            np.testing.assert_array_equal(A(x), m["feats"][t])
    for et, (_, _, _, ei, w) in zip(data.edge_types, m["links"], strict=True):
        got = data[et].edge_index
        assert isinstance(got, rtx.Tensor) and A(got).dtype == np.int64
        np.testing.assert_array_equal(A(got), ei)            # local indices, file order
        if w is None:
            assert "edge_weight" not in data[et]             # all ones: left out, as PyG
        else:
            np.testing.assert_allclose(A(data[et].edge_weight), w, rtol=1e-6)
    p = data["paper"]
    y = A(p.y)
    assert y.dtype == np.int64 and y.shape == (14,)
    for i, ys in {**m["labels"], **m["test"]}.items():
        assert y[i] == ys[0]
    tr, va, te = A(p.train_mask), A(p.val_mask), A(p.test_mask)
    np.testing.assert_array_equal(np.flatnonzero(tr | va), sorted(m["labels"]))
    assert va.sum() == int(10 * 0.2) and not (tr & va).any()
    np.testing.assert_array_equal(np.flatnonzero(te), sorted(m["test"]))
    assert data.target == "paper" and data.num_classes == 3


def test_multilabel_imdb(tmp_path):
    m = imdb_like(str(tmp_path / "IMDB"))
    for data in (load_hgb(tmp_path, "IMDB"), load_hgb(tmp_path / "IMDB")):  # by name / auto
        y = A(data["movie"].y)
        assert y.dtype == np.float32 and y.shape == (12, 5)     # 5 classes named in info.dat
        want = np.zeros((12, 5), dtype=np.float32)
        for i, ys in {**m["labels"], **m["test"]}.items():
            want[i, ys] = 1.0
        np.testing.assert_array_equal(y, want)
        assert data.num_classes == 5
        assert data.edge_types == [("movie", "to", "director"), ("director", "to", "movie"),
                                   ("movie", "to", "actor"), ("movie", "to", "keyword")]
        assert data["keyword"].num_nodes == 9
    with pytest.raises(ValueError, match=r"label\.dat: line \d+: .*multilabel=False"):
        load_hgb(tmp_path / "IMDB", multilabel=False)
    data = load_hgb(tmp_path / "IMDB", multilabel=True)
    assert A(data["movie"].y).shape == (12, 5)


def test_single_label_forced_multilabel(tmp_path):
    acm_like(str(tmp_path))
    y = A(load_hgb(tmp_path, multilabel=True)["paper"].y)
    assert y.shape == (14, 3) and y.dtype == np.float32
    assert (y[:14].sum(1) == 1).all()


def test_freebase_text_info(tmp_path):
    freebase_like(str(tmp_path / "Freebase"))
    data = load_hgb(tmp_path, "freebase")
    assert data.node_types == ["book", "film", "music"]          # lower-cased, as PyG
    assert data.edge_types == [("book", "and", "book"), ("book", "to", "film"),
                               ("film", "has", "music")]
    assert all("x" not in data[nt] for nt in data.node_types)


def test_featureless_and_feats_type(tmp_path):
    m = acm_like(str(tmp_path))
    x = A(load_hgb(tmp_path, featureless="one_hot")["term"].x)
    np.testing.assert_array_equal(x, np.eye(6, dtype=np.float32))
    loaded = {t: m["feats"].get(t) for t in range(4)}
    counts = [c for _, c, _ in m["types"]]
    names = [n for n, _, _ in m["types"]]

    def want(ft, t):
        keep = {1: 0, 2: 0, 4: 2, 5: 2}.get(ft)
        eye = np.eye(counts[t], dtype=np.float32)
        if ft == 3:
            return eye
        if keep is not None and t != keep:
            return eye if ft in (2, 4) else np.zeros((counts[t], 10), dtype=np.float32)
        return loaded[t] if loaded[t] is not None else eye

    for ft in range(6):
        data = load_hgb(tmp_path, feats_type=ft)
        for t in range(4):
            np.testing.assert_array_equal(A(data[names[t]].x), want(ft, t), err_msg=f"{ft} {t}")
    with pytest.raises(ValueError, match="feats_type"):
        load_hgb(tmp_path, feats_type=6)
    with pytest.raises(ValueError, match="featureless"):
        load_hgb(tmp_path, featureless="zeros")


def test_one_hot_too_large_is_memory_error(tmp_path, monkeypatch):
    acm_like(str(tmp_path))
    monkeypatch.setattr(hgb_mod, "_ONE_HOT_LIMIT", 6 * 6 * 4 - 1)
    with pytest.raises(MemoryError, match="'term'"):
        load_hgb(tmp_path, featureless="one_hot")


def test_link_type_without_links_stays(tmp_path):
    acm_like(str(tmp_path))
    path = tmp_path / "link.dat"
    lines = open(path).read().rstrip("\n").split("\n")
    with open(path, "w") as f:                                   # drop every link of type 1
        f.write("\n".join(ln for ln in lines if ln.split("\t")[2] != "1") + "\n")
    data = load_hgb(tmp_path)
    assert A(data["paper", "ref", "paper"].edge_index).shape == (2, 0)   # listed in info.dat
    data.validate()


def test_node_lines_in_any_order(tmp_path):
    m = acm_like(str(tmp_path), shuffle_nodes=True)
    data = load_hgb(tmp_path)
    np.testing.assert_array_equal(A(data["paper"].x), m["feats"][0])
    np.testing.assert_array_equal(A(data["author"].x), m["feats"][1])


def test_validation_split_is_seeded(tmp_path):
    acm_like(str(tmp_path))
    a = A(load_hgb(tmp_path, seed=1)["paper"].val_mask)
    np.testing.assert_array_equal(A(load_hgb(tmp_path, seed=1)["paper"].val_mask), a)
    others = [A(load_hgb(tmp_path, seed=s)["paper"].val_mask) for s in range(2, 8)]
    assert any(not np.array_equal(a, o) for o in others)
    g = rtx.Generator(1)
    np.testing.assert_array_equal(A(load_hgb(tmp_path, generator=g)["paper"].val_mask), a)
    d0 = load_hgb(tmp_path, val_ratio=0.0)["paper"]
    assert not A(d0.val_mask).any() and A(d0.train_mask).sum() == 10
    assert A(load_hgb(tmp_path, val_ratio=0.5)["paper"].val_mask).sum() == 5
    with pytest.raises(ValueError, match="val_ratio"):
        load_hgb(tmp_path, val_ratio=1.0)


def test_without_info_dat(tmp_path):
    acm_like(str(tmp_path))
    os.remove(tmp_path / "info.dat")
    data = load_hgb(tmp_path)
    assert data.node_types == ["type0", "type1", "type2", "type3"]
    assert data.edge_types[:3] == [("type0", "rel0", "type0"), ("type0", "rel1", "type0"),
                                   ("type0", "rel2", "type1")]
    assert data.target == "type0"


def test_names_mapped_to_valid_ones(tmp_path):
    acm_like(str(tmp_path))
    doc = json.load(open(tmp_path / "info.dat"))
    doc["node.dat"]["node type"] = {"0": "field.of/study", "1": "__a b__", "2": "x", "3": "x"}
    doc["link.dat"]["link type"]["0"]["meaning"] = "p-ci.te-p"
    doc["link.dat"]["link type"]["1"]["meaning"] = "p-ci/te-p"        # the same after mapping
    with open(tmp_path / "info.dat", "w") as f:
        json.dump(doc, f)
    data = load_hgb(tmp_path)
    assert data.node_types == ["field_of_study", "a_b", "x", "x_3"]
    assert data.edge_types[:2] == [("field_of_study", "ci_te", "field_of_study"),
                                   ("field_of_study", "ci_te_1", "field_of_study")]
    data.validate()


def test_path_layouts(tmp_path):
    acm_like(str(tmp_path / "acm" / "raw" / "ACM"))          # PyG's HGBDataset root
    assert load_hgb(tmp_path, "ACM").node_types[0] == "paper"
    assert load_hgb(tmp_path, "acm").node_types[0] == "paper"
    acm_like(str(tmp_path / "DBLP"))
    assert load_hgb(tmp_path, "dblp").node_types[0] == "paper"
    with pytest.raises(FileNotFoundError, match="node.dat"):
        load_hgb(tmp_path, "Freebase")
    with pytest.raises(FileNotFoundError, match="node.dat"):
        load_hgb(tmp_path / "nothing")
    os.remove(tmp_path / "DBLP" / "label.dat.test")
    with pytest.raises(FileNotFoundError, match="label.dat.test"):
        load_hgb(tmp_path / "DBLP")


def test_blank_lines_and_crlf(tmp_path):
    m = acm_like(str(tmp_path))
    for fname in ("node.dat", "link.dat", "label.dat"):
        text = open(tmp_path / fname, encoding="utf-8").read()
        with open(tmp_path / fname, "w", encoding="utf-8", newline="") as f:
            f.write(text.replace("\n", "\r\n").replace("\r\n", "\r\n\r\n", 1) + "\r\n")
    data = load_hgb(tmp_path)
    np.testing.assert_array_equal(A(data["paper"].x), m["feats"][0])
    assert (A(data["paper"].train_mask) | A(data["paper"].val_mask)).sum() == 10


def test_files_are_streamed_once(tmp_path, monkeypatch):
    """Each file opened once and read line by line: never whole into memory
    (info.dat, a few hundred bytes, is the one read whole)."""
    acm_like(str(tmp_path))
    opened: dict = {}

    class Lines:
        def __init__(self, f):
            self.f = f

        def __iter__(self):
            return iter(self.f)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def read(self, *a):
            raise AssertionError("a data file was read whole")

        readlines = read

    def counting_open(path, *a, **k):
        name = os.path.basename(os.fspath(path))
        opened[name] = opened.get(name, 0) + 1
        f = builtins.open(path, *a, **k)
        return f if name == "info.dat" else Lines(f)

    monkeypatch.setattr(hgb_mod, "open", counting_open, raising=False)
    load_hgb(tmp_path)
    assert opened == {"info.dat": 1, "node.dat": 1, "link.dat": 1, "label.dat": 1,
                      "label.dat.test": 1}


# ------------------------------------------------------------------ malformed
def _edit(path, lineno, new):
    lines = open(path, encoding="utf-8").read().split("\n")
    lines[lineno - 1] = new
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def _line(path, lineno):
    return open(path, encoding="utf-8").read().split("\n")[lineno - 1]


CASES = [   # (file, line edited, edit, message, line the message names)
    ("node.dat", 3, lambda s: s.replace("\t", " "), r"3 or 4 tab-separated fields", 3),
    ("node.dat", 3, lambda s: "x" + s, r"node id 'x2' is not an integer", 3),
    ("node.dat", 3, lambda s: s.replace("\t0\t", "\t-1\t", 1), r"node type -1 is negative", 3),
    ("node.dat", 4, lambda s: s[:-1] + "q", r"attribute 4 \('.*q'\) is not a number", 4),
    ("node.dat", 4, lambda s: s.rsplit(",", 1)[0] + ",nan", r"NaN or infinite", 4),
    ("node.dat", 5, lambda s: s.rsplit(",", 1)[0], r"4 attributes, but node type 0 has 5", 5),
    ("node.dat", 6, lambda s: s.rsplit("\t", 1)[0], r"has attributes on line 1 but none", 6),
    ("node.dat", 31, lambda s: s + "\t1.0", r"has no attributes on line 26 but some", 31),
    ("node.dat", 7, lambda s: "0" + s[s.index("\t"):], r"node id 0 already given on line 1", 7),
    # node 14 (an author) claims type 2: node 15, the next author, is out of place
    ("node.dat", 15, lambda s: s.replace("\t1\t", "\t2\t", 1).rsplit("\t", 1)[0] + "\t1.0,2.0",
     r"node 15 of type 1 follows node 14 of type 2", 16),
    ("node.dat", 3, lambda s: "9" * 25 + s[s.index("\t"):], r"node id 9+ is too large", 3),
    ("link.dat", 2, lambda s: s + "\t7", r"4 tab-separated fields", 2),
    ("link.dat", 2, lambda s: "9" * 25 + s[s.index("\t"):], r"source node id 9+ is too large",
     2),
    ("link.dat", 2, lambda s: s.replace("\t", "\t-", 1), r"destination node id -\d+ is negative",
     2),
    ("link.dat", 2, lambda s: "999" + s[s.index("\t"):], r"source node id 999 is not a node", 2),
    ("link.dat", 2, lambda s: s.rsplit("\t", 1)[0] + "\theavy", r"weight 'heavy'", 2),
    ("link.dat", 2, lambda s: s.rsplit("\t", 1)[0] + "\tinf", r"not finite", 2),
    ("link.dat", 2, lambda s: "20" + s[s.index("\t"):], r"link type 0 joins node types 0 -> 0 "
                                                        r"\(info\.dat\), but this link joins 1",
     2),
    ("link.dat", 2, lambda s: "\t".join(s.split("\t")[:1] + ["20"] + s.split("\t")[2:]),
     r"link type 0 joins node types 0 -> 0 \(info\.dat\), but this link joins 0 -> 1", 2),
    ("link.dat", 2, lambda s: "\t".join(s.split("\t")[:2] + ["9", "1.0"]),
     r"link type 9 is not listed in info\.dat", 2),
    ("label.dat", 2, lambda s: s.replace("\t0\t", "\t1\t", 1), r"node 1 has type 0 in node\.dat",
     2),
    ("label.dat", 2, lambda s: "999" + s[s.index("\t"):], r"node id 999 is not a node", 2),
    ("label.dat", 2, lambda s: s.rsplit("\t", 1)[0] + "\t1,x", r"label 'x' is not an integer", 2),
    ("label.dat", 2, lambda s: s.rsplit("\t", 1)[0], r"4 tab-separated fields", 2),
    ("label.dat", 3, lambda s: "0" + s[s.index("\t"):], r"node 0 is already labelled on line 1",
     3),
    ("label.dat", 2, lambda s: "14\t\t1\t0", r"labels on node type 1, but line 1 labels type 0",
     2),
    ("label.dat.test", 1, lambda s: "0" + s[s.index("\t"):], r"node 0 is labelled in label\.dat",
     None),
    ("info.dat", 3, lambda s: s + " oops", r"malformed JSON", 3),
]


@pytest.mark.parametrize("fname,lineno,edit,match,line", CASES,
                         ids=[f"{c[0]}:{c[1]}:{c[3][:24]}" for c in CASES])
def test_malformed_file_names_file_and_line(tmp_path, fname, lineno, edit, match, line):
    acm_like(str(tmp_path))
    path = tmp_path / fname
    _edit(path, lineno, edit(_line(path, lineno)))
    with pytest.raises(ValueError) as exc:
        load_hgb(tmp_path)
    msg = str(exc.value)
    where = f"{path}: line {line}: " if line is not None else f"{path}: "
    assert msg.startswith(where), msg
    assert re.search(match, msg), msg


def test_malformed_global_layouts(tmp_path):
    acm_like(str(tmp_path))
    path = tmp_path / "node.dat"
    lines = open(path).read().rstrip("\n").split("\n")
    with open(path, "w") as f:                                    # drop node 5: a gap
        f.write("\n".join(ln for ln in lines if not ln.startswith("5\t")) + "\n")
    with pytest.raises(ValueError, match=r"node\.dat: node ids must be 0 \.\. 29.*id 5"):
        load_hgb(tmp_path)
    with open(path, "w") as f:                                    # no node of type 2
        f.write("\n".join(ln for ln in lines if ln.split("\t")[2] != "2") + "\n")
    with pytest.raises(ValueError, match=r"types must be 0 \.\. 3; type 2 has no nodes"):
        load_hgb(tmp_path)
    with open(path, "w") as f:
        f.write("\n")
    with pytest.raises(ValueError, match="no nodes"):
        load_hgb(tmp_path)


# ------------------------------------------------------------------ against PyG
@needs_pyg
@pytest.mark.parametrize("name,make", [("acm", acm_like), ("imdb", imdb_like),
                                       ("freebase", freebase_like)])
def test_same_graph_as_pyg_hgbdataset(tmp_path, name, make):
    from torch_geometric.datasets import HGBDataset
    canon = {"acm": "ACM", "imdb": "IMDB", "freebase": "Freebase"}[name]
    make(str(tmp_path / name / "raw" / canon))
    theirs = HGBDataset(str(tmp_path), name)[0]
    ours = load_hgb(tmp_path, name)
    assert ours.node_types == theirs.node_types
    assert ours.edge_types == [tuple(e) for e in theirs.edge_types]
    for nt in theirs.node_types:
        for k in theirs[nt].keys():
            b = theirs[nt][k]
            if k == "num_nodes":
                assert ours[nt].num_nodes == b
            elif k == "train_mask":            # PyG: all of label.dat; rtx: train + val
                np.testing.assert_array_equal(
                    A(ours[nt].train_mask) | A(ours[nt].val_mask), b.numpy())
            else:
                a = A(ours[nt][k])
                assert a.dtype == b.numpy().dtype, (nt, k)
                np.testing.assert_array_equal(a, b.numpy(), err_msg=f"{nt} {k}")
    for et in theirs.edge_types:
        assert sorted(ours[tuple(et)].keys()) == sorted(theirs[et].keys())
        for k in theirs[et].keys():
            np.testing.assert_allclose(A(ours[tuple(et)][k]), theirs[et][k].numpy(), rtol=1e-6)
