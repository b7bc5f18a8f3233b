"""The Backend interface: a core-only backend is complete through the defaults."""

from __future__ import annotations

import inspect
import os

import numpy as np
import op_db
import pytest
from conftest import BACKEND_NAMES, child_env

import rtx
from rtx.backend import Backend, CpuBackend, MinimalBackend, create_backend
from rtx.backend._family import is_def

CORE = {"from_numpy", "to_numpy", "shape", "dtype"}
# default bodies on Backend that are not ops (not abstract, nothing recorded): a
# primitive of a decorator backend as one of the backend it wraps, or back
# (adopt); the tape telling a lazy backend what it saved (mark_saved)
HOOKS = {"adopt", "mark_saved"}
# answer questions about a primitive (Python values back, nothing to record): not ops
QUERIES = {"is_prim", "is_contiguous", "can_view", "aliases"}


def test_backend_is_abstract_over_the_core():
    with pytest.raises(TypeError):
        Backend()  # type: ignore[abstract]
    assert set(Backend.__abstractmethods__) == CORE

    class Partial(Backend):
        def from_numpy(self, a):
            return a

    with pytest.raises(TypeError):
        Partial()  # type: ignore[abstract]


def test_minimal_backend_implements_only_the_core():
    own = {n for n, v in vars(MinimalBackend).items() if callable(v) and not n.startswith("__")}
    assert own <= CORE | QUERIES


def _public_ops():
    return sorted(
        n for n, v in inspect.getmembers(Backend, is_def)
        if not n.startswith("_") and n not in CORE | QUERIES | HOOKS
    )


# One call per op on (backend, from_numpy) -> primitive: the op database's backend_call.
CALLS = op_db.backend_calls()


def test_families_declare_exactly_their_ops():
    """Each family mixin's OPS names exactly the ops it defines; Backend.OPS is all
    public ops (what a decorator backend forwards family by family)."""
    from rtx.backend.base import _MIXINS

    for mixin in _MIXINS:
        own = {n for n, v in vars(mixin).items() if is_def(v)
               and not n.startswith("_") and n not in QUERIES}
        assert set(mixin.OPS) == own, (mixin.FAMILY, set(mixin.OPS) ^ own)
        assert Backend.FAMILIES[mixin.FAMILY] == mixin.OPS
    assert sorted(Backend.OPS) == _public_ops()
    assert len(set(Backend.OPS)) == len(Backend.OPS)


def test_a_decorator_backend_forwards_whole_families():
    """A wrapper that forwards families by name (no hand-written method per op)."""

    class Logged(Backend):
        name = "logged"

        def __init__(self, inner):
            self.inner, self.calls = inner, []

        def from_numpy(self, a):
            return self.inner.from_numpy(a)

        def to_numpy(self, p):
            return self.inner.to_numpy(p)

        def shape(self, p):
            return self.inner.shape(p)

        def dtype(self, p):
            return self.inner.dtype(p)

    def forward(name):
        def method(self, *args, **kw):
            self.calls.append(name)
            return getattr(self.inner, name)(*args, **kw)
        return method

    for fam in ("elementwise", "activation", "reduction"):
        for n in Backend.FAMILIES[fam]:
            setattr(Logged, n, forward(n))
    b = Logged(CpuBackend())
    with rtx.use_backend(b):
        x = rtx.tensor([[1.0, -2.0], [3.0, 4.0]], requires_grad=True)
        y = (x.exp() * 2).relu().sum()
        y.backward()
    assert {"exp", "mul", "relu", "sum"} <= set(b.calls)
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(x.numpy()))


def test_every_op_is_covered():
    assert set(_public_ops()) == set(CALLS), set(_public_ops()) ^ set(CALLS)


_COMPOSED_CALLS = {   # name -> (inputs from x, g; the call's extra arguments)
    "relu_backward": (lambda B, x, g: (B.relu(x), g), ()),
    "leaky_relu_backward": (lambda B, x, g: (x, g), (0.1,)),
    "elu_backward": (lambda B, x, g: (x, B.elu(x, 0.5), g), (0.5,)),
    "sigmoid_backward": (lambda B, x, g: (B.sigmoid(x), g), ()),
    "tanh_backward": (lambda B, x, g: (B.tanh(x), g), ()),
}


