"""The graph ops (index_select, index_add, segment_sum / mean / max / min /
softmax, message_passing), driven by their op_db entries (tests/op_db.py:
``kind="sampled"`` with a ``random_case``), with indices given raw, as rtx
tensors and as IndexPlan / EdgeIndex.

The six patterns each of tests/graph/test_index_ops.py, test_segment*.py and
test_message.py used to write out, written once:

* values against the numpy reference: tests/autograd/test_ops.py::test_sampled_values
  (every backend and dtype; exactly for the selections), and against torch /
  PyG here;
* float64 gradchecks: tests/autograd/test_autograd.py::test_sampled (every backend);
* the adjoint identity of the linear ops, here;
* bitwise equal across thread counts (1, 2, 2) and index forms, forward and
  backward, on the parallel paths, here;
* bad inputs (the exception, raised before anything is written):
  tests/autograd/test_ops.py::test_bad_input_raises_and_leaves_inputs (op_db ``errors``);
* properties: random cases (hypothesis) against the reference, here.
"""

from __future__ import annotations

import numpy as np
import op_db
import pytest
from conftest import assert_both_threads_run, bits, tol
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rtx
from rtx import _kernels
from rtx.autograd import check_adjoint

GRAPH = [op.name for op in op_db.ops("sampled") if op.random_case is not None]
ADJOINT = [op.name for op in op_db.ops("sampled") if op.adjoint is not None]
TORCH = [op.name for op in op_db.ops("sampled") if op.torch_ref is not None]


def test_the_graph_ops_are_in_op_db():
    """Every graph op has its entry with a random case (the lists below can't be empty)."""
    assert set(GRAPH) == {"index_select", "index_add", "segment_sum", "segment_mean",
                          "segment_max", "segment_min", "segment_softmax", "message_passing"}
    assert set(ADJOINT) == {"index_select", "index_add", "segment_sum", "message_passing"}
    assert set(TORCH) == set(GRAPH)


@pytest.fixture
def force_parallel():
    """Every index / segment / message kernel call takes its parallel path."""
    old = _kernels.set_segment_parallel_min(0)
    old_t = _kernels.set_parallel_thresholds(gather=0, scatter=0, scatter_min_row_bytes=0)
    yield
    _kernels.set_segment_parallel_min(old)
    _kernels.set_parallel_thresholds(**old_t)
    rtx.set_num_threads(None)


def _check(got: np.ndarray, want: np.ndarray, exact: bool, **kw: float) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape,
                                                                 got.dtype, want.dtype)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, equal_nan=True, **kw)


# ------------------------------------------------------- torch / PyG references
@pytest.mark.parametrize("name", TORCH)
def test_torch_reference(dtype, name):
    """Each sampled case against torch's (index_select, index_add_) or PyG's
    (``torch_geometric.utils.scatter`` / ``softmax``) result."""
    pytest.importorskip("torch")
    if name.startswith("segment_"):
        pytest.importorskip("torch_geometric")
    op = op_db.OP_DB[name]
    for s in op.samples(np.random.default_rng(11), dtype):
        with np.errstate(invalid="ignore"):
            got = op.call(*op_db.sample_args(s), **s.kwargs).numpy()
            want = op.torch_ref(*op_db.sample_ref_args(s), **s.kwargs)
        _check(got, want, op.exact, **tol(dtype))


def _targets(s: op_db.Sample) -> tuple[np.ndarray, int] | None:
    """The rows an op writes into and how many there are (its index's targets)."""
    for a in s.args:
        if isinstance(a, op_db.Idx):
            return a.values, a.rows
        if isinstance(a, op_db.Edges):
            return a.values[1], a.num_dst
    return None


@pytest.mark.valgrind
@pytest.mark.parametrize("name", [n for n in GRAPH
                                  if n not in ("index_select", "segment_softmax")])
def test_rows_without_entries_are_exactly_zero(backend, dtype, name):
    """A segment / row / target node that receives nothing is exactly 0 (not a
    rounding residue, not the reduction's identity -inf / inf / NaN)."""
    op = op_db.OP_DB[name]
    seen = 0
    for s in op.samples(np.random.default_rng(13), dtype):
        idx, n = _targets(s)
        empty = np.setdiff1d(np.arange(n), idx)
        with np.errstate(invalid="ignore"):
            out = op.call(*op_db.sample_args(s), **s.kwargs).numpy()
        assert out.shape[0] == n
        assert np.all(out[empty] == 0), (name, empty)
        seen += empty.size
    assert seen  # the samples have empty rows


