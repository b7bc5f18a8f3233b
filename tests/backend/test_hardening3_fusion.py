"""Issue 17 (hardening 3), fusion part: maximum / minimum / relu bit for bit with
the unfused backend (signed-zero ties, NaN propagation), thousands of live
pending results, a fused pass that fails, and threads sharing one Fusion."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
from conftest import bits, child_env, run_python

import rtx
from rtx.fusion import Fusion
from rtx.fusion import backend as fusion_backend

FLOATS = [np.float32, np.float64]


def _nan(dt, sign, payload):
    """A quiet NaN with the given sign bit and payload bits."""
    if np.dtype(dt) == np.float32:
        u = np.uint32(0x7FC00000 | payload | (0x80000000 if sign else 0))
        return np.array([u]).view(np.float32)[0]
    u = np.uint64(0x7FF8000000000000 | payload | (0x8000000000000000 if sign else 0))
    return np.array([u]).view(np.float64)[0]


def _specials(dt):
    return np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 2.5, _nan(dt, 0, 1),
                     _nan(dt, 1, 2), _nan(dt, 0, 3)], dtype=dt)


def _pairs(dt, reps=40):
    v = _specials(dt)
    a = np.tile(np.repeat(v, v.size), reps)   # every ordered pair, many times
    b = np.tile(np.tile(v, v.size), reps)
    return a, b


def _on(backend, fn, *arrays):
    with rtx.use_backend(backend):
        return fn(*[rtx.tensor(a) for a in arrays]).numpy()


BINARY = {
    "maximum": lambda a, b: rtx.maximum(a, b),
    "minimum": lambda a, b: rtx.minimum(a, b),
    "maximum(x, 0.0)": lambda a, b: rtx.maximum(a, 0.0),
    "maximum(x, -0.0)": lambda a, b: rtx.maximum(a, -0.0),
    "minimum(x, 0.0)": lambda a, b: rtx.minimum(a, 0.0),
    "minimum(-0.0, x)": lambda a, b: rtx.minimum(-0.0, a),
    "relu": lambda a, b: rtx.relu(a),
    "max in a chain": lambda a, b: rtx.maximum(a * 1.0, b + 0.0) - 0.0,
}


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("dt", FLOATS, ids=["float32", "float64"])
def test_fused_max_min_relu_bitwise_equal_unfused(name, dt):
    """Every ordered pair of {+-0, +-1, +-inf, 2.5, NaNs of both signs and three
    payloads}: the fused evaluator returns the CPU backend's bits (the tie of
    -0.0 and +0.0 used to give -0.0 fused and +0.0 unfused)."""
    a, b = _pairs(dt)
    fn = BINARY[name]
    want = _on(rtx.CpuBackend(), fn, a, b)
    fz = Fusion(rtx.CpuBackend(), min_elements=0)
    got = _on(fz, fn, a, b)
    assert fz.cache_info()["kernel_calls"] >= 1          # really fused
    np.testing.assert_array_equal(bits(got), bits(want))


@pytest.mark.parametrize("dt", FLOATS, ids=["float32", "float64"])
def test_cpu_relu_is_numpys_maximum_with_zero_on_every_path(dt):
    """The CPU backend's relu against numpy's ``maximum(a, 0)`` itself, bit for bit
    (signed zeros, NaN signs and payloads, infinities): on its small path (the fused
    evaluator's loop: a C-contiguous array below ``get_fused_parallel_min()``), on a
    strided array and past that size (numpy's ufunc), so the fused-vs-unfused test
    above does not compare that loop with itself only."""
    from rtx import _kernels

    a, _ = _pairs(dt)
    B = rtx.CpuBackend()
    big = np.resize(a, _kernels.get_fused_parallel_min() + 5)
    assert _kernels.fused_unary("relu", a) is not None           # a takes the small path
    assert _kernels.fused_unary("relu", big) is None and _kernels.fused_unary(
        "relu", a[::3]) is None
    for x in (a, a.reshape(40, -1), a[::3], big):
        before = x.copy()
        got = B.relu(x)
        assert got.dtype == dt and got.shape == x.shape
        np.testing.assert_array_equal(bits(got), bits(np.maximum(x, np.zeros((), dt))))
        np.testing.assert_array_equal(bits(x), bits(before))


@pytest.mark.parametrize("dt", FLOATS, ids=["float32", "float64"])
def test_max_min_rules_pinned_without_torch(dt, backend):
    """rtx's rule on every backend (numpy's): a tie returns the SECOND operand,
    a NaN operand is returned (the first when both are NaN), relu(-0.0) = +0.0.
    (PyTorch's answer to a tie depends on the element's position: its vector
    lanes return the second operand, its scalar tail the first.)"""
    z, nz = np.array(0.0, dt), np.array(-0.0, dt)
    n1, n2 = _nan(dt, 1, 5), _nan(dt, 0, 6)
    one = np.array(1.0, dt)
    cases = [  # (op, a, b, expected)
        ("maximum", nz, z, z), ("maximum", z, nz, nz),
        ("minimum", nz, z, z), ("minimum", z, nz, nz),
        ("maximum", n1, one, n1), ("maximum", one, n1, n1),
        ("minimum", n2, one, n2), ("minimum", one, n2, n2),
        ("maximum", n1, n2, n1), ("maximum", n2, n1, n2),
        ("minimum", n1, n2, n1), ("minimum", n2, n1, n2),
    ]
    for backend_ in (rtx.get_default_backend(), Fusion(rtx.CpuBackend(), min_elements=0)):
        for op, a, b, want in cases:
            got = _on(backend_, getattr(rtx, op), np.full(64, a), np.full(64, b))
            np.testing.assert_array_equal(bits(got), bits(np.full(64, want)),
                                          err_msg=f"{op}({a!r}, {b!r}) on {backend_!r}")
        r = _on(backend_, rtx.relu, np.full(64, nz))
        np.testing.assert_array_equal(bits(r), bits(np.zeros(64, dt)))
        r = _on(backend_, rtx.relu, np.full(64, n1))
        np.testing.assert_array_equal(bits(r), bits(np.full(64, n1)))


def test_max_min_gradients_unchanged_by_the_tie_rule():
    """Ties still split the gradient g / 2 fused and unfused (docs/pytorch-parity.md)."""
    for backend_ in (rtx.CpuBackend(), Fusion(rtx.CpuBackend(), min_elements=0)):
        with rtx.use_backend(backend_):
            a = rtx.tensor([-0.0, 1.0, 2.0], requires_grad=True)
            b = rtx.tensor([0.0, 1.0, 3.0], requires_grad=True)
            rtx.maximum(a, b).sum().backward()
            np.testing.assert_array_equal(a.grad.numpy(), [0.5, 0.5, 0.0])
            np.testing.assert_array_equal(b.grad.numpy(), [0.5, 0.5, 1.0])


# ------------------------------------------------------------------ long programs
def test_five_thousand_live_pending_results_then_unrelated_work():
    """5000 live pending results of one shape (each with its own constant): the
    flush splits them into passes within the kernel's register file instead of
    one program of 10,001 registers that fused_eval refuses (which then failed
    every later materialisation on the backend, unrelated ones included)."""
    fz = Fusion(rtx.CpuBackend())
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal(20_000)
    with rtx.use_backend(fz):
        x = rtx.tensor(x0)
        live = [x * float(i) + 1.0 for i in range(5000)]
        np.testing.assert_array_equal(live[4321].numpy(), x0 * 4321.0 + 1.0)
        for i in (0, 1, 2047, 2048, 4999):
            np.testing.assert_array_equal(live[i].numpy(), x0 * float(i) + 1.0)
        y0 = rng.standard_normal((300, 100))
        y = rtx.tensor(y0)
        np.testing.assert_array_equal(((y - 2.0) * y).numpy(), (y0 - 2.0) * y0)
        w = rtx.tensor(x0, requires_grad=True)
        (w * 3.0).sum().backward()
        np.testing.assert_array_equal(w.grad.numpy(), np.full(x0.shape, 3.0))
    info = fz.cache_info()
    assert info["unfused_fallbacks"] == 0          # split, not rescued
    assert info["kernel_calls"] >= 5000 * 2 // fusion_backend.MAX_PASS_NODES
    assert info["outputs"] >= 5000


def test_pass_budget_fits_the_kernels_register_file():
    """MAX_REGS is fused_eval's limit: one register more is refused."""
    prog = np.array([[fusion_backend._OPCODES["copy"], 1, 0, -1, -1, -1]], dtype=np.int32)
    x = np.ones(4)
    out = np.empty(4)
    with pytest.raises(ValueError, match=str(fusion_backend.MAX_REGS)):
        rtx._kernels.fused_eval(prog, fusion_backend.MAX_REGS + 1, [x], [], [], [out],
                                np.array([1], dtype=np.int32), (4,), 1, 2048)
    # the worst pass: MAX_PASS_NODES nodes of 3 operand slots each, plus results
    assert 4 * fusion_backend.MAX_PASS_NODES <= fusion_backend.MAX_REGS
    assert 4 * (2 * fusion_backend.MAX_NODES + 1) <= fusion_backend.MAX_REGS


def test_a_failing_fused_pass_never_poisons_the_backend(monkeypatch):
    """If the fused kernel refuses a program, its nodes are computed op by op by
    the inner backend: right values, and later work runs fused again."""
    fz = Fusion(rtx.CpuBackend(), min_elements=0)
    real = fusion_backend.fused_eval
    calls = {"n": 0}

    def fail_once(*args):
        calls["n"] += 1
        if calls["n"] == 1:
            raise ValueError("fused_eval: refused (injected)")
        return real(*args)

    monkeypatch.setattr(fusion_backend, "fused_eval", fail_once)
    a0 = np.linspace(-3, 3, 50)
    with rtx.use_backend(fz):
        a = rtx.tensor(a0)
        keep = [rtx.leaky_relu(a * 2.0, 0.1), rtx.where(a > 0.5, a, -a).exp()]
        first = keep[0].numpy()                   # this flush's pass fails
        np.testing.assert_array_equal(first, np.where(a0 * 2 > 0, a0 * 2, a0 * 2 * 0.1))
        np.testing.assert_allclose(keep[1].numpy(), np.exp(np.where(a0 > 0.5, a0, -a0)),
                                   rtol=1e-15)
        np.testing.assert_array_equal((a + 1.0).numpy(), a0 + 1.0)
    assert fz.cache_info()["unfused_fallbacks"] == 1
    assert calls["n"] >= 2                        # fused again afterwards


# ------------------------------------------------------------------------- threads
def _fusion_threads(fz, T=4, iters=60, live=400):
    errors: list[BaseException] = []
    wrong: list[tuple[int, int]] = []

    def work(k):
        try:
            with rtx.use_backend(fz) if fz is not None else _null():
                a0 = np.random.default_rng(k).standard_normal(64)
                a = rtx.tensor(a0)
                for it in range(iters):
                    pend = [a * float(i) + float(k) for i in range(live)]
                    j = (it * 7 + k) % live
                    if not np.array_equal(pend[j].numpy(), a0 * float(j) + float(k)):
                        wrong.append((k, it))
        except BaseException as exc:
            errors.append(exc)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(T)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old)
    return errors, wrong


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_threads_sharing_one_fusion_backend():
    """Four threads recording and flushing on ONE Fusion: every value right and
    no 'Set changed size during iteration' (a record added to the pending set
    without the lock while another thread's flush iterated it)."""
    errors, wrong = _fusion_threads(Fusion(rtx.CpuBackend(), min_elements=0))
    assert errors == [] and wrong == []


