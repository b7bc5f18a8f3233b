"""``typed_edges``: several relations into one target type as one edge list
(the grouped attention of ``HeteroConv``'s ``path="grouped"``)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from rtx import EdgeIndex
from rtx.backend.index_plan import typed_edges


def _rel(rng, n_src, n_dst, e, dtype=np.int64):
    return EdgeIndex(np.stack([rng.integers(0, n_src, e), rng.integers(0, n_dst, e)])
                     .astype(dtype), n_src, n_dst)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_layout_matches_a_brute_force_stack(dtype):
    rng = np.random.default_rng(0)
    parts = [_rel(rng, 7, 5, 11, dtype), _rel(rng, 3, 5, 0, dtype), _rel(rng, 9, 5, 4, dtype)]
    t = typed_edges(parts)
    assert t.offsets == (0, 7, 10)
    assert (t.edges.num_src, t.edges.num_dst, t.segments.num_rows) == (19, 5, 15)
    rows = []     # (segment, stacked source, target) in relation order, then sorted
    for r, (p, off) in enumerate(zip(parts, t.offsets, strict=True)):
        for s, d in zip(p.src.indices.tolist(), p.dst.indices.tolist(), strict=True):
            rows.append((d * 3 + r, s + off, d))
    rows.sort(key=lambda row: row[0])      # stable: each group keeps relation order
    np.testing.assert_array_equal(t.segments.indices, [row[0] for row in rows])
    np.testing.assert_array_equal(t.edges.src.indices, [row[1] for row in rows])
    np.testing.assert_array_equal(t.edges.dst.indices, [row[2] for row in rows])
    assert t.segments.is_ordered() and t.edges.dst.is_ordered()
    ptr, perm = t.segments.csr()
    np.testing.assert_array_equal(perm, np.arange(len(rows)))
    np.testing.assert_array_equal(np.diff(ptr), np.bincount([row[0] for row in rows],
                                                             minlength=15))
    assert t.edges.src.indices.dtype == np.int32    # the stacked ids fit int32


def test_cached_while_the_parts_live_and_rebuilt_for_others():
    rng = np.random.default_rng(1)
    a, b, c = _rel(rng, 4, 6, 10), _rel(rng, 5, 6, 8), _rel(rng, 5, 6, 8)
    t = typed_edges([a, b])
    assert typed_edges([a, b]) is t
    u = typed_edges([a, c])
    assert u is not t and typed_edges([a, b]) is t
    assert sorted(u.edges.src.indices.tolist()) == sorted(
        a.src.indices.tolist() + (c.src.indices + 4).tolist())
    del b, t
    gc.collect()
    d = _rel(rng, 5, 6, 3)        # may reuse b's id: the dead reference tells them apart
    v = typed_edges([a, d])
    assert sorted(v.edges.src.indices.tolist()) == sorted(
        a.src.indices.tolist() + (d.src.indices + 4).tolist())


def test_bad_parts_raise_before_anything_is_built():
    rng = np.random.default_rng(2)
    with pytest.raises(ValueError, match="no relations"):
        typed_edges([])
    with pytest.raises(ValueError, match="targets"):
        typed_edges([_rel(rng, 3, 4, 2), _rel(rng, 3, 5, 2)])
    with pytest.raises(TypeError, match="EdgeIndex"):
        typed_edges([_rel(rng, 3, 4, 2), np.zeros((2, 2), np.int64)])
