"""The CPU backend (float32 and float64; int and bool tensors pass through numpy).

Primitives are numpy arrays whose memory is an rtx ``Storage`` (allocated here
through the caching allocator) or, for ``rtx.from_numpy``, the user's own array.
Elementwise and reduction ops that numpy does well run as numpy ufuncs writing
into owned output buffers (``out=``); index ops run the OpenMP kernels of
``rtx._kernels`` after validation at this boundary.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._kernels import (
    FUSED_OPS,
    Storage,
    fused_eval,
    gather_rows,
    get_parallel_thresholds,
    message_backward_csr,
    message_csr,
    scatter_add_csr,
    scatter_add_rows,
    sddmm_dot,
    segment_max_backward_csr,
    segment_max_csr,
    segment_mean_backward_csr,
    segment_mean_csr,
    segment_softmax_backward_csr,
    segment_softmax_backward_entries,
    segment_softmax_csr,
    segment_softmax_entries,
    softmax_entry_mode,
)
from .._threads import get_num_threads
from ._matmul import BLAS_THREADED_MIN, SINGLE_THREADED_BLAS, matmul_2d
from .activation import np_elu, np_leaky_relu, np_sigmoid
from .base import Backend
from .cpu_gatv2 import CpuGatv2Ops
from .index import check_add, check_select
from .index_plan import IndexPlan, as_plan
from .message import check_message
from .reduction import Dim
from .segment import check_segment

_ndarray = np.ndarray
_scalar_types = (int, float, bool, np.generic)
_py_numbers = (int, float)
_KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def empty(shape: tuple[int, ...], dtype: Any, zero: bool = False) -> np.ndarray:
    """An uninitialised (or zeroed) C-contiguous array owned by an rtx Storage."""
    if not isinstance(dtype, np.dtype):
        dtype = np.dtype(dtype)
    try:
        storage = Storage(math.prod(shape) * dtype.itemsize, zero)
    except OverflowError:  # more bytes than a Py_ssize_t holds
        raise MemoryError(f"rtx: an array of shape {shape} is too large") from None
    # np.ndarray(buffer=) keeps the Storage itself as the array's base (no
    # memoryview in between): half the cost of frombuffer + reshape.
    # (numpy's stubs type buffers as collections.abc.Buffer only from Python 3.12)
    return _ndarray(shape, dtype, storage)  # type: ignore[arg-type]


def own(a: np.ndarray) -> np.ndarray:
    """``a``'s values in an rtx-owned, C-contiguous buffer."""
    out = empty(a.shape, a.dtype)
    np.copyto(out, a)
    return out


def _overlaps_itself(a: np.ndarray) -> bool:
    """Whether two elements of ``a`` are one memory location: a stride 0 along a
    dim of extent > 1 (an ``expand``) -- PyTorch's ``has_internal_overlap`` test.
    (Other self-overlapping layouts, from ``as_strided``, PyTorch lets through
    too.)  For a non-empty ``a``: an empty array is C-contiguous (the caller's
    shortcut), and has no two elements."""
    for n, s in zip(a.shape, a.strides, strict=True):
        if s == 0 and n > 1:
            return True
    return False


