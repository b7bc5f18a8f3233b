"""Bad-input fuzzing of the public API and the kernel entry points (hypothesis).

Every case runs one call on generated input: wrong dtypes (float/bool/object/
complex indices, int8, float16, ...), wrong ranks, out-of-range and negative
indices, huge ``num_rows``, mismatched lengths, NaN/inf, empty and zero-width
tensors, non-contiguous / read-only / misaligned / big-endian numpy inputs and
Python lists of mixed types.  The contract checked for each case:

* the call returns the right answer (checked against a numpy model of rtx's
  documented behaviour), or raises a clear ``TypeError`` / ``ValueError`` /
  ``IndexError`` / ``MemoryError`` -- the one the model predicts -- never a
  crash, never another exception type;
* no input (numpy array, list, tensor) is modified, and an in-place op that
  raises has not written its target;
* no rtx memory is left behind by a call that raised.

The op tables (names, numpy references, what an int or bool input gives) come
from ``tests/op_db.py``.

The number of cases tried is printed at the end of the module
(``fuzz: N cases tried``).  ``RTX_FUZZ_EXAMPLES`` scales the examples per test.
"""

from __future__ import annotations

import copy
import gc
import math
import os
import sys
import warnings
from collections import Counter

import numpy as np
import op_db
import pytest

hypothesis = pytest.importorskip("hypothesis")
from conftest import run_child  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import rtx  # noqa: E402
from rtx import _kernels  # noqa: E402
from rtx._dtypes import float_type  # noqa: E402
from rtx._dtypes import result_type as torch_result_type  # noqa: E402
from rtx.backend.index import as_index_array  # noqa: E402

EXAMPLES = int(os.environ.get("RTX_FUZZ_EXAMPLES", "120"))
PER_OP = settings(
    max_examples=max(EXAMPLES // 2, 10),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)

# OverflowError: numpy's own refusal of a Python int too large for the dtype
# (e.g. int32 tensor + 2**70); the models say where it is acceptable.
ALLOWED = (TypeError, ValueError, IndexError, MemoryError, OverflowError, RuntimeError)
CASES: Counter[str] = Counter()

RTX_DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]
FLOATS = [np.float32, np.float64]
ODD_DTYPES = [np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64, np.float16,
              np.complex64, np.complex128, np.longdouble]
INDEX_DTYPES = [np.int32, np.int64]
LAYOUTS = ["c", "transposed", "strided", "reversed", "readonly", "misaligned", "bigendian"]


@pytest.fixture(scope="module", autouse=True)
def _report_case_count(request):
    yield
    total = sum(CASES.values())
    line = f"fuzz: {total} cases tried ({', '.join(f'{k} {v}' for k, v in sorted(CASES.items()))})"
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    if tr is not None and capman is not None:
        with capman.global_and_fixture_disabled():   # past pytest's output capture
            tr.write_line("")
            tr.write_line(line)
    else:
        print(line)


def test_overcommit_policy_is_known():
    """Which huge requests must fail depends on the kernel's overcommit policy."""
    try:
        with open("/proc/sys/vm/overcommit_memory") as fh:
            mode = int(fh.read())
    except OSError:
        pytest.skip("no /proc/sys/vm/overcommit_memory")
    assert mode in (0, 1, 2)


def _overcommit_mode() -> int:
    try:
        with open("/proc/sys/vm/overcommit_memory") as fh:
            return int(fh.read())
    except OSError:
        return -1


# ------------------------------------------------------------------ harness
def _freeze(x):
    """A deep snapshot of an input, to check that nothing modified it."""
    if isinstance(x, rtx.Tensor):
        return ("T", x.shape, x.dtype, np.array(x.numpy(), copy=True))
    if isinstance(x, np.ndarray):
        return ("A", x.shape, x.dtype, x.strides, x.flags.writeable, np.array(x, copy=True))
    if isinstance(x, (list, tuple, dict)):
        return ("L", copy.deepcopy(x))
    return ("O", x)


def _same(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] in ("T", "A"):
        *ma, va = a
        *mb, vb = b
        return ma == mb and _equal(va, vb)
    if a[0] == "L":
        return repr(a[1]) == repr(b[1])
    return True


def _equal(x, y) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        return False
    if x.dtype == object or y.dtype == object:
        return repr(x.tolist()) == repr(y.tolist())
    if x.dtype.kind in "fc" or y.dtype.kind in "fc":
        return bool(np.array_equal(x, y, equal_nan=True))
    return bool(np.array_equal(x, y))


def check(op: str, call, inputs, model, close: bool = False, exact_dtype: bool = True):
    """Run ``call()`` against ``model()``.

    ``model`` returns the expected numpy result, or raises the exception (or a
    tuple of acceptable exception types, as ``Expect``) that rtx must raise.
    """
    CASES[op] += 1
    before = [_freeze(x) for x in inputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = model()
            want_exc = None
        except Expect as e:
            want, want_exc = None, e.types
            if e.alt is not Expect._NONE:
                want = e.alt
        gc_was_on = gc.isenabled()
        gc.disable()                   # no unrelated garbage freed inside the measurement
        mem0 = rtx.memory_stats()["current_bytes"]
        err = None
        try:
            got = call()
        except ALLOWED as e:
            got = None
            err = (type(e), str(e))    # keep no reference to the traceback's frames
        finally:
            if gc_was_on:
                gc.enable()
        if err is not None:
            etype, emsg = err
            assert want_exc is not None, f"{op}: raised {etype.__name__}: {emsg}; expected a result"
            assert issubclass(etype, want_exc), (
                f"{op}: raised {etype.__name__}: {emsg}; expected {want_exc}")
            assert emsg, f"{op}: {etype.__name__} without a message"
            mem1 = rtx.memory_stats()["current_bytes"]
            if mem1 != mem0:           # (collecting may also free older garbage: <=)
                gc.collect()
                mem1 = rtx.memory_stats()["current_bytes"]
            assert mem1 <= mem0, f"{op}: a failed call left {mem1 - mem0} bytes allocated"
        else:
            assert want_exc is None or want is not None, (
                f"{op}: returned {got!r}, expected {want_exc}")
            g = got.numpy() if isinstance(got, rtx.Tensor) else np.asarray(got)
            w = np.asarray(want)
            assert g.shape == w.shape, f"{op}: shape {g.shape}, expected {w.shape}"
            if exact_dtype:
                assert g.dtype == w.dtype, f"{op}: dtype {g.dtype}, expected {w.dtype}"
            if close and w.dtype.kind == "f":
                tol = 1e-5 if w.dtype == np.float32 else 1e-12
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True,
                                           err_msg=op)
            else:
                assert _equal(g, w), f"{op}: values differ\n{g}\n{w}"
    after = [_freeze(x) for x in inputs]
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        assert _same(b, a), f"{op}: input {i} was modified"
    return got


class Expect(Exception):
    """Raised by a model: rtx must raise one of ``types`` -- or, when ``alt`` is
    given, may instead return ``alt`` (behaviour left open by the contract)."""

    _NONE = object()

    def __init__(self, *types, alt=_NONE):
        super().__init__(types)
        self.types = types
        self.alt = alt


# ---------------------------------------------------------------- strategies
def _elements(dt):
    dt = np.dtype(dt)
    if dt.kind == "f" and dt.itemsize <= 8:
        width = 16 if dt.itemsize == 2 else 32 if dt.itemsize == 4 else 64
        return st.floats(width=width, allow_nan=True, allow_infinity=True)
    if dt.kind == "O":
        return st.one_of(st.integers(-5, 5), st.floats(), st.none(), st.text(max_size=2),
                         st.just(2**70))
    return None   # hypothesis' own full-range strategy for the dtype


@st.composite
def layouts(draw, a, allowed=LAYOUTS):
    """``a``'s values in an awkward memory layout (same values, same dtype)."""
    how = draw(st.sampled_from(allowed))
    if how == "transposed" and a.ndim >= 2:
        return np.ascontiguousarray(a.T).T
    if how == "strided" and a.ndim >= 1:
        big = np.repeat(a, 2, axis=0)
        return big[::2]
    if how == "reversed" and a.ndim >= 1:
        return np.ascontiguousarray(a[::-1])[::-1]
    if how == "readonly":
        b = a.copy()
        b.flags.writeable = False
        return b
    if how == "misaligned" and a.dtype.itemsize > 1 and a.dtype != object:
        raw = bytearray(a.nbytes + 1)
        b = np.frombuffer(raw, dtype=a.dtype, count=a.size, offset=1).reshape(a.shape)
        b[...] = a
        return b
    if how == "bigendian" and a.dtype.itemsize > 1 and a.dtype.kind in "iufc":
        return a.astype(a.dtype.newbyteorder(">"))
    return a


@st.composite
def arrays(draw, dtypes=RTX_DTYPES, min_dims=0, max_dims=3, max_side=5, allowed=LAYOUTS):
    dt = np.dtype(draw(st.sampled_from(dtypes)))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0,
                                  max_side=max_side))
    a = draw(hnp.arrays(dt, shape, elements=_elements(dt)))
    return draw(layouts(a, allowed))


