"""``rtx.Tensor``: the user-facing tensor (PyTorch-shaped).

A Tensor holds a primitive of its backend (``_value``), the ``Autodiff``
decorator of that backend (``_ad``), and its autograd state: ``requires_grad``,
``grad`` and the ``Node`` that made it (``grad_fn``).  Every op goes through
``_ad``, which records the tape when needed.
"""

from __future__ import annotations

import builtins
import math
import threading
from collections import namedtuple
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._autodiff.autodiff import register_tensor_type
from ._autodiff.backward import backward as _backward
from ._autodiff.grad_mode import is_grad_enabled
from ._autodiff.graph import Node, OutputEdge
from ._autodiff.ops import OPS as _OPS
from ._backend_state import autodiff_of_class, before_write, write_hooks
from ._device import CPU, check_device, device, is_device_like, unavailable
from ._dtypes import (
    I64_MAX,
    I64_MIN,
    bool_,
    check_dim,
    check_dims,
    check_dtype,
    check_int64,
    dtype_name,
    float32,
    float64,
    float_type,
    int32,
    int64,
    kind_rank,
    plain_ndarray,
    resolve_shape,
    result_type,
    shape_arg,
    to_host,
    torch_name,
)
from ._faces import TensorFaces
from ._faces import bind as _bind_faces
from ._kernels import SlotMaker, dlpack_export
from .backend.index_plan import as_plan

if TYPE_CHECKING:
    from ._autodiff.autodiff import Autodiff

MaxResult = namedtuple("MaxResult", ["values", "indices"])
_scalars = (int, float, bool)
_MATMUL = _OPS["matmul"]


