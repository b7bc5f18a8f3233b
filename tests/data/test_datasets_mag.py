"""rtx.datasets.synthetic_mag (ogbn-mag's schema and size) and load_ogb_mag (OGB's
download layout, read from a fixture these tests write as OGB ships it)."""

from __future__ import annotations

import gzip
import math
import os
import tracemalloc

import numpy as np
import pytest

import rtx
import rtx.datasets
from rtx.data import HeteroData
from rtx.datasets import load_ogb_mag, synthetic_mag
from rtx.datasets import mag as M

W = ("author", "writes", "paper")
A = ("author", "affiliated_with", "institution")
CI = ("paper", "cites", "paper")
T = ("paper", "has_topic", "field_of_study")
REV = {W: ("paper", "rev_writes", "author"), A: ("institution", "rev_affiliated_with", "author"),
       T: ("field_of_study", "rev_has_topic", "paper")}


def arr(v):
    return np.asarray(v.numpy()) if isinstance(v, rtx.Tensor) else np.asarray(v)


def scaled(n, s):
    return int(math.floor(n * s + 0.5))


@pytest.fixture(scope="module")
def small():
    return synthetic_mag(0.005, seed=3)


@pytest.fixture(scope="module")
def medium():
    return synthetic_mag(0.02, seed=0, add_reverse=False)


# ------------------------------------------------------------------ the targets
def test_scale_one_targets_are_ogbn_mags():
    nodes, edges, split = M._counts(1.0)
    assert nodes == {"paper": 736_389, "author": 1_134_649, "institution": 8_740,
                     "field_of_study": 59_965}
    assert sum(nodes.values()) == 1_939_743
    assert edges == {A: 1_043_998, W: 7_145_660, CI: 5_416_271, T: 7_505_078}
    assert sum(edges.values()) == 21_111_007
    assert split == {"train": 629_571, "valid": 64_879, "test": 41_939}


# ----------------------------------------------------------------------- schema
def test_schema(small):
    d = small
    assert isinstance(d, HeteroData)
    assert d.node_types == ["paper", "author", "institution", "field_of_study"]
    assert d.edge_types == [A, W, CI, T, REV[A], REV[W], REV[T]]
    assert d.target == "paper" and d.num_classes == 349
    p = d["paper"]
    assert sorted(p.keys()) == ["test_mask", "train_mask", "val_mask", "x", "y", "year"]
    n = scaled(736_389, 0.005)
    for k, dt, shape in (("x", np.float32, (n, 128)), ("year", np.int64, (n,)),
                         ("y", np.int64, (n,)), ("train_mask", np.bool_, (n,)),
                         ("val_mask", np.bool_, (n,)), ("test_mask", np.bool_, (n,))):
        assert isinstance(p[k], rtx.Tensor), k
        assert arr(p[k]).dtype == dt and arr(p[k]).shape == shape, k
    for nt in ("author", "institution", "field_of_study"):
        assert d[nt].keys() == ["num_nodes"]          # no features
        assert isinstance(d[nt].num_nodes, int)
    for et in d.edge_types:
        ei = d[et].edge_index
        assert isinstance(ei, rtx.Tensor)
        a = arr(ei)
        assert a.dtype == np.int64 and a.ndim == 2 and a.shape[0] == 2
        assert a.flags.c_contiguous
    assert d.validate()
    assert d.num_node_features == {"paper": 128, "author": 0, "institution": 0,
                                   "field_of_study": 0}


@pytest.mark.parametrize("scale", [0.00048, 0.001, 0.0123, 0.03])
def test_counts_equal_the_scaled_targets(scale):
    d = synthetic_mag(scale, seed=1, add_reverse=False)
    assert d.num_nodes_dict == {nt: scaled(n, scale) for nt, n in M.MAG_NUM_NODES.items()}
    assert d.num_edges_dict == {et: scaled(n, scale) for et, n in M.MAG_NUM_EDGES.items()}
    p = d["paper"]
    va, te = scaled(64_879, scale), scaled(41_939, scale)
    assert int(arr(p.val_mask).sum()) == va
    assert int(arr(p.test_mask).sum()) == te
    assert int(arr(p.train_mask).sum()) == scaled(736_389, scale) - va - te
    y = arr(p.y)
    assert np.bincount(y, minlength=349).min() >= 1 and y.max() == 348   # every class
    d.validate()


