"""The backend's layout (issue 18): one registry of op names (the families' OPS,
derived from their methods), the CPU backend as one module per family plus its
allocator, one program compiler for the fused evaluator, and the index contract
(backends take checked plans and never check an index again)."""

from __future__ import annotations

import numpy as np
import pytest

import rtx
from rtx import _kernels
from rtx.backend import Backend, CpuBackend, MinimalBackend, _program
from rtx.backend._family import (
    Family,
    family_ops,
    host_body,
    host_body_of,
    is_composed,
    is_def,
    is_query,
    query,
)
from rtx.backend.cpu import CPU_MIXINS

QUERIES = {"is_prim", "is_contiguous", "can_view", "aliases"}


# ------------------------------------------------------------------ registry
def test_family_ops_are_derived_from_the_methods_in_order():
    class Demo(Family):
        FAMILY = "demo"

        def b_op(self, x):
            return x

        def a_op(self, x):
            return x

        @query
        def is_demo(self, x):
            return True

        def _helper(self):
            return None

    assert Demo.OPS == ("b_op", "a_op") == family_ops(Demo)
    assert is_query(Demo.is_demo) and not is_query(Demo.a_op)


def test_a_backend_that_mixes_in_a_family_gets_it_in_FAMILIES():
    class TwiceOps(Family):
        FAMILY = "twice"

        def twice_rows(self, x, scale=1.0):
            return self.from_numpy(np.concatenate([self.to_numpy(x)] * 2) * scale)

    class Inner(TwiceOps, CpuBackend):
        pass

    assert Inner.FAMILIES["twice"] == ("twice_rows",)
    assert Inner.OPS == ("twice_rows",) + Backend.OPS
    assert "twice" not in Backend.FAMILIES and "twice" not in CpuBackend.FAMILIES
    assert CpuBackend.OPS == Backend.OPS


def test_composed_defaults_are_marked_where_they_are_written():
    marked = {n for n in Backend.OPS if is_composed(getattr(Backend, n))}
    assert marked == {"relu_backward", "leaky_relu_backward", "elu_backward",
                      "sigmoid_backward", "tanh_backward"}


# ------------------------------------------------------------- the CPU package
def test_cpu_backend_is_one_module_per_family():
    """Each CPU mixin lives in the module named after its family and overrides only
    that family's ops (plus queries); together with the core they are CpuBackend."""
    covered = set()
    for mixin in CPU_MIXINS:
        family = mixin.__module__.rsplit(".", 1)[1]
        assert family in Backend.FAMILIES, mixin
        own = {n for n, v in vars(mixin).items() if is_def(v)
               and not n.startswith("_")}
        assert own - QUERIES <= set(Backend.FAMILIES[family]), (family, own)
        covered |= own
    own_cpu = {n for n, v in vars(CpuBackend).items() if is_def(v)
               and not n.startswith("_")}
    bound = {n for n in own_cpu if host_body_of(getattr(Backend, n)) is vars(CpuBackend)[n]}
    assert own_cpu - bound <= {"from_numpy", "to_numpy", "shape", "dtype"} | QUERIES
    assert CpuBackend.__mro__[1:len(CPU_MIXINS) + 1] == CPU_MIXINS


GRAPH_FAMILIES = ("index", "segment", "message", "gatv2", "grouped")


def test_graph_ops_have_one_body_bound_as_is_on_the_cpu_backend():
    """Every graph op but the in-place ``index_accumulate`` is one ``host_body``
    (rtx/backend/<family>.py): CpuBackend's method IS the body (no wrapper, no
    second copy in rtx/backend/cpu/); a backend over other primitives runs it
    through the host round-trip."""
    ops = [n for f in GRAPH_FAMILIES for n in Backend.FAMILIES[f] if n != "index_accumulate"]
    assert len(ops) == 21  # index 2, segment 8, message 2, gatv2 5 (gat_scores too), grouped 4
    for n in ops:
        body = host_body_of(getattr(Backend, n))
        assert body is not None, n
        assert vars(CpuBackend)[n] is body, n
        assert getattr(MinimalBackend, n) is getattr(Backend, n) is not body, n
    assert host_body_of(CpuBackend.index_accumulate) is None


