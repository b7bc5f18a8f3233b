"""Linear algebra: matmul with numpy semantics (1-D, 2-D and batched)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._host import HostRoundTrip


class LinalgOps(HostRoundTrip):
    FAMILY = "linalg"  # the op names below: what a decorator backend forwards as a family
    OPS: tuple[str, ...] = (
        "matmul",
    )

    def matmul(self, a: Any, b: Any) -> Any:
        return self._host(np.matmul, a, b)