@st.composite
def tensors(draw, dtypes=RTX_DTYPES, min_dims=0, max_dims=3, max_side=5):
    """(tensor, its values as numpy): copied, shared, or a non-contiguous view."""
    a = draw(arrays([d for d in dtypes if d in RTX_DTYPES], min_dims, max_dims, max_side,
                    allowed=["c", "transposed", "strided", "reversed", "readonly"]))
    how = draw(st.sampled_from(["tensor", "from_numpy", "view"]))
    if how == "tensor":
        t = rtx.tensor(a)
    elif how == "from_numpy":
        t = rtx.from_numpy(a)
    else:
        if a.ndim >= 1 and a.shape[0] > 0:
            t = rtx.tensor(np.repeat(a, 2, axis=0))[::2]
        elif a.ndim >= 2:
            t = rtx.tensor(np.ascontiguousarray(a.T)).T
        else:
            t = rtx.tensor(a)
    return t, np.array(a, copy=True)


def index_arrays(n: int):
    """Index objects of every kind; about half of them valid for a dim of size n."""
    hi = max(n, 1)
    valid_vals = st.integers(0, n - 1) if n > 0 else st.nothing()
    any_vals = st.integers(-3 * hi, 3 * hi)
    valid_np = st.builds(
        lambda vals, dt: np.array(vals, dtype=dt),
        st.lists(valid_vals, max_size=8) if n > 0 else st.just([]),
        st.sampled_from(INDEX_DTYPES),
    )
    any_np = st.builds(lambda vals, dt: np.array(vals, dtype=dt),
                       st.lists(any_vals, max_size=8), st.sampled_from(INDEX_DTYPES))
    odd_dtype = st.builds(
        lambda vals, dt: np.array(vals).astype(dt),
        st.lists(st.integers(0, hi - 1), max_size=6),
        st.sampled_from([np.int8, np.int16, np.uint8, np.uint32, np.uint64, np.float32,
                         np.float64, np.float16, np.bool_, np.complex128, object]),
    )
    wrong_rank = st.one_of(
        st.builds(lambda v, dt: np.array(v, dtype=dt), st.integers(0, hi - 1),
                  st.sampled_from(INDEX_DTYPES)),
        st.builds(lambda v, dt: np.array(v, dtype=dt).reshape(-1, 1),
                  st.lists(st.integers(0, hi - 1), min_size=1, max_size=4),
                  st.sampled_from(INDEX_DTYPES)),
    )
    py_lists = st.one_of(
        st.lists(valid_vals if n > 0 else st.integers(0, 0), max_size=6),
        st.lists(any_vals, max_size=6),
        st.lists(st.one_of(st.integers(0, hi - 1), st.booleans(), st.floats(0, hi),
                           st.none(), st.text(max_size=2), st.just(2**70)),
                 min_size=1, max_size=5),
        st.lists(st.lists(st.integers(0, hi - 1), min_size=1, max_size=2), min_size=1,
                 max_size=3),
        st.tuples(valid_vals if n > 0 else st.integers(0, 0)),
        st.builds(lambda k: range(k), st.integers(0, n)),
    )
    scalars = st.one_of(st.integers(0, hi), st.none(), st.floats(), st.text(max_size=3))
    laid_out = st.one_of(valid_np, any_np).flatmap(lambda a: layouts(a))
    as_tensor = st.one_of(valid_np, any_np).map(rtx.from_numpy)
    float_tensor = st.lists(st.floats(0, hi), max_size=4).map(
        lambda v: rtx.tensor(np.array(v, dtype=np.float32)))
    return st.one_of(valid_np, valid_np.flatmap(lambda a: layouts(a)), any_np, laid_out,
                     odd_dtype, wrong_rank, py_lists, scalars, as_tensor, float_tensor)


# ----------------------------------------------------------------- models
def model_indices(idx, n: int) -> np.ndarray:
    """rtx's index contract: 1-D int32/int64 (array, tensor or sequence of ints),
    every value in [0, n); negative indices are rejected, never wrapped."""
    vals = model_index_values(idx)
    if vals.size and (vals.min() < 0 or vals.max() >= n):
        raise Expect(IndexError)
    return vals


def model_index_values(idx) -> np.ndarray:
    """The dtype / rank part of the contract (no range check)."""
    if isinstance(idx, rtx.Tensor):
        idx = idx.numpy()
    if isinstance(idx, np.ndarray):
        if idx.dtype.kind != "i" or idx.dtype.itemsize not in (4, 8) or idx.ndim != 1:
            raise Expect(TypeError)
        vals = idx.astype(np.int64)
    elif isinstance(idx, (list, tuple, range)):
        items = list(idx)
        if any(isinstance(v, (bool, np.bool_)) for v in items):
            raise Expect(TypeError)
        if not all(isinstance(v, int) for v in items):
            raise Expect(TypeError)
        if any(not -(2**63) <= v < 2**63 for v in items):
            raise Expect(IndexError)
        vals = np.array(items, dtype=np.int64)
    else:
        raise Expect(TypeError)
    return vals


# -------------------------------------------------------- index_select / add
@FUZZ
@given(st.data())
def test_index_select_bad_and_good_inputs(data):
    t, x = data.draw(tensors(min_dims=0, max_dims=3))
    n = x.shape[0] if x.ndim else 0
    idx = data.draw(index_arrays(n))

    def model():
        if x.ndim == 0:           # several faults at once: rtx may report any one
            try:
                model_indices(idx, 0)
            except Expect as ex:
                raise Expect(ValueError, *ex.types) from None
            raise Expect(ValueError)
        return np.take(x, model_indices(idx, n), axis=0)

    check("index_select", lambda: rtx.index_select(t, idx), [t, idx], model)


