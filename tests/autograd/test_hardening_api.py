"""Python-side hardening (issue 9): thread-safe gradient accumulation, in-place
semantics, int64 overflow, numpy subclasses at the boundary, PyTorch-parity
edge cases, copy/pickle."""

from __future__ import annotations

import copy
import pickle
import threading
import time

import numpy as np
import pytest

import rtx
from rtx._backend_state import autodiff_for


# ------------------------------------------------------------------ threads
class _SlowAdd(rtx.CpuBackend):
    """CPU backend whose add sleeps (releasing the GIL): widens the window of any
    unsynchronised read-modify-write of .grad from nanoseconds to milliseconds."""

    def add(self, a, b):
        time.sleep(0.002)
        return super().add(a, b)


@pytest.mark.parametrize("slow", [False, True])
def test_concurrent_backward_on_a_shared_leaf_loses_no_update(backend, slow):
    n_threads, n_iter = 8, 10 if slow else 40
    if slow:
        with rtx.use_backend(_SlowAdd()):
            x = rtx.ones(64, dtype=rtx.float64, requires_grad=True)
    else:
        x = rtx.ones(64, dtype=rtx.float64, requires_grad=True)
    start = threading.Barrier(n_threads)
    errors = []

    def work(k):
        try:
            start.wait()
            for _ in range(n_iter):
                (x * float(k + 1)).sum().backward()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    want = n_iter * sum(range(1, n_threads + 1))
    np.testing.assert_array_equal(x.grad.numpy(), np.full(64, float(want)))


def test_autodiff_for_makes_one_decorator_under_threads(monkeypatch):
    import rtx._backend_state as bs

    class SlowAutodiff(bs.Autodiff):
        def __init__(self, inner):
            time.sleep(0.01)  # widen the check-then-insert window
            super().__init__(inner)

    monkeypatch.setattr(bs, "Autodiff", SlowAutodiff)
    b = rtx.CpuBackend()
    start = threading.Barrier(8)
    got = []

    def work():
        start.wait()
        got.append(autodiff_for(b))

    ts = [threading.Thread(target=work) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len({id(a) for a in got}) == 1


def test_grad_mode_is_thread_local():
    seen = []
    with rtx.no_grad():
        t = threading.Thread(target=lambda: seen.append(rtx.is_grad_enabled()))
        t.start()
        t.join()
        assert not rtx.is_grad_enabled()
    assert seen == [True]


# ---------------------------------------------------------------- in place
def test_manual_sgd_updates_the_parameter_in_place(backend, dtype):
    p = rtx.tensor([1.0, 2.0, 3.0], dtype=dtype, requires_grad=True)
    ident = id(p)
    (p * p).sum().backward()
    with rtx.no_grad():
        p -= 0.1 * p.grad
    assert id(p) == ident and p.is_leaf and p.requires_grad
    np.testing.assert_allclose(p.numpy(), [0.8, 1.6, 2.4], rtol=1e-6)


@pytest.mark.parametrize("op,ref", [("+=", np.add), ("-=", np.subtract),
                                    ("*=", np.multiply), ("/=", np.true_divide)])
def test_augmented_assignment_writes_the_buffer(op, ref):
    base = rtx.tensor([[1.0, 2.0], [3.0, 4.0]])
    view = base[0]                          # shares storage on the CPU backend
    alias = base
    other = rtx.tensor([2.0, 4.0])
    want = ref(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), [2.0, 4.0])
    ns = {"b": base, "o": other}
    exec(f"b {op} o", ns)
    assert ns["b"] is alias
    np.testing.assert_allclose(base.numpy(), want)
    np.testing.assert_allclose(view.numpy(), want[0])   # the view sees the write


def test_augmented_assignment_on_a_leaf_that_requires_grad_raises():
    p = rtx.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        p -= 1.0
    np.testing.assert_array_equal(p.numpy(), [1.0, 1.0, 1.0])


