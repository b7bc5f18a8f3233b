"""A split matmul's pieces as calls of numpy's OpenBLAS ?gemm run by rtx's OpenMP
team (``gemm_split``, rtx/_gemm.pxi; rtx/backend/_matmul.py): np.matmul's bits on
every piece, nothing written where numpy would not call ?gemm, clear errors for
bad arguments, and the Python threads' path as the fallback."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

import numpy as np
import pytest
from conftest import run_child

from rtx import _kernels as K
from rtx.backend import _matmul

_matmul._libraries()     # binds the team's GEMM when it can (rtx/backend/_matmul.py)
# skipped only where numpy's BLAS is no OpenBLAS threadpoolctl can see (MKL,
# Accelerate) or the user turned the team off; an OpenBLAS that fails the bind or
# its self-check fails the tests
pytestmark = pytest.mark.skipif(_matmul._numpy_openblas(_matmul._OPENBLAS) is None
                                or os.environ.get("RTX_TEAM_GEMM") == "0",
                                reason="numpy's BLAS is not an OpenBLAS, or RTX_TEAM_GEMM=0")

DTYPES = [np.float32, np.float64]


def test_numpys_openblas_is_bound_and_passed_its_self_check():
    assert K.gemm_bound() and _matmul.TEAM_GEMM


def _bounds(n: int, pieces: int) -> list[tuple[int, int]]:
    return [(n * p // pieces, n * (p + 1) // pieces) for p in range(pieces)]


def _operands(dt, m, k, n, a_layout="C", b_layout="C", seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dt)
    b = rng.standard_normal((k, n)).astype(dt)
    if a_layout == "F":
        a = np.asfortranarray(a)
    if b_layout == "F":
        b = np.asfortranarray(b)
    return a, b


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("layouts", [("C", "C"), ("F", "C"), ("C", "F"), ("F", "F")])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_row_split_has_np_matmuls_bits_on_every_piece(dt, layouts, threads):
    a, b = _operands(dt, 2003, 70, 33, *layouts)
    out = np.full((2003, 33), np.nan, dt)
    assert K.gemm_split(a, b, out, None, 5, False, threads) is True
    for lo, hi in _bounds(2003, 5):
        np.testing.assert_array_equal(out[lo:hi], np.matmul(a[lo:hi], b))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_inner_split_writes_each_partial_product(dt, threads):
    """The backward's ``x.T @ grad``: a transposed ``a``, K cut into pieces, the
    first partial in ``out``, the others in ``parts`` (added by the caller)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((9000, 40)).astype(dt)
    g = rng.standard_normal((9000, 6)).astype(dt)
    a = x.T                                    # (40, 9000), rows contiguous in x
    parts = np.full((3, 40, 6), np.nan, dt)
    out = np.full((40, 6), np.nan, dt)
    assert K.gemm_split(a, g, out, parts, 4, True, threads) is True
    got = [out, *parts]
    for (lo, hi), p in zip(_bounds(9000, 4), got, strict=True):
        np.testing.assert_array_equal(p, np.matmul(a[:, lo:hi], g[lo:hi]))


@pytest.mark.parametrize("dt", DTYPES)
def test_a_column_slice_of_the_output(dt):
    """``out`` with contiguous rows but a longer row stride (a column slice)."""
    a, b = _operands(dt, 1200, 16, 8)
    big = np.zeros((1200, 20), dt)
    out = big[:, 4:12]
    assert K.gemm_split(a, b, out, None, 3, False, 2) is True
    for lo, hi in _bounds(1200, 3):
        np.testing.assert_array_equal(out[lo:hi], np.matmul(a[lo:hi], b))
    assert not big[:, :4].any() and not big[:, 12:].any()      # nothing else written


def _declined(a, b, out, parts=None, pieces=2, inner=False):
    before = out.copy()
    assert K.gemm_split(a, b, out, parts, pieces, inner, 2) is False
    np.testing.assert_array_equal(out, before)                   # nothing written


def test_declines_where_numpy_calls_something_else():
    a, b = _operands(np.float32, 1000, 30, 1)
    _declined(a, b, np.zeros((1000, 1), np.float32))             # one column: gemv
    a1, b1 = _operands(np.float32, 1, 30, 20)
    _declined(a1, b1, np.zeros((1, 20), np.float32), pieces=1)   # one row
    a2, b2 = _operands(np.float32, 3, 30, 20)
    _declined(a2, b2, np.zeros((3, 20), np.float32))             # a piece of one row
    a3, b3 = _operands(np.float32, 1000, 1, 20)
    _declined(a3, b3, np.zeros((1000, 20), np.float32))          # inner length 1
    a4, b4 = _operands(np.float32, 40, 3, 20)
    _declined(a4, b4, np.zeros((40, 20), np.float32), inner=True,  # inner pieces of one
              parts=np.zeros((1, 40, 20), np.float32))
    x = np.random.default_rng(2).standard_normal((600, 50)).astype(np.float32)
    _declined(x, x.T, np.zeros((600, 600), np.float32))          # a @ a.T: syrk
    strided = np.zeros((1200, 60), np.float32)[::2, ::2]         # no BLAS layout
    _declined(strided, b2, np.zeros((600, 20), np.float32))
    _declined(a2, b2, np.zeros((20, 3), np.float32).T, pieces=1)  # an F-ordered output