@FUZZ
@given(st.data())
def test_index_add_bad_and_good_inputs(data):
    t, x = data.draw(tensors(min_dims=0, max_dims=3))
    e = x.shape[0] if x.ndim else 0
    num_rows = data.draw(st.one_of(
        st.integers(0, 8), st.integers(-3, -1), st.booleans(), st.floats(0, 8), st.none(),
        st.just(np.int64(5)), st.just(np.int32(3)), st.text(max_size=2),
        st.just(2**62), st.just(2**48 // 8 + 1), st.just(2**80)))
    idx = data.draw(st.one_of(
        index_arrays(num_rows if isinstance(num_rows, int) and not isinstance(num_rows, bool)
                     and 0 <= num_rows < 100 else 4),
        st.builds(lambda v: np.array(v, dtype=np.int64),
                  st.lists(st.integers(0, 3), min_size=e, max_size=e))))

    def model():
        errs: set[type] = set()          # with several faults rtx may report any one
        if x.ndim == 0:
            errs.add(ValueError)
        try:
            v = model_index_values(idx)
        except Expect as ex:
            errs.update(ex.types)
            v = None
        if not _valid_rows(num_rows):
            errs.add(ValueError if isinstance(num_rows, int) and not isinstance(num_rows, bool)
                     else TypeError)
        if _valid_rows(num_rows) and num_rows * max(math.prod(x.shape[1:]), 1) >= 2**47:
            errs.add(MemoryError)
        if v is not None:
            if x.ndim and v.shape[0] != e:
                errs.add(ValueError)
            if v.size and (v.min() < 0 or (_valid_rows(num_rows) and v.max() >= num_rows)):
                errs.add(IndexError)
        if errs - {MemoryError}:
            raise Expect(*errs)
        nr = int(num_rows)
        if nr * math.prod(x.shape[1:]) * x.dtype.itemsize >= 2**47:
            raise Expect(MemoryError)     # beyond a 47-bit address space: any overcommit mode
        try:
            out = np.zeros((nr,) + x.shape[1:], dtype=x.dtype)
        except (ValueError, MemoryError):  # e.g. (2**62, 0): numpy refuses the shape itself
            raise Expect(ValueError, MemoryError) from None
        np.add.at(out, v, x)
        return out

    check("index_add", lambda: rtx.index_add(t, idx, num_rows), [t, idx], model)


def _valid_rows(num_rows) -> bool:
    return (isinstance(num_rows, (int, np.integer)) and not isinstance(num_rows, (bool,
            np.bool_)) and num_rows >= 0)


@FUZZ
@given(st.data())
def test_kernel_entry_points_directly(data):
    """The compiled kernels themselves: dtype/layout mismatches are refused by the
    typed-memoryview signatures (ValueError/TypeError), valid calls are exact."""
    dt = np.dtype(data.draw(st.sampled_from(FLOATS + [np.int32, np.float16])))
    it = np.dtype(data.draw(st.sampled_from(INDEX_DTYPES + [np.int16, np.uint32])))
    rows = data.draw(st.integers(0, 6))
    feat = data.draw(st.integers(0, 4))
    x = np.arange(rows * feat, dtype=np.float64).reshape(rows, feat).astype(dt)
    x = data.draw(layouts(x, ["c", "transposed", "strided", "readonly"]))
    m = data.draw(st.integers(0, 7))
    idx = np.array(data.draw(st.lists(st.integers(0, max(rows - 1, 0)), min_size=m,
                                      max_size=m)), dtype=it)
    if rows == 0:
        idx = idx[:0]
    out_rows = data.draw(st.sampled_from([idx.shape[0], idx.shape[0] + 1]))
    out_dt = np.dtype(data.draw(st.sampled_from([dt, np.float64])))
    nthreads = data.draw(st.sampled_from([1, 2, 4]))
    kernel_ok = (dt in (np.float32, np.float64) and it in (np.int32, np.int64)
                 and x.flags.c_contiguous and out_dt == dt)

    def model_gather():
        if not kernel_ok or out_rows != idx.shape[0]:
            raise Expect(ValueError, TypeError)
        return np.take(x, idx.astype(np.int64), axis=0)

    out = np.full((out_rows, feat), -7, dtype=out_dt)
    expected = _try(model_gather)
    if isinstance(expected, Expect):
        check("kernel.gather_rows", lambda: _kernels.gather_rows(x, idx, out, nthreads),
              [x, idx, out], model_gather)
    else:
        _kernels.gather_rows(x, idx, out, nthreads)
        CASES["kernel.gather_rows"] += 1
        np.testing.assert_array_equal(out, expected)

    # scatter: rows = num_rows >= max(idx) + 1 (bounds are the caller's job)
    n_out = (int(idx.max()) + 1 if idx.size else 0) + data.draw(st.integers(0, 2))
    src = np.arange(idx.shape[0] * feat, dtype=np.float64).reshape(idx.shape[0], feat)
    src = src.astype(dt)
    out2 = np.full((n_out, feat), 0 if data.draw(st.booleans()) else -3, dtype=out_dt)

    def model_scatter():
        if not (dt in (np.float32, np.float64) and it in (np.int32, np.int64) and out_dt == dt):
            raise Expect(ValueError, TypeError)
        ref = np.zeros((n_out, feat), dtype=dt)
        np.add.at(ref, idx.astype(np.int64), src)
        return ref

    expected = _try(model_scatter)
    if isinstance(expected, Expect):
        check("kernel.scatter_add_rows",
              lambda: _kernels.scatter_add_rows(src, idx, out2, nthreads), [src, idx],
              model_scatter)
    else:
        _kernels.scatter_add_rows(src, idx, out2, nthreads)
        CASES["kernel.scatter_add_rows"] += 1
        np.testing.assert_array_equal(out2, expected)

    # bounds check: the first out-of-range position, or -1
    n = data.draw(st.integers(-1, 8))

    def model_oob():
        if it not in (np.int32, np.int64):
            raise Expect(ValueError, TypeError)
        bad = [i for i, v in enumerate(idx.tolist()) if not 0 <= v < n]
        return np.asarray(bad[0] if bad else -1)

    check("kernel.first_out_of_bounds", lambda: _kernels.first_out_of_bounds(idx, n), [idx],
          model_oob, exact_dtype=False)


def _try(fn):
    try:
        return fn()
    except Expect as e:
        return e


def test_as_index_array_returns_aligned_native_contiguous():
    """The kernels read indices through typed pointers: a misaligned int64 load is
    undefined behaviour (UBSan reports it), so the boundary must copy such arrays."""
    raw = bytearray(8 * 6 + 1)
    mis = np.frombuffer(raw, dtype=np.int64, count=6, offset=1)
    mis[:] = [0, 1, 2, 3, 4, 5]
    assert not mis.flags.aligned
    for a in (mis, mis[::2], mis.astype(">i8"), mis.astype(np.int32)):
        got = as_index_array(a, "test")
        assert got.flags.aligned and got.flags.c_contiguous and got.dtype.isnative
        np.testing.assert_array_equal(got, a)
    CASES["as_index_array"] += 4


# ------------------------------------------------------------ construction
py_scalars = st.one_of(st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True),
                       st.booleans(), st.none(), st.text(max_size=2),
                       st.complex_numbers(max_magnitude=4), st.just(2**70),
                       st.just(np.float16(1.5)), st.just(np.int8(3)))
py_data = st.recursive(py_scalars, lambda ch: st.lists(ch, max_size=4), max_leaves=12)


def _torch_leaf_kind(data):
    """PyTorch's result kind for a (nested) list: 'f' if any leaf is a float
    (Python or numpy, any width), else 'i' if any is an integer, else 'b'; None
    for a scalar, an empty list or a leaf of another type (numpy decides)."""
    if not isinstance(data, list):
        return None
    kinds = set()
    stack = list(data)
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, (bool, np.bool_)):
            kinds.add("b")
        elif isinstance(v, (float, np.floating)):
            kinds.add("f")
        elif isinstance(v, (int, np.integer)):
            kinds.add("i")
        else:
            return None
    return next((k for k in "fib" if k in kinds), None)


def model_tensor(data, dtype=None) -> np.ndarray:
    if isinstance(data, np.ndarray):
        a = data
    else:
        try:
            a = np.asarray(data)
        except (ValueError, TypeError, OverflowError):
            raise Expect(ValueError, TypeError) from None
        kind = _torch_leaf_kind(data) if dtype is None else None
        if kind is not None:
            # PyTorch's promotion of the leaves (floats win; rtx widens float16 to
            # float32 and small integers to int64); Python ints past int64 only
            # fit a float result
            vals = np.asarray(data, dtype=object).reshape(-1).tolist()
            if kind != "f" and any(type(v) is int and not -2**63 <= v < 2**63 for v in vals):
                raise Expect(OverflowError)
            want = {"f": np.float32, "i": np.int64, "b": np.bool_}[kind]
            return np.asarray([want(v) for v in vals], dtype=want).reshape(a.shape)
        if a.dtype.kind == "u" or (a.dtype.kind == "O" and all(
                type(v) is int for v in a.reshape(-1).tolist())):
            if any(type(v) is int and not -2**63 <= v < 2**63 for v in a.reshape(-1).tolist()):
                raise Expect(OverflowError)  # Python ints past int64 never wrap
        if dtype is None:
            if a.dtype.kind == "f":
                a = a.astype(np.float32)
            elif a.dtype.kind in "iu":
                a = a.astype(np.int64)
            elif a.dtype.kind == "O":
                vals = a.reshape(-1).tolist()
                if not all(isinstance(v, (int, float)) for v in vals):
                    raise Expect(TypeError)
                a = np.asarray(a.tolist(), dtype=np.float32)
            elif a.dtype.kind != "b":
                raise Expect(TypeError)
    if dtype is not None:
        dt = np.dtype(dtype)
        if dt not in [np.dtype(d) for d in RTX_DTYPES] or a.dtype.kind not in "biuf":
            raise Expect(TypeError)
        return a.astype(dt)
    if a.dtype not in [np.dtype(d) for d in RTX_DTYPES]:
        raise Expect(TypeError)
    return a


@FUZZ
@given(py_data, st.sampled_from([None, None, rtx.float32, rtx.float64, rtx.int32, rtx.int64,
                                 rtx.bool, np.float16, np.int8, "float64", "nonsense"]))
def test_tensor_from_python_data(data, dtype):
    def model():
        if isinstance(dtype, str) and dtype == "nonsense":   # plus whatever data has wrong
            try:
                model_tensor(data, None)
            except Expect as e:
                raise Expect(TypeError, *e.types) from None
            raise Expect(TypeError)
        return model_tensor(data, dtype)

    check("tensor(list)", lambda: rtx.tensor(data, dtype=dtype), [data], model)


@FUZZ
@given(arrays(RTX_DTYPES + ODD_DTYPES + [object]), st.sampled_from([None, rtx.float64,
                                                                    rtx.int32]))
def test_tensor_and_from_numpy_from_any_array(a, dtype):
    def model_t():
        if a.dtype == object:
            vals = a.reshape(-1).tolist()
            if dtype is None or not all(isinstance(v, (int, float)) for v in vals):
                raise Expect(TypeError, ValueError)
        return model_tensor(a, dtype)

    check("tensor(ndarray)", lambda: rtx.tensor(a, dtype=dtype), [a], model_t)

    def model_f():
        host = a.astype(a.dtype.newbyteorder("=")) if a.dtype.kind in "biufc" else a
        if host.dtype not in [np.dtype(d) for d in RTX_DTYPES]:
            raise Expect(TypeError)
        return host

    t = check("from_numpy", lambda: rtx.from_numpy(a), [a], model_f)
    if t is not None and a.size:
        shares = np.shares_memory(t.numpy(), a)
        behaved = (a.flags.c_contiguous and a.flags.aligned and a.dtype.isnative)
        assert shares == behaved, "from_numpy must share exactly when the array is well-behaved"
        if shares and a.flags.writeable and a.size:
            a.reshape(-1)[0] = a.reshape(-1)[0]      # (no change) writable alias works


@FUZZ
@given(st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=3),
                 st.lists(st.integers(), max_size=3), st.just(memoryview(b"abcd")),
                 st.just(rtx.zeros(2))))
