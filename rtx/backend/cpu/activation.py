"""CPU activations.  ``leaky_relu``, ``elu``, ``sigmoid`` and the activations' backward rules
run as one fused OpenMP pass each: a fixed program of the fused evaluator
(``rtx/_fused.pxi``), compiled once by ``rtx/backend/_program.py``; numpy would take 3-5
passes with as many temporaries.  Bitwise equal to the composed ops."""

from __future__ import annotations

import numpy as np

from ..._dtypes import FLOAT_DTYPES as _KERNEL_DTYPES
from ..._dtypes import float32 as _F32
from ..._dtypes import float64 as _F64
from ..._dtypes import float_type
from ..._kernels import fused_eval, fused_unary, storage_array
from ..._threads import get_num_threads
from .._program import IMM, Program, lower
from ..activation import np_elu, np_leaky_relu, np_sigmoid
from ._alloc import empty, own
from .elementwise import binary, unary

_ndarray = np.ndarray
_py_numbers = (int, float)
_ZERO_F32, _ZERO_F64 = np.zeros((), _F32), np.zeros((), _F64)
_ZERO_F32.flags.writeable = _ZERO_F64.flags.writeable = False

_LEAKY_RELU = lower(("a",), (), ("leaky_relu", "a", IMM))
_ELU = lower(("a",), (), ("elu", "a", IMM))
_SIGMOID = lower(("a",), (), ("sigmoid", "a"))
_RELU_BWD = lower(("out", "g"), ("zero",), ("where", ("le", "out", "zero"), "zero", "g"))
_LEAKY_RELU_BWD = lower(("a", "g"), ("zero", "slope"),
                        ("where", ("gt", "a", "zero"), "g", ("mul", "g", "slope")))
_SIGMOID_BWD = lower(("out", "g"), ("one",), ("mul", ("mul", "g", "out"), ("sub", "one", "out")))
_TANH_BWD = lower(("out", "g"), ("one",), ("mul", "g", ("sub", "one", ("mul", "out", "out"))))
_ELU_BWD = lower(("a", "out", "g"), ("zero", "alpha"),
                 ("where", ("le", "a", "zero"), ("mul", "g", ("add", "out", "alpha")), "g"))
# With alpha > 0, out <= 0 exactly where a <= 0 (a > 0 gives out = a > 0; a <= 0 gives
# alpha * expm1(a) in [-alpha, 0]; NaN fails both tests): the same selection, so the
# same bits, without reading a (one input array fewer per element).
_ELU_BWD_OUT = lower(("out", "g"), ("zero", "alpha"),
                     ("where", ("le", "out", "zero"), ("mul", "g", ("add", "out", "alpha")), "g"))


def run_fixed(p: Program, inputs: list[np.ndarray], consts: list[float],
              imms: list[float]) -> np.ndarray | None:
    """``p``'s one output (a new owned array), or None when the inputs are not
    all one float dtype and shape (the caller then runs numpy)."""
    a = inputs[0]
    if type(a) is not _ndarray:
        return None
    dt, shape = a.dtype, a.shape
    if dt not in _KERNEL_DTYPES:      # (a tuple's `in` tries identity first)
        return None
    for x in inputs[1:]:
        if type(x) is not _ndarray or (x.dtype is not dt and x.dtype != dt) or x.shape != shape:
            return None
    out = storage_array(shape, dt)
    fused_eval(p.prog, p.nregs, inputs, consts, imms, [out], p.out_regs, a.shape,
               get_num_threads(), 2048)
    return out


