"""Dtypes, the one promotion rule, host conversion and shape checks (the bottom layer).

Everything here is plain Python over numpy: no rtx module below it, so the
kernels' callers (``rtx.backend``), the engine, ``Tensor`` and the public faces
all use the same definitions.

**Promotion** (``result_type``) is PyTorch's (``torch.result_type``): operands
fall in three classes, dimensioned tensors (``ndim >= 1``), zero-dim tensors,
and Python scalars (``bool`` / ``int`` / ``float``; a numpy scalar counts as the
Python number of its kind).  Within a class dtypes promote as
``torch.promote_types`` (bool < int32 < int64, float32 < float64, any float
over any integer); a class only changes the result when it is of a higher
*kind* (bool < integer < float) than the classes above it.  A Python float
stands for the default float dtype (float32), a Python int for int64, a bool
for bool.  So ``int64 tensor * 1.5`` is float32, ``float32 tensor *
float64 zero-dim tensor`` is float32, ``int32 tensor + 1`` is int32 and
``where(c, 1.5, 2.5)`` is float32 -- where numpy would say float64.  Ops whose
value is a float whatever the input (``exp``, true division, ``mean``, ...)
take ``float_type`` of the promoted dtype: float32 for integers and bools.
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)
SUPPORTED_DTYPES = (float32, float64, int32, int64, bool_)
FLOAT_DTYPES = (float32, float64)
INDEX_DTYPES = (int32, int64)
DEFAULT_FLOAT = float32      # what a Python float (and an int op with a float value) becomes

_NAMES = {float32: "float32", float64: "float64", int32: "int32", int64: "int64",
          bool_: "bool"}
_TORCH_NAMES = {float32: "Float", float64: "Double", int32: "Int", int64: "Long",
                bool_: "Bool"}
I64_MIN, I64_MAX = -(2**63), 2**63 - 1

__all__ = [
    "DEFAULT_FLOAT", "FLOAT_DTYPES", "INDEX_DTYPES", "SUPPORTED_DTYPES", "bool_",
    "check_dim", "check_dims", "check_dtype", "check_int64", "check_rows", "contiguous",
    "dtype_name", "float32", "float64", "float_type", "int32", "int64", "kind_rank",
    "plain_ndarray", "promote_types", "resolve_shape", "result_type", "shape_arg",
    "to_host", "torch_name",
]


# ------------------------------------------------------------------ names
def dtype_name(dt: Any) -> str:
    """``"rtx.float32"``: a dtype as rtx prints it."""
    return "rtx." + _NAMES.get(np.dtype(dt), str(dt))


def torch_name(dt: Any) -> str:
    """PyTorch's scalar-type name (``Float``, ``Long``, ...) for error messages."""
    d = np.dtype(dt)
    return _TORCH_NAMES.get(d, str(d))


def check_dtype(dtype: Any) -> np.dtype:
    """``dtype`` (anything ``np.dtype`` parses) as one of rtx's five dtypes, else TypeError."""
    try:
        dt = np.dtype(dtype)
    except Exception:  # numpy's parser raises TypeError, but also SyntaxError ("f4,(") and more
        raise TypeError(f"unsupported dtype {dtype!r}") from None
    if dt not in SUPPORTED_DTYPES:
        raise TypeError(
            f"unsupported dtype {dt}; rtx tensors are float32, float64, int32, int64 or bool"
        )
    return dt


# -------------------------------------------------------------- promotion
_RANK = {"b": 0, "i": 1, "u": 1, "f": 2}


def kind_rank(dt: np.dtype) -> int:
    """0 for bool, 1 for integers, 2 for floats (PyTorch's categories)."""
    return _RANK[dt.kind]


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """``torch.promote_types`` over rtx's dtypes: the higher kind wins, then the wider."""
    if a == b:
        return a
    ra, rb = _RANK[a.kind], _RANK[b.kind]
    if ra != rb:
        return a if ra > rb else b
    return a if a.itemsize >= b.itemsize else b


_PY_SCALAR = {bool: bool_, int: int64, float: DEFAULT_FLOAT}


