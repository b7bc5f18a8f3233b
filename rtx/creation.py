"""Creating tensors: from data, from numpy, and filled / random ones."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _backend_state
from ._device import check_device
from ._dtypes import (
    SUPPORTED_DTYPES,
    check_dtype,
    check_int64,
    contiguous,
    float32,
    int64,
    plain_ndarray,
    shape_arg,
    to_host,
)
from .tensor import Tensor


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False, *,
           device: Any = None) -> Tensor:
    """A new tensor holding a copy of ``data``.

    The dtype is PyTorch's: a numpy array or numpy scalar keeps its dtype (float16
    becomes float32, integers rtx lacks int64); Python floats become float32, ints
    int64, bools bool; a list promotes its leaves as ``torch.promote_types`` does
    (a float of any width wins over integers).  See docs/pytorch-parity.md.
    ``device``: None or the CPU (``"cpu"``, ``rtx.device("cpu")``), as everywhere in rtx.
    """
    check_device(device)
    ad = _backend_state.default_autodiff()
    a = to_host(data, dtype)
    B = ad.inner
    t = Tensor._make(B.copy(B.from_numpy(a)), ad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def from_numpy(a: np.ndarray) -> Tensor:
    """A tensor sharing ``a``'s memory (and keeping ``a`` alive).

    Memory is shared when ``a`` is C-contiguous, aligned, native-endian and of
    a supported dtype; otherwise the values are copied.
    """
    if not isinstance(a, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(a).__name__}")
    a = plain_ndarray(a, "from_numpy")  # memmap / matrix: a plain view of the same memory
    ad = _backend_state.default_autodiff()
    B = ad.inner
    if (
        a.dtype in SUPPORTED_DTYPES
        and a.dtype.isnative
        and a.flags.c_contiguous
        and a.flags.aligned
    ):
        return Tensor._make(B.from_numpy(a), ad)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"from_numpy: unsupported dtype {a.dtype}")
    host = contiguous(a, dtype=a.dtype.newbyteorder("="))
    if host.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"from_numpy: unsupported dtype {a.dtype}; rtx tensors are float32, float64, int32, "
            "int64 or bool"
        )
    return Tensor._make(B.copy(B.from_numpy(host)), ad)


def _new(shape: tuple[Any, ...], dtype: Any, requires_grad: bool, fill: Any,
         device: Any = None) -> Tensor:
    check_device(device)
    ad = _backend_state.default_autodiff()
    s = shape_arg(shape)
    if any(d < 0 for d in s):
        raise ValueError(f"negative dimension in shape {s}")
    dt = check_dtype(float32 if dtype is None else dtype)
    if type(fill) is int:
        check_int64(fill)
    B = ad.inner
    if fill is None:
        value = B.empty(s, dt)
    elif fill == 0:
        value = B.zeros(s, dt)
    else:
        value = B.full(s, fill, dt)
    t = Tensor._make(value, ad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def empty(*shape: Any, dtype: Any = None, requires_grad: bool = False,
          device: Any = None) -> Tensor:
    return _new(shape, dtype, requires_grad, None, device)


def zeros(*shape: Any, dtype: Any = None, requires_grad: bool = False,
          device: Any = None) -> Tensor:
    return _new(shape, dtype, requires_grad, 0, device)


def ones(*shape: Any, dtype: Any = None, requires_grad: bool = False,
         device: Any = None) -> Tensor:
    return _new(shape, dtype, requires_grad, 1, device)


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None,
         requires_grad: bool = False, *, device: Any = None) -> Tensor:
    check_device(device)
    if dtype is None:
        # PyTorch's torch.full: a bool fill gives bool, an integer (Python or numpy)
        # int64, anything else (a float, a numpy float of any width, np.bool_) float32
        if isinstance(fill_value, bool):
            dtype = np.bool_
        elif isinstance(fill_value, (int, np.integer)):
            dtype = int64
        else:
            dtype = float32
    if isinstance(fill_value, np.generic) and fill_value.dtype.kind in "biuf":
        fill_value = fill_value.item()   # a Python number (range-checked like one)
    return _new((tuple(shape),), dtype, requires_grad, fill_value)


def _like(t: Any, name: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be a Tensor, not {type(t).__name__}")
    return t


def zeros_like(t: Tensor, dtype: Any = None, *, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    t = _like(t, "zeros_like")
    return zeros(t.shape, dtype=t.dtype if dtype is None else dtype, device=device,
                 requires_grad=requires_grad)


def ones_like(t: Tensor, dtype: Any = None, *, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    t = _like(t, "ones_like")
    return ones(t.shape, dtype=t.dtype if dtype is None else dtype, device=device,
                requires_grad=requires_grad)


def empty_like(t: Tensor, dtype: Any = None, *, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    t = _like(t, "empty_like")
    return empty(t.shape, dtype=t.dtype if dtype is None else dtype, device=device,
                 requires_grad=requires_grad)


def full_like(t: Tensor, fill_value: Any, dtype: Any = None, *, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    t = _like(t, "full_like")
    return full(t.shape, fill_value, dtype=t.dtype if dtype is None else dtype,
                device=device, requires_grad=requires_grad)


def _arange_number(v: Any, name: str) -> int | float:
    """``v`` as a Python number (a one-element tensor or numpy scalar is one too)."""
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise TypeError(f"arange(): {name} must be a number, got a tensor of shape {v.shape}")
        v = v.item()
    elif isinstance(v, np.generic) and v.dtype.kind in "biuf":
        # np.bool_ counts as a float, as PyTorch's arange takes it
        v = float(v) if v.dtype.kind == "b" else v.item()
    if not isinstance(v, (int, float)):  # (bool is an int, as in Python)
        raise TypeError(f"arange(): {name} must be a number, not {type(v).__name__}")
    return v


def arange(start: Any, end: Any = None, step: Any = 1, dtype: Any = None,
           requires_grad: bool = False, *, device: Any = None) -> Tensor:
    check_device(device)
    if end is None:
        start, end = 0, start
    # numbers only: numpy would take sequences elementwise (object arithmetic, and a
    # ZeroDivisionError from inside it for a zero element: found by the fuzz job)
    start = _arange_number(start, "start")
    end = _arange_number(end, "end")
    step = _arange_number(step, "step")
    if step == 0:
        raise ValueError("arange: step must be non-zero")
    if dtype is None:
        # PyTorch: int64 when start, end and step are all integers (bools count as
        # integers, as in torch.arange(True)), else the default float32
        ints = all(isinstance(v, int) for v in (start, end, step))
        dtype = int64 if ints else float32
    return tensor(np.arange(start, end, step, dtype=check_dtype(dtype)),
                  requires_grad=requires_grad)


# ------------------------------------------------------------------- random
class Generator:
    """A seedable random source (PCG64), like ``torch.Generator``."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng = np.random.Generator(np.random.PCG64(seed))

    def manual_seed(self, seed: int) -> Generator:
        self._rng = np.random.Generator(np.random.PCG64(operator.index(seed)))
        return self

    @property
    def numpy_generator(self) -> np.random.Generator:
        return self._rng


