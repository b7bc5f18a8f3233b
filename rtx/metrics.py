"""``rtx.metrics``: evaluation metrics for node classification and link prediction.

Classification metrics take ``(y_true, y_pred)`` in scikit-learn's order and
meaning; the link-prediction ranking metrics take the scores of positive edges
and of their negatives, with OGB's conventions.  Inputs are rtx tensors, numpy
arrays, torch tensors or sequences; results are Python floats.

* ``accuracy(y_true, y_pred)``: the fraction of correct predictions (subset
  accuracy for multi-label indicator matrices, as scikit-learn).
* ``f1_score(y_true, y_pred, average="macro" | "micro")``: HGB's macro-/micro-F1,
  multi-class or multi-label.
* ``roc_auc_score(y_true, y_score)``: binary ROC-AUC (ties count one half), or
  averaged over the columns of a multi-label indicator matrix.
* ``mrr(pos_score, neg_score)`` / ``hits_at_k(pos_score, neg_score, k)``: OGB's
  link-prediction evaluator.

For ``accuracy`` and ``f1_score`` a 1-D ``y_true`` with a 2-D ``y_pred`` of class
scores ``[N, C]`` means ``y_pred.argmax(-1)``.  Shape mismatches, empty inputs,
non-finite scores and a single-class ROC-AUC are ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .tensor import Tensor

__all__ = ["accuracy", "f1_score", "hits_at_k", "mrr", "roc_auc_score"]


def _np(v: Any, name: str) -> np.ndarray:
    if isinstance(v, Tensor):
        a = v.numpy()
    elif isinstance(v, np.ndarray):
        a = v
    elif hasattr(v, "detach") and hasattr(v, "cpu"):  # a torch tensor
        a = np.asarray(v.detach().cpu().numpy())
    else:
        a = np.asarray(v)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be numeric, got {a.dtype}")
    if a.size == 0:
        raise ValueError(f"{name} is empty (a metric needs at least one sample)")
    return a


def _finite(a: np.ndarray, name: str) -> None:
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise ValueError(f"{name} holds NaN or infinite values")


def _labels(y_true: Any, y_pred: Any, who: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(t, p, multilabel)``: integer class vectors, or 0/1 indicator matrices."""
    t = _np(y_true, "y_true")
    p = _np(y_pred, "y_pred")
    if t.ndim == 1 and p.ndim == 2:      # class scores: the predicted class is the argmax
        _finite(p, "y_pred")
        p = p.argmax(axis=-1)
    if t.shape != p.shape:
        raise ValueError(f"{who}: y_true has shape {t.shape} but y_pred has {p.shape}")
    if t.ndim == 1:
        for a, name in ((t, "y_true"), (p, "y_pred")):
            if a.dtype.kind == "f" and not (np.isfinite(a).all() and (a == np.round(a)).all()):
                raise ValueError(f"{who}: {name} must hold class labels (integers)")
        return t.astype(np.int64), p.astype(np.int64), False
    if t.ndim != 2:
        raise ValueError(f"{who}: labels must be 1-D classes or 2-D multi-label indicators, "
                         f"got {t.ndim}-D")
    for a, name in ((t, "y_true"), (p, "y_pred")):
        if not np.isin(a, (0, 1)).all():
            raise ValueError(f"{who}: a multi-label {name} must hold only 0 and 1 "
                             "(threshold the scores first, e.g. logits > 0)")
    return t.astype(bool), p.astype(bool), True


def accuracy(y_true: Any, y_pred: Any) -> float:
    """The fraction of samples predicted right (scikit-learn's ``accuracy_score``;
    for multi-label indicator matrices a sample counts only when every label is
    right)."""
    t, p, multi = _labels(y_true, y_pred, "accuracy")
    ok = (t == p).all(axis=1) if multi else t == p
    return float(ok.mean())