def test_host_body_round_trip_converts_only_the_named_arrays():
    seen = {}

    class Demo(Family):
        FAMILY = "demo_host"

        @host_body("x", "w")
        def demo_scale(self, x, k, w=None, flag=False):
            seen.update(x=type(x), w=type(w), k=k, flag=flag)
            return self._host_empty((2,), np.float64, zero=True) + x.sum() * k, None

    class Mini(Demo, MinimalBackend):
        pass

    class Cpu(Demo, CpuBackend):
        pass

    B = Mini()
    out, none = B.demo_scale(B.from_numpy(np.ones(3)), 2, w=None, flag=True)
    assert none is None and type(out) is not np.ndarray and B.is_prim(out)
    np.testing.assert_array_equal(B.to_numpy(out), [6.0, 6.0])
    assert seen == {"x": np.ndarray, "w": type(None), "k": 2, "flag": True}
    B.demo_scale(B.from_numpy(np.ones(3)), 1, B.from_numpy(np.ones(1)))
    assert seen["w"] is np.ndarray
    assert vars(Cpu)["demo_scale"] is host_body_of(Demo.demo_scale)
    C = Cpu()
    out, _ = C.demo_scale(np.ones(3), 3)
    assert type(C._host_empty((2,), np.float32).base) is _kernels.Storage  # the allocator
    assert type(Mini()._host_empty((2,), np.float32).base) is not _kernels.Storage
    np.testing.assert_array_equal(out, [9.0, 9.0])
    with pytest.raises(TypeError, match="no parameter 'y'"):
        host_body("y")(lambda self, x: x)


def test_allocator_module_and_old_import_paths():
    from rtx.backend.cpu import _alloc, empty, own
    assert empty is _alloc.empty and own is _alloc.own
    a = empty((3, 2), np.float32)
    assert type(a.base) is _kernels.Storage and a.flags.c_contiguous
    b = own(np.arange(4.0)[::2])
    assert b.flags.c_contiguous and type(b.base) is _kernels.Storage
    np.testing.assert_array_equal(b, [0.0, 2.0])
    with pytest.raises(MemoryError):
        empty((2**40, 2**30), np.float64)


# ------------------------------------------------------------ the compiler
def test_compiler_checks_each_node_against_the_kernels_table():
    add = ("add", (("i", 0), ("c", 0)), False)
    p = _program.compile_program([add], 1, 1, (0,))
    assert p.nregs == 3 and p.out_regs.tolist() == [2]
    assert p.prog.tolist() == [[_kernels.FUSED_OPS["add"].opcode, 2, 0, 1, -1, -1]]
    for nodes, outs, msg in [
        ([("nope", (("i", 0),), False)], (0,), "not a fused op"),
        ([("add", (("i", 0),), False)], (0,), "takes 2 operands"),
        ([("leaky_relu", (("i", 0),), False)], (0,), "an immediate"),
        ([("neg", (("i", 1),), False)], (0,), "bad operand"),
        ([("neg", (("n", 0),), False)], (0,), "bad operand"),       # reads itself
        ([("neg", (("c", 1),), False)], (0,), "bad operand"),
        ([add], (0, 0), "distinct"),
        ([add], (1,), "distinct"),
    ]:
        with pytest.raises(ValueError, match=msg):
            _program.compile_program(nodes, 1, 1, outs)


def test_lowered_programs_reuse_registers_and_run(dtype):
    # where(a > 0, g, g * slope): the leaky_relu backward, as cpu/activation.py writes it
    p = _program.lower(("a", "g"), ("zero", "slope"),
                       ("where", ("gt", "a", "zero"), "g", ("mul", "g", "slope")))
    assert p.nregs == 4 + 1 + 2   # inputs, constants, the output, two live temporaries
    chain = _program.lower(("a",), (), ("neg", ("exp", ("sqrt", ("abs", ("neg", "a"))))))
    assert chain.nregs == 1 + 1 + 1   # input, output, one temporary reused by the chain
    rng = np.random.default_rng(0)
    a, g = rng.standard_normal((2, 1000)).astype(dtype)
    out = np.empty_like(a)
    _kernels.fused_eval(p.prog, p.nregs, [a, g], [0.0, 0.3], [], [out], p.out_regs,
                        a.shape, 2, 2048)
    np.testing.assert_array_equal(out, np.where(a > 0, g, g * dtype.type(0.3)))
    with pytest.raises(ValueError, match="unknown leaf"):
        _program.lower(("a",), (), ("neg", "b"))
    with pytest.raises(ValueError, match="at least one op"):
        _program.lower(("a",), (), "a")


def test_fusion_and_the_cpu_backend_share_the_compiler():
    from rtx.fusion import compile as fusion_compile
    assert fusion_compile.compile_program is _program.compile_program