# ------------------------------------------------------------------- adjoints
@pytest.mark.parametrize("form", op_db.INDEX_FORMS)
@pytest.mark.parametrize("name", ADJOINT)
def test_adjoint_identity(backend, name, form):
    """``<op(a), g> == <a, adjoint(g)>`` on every float64 case (repeats, unused
    rows, empty segments), and ``rtx.autograd.check_adjoint`` on random ones."""
    op = op_db.OP_DB[name]
    rng = np.random.default_rng(12)
    for s in op.samples(np.random.default_rng(7), np.float64):
        args = op_db.sample_args(s, form)
        y = op.call(*args, **s.kwargs)
        g = rng.standard_normal(y.shape)
        lhs = float(np.vdot(y.numpy(), g))
        rhs = float(np.vdot(s.args[0], op.adjoint(s, rtx.tensor(g)).numpy()))
        assert lhs == pytest.approx(rhs, rel=1e-12, abs=1e-12), (name, s)
        assert check_adjoint(lambda t, args=args, s=s: op.call(t, *args[1:], **s.kwargs),
                             lambda t, s=s: op.adjoint(s, t), s.args[0].shape, y.shape)


# ----------------------------------------------------------------- determinism
@pytest.mark.parametrize("name", GRAPH)
def test_bitwise_across_threads_and_forms(dtype, name, force_parallel):
    """A large case (20,000 entries over 300 rows: many chunks per thread) on the
    parallel paths: output and every gradient bit-identical for 1, 2, 2 threads
    and the index given raw, as a tensor and as a plan; two threads really ran."""
    op = op_db.OP_DB[name]
    s = op.random_case(np.random.default_rng(6), 20_000, 300, dtype)
    rng = np.random.default_rng(16)
    g = None
    res = []
    for T in (1, 2, 2):
        for form in op_db.INDEX_FORMS:
            rtx.set_num_threads(T)
            args = op_db.sample_args(s, form, requires_grad=op.differentiable)
            y = op.call(*args, **s.kwargs)
            if g is None:
                g = rtx.tensor(rng.standard_normal(y.shape).astype(dtype))
            y.backward(g)
            grads = [bits(a.grad.numpy()) for a in args
                     if isinstance(a, rtx.Tensor) and a.requires_grad]
            assert grads, name
            res.append([bits(y.numpy()), *grads])
    for r in res[1:]:
        assert len(r) == len(res[0])
        for a, b in zip(r, res[0], strict=True):
            np.testing.assert_array_equal(a, b)
    plans = op_db.sample_args(s, "plan")
    if _kernels.openmp_enabled():
        rtx.set_num_threads(2)
        assert_both_threads_run(lambda: op.call(*plans, **s.kwargs))
    if op.family in ("segment", "message"):  # the CSR grouping is built once, on the plan
        # (in the plan form the only tensors are the float arguments)
        y = op.call(*[rtx.tensor(a.numpy(), requires_grad=True) if isinstance(a, rtx.Tensor)
                      else a for a in plans], **s.kwargs)
        y.backward(g)
        for p in plans:
            if isinstance(p, rtx.IndexPlan):
                assert p.is_grouped
            elif isinstance(p, rtx.EdgeIndex):
                assert p.dst.is_grouped and p.src.is_grouped


# ------------------------------------------------------------------ properties
@pytest.mark.parametrize("name", GRAPH)
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(E=st.integers(0, 60), N=st.integers(1, 12), seed=st.integers(0, 2**31),
       threads=st.sampled_from([1, 2]), form=st.sampled_from(op_db.INDEX_FORMS))
def test_property_matches_reference(name, E, N, seed, threads, form):
    """Random cases (ties likely for the segment ops), parallel paths forced,
    1 or 2 threads: the reference's values (float64; exactly for selections)."""
    op = op_db.OP_DB[name]
    s = op.random_case(np.random.default_rng(seed), E, N, np.float64)
    rtx.set_num_threads(threads)
    old = _kernels.set_segment_parallel_min(0)
    try:
        got = op.call(*op_db.sample_args(s, form), **s.kwargs).numpy()
    finally:
        _kernels.set_segment_parallel_min(old)
        rtx.set_num_threads(None)
    want = op.ref(*op_db.sample_ref_args(s), **s.kwargs)
    _check(got, want, op.exact, rtol=1e-12, atol=1e-14 if op.family == "segment" else 1e-12)