def test_from_numpy_refuses_non_arrays(obj):
    check("from_numpy(non-array)", lambda: rtx.from_numpy(obj), [obj],
          lambda: (_ for _ in ()).throw(Expect(TypeError)))


HUGE = [2**62 + 1, 2**62, 2**61 + 7, 2**47 + 1, 2**48, 2**63 - 1, 2**63, 2**64 + 5]


@FUZZ
@given(st.lists(st.one_of(st.integers(-2, 5), st.sampled_from(HUGE), st.floats(0, 3),
                          st.none(), st.text(max_size=1)), max_size=3),
       st.sampled_from(["zeros", "ones", "empty", "full", "rand", "randn"]),
       st.sampled_from([None, rtx.float32, rtx.int64, rtx.bool, np.int8, "nope"]))
def test_creation_shapes_and_dtypes(shape, fn, dtype):
    def model():
        errs: list[type] = []
        if not all(isinstance(s, int) for s in shape):
            errs.append(TypeError)
        elif any(s < 0 for s in shape):
            errs.append(ValueError)
        dt = (np.int64 if fn == "full" else np.float32) if dtype is None else dtype
        if isinstance(dt, str) or np.dtype(dt) not in [np.dtype(d) for d in RTX_DTYPES]:
            errs.append(TypeError)
        elif fn in ("rand", "randn") and np.dtype(dt).kind != "f":
            errs.append(TypeError)
        if errs:
            raise Expect(*errs, ValueError)
        n = math.prod(shape)
        if n * np.dtype(dt).itemsize >= 2**47:
            if fn in ("rand", "randn"):   # numpy makes these first
                raise Expect(MemoryError, ValueError)
            raise Expect(MemoryError)
        try:
            np.empty(shape, dtype=dt)
        except (ValueError, MemoryError):         # e.g. (0, 2**62): numpy refuses the shape
            raise Expect(ValueError, MemoryError) from None
        if fn in ("rand", "randn"):
            return None
        fill = {"zeros": 0, "ones": 1, "full": 3, "empty": None}[fn]
        return None if fill is None else np.full(shape, fill, dtype=dt)

    def call():
        if fn == "full":
            return rtx.full(shape, 3, dtype=dtype)
        return getattr(rtx, fn)(*shape, dtype=dtype)

    want = _try(model)
    if not isinstance(want, Expect) and want is None:
        # values not predictable (empty / random): check shape, dtype and no crash
        CASES["creation"] += 1
        t = call()
        assert t.shape == tuple(shape)
        assert t.dtype == np.dtype(np.float32 if dtype is None else dtype)
        del t
        return
    check("creation", call, [shape], model)


