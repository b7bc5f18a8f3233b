"""Linear algebra: matmul with numpy semantics (1-D, 2-D and batched)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtypes import result_type
from ._family import Family


class LinalgOps(Family):
    FAMILY = "linalg"  # its ops: the public methods below (``_family.py``)

    def matmul(self, a: Any, b: Any) -> Any:
        return self._host(lambda x, y: np.matmul(x, y, dtype=result_type(x, y)), a, b)