@pytest.mark.parametrize("name", sorted(_COMPOSED_CALLS))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_cpu_one_pass_rules_are_bitwise_their_composed_defaults(name, dt, layout):
    """The CPU backend's one-pass backward rules give the bits of the defaults they
    replace (the same IEEE operations in the same order), run on the CPU backend's
    own elementwise ops, zeros, infinities and NaN included."""
    from rtx.backend._family import is_composed
    cpu = CpuBackend()
    default = getattr(Backend, name)
    assert is_composed(default) and getattr(CpuBackend, name) is not default
    rng = np.random.default_rng(5)
    x = rng.uniform(-6, 6, (40, 33)).astype(dt)
    x[0, :6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30]
    g = rng.standard_normal((33, 40)).astype(dt).T if layout == "strided" else \
        rng.standard_normal((40, 33)).astype(dt)
    make, extra = _COMPOSED_CALLS[name]
    ins = make(cpu, x, g)
    got = getattr(cpu, name)(*ins, *extra)
    want = default(cpu, *ins, *extra)
    assert got.dtype == want.dtype == dt and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


@pytest.mark.parametrize("other", [b for b in BACKEND_NAMES if b != "cpu"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_backend_matches_cpu_kernels(name, other):
    """Each backend under test (the minimal one: the defaults) against the CPU kernels."""
    cpu, mini = CpuBackend(), create_backend(other)
    want = cpu.to_numpy(CALLS[name](cpu, lambda a: np.array(a)))
    got_prim = CALLS[name](mini, mini.from_numpy)
    assert mini.is_prim(got_prim)
    got = mini.to_numpy(got_prim)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13, equal_nan=True)


def test_tensor_level_on_minimal_backend():
    with rtx.use_backend(MinimalBackend()) as b:
        t = rtx.tensor([[1.0, 2.0], [3.0, 4.0]])
        assert t.backend is b
        assert ((t @ t).softmax(-1).sum(0) * 2).tolist() == pytest.approx(
            (np.ones(2) * 2 * (np.exp([[7, 10], [15, 22]]) /
                               np.exp([[7, 10], [15, 22]]).sum(1, keepdims=True))).sum(0)
            .tolist())


def test_registry_knows_the_builtin_backends_and_refuses_unknown_names():
    from rtx.backend import register_backend, registered_backends

    assert registered_backends()[:2] == ["cpu", "minimal"]
    assert type(create_backend("minimal")) is MinimalBackend
    assert create_backend("cpu") is not create_backend("cpu")     # a fresh instance each time
    with pytest.raises(KeyError, match="registered: cpu, minimal"):
        create_backend("no-such-backend")
    with pytest.raises(ValueError, match="already registered"):
        register_backend("cpu", MinimalBackend)
    with pytest.raises(ValueError):
        register_backend("a,b", MinimalBackend)
    with pytest.raises(TypeError):
        register_backend("x", None)  # type: ignore[arg-type]


def test_test_backend_selector_takes_any_registered_backend(tmp_path):
    """RTX_TEST_BACKENDS names backends from the registry, including one that a
    module outside rtx registers ("module:name"), and refuses unknown names."""
    from conftest import run_python

    (tmp_path / "my_backend.py").write_text(
        "import rtx\n"
        "class Mine(rtx.MinimalBackend):\n    name = 'mine'\n"
        "rtx.backend.register_backend('mine', Mine)\n")
    (tmp_path / "test_sel.py").write_text(
        "def test_which(backend):\n    assert backend.name in ('mine', 'cpu')\n")
    conftest = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "conftest.py")
    (tmp_path / "conftest.py").write_text(open(conftest).read())
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    env["RTX_TEST_BACKENDS"] = "my_backend:mine,cpu"
    args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_sel.py")]
    p = run_python(args, env=env)
    assert p.returncode == 0 and "2 passed" in p.stdout, p.stdout + p.stderr
    env["RTX_TEST_BACKENDS"] = "nonexistent"
    p = run_python(args, env=env)
    assert p.returncode != 0 and "no backend registered as 'nonexistent'" in p.stdout + p.stderr


@pytest.mark.parametrize("key", [slice(1, 3), (0, slice(None)), (Ellipsis, 1), 2,
                                 (None, slice(None, None, 2)), (slice(None), -1),
                                 (np.int64(1), slice(0, 4, 3)),
                                 (slice(None), [1, 1, 3]), [0, 0, 2],
                                 (np.array([True, False, True]),)])
def test_slice_backward_is_the_adjoint_of_getitem(key):
    """Basic keys are assigned (each element reached once), advanced ones accumulate
    repeats: both equal np.add.at's sum."""
    from rtx.backend.shape import slice_backward_np

    x = np.arange(12.0).reshape(3, 4)
    g = np.random.default_rng(0).normal(size=np.shape(x[key]))
    want = np.zeros_like(x)
    np.add.at(want, key, g)
    got = slice_backward_np(g, x.shape, key)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == g.dtype