@pytest.mark.parametrize("nbytes", HUGE + [-1, -(2**63)])
def test_storage_huge_and_negative_sizes(nbytes):
    """Never a hang or a crash: a clear MemoryError (or ValueError when negative)."""
    code = (f"import rtx\ntry:\n    rtx.Storage({nbytes})\nexcept (MemoryError, ValueError, "
            f"OverflowError) as e:\n    print(type(e).__name__)\n")
    # In a child process with a timeout: a bug here used to be an infinite loop.
    p = run_child(code, timeout=60)
    CASES["Storage(size)"] += 1
    assert p.returncode == 0, p.stderr
    want = {"ValueError"} if nbytes < 0 else {"MemoryError"}
    if nbytes > sys.maxsize:        # not even a Py_ssize_t: Cython's conversion refuses it
        want.add("OverflowError")
    assert p.stdout.strip() in want, p.stdout + p.stderr


def test_medium_huge_allocation_depends_on_overcommit():
    """A request bigger than RAM + swap but inside the address space: refused by
    heuristic (0) or strict (2) overcommit as a MemoryError.  Under mode 1 (always)
    the kernel would grant it and the zero-fill would invoke the OOM killer, so
    the case is only run where the kernel refuses."""
    mode = _overcommit_mode()
    if mode == 1:
        pytest.skip("vm.overcommit_memory=1: the kernel grants any request")
    with open("/proc/meminfo") as fh:
        info = dict(line.split(":", 1) for line in fh)
    total = (int(info["MemTotal"].split()[0]) + int(info["SwapTotal"].split()[0])) * 1024
    rows = 4 * total // (8 * 16)
    CASES["index_add(huge num_rows)"] += 1
    with pytest.raises(MemoryError):
        rtx.index_add(rtx.zeros(2, 16, dtype=rtx.float64), [0, 1], rows)
    with pytest.raises(MemoryError):
        rtx.zeros(rows, 16, dtype=rtx.float64)


# ---------------------------------------------------------------- arithmetic
# name -> numpy ufunc (the in-place test also calls them with out=)
BINARY = {op.name: op.ref for op in op_db.ops("binary", fuzz=True)}
COMPARE = {op.name: op.ref for op in op_db.ops("compare", fuzz=True)}

other_operands = st.one_of(
    st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.just(np.float32(2.5)), st.just(np.int64(-2)), st.none(), st.text(max_size=2),
    st.complex_numbers(max_magnitude=2), st.just(2**70),
)


def _np_binary(fn, a, b):
    with np.errstate(all="ignore"):
        try:
            if isinstance(b, np.ndarray) and isinstance(a, np.ndarray):
                np.broadcast_shapes(a.shape, b.shape)
            out = fn(a, b)
        except (TypeError, ValueError, OverflowError, np.exceptions.DTypePromotionError):
            raise Expect(TypeError, ValueError, OverflowError) from None
    return np.asarray(out)


@pytest.mark.parametrize("name", sorted(BINARY) + sorted(COMPARE))
@PER_OP
@given(data=st.data())
def test_binary_ops(data, name):
    t, a = data.draw(tensors(max_side=4))
    kind = data.draw(st.sampled_from(["tensor", "scalar", "ndarray", "list"]))
    if kind == "tensor":
        u, b = data.draw(tensors(max_side=4))
        other, b_ref = u, b
    elif kind == "ndarray":
        b = data.draw(arrays(RTX_DTYPES + [np.float16, np.int8], max_side=4))
        other, b_ref = b, b
    elif kind == "list":
        other = data.draw(py_data)
        b_ref = other
    else:
        other = data.draw(other_operands)
        b_ref = other
    fn = BINARY.get(name) or COMPARE[name]

    def model():
        b = b_ref
        if isinstance(b, (str, complex)) or b is None:
            raise Expect(TypeError)
        if isinstance(b, list):
            b = model_tensor(b)
        elif isinstance(b, np.ndarray):
            if b.dtype.kind not in "biuf":
                raise Expect(TypeError)
            b = model_tensor(b)
        elif isinstance(b, np.generic):
            b = b.item()
        if type(b) is int and not -2**63 <= b < 2**63:
            raise Expect(OverflowError)             # like PyTorch: never wrapped
        r = _np_binary(fn, a, b)
        if name in COMPARE:
            return r
        try:
            rt = np.result_type(a, b)
        except (TypeError, ValueError, OverflowError):
            rt = r.dtype
        if r.dtype != rt and name != "div":     # (true division is float whatever rt)
            # e.g. bool ** bool is int8 in numpy: rtx keeps the operands' dtype and
            # may refuse the cast cleanly instead
            raise Expect(TypeError, alt=r)
        # the value: computed in PyTorch's result dtype (int * 1.5 and int / int are
        # float32), the rule rtx's backends use (itself checked against
        # torch.result_type in tests/autograd/test_dtypes.py)
        pt = torch_result_type(a, b)
        if name == "div":
            pt = float_type(pt)
        return _np_binary(fn, np.asarray(a).astype(pt), np.asarray(b).astype(pt))

    call = (lambda: getattr(rtx, name)(t, other)) if name in BINARY else (
        lambda: getattr(t, name)(other))
    check(f"binary.{name}", call, [t, other], model, close=True, exact_dtype=False)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "copy", "fill"])