class Tensor(TensorFaces):
    """An n-dimensional array on a backend, with autograd.

    The declared ops' methods and operators (``add``, ``__add__``, ``relu``,
    ``sum``, ...) are generated from their declarations (``rtx/_faces.py``,
    inherited from ``TensorFaces``); the irregular ones are written here.
    """

    __slots__ = ("_value", "_ad", "_rg", "_node", "grad", "_vc", "__weakref__")
    __array_priority__ = 1000  # numpy defers to our reflected operators

    _value: Any
    _ad: Autodiff
    _rg: bool
    _node: Node | OutputEdge | None  # OutputEdge: one output of a multi-output Function
    grad: Tensor | None
    _vc: list[int] | None  # version counter, shared by the tensors that alias one buffer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("create tensors with rtx.tensor(), rtx.from_numpy(), rtx.zeros(), ...")

    if TYPE_CHECKING:
        # ``object.__new__(cls)`` with ``_value, _ad, _rg, _node`` set to the
        # arguments and ``grad``, ``_vc`` to None: a ``SlotMaker``'s ``make`` (C),
        # bound below the class (one call per op; through the class 0.32 us where
        # the same in Python took 0.50-0.60, 2026-12-06)
        @classmethod
        def _make(
            cls, value: Any, ad: Autodiff, requires_grad: bool = False,
            node: Node | OutputEdge | None = None,
        ) -> Tensor: ...

    @property
    def _version(self) -> int:
        """How many in-place writes rtx made to this tensor's storage (as
        ``torch.Tensor._version``); shared by the tensors that alias it."""
        vc = self._vc
        return 0 if vc is None else vc[0]

    # ------------------------------------------------------------ metadata
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._ad.inner.shape(self._value))

    def size(self, dim: int | None = None) -> Any:
        s = self.shape
        return s if dim is None else s[dim]

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._ad.inner.dtype(self._value))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def backend(self) -> Any:
        """The backend this tensor's data lives on."""
        return self._ad.inner

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self) -> Node | None:
        node = self._node
        return node.node if isinstance(node, OutputEdge) else node  # multi-output Function

    # ------------------------------------------------------------ autograd
    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if self._node is not None:
            if requires_grad:  # a non-leaf already requires grad (as in PyTorch)
                return self
            raise RuntimeError(
                "requires_grad can only be changed on leaf tensors; use .detach() first"
            )
        if requires_grad and self.dtype.kind != "f":
            raise RuntimeError(
                f"only floating point tensors can require gradients, got {dtype_name(self.dtype)}"
            )
        self._rg = bool(requires_grad)
        return self

    def detach(self) -> Tensor:
        """The same data, cut from the tape (shares memory on the CPU backend)."""
        t = Tensor._make(self._value, self._ad)
        t._vc = version_counter(self)  # an alias: in-place writes through either are seen by both
        return t

    def backward(self, grad: Any = None, retain_graph: bool = False) -> None:
        """Accumulate gradients of this tensor into the leaves' ``.grad``.

        ``grad`` may be omitted only for a one-element tensor (it is then 1).
        """
        _backward(self, None if grad is None else [grad], retain_graph)

    # ------------------------------------------------------------ host I/O
    def numpy(self) -> np.ndarray:
        """The values as numpy (zero-copy on the CPU backend)."""
        return self._ad.inner.to_numpy(self._value)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            if copy is False:  # numpy 2's protocol: never a silent copy under copy=False
                raise ValueError(
                    f"Unable to avoid copy while creating an array as requested: the tensor "
                    f"is {a.dtype}, not {np.dtype(dtype)}")
            return a.astype(dtype)
        if copy:
            return a.copy()
        return a

    def item(self) -> Any:
        if self.numel() != 1:
            raise ValueError(
                f"item(): only one-element tensors can be converted, got shape {self.shape}"
            )
        return self.numpy().reshape(-1)[0].item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise ValueError("the truth value of a tensor with more than one element is ambiguous")
        return bool(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "iu" or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be used as an index")
        return int(self.item())

    def __len__(self) -> int:
        s = self.shape
        if not s:
            raise TypeError("len() of a 0-d tensor")
        return s[0]

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        body = np.array2string(
            np.asarray(self.numpy()), separator=", ", prefix="tensor(", threshold=200
        )
        extra = ""
        if self.dtype not in (float32, int64, bool_):
            extra += f", dtype={dtype_name(self.dtype)}"
        if self._node is not None:
            extra += f", grad_fn=<{self._node.name()}Backward>"
        elif self._rg:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    # ---------------------------------------------------------- operators
    def __matmul__(self, o: Any) -> Tensor:
        if not isinstance(o, Tensor):
            o = operand(o, self._ad, scalars=False)
        return matmul_checked(self, o)

    def __rmatmul__(self, o: Any) -> Tensor:
        return matmul_checked(operand(o, self._ad, scalars=False), self)

    def __pos__(self) -> Tensor:
        return self

    # --------------------------------------------------------- elementwise
    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """PyTorch's ``to``: ``to(dtype)``, ``to(device)``, ``to(device, dtype)``,
        ``to(other)`` (its dtype), keywords ``dtype=``, ``device=``,
        ``non_blocking=`` (ignored), ``copy=`` (a new tensor even when nothing
        changes).  The device is always the CPU (``"cpu"``, ``"cpu:0"``,
        ``rtx.device("cpu")``); any other is a RuntimeError."""
        dtype, copy = parse_to("Tensor.to", args, kwargs)
        if dtype is None:
            return self.clone() if copy else self
        dt = check_dtype(dtype)
        if dt == self.dtype:
            return self.clone() if copy else self
        if self._rg and dt.kind != "f":
            return Tensor._make(self._ad.inner.cast(self._value, dt), self._ad)
        return self._ad.apply(_OPS["cast"], self, dtype=dt)

    @property
    def device(self) -> device:
        """``device(type='cpu')``: rtx tensors live in host memory."""
        return CPU

    @property
    def is_cuda(self) -> builtins.bool:
        return False

    def cpu(self) -> Tensor:
        """``self`` (rtx tensors are on the CPU already, as ``torch.Tensor.cpu``)."""
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> Tensor:
        """Always a RuntimeError: rtx runs on CPUs only."""
        raise unavailable("cuda")

    def float(self) -> Tensor:
        return self.to(float32)

    def double(self) -> Tensor:
        return self.to(float64)

    def long(self) -> Tensor:
        return self.to(int64)

    def int(self) -> Tensor:
        return self.to(int32)

    def clone(self) -> Tensor:
        """A copy; on the tape it is the same tensor (gradients flow straight back)."""
        return self._ad.apply(_OPS["copy"], self)

    def is_contiguous(self) -> builtins.bool:
        """Whether the data are laid out C-contiguously (row-major, no gaps)."""
        return self._ad.inner.is_contiguous(self._value)

    def contiguous(self) -> Tensor:
        """``self`` when contiguous, else a contiguous copy (on the tape the same
        tensor: its gradient flows straight back, like ``clone``)."""
        if self._ad.inner.is_contiguous(self._value):
            return self
        return self._ad.apply(_OPS["copy"], self)

    # ---------------------------------------------------------- reductions
    def _reduce_checked(self, name: str, dim: Any, keepdim: bool) -> Tensor:
        """amax / amin: an empty reduced dim has no extremum (ValueError; PyTorch
        raises IndexError)."""
        d = check_dims(dim, self.ndim)
        shape = self.shape
        dims = range(len(shape)) if d is None else (d,) if isinstance(d, builtins.int) else d
        if any(shape[i] == 0 for i in dims) or (d is None and self.numel() == 0):
            raise ValueError(
                f"a{name}(): expected reduction dim to have non-zero size, got shape {shape}"
            )
        return self._ad.apply(_OPS[name], self, dim=d, keepdim=keepdim)

    def _extremum(self, name: str, dim: Any, keepdim: bool) -> Any:
        if dim is None:
            if self.numel() == 0:
                raise ValueError(f"{name}(): cannot reduce an empty tensor")
            return self._ad.apply(_OPS[name], self, dim=None, keepdim=False)
        d = check_dim(dim, self.ndim)
        if self.ndim == 0:  # dim 0 / -1 of a 0-d tensor: itself, at index 0 (PyTorch)
            values = self._ad.apply(_OPS[name], self, dim=None, keepdim=False)
            return MaxResult(values, Tensor._make(self._ad.inner.zeros((), int64), self._ad))
        if self.shape[d] == 0:
            raise ValueError(
                f"{name}(): cannot reduce over dim {d} of size 0 (shape {self.shape})"
            )
        values = self._ad.apply(_OPS[name], self, dim=d, keepdim=keepdim)
        B = self._ad.inner
        if name == "min" and self.dtype.kind != "f":
            # -x overflows at INT_MIN and bools cannot be negated: take the first
            # position equal to the minimum instead (ints and bools have no NaN).
            key = B.eq(self._value, B.min(self._value, d, True))
        elif name == "min":
            key = B.neg(self._value)      # first minimum; NaN wins, like numpy
        else:
            key = self._value
        idx = B.argmax(key, d, keepdim)
        return MaxResult(values, Tensor._make(idx, self._ad))

    def max(self, dim: Any = None, keepdim: bool = False) -> Any:
        """``max()`` -> 0-d tensor; ``max(dim)`` -> ``(values, indices)`` like PyTorch."""
        return self._extremum("max", dim, keepdim)

    def min(self, dim: Any = None, keepdim: bool = False) -> Any:
        return self._extremum("min", dim, keepdim)

    def amax(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return self._reduce_checked("max", dim, keepdim)

    def amin(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return self._reduce_checked("min", dim, keepdim)

    def argmax(self, dim: builtins.int | None = None, keepdim: bool = False) -> Tensor:
        d = None if dim is None else check_dim(dim, self.ndim)
        if d is not None and self.ndim == 0:
            d = None  # dim 0 / -1 of a 0-d tensor: index 0 (PyTorch)
        if self.numel() == 0 and (d is None or self.shape[d] == 0):
            raise ValueError("argmax(): cannot reduce an empty tensor")
        return Tensor._make(self._ad.inner.argmax(self._value, d, keepdim), self._ad)

    # --------------------------------------------------------------- shape
    def reshape(self, *shape: Any) -> Tensor:
        return self._ad.apply(_OPS["reshape"], self, shape=resolve_shape(shape_arg(shape),
                                                                          self.numel()))

    def view(self, *shape: Any) -> Tensor:
        """A view with a new shape: shares ``self``'s memory, never copies.

        Raises ``ValueError`` (PyTorch: ``RuntimeError``) when the strides do not
        allow it, e.g. merging the dims of a transposed tensor; ``reshape`` copies then.
        """
        new = resolve_shape(shape_arg(shape), self.numel())
        if not self._ad.inner.can_view(self._value, new):
            raise ValueError(
                f"view size {new} is not compatible with the input tensor's size {self.shape} "
                "and stride (at least one dimension spans across two contiguous subspaces); "
                "use .reshape(...) instead")
        return self._ad.apply(_OPS["reshape"], self, shape=new)

    def flatten(self) -> Tensor:
        return self.reshape(-1)

    def unsqueeze(self, dim: builtins.int) -> Tensor:
        s = list(self.shape)
        s.insert(check_dim(dim, len(s) + 1), 1)
        return self.reshape(tuple(s))

    def squeeze(self, dim: builtins.int | None = None) -> Tensor:
        s = self.shape
        if dim is None:
            return self.reshape(tuple(x for x in s if x != 1))
        d = check_dim(dim, len(s))
        return self.reshape(s[:d] + s[d + 1:]) if s[d] == 1 else self

    def permute(self, *dims: Any) -> Tensor:
        d = shape_arg(dims)
        nd = self.ndim
        # each dim checked (IndexError when out of range), never wrapped modulo nd
        d = tuple(check_dim(x, nd) for x in d) if nd else d
        if sorted(d) != list(range(nd)):
            raise ValueError(f"permute(): {d} is not a permutation of {nd} dims")
        return self._ad.apply(_OPS["permute"], self, dims=d)

    def transpose(self, dim0: builtins.int, dim1: builtins.int) -> Tensor:
        nd = self.ndim
        perm = list(range(nd))
        a, b = check_dim(dim0, nd), check_dim(dim1, nd)
        if nd:  # a 0-d tensor accepts dim 0 / -1 (like PyTorch) and has nothing to swap
            perm[a], perm[b] = perm[b], perm[a]
        return self._ad.apply(_OPS["permute"], self, dims=tuple(perm))

    @property
    def T(self) -> Tensor:  # noqa: N802 - PyTorch's name
        return self._ad.apply(_OPS["permute"], self, dims=tuple(reversed(range(self.ndim))))

    def expand(self, *shape: Any) -> Tensor:
        s = shape_arg(shape)
        own = self.shape
        lead = len(s) - len(own)
        if lead < 0:
            raise ValueError(f"expand(): the shape {s} has fewer dims than the tensor's {own}")
        for i, x in enumerate(s):
            if x < -1 or (x == -1 and i < lead):
                raise ValueError(
                    f"expand(): the expanded size {x} isn't allowed in "
                    + (f"a leading, non-existing dimension {i}" if x == -1 else f"dim {i}")
                )
        s = tuple(own[i - lead] if x == -1 else x for i, x in enumerate(s))
        return self.broadcast_to(s)

    def broadcast_to(self, shape: tuple[builtins.int, ...]) -> Tensor:
        shape = shape_arg((shape,))
        np.broadcast_shapes(self.shape, shape)  # raises ValueError when incompatible
        return self._ad.apply(_OPS["broadcast_to"], self, shape=shape)

    def __getitem__(self, key: Any) -> Tensor:
        k = _host_key(key)
        if self._rg and is_grad_enabled():
            k = _snapshot_key(k)  # kept for backward: later writes to it must not matter
        return self._ad.apply(_OPS["getitem"], self, key=k)

    # --------------------------------------------------------------- other
    def matmul(self, o: Any) -> Tensor:
        return self.__matmul__(o)

    def index_select(self, dim: builtins.int, indices: Any) -> Tensor:
        if dim != 0:
            raise NotImplementedError("index_select is implemented along dim 0")
        if not self._ad.inner.shape(self._value):
            raise ValueError("index_select(): x must have at least 1 dimension, got a 0-d tensor")
        plan = as_plan(indices, self.shape[0], "index_select")  # checked once: the tape keeps it
        return self._ad.apply(_OPS["index_select"], self, plan)

    # ------------------------------------------------- in-place (no tape)
    def _inplace(self, name: str, other: Any) -> Tensor:
        """``self op= other`` written into this tensor's buffer (not recorded on
        the tape); bumps the storage's version counter."""
        if is_grad_enabled():
            if self._rg:
                raise RuntimeError(
                    f"{name}_(): a tensor that requires grad cannot be modified in place "
                    "outside rtx.no_grad()"
                )
            if isinstance(other, Tensor) and other._rg:
                raise RuntimeError(
                    f"{name}_(): the operand requires grad, but in-place ops are not "
                    "recorded on the tape (its gradient would be lost); write the "
                    "out-of-place form (a = a + b) or run it inside rtx.no_grad()"
                )
        o = operand(other, self._ad)
        if name in _ARITH:
            _check_inplace_cast(name, self.dtype, o)
        B = self._ad.inner
        if isinstance(o, Tensor):
            if o._ad is self._ad:
                ov = o._value
            elif self._ad.accepts(o._ad):   # a Fusion's tensor into its inner's, or back
                ov = B.adopt(o._value, o._ad.inner)
            else:
                raise TypeError(f"{name}_(): tensors live on different backends")
        else:
            ov = o
        prepare_write(self)
        if name == "pow":  # computed, then copied in (the backends have no in-place pow)
            ov, name = B.pow(self._value, ov), "copy"
            if tuple(B.shape(ov)) != self.shape:
                raise ValueError(f"pow_(): result shape {tuple(B.shape(ov))} != {self.shape}")
        self._value = B.inplace(name, self._value, ov)
        bump_version(self)
        return self

    def _augmented(self, name: str, sym: str, other: Any) -> Tensor:
        """``x op= y``: in place (same object, views see it) unless the update
        would need the tape; then recorded out of place and the name rebound."""
        if is_grad_enabled() and (self._rg or (isinstance(other, Tensor) and other._rg)):
            if self._rg and self._node is None:
                raise RuntimeError(
                    f"a leaf tensor that requires grad is being used in an in-place "
                    f"operation (x {sym}= ...); run it inside rtx.no_grad() (as an "
                    f"optimiser step does) or write x = x {sym} ..."
                )
            # recorded on the tape, out of place
            return self._ad.apply(_OPS[name], self, operand(other, self._ad))
        return self._inplace(name, other)

    def __iadd__(self, o: Any) -> Tensor:
        return self._augmented("add", "+", o)

    def __isub__(self, o: Any) -> Tensor:
        return self._augmented("sub", "-", o)

    def __imul__(self, o: Any) -> Tensor:
        return self._augmented("mul", "*", o)

    def __itruediv__(self, o: Any) -> Tensor:
        return self._augmented("div", "/", o)

    def __ipow__(self, o: Any) -> Tensor:
        return self._augmented("pow", "**", o)

    def pow_(self, other: Any) -> Tensor:
        return self._inplace("pow", other)

    def add_(self, other: Any, alpha: builtins.float = 1.0) -> Tensor:
        if alpha != 1.0:
            other = other * alpha
        return self._inplace("add", other)

    def sub_(self, other: Any, alpha: builtins.float = 1.0) -> Tensor:
        if alpha != 1.0:
            other = other * alpha
        return self._inplace("sub", other)

    def mul_(self, other: Any) -> Tensor:
        return self._inplace("mul", other)

    def div_(self, other: Any) -> Tensor:
        return self._inplace("div", other)

    def copy_(self, src: Any) -> Tensor:
        return self._inplace("copy", src)

    def zero_(self) -> Tensor:
        return self._inplace("fill", 0)  # a fill: NaN and inf become 0 too (not x * 0)

    def fill_(self, value: builtins.float) -> Tensor:
        return self._inplace("fill", value)

    # ------------------------------------------------------- copy / pickle
    def __deepcopy__(self, memo: dict[builtins.int, Any]) -> Tensor:
        """A new leaf on the same backend with copied data (and ``grad``), as in PyTorch;
        the subclass (``Parameter``) and ``requires_grad`` are kept."""
        if self._node is not None:
            raise RuntimeError(
                "only leaf tensors (graph leaves) support deepcopy (as in PyTorch); "
                "use t.detach().clone() for a copy of a non-leaf"
            )
        import copy as _copy

        # type(self): a Parameter stays a Parameter (copy.deepcopy of a model)
        t = type(self)._make(self._ad.inner.copy(self._value), self._ad, self._rg)
        memo[id(self)] = t
        if self.grad is not None:
            t.grad = _copy.deepcopy(self.grad, memo)
        return t

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickles as its values, backend class, ``requires_grad`` and ``grad``;
        unpickled onto the matching backend in use (always the one CPU backend)."""
        data = np.array(self.numpy(), copy=True)
        return (_rebuild, (data, type(self._ad.inner), self._rg, self.grad))

    # ------------------------------------------------------------- DLPack
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[Any, Any] | None = None,
        dl_device: tuple[Any, Any] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule of this tensor's memory (zero-copy on the CPU backend).

        Other backends export a host copy (through ``to_numpy``).  Like PyTorch,
        a tensor that requires grad must be ``.detach()``ed first.  A view with
        negative strides (``t[:, ::-1]``) raises ``BufferError`` unless
        ``copy=True``: consumers cannot take such strides (PyTorch aborts).
        """
        if self._rg:
            raise RuntimeError(
                "can't export a tensor that requires grad by DLPack; use tensor.detach()"
            )
        a = self._ad.inner.to_numpy(self._value)
        return dlpack_export(a, stream, max_version, dl_device, copy, a is not self._value)

    def __dlpack_device__(self) -> tuple[Any, Any]:
        """``(kDLCPU, 0)``: every rtx backend keeps its data in host memory."""
        return (1, 0)


# ------------------------------------------------------------------ helpers
# Tensor._make (see its declaration in the class): C's object.__new__ and slot stores
Tensor._make = classmethod(SlotMaker(  # type: ignore[method-assign, assignment]
    Tensor, ("_value", "_ad", "_rg", "_node", "grad", "_vc"), (False, None, None, None)).make)


def _rebuild(data: np.ndarray, backend_cls: Any, requires_grad: bool, grad: Any) -> Tensor:
    """Unpickle a tensor (see ``Tensor.__reduce_ex__``)."""
    ad = autodiff_of_class(backend_cls)
    B = ad.inner
    t = Tensor._make(B.copy(B.from_numpy(plain_ndarray(np.asarray(data)))), ad, requires_grad)
    if grad is not None:
        if grad._ad is not ad:
            grad = _rebuild(grad.numpy(), backend_cls, False, None)
        t.grad = grad
    return t


def _host_key_part(k: Any) -> Any:
    if isinstance(k, Tensor):
        return k.numpy()
    if isinstance(k, np.ndarray) and type(k) is not np.ndarray:
        return plain_ndarray(k, "tensor index")  # a masked index array is refused
    return k


def _snapshot_key(key: Any) -> Any:
    """Private copies of the index arrays in a (host) key."""
    if isinstance(key, np.ndarray):
        return key.copy()
    if isinstance(key, tuple):
        return tuple(k.copy() if isinstance(k, np.ndarray) else k for k in key)
    return key


def _host_key(key: Any) -> Any:
    """Tensors inside an index key become numpy arrays."""
    if isinstance(key, tuple):
        return tuple(_host_key_part(k) for k in key)
    if isinstance(key, list):
        return np.asarray(key)
    return _host_key_part(key)


def matmul_checked(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with numpy/PyTorch semantics (1-D, 2-D, batched)."""
    sa, sb = a._ad.inner.shape(a._value), b._ad.inner.shape(b._value)
    na, nb = len(sa), len(sb)
    if na == 2 and nb == 2 and sa[1] == sb[0]:   # (the common case: nothing else to ask)
        return a._ad.apply(_MATMUL, a, b)        # (apply checks the backends)
    sa, sb = tuple(sa), tuple(sb)
    if na == 0 or nb == 0:
        raise ValueError("matmul: both operands need at least 1 dimension")
    if na == 1 and nb == 1:
        if sa != sb:
            raise ValueError(f"matmul: shapes {sa} and {sb} do not align")
        return (a.reshape(1, -1) @ b.reshape(-1, 1)).reshape(())
    if na == 1:
        return matmul_checked(a.reshape(1, -1), b).squeeze(-2)
    if nb == 1:
        return matmul_checked(a, b.reshape(-1, 1)).squeeze(-1)
    if sa[-1] != sb[-2]:
        raise ValueError(
            f"matmul: shapes {sa} and {sb} do not align ({sa[-1]} != {sb[-2]})"
        )
    if na > 2 and nb > 2:  # only two batch shapes can disagree (~2 us saved)
        np.broadcast_shapes(sa[:-2], sb[:-2])
    return a._ad.apply(_MATMUL, a, b)


def parse_to(where: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, bool]:
    """The arguments of ``Tensor.to`` / ``Module.to`` (PyTorch's forms) -> ``(dtype or
    None, copy)``; the device is checked (RuntimeError for any but the CPU) and
    ``non_blocking`` / ``memory_format`` are accepted and ignored."""
    kw = dict(kwargs)
    dtype = kw.pop("dtype", None)
    dev = kw.pop("device", None)
    non_blocking = kw.pop("non_blocking", False)
    copy = kw.pop("copy", False)
    kw.pop("memory_format", None)
    if kw:
        raise TypeError(f"{where}() got an unexpected keyword argument {next(iter(kw))!r}")
    rest = list(args)
    if rest:
        first = rest[0]
        if isinstance(first, Tensor):
            if dtype is not None:
                raise TypeError(f"{where}(): pass a tensor or dtype=, not both")
            dtype = first.dtype
            rest.pop(0)
        elif is_device_like(first) or (isinstance(first, int)
                                       and not isinstance(first, builtins.bool)):
            if dev is not None:
                raise TypeError(f"{where}(): device given twice")
            dev = first
            rest.pop(0)
    if rest and not isinstance(rest[0], builtins.bool):
        if dtype is not None:
            raise TypeError(f"{where}(): dtype given twice")
        dtype = rest.pop(0)
    if len(rest) > 2 or not all(isinstance(b, builtins.bool) for b in rest):
        raise TypeError(f"{where}(): unexpected arguments {tuple(rest)!r} (expected "
                        "device, dtype, non_blocking, copy)")
    if rest:
        non_blocking = rest[0]
    if len(rest) == 2:
        copy = rest[1]
    del non_blocking
    if dev is not None:
        check_device(dev)
    return dtype, builtins.bool(copy)


def as_tensor(data: Any, ad: Autodiff, dtype: Any = None) -> Tensor:
    a = to_host(data, dtype)
    B = ad.inner
    return Tensor._make(B.copy(B.from_numpy(a)), ad)


def operand(x: Any, ad: Autodiff, scalars: bool = True) -> Any:
    """A tensor or a Python scalar usable as the other operand of an op."""
    if isinstance(x, Tensor):
        return x
    if scalars:
        if isinstance(x, np.generic):
            # a numpy scalar acts as the Python number of its kind (PyTorch): it
            # must not pass as one (np.float64 is a float subclass) and then
            # promote like a float64 array in numpy (float32 * np.float64(2) is
            # float32, as in PyTorch)
            if x.dtype.kind in "biuf":
                v = x.item()
                if type(v) is int and not I64_MIN <= v <= I64_MAX:
                    check_int64(v)
                return v
        elif isinstance(x, _scalars):
            if type(x) is int and not I64_MIN <= x <= I64_MAX:
                check_int64(x)
            return x
    if isinstance(x, (np.ndarray, Sequence, np.generic, int, float)) and not isinstance(x, str):
        return as_tensor(x, ad)
    raise TypeError(f"unsupported operand type {type(x).__name__} for an rtx tensor op")


_ARITH = frozenset(("add", "sub", "mul", "div", "pow"))
_vc_lock = threading.Lock()


def _check_inplace_cast(name: str, dst: np.dtype, o: Any) -> None:
    """PyTorch's rule for in-place arithmetic: the result type (``result_type``)
    may not be of a higher kind (bool < integer < float) than the tensor written
    into."""
    res = result_type(dst, o)
    if name == "div":
        res = float_type(res)
    if kind_rank(res) > kind_rank(dst):
        raise RuntimeError(
            f"{name}_(): result type {torch_name(res)} can't be cast to the "
            f"desired output type {torch_name(dst)}"
        )


def version_counter(t: Tensor) -> list[int]:
    """``t``'s version counter, created on first need."""
    vc = t._vc
    if vc is None:
        vc = t._vc = [0]
    return vc


def prepare_write(t: Tensor) -> None:
    """Before an in-place write to ``t``'s buffer: whatever reads it lazily (a
    Fusion's pending expressions over its backend) finishes first."""
    if write_hooks:
        before_write(t._ad.inner)


def bump_version(t: Tensor) -> None:
    """Record one in-place write to ``t``'s storage."""
    vc = t._vc
    if vc is None:
        t._vc = [1]
        return
    with _vc_lock:
        vc[0] += 1


def _inplace_guard(name: str, t: Tensor, *inputs: Any) -> None:
    """What an in-place face (``index_add_``) may not do: write a tensor that
    requires grad, or take an input that does, while grad mode is on."""
    if is_grad_enabled():
        if t._rg:
            raise RuntimeError(
                f"{name}(): a tensor that requires grad cannot be modified in place "
                "outside rtx.no_grad()")
        if any(isinstance(x, Tensor) and x._rg for x in inputs):
            raise RuntimeError(
                f"{name}(): an input requires grad, but in-place ops are not recorded on "
                "the tape (its gradient would be lost); use the out-of-place form or run it "
                "inside rtx.no_grad()")


def _inplace_write(name: str, t: Tensor, res: Tensor) -> Tensor:
    """Write ``res`` (the out-of-place result) into ``t``'s buffer; bump its version."""
    if kind_rank(res.dtype) > kind_rank(t.dtype):
        raise RuntimeError(f"{name}(): result type {torch_name(res.dtype)} can't be cast to "
                           f"the desired output type {torch_name(t.dtype)}")
    prepare_write(t)
    t._value = t._ad.inner.inplace("copy", t._value, res._value)
    bump_version(t)
    return t


register_tensor_type(Tensor)
_bind_faces(Tensor=Tensor, _operand=operand, _inplace_guard=_inplace_guard,
            _inplace_write=_inplace_write)
