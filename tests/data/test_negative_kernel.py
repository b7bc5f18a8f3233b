"""The native negative sampler (rtx/_negative.pxi) and rtx.utils.negative_sampling
against a brute-force reference: every non-edge enumerated."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rtx
from rtx._kernels import negative_codes, set_negative_bitmap_max
from rtx.utils import negative_sampling


def brute_force_non_edges(ei: np.ndarray, n_src: int, n_dst: int, bipartite: bool) -> set:
    edges = set(zip(ei[0].tolist(), ei[1].tolist(), strict=True))
    return {(a, b) for a in range(n_src) for b in range(n_dst)
            if (a, b) not in edges and (bipartite or a != b)}


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 8), st.integers(0, 8), st.booleans(),
       st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=70),
       st.integers(0, 80), st.integers(0, 2**31))
def test_negative_sampling_against_brute_force(ns, nd, bipartite, raw, k, seed):
    if not bipartite:
        nd = ns
    pairs = [(a % ns, b % nd) for a, b in raw] if ns and nd else []
    ei = np.array(pairs, dtype=np.int64).reshape(-1, 2).T
    size = (ns, nd) if bipartite else ns
    out = negative_sampling(ei, size, k, seed=seed).numpy()
    got = list(zip(out[0].tolist(), out[1].tolist(), strict=True))
    ref = brute_force_non_edges(ei, ns, nd, bipartite)
    assert len(set(got)) == len(got)                 # no duplicates
    assert set(got) <= ref                           # never an edge (nor a self-loop)
    assert len(got) == min(k, len(ref))              # fewer only when fewer exist
    if k >= len(ref):
        assert set(got) == ref
    again = negative_sampling(ei, size, k, seed=seed).numpy()
    np.testing.assert_array_equal(out, again)        # seeded


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 300), st.data())
def test_kernel_against_reference(population, data):
    existing = np.array(sorted(data.draw(st.sets(st.integers(0, max(population - 1, 0)),
                                                 max_size=population))), dtype=np.int64)
    existing = existing[existing < population]
    avail = population - existing.size
    k = data.draw(st.integers(0, avail))
    seed = data.draw(st.integers(0, 2**64 - 1))
    got = negative_codes(existing, population, k, seed)
    assert got.dtype == np.int64 and got.shape == (k,)
    assert len(set(got.tolist())) == k
    assert not set(got.tolist()) & set(existing.tolist())
    assert ((got >= 0) & (got < population)).all()
    np.testing.assert_array_equal(got, negative_codes(existing, population, k, seed))


@pytest.mark.parametrize("k", [3, 9])   # 2k <= 10 available: rejection; 2k > 10: selection
def test_kernel_is_uniform_in_both_methods(k):
    existing = np.array([0, 4, 5, 11], dtype=np.int64)   # 14 codes, 10 available
    counts = np.zeros(14)
    first = np.zeros(14)
    runs = 3000
    for s in range(runs):
        c = negative_codes(existing, 14, k, s)
        counts[c] += 1
        first[c[0]] += 1
    assert (counts[existing] == 0).all()
    free = np.setdiff1d(np.arange(14), existing)
    expect = runs * k / 10
    assert (np.abs(counts[free] - expect) < 0.12 * expect).all()
    # the order is random too (the selection pass is shuffled): each code comes first
    assert (np.abs(first[free] - runs / 10) < 0.3 * runs / 10).all()


@pytest.mark.parametrize("args,match", [
    ((np.array([3, 1], np.int64), 10, 1), "out of order"),
    ((np.array([1, 1], np.int64), 10, 1), "out of order"),
    ((np.array([10], np.int64), 10, 1), "outside"),
    ((np.array([-1], np.int64), 10, 1), "outside"),
    ((np.array([1, 2], np.int64), 3, 2), "cannot draw"),
    ((np.zeros(0, np.int64), -1, 0), "cannot draw"),
    ((np.zeros(0, np.int64), 4, -1), "cannot draw"),
])
def test_kernel_checks_before_sampling(args, match):
    with pytest.raises(ValueError, match=match):
        negative_codes(*args, 0)


def test_kernel_huge_population_and_threads():
    # 10^6 x 10^6 bipartite pairs: no mask, no enumeration
    rng = np.random.default_rng(0)
    e = rng.integers(0, 10**6, (2, 1000))
    t0 = time.perf_counter()
    out = negative_sampling(e, (10**6, 10**6), 200_000, seed=1).numpy()
    assert time.perf_counter() - t0 < 20
    codes = out[0] * 10**6 + out[1]
    assert np.unique(codes).size == 200_000
    assert not np.isin(codes, e[0] * 10**6 + e[1]).any()
    # calls in threads (the kernel holds no GIL) give what they give alone
    existing = np.unique(rng.integers(0, 10**7, 5000))
    want = [negative_codes(existing, 10**7, 50_000, s) for s in range(4)]
    got: list = [None] * 4

    def run(i: int) -> None:
        got[i] = negative_codes(existing, 10**7, 50_000, i)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for a, b in zip(want, got, strict=True):
        np.testing.assert_array_equal(a, b)


def test_public_signature_kept():
    e = rtx.tensor([[0, 1], [1, 2]])
    out = negative_sampling(e, 3, 4, seed=0)
    assert isinstance(out, rtx.Tensor) and tuple(out.shape) == (2, 4)
    out = negative_sampling(edge_index=e, num_nodes=(2, 3), num_neg_samples=4, seed=0)
    assert tuple(out.shape) == (2, 4)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5000), st.data())
def test_bitmap_and_hash_paths_accept_the_same_draws(population, data):
    existing = np.array(sorted(data.draw(st.sets(st.integers(0, population - 1),
                                                 max_size=min(population, 200)))), np.int64)
    k = data.draw(st.integers(0, (population - existing.size) // 2))   # the rejection method
    seed = data.draw(st.integers(0, 2**64 - 1))
    a = negative_codes(existing, population, k, seed)     # bitmap (small population)
    old = set_negative_bitmap_max(0)
    try:
        b = negative_codes(existing, population, k, seed)  # binary search + hash set
    finally:
        set_negative_bitmap_max(old)
    np.testing.assert_array_equal(a, b)


def test_sorted_unique_is_numpys_unique():
    from rtx.utils._negative_sampling import sorted_unique
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 50, 5000):
        a = rng.integers(0, max(n // 3, 1), n)
        np.testing.assert_array_equal(sorted_unique(a), np.unique(a))
