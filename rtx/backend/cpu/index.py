"""CPU row accumulate in place: ``index_accumulate`` writes only the indexed rows
of the CPU backend's own buffer (the optimisers' row-sparse updates).  (Gather
and scatter-add have one body for every backend: ``rtx/backend/index.py``.)"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..index import add_plan


class CpuIndex:
    def index_accumulate(self, dst: np.ndarray, indices: Any, src: np.ndarray) -> np.ndarray:
        # only the indexed rows are read and written (the optimisers' row-sparse
        # updates); a read-only or non-contiguous dst takes the default path
        plan = add_plan(src.shape, indices, dst.shape[0] if dst.ndim else 0)
        if (dst.ndim == 0 or src.shape[1:] != dst.shape[1:] or src.dtype != dst.dtype
                or not dst.flags.writeable or not dst.flags.c_contiguous):
            return super().index_accumulate(dst, indices, src)  # type: ignore[misc]
        idx = plan._idx
        if len(idx) < 2 or bool((idx[1:] > idx[:-1]).all()):
            dst[idx] += src  # strictly increasing (a coalesced gradient's rows): distinct
        else:
            np.add.at(dst, idx, src)  # repeats accumulate
        return dst