@PER_OP
@given(data=st.data())
def test_inplace_ops_write_nothing_when_they_raise(data, name):
    t, a = data.draw(tensors(dtypes=FLOATS + [np.int64], min_dims=1, max_side=4))
    u, b = data.draw(tensors(dtypes=FLOATS + [np.int64], max_side=4))
    other = data.draw(st.sampled_from([u, 2, 1.5, None, "x"]))

    def model():
        o = b if other is u else other
        if o is None or isinstance(o, str):
            raise Expect(TypeError)
        if name == "fill":
            if isinstance(o, np.ndarray):
                if o.ndim == 0:                       # a 0-d tensor fills, like PyTorch
                    return np.full(a.shape, o.item()).astype(a.dtype)
                if o.size == 1:                       # left open: fill or refuse
                    raise Expect(TypeError, ValueError,
                                 alt=np.full(a.shape, o.item()).astype(a.dtype))
                raise Expect(TypeError, ValueError)
            return np.full(a.shape, o).astype(a.dtype)
        # PyTorch's rule: result type Float can't be cast to the desired output type Long
        bad_cast = name != "copy" and a.dtype.kind in "biu" and (
            name == "div" or isinstance(o, float)
            or (isinstance(o, np.ndarray) and o.dtype.kind == "f"))
        if isinstance(o, np.ndarray) and name != "copy":
            bad = (ValueError, RuntimeError) if bad_cast else (ValueError,)
            try:
                if np.broadcast_shapes(a.shape, o.shape) != a.shape:
                    raise Expect(*bad)
            except ValueError:
                raise Expect(*bad) from None
        if bad_cast:
            raise Expect(RuntimeError)
        dst = a.copy()
        if isinstance(o, np.ndarray) and o.ndim == 0 and name != "copy":
            # PyTorch's promotion (docs/architecture.md, "one promotion rule"): a 0-d
            # operand of the same or a lower kind computes in the tensor's dtype
            # (float32 * float64 0-d is a float32 product); numpy would use float64
            o = o.astype(a.dtype)
        with np.errstate(all="ignore"):
            if name == "copy":       # numpy's copyto rules (it also drops leading 1-dims)
                try:
                    np.copyto(dst, o, casting="unsafe")
                except ValueError:
                    raise Expect(ValueError) from None
            else:
                BINARY[name](dst, o, out=dst, casting="unsafe")
        return dst

    def call():
        with rtx.no_grad():
            r = getattr(t, name + "_")(other)
        return r

    inputs = [u] if other is u else []
    want = _try(model)
    before = np.array(t.numpy(), copy=True)
    got = check(f"inplace.{name}_", call, inputs, model, exact_dtype=True)
    if isinstance(want, Expect):
        assert _equal(t.numpy(), before), f"{name}_ raised after writing its target"
    else:
        assert got is t


# ----------------------------------------------------------- unary / activ.
UNARY = {op.name: op.ref for op in op_db.ops("unary", fuzz=True)}


@pytest.mark.parametrize("name", sorted(UNARY))
@PER_OP
@given(data=st.data())
def test_unary_ops(data, name):
    t, a = data.draw(tensors(max_side=4))

    def model():
        with np.errstate(all="ignore"):
            try:
                if not op_db.OP_DB[name].keeps_int and a.dtype.kind != "f":
                    src = a.astype(np.float32)        # ints and bools: float32, like PyTorch
                else:
                    src = a
                r = np.asarray(UNARY[name](src))
            except TypeError:
                raise Expect(TypeError) from None
        return r

    check(f"unary.{name}", lambda: getattr(rtx, name)(t), [t], model, close=True,
          exact_dtype=False)


@FUZZ
@given(st.data(), st.sampled_from(op_db.names("softmax", fuzz=True)))
def test_softmax_family(data, name):
    t, a = data.draw(tensors(max_side=4))
    dim = data.draw(st.one_of(st.integers(-4, 3), st.none(), st.floats(0, 1),
                              st.text(max_size=1)))

    def model():
        if dim is None or not isinstance(dim, int):
            raise Expect(TypeError)
        nd = max(a.ndim, 1)
        if not -nd <= dim < nd:
            raise Expect(IndexError)
        out_dt = a.dtype if a.dtype.kind == "f" else np.dtype(np.float32)   # ints: float32
        if a.size == 0:
            return np.empty(a.shape, out_dt)
        x = a.astype(out_dt)
        d = dim % nd if a.ndim else None
        with np.errstate(all="ignore"):
            z = (x - np.max(x, axis=d, keepdims=True)).astype(out_dt)
            if name == "softmax":
                e = np.exp(z)
                return (e / np.sum(e, axis=d, keepdims=True)).astype(out_dt)
            return (z - np.log(np.sum(np.exp(z), axis=d, keepdims=True))).astype(out_dt)

    def loose():
        try:
            return model()
        except Expect as e:
            raise Expect(*e.types, TypeError, ValueError) from None

    check(name, lambda: getattr(rtx, name)(t, dim), [t], loose, close=True)


# ---------------------------------------------------------------- reductions
@pytest.mark.parametrize("name", sorted(op_db.names("reduction", fuzz=True)
                                         + op_db.names("reduction_indices", fuzz=True)))
@PER_OP
@given(data=st.data())
def test_reductions(data, name):
    t, a = data.draw(tensors(max_side=4))
    dim = data.draw(st.one_of(st.none(), st.integers(-4, 3),
                              st.lists(st.integers(-3, 2), min_size=1, max_size=3).map(tuple),
                              st.floats(0, 1), st.text(max_size=1)))
    keepdim = data.draw(st.booleans())

    def norm_dims():
        if dim is None:
            return None
        ds = dim if isinstance(dim, tuple) else (dim,)
        if not all(isinstance(d, int) for d in ds):
            raise Expect(TypeError)
        nd = max(a.ndim, 1)
        if any(not -nd <= d < nd for d in ds):
            raise Expect(IndexError)
        out = tuple(d % nd for d in ds)
        if len(set(out)) != len(out):
            raise Expect(ValueError)
        if a.ndim == 0:
            return "0-d"
        return out

    def faults():
        """Every fault of the call; rtx may report any one of them."""
        errs: set[type] = set()
        if name in ("max", "min", "argmax") and isinstance(dim, tuple):
            errs |= {TypeError, ValueError}
        try:
            norm_dims()
        except Expect as e:
            errs.update(e.types)
        if name == "mean" and a.dtype.kind != "f":
            errs.add(TypeError)
        if a.size == 0 and name in ("max", "min", "argmax") and (
                dim is None or (isinstance(dim, int) and a.ndim and -a.ndim <= dim < a.ndim
                                and a.shape[dim] == 0)):
            errs.add(ValueError)          # nothing to reduce (a non-empty dim of an empty
            #                               tensor reduces fine, to an empty result, as in PyTorch)
        return errs

    def model():
        errs = faults()
        if errs:
            raise Expect(*errs)
        ax = norm_dims()
        if ax == "0-d":
            # an explicit dim 0 / -1 on a 0-d tensor: PyTorch reduces over nothing;
            # rtx may also refuse it cleanly (numpy's AxisError)
            r = model_for(None)
            return r  # max/min(dim): (values, index 0), as in PyTorch
        return model_for(ax)

    def model_for(ax):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name == "sum":
                dt = a.dtype if a.dtype.kind == "f" else np.int64
                return np.asarray(np.sum(a, axis=ax, keepdims=keepdim, dtype=dt))
            if name == "mean":
                return np.asarray(np.mean(a, axis=ax, keepdims=keepdim, dtype=a.dtype))
            # max()/min() without a dim give a 0-d tensor whatever keepdim says
            kd = keepdim and not (name in ("max", "min") and dim is None)
            try:
                if name in ("max", "amax"):
                    v = np.max(a, axis=ax, keepdims=kd)
                elif name in ("min", "amin"):
                    v = np.min(a, axis=ax, keepdims=kd)
                else:
                    if dim is None:
                        r = np.asarray(np.argmax(a))
                        return r.reshape((1,) * a.ndim) if keepdim else r
                    return np.asarray(np.argmax(a, axis=ax[0] if ax else None,
                                                keepdims=keepdim))
            except ValueError:            # reducing a zero-length axis
                raise Expect(ValueError) from None
            if name in ("max", "min") and dim is not None:
                if ax is None:
                    return (np.asarray(v), np.zeros((), np.int64))
                arg = (np.argmax if name == "max" else np.argmin)(a, axis=ax[0],
                                                                  keepdims=keepdim)
                return (np.asarray(v), np.asarray(arg))
            return np.asarray(v)

    fn = getattr(t, name)
    want = _try(model)
    if isinstance(want, tuple):
        CASES[f"reduce.{name}"] += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values, indices = fn(dim, keepdim)
        assert _equal(values.numpy(), want[0]), (values, want[0])
        if a.ndim:
            assert _equal(indices.numpy(), want[1]), (name, a, dim, indices, want[1])
        np.testing.assert_array_equal(t.numpy(), a)
        return
    check(f"reduce.{name}", lambda: fn(dim, keepdim), [t], model, close=True)


