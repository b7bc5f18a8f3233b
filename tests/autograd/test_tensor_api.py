"""The PyTorch-shaped Tensor API: creation, dtypes, host I/O, threads, config."""

from __future__ import annotations

import numpy as np
import pytest

import rtx


def test_dtype_constants():
    assert rtx.float32 == np.float32 and rtx.float64 == np.float64
    assert rtx.int32 == np.int32 and rtx.int64 == np.int64


def test_tensor_dtype_inference(backend):
    assert rtx.tensor(1.5).dtype == rtx.float32
    assert rtx.tensor([1.0, 2.0]).dtype == rtx.float32
    assert rtx.tensor([1, 2]).dtype == rtx.int64
    assert rtx.tensor([1, 2.5]).dtype == rtx.float32
    assert rtx.tensor([True, False]).dtype == rtx.bool
    assert rtx.tensor(np.ones(2, np.float64)).dtype == rtx.float64
    assert rtx.tensor(np.ones(2, np.int32)).dtype == rtx.int32
    assert rtx.tensor([1, 2], dtype=rtx.float64).dtype == rtx.float64
    assert rtx.tensor([]).shape == (0,)


def test_tensor_copies_its_data(backend):
    a = np.arange(4.0)
    t = rtx.tensor(a)
    a[0] = 99
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_from_numpy_shares_memory_and_keeps_array_alive():
    import gc
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = rtx.from_numpy(a)
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    t.numpy()[1, 2] = -1
    assert a[1, 2] == -1
    del a
    gc.collect()
    assert t.tolist() == [[42, 1, 2], [3, 4, -1]]


@pytest.mark.parametrize("make", [
    lambda: np.arange(12.0)[::2],                       # non-contiguous
    lambda: np.arange(6, dtype=">f8"),                   # big-endian
    lambda: np.frombuffer(b"\0" + bytes(32), dtype=np.float64, count=4, offset=1),  # misaligned
])
def test_from_numpy_copies_when_it_cannot_share(make):
    a = make()
    t = rtx.from_numpy(a)
    ref = a.astype(a.dtype.newbyteorder("="))
    np.testing.assert_array_equal(t.numpy(), ref)
    assert not np.shares_memory(t.numpy(), a)


def test_from_numpy_rejects_unsupported():
    with pytest.raises(TypeError):
        rtx.from_numpy(np.arange(5, dtype=np.int16))
    with pytest.raises(TypeError):
        rtx.from_numpy(np.ones(2, np.complex128))
    with pytest.raises(TypeError):
        rtx.from_numpy([1, 2])


def test_creation_functions(backend, dtype):
    assert rtx.zeros(2, 3, dtype=dtype).numpy().tolist() == [[0, 0, 0]] * 2
    assert rtx.ones((2,), dtype=dtype).numpy().dtype == dtype
    assert rtx.full((2, 2), 7.0, dtype=dtype).tolist() == [[7, 7], [7, 7]]
    assert rtx.full((1,), 3).dtype == rtx.int64
    assert rtx.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert rtx.arange(1, 2, 0.5).dtype == rtx.float32
    assert rtx.arange(0, 1, 0.25, dtype=dtype).tolist() == [0, 0.25, 0.5, 0.75]
    assert rtx.zeros(0, 4).shape == (0, 4)
    with pytest.raises(ValueError):
        rtx.arange(0, 1, 0)


def test_random_is_seedable(backend, dtype):
    a = rtx.rand(3, 4, dtype=dtype, seed=7).numpy()
    b = rtx.rand(3, 4, dtype=dtype, seed=7).numpy()
    np.testing.assert_array_equal(a, b)
    assert ((a >= 0) & (a < 1)).all()
    g1, g2 = rtx.Generator(3), rtx.Generator(3)
    np.testing.assert_array_equal(rtx.randn(5, generator=g1).numpy(),
                                  rtx.randn(5, generator=g2).numpy())
    assert not np.array_equal(rtx.randn(5, generator=g1).numpy(), rtx.randn(5, seed=3).numpy())
    rtx.manual_seed(11)
    x = rtx.randn(4).numpy()
    rtx.manual_seed(11)
    np.testing.assert_array_equal(x, rtx.randn(4).numpy())
    with pytest.raises(ValueError):
        rtx.rand(2, seed=1, generator=g1)
    with pytest.raises(TypeError):
        rtx.rand(2, dtype=rtx.int64)


def test_metadata_and_host_io(backend):
    t = rtx.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert t.shape == (2, 3) and t.ndim == 2 and t.numel() == 6 and len(t) == 2
    assert t.size(1) == 3 and t.dim() == 2
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert t[1, 2].item() == 6.0 and isinstance(t[1, 2].item(), float)
    assert np.asarray(t).shape == (2, 3)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert float(t[0, 0]) == 1.0 and int(rtx.tensor(3)) == 3
    with pytest.raises(ValueError):
        t.item()
    with pytest.raises(ValueError):
        bool(t)
    assert "tensor(" in repr(t)
    assert [r.tolist() for r in t] == [[1, 2, 3], [4, 5, 6]]


