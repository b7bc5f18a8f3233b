"""Linear algebra: matmul with numpy semantics (1-D, 2-D and batched)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._family import Family


class LinalgOps(Family):
    FAMILY = "linalg"  # its ops: the public methods below (``_family.py``)

    def matmul(self, a: Any, b: Any) -> Any:
        return self._host(np.matmul, a, b)
