"""``NormalizeFeatures``: PyG's ``torch_geometric.transforms.NormalizeFeatures``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import BaseTransform, host, like

__all__ = ["NormalizeFeatures"]


class NormalizeFeatures(BaseTransform):
    """Row-normalise the attributes ``attrs`` (default ``["x"]``) of every store to
    sum to one, as PyG: ``v = v - v.min()`` (the minimum over the whole array),
    then each row divided by its sum clamped to at least 1 (so an all-zero row
    stays zero).  Empty arrays are left as they are; the attributes must be
    floating point (``TypeError`` otherwise, as PyG's in-place division)."""

    def __init__(self, attrs: Sequence[str] | None = None) -> None:
        self.attrs = list(attrs) if attrs else ["x"]

    def forward(self, data: Any) -> Any:
        stores = [data._global, *data.node_stores, *data.edge_stores]
        for store in stores:
            for key in self.attrs:
                if key not in store:
                    continue
                value = store[key]
                a = host(value)
                if a.size == 0:
                    continue
                if a.dtype.kind != "f":
                    raise TypeError(f"NormalizeFeatures: {key} must be floating point, got "
                                    f"{a.dtype}")
                a = a - a.min()
                s = np.maximum(a.sum(axis=-1, keepdims=True), a.dtype.type(1))
                store[key] = like(a / s, value)
        return data