def _classify(x: Any) -> tuple[int, np.dtype]:
    """(class, dtype): class 0 a dimensioned tensor, 1 a zero-dim tensor, 2 a scalar."""
    t = type(x)
    py = _PY_SCALAR.get(t)
    if py is not None:
        return 2, py
    if isinstance(x, np.dtype):
        return 0, x
    if isinstance(x, np.generic):  # the Python number of its kind (as rtx's operands)
        k = x.dtype.kind
        return 2, bool_ if k == "b" else int64 if k in "iu" else DEFAULT_FLOAT
    if isinstance(x, (bool, int, float)):  # subclasses (IntEnum, ...)
        return 2, bool_ if isinstance(x, bool) else int64 if isinstance(x, int) else (
            DEFAULT_FLOAT)
    nd = getattr(x, "ndim", None)
    if nd is None:
        nd = len(x.shape)
    return (0 if nd else 1), np.dtype(x.dtype)


def result_type(*operands: Any) -> np.dtype:
    """PyTorch's result dtype of an op over ``operands`` (see the module docstring).

    An operand is an array or tensor (anything with ``dtype`` and ``ndim`` or
    ``shape``), a ``np.dtype`` (a dimensioned tensor of it), or a Python /
    numpy scalar.
    """
    classes: list[np.dtype | None] = [None, None, None]
    for x in operands:
        c, dt = _classify(x)
        cur = classes[c]
        classes[c] = dt if cur is None else promote_types(cur, dt)
    res = _combine(classes[0], _combine(classes[1], classes[2]))
    if res is None:
        raise TypeError("result_type() needs at least one operand")
    return res


def _combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """PyTorch's ``combine_categories``: a lower class changes the result only when
    it is of a higher kind (or the higher class is bool)."""
    if higher is None:
        return lower
    if lower is None or higher.kind == "f":
        return higher
    if higher.kind == "b" or lower.kind == "f":
        return promote_types(higher, lower)
    return higher


def float_type(dt: np.dtype) -> np.dtype:
    """The dtype of a float-valued op (``exp``, true division, ``mean``) on ``dt``:
    ``dt`` for floats, the default float32 for integers and bools (PyTorch)."""
    return dt if dt.kind == "f" else DEFAULT_FLOAT


# --------------------------------------------------------------- scalars, shapes
def check_int64(x: int) -> int:
    """A Python int that fits in int64, else OverflowError (rtx never wraps integers)."""
    if not I64_MIN <= x <= I64_MAX:
        raise OverflowError(
            f"Python int {x} does not fit in int64 (rtx, like PyTorch, keeps integer "
            "scalars in 64 bits and never wraps them)"
        )
    return x


def check_rows(num_rows: Any, op: str, what: str = "num_rows") -> int:
    """The one row-count check: ``num_rows`` as a non-negative int (TypeError for a
    non-int or a bool, ValueError when negative, MemoryError past what this
    platform can index)."""
    if isinstance(num_rows, (bool, np.bool_)):
        raise TypeError(f"{op}(): {what} must be an int, got bool")
    try:
        n = operator.index(num_rows)
    except TypeError:
        raise TypeError(f"{op}(): {what} must be an int, got {type(num_rows).__name__}") from None
    if n < 0:
        raise ValueError(f"{op}(): {what} must be >= 0, got {n}")
    if n > sys.maxsize:
        raise MemoryError(f"{op}(): {what} = {n} is too large for this platform")
    return n


def shape_arg(shape: tuple[Any, ...]) -> tuple[int, ...]:
    """Accept ``f(2, 3)`` and ``f((2, 3))`` like PyTorch."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    try:
        return tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"shape must be a sequence of ints, got {shape!r}") from None


def check_dim(dim: Any, ndim: int) -> int:
    """``dim`` wrapped into ``[0, ndim)`` (a 0-d tensor takes 0 and -1), else IndexError."""
    try:
        d = operator.index(dim)
    except TypeError:
        raise TypeError(f"dim must be an int, got {type(dim).__name__}") from None
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"dim {d} is out of range for a tensor of {ndim} dims")
    return d % n


def check_dims(dim: Any, ndim: int) -> Any:
    """A reduction's ``dim`` (None, an int or a sequence of distinct ints), wrapped."""
    if dim is None:
        return None
    ds: Any
    if isinstance(dim, (tuple, list)):
        ds = tuple(check_dim(d, ndim) for d in dim)
        if len(set(ds)) != len(ds):
            raise ValueError(f"dim {tuple(dim)} names a dimension twice")
    else:
        ds = check_dim(dim, ndim)
    # dim 0 / -1 (or (0,)) of a 0-d tensor reduces over nothing: all of it (PyTorch)
    return None if ndim == 0 else ds