def test_declines_an_output_that_overlaps_an_input():
    buf = np.random.default_rng(3).standard_normal((1000, 40)).astype(np.float32)
    a = buf[:, :20]
    b = np.ones((20, 20), np.float32)
    _declined(a, b, buf[:, 20:])       # interleaved rows of one buffer
    _declined(a, b, buf[:, :20])       # the input itself
    x = np.random.default_rng(4).standard_normal((4000, 30)).astype(np.float32)
    g = np.ones((4000, 5), np.float32)
    assert K.gemm_split(x.T, g, np.zeros((30, 5), np.float32),
                        np.zeros((1, 30, 5), np.float32), 2, True, 1) is True
    shared = np.zeros((4000 * 30,), np.float32)
    xs = shared.reshape(4000, 30)
    ps = shared[-150:].reshape(1, 30, 5)                         # parts overlap x
    _declined(xs.T, g, np.zeros((30, 5), np.float32), parts=ps, inner=True)


def test_bad_arguments_raise_before_anything_is_written():
    a, b = _operands(np.float32, 1000, 20, 10)
    out = np.zeros((1000, 10), np.float32)
    with pytest.raises(ValueError, match="do not match"):
        K.gemm_split(a, b[:19], out, None, 2, False, 2)
    with pytest.raises(ValueError, match="do not match"):
        K.gemm_split(a, b, out[:999], None, 2, False, 2)
    for pieces in (0, -1, 65):
        with pytest.raises(ValueError, match="pieces must be"):
            K.gemm_split(a, b, out, None, pieces, False, 2)
    with pytest.raises(ValueError, match="pieces of 20"):
        K.gemm_split(a, b, out, np.zeros((20, 1000, 10), np.float32), 21, True, 2)
    with pytest.raises(ValueError, match="needs parts"):
        K.gemm_split(a, b, out, None, 2, True, 2)
    with pytest.raises(ValueError, match="parts must be"):
        K.gemm_split(a, b, out, np.zeros((2, 1000, 10), np.float32), 2, True, 2)
    with pytest.raises(ValueError):       # dtypes differ: no specialisation takes them
        K.gemm_split(a, b.astype(np.float64), out, None, 2, False, 2)
    assert not out.any()


def test_binding_only_takes_a_loaded_openblas_and_can_be_dropped():
    path, pre, suf = _matmul._numpy_openblas(_matmul._OPENBLAS)
    a, b = _operands(np.float32, 1000, 20, 10)
    out = np.zeros((1000, 10), np.float32)
    try:
        assert K.gemm_bind("/nonexistent/libopenblas.so", "", "") is False
        assert not K.gemm_bound()
        assert K.gemm_split(a, b, out, None, 2, False, 2) is False and not out.any()
        libc = ctypes.util.find_library("c")   # loaded, without these symbols
        if libc:
            assert K.gemm_bind(libc, "", "") is False
        assert K.gemm_bind(path, "wrong_", suf) is False and not K.gemm_bound()
        assert K.gemm_bind(path, pre, suf) is True
        assert K.gemm_ilp64() == ("USE64BITINT" in _openblas_config(path, pre, suf))
        K.gemm_unbind()
        assert not K.gemm_bound()
    finally:
        _matmul._bind_team_gemm(_matmul._OPENBLAS)
    assert K.gemm_bound() and _matmul.TEAM_GEMM
    assert K.gemm_split(a, b, out, None, 2, False, 2) is True


def _openblas_config(path: str, pre: str, suf: str) -> str:
    fn = getattr(ctypes.CDLL(path), f"{pre}openblas_get_config{suf}")
    fn.restype = ctypes.c_char_p
    return fn().decode()


@pytest.mark.parametrize("dt", DTYPES)
def test_rtx_matmul_is_the_same_with_the_team_and_with_python_threads(dt, tmp_path,
                                                                     monkeypatch):
    """The same bits through ``rtx.matmul`` (and its gradient) either way: a row
    split, and the backward's inner split."""
    code = f"""
import numpy as np, rtx
from rtx.backend import _matmul
rng = np.random.default_rng(5)
x = rtx.tensor(rng.standard_normal((6000, 64)).astype(np.{np.dtype(dt).name}), requires_grad=True)
w = rtx.tensor(rng.standard_normal((64, 48)).astype(np.{np.dtype(dt).name}), requires_grad=True)
rtx.set_num_threads(2)
y = x @ w
(y * y).sum().backward()
np.save("OUT_y.npy", y.numpy()); np.save("OUT_gw.npy", w.grad.numpy())
print("TEAM", _matmul.TEAM_GEMM)
"""
    got = {}
    for flag in ("1", "0"):
        monkeypatch.setenv("RTX_TEAM_GEMM", flag)
        r = run_child(code.replace("OUT", str(tmp_path / flag)))
        assert f"TEAM {flag == '1'}" in r.stdout, r.stdout + r.stderr
        got[flag] = [np.load(tmp_path / f"{flag}_{s}.npy") for s in ("y", "gw")]
    for u, v in zip(got["1"], got["0"], strict=True):
        np.testing.assert_array_equal(u, v)