def test_threads_under_rtx_fusion_env_share_the_global_fusion():
    code = (
        "import os, sys; sys.path[:0] = [sys.argv[1], os.path.dirname(sys.argv[1])];"
        "import rtx, test_hardening3_fusion as t;"
        "assert isinstance(rtx.get_default_backend(), rtx.fusion.Fusion);"
        "rtx.get_default_backend().min_elements = 0;"  # fuse the small tensors too
        "e, w = t._fusion_threads(None);"
        "assert not e and not w, (e[:1], w[:3]); print('ok')"
    )
    import os
    env = dict(child_env(), RTX_FUSION="1")
    here = os.path.dirname(os.path.abspath(__file__))
    r = run_python(["-c", code, here], env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith("ok")


def test_clear_cache_waits_for_a_flush_in_progress():
    """clear_cache() takes the backend's lock: a flush in another thread (which
    holds it while it looks a program up and moves it in the LRU order) never
    sees the cache emptied under it."""
    fz = Fusion(rtx.CpuBackend(), min_elements=0)
    with rtx.use_backend(fz):
        (rtx.tensor(np.ones(8)) * 2.0).numpy()
    assert fz.cache_info()["size"] == 1
    with fz._lock:                                # what a flush holds
        t = threading.Thread(target=fz.clear_cache)
        t.start()
        t.join(0.3)
        assert t.is_alive() and fz.cache_info()["size"] == 1
    t.join()
    assert fz.cache_info()["size"] == 0


def test_fusion_for_makes_one_fusion_when_threads_race(monkeypatch):
    """Two threads asking for the Fusion over the same backend at once get the
    same one (the lookup-then-insert was unlocked: a slow constructor let both
    threads build their own, and their tensors could not be mixed)."""
    import time

    import rtx.fusion as fusion_pkg

    class SlowFusion(Fusion):
        def __init__(self, inner, **kw):
            time.sleep(0.2)
            super().__init__(inner, **kw)

    monkeypatch.setattr(fusion_pkg, "Fusion", SlowFusion)
    inner = rtx.CpuBackend()
    got = []
    ts = [threading.Thread(target=lambda: got.append(fusion_pkg.fusion_for(inner)))
          for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(got) == 2 and got[0] is got[1]
    assert fusion_pkg.fusion_for(inner) is got[0]


def test_fusion_for_does_not_keep_unused_backends_alive():
    import gc
    import weakref

    import rtx.fusion as fusion_pkg

    inner = rtx.CpuBackend()
    f = fusion_pkg.fusion_for(inner)
    ref = weakref.ref(inner)
    del f, inner
    gc.collect()
    assert ref() is None