def resolve_shape(shape: tuple[int, ...], numel: int) -> tuple[int, ...]:
    """A reshape target with its ``-1`` resolved, checked against ``numel``."""
    if shape.count(-1) > 1:
        raise ValueError("reshape: only one dimension can be -1")
    if -1 in shape:
        rest = math.prod(s for s in shape if s != -1)
        if rest == 0 or numel % rest:
            raise ValueError(f"reshape: cannot infer -1 in {shape} for {numel} elements")
        shape = tuple(numel // rest if s == -1 else s for s in shape)
    if any(s < 0 for s in shape) or math.prod(shape) != numel:
        raise ValueError(f"reshape: shape {shape} is invalid for a tensor of {numel} elements")
    return shape


# --------------------------------------------------------------- host conversion
def contiguous(a: Any, dtype: Any = None) -> np.ndarray:
    """``a`` as a C-contiguous array, keeping 0-d arrays 0-d (unlike np.ascontiguousarray)."""
    return np.require(np.asarray(a, dtype=dtype), requirements="C")


def plain_ndarray(a: np.ndarray, what: str = "rtx") -> np.ndarray:
    """``a`` as a base-class ``numpy.ndarray`` over the same memory.

    numpy subclasses change what operators and reductions mean (``np.matrix``:
    ``*`` is a matrix product and results stay 2-D; ``np.memmap``: a subclass
    the kernels' fast paths do not recognise), so every array entering rtx is
    viewed as a plain ndarray.  ``np.matrix`` keeps its 2-D shape.  A masked
    array is accepted only when nothing is masked: rtx tensors have no mask,
    and silently using the hidden values under the mask would be wrong.
    """
    if type(a) is np.ndarray:
        return a
    if isinstance(a, np.ma.MaskedArray):
        if np.ma.is_masked(a):
            raise TypeError(
                f"{what}: a numpy masked array with masked elements cannot become a tensor "
                "(rtx tensors have no mask); fill it first (a.filled(value)) or pass "
                "a.data to use the values under the mask"
            )
        a = np.ma.getdata(a)
    return a.view(np.ndarray)


_tensor_types: tuple[type, ...] = ()


def register_tensor_type(cls: type) -> None:
    """Called once (through the engine's registration) with ``rtx.Tensor``: the
    type whose instances ``to_host`` reads by ``.numpy()``, this module sitting
    below it."""
    global _tensor_types
    _tensor_types = (cls,)


def to_host(data: Any, dtype: Any = None) -> np.ndarray:
    """``data`` as a numpy array of a supported dtype (PyTorch's inference rules)."""
    if _tensor_types and isinstance(data, _tensor_types):
        a = data.numpy()  # type: ignore[attr-defined]
    elif isinstance(data, np.ndarray):
        a = plain_ndarray(data, "rtx.tensor")
    else:
        try:
            a = np.asarray(data)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"cannot build a tensor from {type(data).__name__}: {exc}") from None
        kind = a.dtype.kind
        # PyTorch's dtype (None: let numpy's inference decide, as for a bare Python number)
        want = _infer_dtype(data) if dtype is None and kind in "biufO" else None
        if want is not None and want.kind == "f":
            pass  # Python ints of any size become floats here (as in PyTorch)
        elif kind == "u" or (kind == "O" and (_all_ints(a) or want is not None)):
            _check_int64_range(a)  # Python ints beyond int64 never wrap
        elif (kind == "f" and a.size and a.dtype.itemsize >= 4
              and not np.nanmax(np.abs(a)) < 2.0**63):
            # numpy turns [1, 2**63] into float64: find such ints among the values
            _check_int64_range(np.asarray(data, dtype=object))
        if dtype is None:
            if want is not None:
                if kind == "O":
                    if not _all_numbers(a):
                        raise TypeError(
                            f"cannot build a tensor from data of type {type(data).__name__} "
                            f"(numpy inferred {a.dtype})"
                        )
                    a = np.asarray(a.tolist(), dtype=want)
                elif a.dtype != want:
                    a = a.astype(want)
            elif kind == "f" or (kind == "O" and _all_numbers(a)):
                a = a.astype(float32) if kind == "f" else np.asarray(a.tolist(), dtype=float32)
            elif kind in "iu":
                a = a.astype(int64)
            elif kind == "b":
                pass
            else:
                raise TypeError(
                    f"cannot build a tensor from data of type {type(data).__name__} "
                    f"(numpy inferred {a.dtype})"
                )
    if dtype is not None:
        dt = check_dtype(dtype)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"cannot convert data of dtype {a.dtype} to {dt}")
        return a.astype(dt)
    if a.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"unsupported dtype {a.dtype}; rtx tensors are float32, float64, int32, int64 or "
            "bool (pass dtype= to convert)"
        )
    return a