# ------------------------------------------------------------ index contract
@pytest.mark.parametrize("B", [CpuBackend(), MinimalBackend()], ids=["cpu", "minimal"])
def test_graph_backends_take_only_checked_plans(B):
    x = B.from_numpy(np.ones((4, 2)))
    idx = np.array([0, 1, 1, 0])
    plan = rtx.IndexPlan(idx, 3)
    for call in (lambda i: B.segment_mean(x, i, 3), lambda i: B.segment_max(x, i, 3),
                 lambda i: B.segment_min(x, i, 3), lambda i: B.segment_softmax(x, i, 3)):
        with pytest.raises(TypeError, match="IndexPlan"):
            call(idx)
        with pytest.raises(TypeError, match="IndexPlan"):
            call([0, 1, 1, 0])
        call(plan)
    with pytest.raises(ValueError, match="checked against 3 rows"):
        B.segment_mean(x, plan, 4)
    with pytest.raises(ValueError, match="len"):
        B.segment_mean(B.from_numpy(np.ones((3, 2))), plan, 3)
    ei = np.array([[0, 1, 2], [1, 0, 1]])
    xs = B.from_numpy(np.ones((3, 2)))
    with pytest.raises(TypeError, match="EdgeIndex"):
        B.message_passing(xs, ei, 2)
    with pytest.raises(ValueError, match="built for 3 source and 2 target"):
        B.message_passing(B.from_numpy(np.ones((2, 2))), rtx.EdgeIndex(ei, 3, 2), 2)
    with pytest.raises(ValueError, match="built for 3 source and 2 target"):
        B.message_passing(xs, rtx.EdgeIndex(ei, 3, 2), 3)
    edges = rtx.EdgeIndex(ei, 3, 2)
    B.message_passing(xs, edges, 2)
    with pytest.raises(ValueError, match="built for"):   # grad rows are the targets
        B.message_passing_backward(B.from_numpy(np.ones((3, 2))), xs, edges, None)


def test_the_backend_never_checks_a_plans_indices_again(monkeypatch):
    """Given plans, no backend body scans an index (forward and backward)."""
    scans = []
    for mod, name in [("rtx.backend.index_plan", "snapshot_indices"),
                      ("rtx.backend.index", "snapshot_indices"),
                      ("rtx.backend._index_check", "first_out_of_bounds")]:
        import importlib
        m = importlib.import_module(mod)
        real = getattr(m, name)
        monkeypatch.setattr(m, name, lambda *a, _r=real, _n=name: (scans.append(_n), _r(*a))[1])
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 5, 40)
    plan = rtx.IndexPlan(idx, 5)
    ei = rtx.EdgeIndex(np.stack([idx, idx[::-1]]), 5, 5)
    plan.csr(), ei.src.csr(), ei.dst.csr()
    for side in ("src", "dst"):     # the sides' in-order copies (built on a second request)
        ei._in_group_order(side), ei._in_group_order(side)
    assert set(ei._order) == {"src", "dst"}
    scans.clear()
    for B in (CpuBackend(), MinimalBackend()):
        x = B.from_numpy(rng.standard_normal((40, 3)))
        y = B.from_numpy(rng.standard_normal((5, 3)))
        B.index_add(x, plan, 5)
        B.index_select(y, plan)
        m, arg = B.segment_max(x, plan, 5)
        B.segment_max_backward(y, arg, plan, 40)
        B.segment_mean_backward(y, plan, 5)
        s = B.segment_softmax(x, plan, 5)
        B.segment_softmax_backward(s, x, plan, 5)
        out = B.message_passing(y, ei, 5, B.from_numpy(rng.standard_normal(40)))
        B.message_passing_backward(out, y, ei, B.from_numpy(rng.standard_normal(40)))
    assert scans == []


@pytest.mark.parametrize("B", [CpuBackend(), MinimalBackend()], ids=["cpu", "minimal"])
def test_index_backends_check_only_a_plans_row_count_and_length(B):
    x = B.from_numpy(np.arange(6.0).reshape(3, 2))
    plan = rtx.IndexPlan([2, 0, 2], 3)
    np.testing.assert_array_equal(B.to_numpy(B.index_select(x, plan)), [[4, 5], [0, 1], [4, 5]])
    np.testing.assert_array_equal(B.to_numpy(B.index_add(x, plan, np.int64(3))),
                                  [[2, 3], [0, 0], [4, 6]])
    with pytest.raises(ValueError, match="checked against 3 rows"):
        B.index_select(B.from_numpy(np.ones((4, 2))), plan)      # would read past x
    for rows in (4, 3.0, True, None):
        with pytest.raises(ValueError, match="checked against 3 rows"):
            B.index_add(x, plan, rows)
    with pytest.raises(ValueError, match=r"len\(indices\) = 3 must equal src.shape\[0\] = 2"):
        B.index_add(B.from_numpy(np.ones((2, 2))), plan, 3)
    # the output-size check is an allocation check: it holds for plans too
    huge = rtx.IndexPlan(np.zeros(0, np.int64), 2**40)
    with pytest.raises(MemoryError):
        B.index_add(B.from_numpy(np.ones((0, 2**30), np.float32)), huge, 2**40)