def test_counts_with_reverse_relations(small):
    s = 0.005
    for et, n in M.MAG_NUM_EDGES.items():
        want = 2 * scaled(n, s) if et == CI else scaled(n, s)
        assert small[et].num_edges == want, et
        if et in REV:
            assert small[REV[et]].num_edges == want


def test_deterministic_for_scale_and_seed():
    a, b = synthetic_mag(0.002, seed=5), synthetic_mag(0.002, seed=5)
    c = synthetic_mag(0.002, seed=6)
    assert a.metadata() == b.metadata()
    for nt in a.node_types:
        for k in a[nt].keys():
            va, vb = a[nt][k], b[nt][k]
            if isinstance(va, rtx.Tensor):
                assert arr(va).tobytes() == arr(vb).tobytes(), (nt, k)
            else:
                assert va == vb
    for et in a.edge_types:
        assert np.array_equal(arr(a[et].edge_index), arr(b[et].edge_index)), et
    assert not np.array_equal(arr(a["paper"].x), arr(c["paper"].x))
    assert not np.array_equal(arr(a[W].edge_index), arr(c[W].edge_index))


def test_year_split_is_ogbs(small):
    p = small["paper"]
    year = arr(p.year)
    tr, va, te = arr(p.train_mask), arr(p.val_mask), arr(p.test_mask)
    assert np.array_equal(tr, year < 2018)
    assert np.array_equal(va, year == 2018)
    assert np.array_equal(te, year == 2019)
    assert not (tr & va).any() and not (tr & te).any() and not (va & te).any()
    assert (tr | va | te).all()
    assert year.min() == 2010 and year.max() == 2019
    counts = np.bincount(year[tr] - 2010, minlength=8)
    assert (counts > 0).all()
    assert (np.diff(counts) >= 0).sum() >= 6           # more papers in later years


def test_split_proportions_at_scale_one_match_ogb():
    # the split is computed from the counts: OGB's proportions at any scale
    for s in (0.01, 0.5, 1.0):
        _, _, split = M._counts(s)
        total = sum(split.values())
        assert abs(split["train"] / total - 629_571 / 736_389) < 2e-3
        assert abs(split["test"] / total - 41_939 / 736_389) < 2e-3


def _directed(d, et):
    return arr(d[et].edge_index)


def test_no_duplicate_edges_sorted_and_citations_back_in_time(medium):
    d = medium
    for et in d.edge_types:
        ei = _directed(d, et)
        n_dst = d.num_nodes_dict[et[2]]
        key = ei[0] * n_dst + ei[1]
        assert (np.diff(key) > 0).all(), et            # sorted, distinct
    ei = _directed(d, CI)
    assert (ei[0] != ei[1]).all()                      # no self-citation
    year = arr(d["paper"].year)
    assert (year[ei[0]] >= year[ei[1]]).all()          # a paper cites earlier papers
    n = d["paper"].num_nodes
    fwd = set((ei[0] * n + ei[1]).tolist())
    assert not fwd & set((ei[1] * n + ei[0]).tolist())  # none reciprocated


def test_every_paper_has_an_author_and_a_topic(medium):
    n = medium["paper"].num_nodes
    assert np.bincount(_directed(medium, W)[1], minlength=n).min() >= 1
    assert np.bincount(_directed(medium, T)[0], minlength=n).min() >= 1


def test_reverse_relations_are_exact_reverses():
    fwd = synthetic_mag(0.004, seed=2, add_reverse=False)
    both = synthetic_mag(0.004, seed=2)
    for et, rev in REV.items():
        e = arr(both[et].edge_index)
        assert np.array_equal(e, arr(fwd[et].edge_index))
        assert np.array_equal(arr(both[rev].edge_index), e[::-1])
        assert not np.shares_memory(arr(both[rev].edge_index), e)
    # (paper, cites, paper): T.ToUndirected() makes it symmetric and coalesced, no rev_cites
    assert ("paper", "rev_cites", "paper") not in both.edge_types
    c = arr(fwd[CI].edge_index)
    n = fwd["paper"].num_nodes
    want = np.unique(np.concatenate([c[0] * n + c[1], c[1] * n + c[0]]))
    sym = arr(both[CI].edge_index)
    assert np.array_equal(sym[0] * n + sym[1], want)
    assert sym.shape[1] == 2 * c.shape[1]