def test_augmented_assignment_on_a_recorded_tensor_stays_on_the_tape():
    x = rtx.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h += x                                  # recorded out of place (h rebound)
    h.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_inplace_with_an_operand_that_requires_grad_raises():
    acc = rtx.zeros(2)
    x = rtx.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="operand requires grad"):
        acc.add_(x)
    np.testing.assert_array_equal(acc.numpy(), [0.0, 0.0])
    with rtx.no_grad():
        acc.add_(x)
    np.testing.assert_array_equal(acc.numpy(), [1.0, 1.0])


@pytest.mark.parametrize("call,res,out", [
    (lambda t: t.add_(1.5), "Float", "Long"),
    (lambda t: t.mul_(2.0), "Float", "Long"),
    (lambda t: t.div_(2), "Float", "Long"),
    (lambda t: t.sub_(rtx.tensor([1.0, 1.0])), "Float", "Long"),
])
def test_inplace_unsafe_cast_into_int_raises_like_torch(call, res, out):
    t = rtx.tensor([1, 2])
    with pytest.raises(RuntimeError, match=f"result type {res} can't be cast to the desired "
                                           f"output type {out}"):
        call(t)
    np.testing.assert_array_equal(t.numpy(), [1, 2])
    assert t._version == 0


def test_inplace_safe_casts_are_allowed():
    t = rtx.tensor([1, 2], dtype=rtx.int32)
    t.add_(rtx.tensor([1, 1]))              # int64 into int32: same kind (PyTorch allows)
    t.copy_(rtx.tensor([2.7, 3.2]))         # copy_ casts freely (PyTorch too)
    assert t.tolist() == [2, 3]
    t.fill_(2.9)
    assert t.tolist() == [2, 2]
    b = rtx.tensor([True, False])
    with pytest.raises(RuntimeError, match="result type Long can't be cast to the desired "
                                           "output type Bool"):
        b.add_(1)
    b.add_(True)
    f = rtx.tensor([1.0], dtype=rtx.float32)
    f.add_(rtx.tensor([1.0], dtype=rtx.float64))   # float64 into float32: allowed
    assert f.tolist() == [2.0]


def test_zero_clears_nan_and_inf(backend, dtype):
    t = rtx.tensor([1.0, np.nan, np.inf, -np.inf], dtype=dtype)
    t.zero_()
    np.testing.assert_array_equal(t.numpy(), [0.0, 0.0, 0.0, 0.0])


# ----------------------------------------------------------- int64 overflow
BIG = [2**63, 2**64 - 1, 2**70, -(2**63) - 1]


@pytest.mark.parametrize("v", BIG)
def test_python_ints_beyond_int64_raise(v):
    for data in (v, [v], [1, v], [[0], [v]]):
        with pytest.raises(OverflowError, match="int64"):
            rtx.tensor(data)
    with pytest.raises(OverflowError):
        rtx.tensor([1, 2]) + v
    with pytest.raises(OverflowError):
        rtx.tensor([1.0, 2.0]) * v         # PyTorch: OverflowError too
    with pytest.raises(OverflowError):
        rtx.zeros(2, dtype=rtx.int64).fill_(v)
    with pytest.raises(OverflowError):
        rtx.full((2,), v)
    with pytest.raises(OverflowError):
        rtx.full((2,), v, dtype=rtx.float32)


def test_int64_edges_still_work():
    assert rtx.tensor([2**63 - 1, -(2**63)]).tolist() == [2**63 - 1, -(2**63)]
    assert rtx.tensor([1.5, 2**70]).dtype == rtx.float32   # a float list: converted
    assert (rtx.tensor([0]) + (2**63 - 1)).tolist() == [2**63 - 1]


