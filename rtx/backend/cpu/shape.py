"""CPU shape ops: views of the same memory where numpy has them (reshape of a
viewable layout, permute, expand, basic getitem), owned copies otherwise."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._kernels import concat_bytes
from ..._threads import get_num_threads
from ._alloc import empty, own

_ndarray = np.ndarray
_u8 = np.dtype(np.uint8)

# A concat whose result has at least this many bytes, made of C-contiguous
# inputs of its dtype laid end to end (dim 0, or leading dims of size 1), is
# copied on rtx's threads (``concat_bytes``, rtx/_index.pxi): numpy copies on
# one.  (3 x [100000, 64] + [1000, 64] float32, 2 threads: 4.7 -> 2.6 ms into a
# warm buffer; 10.9 -> 7.6 ms in the wide 100k HetGAT epoch, into fresh pages.)
CONCAT_THREADED_MIN = 1 << 20


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


class CpuShape:
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
        xs = list(xs)
        out = _joined_buffer(xs, dim, stack=False)
        if out is None:  # numpy's own error (or an odd case), then an owned copy
            return own(np.concatenate(xs, axis=dim))
        if out.nbytes >= CONCAT_THREADED_MIN and _end_to_end(xs, out, dim):
            threads = get_num_threads()
            if threads > 1:
                concat_bytes([x.reshape(-1).view(_u8) for x in xs], out.reshape(-1).view(_u8),
                             threads)
                return out
        return np.concatenate(xs, axis=dim, out=out)

    def stack(self, xs: Any, dim: int = 0) -> np.ndarray:
        xs = list(xs)
        out = _joined_buffer(xs, dim, stack=True)
        if out is None:
            return own(np.stack(xs, axis=dim))
        return np.stack(xs, axis=dim, out=out)


def _end_to_end(xs: list[np.ndarray], out: np.ndarray, dim: int) -> bool:
    """Whether ``out`` (``_joined_buffer``'s) is the bytes of ``xs`` one after
    another: every input C-contiguous in ``out``'s dtype, and no dim before the
    joined one longer than 1."""
    dt = out.dtype
    d = dim % out.ndim
    return (all(s == 1 for s in out.shape[:d])
            and all(x.dtype == dt and x.flags.c_contiguous for x in xs))


def _joined_buffer(xs: list[Any], dim: int, stack: bool) -> np.ndarray | None:
    """The owned result buffer of ``concat`` / ``stack`` of same-rank arrays
    (numpy then writes into it: one copy, not numpy's result copied again), or
    None when the inputs are not that simple case."""
    if not xs or not all(type(x) is _ndarray for x in xs):
        return None
    shape = xs[0].shape
    nd = len(shape) + (1 if stack else 0)
    if nd == 0 or not -nd <= dim < nd:
        return None
    d = dim % nd
    if stack:
        if any(x.shape != shape for x in xs):
            return None
        full = shape[:d] + (len(xs),) + shape[d:]
    else:
        if any(x.ndim != len(shape) or x.shape[:d] != shape[:d]
               or x.shape[d + 1:] != shape[d + 1:] for x in xs):
            return None
        full = shape[:d] + (sum(x.shape[d] for x in xs),) + shape[d + 1:]
    return empty(full, np.result_type(*xs))