def test_reverse_matches_pyg_to_undirected():
    pyg_t = pytest.importorskip("torch_geometric.transforms")
    fwd = synthetic_mag(0.001, seed=4, add_reverse=False)
    ours = synthetic_mag(0.001, seed=4)
    theirs = pyg_t.ToUndirected()(fwd.to_pyg())
    assert [tuple(et) for et in theirs.edge_types] == ours.edge_types
    for et in ours.edge_types:
        assert np.array_equal(theirs[et].edge_index.numpy(), arr(ours[et].edge_index)), et


def test_degrees_are_heavy_tailed(medium):
    """Power-law-like: beyond what a Poisson or geometric degree of the same mean gives
    (for a geometric one, about ln(N) ~ 9.6 x the mean at most, and N e^-10 ~ 0.7 of
    the 14,728 papers above 10 x the mean; for a Poisson one, none)."""
    d = medium
    cases = {
        "authors per paper": np.bincount(_directed(d, W)[1]),
        "papers per author": np.bincount(_directed(d, W)[0]),
        "references": np.bincount(_directed(d, CI)[0]),
        "citations": np.bincount(_directed(d, CI)[1]),
        "topics per paper": np.bincount(_directed(d, T)[0]),
        "papers per topic": np.bincount(_directed(d, T)[1]),
    }
    for what, deg in cases.items():
        m = deg.mean()
        assert deg.max() >= 10 * m, (what, deg.max(), m)
        assert (deg > 10 * m).sum() >= 3, (what, np.sort(deg)[-5:], m)
    inst = np.bincount(_directed(d, A)[1])
    assert inst.max() >= 10 * inst.mean()


def _features_only(x, y, train, test):
    """Nearest training-class centroid on the paper features."""
    C = 349
    cent = np.zeros((C, x.shape[1]))
    np.add.at(cent, y[train], x[train])
    cnt = np.bincount(y[train], minlength=C)
    cent /= np.maximum(cnt, 1)[:, None]
    xt = x[test].astype(np.float64)
    d2 = (cent ** 2).sum(1)[None] - 2 * xt @ cent.T
    d2[:, cnt == 0] = np.inf
    return float((d2.argmin(1) == y[test]).mean())


def _neighbour_majority(ei, n, y, train, test):
    """The most frequent training label among a paper's citation neighbours (both ways)."""
    C = 349
    votes = np.zeros((n, C))
    for a, b in ((ei[0], ei[1]), (ei[1], ei[0])):
        m = train[b]
        np.add.at(votes, (a[m], y[b[m]]), 1.0)
    return float((votes[test].argmax(1) == y[test]).mean())


def test_class_signal_needs_the_graph():
    d = synthetic_mag(0.01, seed=0, add_reverse=False)
    p = d["paper"]
    x, y = arr(p.x), arr(p.y)
    train = arr(p.train_mask)
    test = arr(p.val_mask) | arr(p.test_mask)
    feat = _features_only(x, y, train, test)
    graph = _neighbour_majority(arr(d[CI].edge_index), y.size, y, train, test)
    chance = float((y[test] == np.bincount(y[train]).argmax()).mean())
    assert feat > 1.5 * chance          # the features carry a (weak) signal
    assert feat < 0.3                   # ... too weak to solve the task
    assert graph > feat + 0.3, (graph, feat)
    ei = arr(d[CI].edge_index)
    assert (y[ei[0]] == y[ei[1]]).mean() > 0.15     # homophilous citations