def f1_score(y_true: Any, y_pred: Any, average: str = "macro",
             labels: Sequence[int] | None = None, zero_division: float = 0.0) -> float:
    """F1 score, scikit-learn's ``f1_score`` for ``average="macro"`` or ``"micro"``.

    * multi-class (1-D labels): per class ``F1 = 2 TP / (2 TP + FP + FN)`` over the
      classes in ``labels`` (default: every class found in ``y_true`` or
      ``y_pred``); ``"macro"`` averages them, ``"micro"`` pools the counts (equal
      to the accuracy when every class is counted).
    * multi-label (2-D 0/1 indicators, HGB's IMDB): one F1 per column.
    * A class with no true and no predicted sample scores ``zero_division``.

    The default ``average`` is ``"macro"`` (scikit-learn's is ``"binary"``).
    """
    if average not in ("macro", "micro"):
        raise ValueError(f"f1_score: average must be 'macro' or 'micro', got {average!r}")
    t, p, multi = _labels(y_true, y_pred, "f1_score")
    if multi:
        if labels is not None:
            cols = np.asarray(labels, dtype=np.int64)
            if cols.size == 0 or cols.min() < 0 or cols.max() >= t.shape[1]:
                raise ValueError(f"f1_score: labels must be column indices in [0, "
                                 f"{t.shape[1]})")
            t, p = t[:, cols], p[:, cols]
        tp = (t & p).sum(axis=0)
        fp = (~t & p).sum(axis=0)
        fn = (t & ~p).sum(axis=0)
    else:
        classes = (np.union1d(t, p) if labels is None
                   else np.asarray(labels, dtype=np.int64).reshape(-1))
        if classes.size == 0:
            raise ValueError("f1_score: labels is empty")
        # counts per class through a searchsorted map (labels may be any integers)
        order = np.argsort(classes, kind="stable")
        srt = classes[order]

        def counts(v: np.ndarray, mask: np.ndarray) -> np.ndarray:
            v = v[mask]
            pos = np.searchsorted(srt, v)
            ok = (pos < srt.size) & (srt[np.minimum(pos, srt.size - 1)] == v)
            out = np.zeros(srt.size, dtype=np.int64)
            np.add.at(out, pos[ok], 1)
            return out[np.argsort(order)]

        tp = counts(t, t == p)
        fp = counts(p, t != p)
        fn = counts(t, t != p)
    if average == "micro":
        den = 2 * tp.sum() + fp.sum() + fn.sum()
        return float(2 * tp.sum() / den) if den else float(zero_division)
    den = 2 * tp + fp + fn
    f1 = np.where(den > 0, 2 * tp / np.maximum(den, 1), float(zero_division))
    return float(f1.mean())


def _binary_auc(t: np.ndarray, s: np.ndarray, where: str) -> float:
    pos = t.sum()
    neg = t.size - pos
    if pos == 0 or neg == 0:
        raise ValueError(f"roc_auc_score: only one class present in y_true{where}; ROC AUC "
                         "is not defined then")
    order = np.argsort(s, kind="mergesort")
    ss = s[order]
    # average ranks (1-based) over runs of tied scores
    start = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]])
    end = np.r_[start[1:], ss.size]
    avg = (start + end + 1) / 2.0
    ranks = np.empty(s.size, dtype=np.float64)
    ranks[order] = np.repeat(avg, end - start)
    u = ranks[t].sum() - pos * (pos + 1) / 2.0
    return float(u / (pos * neg))