# PyTorch's inference (torch.tensor): each leaf has a dtype -- a Python bool
# bool, int int64, float the default float32; a numpy scalar, a numpy array or
# an rtx tensor inside a sequence its own dtype -- and the result promotes them
# with torch.promote_types: floats win over integers whatever their width
# (int64 with float32 is float32, unlike numpy), the wider float or integer
# wins within a kind, bool loses to everything.  Dtypes rtx lacks are widened
# within their kind: float16 -> float32, other integers -> int64.
_PY_LEAVES = {bool: bool_, int: int64, float: float32}


def _leaf_dtypes(data: Any) -> set[np.dtype] | None:
    """The dtypes of the leaves of a (nested) list / tuple, or None when a leaf is
    of a kind this walk does not know (numpy's own inference then decides)."""
    found: set[np.dtype] = set()
    seen: set[int] = set()
    stack = [data]
    arrays: tuple[type, ...] = (np.ndarray, *_tensor_types)
    while stack:
        seq = stack.pop()
        if id(seq) in seen:   # a repeated (or self-containing) sub-list
            continue
        seen.add(id(seq))
        for t in set(map(type, seq)):
            py = _PY_LEAVES.get(t)
            if py is not None:
                found.add(py)
            elif t is list or t is tuple:
                stack.extend(v for v in seq if type(v) is t)
            elif issubclass(t, np.generic):
                found.add(np.dtype(t))
            elif issubclass(t, arrays):
                found.update(_dtype_of(v) for v in seq if type(v) is t)
            else:
                return None
    return found


def _dtype_of(v: Any) -> np.dtype:
    return np.dtype(v.dtype)


def _widen(dt: np.dtype) -> np.dtype | None:
    """``dt`` if rtx has it, else the rtx dtype of its kind that holds it (None
    for kinds rtx has no dtype of: complex, strings, ...)."""
    if dt in SUPPORTED_DTYPES:
        return dt
    if dt.kind == "f" and dt.itemsize <= 8:
        return float32 if dt.itemsize < 4 else float64
    if dt.kind in "iu":
        return int64
    return None


def _infer_dtype(data: Any) -> np.dtype | None:
    """The dtype PyTorch gives ``torch.tensor(data)`` for a numpy scalar or a
    (nested) list / tuple, widened to an rtx dtype; None: not such data, or a
    kind rtx has no dtype of."""
    if isinstance(data, np.generic):
        return _widen(data.dtype)
    if type(data) is not list and type(data) is not tuple:
        return None
    leaves = _leaf_dtypes(data)
    if not leaves:
        return None                     # empty, or unknown leaves: numpy decides
    floats = [d for d in leaves if d.kind == "f"]
    if floats:
        return _widen(max(floats, key=lambda d: d.itemsize))
    ints = [d for d in leaves if d.kind in "iu"]
    if ints:
        if len(ints) == 1:
            return _widen(ints[0])
        try:
            r = np.result_type(*ints)   # integer widening (uint8 + int8 -> int16)
        except TypeError:
            return None
        return _widen(r) if r.kind in "iu" else int64   # uint64 + int: int64, range-checked
    if all(d.kind == "b" for d in leaves):
        return bool_
    return None


def _all_ints(a: np.ndarray) -> bool:
    return all(type(v) is int for v in a.reshape(-1).tolist())


def _check_int64_range(a: np.ndarray) -> None:
    """Python ints that numpy kept as uint64 or objects: OverflowError past int64."""
    for v in a.reshape(-1).tolist():
        if type(v) is int and not -(2**63) <= v < 2**63:
            raise OverflowError(
                f"Python int {v} does not fit in int64 (rtx, like PyTorch, does not wrap "
                "integers; pass floats, e.g. float(v), for a float tensor)"
            )


def _all_numbers(a: np.ndarray) -> bool:
    return all(isinstance(v, (int, float)) or (isinstance(v, np.generic)
                                                and v.dtype.kind in "biuf")
               for v in a.reshape(-1).tolist())


def is_sequence_data(x: Any) -> bool:
    """Whether ``x`` is array-like data an op may turn into a tensor operand."""
    return isinstance(x, (np.ndarray, Sequence, np.generic, int, float)) and not isinstance(
        x, str)