@pytest.mark.parametrize("scale,exc", [
    (0, ValueError), (-1.0, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
    (0.0001, ValueError), (0.00047, ValueError), ("1", TypeError), (True, TypeError),
    (None, TypeError),
])
def test_bad_scale(scale, exc):
    with pytest.raises(exc, match="scale"):
        synthetic_mag(scale)


def test_smallest_scale_is_named():
    with pytest.raises(ValueError, match=r"fewer than the 349 classes.*0\.000474"):
        synthetic_mag(0.0004)


@pytest.mark.parametrize("seed,exc", [(-1, ValueError), (1.5, TypeError), (False, TypeError)])
def test_bad_seed(seed, exc):
    with pytest.raises(exc, match="seed"):
        synthetic_mag(0.001, seed=seed)


def test_exported():
    assert rtx.datasets.synthetic_mag is synthetic_mag
    assert rtx.datasets.load_ogb_mag is load_ogb_mag
    assert {"synthetic_mag", "load_ogb_mag"} <= set(rtx.datasets.__all__)


# ====================================================== OGB's download layout
def gz(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)


def lines(rows):
    return "".join(",".join(str(v) for v in r) + "\n" for r in rows)


def write_ogb(root, graph):
    """``graph`` in the directory OGB's downloader leaves for ogbn-mag (<root>/ogbn_mag)."""
    ds = os.path.join(root, "ogbn_mag")
    raw = os.path.join(ds, "raw")
    counts = graph["num_nodes"]
    names = sorted(counts)
    gz(os.path.join(raw, "num-node-dict.csv.gz"),
       ",".join(names) + "\n" + ",".join(str(counts[n]) for n in names) + "\n")
    gz(os.path.join(raw, "triplet-type-list.csv.gz"), lines(sorted(graph["edges"])))
    for i, (et, ei) in enumerate(sorted(graph["edges"].items())):
        rel = os.path.join(raw, "relations", "___".join(et))
        os.makedirs(rel, exist_ok=True)
        with gzip.open(os.path.join(rel, "edge.csv.gz"), "wt") as f:
            np.savetxt(f, np.asarray(ei).T, fmt="%d", delimiter=",")
        gz(os.path.join(rel, "num-edge-list.csv.gz"), f"{np.asarray(ei).shape[1]}\n")
        gz(os.path.join(rel, "edge_reltype.csv.gz"), f"{i}\n" * np.asarray(ei).shape[1])
    has_feat = {n: n in graph["x"] for n in names}
    gz(os.path.join(raw, "nodetype-has-feat.csv.gz"),
       ",".join(names) + "\n" + ",".join(str(has_feat[n]) for n in names) + "\n")
    for nt, x in graph["x"].items():
        d = os.path.join(raw, "node-feat", nt)
        os.makedirs(d, exist_ok=True)
        with gzip.open(os.path.join(d, "node-feat.csv.gz"), "wt") as f:
            np.savetxt(f, x, fmt="%.9g", delimiter=",")   # round-trips float32
        gz(os.path.join(d, "node_year.csv.gz"), lines([[v] for v in graph["year"][nt]]))
    gz(os.path.join(raw, "nodetype-has-label.csv.gz"),
       ",".join(names) + "\n" + ",".join(str(n == "paper") for n in names) + "\n")
    gz(os.path.join(raw, "node-label", "paper", "node-label.csv.gz"),
       lines([[v] for v in graph["y"]]))
    sp = os.path.join(ds, "split", "time")
    gz(os.path.join(sp, "nodetype-has-split.csv.gz"),
       ",".join(names) + "\n" + ",".join(str(n == "paper") for n in names) + "\n")
    for name, idx in graph["split"].items():
        gz(os.path.join(sp, "paper", f"{name}.csv.gz"), lines([[v] for v in idx]))
    with open(os.path.join(ds, "RELEASE_v2.txt"), "w") as f:
        f.write("ogbn-mag\n")
    return ds


def tiny_graph():
    rng = np.random.default_rng(0)
    return {
        "num_nodes": {"paper": 6, "author": 5, "institution": 2, "field_of_study": 3},
        "edges": {
            A: np.array([[0, 1, 3, 4], [0, 0, 1, 1]]),
            W: np.array([[0, 0, 1, 2, 3, 4, 4], [0, 1, 2, 3, 4, 5, 0]]),
            CI: np.array([[1, 2, 3, 3, 5], [0, 0, 1, 2, 4]]),
            T: np.array([[0, 1, 2, 3, 4, 5, 5], [0, 1, 2, 0, 1, 2, 0]]),
        },
        "x": {"paper": rng.standard_normal((6, 4)).astype(np.float32)},
        "year": {"paper": np.array([2015, 2017, 2018, 2019, 2016, 2018])},
        "y": np.array([0, 3, 1, 2, 0, 1]),
        "split": {"train": [0, 1, 4], "valid": [2, 5], "test": [3]},
    }


@pytest.fixture
def tiny(tmp_path):
    g = tiny_graph()
    return g, write_ogb(str(tmp_path), g)


def check_equal(data, g):
    assert data.node_types == ["paper", "author", "institution", "field_of_study"]
    assert data.edge_types == sorted(g["edges"])
    p = data["paper"]
    assert arr(p.x).dtype == np.float32
    assert np.array_equal(arr(p.x), g["x"]["paper"])
    assert np.array_equal(arr(p.year), g["year"]["paper"]) and arr(p.year).dtype == np.int64
    assert np.array_equal(arr(p.y), g["y"]) and arr(p.y).dtype == np.int64
    n = g["num_nodes"]["paper"]
    for name, attr in (("train", "train_mask"), ("valid", "val_mask"), ("test", "test_mask")):
        want = np.zeros(n, bool)
        want[g["split"][name]] = True
        assert np.array_equal(arr(p[attr]), want)
    for nt in ("author", "institution", "field_of_study"):
        assert data[nt].keys() == ["num_nodes"]
        assert data[nt].num_nodes == g["num_nodes"][nt]
    for et, ei in g["edges"].items():
        got = data[et].edge_index
        assert isinstance(got, rtx.Tensor)
        assert arr(got).dtype == np.int64
        assert np.array_equal(arr(got), ei), et
    assert data.target == "paper"
    assert data.num_classes == int(np.max(g["y"])) + 1
    assert data.validate()


def test_reads_ogb_layout(tiny, tmp_path):
    g, ds = tiny
    check_equal(load_ogb_mag(ds), g)                    # the dataset folder
    check_equal(load_ogb_mag(str(tmp_path)), g)        # its parent, as OGB's root=
    check_equal(load_ogb_mag(tmp_path), g)             # a PathLike


def test_reverse_only_when_asked(tiny):
    g, ds = tiny
    plain = load_ogb_mag(ds)
    assert len(plain.edge_types) == 4
    both = load_ogb_mag(ds, add_reverse=True)
    assert both.edge_types == sorted(g["edges"]) + [REV[A], REV[W], REV[T]]
    for et, rev in REV.items():
        assert np.array_equal(arr(both[rev].edge_index), g["edges"][et][::-1])
    c = g["edges"][CI]
    n = 6
    sym = arr(both[CI].edge_index)
    assert np.array_equal(sym[0] * n + sym[1],
                          np.unique(np.concatenate([c[0] * n + c[1], c[1] * n + c[0]])))


@pytest.mark.parametrize("chunk", [1, 3, 8, 64])
def test_chunk_boundaries(tiny, monkeypatch, chunk):
    g, ds = tiny
    monkeypatch.setattr(M, "_CHUNK", chunk)
    check_equal(load_ogb_mag(ds), g)


def test_crlf_and_missing_final_newline(tiny):
    g, ds = tiny
    p = os.path.join(ds, "raw", "relations", "author___writes___paper", "edge.csv.gz")
    ei = g["edges"][W]
    gz(p, "\r\n".join(f"{a},{b}" for a, b in ei.T))     # no final newline
    check_equal(load_ogb_mag(ds), g)


def mag_as_graph(d):
    p = d["paper"]
    year = arr(p.year)
    return {
        "num_nodes": d.num_nodes_dict,
        "edges": {et: arr(d[et].edge_index) for et in d.edge_types},
        "x": {"paper": arr(p.x)},
        "year": {"paper": year},
        "y": arr(p.y),
        "split": {"train": np.flatnonzero(year < 2018), "valid": np.flatnonzero(year == 2018),
                  "test": np.flatnonzero(year == 2019)},
    }


def test_synthetic_mag_round_trips_through_ogb_layout(tmp_path):
    d = synthetic_mag(0.001, seed=7, add_reverse=False)
    ds = write_ogb(str(tmp_path), mag_as_graph(d))
    back = load_ogb_mag(ds)
    assert back.metadata() == d.metadata()
    for nt in d.node_types:
        for k in d[nt].keys():
            if isinstance(d[nt][k], rtx.Tensor):
                assert np.array_equal(arr(back[nt][k]), arr(d[nt][k])), (nt, k)
            else:
                assert back[nt][k] == d[nt][k]
    for et in d.edge_types:
        assert np.array_equal(arr(back[et].edge_index), arr(d[et].edge_index))
    assert back.num_classes == d.num_classes == 349
    rev = load_ogb_mag(ds, add_reverse=True)
    d2 = synthetic_mag(0.001, seed=7)
    assert rev.metadata() == d2.metadata()
    for et in d2.edge_types:
        assert np.array_equal(arr(rev[et].edge_index), arr(d2[et].edge_index)), et


def test_streams_each_file_once(tmp_path, monkeypatch):
    """Peak traced memory stays near the result's size: no file is held whole."""
    d = synthetic_mag(0.005, seed=0, add_reverse=False)
    ds = write_ogb(str(tmp_path), mag_as_graph(d))
    feat = os.path.join(ds, "raw", "node-feat", "paper", "node-feat.csv.gz")
    with gzip.open(feat, "rb") as f:
        text_bytes = len(f.read())
    chunk = 1 << 16
    monkeypatch.setattr(M, "_CHUNK", chunk)
    tracemalloc.start()
    try:
        out = load_ogb_mag(ds)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    result = sum(arr(v).nbytes for nt in out.node_types for v in out[nt].values()
                 if isinstance(v, rtx.Tensor))
    result += sum(arr(out[et].edge_index).nbytes for et in out.edge_types)
    assert text_bytes > 2 * result / 3           # the feature text alone is big
    print(f"traced peak {peak / 2**20:.2f} MiB, result {result / 2**20:.2f} MiB, "
          f"feature text {text_bytes / 2**20:.2f} MiB")
    assert peak < result + 16 * chunk + (1 << 20), (peak, result)


# ---------------------------------------------------------------- bad downloads
RAW = os.path.join("ogbn_mag", "raw")
SPLIT = os.path.join("ogbn_mag", "split", "time")
EDGE_W = os.path.join(RAW, "relations", "author___writes___paper", "edge.csv.gz")
NUM_W = os.path.join(RAW, "relations", "author___writes___paper", "num-edge-list.csv.gz")
FEAT = os.path.join(RAW, "node-feat", "paper", "node-feat.csv.gz")
YEAR = os.path.join(RAW, "node-feat", "paper", "node_year.csv.gz")
LABEL = os.path.join(RAW, "node-label", "paper", "node-label.csv.gz")
NODES = os.path.join(RAW, "num-node-dict.csv.gz")
TRIP = os.path.join(RAW, "triplet-type-list.csv.gz")
HAS_LABEL = os.path.join(RAW, "nodetype-has-label.csv.gz")
HAS_SPLIT = os.path.join(SPLIT, "nodetype-has-split.csv.gz")
TRAIN = os.path.join(SPLIT, "paper", "train.csv.gz")
VALID = os.path.join(SPLIT, "paper", "valid.csv.gz")

HDR = "author,field_of_study,institution,paper\n"
EDGES_W = "0,0\n0,1\n1,2\n2,3\n3,4\n4,5\n4,0\n"     # tiny_graph's writes, 7 lines


def feat_rows(k, cols=4, bad=None):
    rows = [["0.5"] * cols for _ in range(k)]
    if bad is not None:
        rows[bad[0]][0] = bad[1]
    return lines(rows)


MALFORMED = [
    # (file, new text, line named in the message (None: none), part of the message)
    (EDGE_W, "0,0\n0,1,7\n1,2\n2,3\n3,4\n4,5\n4,0\n", 2, "3 columns"),
    (EDGE_W, "0,0\n0,1,7\n1\n2,3\n3,4\n4,5\n4,0\n", 2, "3 columns"),   # totals still match
    (EDGE_W, "0,0\n0,1\n\n2,3\n3,4\n4,5\n4,0\n", 3, "empty line"),
    (EDGE_W, "0,0\n0,1\n1,2.5\n2,3\n3,4\n4,5\n4,0\n", 3, "not an integer"),
    (EDGE_W, "0,0\n0,1\n1,2\nx,3\n3,4\n4,5\n4,0\n", 4, "not an integer"),
    (EDGE_W, "0,0\n0,1\n1,2\n2,3\n3,99999999999999999999\n4,5\n4,0\n", 5, "int64"),
    (EDGE_W, "0,0\n0,1\n1,2\n2,3\n5,4\n4,5\n4,0\n", 5, "source 'author' index 5"),
    (EDGE_W, "0,0\n0,1\n1,2\n2,3\n3,4\n4,6\n4,0\n", 6, "destination 'paper' index 6"),
    (EDGE_W, "0,0\n-1,1\n1,2\n2,3\n3,4\n4,5\n4,0\n", 2, "index -1"),
    (EDGE_W, EDGES_W + "1,1\n", 8, "more than the 7 edges"),
    (EDGE_W, "0,0\n0,1\n1,2\n", None, "holds 3 edges, but num-edge-list.csv.gz gives 7"),
    (NUM_W, "7\n7\n", 2, "more rows than one"),
    (NUM_W, "seven\n", 1, "not an integer"),
    (FEAT, feat_rows(5), None, "holds 5 rows, but num-node-dict.csv.gz gives 6 'paper'"),
    (FEAT, feat_rows(7), 7, "more than the 6 'paper' nodes"),
    (FEAT, feat_rows(6, bad=(3, "abc")), 4, "'abc' is not a number"),
    (FEAT, feat_rows(6, bad=(4, "nan")), 5, "non-finite"),
    (FEAT, feat_rows(2) + "0.5,0.5,0.5\n" + feat_rows(3), 3, "3 columns, expected 4"),
    (YEAR, "2015\n2017\n2018\n2019\n2016\n", None, "holds 5 rows, expected the 6 'paper'"),
    (YEAR, "2015\n2017\n2018\n2019.5\n2016\n2018\n", 4, "not an integer"),
    (LABEL, "0\n3\n1\n2\n0\n1\n1\n", 7, "more rows than the 6 'paper' nodes"),
    (LABEL, "0\n3\n-1\n2\n0\n1\n", 3, "-1 is below 0"),
    (LABEL, "0\n3\n1\n2\n0\n1.0\n", 6, "not an integer"),
    (TRAIN, "0\n1\n6\n", 3, "'paper' index 6 is out of range"),
    (TRAIN, "0\n1\n2\n", None, None),      # 2 is also in valid: named in valid.csv.gz
    (TRAIN, "0\n1\n1\n", 3, "listed twice"),
    (NODES, HDR + "5,3,2\n", 2, "3 columns, but the header names 4"),
    (NODES, HDR + "5,3,x,6\n", 2, "'x' (institution) is not a node count"),
    (NODES, HDR + "5,3,2,-6\n", 2, "is not a node count"),
    (NODES, HDR + "5,3,2,6\n5,3,2,6\n", None, "holds 3 lines"),
    (NODES, "author,field_of_study,institution,pa/per\n5,3,2,6\n", 1, "bad node type"),
    (NODES, "author,author,institution,paper\n5,3,2,6\n", 1, "appears twice"),
    (TRIP, "author,affiliated_with,institution\nauthor,writes\n", 2, "2 columns"),
    (TRIP, "author,affiliated_with,institution\nauthor,writes,venue\n", 2, "'venue'"),
    (TRIP, "author,writes,paper\nauthor,writes,paper\n", 2, "appears twice"),
    (HAS_LABEL, HDR + "False,False,False,yes\n", 2, "'yes' (paper) is not True or False"),
    (HAS_LABEL, HDR + "False,False,False,False\n", 2, "0 node types have labels"),
    (HAS_SPLIT, HDR + "False,False,False,False\n", 2, "has no split"),
]


@pytest.mark.parametrize("rel,text,line,msg", MALFORMED)
def test_malformed_file_is_a_value_error_naming_file_and_line(tmp_path, rel, text, line, msg):
    write_ogb(str(tmp_path), tiny_graph())
    path = os.path.join(str(tmp_path), rel)
    gz(path, text)
    with pytest.raises(ValueError) as e:
        load_ogb_mag(str(tmp_path))
    s = str(e.value)
    if msg is None:                 # the overlap is found in the later file
        path, line, msg = (os.path.join(str(tmp_path), VALID), 1,
                           "'paper' index 2 is already in the train split")
    assert s.startswith(path + ": "), s
    if line is None:
        assert ": line " not in s, s
    else:
        assert f": line {line}: " in s, s
    assert msg in s, s


NEEDED = [NODES, TRIP, HAS_LABEL, HAS_SPLIT, EDGE_W, NUM_W, LABEL, TRAIN, VALID,
          os.path.join(SPLIT, "paper", "test.csv.gz"),
          os.path.join(RAW, "relations", "paper___cites___paper", "edge.csv.gz")]


@pytest.mark.parametrize("rel", NEEDED)
def test_missing_file_is_named(tmp_path, rel):
    write_ogb(str(tmp_path), tiny_graph())
    path = os.path.join(str(tmp_path), rel)
    os.remove(path)
    with pytest.raises(FileNotFoundError) as e:
        load_ogb_mag(str(tmp_path))
    assert isinstance(e.value, ValueError)
    assert e.value.filename == path and path in str(e.value)


def test_optional_files_may_be_missing(tiny):
    g, ds = tiny
    for rel in ("nodetype-has-feat.csv.gz",
                os.path.join("relations", "author___writes___paper", "edge_reltype.csv.gz")):
        os.remove(os.path.join(ds, "raw", rel))
    os.remove(os.path.join(ds, "RELEASE_v2.txt"))
    check_equal(load_ogb_mag(ds), g)
    os.remove(os.path.join(ds, "raw", "node-feat", "paper", "node_year.csv.gz"))
    assert "year" not in load_ogb_mag(ds)["paper"]


def test_no_download_at_root(tmp_path):
    with pytest.raises(FileNotFoundError, match="ogbn_mag"):
        load_ogb_mag(str(tmp_path))


@pytest.mark.parametrize("rel", [EDGE_W, FEAT, NODES])
def test_not_gzip(tmp_path, rel):
    write_ogb(str(tmp_path), tiny_graph())
    path = os.path.join(str(tmp_path), rel)
    with open(path, "w") as f:
        f.write("0,0\n")
    with pytest.raises(ValueError, match="not a readable gzip file") as e:
        load_ogb_mag(str(tmp_path))
    assert str(e.value).startswith(path + ": ")


def test_truncated_gzip(tmp_path):
    write_ogb(str(tmp_path), tiny_graph())
    path = os.path.join(str(tmp_path), EDGE_W)
    with open(path, "rb") as f:
        blob = f.read()
    with open(path, "wb") as f:
        f.write(blob[: len(blob) // 2])
    with pytest.raises(ValueError, match="not a readable gzip file"):
        load_ogb_mag(str(tmp_path))


def test_matches_ogbs_and_pygs_readers(tiny, tmp_path):
    """Where OGB (and pandas) are installed: OGB's own raw readers see the same graph."""
    pytest.importorskip("pandas")
    rgr = pytest.importorskip("ogb.io.read_graph_raw")
    g, ds = tiny
    ours = load_ogb_mag(ds)
    raw = os.path.join(ds, "raw")
    graph = rgr.read_csv_heterograph_raw(raw, additional_node_files=["node_year"],
                                         additional_edge_files=["edge_reltype"])[0]
    assert graph["num_nodes_dict"] == ours.num_nodes_dict
    for et, ei in graph["edge_index_dict"].items():
        assert np.array_equal(ei, arr(ours[et].edge_index))
    assert np.array_equal(graph["node_feat_dict"]["paper"], arr(ours["paper"].x))
    assert np.array_equal(graph["node_year"]["paper"][:, 0], arr(ours["paper"].year))
    labels = rgr.read_node_label_hetero(raw)
    assert list(labels) == ["paper"]
    assert np.array_equal(labels["paper"][:, 0], arr(ours["paper"].y))
    tr, va, te = rgr.read_nodesplitidx_split_hetero(os.path.join(ds, "split", "time"))
    for idx, attr in ((tr, "train_mask"), (va, "val_mask"), (te, "test_mask")):
        assert np.array_equal(np.flatnonzero(arr(ours["paper"][attr])), np.sort(idx["paper"]))


def test_matches_pygs_ogb_mag(tmp_path):
    """Where pandas is installed: PyG's OGB_MAG, given the same files (in the layout
    its download step leaves), builds the same HeteroData, in the same order."""
    pytest.importorskip("pandas")
    datasets = pytest.importorskip("torch_geometric.datasets")
    d = synthetic_mag(0.001, seed=11, add_reverse=False)
    ds = write_ogb(str(tmp_path), mag_as_graph(d))
    raw = os.path.join(str(tmp_path), "pyg", "mag", "raw")
    os.makedirs(raw)
    for f in ("node-feat", "node-label", "relations", "num-node-dict.csv.gz"):
        os.symlink(os.path.join(ds, "raw", f), os.path.join(raw, f))
    os.symlink(os.path.join(ds, "split"), os.path.join(raw, "split"))
    theirs = datasets.OGB_MAG(os.path.join(str(tmp_path), "pyg"))[0]
    ours = load_ogb_mag(ds)
    assert theirs.node_types == ours.node_types
    assert [tuple(et) for et in theirs.edge_types] == ours.edge_types
    for nt in theirs.node_types:
        assert sorted(theirs[nt].keys()) == sorted(ours[nt].keys())
        for k, v in theirs[nt].items():
            if isinstance(v, int):
                assert ours[nt][k] == v
            else:
                assert np.array_equal(v.numpy(), arr(ours[nt][k])), (nt, k)
    for et in theirs.edge_types:
        assert np.array_equal(theirs[et].edge_index.numpy(), arr(ours[tuple(et)].edge_index))