# ---------------------------------------------------------- numpy subclasses
def test_memmap_from_np_load(tmp_path, backend):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(6, dtype=np.float32).reshape(2, 3))
    m = np.load(path, mmap_mode="r")
    assert isinstance(m, np.memmap)
    for t in (rtx.from_numpy(m), rtx.tensor(m)):
        np.testing.assert_array_equal((t * 2).numpy(), np.arange(6).reshape(2, 3) * 2)
        np.testing.assert_array_equal((2 + t).numpy(), np.arange(6).reshape(2, 3) + 2)
        np.testing.assert_array_equal(t.sum(1).numpy(), [3, 12])
        assert type(t.numpy()) is np.ndarray
    t = rtx.ones(2, 3)
    np.testing.assert_array_equal((t + m).numpy(), np.arange(6).reshape(2, 3) + 1)
    idx = np.load(_save(tmp_path / "i.npy", np.array([1, 0, 1])), mmap_mode="r")
    np.testing.assert_array_equal(rtx.index_select(rtx.tensor([[1.0], [2.0]]), idx).numpy(),
                                  [[2.0], [1.0], [2.0]])


def _save(path, a):
    np.save(path, a)
    return path


def test_np_matrix_keeps_its_2d_shape_as_a_plain_tensor():
    m = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    for t in (rtx.tensor(m), rtx.from_numpy(m)):
        assert t.shape == (2, 2) and type(t.numpy()) is np.ndarray
        np.testing.assert_array_equal((t * 2).numpy(), [[2.0, 4.0], [6.0, 8.0]])
        # elementwise, not np.matrix's matrix product
        np.testing.assert_array_equal((t * t).numpy(), [[1.0, 4.0], [9.0, 16.0]])
        assert t.sum().item() == 10.0
    assert rtx.tensor(m[0]).shape == (1, 2)


def test_masked_arrays_with_a_mask_are_refused():
    ma = np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    with pytest.raises(TypeError, match="masked"):
        rtx.tensor(ma)
    with pytest.raises(TypeError, match="masked"):
        rtx.from_numpy(ma)
    with pytest.raises(TypeError, match="masked"):
        rtx.ones(3) + ma
    with pytest.raises(TypeError, match="masked"):
        rtx.index_select(rtx.ones(3, 2), np.ma.masked_array([0, 2], mask=[0, 1]))
    with pytest.raises(TypeError, match="masked"):
        rtx.ones(3)[np.ma.masked_array([0, 2], mask=[0, 1])]
    clean = np.ma.masked_array([1.0, 2.0], mask=False)  # nothing masked: accepted
    assert rtx.tensor(clean).tolist() == [1.0, 2.0]


# ---------------------------------------------------------- PyTorch parity
def test_dims_on_0d_tensors(backend):
    s = rtx.tensor(3.0)
    for call in (lambda: s.sum(0), lambda: s.sum(-1), lambda: s.sum((0,)),
                 lambda: s.mean(0), lambda: s.amax(0), lambda: s.amin(-1),
                 lambda: s.sum(0, keepdim=True)):
        r = call()
        assert r.shape == () and r.item() == 3.0
    assert s.softmax(0).item() == 1.0 and s.log_softmax(-1).item() == 0.0
    v, i = s.max(0)
    assert v.item() == 3.0 and i.item() == 0 and i.dtype == rtx.int64
    assert s.argmax(0).item() == 0
    with pytest.raises(IndexError):
        s.sum(1)
    x = rtx.tensor(2.0, requires_grad=True)
    (x.softmax(0) + x.sum(0) * 3).backward()
    assert x.grad.item() == pytest.approx(3.0)


def test_reductions_with_an_empty_non_reduced_dim(backend):
    e = rtx.zeros(0, 3)
    assert e.sum(1).shape == (0,)
    assert e.sum(0).tolist() == [0.0, 0.0, 0.0]
    assert e.amax(1).shape == (0,) and e.amin(1).shape == (0,)
    v, i = e.max(1)
    assert v.shape == (0,) and i.shape == (0,)
    assert e.argmax(1).shape == (0,)
    for call in (lambda: e.amax(0), lambda: e.max(0), lambda: e.argmax(0), lambda: e.max()):
        with pytest.raises(ValueError):
            call()