class CpuActivation:
    def relu(self, a: np.ndarray) -> np.ndarray:
        # a small C-contiguous float array: the fused evaluator's loop, numpy's
        # maximum(a, 0) bits (_fused.pxi's FX_RELU), without a ufunc call
        out = fused_unary("relu", a)
        if out is not None:
            return out
        dt = a.dtype
        if dt is _F32 or dt is _F64:
            # maximum(a, 0) with a 0-d zero of the dtype (a Python 0 costs numpy a
            # scalar conversion per call): numpy's bits, NaN and the tie rule included
            out = storage_array(a.shape, dt)
            np.maximum(a, _ZERO_F32 if dt is _F32 else _ZERO_F64, out=out)
            return out
        # a Python 0 keeps float arrays on binary's fast path (same result and dtype)
        return binary(np.maximum, a, 0 if dt.kind == "f" else dt.type(0))

    def leaky_relu(self, a: np.ndarray, negative_slope: float) -> np.ndarray:
        if isinstance(negative_slope, _py_numbers):
            out = fused_unary("leaky_relu", a, negative_slope)   # (small: no program)
            if out is not None:
                return out
            out = run_fixed(_LEAKY_RELU, [a], [], [negative_slope])
            if out is not None:
                return out
        return own(np_leaky_relu(a, negative_slope))

    def elu(self, a: np.ndarray, alpha: float) -> np.ndarray:
        if isinstance(alpha, _py_numbers):
            out = fused_unary("elu", a, alpha)
            if out is not None:
                return out
            out = run_fixed(_ELU, [a], [], [alpha])
            if out is not None:
                return out
        return own(np_elu(a, alpha))

    # the backward rules: one fused pass each (bitwise the composed ops' result)
    def relu_backward(self, out: np.ndarray, grad: np.ndarray) -> np.ndarray:
        r = run_fixed(_RELU_BWD, [out, grad], [0.0], [])
        return super().relu_backward(out, grad) if r is None else r  # type: ignore[misc]

    def leaky_relu_backward(self, a: np.ndarray, grad: np.ndarray,
                            negative_slope: float) -> np.ndarray:
        r = (run_fixed(_LEAKY_RELU_BWD, [a, grad], [0.0, negative_slope], [])
             if isinstance(negative_slope, _py_numbers) else None)
        if r is None:
            return super().leaky_relu_backward(a, grad, negative_slope)  # type: ignore[misc]
        return r

    def sigmoid_backward(self, out: np.ndarray, grad: np.ndarray) -> np.ndarray:
        r = run_fixed(_SIGMOID_BWD, [out, grad], [1.0], [])
        return super().sigmoid_backward(out, grad) if r is None else r  # type: ignore[misc]

    def tanh_backward(self, out: np.ndarray, grad: np.ndarray) -> np.ndarray:
        r = run_fixed(_TANH_BWD, [out, grad], [1.0], [])
        return super().tanh_backward(out, grad) if r is None else r  # type: ignore[misc]

    def elu_backward(self, a: np.ndarray, out: np.ndarray, grad: np.ndarray,
                     alpha: float) -> np.ndarray:
        if not isinstance(alpha, _py_numbers):
            r = None
        elif alpha > 0:
            r = run_fixed(_ELU_BWD_OUT, [out, grad], [0.0, alpha], [])
        else:
            r = run_fixed(_ELU_BWD, [a, out, grad], [0.0, alpha], [])
        if r is None:
            return super().elu_backward(a, out, grad, alpha)  # type: ignore[misc]
        return r

    def sigmoid(self, a: np.ndarray) -> np.ndarray:
        # np_sigmoid's stable form in one pass (numpy: 6 passes, 4 temporaries);
        # a small array without the program's planning (the same loop, the same bits)
        out = fused_unary("sigmoid", a)
        if out is not None:
            return out
        out = run_fixed(_SIGMOID, [a], [], [])
        return own(np_sigmoid(a)) if out is None else out

    def tanh(self, a: np.ndarray) -> np.ndarray:
        return unary(np.tanh, a)

    def softmax(self, a: np.ndarray, dim: int) -> np.ndarray:
        out = empty(a.shape, float_type(a.dtype))
        if a.size == 0:
            return out
        np.subtract(a, np.max(a, axis=dim, keepdims=True), out=out, dtype=out.dtype)
        np.exp(out, out=out)
        np.divide(out, np.sum(out, axis=dim, keepdims=True), out=out)
        return out

    def log_softmax(self, a: np.ndarray, dim: int) -> np.ndarray:
        out = empty(a.shape, float_type(a.dtype))
        if a.size == 0:
            return out
        np.subtract(a, np.max(a, axis=dim, keepdims=True), out=out, dtype=out.dtype)
        lse = np.log(np.sum(np.exp(out), axis=dim, keepdims=True))
        np.subtract(out, lse, out=out)
        return out