def test_numpy_interop_operators(backend):
    t = rtx.tensor([1.0, 2.0])
    r = np.array([1.0, 1.0], np.float32) + t
    assert isinstance(r, rtx.Tensor) and r.tolist() == [2.0, 3.0]
    assert (t + np.float32(1)).tolist() == [2.0, 3.0]


def test_threads_semantics():
    assert rtx.get_num_threads() >= 1
    rtx.set_num_threads(1)
    assert rtx.get_num_threads() == 1
    rtx.set_num_threads(3)
    assert rtx.get_num_threads() == (3 if rtx.config()["openmp"] else 1)
    rtx.set_num_threads(-1)
    assert rtx.get_num_threads() >= 1
    with pytest.raises(ValueError):
        rtx.set_num_threads(0)
    with pytest.raises(TypeError):
        rtx.set_num_threads(1.5)
    rtx.set_num_threads(None)


def test_omp_num_threads_respected():
    from conftest import child_env, run_python

    env = dict(child_env(), OMP_NUM_THREADS="1")
    out = run_python(["-c", "import rtx; print(rtx.get_num_threads())"], env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_default_threads_is_usable_cores():
    import os
    if not rtx.config()["openmp"]:
        assert rtx.get_num_threads() == 1
        return
    if os.environ.get("OMP_NUM_THREADS"):
        pytest.skip("OMP_NUM_THREADS is set")
    assert rtx.get_num_threads() == len(os.sched_getaffinity(0))


def test_openmp_runs_in_parallel():
    if not rtx.config()["openmp"] or len(__import__("os").sched_getaffinity(0)) < 2:
        pytest.skip("needs OpenMP and 2 CPUs")
    from rtx import _kernels
    assert _kernels.parallel_thread_ids(1_000_000, 2) == 2
    assert _kernels.parallel_thread_ids(1_000_000, 1) == 1


def test_show_config(capsys):
    rtx.show_config()
    out = capsys.readouterr().out
    for key in ("version", "openmp", "num_threads", "compiler_flags"):
        assert key in out
    assert rtx.__version__ in out


@pytest.mark.parametrize("setup", [
    "",
    "import ctypes; ctypes.CDLL('libgomp.so.1'); ",   # a libgomp loaded first (torch's)
])
def test_show_config_says_whose_openmp_spin_setting_holds(setup):
    """rtx sets no spin setting: libgomp's default holds (whether rtx's kernels
    load libgomp or find torch's loaded first), or the user's, and show_config
    says which."""
    import os
    import subprocess
    import sys

    if not rtx.config()["openmp"] or not os.path.exists("/proc/self/maps"):
        pytest.skip("needs OpenMP and /proc")
    with open("/proc/self/maps", encoding="utf-8") as fh:
        if not any("libgomp" in line for line in fh):
            pytest.skip("rtx's OpenMP runtime is not GNU libgomp")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = f"{setup}import rtx; print(rtx.config()['omp_spin'])"
    where = os.path.dirname(os.path.dirname(rtx.__file__))     # the rtx under test

    def spin(env: dict[str, str]) -> str:
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, check=True, cwd=where).stdout

    assert spin(env).startswith("libgomp's default")
    assert spin(env | {"GOMP_SPINCOUNT": "5"}).startswith("the user's")
    assert spin(env | {"OMP_WAIT_POLICY": "passive"}).startswith("the user's")


def test_in_place_ops(backend, dtype):
    t = rtx.ones(3, dtype=dtype)
    t.add_(rtx.tensor([1.0, 2.0, 3.0], dtype=dtype)).mul_(2.0).sub_(1.0)
    assert t.tolist() == [3.0, 5.0, 7.0]
    t.zero_()
    assert t.tolist() == [0, 0, 0]
    t.fill_(2.5)
    assert t.tolist() == [2.5] * 3
    t.copy_(rtx.tensor([1.0, 2.0, 3.0], dtype=dtype))
    assert t.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError):
        t.add_(rtx.ones(4, dtype=dtype))
    p = rtx.ones(2, dtype=dtype, requires_grad=True)
    with pytest.raises(RuntimeError):
        p.sub_(1.0)
    with rtx.no_grad():
        p.sub_(0.5)
    assert p.tolist() == [0.5, 0.5]


def test_backends_do_not_mix():
    a = rtx.ones(2)
    with rtx.use_backend(rtx.MinimalBackend()):
        b = rtx.ones(2)
    with pytest.raises(TypeError, match="backends"):
        a + b