_default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator."""
    return _default_generator.manual_seed(seed)


def _rng(seed: int | None, generator: Generator | None) -> np.random.Generator:
    if seed is not None and generator is not None:
        raise ValueError("pass seed= or generator=, not both")
    if generator is not None:
        if not isinstance(generator, Generator):
            raise TypeError(f"generator must be an rtx.Generator, got {type(generator).__name__}")
        return generator._rng
    if seed is not None:
        return np.random.Generator(np.random.PCG64(operator.index(seed)))
    return _default_generator._rng


def _random(kind: str, shape: tuple[Any, ...], dtype: Any, requires_grad: bool,
            seed: int | None, generator: Generator | None, device: Any = None) -> Tensor:
    check_device(device)
    s = shape_arg(shape)
    dt = check_dtype(float32 if dtype is None else dtype)
    if dt.kind != "f":
        raise TypeError(f"{kind}: dtype must be floating point, got {dt}")
    rng = _rng(seed, generator)
    uniform = kind in ("rand", "rand_like")
    a = rng.random(s, dtype=dt) if uniform else rng.standard_normal(s, dtype=dt)
    return tensor(a, requires_grad=requires_grad)


def rand(*shape: Any, dtype: Any = None, requires_grad: bool = False, seed: int | None = None,
         generator: Generator | None = None, device: Any = None) -> Tensor:
    """Uniform samples in [0, 1)."""
    return _random("rand", shape, dtype, requires_grad, seed, generator, device)


def randn(*shape: Any, dtype: Any = None, requires_grad: bool = False, seed: int | None = None,
          generator: Generator | None = None, device: Any = None) -> Tensor:
    """Standard normal samples."""
    return _random("randn", shape, dtype, requires_grad, seed, generator, device)


def randint(*args: Any, generator: Generator | None = None, dtype: Any = None,
            device: Any = None, requires_grad: bool = False, seed: int | None = None) -> Tensor:
    """``torch.randint``: ``randint(high, size)`` or ``randint(low, high, size)``,
    integers uniform in ``[low, high)`` (int64 unless ``dtype`` says otherwise)."""
    check_device(device)
    if len(args) == 2:
        low, high, size = 0, args[0], args[1]
    elif len(args) == 3:
        low, high, size = args
    else:
        raise TypeError(f"randint() takes (high, size) or (low, high, size), got {len(args)} "
                        "positional arguments")
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"randint(): {name} must be an int, got {v!r}")
    if not int(low) < int(high):
        raise ValueError(f"randint(): expected low < high, got low={low}, high={high}")
    s = shape_arg((tuple(size),) if isinstance(size, (tuple, list)) else (size,))
    dt = check_dtype(int64 if dtype is None else dtype)
    if requires_grad and dt.kind != "f":
        raise RuntimeError("Only Tensors of floating point dtype can require gradients")
    a = _rng(seed, generator).integers(int(low), int(high), size=s, dtype=np.int64)
    return tensor(a.astype(dt), requires_grad=requires_grad)


def rand_like(t: Tensor, dtype: Any = None, *, device: Any = None,
              requires_grad: bool = False, generator: Generator | None = None) -> Tensor:
    """Uniform samples in [0, 1) of ``t``'s shape (and dtype unless given)."""
    t = _like(t, "rand_like")
    return _random("rand_like", t.shape, t.dtype if dtype is None else dtype, requires_grad,
                   None, generator, device)


