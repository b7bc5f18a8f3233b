"""rtx's matmul: numpy's BLAS on one thread, the work split over rtx's threads
(rtx/backend/_matmul.py), and the OpenMP spin setting made at import."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import run_child

import rtx
from rtx.backend import _matmul

threadpoolctl = pytest.importorskip("threadpoolctl")

# (a shape, b shape): a row split, a K split, no split (too small), square
SHAPES = [((6000, 64), (64, 48)), ((64, 20000), (20000, 40)), ((50, 30), (30, 20)),
          ((700, 700), (700, 700))]


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpoolctl.threadpool_info()
            if p["user_api"] == "blas"]


@pytest.fixture
def threads():
    before = rtx.get_num_threads()
    yield
    rtx.set_num_threads(before)


@pytest.mark.parametrize("sa,sb", SHAPES, ids=["rows", "inner", "small", "square"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_split_matmul_matches_numpy_and_is_the_same_for_any_thread_count(sa, sb, dt, threads):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(sa).astype(dt)
    b = rng.standard_normal(sb).astype(dt)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-4 if dt == np.float32 else 1e-12
    got, got_f = {}, {}
    for t in (1, 2, 3, 5):
        rtx.set_num_threads(t)
        got[t] = (rtx.tensor(a) @ rtx.tensor(b)).numpy()
        # a transposed (F-ordered) operand, as in the backward's x.T @ grad
        got_f[t] = (rtx.tensor(a.T.copy()).T @ rtx.tensor(b)).numpy()
    for r in (got[1], got_f[1]):
        np.testing.assert_allclose(r, ref, rtol=tol, atol=tol * np.abs(ref).max())
    for t in (2, 3, 5):
        np.testing.assert_array_equal(got[t], got[1])   # bitwise, whatever the threads
        np.testing.assert_array_equal(got_f[t], got_f[1])


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(16, 16, 16), (1, 100, 1), (100, 1, 30), (3, 7, 5),
                                   (0, 4, 3), (4, 0, 3)])
def test_small_matmul_is_numpys_matmul_bitwise(dt, m, k, n):
    """Below the split threshold the CPU backend makes one BLAS call (np.dot's 2-D
    path, cheaper per call than np.matmul's): the same bits as np.matmul, for C and
    transposed (F-ordered) operands."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(dt)
    b = rng.standard_normal((k, n)).astype(dt)
    B = rtx.CpuBackend()
    for x, y in [(a, b), (np.asfortranarray(a), b), (a, np.asfortranarray(b))]:
        got = B.matmul(x, y)
        assert got.flags.c_contiguous and got.dtype == dt and got.shape == (m, n)
        np.testing.assert_array_equal(got, np.matmul(x, y))


def test_the_split_is_chosen_from_shapes_only():
    assert _matmul._pieces(6000, _matmul.MIN_ROWS) == [
        (6000 * i // 8, 6000 * (i + 1) // 8) for i in range(8)]
    assert _matmul._pieces(1000, _matmul.MIN_ROWS) == []           # fewer than 2 pieces
    assert len(_matmul._pieces(20000, _matmul.MIN_INNER)) == 8
    assert len(_matmul._pieces(5000, _matmul.MIN_INNER)) == 2


def test_gradients_through_a_split_matmul(threads):
    rtx.set_num_threads(2)
    rng = np.random.default_rng(1)
    x = rtx.tensor(rng.standard_normal((3000, 40)), requires_grad=True)
    w = rtx.tensor(rng.standard_normal((40, 30)), requires_grad=True)
    g = rng.standard_normal((3000, 30))
    (x @ w).backward(rtx.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), g @ w.numpy().T, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().T @ g, rtol=1e-11)


def test_blas_threads_are_restored_after_rtx_matmul(threads):
    if not _matmul.blas_controlled():
        pytest.skip("no BLAS whose threads threadpoolctl can set")
    rtx.set_num_threads(2)
    a = rtx.randn(3000, 200, seed=0)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        for _ in range(3):
            a @ a.T
        assert _blas_threads() == before
        seen = []    # the BLAS thread counts seen inside rtx's matmul
        orig = _matmul._group

        def group(tasks):
            seen.append(_blas_threads())
            return orig(tasks)

        _matmul._group = group
        try:
            a @ a.T
        finally:
            _matmul._group = orig
        assert seen and all(all(n == 1 for n in s) for s in seen)
        assert _blas_threads() == before


def test_a_blas_loaded_after_the_first_matmul_is_held_too():
    """``import scipy.linalg`` after rtx's first matmul loads a second OpenBLAS
    (scipy's own): rtx's next matmul holds it at one thread as well, and gives it
    back its setting after."""
    pytest.importorskip("scipy")
    code = """if True:
        import threadpoolctl
        import rtx
        from rtx.backend import _matmul

        def counts():
            return {p["filepath"]: p["num_threads"]
                    for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"}

        rtx.set_num_threads(2)
        a = rtx.randn(3000, 200, seed=0)
        a @ a.T                         # rtx looks at the BLAS libraries here
        if not _matmul.blas_controlled():
            raise SystemExit("SKIP no BLAS whose threads threadpoolctl can set")
        first = set(counts())
        import scipy.linalg  # noqa: F401
        if set(counts()) == first:
            raise SystemExit("SKIP scipy shares numpy's BLAS here")
        seen = []
        orig_group, orig_split = _matmul._group, _matmul.gemm_split

        def group(*args):
            seen.append(counts())
            return orig_group(*args)

        def split(*args):
            seen.append(counts())
            return orig_split(*args)

        _matmul._group, _matmul.gemm_split = group, split
        with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
            before = counts()
            a @ a.T
            after = counts()
        assert seen and all(set(c) == set(before) and set(c.values()) == {1}
                            for c in seen), (seen, before)
        assert after == before and set(before.values()) == {2}, (before, after)
        print("OK")
    """
    r = run_child(code)
    if r.returncode and "SKIP" in r.stderr:
        pytest.skip(r.stderr.strip())
    assert r.returncode == 0 and r.stdout.strip() == "OK", r.stderr


def test_concurrent_matmuls_restore_the_user_setting(threads):
    if not _matmul.blas_controlled():
        pytest.skip("no BLAS whose threads threadpoolctl can set")
    rtx.set_num_threads(2)
    a = rtx.randn(2000, 300, seed=1)
    ref = (a @ a.T).numpy()
    errors = []

    def work():
        try:
            for _ in range(10):
                np.testing.assert_array_equal((a @ a.T).numpy(), ref)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors
        assert _blas_threads() == before
        assert _matmul._depth == 0


def test_import_sets_no_environment_variable_and_respects_the_users():
    r = run_child("import os, rtx; print('GOMP_SPINCOUNT' in os.environ)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
    r = run_child("import os; os.environ['GOMP_SPINCOUNT'] = '123'; import rtx; "
                  "print(os.environ['GOMP_SPINCOUNT'])")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "123"


def test_blas_control_can_be_turned_off():
    r = run_child("import os; os.environ['RTX_BLAS_THREADS'] = 'keep'; import rtx; "
                  "from rtx.backend import _matmul; print(_matmul.blas_controlled())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_matmul_at_interpreter_exit_runs_inline():
    # atexit handlers run after concurrent.futures shuts its pools down
    r = run_child("import atexit, numpy as np, rtx\n"
                  "rtx.set_num_threads(2)\n"
                  "a = rtx.randn(3000, 200, seed=0)\n"
                  "ref = (a @ a.T).numpy()\n"
                  "def late():\n"
                  "    import concurrent.futures.thread as t\n"
                  "    t._shutdown = True\n"
                  "    np.testing.assert_array_equal((a @ a.T).numpy(), ref)\n"
                  "    print('ok')\n"
                  "atexit.register(late)\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