def _nocopy_reshape(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``a`` reshaped as a view of the same memory, or None when that needs a copy
    (PyTorch's ``view`` rule: numpy's no-copy reshape uses the same stride test)."""
    try:
        return np.reshape(a, shape, copy=False)
    except ValueError:
        return None
    except TypeError:   # numpy < 2.1: no copy= argument
        v = a.view()
        try:
            v.shape = shape
        except AttributeError:
            return None
        return v


def _norm_dims(dim: Dim, ndim: int) -> tuple[int, ...]:
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"dimension {d} is out of range for a tensor of {ndim} dims")
        out.append(d % max(ndim, 1))
    return tuple(out)


def _reduced_shape(shape: tuple[int, ...], dim: Dim, keepdim: bool) -> tuple[int, ...]:
    dims = _norm_dims(dim, len(shape))
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def _index_threads(nbytes: int, kind: str) -> int:
    """Team size for an index kernel: 1 below its parallel threshold (where the
    kernel would run serially anyway), so small calls skip get_num_threads()."""
    if nbytes < get_parallel_thresholds()[kind]:
        return 1
    return get_num_threads()


class _Program:
    """A fixed elementwise program for ``rtx._kernels.fused_eval`` (one OpenMP pass,
    no temporaries): activations and their backward rules, which numpy runs as
    3-5 passes with as many temporaries.  Registers: the inputs, then the scalar
    constants, then temporaries; the last instruction's register is the output."""

    __slots__ = ("prog", "nregs", "out_regs")

    def __init__(self, n_inputs: int, n_consts: int,
                 code: tuple[tuple[str, tuple[int, ...], int], ...]) -> None:
        rows = []
        for k, (op, srcs, imm) in enumerate(code):
            dst = n_inputs + n_consts + k
            rows.append([FUSED_OPS[op][0], dst, *srcs, *(-1,) * (3 - len(srcs)), imm])
        self.prog = np.asarray(rows, dtype=np.int32)
        self.nregs = n_inputs + n_consts + len(code)
        self.out_regs = np.asarray([self.nregs - 1], dtype=np.int32)

    def __call__(self, inputs: list[np.ndarray], consts: list[float],
                 imms: list[float]) -> np.ndarray | None:
        """The result (a new owned array), or None when the inputs are not all one
        float dtype and shape (the caller then runs numpy)."""
        a = inputs[0]
        if type(a) is not _ndarray or a.dtype not in _KERNEL_DTYPES:
            return None
        for x in inputs[1:]:
            if type(x) is not _ndarray or x.dtype != a.dtype or x.shape != a.shape:
                return None
        out = empty(a.shape, a.dtype)
        fused_eval(self.prog, self.nregs, inputs, consts, imms, [out], self.out_regs,
                   a.shape, get_num_threads(), 2048)
        return out


# (op, register operands, immediate index or -1); see _Program
_LEAKY_RELU = _Program(1, 0, (("leaky_relu", (0,), 0),))
_ELU = _Program(1, 0, (("elu", (0,), 0),))
# out=0 g=1 | 0.0=2 | where(out <= 0, 0, g)
_RELU_BWD = _Program(2, 1, (("le", (0, 2), -1), ("where", (3, 2, 1), -1)))
# a=0 g=1 | 0.0=2 slope=3 | where(a > 0, g, g * slope)
_LEAKY_RELU_BWD = _Program(2, 2, (("gt", (0, 2), -1), ("mul", (1, 3), -1),
                                  ("where", (4, 1, 5), -1)))
# a=0 out=1 g=2 | 0.0=3 alpha=4 | where(a <= 0, g * (out + alpha), g)
_ELU_BWD = _Program(3, 2, (("le", (0, 3), -1), ("add", (1, 4), -1), ("mul", (2, 6), -1),
                           ("where", (5, 7, 2), -1)))


class CpuBackend(CpuGatv2Ops, Backend):
    """Native CPU backend."""

    name = "cpu"

    # ----------------------------------------------------------------- core
    def from_numpy(self, a: np.ndarray) -> np.ndarray:
        return a

    def to_numpy(self, p: np.ndarray) -> np.ndarray:
        return p

    def shape(self, p: np.ndarray) -> tuple[int, ...]:
        return p.shape

    def dtype(self, p: np.ndarray) -> np.dtype:
        return p.dtype

    def is_prim(self, p: Any) -> bool:
        return type(p) is _ndarray

    def aliases(self, view: Any, base: Any) -> bool:
        b = view.base
        return b is not None and (b is base or b is base.base)

    # ------------------------------------------------------------- creation
    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return empty(shape, dtype)

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return empty(shape, dtype, zero=True)

    def full(self, shape: tuple[int, ...], value: Any, dtype: Any) -> np.ndarray:
        out = empty(shape, dtype)
        out.fill(value)
        return out

    _INPLACE = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide}

    def inplace(self, op: str, dst: np.ndarray, src: Any) -> np.ndarray:
        # (a C-contiguous array -- every empty one is -- has no overlapping elements)
        if not dst.flags.c_contiguous and _overlaps_itself(dst):
            raise RuntimeError(
                "unsupported operation: more than one element of the written-to tensor "
                "refers to a single memory location. Please clone() the tensor before "
                "performing the operation.")
        if not dst.flags.writeable:
            return super().inplace(op, dst, src)
        if op == "fill":
            dst.fill(src)
        elif op == "copy":
            np.copyto(dst, src, casting="unsafe")
        else:
            if np.broadcast_shapes(dst.shape, np.shape(src)) != dst.shape:
                raise ValueError(
                    f"in-place {op}: operand of shape {np.shape(src)} cannot update {dst.shape}"
                )
            self._INPLACE[op](dst, src, out=dst, casting="unsafe")
        return dst

    # ---------------------------------------------------------- elementwise
    def _binary(self, ufunc: Any, a: Any, b: Any, out_dtype: Any = None) -> np.ndarray:
        if type(a) is _ndarray:
            if type(b) is _ndarray:
                shape = a.shape if a.shape == b.shape else np.broadcast_shapes(a.shape, b.shape)
                dt = a.dtype if a.dtype == b.dtype else np.result_type(a, b)
            else:
                shape = a.shape
                # a Python number does not change a float array's dtype (NEP 50)
                dt = a.dtype if type(b) in _py_numbers and a.dtype.kind == "f" else (
                    np.result_type(a, b))
        else:
            shape = b.shape
            dt = b.dtype if type(a) in _py_numbers and b.dtype.kind == "f" else (
                np.result_type(a, b))
        if out_dtype is not None:
            dt = out_dtype
        elif ufunc is np.true_divide and dt.kind in "biu":
            dt = np.dtype(np.float64)
        out = empty(shape, dt)
        ufunc(a, b, out=out)
        return out

    def _unary(self, ufunc: Any, a: np.ndarray) -> np.ndarray:
        dt = a.dtype if a.dtype.kind == "f" or ufunc in (np.negative, np.abs, np.sign) else (
            np.dtype(np.float64)
        )
        out = empty(a.shape, dt)
        ufunc(a, out=out)
        return out

    def add(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.add, a, b)

    def sub(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.subtract, a, b)

    def mul(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.multiply, a, b)

    def div(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.true_divide, a, b)

    def pow(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.power, a, b)

    def maximum(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.maximum, a, b)

    def minimum(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.minimum, a, b)

    def eq(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.equal, a, b, np.dtype(bool))

    def ne(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.not_equal, a, b, np.dtype(bool))

    def lt(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.less, a, b, np.dtype(bool))

    def le(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.less_equal, a, b, np.dtype(bool))

    def gt(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.greater, a, b, np.dtype(bool))

    def ge(self, a: Any, b: Any) -> np.ndarray:
        return self._binary(np.greater_equal, a, b, np.dtype(bool))

    def neg(self, a: np.ndarray) -> np.ndarray:
        return self._unary(np.negative, a)

    def exp(self, a: np.ndarray) -> np.ndarray:
        return self._unary(np.exp, a)

    def log(self, a: np.ndarray) -> np.ndarray:
        return self._unary(np.log, a)

    def sqrt(self, a: np.ndarray) -> np.ndarray:
        return self._unary(np.sqrt, a)

    def abs(self, a: np.ndarray) -> np.ndarray:
        return self._unary(np.abs, a)

    def sign(self, a: np.ndarray) -> np.ndarray:
        return self._unary(np.sign, a)

    def tanh(self, a: np.ndarray) -> np.ndarray:
        return self._unary(np.tanh, a)

    def where(self, cond: Any, a: Any, b: Any) -> np.ndarray:
        return own(np.where(cond, a, b))

    def cast(self, a: np.ndarray, dtype: Any) -> np.ndarray:
        out = empty(a.shape, dtype)
        np.copyto(out, a, casting="unsafe")
        return out

    def copy(self, a: np.ndarray) -> np.ndarray:
        return own(a)

    # ----------------------------------------------------------- activation
    def relu(self, a: np.ndarray) -> np.ndarray:
        # a Python 0 keeps float arrays on _binary's fast path (same result and dtype)
        return self._binary(np.maximum, a, 0 if a.dtype.kind == "f" else a.dtype.type(0))

    def leaky_relu(self, a: np.ndarray, negative_slope: float = 0.01) -> np.ndarray:
        if isinstance(negative_slope, _py_numbers):
            out = _LEAKY_RELU([a], [], [negative_slope])
            if out is not None:
                return out
        return own(np_leaky_relu(a, negative_slope))

    def elu(self, a: np.ndarray, alpha: float = 1.0) -> np.ndarray:
        if isinstance(alpha, _py_numbers):
            out = _ELU([a], [], [alpha])
            if out is not None:
                return out
        return own(np_elu(a, alpha))

    # the backward rules: one fused pass each (bitwise the composed ops' result)
    def relu_backward(self, out: np.ndarray, grad: np.ndarray) -> np.ndarray:
        r = _RELU_BWD([out, grad], [0.0], [])
        return super().relu_backward(out, grad) if r is None else r

    def leaky_relu_backward(self, a: np.ndarray, grad: np.ndarray,
                            negative_slope: float) -> np.ndarray:
        r = (_LEAKY_RELU_BWD([a, grad], [0.0, negative_slope], [])
             if isinstance(negative_slope, _py_numbers) else None)
        return super().leaky_relu_backward(a, grad, negative_slope) if r is None else r

    def elu_backward(self, a: np.ndarray, out: np.ndarray, grad: np.ndarray,
                     alpha: float) -> np.ndarray:
        r = _ELU_BWD([a, out, grad], [0.0, alpha], []) if isinstance(alpha, _py_numbers) else None
        return super().elu_backward(a, out, grad, alpha) if r is None else r

    def sigmoid(self, a: np.ndarray) -> np.ndarray:
        return own(np_sigmoid(a))

    def softmax(self, a: np.ndarray, dim: int) -> np.ndarray:
        out = empty(a.shape, a.dtype if a.dtype.kind == "f" else np.float64)
        if a.size == 0:
            return out
        np.subtract(a, np.max(a, axis=dim, keepdims=True), out=out)
        np.exp(out, out=out)
        np.divide(out, np.sum(out, axis=dim, keepdims=True), out=out)
        return out

    def log_softmax(self, a: np.ndarray, dim: int) -> np.ndarray:
        out = empty(a.shape, a.dtype if a.dtype.kind == "f" else np.float64)
        if a.size == 0:
            return out
        np.subtract(a, np.max(a, axis=dim, keepdims=True), out=out)
        lse = np.log(np.sum(np.exp(out), axis=dim, keepdims=True))
        np.subtract(out, lse, out=out)
        return out

    # ------------------------------------------------------------ reduction
    def _reduce(self, fn: Any, a: np.ndarray, dim: Dim, keepdim: bool, dt: Any = None) -> Any:
        shape = _reduced_shape(a.shape, dim, keepdim)
        out = empty(shape, dt if dt is not None else a.dtype)
        axis = None if dim is None else _norm_dims(dim, a.ndim)
        fn(a, axis=axis, keepdims=keepdim, out=out)
        return out

    def sum(self, a: np.ndarray, dim: Dim = None, keepdim: bool = False) -> np.ndarray:
        dt = a.dtype if a.dtype.kind in "fc" else np.dtype(np.int64)
        return self._reduce(np.add.reduce, a, dim, keepdim, dt)  # what np.sum calls

    def mean(self, a: np.ndarray, dim: Dim = None, keepdim: bool = False) -> np.ndarray:
        dt = a.dtype if a.dtype.kind == "f" else np.dtype(np.float64)
        return self._reduce(np.mean, a, dim, keepdim, dt)

    def max(self, a: np.ndarray, dim: Dim = None, keepdim: bool = False) -> np.ndarray:
        return self._reduce(np.maximum.reduce, a, dim, keepdim)  # what np.max calls

    def min(self, a: np.ndarray, dim: Dim = None, keepdim: bool = False) -> np.ndarray:
        return self._reduce(np.minimum.reduce, a, dim, keepdim)  # what np.min calls

    def argmax(self, a: np.ndarray, dim: int | None = None, keepdim: bool = False) -> np.ndarray:
        if dim is None:
            r = np.asarray(np.argmax(a), dtype=np.int64)
            return own(r.reshape((1,) * a.ndim) if keepdim else r)
        (d,) = _norm_dims(dim, a.ndim)
        out = empty(_reduced_shape(a.shape, d, keepdim), np.int64)
        np.argmax(a, axis=d, keepdims=keepdim, out=out)
        return out

    # --------------------------------------------------------------- linalg
    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.ndim >= 2 and b.ndim >= 2:
            if a.shape[-1] != b.shape[-2]:
                raise ValueError(
                    f"matmul: shapes {a.shape} and {b.shape} do not align "
                    f"({a.shape[-1]} != {b.shape[-2]})"
                )
            ba, bb = a.shape[:-2], b.shape[:-2]
            batch = ba if ba == bb else np.broadcast_shapes(ba, bb)
            dt = a.dtype if a.dtype == b.dtype else np.result_type(a, b)
            out = empty(batch + (a.shape[-2], b.shape[-1]), dt)
            if a.ndim == 2 and b.ndim == 2 and a.dtype == b.dtype == dt and dt.kind == "f":
                # BLAS on one thread, the work split over rtx's threads (_matmul.py)
                matmul_2d(a, b, out, get_num_threads(), lambda shape: empty(shape, dt))
            elif out.size * a.shape[-1] >= BLAS_THREADED_MIN:
                with SINGLE_THREADED_BLAS:
                    np.matmul(a, b, out=out)
            else:
                np.matmul(a, b, out=out)
            return out
        return own(np.asarray(np.matmul(a, b)))

    # ---------------------------------------------------------------- shape
    def reshape(self, a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        if not a.flags.c_contiguous:
            v = _nocopy_reshape(a, shape)
            return v if v is not None else own(a).reshape(shape)
        return a.reshape(shape)

    def is_contiguous(self, a: np.ndarray) -> bool:
        return bool(a.flags.c_contiguous)

    def can_view(self, a: np.ndarray, shape: tuple[int, ...]) -> bool:
        return bool(a.flags.c_contiguous) or _nocopy_reshape(a, shape) is not None

    def permute(self, a: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
        return a.transpose(dims)

    def broadcast_to(self, a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return own(np.broadcast_to(a, shape))

    def expand(self, a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """A view of ``a`` (stride 0 along the broadcast dims), writable when ``a``
        is: a write through a part of it whose elements do not share memory
        (``x.expand(3, 4)[0]``) reaches ``a``, as in PyTorch, and ``inplace``
        refuses one whose elements do."""
        v = np.broadcast_to(a, shape)
        if a.flags.writeable:
            v.flags.writeable = True
        return v

    def getitem(self, a: np.ndarray, key: Any) -> np.ndarray:
        r = a[key]
        if type(r) is not _ndarray:  # numpy scalar from full integer indexing
            return own(np.asarray(r))
        return r if r.base is not None and np.shares_memory(r, a) else own(r)

    def concat(self, xs: Any, dim: int = 0) -> np.ndarray:
        return own(np.concatenate(list(xs), axis=dim))

    def stack(self, xs: Any, dim: int = 0) -> np.ndarray:
        return own(np.stack(list(xs), axis=dim))

    # ---------------------------------------------------------------- index
    def index_select(self, x: np.ndarray, indices: Any) -> np.ndarray:
        idx = check_select(x.shape, indices)
        out = empty((idx.shape[0],) + x.shape[1:], x.dtype)
        if x.dtype not in _KERNEL_DTYPES:
            np.take(x, idx, axis=0, out=out)
            return out
        row = math.prod(x.shape[1:])
        xc = np.ascontiguousarray(x).reshape(x.shape[0], row)
        gather_rows(xc, idx, out.reshape(idx.shape[0], row),
                             _index_threads(out.nbytes, "gather"))
        return out

    def index_add(self, src: np.ndarray, indices: Any, num_rows: int) -> np.ndarray:
        idx, n = check_add(src.shape, src.dtype.itemsize, indices, num_rows)
        if type(indices) is IndexPlan and src.dtype in _KERNEL_DTYPES:
            # the plan's cached grouping: same bits as the cold path below
            ptr, perm = indices._grouping()
            out = empty((n,) + src.shape[1:], src.dtype)
            row = math.prod(src.shape[1:])
            scatter_add_csr(np.ascontiguousarray(src).reshape(src.shape[0], row), perm,
                                     ptr, out.reshape(n, row), get_num_threads())
            return out
        if src.dtype not in _KERNEL_DTYPES:
            out = empty((n,) + src.shape[1:], src.dtype, zero=True)
            np.add.at(out, idx, src)
            return out
        # Uninitialised: the kernel zero-fills it in parallel, each thread the
        # rows (or columns) it then reduces into.
        out = empty((n,) + src.shape[1:], src.dtype)
        row = math.prod(src.shape[1:])
        sc = np.ascontiguousarray(src).reshape(src.shape[0], row)
        scatter_add_rows(sc, idx, out.reshape(n, row),
                                  _index_threads(sc.nbytes + out.nbytes, "scatter"))
        return out

    # -------------------------------------------------------------- segment
    @staticmethod
    def _rows2d(a: np.ndarray) -> np.ndarray:
        """``a`` as a C-contiguous (len, prod(rest)) view (a copy only if needed)."""
        return np.ascontiguousarray(a).reshape(a.shape[0], math.prod(a.shape[1:]))

    def segment_softmax(self, scores: np.ndarray, index: Any, num_segments: int) -> np.ndarray:
        plan = check_segment(scores.shape, scores.dtype, index, num_segments, "segment_softmax")
        out = empty(scores.shape, scores.dtype)
        s2, o2, T = self._rows2d(scores), self._rows2d(out), get_num_threads()
        # two kernels with equal bits: by entry order (narrow rows, no grouping
        # needed) or over the CSR grouping
        if softmax_entry_mode(s2.shape[1], s2.itemsize, T, False):
            segment_softmax_entries(s2, plan._idx, plan.num_rows, o2, T)
        else:
            ptr, perm = plan._grouping()
            segment_softmax_csr(s2, perm, ptr, o2, T)
        return out

    def segment_softmax_backward(self, y: np.ndarray, grad: np.ndarray, index: Any,
                                 num_segments: int) -> np.ndarray:
        plan = check_segment(y.shape, y.dtype, index, num_segments, "segment_softmax_backward")
        if grad.shape != y.shape or grad.dtype != y.dtype:
            raise ValueError("segment_softmax_backward(): grad must match y")
        out = empty(y.shape, y.dtype)
        y2, g2, o2, T = self._rows2d(y), self._rows2d(grad), self._rows2d(out), get_num_threads()
        if softmax_entry_mode(y2.shape[1], y2.itemsize, T, True):
            segment_softmax_backward_entries(y2, g2, plan._idx, plan.num_rows, o2, T)
        else:
            ptr, perm = plan._grouping()
            segment_softmax_backward_csr(y2, g2, perm, ptr, o2, T)
        return out

    def segment_mean(self, src: np.ndarray, index: Any, num_segments: int) -> np.ndarray:
        plan = check_segment(src.shape, src.dtype, index, num_segments, "segment_mean")
        ptr, perm = plan._grouping()
        n = plan.num_rows
        out = empty((n,) + src.shape[1:], src.dtype)
        segment_mean_csr(self._rows2d(src), perm, ptr, self._rows2d(out),
                                  get_num_threads())
        return out

    def segment_mean_backward(self, grad: np.ndarray, index: Any, num_segments: int) -> np.ndarray:
        plan = as_plan_checked(index, num_segments, grad, "segment_mean_backward")
        ptr, perm = plan._grouping()
        out = empty((len(plan),) + grad.shape[1:], grad.dtype)
        segment_mean_backward_csr(self._rows2d(grad), perm, ptr, self._rows2d(out),
                                           get_num_threads())
        return out

    def segment_max(self, src: np.ndarray, index: Any, num_segments: int) -> tuple[Any, Any]:
        plan = check_segment(src.shape, src.dtype, index, num_segments, "segment_max")
        ptr, perm = plan._grouping()
        n = plan.num_rows
        out = empty((n,) + src.shape[1:], src.dtype)
        arg = empty((n,) + src.shape[1:], np.int64)
        segment_max_csr(self._rows2d(src), perm, ptr, self._rows2d(out),
                                 self._rows2d(arg), get_num_threads())
        return out, arg

    def segment_max_backward(self, grad: np.ndarray, argmax: np.ndarray, index: Any,
                             num_entries: int) -> np.ndarray:
        plan = as_plan_checked(index, grad.shape[0], grad, "segment_max_backward")
        ptr, perm = plan._grouping()
        out = empty((num_entries,) + grad.shape[1:], grad.dtype)
        segment_max_backward_csr(self._rows2d(grad), self._rows2d(argmax), perm, ptr,
                                          self._rows2d(out), get_num_threads())
        return out

    # -------------------------------------------------------------- message
    def message_passing(self, x: np.ndarray, edge_index: Any, num_nodes: int,
                        weight: Any = None) -> np.ndarray:
        ei, H = check_message(x.shape, x.dtype, edge_index, num_nodes,
                              None if weight is None else weight.shape,
                              None if weight is None else weight.dtype)
        ptr, perm = ei.dst._grouping()
        out = empty((ei.num_dst,) + x.shape[1:], x.dtype)
        w = self._rows2d(weight) if weight is not None else _NO_WEIGHT[x.dtype.char]
        message_csr(self._rows2d(x), ei.src._idx, w, weight is not None, perm, ptr,
                             self._rows2d(out), H, get_num_threads())
        return out

    def message_passing_backward(self, grad: np.ndarray, x: np.ndarray, edge_index: Any,
                                 weight: Any, need_x: bool = True, need_weight: bool = True
                                 ) -> tuple[Any, Any]:
        ei, H = check_message(x.shape, x.dtype, edge_index, grad.shape[0],
                              None if weight is None else weight.shape,
                              None if weight is None else weight.dtype)
        if grad.shape != (ei.num_dst,) + x.shape[1:] or grad.dtype != x.dtype:
            raise ValueError("message_passing_backward(): grad has the wrong shape or dtype")
        gx = gw = None
        g2 = self._rows2d(grad)
        weighted = weight is not None
        w = self._rows2d(weight) if weighted else _NO_WEIGHT[x.dtype.char]
        if need_weight and weighted:
            gw = empty(weight.shape, weight.dtype)
        if need_x:
            # one pass over the source grouping gives grad_x and grad_weight
            ptr, perm = ei.src._grouping()
            gx = empty(x.shape, x.dtype)
            gw2 = gw.reshape(weight.shape[0], H) if gw is not None else _NO_WEIGHT[x.dtype.char]
            message_backward_csr(
                g2, self._rows2d(x), ei.dst._idx, w, weighted, gw is not None, perm, ptr,
                self._rows2d(gx), gw2, H, get_num_threads())
        elif gw is not None:
            sddmm_dot(g2, self._rows2d(x), ei.src._idx, ei.dst._idx,
                               gw.reshape(weight.shape[0], H), get_num_threads())
        return gx, gw


_NO_WEIGHT: dict[str, np.ndarray] = {
    "f": np.zeros((0, 1), np.float32), "d": np.zeros((0, 1), np.float64)}


def as_plan_checked(index: Any, num_rows: int, grad: np.ndarray, op: str) -> IndexPlan:
    if grad.dtype not in _KERNEL_DTYPES:
        raise TypeError(f"{op}(): gradient must be float32 or float64, got {grad.dtype}")
    return as_plan(index, num_rows, op)
