"""``RandomNodeSplit``: PyG's ``torch_geometric.transforms.RandomNodeSplit`` on ``HeteroData``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..creation import Generator, _rng
from .base import BaseTransform, host, tensor

__all__ = ["RandomNodeSplit"]

_SPLITS = ("train_rest", "test_rest", "random")


def _size_arg(v: Any, what: str) -> int | float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"RandomNodeSplit: {what} must be an int or a float, got {v!r}")
    if isinstance(v, (float, np.floating)):
        if not 0.0 <= float(v) <= 1.0:
            raise ValueError(f"RandomNodeSplit: {what} as a fraction must lie in [0, 1], "
                             f"got {v}")
        return float(v)
    if v < 0:
        raise ValueError(f"RandomNodeSplit: {what} must be >= 0, got {v}")
    return int(v)


class RandomNodeSplit(BaseTransform):
    """Random ``train_mask`` / ``val_mask`` / ``test_mask`` for every node type that
    has the attribute ``key`` (every node type when ``key`` is ``None``), as PyG.

    ``split``:
        * ``"train_rest"``: ``num_val`` and ``num_test`` nodes at random, the rest
          for training (labels not needed);
        * ``"test_rest"``: ``num_train_per_class`` nodes of each class (classes
          ``0 .. y.max()``; fewer when a class is smaller) for training, then
          ``num_val`` of the rest for validation and everything else for testing;
        * ``"random"``: as ``"test_rest"`` but ``num_test`` of the rest for testing.

    ``num_val`` / ``num_test``: a count, or a float fraction of the node type's
    nodes (``round(N * fraction)``, as PyG).  With ``num_splits > 1`` the masks
    have shape ``[N, num_splits]`` (independent splits).  Asking for more nodes
    than there are is a ``ValueError`` (PyG silently returns shorter splits).

    Randomness: ``seed=`` (each call gives the same masks) or ``generator=`` (an
    ``rtx.Generator``, advanced by each call), else rtx's default generator
    (``rtx.manual_seed``).
    """

    def __init__(self, split: str = "train_rest", num_splits: int = 1,
                 num_train_per_class: int = 20, num_val: int | float = 500,
                 num_test: int | float = 1000, key: str | None = "y", *,
                 seed: int | None = None, generator: Generator | None = None) -> None:
        if split not in _SPLITS:
            raise ValueError(f"RandomNodeSplit: split must be one of {_SPLITS}, got {split!r}")
        if isinstance(num_splits, bool) or not isinstance(num_splits, (int, np.integer)) \
                or num_splits < 1:
            raise ValueError(f"RandomNodeSplit: num_splits must be an int >= 1, got "
                             f"{num_splits!r}")
        if isinstance(num_train_per_class, bool) or not isinstance(
                num_train_per_class, (int, np.integer)) or num_train_per_class < 0:
            raise ValueError(f"RandomNodeSplit: num_train_per_class must be an int >= 0, got "
                             f"{num_train_per_class!r}")
        if split != "train_rest" and key is None:
            raise ValueError(f"RandomNodeSplit: split={split!r} needs the labels (key)")
        if seed is not None and generator is not None:
            raise ValueError("RandomNodeSplit: pass seed= or generator=, not both")
        _rng(seed, generator)  # type-checks the generator now
        self.split = split
        self.num_splits = int(num_splits)
        self.num_train_per_class = int(num_train_per_class)
        self.num_val = _size_arg(num_val, "num_val")
        self.num_test = _size_arg(num_test, "num_test")
        self.key = key
        self.seed = seed
        self.generator = generator

    def forward(self, data: Any) -> Any:
        rng = _rng(self.seed, self.generator)
        plans = []
        for nt, store in data.node_items():       # every check before anything is set
            if self.key is not None and self.key not in store:
                continue
            n = store.num_nodes
            if n is None:
                raise ValueError(f"RandomNodeSplit: node type {nt!r} has no num_nodes")
            y = None
            if self.split != "train_rest":
                y = host(store[self.key])
                if y.dtype.kind not in "iu" or y.ndim != 1 or y.shape[0] != n:
                    raise ValueError(f"RandomNodeSplit: split={self.split!r} needs integer "
                                     f"class labels {self.key!r} of shape [{n}] on {nt!r}, "
                                     f"got {y.dtype} {y.shape}")
            plans.append((store, n, y, self._counts(nt, n, y)))
        for store, n, y, (nv, nte) in plans:
            masks = [self._split(rng, n, y, nv, nte) for _ in range(self.num_splits)]
            for i, name in enumerate(("train_mask", "val_mask", "test_mask")):
                m = np.stack([s[i] for s in masks], axis=-1)
                store[name] = tensor(m[:, 0] if self.num_splits == 1 else m)
        return data

    def _counts(self, nt: str, n: int, y: np.ndarray | None) -> tuple[int, int]:
        nv = round(n * self.num_val) if isinstance(self.num_val, float) else self.num_val
        nte = round(n * self.num_test) if isinstance(self.num_test, float) else self.num_test
        if self.split == "train_rest":
            if nv + nte > n:
                raise ValueError(f"RandomNodeSplit: num_val + num_test = {nv + nte} exceeds "
                                 f"the {n} nodes of {nt!r}")
            return nv, nte
        assert y is not None
        n_train = 0
        if y.size and y.max() >= 0:
            counts = np.bincount(y[y >= 0])
            n_train = int(np.minimum(counts, self.num_train_per_class).sum())
        rest = n - n_train
        need = nv if self.split == "test_rest" else nv + nte
        if need > rest:
            raise ValueError(f"RandomNodeSplit: {need} validation/test nodes requested but "
                             f"only {rest} of the {n} nodes of {nt!r} are left after the "
                             "training nodes")
        return nv, nte

    def _split(self, rng: np.random.Generator, n: int, y: np.ndarray | None, nv: int,
               nte: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        train = np.zeros(n, dtype=bool)
        val = np.zeros(n, dtype=bool)
        test = np.zeros(n, dtype=bool)
        if self.split == "train_rest":
            perm = rng.permutation(n)
            val[perm[:nv]] = True
            test[perm[nv:nv + nte]] = True
            train[perm[nv + nte:]] = True
            return train, val, test
        assert y is not None
        num_classes = int(y.max()) + 1 if y.size else 0
        for c in range(num_classes):
            idx = np.flatnonzero(y == c)
            idx = idx[rng.permutation(idx.size)][:self.num_train_per_class]
            train[idx] = True
        remaining = np.flatnonzero(~train)
        remaining = remaining[rng.permutation(remaining.size)]
        val[remaining[:nv]] = True
        if self.split == "test_rest":
            test[remaining[nv:]] = True
        else:
            test[remaining[nv:nv + nte]] = True
        return train, val, test

    def __repr__(self) -> str:
        return f"{type(self).__name__}(split={self.split})"
