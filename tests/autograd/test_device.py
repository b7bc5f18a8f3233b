"""PyTorch's device habits (issue 20, item 4): rtx.device, device=, .to("cpu"), .cpu().

Any device but the CPU is a one-line error (a RuntimeError, as PyTorch's, that is
also a ValueError) raised before anything is created or changed."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import rtx

try:
    import torch
except ImportError:  # the torch.device cases and comparisons need it; the rest do not
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")
CPUS = ("cpu", "cpu:0", rtx.device("cpu"), rtx.device("cpu", 0), None) + (
    (torch.device("cpu"), torch.device("cpu:0")) if torch else ())
OTHERS = ("cuda", "cuda:0", "cuda:1", "mps", "xpu", "meta", 0) + (
    (torch.device("cuda"), torch.device("cuda", 1)) if torch else ())


def _one_line(exc: BaseException) -> None:
    assert "\n" not in str(exc) and "CPU" in str(exc)


@needs_torch
@pytest.mark.parametrize("spec", ["cpu", "cpu:0", ("cpu", 0), "torch", "torch0"])
def test_device_object_matches_torch(spec):
    if spec == "torch":
        d, t = rtx.device(torch.device("cpu")), torch.device("cpu")
    elif spec == "torch0":
        d, t = rtx.device(torch.device("cpu:0")), torch.device("cpu:0")
    elif isinstance(spec, tuple):
        d, t = rtx.device(*spec), torch.device(*spec)
    else:
        d, t = rtx.device(spec), torch.device(spec)
    assert d.type == t.type == "cpu"
    assert d.index == t.index
    assert repr(d) == repr(t) and str(d) == str(t)
    assert d == rtx.device(str(t)) and hash(d) == hash(rtx.device(str(t)))
    assert pickle.loads(pickle.dumps(d)) == d
    assert rtx.device(d) == d
    with pytest.raises(AttributeError):
        d.type = "cuda"  # type: ignore[misc]


def test_device_equality_and_cuda_namespace():
    assert rtx.device("cpu") != rtx.device("cpu:0") and rtx.device("cpu") == rtx.device("cpu")
    assert rtx.device("cpu") != "cpu" and str(rtx.device("cpu")) == "cpu"   # as torch.device
    if torch is not None:
        assert (torch.device("cpu") == "cpu") is False
    assert rtx.cuda.is_available() is False and rtx.cuda.device_count() == 0
    # the idiom of every PyTorch script
    dev = rtx.device("cuda" if rtx.cuda.is_available() else "cpu")
    assert dev.type == "cpu"


@pytest.mark.parametrize("bad", OTHERS, ids=str)
def test_other_devices_are_one_line_errors(bad):
    with pytest.raises(RuntimeError, match="CPU") as e:
        rtx.device(bad)
    _one_line(e.value)
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize("bad", ["cpu:1", "cpu:x", "foo", "", "cuda0"])
def test_malformed_device_strings(bad):
    with pytest.raises(RuntimeError):
        rtx.device(bad)


def test_device_bad_types():
    with pytest.raises(TypeError):
        rtx.device(1.5)
    with pytest.raises(TypeError):
        rtx.device("cpu", "0")
    with pytest.raises(ValueError):
        rtx.device("cpu:0", 0)


CREATORS = {
    "tensor": lambda d: rtx.tensor([1.0, 2.0], device=d),
    "zeros": lambda d: rtx.zeros(2, 3, device=d),
    "ones": lambda d: rtx.ones((2, 3), device=d),
    "empty": lambda d: rtx.empty(2, device=d),
    "full": lambda d: rtx.full((2,), 3.0, device=d),
    "arange": lambda d: rtx.arange(5, device=d),
    "rand": lambda d: rtx.rand(2, device=d, seed=0),
    "randn": lambda d: rtx.randn(2, device=d, seed=0),
    "zeros_like": lambda d: rtx.zeros_like(rtx.ones(2), device=d),
    "ones_like": lambda d: rtx.ones_like(rtx.ones(2), device=d),
    "empty_like": lambda d: rtx.empty_like(rtx.ones(2), device=d),
    "full_like": lambda d: rtx.full_like(rtx.ones(2), 7.0, device=d),
    "rand_like": lambda d: rtx.rand_like(rtx.ones(2), device=d),
    "randn_like": lambda d: rtx.randn_like(rtx.ones(2), device=d),
    "as_tensor": lambda d: rtx.as_tensor(np.ones(2), device=d),
    "randint": lambda d: rtx.randint(0, 5, (3,), device=d),
    "from_dlpack": lambda d: rtx.from_dlpack(np.ones(2), device=d),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(CREATORS))
@pytest.mark.parametrize("dev", CPUS, ids=str)
def test_creation_functions_take_device(name, dev):
    t = CREATORS[name](dev)
    assert isinstance(t, rtx.Tensor)
    assert t.device == rtx.device("cpu") and t.device.type == "cpu"
    assert repr(t.device) == repr(torch.zeros(1).device)


@pytest.mark.parametrize("name", sorted(CREATORS))
def test_creation_functions_refuse_other_devices(name):
    with pytest.raises(RuntimeError, match="CPU") as e:
        CREATORS[name]("cuda")
    _one_line(e.value)


@needs_torch
def test_like_functions_match_torch():
    a = rtx.tensor([[1, 2], [3, 4]])
    assert rtx.full_like(a, 7).tolist() == torch.full_like(torch.tensor([[1, 2], [3, 4]]),
                                                           7).tolist()
    assert rtx.zeros_like(a, dtype=rtx.float64).dtype == np.float64
    r = rtx.rand_like(rtx.ones(3, 4, dtype=rtx.float64), requires_grad=True)
    assert r.shape == (3, 4) and r.dtype == np.float64 and r.requires_grad
    assert ((r.numpy() >= 0) & (r.numpy() < 1)).all()
    with pytest.raises(TypeError, match="Tensor"):
        rtx.zeros_like([1, 2])  # type: ignore[arg-type]


def test_as_tensor_shares_like_torch():
    a = np.arange(4.0)
    t = rtx.as_tensor(a)
    a[0] = 9.0
    assert t.numpy()[0] == 9.0          # shared, as torch.as_tensor shares
    assert rtx.as_tensor(t) is t
    assert rtx.as_tensor(t, dtype=rtx.float32).dtype == np.float32
    assert rtx.as_tensor([1, 2]).dtype == np.int64


@needs_torch
def test_tensor_to_forms():
    x = rtx.ones(2, 3)
    assert x.device.type == "cpu" and x.is_cuda is False
    for dev in CPUS[:-1]:
        assert x.to(dev) is x
    assert x.to(device="cpu") is x and x.cpu() is x
    assert x.to("cpu", rtx.float64).dtype == np.float64
    assert x.to(torch.device("cpu"), dtype=rtx.int64).dtype == np.int64
    assert x.to(rtx.float64).dtype == np.float64          # to(dtype) kept
    assert x.to(dtype="float64").dtype == np.float64
    assert x.to(rtx.ones(1, dtype=rtx.int32)).dtype == np.int32   # to(other)
    assert x.to(rtx.float64, False, False).dtype == np.float64    # non_blocking, copy
    y = x.to("cpu", copy=True)
    assert y is not x and np.array_equal(y.numpy(), x.numpy())
    y.add_(1.0)
    assert x.numpy().max() == 1.0                           # a real copy
    assert x.to(rtx.float32, copy=True) is not x


def test_tensor_to_keeps_the_graph():
    x = rtx.ones(3, dtype=rtx.float64, requires_grad=True)
    y = x.to("cpu", copy=True) * 2
    y.sum().backward()
    assert x.grad is not None and x.grad.tolist() == [2.0, 2.0, 2.0]


@needs_torch
@pytest.mark.parametrize("call", [
    lambda x: x.to("cuda"), lambda x: x.to("cuda:0", rtx.float64),
    lambda x: x.to(device="mps"), lambda x: x.to(torch.device("cuda")), lambda x: x.to(0),
    lambda x: x.cuda(),
], ids=["cuda", "cuda0-dtype", "mps-kw", "torch", "ordinal", "cuda()"])
def test_tensor_to_other_device_is_an_error(call):
    x = rtx.ones(2)
    with pytest.raises(RuntimeError, match="CPU") as e:
        call(x)
    _one_line(e.value)


def test_tensor_to_bad_arguments():
    x = rtx.ones(2)
    with pytest.raises(TypeError, match="unsupported dtype"):
        x.to("float16x")
    with pytest.raises(TypeError, match="keyword"):
        x.to("cpu", devcie="cpu")
    with pytest.raises(TypeError):
        x.to("cpu", device="cpu")
    with pytest.raises(TypeError):
        x.to(rtx.float64, rtx.float32)


@needs_torch
def test_module_to_device_and_dtype():
    m = rtx.nn.Sequential(rtx.nn.Linear(2, 3), rtx.nn.ReLU(), rtx.nn.Linear(3, 1))
    w = m[0].weight
    before = w.numpy().copy()
    assert m.to("cpu") is m and m.to(rtx.device("cpu")) is m and m.cpu() is m
    assert m.to(device=torch.device("cpu")) is m
    assert m[0].weight is w and np.array_equal(w.numpy(), before)
    assert m.to("cpu", rtx.float64) is m and w.dtype == np.float64   # to(device, dtype)
    assert m.to(dtype=rtx.float32) is m and w.dtype == np.float32
    assert m.to(rtx.ones(1, dtype=rtx.float64)) is m and w.dtype == np.float64
    with pytest.raises(TypeError, match="floating point"):
        m.to(rtx.int64)


@pytest.mark.parametrize("call", [
    lambda m: m.to("cuda"), lambda m: m.to("cuda", rtx.float64),
    lambda m: m.to(device="mps"), lambda m: m.cuda(), lambda m: m.cuda(1),
], ids=["cuda", "cuda-dtype", "mps", "cuda()", "cuda(1)"])
def test_module_other_device_is_an_error_and_changes_nothing(call):
    m = rtx.nn.Linear(2, 3)
    with pytest.raises(RuntimeError, match="CPU") as e:
        call(m)
    _one_line(e.value)
    assert m.weight.dtype == np.float32   # the dtype was not applied before the check


@needs_torch
def test_heterodata_to_uses_the_same_check():
    data = rtx.data.HeteroData()
    data["paper"].x = rtx.ones(2, 2)
    assert data.to(rtx.device("cpu")) is data and data.to(torch.device("cpu")) is data
    with pytest.raises(RuntimeError, match="CPU"):
        data.to(torch.device("cuda"))


def test_randint_like_torch():
    a = rtx.randint(10, (4, 5), seed=0)
    assert a.dtype == np.int64 and a.shape == (4, 5)
    assert ((a.numpy() >= 0) & (a.numpy() < 10)).all()
    b = rtx.randint(-3, 3, (1000,), generator=rtx.Generator(1))
    assert set(b.numpy().tolist()) == {-3, -2, -1, 0, 1, 2}
    np.testing.assert_array_equal(rtx.randint(5, (6,), seed=2).numpy(),
                                  rtx.randint(5, (6,), seed=2).numpy())
    assert rtx.randint(0, 2, 3, dtype=rtx.float64, requires_grad=True).requires_grad
    with pytest.raises(ValueError, match="low < high"):
        rtx.randint(3, 3, (2,))
    with pytest.raises(TypeError, match="positional"):
        rtx.randint(5)
    with pytest.raises(TypeError, match="high must be an int"):
        rtx.randint(0, 2.5, (2,))
    with pytest.raises(RuntimeError, match="floating point"):
        rtx.randint(0, 2, (2,), requires_grad=True)