def randn_like(t: Tensor, dtype: Any = None, *, device: Any = None,
               requires_grad: bool = False, generator: Generator | None = None) -> Tensor:
    """Standard normal samples of ``t``'s shape (and dtype unless given)."""
    t = _like(t, "randn_like")
    return _random("randn_like", t.shape, t.dtype if dtype is None else dtype, requires_grad,
                   None, generator, device)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """``torch.as_tensor``: ``data`` itself when it is a tensor of ``dtype`` (cast
    otherwise), a tensor sharing a numpy array's memory when the dtype allows
    (``from_numpy``), else a copy (``rtx.tensor``)."""
    check_device(device)
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or np.dtype(dtype) == data.dtype) \
            and data.dtype in SUPPORTED_DTYPES:
        return from_numpy(data)
    return tensor(data, dtype)


def from_dlpack(obj: Any, *, device: Any = None, copy: bool | None = None) -> Tensor:
    """An rtx tensor viewing the memory of ``obj`` (any object with ``__dlpack__``:
    numpy arrays, PyTorch tensors, JAX arrays, CuPy-on-host, rtx tensors).

    Zero-copy when the memory is on the CPU, C-contiguous and of a supported
    dtype (float32, float64, int32, int64, bool); strided memory is copied
    (``copy=False`` then raises ``BufferError``), and so is memory its producer
    can only export as a copy (an rtx view with negative strides).  ``copy=True``
    always copies.
    Read-only memory (a JAX array, a read-only numpy array) stays read-only:
    in-place rtx ops on the result compute into new memory instead of writing
    into the producer's.  The result never requires grad.
    """
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(
            f"rtx.from_dlpack expects an object with __dlpack__ (a numpy array, torch tensor, "
            f"jax array, ...), got {type(obj).__name__}"
        )
    check_device(device)
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"copy must be True, False or None, got {copy!r}")
    kwargs: dict[str, Any] = {}
    if copy is not None:
        kwargs["copy"] = copy
    try:
        a = np.from_dlpack(obj, **kwargs)
    except TypeError:
        if not kwargs:
            raise
        # numpy < 2.1 has no copy= argument.
        a = np.from_dlpack(obj)
        if copy:
            a = a.copy()
    except BufferError:
        if copy is not None:
            raise
        # copy=None means "share when possible, else copy" (the array API's
        # from_dlpack): a producer that cannot export its memory as is (an rtx
        # view with negative strides) is asked for a copy.
        a = np.from_dlpack(obj, copy=True)
    t = from_numpy(a)
    if copy is False and not np.may_share_memory(t.numpy(), a):
        raise BufferError(
            "rtx.from_dlpack(copy=False): this memory cannot be viewed without a copy "
            f"(strides {a.strides} for dtype {a.dtype}; rtx views need C-contiguous memory)"
        )
    return t