# -------------------------------------------------------------- matmul etc.
@FUZZ
@given(st.data())
def test_matmul_shapes_and_dtypes(data):
    t, a = data.draw(tensors(max_dims=3, max_side=4))
    u, b = data.draw(st.one_of(
        tensors(max_dims=3, max_side=4),
        # often a compatible partner
        st.builds(lambda k, m: (rtx.ones(k, m), np.ones((k, m), np.float32)),
                  st.just(a.shape[-1] if a.ndim else 1), st.integers(0, 3))))

    def model():
        if a.ndim == 0 or b.ndim == 0:
            raise Expect(ValueError)
        with np.errstate(all="ignore"):
            try:
                np.matmul(a, b)
                pt = torch_result_type(a, b)     # computed in PyTorch's result dtype
                return np.asarray(np.matmul(a.astype(pt), b.astype(pt)))
            except (ValueError, TypeError) as e:
                raise Expect(ValueError, TypeError) from e

    check("matmul", lambda: rtx.matmul(t, u), [t, u], model, close=True, exact_dtype=False)


@FUZZ
@given(st.data())
def test_reshape_and_views(data):
    t, a = data.draw(tensors(max_side=4))
    shape = data.draw(st.lists(st.one_of(st.integers(-2, 6), st.just(-1), st.floats(0, 2),
                                         st.none()), max_size=4))

    def model():
        if not all(isinstance(s, int) for s in shape):
            raise Expect(TypeError)
        if shape.count(-1) > 1 or any(s < -1 for s in shape):
            raise Expect(ValueError)
        try:
            return a.reshape(shape)
        except ValueError:
            raise Expect(ValueError) from None

    check("reshape", lambda: t.reshape(*shape) if shape else t.reshape(()), [t], model)


@FUZZ
@given(st.data())
def test_getitem_keys(data):
    t, a = data.draw(tensors(min_dims=1, max_side=4))
    n = a.shape[0]
    key = data.draw(st.one_of(
        st.integers(-n - 2, n + 2), st.slices(n + 2),
        st.tuples(st.integers(-2, 2), st.integers(-2, 2)),
        st.lists(st.integers(-n - 1, n), max_size=3), st.floats(0, 2), st.none(),
        st.just(Ellipsis), st.text(max_size=1)))

    def model():
        try:
            k = np.asarray(key) if isinstance(key, list) else key
            return np.array(a[k], copy=True)
        except (IndexError, TypeError, ValueError) as e:
            raise Expect(IndexError, TypeError, ValueError) from e

    check("getitem", lambda: t[key], [t], model)


@FUZZ
@given(st.data(), st.sampled_from(["concat", "stack"]))
def test_concat_and_stack(data, name):
    parts = data.draw(st.lists(tensors(dtypes=FLOATS, max_dims=2, max_side=3), max_size=3))
    dim = data.draw(st.integers(-3, 2))
    ts = [p[0] for p in parts]
    arrs = [p[1] for p in parts]

    def model():
        if not parts:
            raise Expect(ValueError)
        if len({x.dtype for x in arrs}) > 1:
            raise Expect(TypeError, ValueError)
        try:
            fn = np.concatenate if name == "concat" else np.stack
            if name == "concat" and arrs[0].ndim == 0:
                raise Expect(ValueError)
            return fn(arrs, axis=dim)
        except (ValueError, np.exceptions.AxisError) as e:
            raise Expect(ValueError, IndexError) from e

    check(name, lambda: getattr(rtx, name)(ts, dim), ts, model)


@FUZZ
@given(st.data())
def test_where_and_backward_grads(data):
    t, a = data.draw(tensors(dtypes=FLOATS, min_dims=1, max_side=4))
    cond = data.draw(st.one_of(
        st.just(a > 0), st.just(np.ones(a.shape, np.int64)), st.just([True]),
        st.just(np.ones((7,), bool))))

    def model():
        c = np.asarray(cond)
        if c.dtype.kind != "b":
            raise Expect(TypeError)
        try:
            return np.where(c, a, 0 * a)
        except ValueError:
            raise Expect(ValueError) from None

    check("where", lambda: rtx.where(cond, t, t * 0), [t], model)

    x = rtx.tensor(a, requires_grad=True)
    y = (x * 2).sum()
    g = data.draw(st.one_of(st.none(), st.just(np.ones((2, 2))), st.just(rtx.ones(3)),
                            st.just(1.0), st.just("x")))

    def model_bw():
        if g is None:
            return np.full(a.shape, 2.0, a.dtype)
        if isinstance(g, str):
            raise Expect(TypeError, ValueError)
        shape = np.shape(g.numpy() if isinstance(g, rtx.Tensor) else g)
        if shape != ():
            raise Expect(ValueError, RuntimeError)
        return np.full(a.shape, 2.0 * float(g), a.dtype)

    def call():
        y.backward(g, retain_graph=True)
        gx = x.grad.numpy().copy()
        x.grad = None
        return gx

    check("backward(grad)", call, [], model_bw, close=True)


# -------------------------------------------------------------------- threads
@FUZZ
@given(st.one_of(st.integers(-5, 8), st.none(), st.floats(0, 4), st.booleans(),
                 st.text(max_size=1), st.just(2**40), st.just(-(2**40))))
def test_set_num_threads_inputs(n):
    def model():
        if n is None:
            return None
        if isinstance(n, bool) or not isinstance(n, int):
            raise Expect(TypeError)
        if n == 0:
            raise Expect(ValueError)
        return None

    try:
        want = _try(model)
        CASES["set_num_threads"] += 1
        if isinstance(want, Expect):
            with pytest.raises(want.types):
                rtx.set_num_threads(n)
        else:
            rtx.set_num_threads(n)
            k = rtx.get_num_threads()
            assert isinstance(k, int) and k >= 1
            x = rtx.randn(300, 128, dtype=rtx.float64, seed=0)   # big enough to go parallel
            idx = np.arange(300)[::-1].copy()
            got = rtx.index_select(x, idx).numpy()
            np.testing.assert_array_equal(got, x.numpy()[::-1])
    finally:
        rtx.set_num_threads(None)


@pytest.mark.parametrize("values", [
    [True, False, True], [False, True, False],
    [np.iinfo(np.int64).min, 0, 5], [3, np.iinfo(np.int64).min, np.iinfo(np.int64).min],
    [np.iinfo(np.int32).max, np.iinfo(np.int32).min, 0],
])
def test_min_indices_for_bools_and_extreme_ints(values):
    """min(dim) used argmax(-x): wrong for bools (not negated) and at INT_MIN (-x overflows)."""
    a = np.array(values)
    for dt in ([a.dtype] if a.dtype == bool else [np.int64, np.int32]):
        if dt == np.int32 and (a.min() < np.iinfo(np.int32).min):
            continue
        x = a.astype(dt)
        CASES["min(dim) indices"] += 1
        v, i = rtx.tensor(x).min(0)
        assert v.item() == x.min() and i.item() == int(np.argmin(x))
        v, i = rtx.tensor(np.stack([x, x[::-1]])).min(1)
        np.testing.assert_array_equal(i.numpy(), [np.argmin(x), np.argmin(x[::-1])])


