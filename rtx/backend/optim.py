"""Optimiser updates, fused: one pass per parameter instead of a dozen elementwise ops.

``adam_rows``: SparseAdam's lazy step over the rows of a coalesced row-sparse
gradient.  ``adam_step``: Adam's / AdamW's dense step.  Both run the OpenMP
kernels of ``rtx/_optim.pxi`` (torch.optim's arithmetic in the parameter's
dtype, the same bits at any thread count) as one ``host_body`` each: in place
on the CPU backend's own buffers, through a host round trip (into copies) on
any other backend; they return the arrays that hold the result (the caller
rebinds, as for ``inplace``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._dtypes import FLOAT_DTYPES as _KERNEL_DTYPES
from .._kernels import adam_rows as _adam_rows_kernel
from .._kernels import adam_step as _adam_step_kernel
from .._threads import get_num_threads
from ._family import Family, host_body
from .index import add_plan


def _writable(a: np.ndarray) -> np.ndarray:
    """``a`` itself when the kernel may write it (writable, C-contiguous), else a copy."""
    return a if a.flags.writeable and a.flags.c_contiguous else np.array(a, order="C")


class OptimOps(Family):
    FAMILY = "optim"  # its ops: the public methods below (``_family.py``)

    @host_body("param", "exp_avg", "exp_avg_sq", "grad")
    def adam_rows(self, param: Any, exp_avg: Any, exp_avg_sq: Any, indices: Any, grad: Any,
                  beta1: float, beta2: float, eps: float,
                  step_size: float) -> tuple[Any, Any, Any]:
        """SparseAdam's lazy step over the rows ``indices`` (a plan over ``param``'s
        rows, distinct: a coalesced gradient's), in one fused pass (``adam_rows``
        in ``rtx/_optim.pxi``: torch.optim.SparseAdam's arithmetic, in the
        parameter's dtype).  ``param``, ``exp_avg``, ``exp_avg_sq``: one float
        dtype and shape; ``grad``: ``[len(indices), *param.shape[1:]]``.  Writes
        into the three buffers where they are writable and contiguous (the CPU
        backend's own: only the indexed rows are touched), else into copies;
        returns the three arrays that hold the result (the caller rebinds)."""
        if param.ndim < 1:
            raise ValueError("adam_rows(): param must have at least 1 dimension")
        shape = param.shape
        add_plan(grad.shape, indices, shape[0])
        for name, a in (("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
            if a.shape != shape:
                raise ValueError(f"adam_rows(): {name} of shape {a.shape} does not match "
                                 f"param's {shape}")
        if param.dtype not in _KERNEL_DTYPES or any(
                a.dtype != param.dtype for a in (exp_avg, exp_avg_sq, grad)):
            got = [str(a.dtype) for a in (param, exp_avg, exp_avg_sq, grad)]
            raise TypeError("adam_rows(): param, exp_avg, exp_avg_sq and grad must share one "
                            f"float dtype, got {got}")
        if grad.shape[1:] != shape[1:]:
            raise ValueError(f"adam_rows(): grad of shape {grad.shape} does not match rows "
                             f"of {shape}")
        idx = indices._idx
        if len(idx) > 1 and not bool((idx[1:] > idx[:-1]).all()) \
                and len(np.unique(idx)) != len(idx):
            raise ValueError("adam_rows(): the rows must be distinct (a coalesced gradient's)")
        p, m, v = (_writable(a) for a in (param, exp_avg, exp_avg_sq))
        n, row = shape[0], math.prod(shape[1:])
        _adam_rows_kernel(p.reshape(n, row), m.reshape(n, row), v.reshape(n, row), idx,
                          np.ascontiguousarray(grad).reshape(len(idx), row), float(beta1),
                          float(beta2), float(eps), float(step_size), get_num_threads())
        return p, m, v

    @host_body("param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "grad")
    def adam_step(self, param: Any, exp_avg: Any, exp_avg_sq: Any, max_exp_avg_sq: Any,
                  grad: Any, beta1: float, beta2: float, eps: float, lr: float, step: int,
                  weight_decay: float = 0.0,
                  decoupled: bool = False) -> tuple[Any, Any, Any, Any]:
        """Adam's dense step ``step`` (1, 2, ...) on one parameter, rtx.optim.Adam's
        arithmetic in one pass: ``g = grad + weight_decay * p`` (L2; ``decoupled``:
        AdamW's ``p *= 1 - lr * weight_decay`` first instead), ``m = m b1 + g (1 -
        b1)``, ``v = v b2 + g^2 (1 - b2)`` (``max_exp_avg_sq`` given: amsgrad, its
        running max is used), ``p -= m / (sqrt(v) / sqrt(1 - b2^t) + eps) * lr / (1
        - b1^t)``.  All arrays one float dtype and shape; ``max_exp_avg_sq`` may be
        None.  Returns ``(param, exp_avg, exp_avg_sq, max_exp_avg_sq)``."""
        arrays = [("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq), ("grad", grad)]
        if max_exp_avg_sq is not None:
            arrays.append(("max_exp_avg_sq", max_exp_avg_sq))
        for name, a in arrays:
            if a.shape != param.shape:
                raise ValueError(f"adam_step(): {name} of shape {a.shape} does not match "
                                 f"param's {param.shape}")
        if param.dtype not in _KERNEL_DTYPES or any(a.dtype != param.dtype for _, a in arrays):
            got = [str(param.dtype)] + [str(a.dtype) for _, a in arrays]
            raise TypeError("adam_step(): param, its state and grad must share one float dtype, "
                            f"got {got}")
        t = int(step)
        if t < 1:
            raise ValueError(f"adam_step(): step must be >= 1, got {step}")
        p, m, v = (_writable(a) for a in (param, exp_avg, exp_avg_sq))
        vmax = None if max_exp_avg_sq is None else _writable(max_exp_avg_sq)
        _adam_step_kernel(p.reshape(-1), m.reshape(-1), v.reshape(-1),
                          np.ascontiguousarray(grad).reshape(-1), float(beta1), float(beta2),
                          float(eps), float(lr) / (1 - beta1**t), math.sqrt(1 - beta2**t),
                          float(weight_decay), bool(decoupled), float(lr), get_num_threads(),
                          None if vmax is None else vmax.reshape(-1))
        return p, m, v, vmax