def roc_auc_score(y_true: Any, y_score: Any, average: str = "macro") -> float:
    """Area under the ROC curve (scikit-learn's ``roc_auc_score``).

    ``y_true``: 0/1 (or bool) labels ``[N]``, or a multi-label indicator matrix
    ``[N, C]`` with scores of the same shape (``average="macro"``: the mean of the
    per-column AUCs; ``"micro"``: one AUC over all entries).  Equals the
    probability that a random positive scores above a random negative, ties
    counting one half.  A single class in ``y_true`` (or in a column) is a
    ``ValueError`` (scikit-learn warns and returns NaN).
    """
    if average not in ("macro", "micro"):
        raise ValueError(f"roc_auc_score: average must be 'macro' or 'micro', got {average!r}")
    t = _np(y_true, "y_true")
    s = _np(y_score, "y_score")
    if t.shape != s.shape:
        raise ValueError(f"roc_auc_score: y_true has shape {t.shape} but y_score has {s.shape}")
    if t.ndim not in (1, 2):
        raise ValueError(f"roc_auc_score: y_true must be 1-D (binary) or 2-D (multi-label), "
                         f"got {t.ndim}-D")
    if not np.isin(t, (0, 1)).all():
        raise ValueError("roc_auc_score: y_true must hold only 0 and 1 (binary labels)")
    _finite(s, "y_score")
    t = t.astype(bool)
    s = s.astype(np.float64)
    if t.ndim == 1 or average == "micro":
        return _binary_auc(t.reshape(-1), s.reshape(-1), "")
    return float(np.mean([_binary_auc(t[:, j], s[:, j], f" (column {j})")
                          for j in range(t.shape[1])]))


def _ranks(pos_score: Any, neg_score: Any, who: str) -> tuple[np.ndarray, np.ndarray]:
    """OGB's rank of each positive among its negatives: ``1 + (#greater + #greater
    or equal) / 2`` (``[N]``), and the negatives as given."""
    pos = _np(pos_score, "pos_score")
    neg = _np(neg_score, "neg_score")
    if pos.ndim != 1:
        raise ValueError(f"{who}: pos_score must be 1-D [N], got shape {pos.shape}")
    _finite(pos, "pos_score")
    _finite(neg, "neg_score")
    pos = pos.astype(np.float64)
    if neg.ndim == 2:
        if neg.shape[0] != pos.shape[0]:
            raise ValueError(f"{who}: neg_score [N, K] must have one row per positive: "
                             f"{neg.shape[0]} rows for {pos.shape[0]} positives")
        negf = neg.astype(np.float64)
        gt = (negf > pos[:, None]).sum(axis=1)
        ge = (negf >= pos[:, None]).sum(axis=1)
    elif neg.ndim == 1:  # negatives shared by every positive
        srt = np.sort(neg.astype(np.float64))
        gt = srt.size - np.searchsorted(srt, pos, side="right")
        ge = srt.size - np.searchsorted(srt, pos, side="left")
    else:
        raise ValueError(f"{who}: neg_score must be [N, K] (per positive) or [K] (shared), "
                         f"got shape {neg.shape}")
    return 0.5 * (gt + ge) + 1.0, neg


def mrr(pos_score: Any, neg_score: Any) -> float:
    """Mean reciprocal rank of each positive score among its negatives (OGB's
    ``_eval_mrr``, the mean of ``mrr_list``).

    ``pos_score``: ``[N]``; ``neg_score``: ``[N, K]`` (row ``i`` holds the negatives
    of positive ``i``, OGB's layout) or ``[K]`` (the same negatives for every
    positive).  Rank = 1 + the number of negatives scoring higher, ties counting
    one half."""
    ranks, _ = _ranks(pos_score, neg_score, "mrr")
    return float(np.mean(1.0 / ranks))


def hits_at_k(pos_score: Any, neg_score: Any, k: int) -> float:
    """Hits@K: the fraction of positives ranked in the top ``k`` (OGB).

    * ``neg_score`` ``[K']`` shared by all positives (OGB's ``_eval_hits``, e.g.
      ogbl-collab): a positive hits when it scores strictly above the ``k``-th
      highest negative; with fewer than ``k`` negatives every positive hits.
    * ``neg_score`` ``[N, K']`` per positive (OGB's ``hits@k_list``): the positive's
      rank (ties counting one half, as ``mrr``) is at most ``k``."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"hits_at_k: k must be an int >= 1, got {k!r}")
    ranks, neg = _ranks(pos_score, neg_score, "hits_at_k")
    if neg.ndim == 1:
        if neg.size < k:
            return 1.0
        kth = np.sort(neg.astype(np.float64))[-k]
        pos = _np(pos_score, "pos_score").astype(np.float64)
        return float(np.mean(pos > kth))
    return float(np.mean(ranks <= k))