# ------------------------------------------------- the rest of the public API
@pytest.mark.parametrize("name", ["leaky_relu", "elu"])
@PER_OP
@given(data=st.data())
def test_parametrised_activations(data, name):
    t, a = data.draw(tensors(dtypes=FLOATS + [np.int64], max_side=4))
    param = data.draw(st.one_of(st.floats(-2, 2), st.just(float("nan")), st.just(float("inf")),
                                st.none(), st.text(max_size=1), st.integers(-2, 2)))

    def model():
        out_dt = a.dtype if a.dtype.kind == "f" else np.dtype(np.float32)
        if param is None or isinstance(param, str):
            # refused when used; an empty input never uses it (either is fine)
            raise Expect(TypeError, alt=np.empty(a.shape, out_dt) if a.size == 0 else None)
        out_dt = a.dtype if a.dtype.kind == "f" else np.dtype(np.float32)  # like PyTorch
        x = a.astype(out_dt)
        with np.errstate(all="ignore"):
            if name == "leaky_relu":
                r = np.where(x > 0, x, x * param)
            else:
                r = np.where(x > 0, x, param * np.expm1(np.minimum(x, 0)))
        return r.astype(out_dt)

    check(name, lambda: getattr(rtx, name)(t, param), [t], model, close=True)


@PER_OP
@given(data=st.data())
def test_permute_and_transpose(data):
    t, a = data.draw(tensors(max_side=3))
    dims = data.draw(st.one_of(st.permutations(list(range(a.ndim))),
                               st.lists(st.integers(-4, 4), max_size=4),
                               st.lists(st.one_of(st.floats(0, 2), st.none()), min_size=1,
                                        max_size=2)))
    d0, d1 = data.draw(st.integers(-4, 4)), data.draw(st.integers(-4, 4))

    def model_p():
        if not all(isinstance(d, int) for d in dims):
            raise Expect(TypeError)
        nd = max(a.ndim, 1)
        if len(dims) != a.ndim or sorted(d % nd for d in dims if -nd <= d < nd) != \
                list(range(a.ndim)) or any(not -nd <= d < nd for d in dims):
            raise Expect(ValueError, IndexError)
        return np.transpose(a, dims)

    check("permute", lambda: rtx.permute(t, dims), [t], model_p)

    def model_t():
        nd = max(a.ndim, 1)
        if not (-nd <= d0 < nd and -nd <= d1 < nd):
            raise Expect(IndexError)
        if a.ndim == 0:
            return a
        return np.swapaxes(a, d0, d1)

    check("transpose", lambda: rtx.transpose(t, d0, d1), [t], model_t)


@FUZZ
@given(st.one_of(st.integers(-5, 20), st.floats(-5, 20), st.just(float("nan")),
                 st.just(float("inf")), st.none(), st.just(2**70)),
       st.one_of(st.none(), st.integers(-5, 20), st.floats(-5, 20)),
       st.one_of(st.integers(-3, 3), st.floats(-2, 2), st.just(0.0)),
       st.sampled_from([None, rtx.float64, rtx.int32, "bad"]))
def test_arange(start, end, step, dtype):
    def model():
        errs: set[type] = set()       # several faults: rtx may report any one
        if isinstance(dtype, str):
            errs.add(TypeError)
        if step == 0:
            errs.add(ValueError)
        if start is None:
            errs |= {TypeError, ValueError}
            if end is None and step != 0 and not isinstance(dtype, str):
                # numpy reads arange(0, None) as empty: accept that too
                with np.errstate(all="ignore"):
                    alt = np.arange(0, None, step, dtype=dtype or np.float32)
                raise Expect(*errs, alt=alt)
        if errs:
            raise Expect(*errs)
        s, e = (0, start) if end is None else (start, end)
        with np.errstate(all="ignore"):
            n = (float(e) - float(s)) / float(step)
        hypothesis.assume(not (math.isfinite(n) and n > 1e6))   # no multi-GB aranges here
        ints = all(isinstance(v, int) for v in (s, e, step))
        dt = dtype if dtype is not None else (np.int64 if ints else np.float32)
        try:
            with np.errstate(all="ignore"):
                return np.arange(s, e, step, dtype=dt)
        except (ValueError, OverflowError, TypeError, MemoryError) as ex:
            raise Expect(ValueError, OverflowError, TypeError, MemoryError) from ex

    check("arange", lambda: rtx.arange(start, end, step, dtype=dtype), [], model)


@FUZZ
@given(st.one_of(st.none(), st.integers(), st.text(max_size=2), st.just(b"bytes"),
                 st.just(memoryview(b"abcd")), st.lists(st.integers(), max_size=2),
                 arrays(RTX_DTYPES + [np.int8, np.float16, np.uint16, np.complex64],
                        allowed=["c", "transposed", "strided", "readonly"])))
def test_from_dlpack_any_object(obj):
    def model():
        if not hasattr(obj, "__dlpack__"):
            raise Expect(TypeError, AttributeError, ValueError, BufferError)
        host = np.asarray(obj)
        if host.dtype not in [np.dtype(d) for d in RTX_DTYPES]:
            raise Expect(TypeError, ValueError, BufferError)
        return host

    def call():
        try:
            return rtx.from_dlpack(obj)
        except (AttributeError, BufferError) as e:   # numpy's own refusals, re-labelled
            raise TypeError(str(e) or type(e).__name__) from None

    check("from_dlpack", call, [obj], model)


@FUZZ
@given(st.data())
def test_like_constructors_and_cache_limit(data):
    t, a = data.draw(tensors(max_side=3))
    dtype = data.draw(st.sampled_from([None, rtx.float64, rtx.bool, np.int8, "x"]))
    for fn, fill in (("zeros_like", 0), ("ones_like", 1)):
        def model(fill=fill):
            if isinstance(dtype, str) or (dtype is not None and np.dtype(dtype) not in
                                          [np.dtype(d) for d in RTX_DTYPES]):
                raise Expect(TypeError)
            return np.full(a.shape, fill, dtype=a.dtype if dtype is None else dtype)

        check(fn, lambda fn=fn: getattr(rtx, fn)(t, dtype=dtype), [t], model)
    limit = data.draw(st.one_of(st.integers(-5, 1 << 20), st.none(), st.floats(0, 1)))
    old = rtx.get_cache_limit()
    try:
        def model_limit():
            if not isinstance(limit, int):
                raise Expect(TypeError)
            if limit < 0:
                raise Expect(ValueError)
            return np.asarray(limit)

        check("set_cache_limit", lambda: (rtx.set_cache_limit(limit),
                                          np.asarray(rtx.get_cache_limit()))[1], [],
              model_limit, exact_dtype=False)
        assert rtx.memory_stats()["cached_bytes"] <= rtx.get_cache_limit()
    finally:
        rtx.set_cache_limit(old)