def test_expand_minus_one_in_a_new_dim_raises():
    with pytest.raises(ValueError, match="leading, non-existing dimension 0"):
        rtx.ones(3).expand(-1, 3)
    with pytest.raises(ValueError):
        rtx.ones(3).expand(2, -2)
    assert rtx.ones(1, 3).expand(2, -1).shape == (2, 3)
    assert rtx.ones(3).expand(2, -1).shape == (2, 3)


def test_nan_gradients_follow_pytorch():
    nan = float("nan")
    a = rtx.tensor([1.0, nan, -3.0], requires_grad=True)
    a.relu().sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0, 0.0])  # NaN passes g
    a = rtx.tensor([1.0, nan, 3.0], requires_grad=True)
    a.max().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 1.0, 0.0])
    a = rtx.tensor([[1.0, nan, 3.0]], requires_grad=True)
    v, i = a.max(1)
    v.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[0.0, 1.0, 0.0]])
    assert i.tolist() == [1]
    a = rtx.tensor([1.0, nan, 3.0], requires_grad=True)
    b = rtx.tensor([2.0, 2.0, nan], requires_grad=True)
    rtx.maximum(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 1.0, 1.0])
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 1.0, 1.0])
    a = rtx.tensor([1.0, nan, 3.0], requires_grad=True)
    b = rtx.tensor([2.0, 2.0, nan], requires_grad=True)
    rtx.minimum(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(b.grad.numpy(), [0.0, 1.0, 1.0])


def test_pow_gradient_at_zero_to_the_zero(backend, dtype):
    a = rtx.tensor([0.0, 0.0, 2.0], dtype=dtype, requires_grad=True)
    b = rtx.tensor([0.0, 1.0, 0.0], dtype=dtype, requires_grad=True)
    (a ** b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 1.0, 0.0])
    np.testing.assert_allclose(b.grad.numpy(), [0.0, 0.0, np.log(2.0)], rtol=1e-6)
    b2 = rtx.tensor([0.0], dtype=dtype, requires_grad=True)
    (0.0 ** b2).sum().backward()
    assert b2.grad.tolist() == [0.0]
    c = rtx.tensor([0.0], dtype=dtype, requires_grad=True)
    with np.errstate(all="ignore"):
        d = rtx.tensor([-1.0], dtype=dtype, requires_grad=True)
        (c ** d).sum().backward()
    assert d.grad.tolist() == [-np.inf]       # PyTorch: inf * log(0) = -inf


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sigmoid", "tanh", "elu",
                                  "leaky_relu", "softmax", "log_softmax"])
def test_float_ops_on_bool_and_int_promote_to_float32(backend, name):
    for data, dt in (([True, False, True], rtx.bool), ([1, 2, 3], rtx.int64),
                     ([1, 2, 3], rtx.int32)):
        t = rtx.tensor(data, dtype=dt)
        r = getattr(t, name)()
        assert r.dtype == rtx.float32
        with np.errstate(all="ignore"):
            want = getattr(rtx.tensor(np.asarray(data, np.float32)), name)().numpy()
        np.testing.assert_array_equal(r.numpy(), want)   # float32 precision, not float16


def test_bool_exp_is_not_float16_precise():
    r = rtx.tensor([True]).exp()
    assert r.dtype == rtx.float32
    assert abs(r.item() - np.e) < 1e-6            # float16 would be 2.719 (off by 7e-4)


def test_deepcopy_is_a_normal_tensor(backend, dtype):
    x = rtx.tensor([1.0, 2.0], dtype=dtype, requires_grad=True)
    (x * x).sum().backward()
    c = copy.deepcopy(x)
    assert c is not x and c.requires_grad and c.is_leaf and c._ad is x._ad
    np.testing.assert_array_equal(c.grad.numpy(), [2.0, 4.0])
    (c + x).sum().backward()                  # combinable with the original
    with rtx.no_grad():
        c.add_(1.0)
    if backend.name == "cpu":
        assert x.tolist() == [1.0, 2.0]       # its own memory
    with pytest.raises(RuntimeError, match="leaf"):
        copy.deepcopy(x * 2)
    m = copy.deepcopy({"w": x, "w2": x})
    assert m["w"] is m["w2"]


