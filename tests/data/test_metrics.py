"""rtx.metrics: checked against scikit-learn when it is installed, against hand-computed
references always (scikit-learn is optional: those tests skip without it)."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rtx
from rtx.metrics import accuracy, f1_score, hits_at_k, mrr, roc_auc_score

HAVE_SK = importlib.util.find_spec("sklearn") is not None
needs_sklearn = pytest.mark.skipif(not HAVE_SK, reason="needs scikit-learn")
HAVE_TORCH = importlib.util.find_spec("torch") is not None


# ------------------------------------------------------------ hand-computed references
def test_accuracy_by_hand():
    assert accuracy([0, 1, 2, 2], [0, 2, 2, 2]) == 0.75
    assert accuracy(rtx.tensor([1, 1]), np.array([1, 0])) == 0.5
    scores = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])    # argmax 1, 0, 1
    assert accuracy(np.array([1, 0, 0]), scores) == pytest.approx(2 / 3)
    # multi-label: a sample counts only when all its labels are right
    assert accuracy([[1, 0], [1, 1]], [[1, 0], [1, 0]]) == 0.5
    assert isinstance(accuracy([1], [1]), float)


def test_f1_by_hand():
    y, p = [0, 1, 2, 2], [0, 2, 2, 3]
    # class 0: F1 1; class 1: 0 (missed); class 2: tp 1 fp 1 fn 1 -> 0.5; class 3: 0 (fp)
    assert f1_score(y, p, "macro") == pytest.approx((1 + 0 + 0.5 + 0) / 4)
    # micro: TP 2, FP 2, FN 2 -> 4 / 8 (= accuracy for single-label)
    assert f1_score(y, p, "micro") == pytest.approx(0.5) == accuracy(y, p)
    assert f1_score(y, p, "macro", labels=[0, 2]) == pytest.approx(0.75)
    assert f1_score(y, p, "macro", labels=[0, 7]) == pytest.approx(0.5)   # absent: 0
    assert f1_score(y, p, "macro", labels=[7], zero_division=1.0) == 1.0
    # multi-label (HGB's IMDB): per column
    Y = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0]])
    P = np.array([[1, 0, 0], [0, 0, 0], [1, 1, 0]])
    # col 0: 1; col 1: tp 1 fn 1 -> 2/3; col 2: nothing -> zero_division 0
    assert f1_score(Y, P, "macro") == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert f1_score(Y, P, "micro") == pytest.approx(2 * 3 / (2 * 3 + 0 + 1))
    assert f1_score(Y, P, "macro", labels=[0, 1]) == pytest.approx((1 + 2 / 3) / 2)
    assert f1_score(Y.astype(bool), P.astype(np.float32), "macro") == f1_score(Y, P, "macro")


def test_roc_auc_by_hand():
    # pairs (pos, neg): (0.9, 0.1) win, (0.9, 0.5) win, (0.4, 0.1) win, (0.4, 0.5) lose
    assert roc_auc_score([1, 0, 1, 0], [0.9, 0.1, 0.4, 0.5]) == pytest.approx(0.75)
    assert roc_auc_score([1, 0], [0.3, 0.3]) == 0.5                     # a tie counts 1/2
    assert roc_auc_score(np.array([True, False, False]), [1, 0, 1]) == pytest.approx(0.75)
    Y = np.array([[1, 0], [0, 1], [1, 1], [0, 0]])
    S = np.array([[0.9, 0.2], [0.1, 0.8], [0.5, 0.1], [0.4, 0.3]])
    # col 0: pos {0.9, 0.5} neg {0.1, 0.4}: 4/4; col 1: pos {0.8, 0.1} neg {0.2, 0.3}: 2/4
    assert roc_auc_score(Y, S) == pytest.approx(0.75)
    assert roc_auc_score(Y, S, average="micro") == pytest.approx(
        roc_auc_score(Y.reshape(-1), S.reshape(-1)))


def test_mrr_and_hits_by_hand():
    pos = np.array([0.9, 0.5, 0.2])
    neg = np.array([[0.1, 0.2, 0.3],     # rank 1
                    [0.6, 0.5, 0.1],     # one higher, one tie: 1 + (1 + 2) / 2 = 2.5
                    [0.7, 0.8, 0.9]])    # rank 4
    assert mrr(pos, neg) == pytest.approx((1 + 1 / 2.5 + 1 / 4) / 3)
    assert hits_at_k(pos, neg, 1) == pytest.approx(1 / 3)
    assert hits_at_k(pos, neg, 3) == pytest.approx(2 / 3)
    assert hits_at_k(pos, neg, 4) == 1.0
    # shared negatives (OGB's _eval_hits): above the k-th highest negative, strictly
    shared = np.array([0.1, 0.5, 0.6, 0.3])
    assert hits_at_k(pos, shared, 2) == pytest.approx(1 / 3)    # k-th = 0.5: only 0.9 above
    assert hits_at_k(pos, shared, 3) == pytest.approx(2 / 3)    # k-th = 0.3: 0.9, 0.5
    assert hits_at_k(pos, shared, 4) == 1.0                     # k-th = 0.1: all three
    assert hits_at_k(pos, shared, 5) == 1.0                     # fewer than k negatives
    # shared negatives in mrr: every positive ranked against all of them
    assert mrr(pos, shared) == pytest.approx(mrr(pos, np.tile(shared, (3, 1))))


def test_inputs_of_every_kind():
    y, p = [0, 1, 1, 0], [0, 1, 0, 0]
    for conv in (list, np.array, rtx.tensor):
        assert accuracy(conv(y), conv(p)) == 0.75
        assert f1_score(conv(y), conv(p)) == pytest.approx(f1_score(y, p))
    if HAVE_TORCH:
        import torch
        assert accuracy(torch.tensor(y), torch.tensor(p)) == 0.75
        assert roc_auc_score(torch.tensor([1, 0]), torch.tensor([0.7, 0.2],
                                                                requires_grad=True)) == 1.0
    s = rtx.tensor(np.array([0.3, 0.2], dtype=np.float32), requires_grad=True)
    assert mrr(s, rtx.tensor(np.array([[0.1], [0.4]], dtype=np.float32))) == 0.75


@pytest.mark.parametrize("call,match", [
    (lambda: accuracy([0, 1], [0]), "shape"),
    (lambda: accuracy([], []), "empty"),
    (lambda: f1_score([], [], "micro"), "empty"),
    (lambda: f1_score([0, 1], [0, 1], "weighted"), "average"),
    (lambda: f1_score([[1, 0]], [[0.4, 0.6]]), "threshold"),
    (lambda: f1_score([0.5, 1.0], [0, 1]), "integers"),
    (lambda: f1_score([[1, 0]], [[1, 0]], labels=[2]), "column"),
    (lambda: f1_score([0, 1], [0, 1], labels=[]), "empty"),
    (lambda: accuracy(np.zeros((2, 2, 2)), np.zeros((2, 2, 2))), "1-D"),
    (lambda: roc_auc_score([1, 1, 1], [0.1, 0.2, 0.3]), "one class"),
    (lambda: roc_auc_score([[1, 0], [1, 1]], [[0.1, 0.2], [0.3, 0.4]]), "column 0"),
    (lambda: roc_auc_score([0, 2], [0.1, 0.2]), "0 and 1"),
    (lambda: roc_auc_score([0, 1], [0.1, np.nan]), "NaN"),
    (lambda: roc_auc_score([0, 1], [0.1]), "shape"),
    (lambda: roc_auc_score([], []), "empty"),
    (lambda: mrr([0.1, 0.2], [[0.3], [0.1], [0.2]]), "one row per positive"),
    (lambda: mrr([[0.1]], [[0.2]]), "1-D"),
    (lambda: mrr([0.1], np.zeros((1, 1, 1))), "shape"),
    (lambda: mrr([0.1], [np.inf]), "infinite"),
    (lambda: hits_at_k([0.1], [0.2], 0), "k must be"),
    (lambda: hits_at_k([], [0.2], 1), "empty"),
])
def test_clear_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_non_numeric_is_a_type_error():
    with pytest.raises(TypeError, match="numeric"):
        accuracy(["a", "b"], ["a", "b"])


# ------------------------------------------------------------------- scikit-learn
labels_1d = st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.lists(st.integers(-1, 5), min_size=n, max_size=n),
    st.lists(st.integers(0, 6), min_size=n, max_size=n)))


@needs_sklearn
@settings(max_examples=80, deadline=None)
@given(labels_1d, st.sampled_from(["macro", "micro"]),
       st.none() | st.lists(st.integers(-1, 7), min_size=1, max_size=4, unique=True))
def test_f1_and_accuracy_match_sklearn(yp, average, labels):
    from sklearn import metrics as M
    y, p = np.array(yp[0]), np.array(yp[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = M.f1_score(y, p, average=average, labels=labels)
    assert f1_score(y, p, average, labels=labels) == pytest.approx(want, abs=1e-12)
    assert accuracy(y, p) == M.accuracy_score(y, p)


@needs_sklearn
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(2, 5), st.integers(0, 2**31),
       st.sampled_from(["macro", "micro"]))
def test_multilabel_f1_matches_sklearn(n, c, seed, average):
    from sklearn import metrics as M
    rng = np.random.default_rng(seed)
    Y, P = rng.integers(0, 2, (n, c)), rng.integers(0, 2, (n, c))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = M.f1_score(Y, P, average=average)
    assert f1_score(Y, P, average) == pytest.approx(want, abs=1e-12)
    assert accuracy(Y, P) == M.accuracy_score(Y, P)


@needs_sklearn
@settings(max_examples=80, deadline=None)
@given(st.integers(2, 60), st.integers(0, 2**31), st.booleans())
def test_roc_auc_matches_sklearn(n, seed, ties):
    from sklearn import metrics as M
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    y[0], y[1] = 0, 1
    s = rng.integers(0, 4, n) * 0.25 if ties else rng.standard_normal(n)
    assert roc_auc_score(y, s) == pytest.approx(M.roc_auc_score(y, s), abs=1e-12)
    Y = rng.integers(0, 2, (n, 3))
    Y[0], Y[1] = 0, 1
    S = rng.random((n, 3))
    for average in ("macro", "micro"):
        assert roc_auc_score(Y, S, average) == pytest.approx(
            M.roc_auc_score(Y, S, average=average), abs=1e-12)


def ogb_mrr_reference(pos, neg):
    """OGB's _eval_mrr, numpy branch (ogb/linkproppred/evaluate.py)."""
    pos = pos.reshape(-1, 1)
    optimistic = (neg > pos).sum(axis=1)
    pessimistic = (neg >= pos).sum(axis=1)
    ranks = 0.5 * (optimistic + pessimistic) + 1
    return ranks


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 30), st.integers(1, 12), st.integers(0, 2**31), st.integers(1, 15))
def test_ranking_metrics_match_ogb_reference(n, k_neg, seed, k):
    rng = np.random.default_rng(seed)
    pos = rng.integers(0, 5, n) * 0.5                   # coarse scores: plenty of ties
    neg = rng.integers(0, 5, (n, k_neg)) * 0.5
    ranks = ogb_mrr_reference(pos, neg)
    assert mrr(pos, neg) == pytest.approx(float(np.mean(1.0 / ranks)), abs=1e-12)
    assert hits_at_k(pos, neg, k) == pytest.approx(float(np.mean(ranks <= k)), abs=1e-12)
    shared = neg[0]
    want = 1.0 if shared.size < k else float(np.mean(pos > np.sort(shared)[-k]))
    assert hits_at_k(pos, shared, k) == pytest.approx(want, abs=1e-12)
    assert mrr(pos, shared) == pytest.approx(
        float(np.mean(1.0 / ogb_mrr_reference(pos, np.tile(shared, (n, 1))))), abs=1e-12)


@needs_sklearn
def test_roc_auc_is_ogb_rocauc():
    # OGB's _eval_rocauc: positives against negatives through sklearn's roc_auc_score
    from sklearn import metrics as M
    rng = np.random.default_rng(0)
    pos, neg = rng.standard_normal(50) + 0.5, rng.standard_normal(70)
    y = np.r_[np.ones(50), np.zeros(70)]
    s = np.r_[pos, neg]
    assert roc_auc_score(y, s) == pytest.approx(M.roc_auc_score(y, s), abs=1e-12)


def test_metrics_take_tensors_of_every_backend(backend):
    y = rtx.tensor(np.array([0, 1, 2, 1]))
    p = rtx.tensor(np.array([[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8], [0.6, 0.3, 0.1]]))
    assert accuracy(y, p) == 0.75
    assert f1_score(y, p, "micro") == 0.75
    assert roc_auc_score(rtx.tensor(np.array([1, 0, 1])), rtx.tensor(np.array([0.8, 0.3, 0.2]))
                         ) == 0.5
    assert mrr(rtx.tensor(np.array([0.5])), rtx.tensor(np.array([[0.6, 0.1]]))) == 0.5