def test_pickle_round_trip(backend, dtype):
    x = rtx.tensor([[1.0, 2.0]], dtype=dtype, requires_grad=True)
    (x * 3).sum().backward()
    y = pickle.loads(pickle.dumps(x))
    assert y.dtype == x.dtype and y.shape == x.shape and y.requires_grad
    assert y._ad is x._ad
    np.testing.assert_array_equal(y.grad.numpy(), [[3.0, 3.0]])
    np.testing.assert_array_equal((y + x).numpy(), [[2.0, 4.0]])
    i = pickle.loads(pickle.dumps(rtx.tensor([1, 2])))
    assert i.dtype == rtx.int64 and (i + 1).tolist() == [2, 3]


def test_import_rtx_loads_optim():
    from conftest import run_child

    # a fresh interpreter in a neutral directory (never the source tree)
    r = run_child("import rtx; print(rtx.optim.Adam.__name__, rtx.optim.SGD.__name__)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["Adam", "SGD"]


def test_pow_in_place(backend, dtype):
    t = rtx.tensor([1.0, 2.0, 3.0], dtype=dtype)
    alias = t
    with rtx.no_grad():
        t **= 2
    assert t is alias and t.tolist() == [1.0, 4.0, 9.0] and t._version == 1
    t.pow_(rtx.tensor([0.5, 0.5, 0.5], dtype=dtype))
    np.testing.assert_allclose(t.numpy(), [1.0, 2.0, 3.0], rtol=1e-6)
    i = rtx.tensor([2, 3])
    i **= 2
    assert i.tolist() == [4, 9]
    with pytest.raises(RuntimeError, match="result type Float can't be cast"):
        i **= 0.5
    with pytest.raises(ValueError):
        t.pow_(rtx.ones(2, 3, dtype=dtype))
    assert i.tolist() == [4, 9]
    p = rtx.ones(2, dtype=dtype, requires_grad=True)
    with pytest.raises(RuntimeError):
        p **= 2


@pytest.mark.parametrize("args", [(1, [2**78], [[6, 0.0]]), ([1],), ("a",), (0, 3, [0.5]),
                                  (0, 3, np.array([1, 2]))], ids=repr)
def test_arange_takes_numbers_only(args):
    """Sequences went into np.arange elementwise (object arithmetic): a zero inside
    one raised ZeroDivisionError from numpy's internals (found by the atheris job)."""
    with pytest.raises(TypeError, match="must be a number"):
        rtx.arange(*args)


def test_arange_numpy_scalars_and_one_element_tensors_are_numbers():
    assert rtx.arange(np.int64(3)).tolist() == [0, 1, 2]
    assert rtx.arange(np.int64(3)).dtype == rtx.int64
    assert rtx.arange(rtx.tensor(3)).tolist() == [0, 1, 2]
    assert rtx.arange(0, 1, np.float32(0.25)).tolist() == [0.0, 0.25, 0.5, 0.75]


# numpy's dtype parser raises SyntaxError (not TypeError) for malformed comma
# strings such as "f4,(" -- found by CI's atheris run through Tensor.to
@pytest.mark.parametrize("bad", ["f4,(", "(,f4", "i4,(1", "2)i4", "(2f4", "M8[x]", "nonsense"])
def test_malformed_dtype_strings_raise_type_error(bad):
    t = rtx.tensor([1.0, 2.0])
    for call in (lambda: t.to(bad), lambda: rtx.zeros(2, dtype=bad),
                 lambda: rtx.tensor([1], dtype=bad), lambda: rtx.arange(3, dtype=bad),
                 lambda: rtx.nn.Linear(2, 2).to(bad)):
        with pytest.raises(TypeError, match="dtype"):
            call()
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])
