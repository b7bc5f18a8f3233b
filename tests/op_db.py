"""The op database: every op declared once, for every test that checks ops.

In the spirit of PyTorch's OpInfo (``torch/testing/_internal/common_methods_invocations.py``):
one :class:`OpInfo` per op names its rtx call, its numpy reference, where its
sample inputs come from, its dtypes, whether it is differentiable and
gradcheck-able, one call on the ``Backend`` interface, and its bad inputs with
the exception each must raise.  The tests read it:

* ``test_ops.py``       values against ``ref`` on every backend x dtype, bad inputs;
* ``test_autograd.py``  float64 finite-difference gradchecks of the differentiable ops;
* ``test_backends.py``  the ``Backend`` defaults against the CPU kernels (``backend_call``);
* ``test_fuzz.py``      hypothesis fuzzing of the ``fuzz`` ops against ``ref``;
* ``test_graph_ops_db.py`` the graph ops (sampled entries with a ``random_case``):
  torch / PyG references, adjoints, bitwise across thread counts and index
  forms, rows without entries exactly 0, hypothesis properties.

Adding an op to rtx = its kernel, its rule, its Tensor method and ONE entry
here: the value, gradient, backend-parity and fuzz tests then pick it up by
``kind``.  (Ops with behaviour beyond an entry's fields -- index ops, shape ops,
``max(dim)`` -- also keep their own tests.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import rtx

FLOATS = (np.float32, np.float64)


@dataclass(frozen=True)
class ErrorInput:
    """A bad call (given a float (2, 3) tensor ``t``) and what it must raise."""

    id: str
    call: Callable[[rtx.Tensor], Any]
    exc: type[BaseException]
    match: str | None = None


@dataclass(frozen=True)
class OpInfo:
    """One op.  ``kind`` says which generic tests take it:

    ``unary``     ``call(t)``, ``ref(a)`` elementwise;
    ``binary``    ``call(a, b)`` with numpy broadcasting, ``ref`` a numpy ufunc;
    ``compare``   like binary, bool result;
    ``reduction`` ``getattr(t, name)(dim, keepdim)``, ``ref(a, axis=, keepdims=)``;
    ``softmax``   ``getattr(rtx, name)(t, dim)``;
    ``sampled``   ``call(*args, **kwargs)`` on each ``samples(rng, dtype)`` case (float
                  arrays become tensors, ``Idx`` / ``Edges`` indices are passed raw, as
                  rtx tensors and as IndexPlan / EdgeIndex), ``ref`` on the numpy
                  arrays: values, float64 gradchecks, the declared in-place face and
                  the tape's saved-buffer declaration (test_ops, test_autograd,
                  test_version_counter);
    ``other``     only its backend call / bad inputs / own tests.
    """

    name: str
    family: str                      # the Backend family file (elementwise, activation, ...)
    kind: str = "other"
    call: Callable[..., Any] | None = None        # the rtx call the value/grad tests make
    ref: Callable[..., Any] | None = None         # its numpy reference
    dtypes: tuple[type, ...] = FLOATS
    domain: tuple[float, float] = (-3.0, 3.0)     # value-test sample range
    differentiable: bool = True
    gradcheck: bool = True
    # gradcheck samples: rnd() keywords (low/high/away); None = tie-free values (distinct())
    grad_domain: dict[str, float] | None = field(default_factory=dict)
    # extra gradchecked compositions that exercise this op's rule: name -> (f, rnd kw)
    grad_variants: dict[str, tuple[Callable[..., Any], dict[str, float]]] = field(
        default_factory=dict)
    scalar: float | None = None       # binary: a Python scalar operand (both sides) in tests
    backend_call: Callable[[Any, Callable[[Any], Any]], Any] | None = None
    errors: tuple[ErrorInput, ...] = ()
    # fuzz (tests/kernels/test_fuzz.py): take part in the kind's fuzz test, called as
    # getattr(rtx, name) (unary, binary) or the Tensor method (compare)
    fuzz: bool = True
    keeps_int: bool = False           # unary: an int input gives an int result (else float64)
    # sampled: the cases (rng, dtype) -> [Sample]; gradchecks use the float64 ones
    samples: Callable[[np.random.Generator, Any], list[Sample]] | None = None
    # graph ops (tests/graph/test_graph_ops_db.py):
    exact: bool = False               # values equal the reference exactly (selections)
    # torch / PyG's result on the reference's numpy arguments
    torch_ref: Callable[..., np.ndarray] | None = None
    # linear in its first argument: (case, cotangent tensor) -> the adjoint applied
    adjoint: Callable[[Sample, Any], Any] | None = None
    # (rng, E entries / edges, N rows / nodes, dtype) -> one random case
    # (hypothesis properties; the large case of the bitwise-across-threads test)
    random_case: Callable[[np.random.Generator, int, int, Any], Sample] | None = None


@dataclass(frozen=True)
class Idx:
    """An index argument of a sampled case: 1-D ints checked against ``rows``."""

    values: np.ndarray
    rows: int


@dataclass(frozen=True)
class Edges:
    """An ``edge_index`` argument of a sampled case: ``[2, E]`` over (num_src, num_dst)."""

    values: np.ndarray
    num_src: int
    num_dst: int


@dataclass(frozen=True)
class Sample:
    """One case of a ``sampled`` op: positional args (float arrays -> tensors, ``Idx`` /
    ``Edges`` -> indices in each form, anything else as is) and keyword args."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    grad: bool = True                 # gradcheck this case (float64)


INDEX_FORMS = ("raw", "tensor", "plan")


def sample_args(s: Sample, form: str = "raw", requires_grad: bool = False) -> list[Any]:
    """``s``'s rtx arguments, indices in ``form`` (raw numpy / rtx tensor / plan)."""
    out: list[Any] = []
    for a in s.args:
        if isinstance(a, Idx):
            out.append(a.values if form == "raw" else rtx.tensor(a.values) if form == "tensor"
                       else rtx.IndexPlan(a.values, a.rows))
        elif isinstance(a, Edges):
            out.append(a.values if form == "raw" else rtx.tensor(a.values) if form == "tensor"
                       else rtx.EdgeIndex(a.values, a.num_src, a.num_dst))
        elif isinstance(a, np.ndarray) and a.dtype.kind == "f":
            out.append(rtx.tensor(a, requires_grad=requires_grad))
        else:
            out.append(a)
    return out


def sample_ref_args(s: Sample) -> list[Any]:
    """``s``'s numpy arguments for the reference."""
    return [a.values if isinstance(a, (Idx, Edges)) else a for a in s.args]


# --------------------------------------------------------------- backend samples
_RNG = np.random.default_rng(1)
X = _RNG.uniform(0.5, 2.0, (3, 4))
Y = _RNG.uniform(0.5, 2.0, (4,))
M = _RNG.uniform(-1, 1, (4, 2))
IDX = np.array([2, 0, 2], dtype=np.int64)
X4 = _RNG.uniform(-1, 1, (4, 4))  # one row per segment of IDX over 4 segments
EI = np.array([[0, 2, 1, 2], [1, 0, 1, 1]], dtype=np.int64)  # 3 sources -> 2 targets
# backends take index arguments as checked plans (the public faces make them)
P3, P4, P5 = (rtx.IndexPlan(IDX, n) for n in (3, 4, 5))   # IDX over 3 / 4 / 5 rows
EIP = rtx.EdgeIndex(EI, 3, 2)
W = _RNG.uniform(-1, 1, (4,))


def _mp_backward(B: Any, f: Callable[[Any], Any]) -> Any:
    gx, gw = B.message_passing_backward(f(X[:2]), f(X), EIP, f(W))
    return B.concat([B.reshape(gx, (12,)), gw], 0)

# gatv2_scores samples: 3 sources -> 2 targets over EI, H = 2 heads of C = 2,
# mixed signs (both sides of the leaky ReLU); their own generator
_GRNG = np.random.default_rng(21)
GL, GR = _GRNG.uniform(-1, 1, (3, 2, 2)), _GRNG.uniform(-1, 1, (2, 2, 2))
GA, GE = _GRNG.uniform(-1, 1, (2, 2)), _GRNG.uniform(-1, 1, (4, 2, 2))


def _gatv2_backward(B: Any, f: Callable[[Any], Any]) -> Any:
    gl, gr, ga, ge = B.gatv2_scores_backward(f(GE[:, :, 0]), f(GL), f(GR), f(GA), EIP, 0.2,
                                             f(GE))
    return B.concat([B.reshape(gl, (12,)), B.reshape(gr, (8,)), B.reshape(ga, (4,)),
                     B.reshape(ge, (16,))], 0)


def _gatv2_ref(xl: np.ndarray, xr: np.ndarray, att: np.ndarray, ei: np.ndarray,
               slope: float, xe: np.ndarray | None = None) -> np.ndarray:
    z = xl[ei[0]] + xr[ei[1]] + (0 if xe is None else xe)
    return (np.where(z > 0, z, slope * z) * att).sum(-1).astype(xl.dtype)


def _gatv2_samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
    def u(*shape: int) -> np.ndarray:   # away from 0: leaky_relu' is defined
        v = rng.uniform(0.2, 1.0, shape) * rng.choice([-1.0, 1.0], shape)
        return v.astype(dtype)
    ei = np.array([[0, 2, 1, 2, 0], [1, 0, 1, 1, 1]])
    ei32 = np.array([[3, 0, 3, 1], [0, 0, 2, 1]], np.int32)
    # the sum xl + xr (+ xe) must stay away from 0 for the gradcheck: a large xr
    big = np.array([[[3.0, -3.0], [-3.0, 3.0]], [[3.0, 3.0], [-3.0, -3.0]]], dtype)
    return [
        Sample((u(3, 2, 2), big, u(2, 2), Edges(ei, 3, 2), 0.2)),
        Sample((u(3, 2, 2), big, u(2, 2), Edges(ei, 3, 2), 0.1, u(5, 2, 2) * 0.5)),
        Sample((u(4, 1, 3) * 0.2, u(3, 1, 3) * 4, u(1, 3), Edges(ei32, 4, 3), 0.3)),
        Sample((u(3, 2, 2), big, u(2, 2), Edges(np.zeros((2, 0), np.int64), 3, 2), 0.2)),
    ]

# head_dot: [N, H, C] with [H, C] -> [N, H]
_HD_X, _HD_A = _GRNG.uniform(-1, 1, (5, 2, 3)), _GRNG.uniform(-1, 1, (2, 3))


def _head_dot_backward(B: Any, f: Callable[[Any], Any]) -> Any:
    gx, ga = B.head_dot_backward(f(_HD_X[:, :, 0]), f(_HD_X), f(_HD_A))
    return B.concat([B.reshape(gx, (30,)), B.reshape(ga, (6,))], 0)


def _head_dot_ref(x: np.ndarray, att: np.ndarray) -> np.ndarray:
    return (x * att).sum(-1).astype(x.dtype)


def _head_dot_samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
    def u(*shape: int) -> np.ndarray:
        return rng.uniform(-1, 1, shape).astype(dtype)
    return [
        Sample((u(5, 2, 3), u(2, 3))),
        Sample((u(1, 1, 1), u(1, 1))),
        Sample((u(0, 3, 2), u(3, 2))),
        Sample((u(3, 4, 17), u(4, 17))),
        Sample((u(4200, 2, 3), u(2, 3)), grad=False),   # three chunks of rows
    ]


# gat_scores: leaky_relu(a_src[src] + a_dst[dst]) -> [E, H]
_GS_S, _GS_D = _GRNG.uniform(-1, 1, (3, 2)), _GRNG.uniform(-1, 1, (2, 2))


def _gat_scores_ref(a_src: np.ndarray, a_dst: np.ndarray, src: np.ndarray, dst: np.ndarray,
                    slope: float) -> np.ndarray:
    z = a_src[src] + a_dst[dst]
    return np.where(z > 0, z, z * a_src.dtype.type(slope)).astype(a_src.dtype)


def _gat_scores_samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
    def u(*shape: int) -> np.ndarray:   # sums away from 0: leaky_relu' is defined
        v = rng.uniform(0.2, 1.0, shape) * rng.choice([-1.0, 1.0], shape)
        return v.astype(dtype)
    big = np.array([[3.0, -3.0], [-3.0, 3.0]], dtype)    # |a_dst| > |a_src|: no sum near 0
    src, dst = np.array([0, 2, 1, 2, 0, 1]), np.array([1, 0, 1, 1, 0, 0])
    return [
        Sample((u(3, 2), big, Idx(src, 3), Idx(dst, 2), 0.2)),
        Sample((u(3, 2), big, Idx(src, 3), Idx(dst, 2), -0.5)),      # the sum kept
        Sample((u(4, 1) * 0.2, u(3, 1) * 4, Idx(np.array([3, 0, 3], np.int32), 4),
                Idx(np.array([2, 2, 0]), 3), 0.0)),                  # mixed index dtypes
        Sample((u(3, 2), big, Idx(np.zeros(0, np.int64), 3), Idx(np.zeros(0, np.int64), 2),
                0.2)),
        Sample((u(50, 3), u(40, 3), Idx(rng.integers(0, 50, 20000), 50),
                Idx(rng.integers(0, 40, 20000), 40), 0.2), grad=False),   # chunks, threads
    ]


def _segment_matmul_ref(x: np.ndarray, index: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.einsum("nk,nkm->nm", x, w[index]).astype(x.dtype).reshape(x.shape[0], w.shape[2])


def _segment_matmul_samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
    def u(*shape: int) -> np.ndarray:
        return rng.uniform(-1, 1, shape).astype(dtype)
    return [
        Sample((u(7, 3), Idx(np.array([2, 0, 2, 1, 0, 2, 2]), 3), u(3, 3, 4))),  # unsorted
        Sample((u(5, 4), Idx(np.array([0, 0, 1, 1, 1], np.int32), 2), u(2, 4, 2))),  # sorted
        Sample((u(6, 2), Idx(np.array([3, 3, 0, 3, 0, 3]), 4), u(4, 2, 3))),  # empty types
        Sample((u(0, 3), Idx(np.zeros(0, np.int64), 2), u(2, 3, 2))),
        Sample((u(3, 17), Idx(np.array([1, 0, 1]), 2), u(2, 17, 9))),  # past one KB block
    ]


_SM_X, _SM_W = _RNG.uniform(-1, 1, (3, 2)), _RNG.uniform(-1, 1, (4, 2, 3))


def _sm_backward(B: Any, f: Callable[[Any], Any]) -> Any:
    gx, gw = B.segment_matmul_backward(f(X[:, :3]), f(_SM_X), P4, f(_SM_W))
    return B.concat([B.reshape(gx, (6,)), B.reshape(gw, (24,))], 0)


def _segment_matmul_sum_ref(x: np.ndarray, index: np.ndarray, w: np.ndarray,
                            dst: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, w.shape[2]), x.dtype)
    np.add.at(out, dst, _segment_matmul_ref(x, index, w))
    return out


def _segment_matmul_sum_samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
    def u(*shape: int) -> np.ndarray:
        return rng.uniform(-1, 1, shape).astype(dtype)
    return [
        # unsorted types: the two ops; repeated targets accumulate
        Sample((u(7, 3), Idx(np.array([2, 0, 2, 1, 0, 2, 2]), 3), u(3, 3, 4),
                Idx(np.array([4, 0, 4, 1, 0, 4, 2]), 5), 5)),
        # sorted types (the chunked path), repeated targets across types
        Sample((u(6, 4), Idx(np.array([0, 0, 1, 1, 1, 2], np.int32), 3), u(3, 4, 2),
                Idx(np.array([1, 0, 1, 3, 1, 0], np.int32), 4), 4)),
        Sample((u(5, 2), Idx(np.array([1, 1, 3, 3, 3]), 4), u(4, 2, 3),   # empty types
                Idx(np.array([2, 2, 2, 0, 2]), 6), 6)),                    # untouched rows
        Sample((u(0, 3), Idx(np.zeros(0, np.int64), 2), u(2, 3, 2),
                Idx(np.zeros(0, np.int64), 3), 3)),
        Sample((u(4, 3), Idx(np.array([0, 0, 1, 1]), 2), u(2, 3, 0),      # no output columns
                Idx(np.array([0, 1, 0, 1]), 2), 2), grad=False),
    ]


_SMS_G = np.random.default_rng(23).uniform(-1, 1, (5, 3))


def _sms_backward(B: Any, f: Callable[[Any], Any]) -> Any:
    gx, gw = B.segment_matmul_sum_backward(f(_SMS_G), f(_SM_X), P4, f(_SM_W), P5)
    return B.concat([B.reshape(gx, (6,)), B.reshape(gw, (24,))], 0)


# value-test broadcasting pairs (binary, compare) and gradcheck pairs
BROADCAST_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)),
                    ((0, 3), (3,)), ((5,), (1,))]
GRAD_BROADCAST_SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 4), (4,)),        # b broadcast
    ((4,), (3, 4)),        # a broadcast
    ((2, 1, 4), (3, 1)),   # both broadcast
    ((3, 1), (1, 4)),
    ((), (2, 3)),          # 0-d with n-d
    ((2, 3), ()),
]
UNARY_SHAPES = [(5,), (3, 4), (2, 0, 3), ()]


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-a))


_erf_np = np.vectorize(math.erf, otypes=[np.float64])


def _erf_ref(a: np.ndarray) -> np.ndarray:
    return _erf_np(a).astype(a.dtype if a.dtype.kind == "f" else np.float64)


def _gelu_ref(a: np.ndarray) -> np.ndarray:
    return a * 0.5 * (1.0 + _erf_ref(a * math.sqrt(0.5)))


def _leaky(slope: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: np.where(x > 0, x, slope * x)


def _elu(alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: np.where(x > 0, x, alpha * np.expm1(x))


def _softmax_ref(a: np.ndarray, dim: int) -> np.ndarray:
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _log_softmax_ref(a: np.ndarray, dim: int) -> np.ndarray:
    m = a.max(axis=dim, keepdims=True)
    return (a - m) - np.log(np.exp(a - m).sum(axis=dim, keepdims=True))


def _index_add_into_ref(x: np.ndarray, dim: int, index: np.ndarray, source: np.ndarray,
                        alpha: float = 1) -> np.ndarray:
    out = np.array(x, copy=True)
    if out.ndim == 0:
        return out + alpha * source * len(index)
    np.add.at(np.moveaxis(out, dim, 0), index, alpha * np.moveaxis(source, dim, 0))
    return out


def _index_add_into_samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
    def r(*shape: int) -> np.ndarray:
        return rng.uniform(-2, 2, shape).astype(dtype)
    return [
        Sample((r(5, 3), 0, Idx(np.array([4, 0, 4, 2]), 5), r(4, 3))),
        Sample((r(3, 5), 1, Idx(np.array([1, 1], np.int32), 5), r(3, 2)), {"alpha": 2.5}),
        Sample((r(2, 3, 4), -1, Idx(np.array([3, 0, 3]), 4), r(2, 3, 3)), {"alpha": -1}),
        Sample((r(4), 0, Idx(np.zeros(0, np.int64), 4), r(0))),
        Sample((r(6, 2), 0, Idx(np.array([5]), 6), r(1, 2)), {"alpha": 0.5}),
    ]


def _embedding_ref(weight: np.ndarray, indices: np.ndarray,
                   padding_idx: int | None = None) -> np.ndarray:
    return weight[indices]


def _embedding_samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
    def r(*shape: int) -> np.ndarray:
        return rng.uniform(-2, 2, shape).astype(dtype)
    return [
        Sample((r(5, 3), Idx(np.array([4, 0, 4, 2]), 5))),
        # padding rows get no gradient by definition (not the Jacobian): values only here,
        # their gradient against torch in tests/nn/test_embedding.py
        Sample((r(4, 2), Idx(np.array([1, 3, 1, 1], np.int32), 4)), {"padding_idx": 1},
               grad=False),
        Sample((r(3, 4), Idx(np.array([2, 0]), 3)), {"padding_idx": -1}, grad=False),
        Sample((r(4, 2), Idx(np.zeros(0, np.int64), 4))),
    ]


def _segment_min_ref(src: np.ndarray, index: np.ndarray, n: int) -> np.ndarray:
    out = np.full((n,) + src.shape[1:], np.inf, src.dtype)
    np.minimum.at(out, index, src)            # NaN propagates
    out[np.bincount(index, minlength=n) == 0] = 0
    return out


def _bce_logits_ref(x: np.ndarray, y: np.ndarray, weight: Any = None, pos_weight: Any = None,
                    reduction: str = "mean") -> np.ndarray:
    p = 1.0 if pos_weight is None else pos_weight
    loss = p * y * np.logaddexp(0, -x) + (1 - y) * np.logaddexp(0, x)   # -log sigmoid, ...
    if weight is not None:
        loss = loss * weight
    if reduction == "none":
        return loss.astype(x.dtype)
    total = loss.sum()
    return np.asarray(total if reduction == "sum" else total / loss.size if loss.size
                      else np.nan, x.dtype)


def _bce_logits_samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
    def r(*shape: int, lo: float = -4.0, hi: float = 4.0) -> np.ndarray:
        return rng.uniform(lo, hi, shape).astype(dtype)
    big = np.array([-60.0, -20.0, -0.0, 0.0, 20.0, 60.0], dtype)   # stable at both ends
    return [
        Sample((r(5), r(5, lo=0, hi=1))),
        Sample((r(3, 4), r(3, 4, lo=0, hi=1)), {"reduction": "sum"}),
        Sample((r(3, 4), r(3, 4, lo=0, hi=1), r(4, lo=0.2, hi=2)), {"reduction": "none"}),
        Sample((r(3, 4), r(3, 4, lo=0, hi=1), None, r(4, lo=0.2, hi=3))),      # pos_weight [C]
        Sample((r(2, 3, 2), r(2, 3, 2, lo=0, hi=1), r(3, 1, lo=0.2, hi=2), r(2, lo=0.2, hi=3)),
               {"reduction": "none"}),
        Sample((r(2, 3), (r(2, 3) > 0).astype(dtype), r(2, 3, lo=0.2, hi=2),
                r(2, 3, lo=0.2, hi=3)), {"reduction": "sum"}),
        Sample((big, np.array([1, 0, 1, 0, 1, 0], dtype)), {"reduction": "none"}, grad=False),
        Sample((r(0, 3), r(0, 3)), {"reduction": "sum"}),
        Sample((r(0, 3), r(0, 3)), grad=False),       # the mean of nothing: NaN, as PyTorch
    ]


def _segment_min_samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
    def distinct(*shape: int) -> np.ndarray:   # tie-free: the gradient is defined
        n = int(np.prod(shape))
        return (rng.permutation(n) * 0.37 - n * 0.15).reshape(shape).astype(dtype)
    ties = np.array([[1.0, 2.0], [1.0, -3.0], [0.5, -3.0], [-0.0, 0.0]], dtype)
    nan = np.array([[1.0], [np.nan], [0.0], [2.0]], dtype)
    return [
        Sample((distinct(6, 3), Idx(np.array([0, 2, 2, 0, 3, 2]), 5), 5)),  # 1 and 4 empty
        Sample((distinct(5), Idx(np.array([1, 1, 0, 1, 0], np.int32), 2), 2)),
        Sample((distinct(4, 2, 3), Idx(np.array([2, 0, 2, 2]), 3), 3)),
        Sample((distinct(0, 3), Idx(np.zeros(0, np.int64), 3), 3)),
        Sample((ties, Idx(np.array([0, 0, 1, 1]), 2), 2), grad=False),
        Sample((nan, Idx(np.array([0, 0, 1, 0]), 2), 2), grad=False),
    ]


def _E(id: str, call: Callable[[rtx.Tensor], Any], exc: type[BaseException],
       match: str | None = None) -> ErrorInput:
    return ErrorInput(id, call, exc, match)


# ------------------------------------------------------------- graph ops
# index_select / index_add / segment_* / message_passing: sampled cases over
# raw arrays, rtx tensors, IndexPlan and EdgeIndex (Idx / Edges), references
# written as loops (independent of the backends' vectorised numpy bodies),
# torch / PyG references, adjoints and random cases (tests/graph/test_graph_ops_db.py).
def _index_select_ref(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.array([x[i] for i in idx], dtype=x.dtype).reshape((len(idx),) + x.shape[1:])


def _segment_loop(src: np.ndarray, idx: np.ndarray, n: int,
                  f: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Segment r's rows of ``src`` reduced by ``f`` (0 for an empty segment)."""
    out = np.zeros((n,) + src.shape[1:], src.dtype)
    for r in range(n):
        rows = src[idx == r]
        if len(rows):
            with np.errstate(invalid="ignore"):
                out[r] = f(rows)
    return out


def _segment_sum_ref(src: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n,) + src.shape[1:], src.dtype)
    for e, r in enumerate(idx):   # in entry order, as the kernels accumulate
        out[r] += src[e]
    return out


def _segment_max_ref(src: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    # np.max propagates NaN (as the kernels do)
    return _segment_loop(src, idx, n, lambda r: r.max(axis=0))


def _segment_mean_ref(src: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    return _segment_loop(src, idx, n, lambda r: r.sum(axis=0) / len(r))


def _segment_softmax_ref(s: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros_like(s)
    for r in range(n):
        m = idx == r
        if m.any():
            v = s[m]
            e = np.exp(v - v.max(axis=0))
            out[m] = e / e.sum(axis=0)
    return out


def _message_ref(x: np.ndarray, ei: np.ndarray, n_dst: int,
                 w: np.ndarray | None = None) -> np.ndarray:
    out = np.zeros((n_dst,) + x.shape[1:], x.dtype)
    for e in range(ei.shape[1]):
        m = x[ei[0, e]]
        if w is not None:
            m = m * w[e].reshape(w[e].shape + (1,) * (x.ndim - w.ndim))
        out[ei[1, e]] += m
    return out


def _torch(a: Any) -> Any:
    import torch
    return torch.from_numpy(np.ascontiguousarray(a))


def _pyg_scatter(reduce: str) -> Callable[..., np.ndarray]:
    def ref(src: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
        from torch_geometric.utils import scatter
        return scatter(_torch(src), _torch(idx.astype(np.int64)), 0, n, reduce=reduce).numpy()
    return ref


def _pyg_softmax(s: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    from torch_geometric.utils import softmax
    return softmax(_torch(s), _torch(idx.astype(np.int64)), num_nodes=n).numpy()


def _torch_index_select(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    import torch
    return torch.index_select(_torch(x), 0, _torch(idx.astype(np.int64))).numpy()


def _torch_index_add(src: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    import torch
    out = torch.zeros((n,) + src.shape[1:], dtype=_torch(src).dtype)
    return out.index_add_(0, _torch(idx.astype(np.int64)), _torch(src)).numpy()


def _torch_message(x: np.ndarray, ei: np.ndarray, n_dst: int,
                   w: np.ndarray | None = None) -> np.ndarray:
    import torch
    xt, e = _torch(x), _torch(ei.astype(np.int64))
    m = xt[e[0]]
    if w is not None:
        m = m * _torch(w).reshape(w.shape + (1,) * (x.ndim - w.ndim))
    out = torch.zeros((n_dst,) + x.shape[1:], dtype=xt.dtype)
    return out.index_add_(0, e[1], m).numpy()


def _groups(rng: np.random.Generator, E: int, n: int, dtype: Any = np.int64) -> np.ndarray:
    """``E`` segment ids in [0, n) (repeats, unsorted), segment 3 empty when n > 4."""
    idx = rng.integers(0, n, E)
    if n > 4:
        idx[idx == 3] = 4
    return idx.astype(dtype)


def _distinct(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Tie-free values (a max / min has a defined gradient)."""
    k = int(np.prod(shape))
    return (rng.permutation(k) * 0.37 - k * 0.15).reshape(shape).astype(dtype)


def _index_select_samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
    def r(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(dtype)
    rep = np.concatenate([rng.integers(0, 15, 50), [0, 0, 3]])  # repeats; rows >= 15 unused
    return [
        Sample((r(30), Idx(rep, 30))),
        Sample((r(30, 4), Idx(rep.astype(np.int32), 30))),
        Sample((r(30, 2, 3), Idx(rep, 30))),
        Sample((r(4, 3), Idx(np.array([2, 0, 2, 3, 2]), 4))),
        Sample((r(5, 3), Idx(np.zeros(0, np.int64), 5))),
        Sample((r(5, 0), Idx(np.array([4, 1]), 5))),
    ]


def _index_select_random(rng: np.random.Generator, E: int, N: int, dtype: Any) -> Sample:
    F = 24 if E >= 10_000 else int(rng.integers(1, 6))
    return Sample((rng.standard_normal((N, F)).astype(dtype), Idx(rng.integers(0, N, E), N)))


def _add_samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
    """index_add / segment_sum: (src [E, ...], index, rows)."""
    def r(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(dtype)
    rep = np.concatenate([rng.integers(0, 15, 50), [0, 0, 3]])
    return [
        Sample((r(53), Idx(rep, 30), 30)),
        Sample((r(53, 4), Idx(rep.astype(np.int32), 30), 30)),
        Sample((r(53, 2, 3), Idx(rep, 30), 30)),
        Sample((r(5, 3), Idx(np.array([2, 0, 2, 3, 2]), 6), 6)),
        Sample((r(0, 3), Idx(np.zeros(0, np.int64), 4), 4)),
        Sample((r(17, 2), Idx(_groups(rng, 17, 6), 6), 6)),
    ]


def _add_random(rng: np.random.Generator, E: int, N: int, dtype: Any) -> Sample:
    F = 24 if E >= 10_000 else int(rng.integers(1, 6))
    return Sample((rng.standard_normal((E, F)).astype(dtype), Idx(rng.integers(0, N, E), N), N))


def _segment_samples(ties: bool, three_d: bool) -> Callable[[np.random.Generator, Any],
                                                             list[Sample]]:
    """segment_mean / max / softmax: shapes [E], [E, 3] (``three_d``: and [E, 2, 2]),
    int32 / int64 indices, an empty segment, large values, no entries; tie-free
    values for the gradchecks of max (``ties``: one case with ties, NaN, -0.0)."""
    def samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
        out = [
            Sample((_distinct(rng, (17,), dtype), Idx(_groups(rng, 17, 6), 6), 6)),
            Sample((_distinct(rng, (17, 3), dtype), Idx(_groups(rng, 17, 6, np.int32), 6), 6)),
            Sample((_distinct(rng, (40, 3), dtype) * 30, Idx(_groups(rng, 40, 9), 9), 9)),
            Sample((_distinct(rng, (0, 2), dtype), Idx(np.zeros(0, np.int64), 3), 3)),
        ]
        if ties:
            t = np.array([[2.0, 1.0], [5.0, -0.0], [5.0, 0.0], [1.0, np.nan], [5.0, 3.0]], dtype)
            out.append(Sample((t, Idx(np.array([0, 0, 0, 1, 0]), 3), 3), grad=False))
        if three_d:
            out.append(Sample((_distinct(rng, (17, 2, 2), dtype), Idx(_groups(rng, 17, 6), 6),
                               6)))
        return out
    return samples


def _segment_random(rng: np.random.Generator, E: int, N: int, dtype: Any) -> Sample:
    """Values on a 0.1 grid (ties likely), one to five columns (five when E >= 10,000:
    the bitwise test's large case)."""
    F = 5 if E >= 10_000 else int(rng.integers(1, 6))
    s = (rng.standard_normal((E, F)) * 10).round(1).astype(dtype)
    return Sample((s, Idx(rng.integers(0, N, E), N), N))


def _message_samples(rng: np.random.Generator, dtype: Any) -> list[Sample]:
    """(x, edge_index, num_dst, weight): [N, F] and [N, H, C], with and without
    weight, int32 / int64 edges, a target with no in-edges, no edges."""
    def r(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(dtype)

    def edges(E: int, idx_dtype: Any = np.int64) -> Edges:
        ei = np.stack([rng.integers(0, 8, E), rng.integers(0, 6, E)]).astype(idx_dtype)
        ei[1][ei[1] == 2] = 3  # target 2 receives nothing
        return Edges(ei, 8, 6)
    return [
        Sample((r(8, 5), edges(12), 6, None)),
        Sample((r(8, 5), edges(12, np.int32), 6, r(12))),
        Sample((r(8, 3, 4), edges(12), 6, r(12, 3))),
        Sample((r(8, 3, 4), edges(12, np.int32), 6, None)),
        Sample((r(3, 2), Edges(np.zeros((2, 0), np.int64), 3, 4), 4, None)),
    ]


def _message_random(rng: np.random.Generator, E: int, N: int, dtype: Any) -> Sample:
    """Small cases: any shape, weighted or not; large ones (E >= 10,000, the
    bitwise test): N -> N nodes, 4 heads of 8 channels, weighted."""
    if E >= 10_000:
        n_dst, H, C, weighted = N, 4, 8, True
    else:
        n_dst = int(rng.integers(1, N + 1))
        H, C, weighted = int(rng.integers(1, 4)), int(rng.integers(1, 6)), rng.random() < 0.5
    ei = np.stack([rng.integers(0, N, E), rng.integers(0, n_dst, E)])
    w = rng.standard_normal((E, H)).astype(dtype) if weighted else None
    return Sample((rng.standard_normal((N, H, C)).astype(dtype), Edges(ei, N, n_dst), n_dst, w))


def _raw(a: Any) -> Any:
    return a.values if isinstance(a, (Idx, Edges)) else a


# adjoints: <op(a, rest), g> == <a, adjoint(s, g)> for the op linear in its first argument
def _adjoint_index_select(s: Sample, g: Any) -> Any:
    return rtx.index_add(g, _raw(s.args[1]), s.args[0].shape[0])


def _adjoint_add(s: Sample, g: Any) -> Any:
    return rtx.index_select(g, _raw(s.args[1]))


def _adjoint_message(s: Sample, g: Any) -> Any:
    x, ei, _, w = s.args
    return rtx.message_passing(g, np.ascontiguousarray(ei.values[::-1]), x.shape[0],
                               None if w is None else rtx.tensor(w))


def _segment_errors(fn: Callable[..., Any], floats_only: bool) -> tuple[ErrorInput, ...]:
    """A segment op's bad inputs (``t`` is a float [2, 3] tensor)."""
    out = (
        _E("bounds", lambda t: fn(t, np.array([0, 5]), 3), IndexError, r"indices\[1\]"),
        _E("negative", lambda t: fn(t, np.array([0, -1]), 3), IndexError),
        _E("len", lambda t: fn(t, np.array([0]), 3), ValueError, "must equal|len"),
        _E("rows", lambda t: fn(t, np.array([0, 1]), -1), ValueError, ">= 0"),
        _E("float-index", lambda t: fn(t, np.array([0.0, 1.0]), 3), TypeError),
        _E("2-d-index", lambda t: fn(t, np.array([[0, 1]]), 3), TypeError),
        _E("float-rows", lambda t: fn(t, np.array([0, 1]), 3.5), TypeError),
        _E("plan-rows", lambda t: fn(t, rtx.IndexPlan(np.array([0, 1]), 5), 3), ValueError,
           "IndexPlan"),
    )
    if floats_only:
        out += (_E("int", lambda t: fn(t.long(), np.array([0, 1]), 3), TypeError, "float"),)
    return out


E = "elementwise"
A = "activation"
R = "reduction"

OPS: list[OpInfo] = [
    # ------------------------------------------------------------ elementwise
    OpInfo("add", E, "binary", lambda a, b: a + b, np.add, scalar=2.0,
           backend_call=lambda B, f: B.add(f(X), f(Y)),
           errors=(_E("str", lambda t: t + "x", TypeError),
                   _E("shape", lambda t: t + rtx.tensor(np.ones((4, 5))), ValueError))),
    OpInfo("sub", E, "binary", lambda a, b: a - b, np.subtract, scalar=1.5,
           backend_call=lambda B, f: B.sub(f(X), 2.0)),
    OpInfo("mul", E, "binary", lambda a, b: a * b, np.multiply, scalar=3.0,
           grad_variants={"pos": (lambda t: +t * 1.0, {})},
           backend_call=lambda B, f: B.mul(f(X), f(Y))),
    OpInfo("div", E, "binary", lambda a, b: a / b, np.true_divide, scalar=4.0,
           grad_domain={"away": 0.3}, backend_call=lambda B, f: B.div(1.0, f(X))),
    OpInfo("pow", E, "binary", lambda a, b: a ** b, np.power,
           grad_domain={"low": 0.3, "high": 2.0},
           grad_variants={
               "square": (lambda t: t ** 2, {}),
               "cube": (lambda t: t ** 3.0, {}),
               "rsqrt": (lambda t: t ** -0.5, {"low": 0.2, "high": 3.0}),
               "pow0": (lambda t: t ** 0 + t, {}),
               "exp2": (lambda t: 2.0 ** t, {}),
           },
           backend_call=lambda B, f: B.pow(f(X), f(Y))),
    OpInfo("maximum", E, "binary", rtx.maximum, np.maximum, scalar=0.25, grad_domain=None,
           backend_call=lambda B, f: B.maximum(f(X), f(Y))),
    OpInfo("minimum", E, "binary", rtx.minimum, np.minimum, scalar=0.25, grad_domain=None,
           backend_call=lambda B, f: B.minimum(f(X), f(Y))),
    OpInfo("neg", E, "unary", lambda t: -t, np.negative, keeps_int=True,
           backend_call=lambda B, f: B.neg(f(X))),
    OpInfo("exp", E, "unary", rtx.exp, np.exp, backend_call=lambda B, f: B.exp(f(X))),
    # an evaluator op without a backend body (its rule calls B.elementwise)
    OpInfo("erf", E, "unary", rtx.erf, _erf_ref),
    OpInfo("log", E, "unary", rtx.log, np.log, domain=(0.1, 3.0),
           grad_domain={"low": 0.2, "high": 3.0}, backend_call=lambda B, f: B.log(f(X))),
    OpInfo("sqrt", E, "unary", rtx.sqrt, np.sqrt, domain=(0.1, 3.0),
           grad_domain={"low": 0.2, "high": 3.0}, backend_call=lambda B, f: B.sqrt(f(X))),
    OpInfo("abs", E, "unary", rtx.abs, np.abs, keeps_int=True, grad_domain={"away": 0.1},
           backend_call=lambda B, f: B.abs(f(X - 1))),
    OpInfo("sign", E, "unary", rtx.sign, np.sign, keeps_int=True, grad_domain={"away": 0.1},
           backend_call=lambda B, f: B.sign(f(np.array([-1.0, 0.0, 2.0, np.nan])))),
    OpInfo("eq", E, "compare", lambda a, b: a == b, np.equal, differentiable=False,
           backend_call=lambda B, f: B.eq(f(X), f(X))),
    OpInfo("ne", E, "compare", lambda a, b: a != b, np.not_equal, differentiable=False,
           backend_call=lambda B, f: B.ne(f(X), 1.0)),
    OpInfo("lt", E, "compare", lambda a, b: a < b, np.less, differentiable=False,
           backend_call=lambda B, f: B.lt(f(X), f(Y))),
    OpInfo("le", E, "compare", lambda a, b: a <= b, np.less_equal, differentiable=False,
           backend_call=lambda B, f: B.le(f(X), f(Y))),
    OpInfo("gt", E, "compare", lambda a, b: a > b, np.greater, differentiable=False,
           backend_call=lambda B, f: B.gt(f(X), f(Y))),
    OpInfo("ge", E, "compare", lambda a, b: a >= b, np.greater_equal, differentiable=False,
           backend_call=lambda B, f: B.ge(f(X), f(Y))),
    OpInfo("where", E, backend_call=lambda B, f: B.where(f(X > 1), f(X), f(Y))),
    OpInfo("cast", E, backend_call=lambda B, f: B.cast(f(X), np.dtype(np.float32))),
    OpInfo("copy", E, backend_call=lambda B, f: B.copy(f(X))),
    OpInfo("elementwise", E, differentiable=False,   # any evaluator op by name
           backend_call=lambda B, f: B.elementwise("leaky_relu", f(X - 1), imm=0.1)),
    # ------------------------------------------------------------- activation
    OpInfo("relu", A, "unary", rtx.relu, lambda a: np.maximum(a, a.dtype.type(0)),
           keeps_int=True, grad_domain={"away": 0.1},
           backend_call=lambda B, f: B.relu(f(X - 1))),
    OpInfo("sigmoid", A, "unary", rtx.sigmoid, _sigmoid,
           backend_call=lambda B, f: B.sigmoid(f(X - 1))),
    OpInfo("tanh", A, "unary", rtx.tanh, np.tanh, backend_call=lambda B, f: B.tanh(f(X))),
    # gelu: a composition of elementwise ops (no backend op of its own); its tanh form
    # is gradchecked as a variant
    OpInfo("gelu", A, "unary", rtx.gelu, _gelu_ref,
           grad_variants={"tanh": (lambda t: rtx.gelu(t, approximate="tanh"), {})},
           errors=(_E("approximate", lambda t: rtx.gelu(t, approximate="erf"), ValueError,
                      "'none' or 'tanh'"),)),
    # parametrised: fuzzed with their parameters by test_fuzz.test_parametrised_activations
    OpInfo("leaky_relu", A, "unary", lambda t: rtx.leaky_relu(t, 0.2), _leaky(0.2),
           grad_domain={"away": 0.1}, fuzz=False,
           backend_call=lambda B, f: B.leaky_relu(f(X - 1), 0.1)),
    OpInfo("elu", A, "unary", lambda t: rtx.elu(t, 1.5), _elu(1.5),
           grad_domain={"away": 0.1}, fuzz=False,
           backend_call=lambda B, f: B.elu(f(X - 1), 0.5)),
    # the backward rules' one-pass ops (their gradients: the activations' gradchecks)
    OpInfo("relu_backward", A, differentiable=False,
           backend_call=lambda B, f: B.relu_backward(B.relu(f(X - 1)), f(X4[:3] * 3))),
    OpInfo("leaky_relu_backward", A, differentiable=False,
           backend_call=lambda B, f: B.leaky_relu_backward(f(X - 1), f(X4[:3] * 3), 0.1)),
    OpInfo("sigmoid_backward", A, differentiable=False,
           backend_call=lambda B, f: B.sigmoid_backward(B.sigmoid(f(X - 1)), f(X4[:3] * 3))),
    OpInfo("tanh_backward", A, differentiable=False,
           backend_call=lambda B, f: B.tanh_backward(B.tanh(f(X - 1)), f(X4[:3] * 3))),
    OpInfo("elu_backward", A, differentiable=False,
           backend_call=lambda B, f: B.elu_backward(f(X - 1), B.elu(f(X - 1), 0.5),
                                                    f(X4[:3] * 3), 0.5)),
    OpInfo("softmax", A, "softmax", rtx.softmax, _softmax_ref,
           backend_call=lambda B, f: B.softmax(f(X), 1),
           errors=(_E("dim", lambda t: rtx.softmax(t, 5), IndexError),)),
    OpInfo("log_softmax", A, "softmax", rtx.log_softmax, _log_softmax_ref,
           backend_call=lambda B, f: B.log_softmax(f(X), 0)),
    # -------------------------------------------------------------- reduction
    OpInfo("sum", R, "reduction", ref=np.sum, grad_domain=None,
           backend_call=lambda B, f: B.sum(f(X), 1, True),
           errors=(_E("dim", lambda t: t.sum(dim="a"), TypeError),)),
    OpInfo("mean", R, "reduction", ref=np.mean, grad_domain=None,
           backend_call=lambda B, f: B.mean(f(X), (0, 1), False)),
    OpInfo("amax", R, "reduction", ref=np.max, grad_domain=None),
    OpInfo("amin", R, "reduction", ref=np.min, grad_domain=None),
    # max/min(dim) return (values, indices); argmax returns indices (own tests)
    OpInfo("max", R, "reduction_indices", backend_call=lambda B, f: B.max(f(X), 0, False)),
    OpInfo("min", R, "reduction_indices", backend_call=lambda B, f: B.min(f(X), None, False)),
    OpInfo("argmax", R, "reduction_indices", differentiable=False,
           backend_call=lambda B, f: B.argmax(f(X), 1, False)),
    # ----------------------------------------------------------------- linalg
    OpInfo("matmul", "linalg", backend_call=lambda B, f: B.matmul(f(X), f(M)),
           errors=(_E("0-d", lambda t: t @ 3, ValueError),
                   _E("align", lambda t: t @ t, ValueError, match="align"))),
    # ------------------------------------------------------------------ shape
    OpInfo("reshape", "shape", backend_call=lambda B, f: B.reshape(f(X), (2, 6)),
           errors=(_E("numel", lambda t: t.reshape(7), ValueError),)),
    OpInfo("permute", "shape", backend_call=lambda B, f: B.permute(f(X), (1, 0))),
    OpInfo("broadcast_to", "shape", backend_call=lambda B, f: B.broadcast_to(f(Y), (2, 4))),
    OpInfo("expand", "shape", backend_call=lambda B, f: B.expand(f(Y), (3, 2, 4))),
    OpInfo("getitem", "shape",
           backend_call=lambda B, f: B.getitem(f(X), (slice(None), [1, 1]))),
    OpInfo("slice_backward", "shape",
           backend_call=lambda B, f: B.slice_backward(f(X[:, :2]), (3, 4),
                                                      (slice(None), [1, 1]))),
    OpInfo("concat", "shape", backend_call=lambda B, f: B.concat([f(X), f(X)], 1)),
    OpInfo("stack", "shape", backend_call=lambda B, f: B.stack([f(X), f(X)], 0)),
    # ------------------------------------------------------------------ index
    OpInfo("index_select", "index", backend_call=lambda B, f: B.index_select(f(X), P3),
           kind="sampled", call=rtx.index_select, ref=_index_select_ref,
           samples=_index_select_samples, torch_ref=_torch_index_select, exact=True,
           adjoint=_adjoint_index_select, random_case=_index_select_random),
    OpInfo("index_add", "index", backend_call=lambda B, f: B.index_add(f(X), P5, 5),
           kind="sampled", call=rtx.index_add, ref=_segment_sum_ref, samples=_add_samples,
           torch_ref=_torch_index_add, adjoint=_adjoint_add, random_case=_add_random),
    # Tensor.index_add(dim, index, source, *, alpha=1) (and index_add_): PyTorch's
    OpInfo("index_add_into", "index", "sampled",
           lambda x, dim, index, source, alpha=1: x.index_add(dim, index, source, alpha=alpha),
           _index_add_into_ref, samples=_index_add_into_samples,
           errors=(_E("dtype", lambda t: t.index_add(0, [0], t[:1].double()
                                                     if t.dtype == np.float32 else t[:1].float()),
                      TypeError, "same dtype"),
                   _E("shape", lambda t: t.index_add(0, [0], t[:1, :2]), ValueError, "outside dim"),
                   _E("len", lambda t: t.index_add(1, [0, 1], t), ValueError, "len"),
                   _E("bounds", lambda t: t.index_add(0, [2], t[:1]), IndexError, r"\[0, 2\)"),
                   _E("dim", lambda t: t.index_add(2, [0], t), IndexError),
                   _E("grad", lambda t: t.detach().requires_grad_().index_add_(0, [0], t[:1]),
                      RuntimeError, "requires grad"))),
    # Backend.index_accumulate: dst[indices] += src in dst's buffer (SparseAdam's rows)
    OpInfo("index_accumulate", "index", differentiable=False,
           backend_call=lambda B, f: B.index_accumulate(f(X4.copy()), P4, f(X))),
    # nn.functional.embedding(input, weight, padding_idx, sparse): the dense path here
    # (the row-sparse gradient: tests/nn/test_embedding.py)
    OpInfo("embedding", "index", "sampled",
           lambda weight, indices, padding_idx=None: rtx.nn.functional.embedding(
               indices, weight, padding_idx),
           _embedding_ref, samples=_embedding_samples,
           errors=(_E("bounds", lambda t: rtx.nn.functional.embedding([0, 2], t), IndexError),
                   _E("float", lambda t: rtx.nn.functional.embedding(np.array([0.5]), t),
                      TypeError),
                   _E("1-d", lambda t: rtx.nn.functional.embedding([0], t[0]), ValueError,
                      "2-D"),
                   _E("padding", lambda t: rtx.nn.functional.embedding([0], t, 2), ValueError,
                      "padding_idx"))),
    # ----------------------------------------------------------------- optim
    # Backend.adam_rows: SparseAdam's fused step over distinct rows (unsorted here), the
    # parameter and both moments in place where the backend can
    OpInfo("adam_rows", "optim", differentiable=False,
           backend_call=lambda B, f: B.concat(list(B.adam_rows(
               f(X4.copy()), f(X4 * 0.5), f(X4 * X4 + 0.1), rtx.IndexPlan(np.array([3, 0, 2]), 4),
               f(X), 0.8, 0.95, 1e-6, 0.01)), 0)),
    # Backend.adam_step: Adam's dense step (L2 decay, amsgrad here), all state in place
    OpInfo("adam_step", "optim", differentiable=False,
           backend_call=lambda B, f: B.concat(list(B.adam_step(
               f(X4.copy()), f(X4 * 0.5), f(X4 * X4 + 0.1), f(X4 * X4 + 0.2), f(X4[::-1] + 0.3),
               0.8, 0.95, 1e-6, 0.05, 3, 0.1, False)), 0)),
    # ---------------------------------------------------------------- segment
    # segment_sum is index_add's rule under a second name (its own entry: its face)
    OpInfo("segment_sum", "segment", kind="sampled", call=rtx.segment_sum,
           ref=_segment_sum_ref, samples=_add_samples, torch_ref=_pyg_scatter("sum"),
           adjoint=_adjoint_add, random_case=_segment_random,
           errors=_segment_errors(rtx.segment_sum, floats_only=False)),
    OpInfo("segment_softmax", "segment",
           backend_call=lambda B, f: B.segment_softmax(f(X), P4, 4),
           kind="sampled", call=rtx.segment_softmax, ref=_segment_softmax_ref,
           samples=_segment_samples(False, False), torch_ref=_pyg_softmax,
           random_case=_segment_random,
           errors=_segment_errors(rtx.segment_softmax, floats_only=True) + (
               _E("rank", lambda t: rtx.segment_softmax(t.reshape(2, 3, 1), np.array([0, 1]), 2),
                  ValueError, r"\[E\] or \[E, H\]"),)),
    OpInfo("segment_softmax_backward", "segment", differentiable=False,
           backend_call=lambda B, f: B.segment_softmax_backward(
               B.segment_softmax(f(X), P4, 4), f(X - 1), P4, 4)),
    OpInfo("segment_mean", "segment", backend_call=lambda B, f: B.segment_mean(f(X), P4, 4),
           kind="sampled", call=rtx.segment_mean, ref=_segment_mean_ref,
           samples=_segment_samples(False, True), torch_ref=_pyg_scatter("mean"),
           random_case=_segment_random,
           errors=_segment_errors(rtx.segment_mean, floats_only=True)),
    OpInfo("segment_mean_backward", "segment", differentiable=False,
           backend_call=lambda B, f: B.segment_mean_backward(f(X4), P4, 4)),
    OpInfo("segment_max", "segment",
           backend_call=lambda B, f: B.segment_max(f(X), P4, 4)[0],
           kind="sampled", call=rtx.segment_max, ref=_segment_max_ref,
           samples=_segment_samples(True, True), torch_ref=_pyg_scatter("max"), exact=True,
           random_case=_segment_random,
           errors=_segment_errors(rtx.segment_max, floats_only=True)),
    OpInfo("segment_max_backward", "segment", differentiable=False,
           backend_call=lambda B, f: B.segment_max_backward(
               f(X4), B.segment_max(f(X), P4, 4)[1], P4, 3)),
    OpInfo("segment_min", "segment",
           backend_call=lambda B, f: B.segment_min(f(X), P4, 4)[0],
           kind="sampled", call=rtx.segment_min, ref=_segment_min_ref,
           samples=_segment_min_samples, torch_ref=_pyg_scatter("min"), exact=True,
           random_case=_segment_random,
           errors=(_E("int", lambda t: rtx.segment_min(t.long(), [0, 1], 2), TypeError, "float"),
                   _E("len", lambda t: rtx.segment_min(t, [0], 2), ValueError, "len"),
                   _E("bounds", lambda t: rtx.segment_min(t, [0, 5], 2), IndexError,
                      r"indices\[1\] = 5"),
                   _E("rows", lambda t: rtx.segment_min(t, [0, 1], -1), ValueError, ">= 0"),
                   _E("0-d", lambda t: rtx.segment_min(t.sum(), [0], 1), ValueError,
                      "at least 1 dimension"))),
    OpInfo("segment_min_backward", "segment", differentiable=False,
           backend_call=lambda B, f: B.segment_min_backward(
               f(X4), B.segment_min(f(X), P4, 4)[1], P4, 3)),
    # ---------------------------------------------------------------- message
    OpInfo("message_passing", "message",
           backend_call=lambda B, f: B.message_passing(f(X), EIP, 2, f(W)),
           kind="sampled", call=rtx.message_passing, ref=_message_ref,
           samples=_message_samples, torch_ref=_torch_message, adjoint=_adjoint_message,
           random_case=_message_random),
    OpInfo("message_passing_backward", "message", differentiable=False,
           backend_call=_mp_backward),
    # ------------------------------------------------------------------ gatv2
    # (more values, gradchecks, bad inputs: tests/nn/test_conv_gatv2.py)
    OpInfo("gatv2_scores", "gatv2",
           backend_call=lambda B, f: B.gatv2_scores(f(GL), f(GR), f(GA), EIP, 0.2, f(GE)),
           kind="sampled", call=rtx.gatv2_scores, ref=_gatv2_ref, samples=_gatv2_samples,
           errors=(_E("ndim", lambda t: rtx.gatv2_scores(t, t, t, [[0], [0]], 0.2),
                      ValueError, r"xl must be \[N_src, H, C\]"),
                   _E("int", lambda t: rtx.gatv2_scores(t.long(), t, t, [[0], [0]], 0.2),
                      TypeError, "float"),
                   _E("bounds", lambda t: rtx.gatv2_scores(
                       t.reshape(2, 3, 1), t.reshape(2, 3, 1), t[0].reshape(3, 1), [[0], [2]],
                       0.2), IndexError))),
    OpInfo("gatv2_scores_backward", "gatv2", differentiable=False,
           backend_call=_gatv2_backward),
    OpInfo("gat_scores", "gatv2",
           backend_call=lambda B, f: B.gat_scores(f(_GS_S), f(_GS_D), P3, rtx.IndexPlan(
               np.array([1, 0, 1]), 2), 0.2),
           kind="sampled", call=rtx.gat_scores, ref=_gat_scores_ref,
           samples=_gat_scores_samples,
           errors=(_E("ndim", lambda t: rtx.gat_scores(t.reshape(-1), t, [0], [0], 0.2),
                      ValueError, r"\[N_src, H\]"),
                   _E("int", lambda t: rtx.gat_scores(t.long(), t, [0], [0], 0.2),
                      TypeError, "float"),
                   _E("len", lambda t: rtx.gat_scores(t.reshape(-1, 1), t.reshape(-1, 1),
                                                      [0, 1], [0], 0.2),
                      ValueError, "one length"),
                   _E("bounds", lambda t: rtx.gat_scores(t.reshape(-1, 1), t.reshape(-1, 1),
                                                         [0], [99], 0.2), IndexError),
                   _E("slope", lambda t: rtx.gat_scores(t.reshape(-1, 1), t.reshape(-1, 1),
                                                        [0], [0], float("nan")),
                      ValueError, "finite"))),
    OpInfo("head_dot", "gatv2",
           backend_call=lambda B, f: B.head_dot(f(_HD_X), f(_HD_A)),
           kind="sampled", call=rtx.head_dot, ref=_head_dot_ref, samples=_head_dot_samples,
           errors=(_E("ndim", lambda t: rtx.head_dot(t, t[0]), ValueError,
                      r"input must be \[N, H, C\]"),
                   _E("att", lambda t: rtx.head_dot(t.reshape(2, 3, -1), t[0]), ValueError,
                      r"att must be"),
                   _E("dtype", lambda t: rtx.head_dot(t.reshape(2, 3, -1),
                                                      t.reshape(2, 3, -1)[0].float()
                                                      if t.dtype == rtx.float64 else
                                                      t.reshape(2, 3, -1)[0].double()),
                      TypeError, "dtype"),
                   _E("int", lambda t: rtx.head_dot(t.long().reshape(2, 3, -1),
                                                    t.long().reshape(2, 3, -1)[0]),
                      TypeError, "float"))),
    OpInfo("head_dot_backward", "gatv2", differentiable=False,
           backend_call=_head_dot_backward),
    # ---------------------------------------------------------------- grouped
    OpInfo("segment_matmul", "grouped",
           backend_call=lambda B, f: B.segment_matmul(f(_SM_X), P4, f(_SM_W)),
           kind="sampled", call=rtx.segment_matmul, ref=_segment_matmul_ref,
           samples=_segment_matmul_samples,
           errors=(_E("ndim", lambda t: rtx.segment_matmul(t[0], [0, 0, 0], t.reshape(1, 3, 2)),
                      ValueError, r"input must be \[N, K\]"),
                   _E("weight", lambda t: rtx.segment_matmul(t, [0, 0], t.reshape(1, 2, 3)),
                      ValueError, r"weight must be \[T, 3, M\]"),
                   _E("dtype", lambda t: rtx.segment_matmul(t, [0, 0], t.long().reshape(
                       2, 3, 1)), TypeError, "dtype"),
                   _E("bounds", lambda t: rtx.segment_matmul(t, [0, 2], t.reshape(2, 3, 1)),
                      IndexError),
                   _E("len", lambda t: rtx.segment_matmul(t, [0], t.reshape(2, 3, 1)),
                      ValueError, "len"))),
    OpInfo("segment_matmul_backward", "grouped", differentiable=False,
           backend_call=_sm_backward),
    OpInfo("segment_matmul_sum", "grouped",
           backend_call=lambda B, f: B.segment_matmul_sum(f(_SM_X), P4, f(_SM_W), P5, 5),
           kind="sampled", call=rtx.segment_matmul_sum, ref=_segment_matmul_sum_ref,
           samples=_segment_matmul_sum_samples,
           errors=(_E("ndim", lambda t: rtx.segment_matmul_sum(
                       t[0], [0, 0, 0], t.reshape(1, 3, 2), [0, 0, 0], 1),
                      ValueError, r"input must be \[N, K\]"),
                   _E("weight", lambda t: rtx.segment_matmul_sum(
                       t, [0, 0], t.reshape(1, 2, 3), [0, 0], 1),
                      ValueError, r"weight must be \[T, 3, M\]"),
                   _E("dtype", lambda t: rtx.segment_matmul_sum(
                       t, [0, 0], t.long().reshape(2, 3, 1), [0, 0], 1), TypeError, "dtype"),
                   _E("bounds", lambda t: rtx.segment_matmul_sum(
                       t, [0, 2], t.reshape(2, 3, 1), [0, 0], 1), IndexError),
                   _E("dst bounds", lambda t: rtx.segment_matmul_sum(
                       t, [0, 1], t.reshape(2, 3, 1), [0, 3], 3), IndexError),
                   _E("dst negative", lambda t: rtx.segment_matmul_sum(
                       t, [0, 1], t.reshape(2, 3, 1), [0, -1], 2), IndexError),
                   _E("len", lambda t: rtx.segment_matmul_sum(
                       t, [0, 1], t.reshape(2, 3, 1), [0], 2), ValueError, "len"),
                   _E("rows", lambda t: rtx.segment_matmul_sum(
                       t, [0, 1], t.reshape(2, 3, 1), [0, 0], -1), ValueError))),
    OpInfo("segment_matmul_sum_backward", "grouped", differentiable=False,
           backend_call=_sms_backward),
    # ----------------------------------------------------- creation, in-place
    OpInfo("empty", "creation", differentiable=False,
           backend_call=lambda B, f: B.zeros((2, 3), np.dtype(np.float64))),
    OpInfo("zeros", "creation", differentiable=False,
           backend_call=lambda B, f: B.zeros((2, 3), np.dtype(np.float64)),
           errors=(_E("negative", lambda t: rtx.zeros(-1, 2), ValueError),)),
    OpInfo("full", "creation", differentiable=False,
           backend_call=lambda B, f: B.full((2,), 3.5, np.dtype(np.float64))),
    OpInfo("inplace", "creation", differentiable=False,
           backend_call=lambda B, f: B.inplace("add", f(X), f(Y))),
    # ------------------------------------------------------------------- loss
    # the fused rules (values, gradchecks and bad inputs: tests/nn/test_nn_functional.py)
    OpInfo("cross_entropy", "loss"),
    OpInfo("nll_loss", "loss"),
    # the (loss, stats) pair side by side, and the backward rules
    OpInfo("cross_entropy_forward", "loss", differentiable=False,
           backend_call=lambda B, f: B.concat(
               [B.reshape(B.cross_entropy_forward(f(X), IDX)[0], (3, 1)),
                B.cross_entropy_forward(f(X), IDX)[1]], 1)),
    OpInfo("cross_entropy_backward", "loss", differentiable=False,
           backend_call=lambda B, f: B.cross_entropy_backward(
               f(X), B.cross_entropy_forward(f(X), IDX)[1], IDX,
               f(np.array([0.5, 0.0, 2.0])))),
    OpInfo("binary_cross_entropy_with_logits", "loss", kind="sampled",
           call=lambda x, y, w=None, pw=None, **kw:  # weight, pos_weight as the samples give them
           rtx.nn.functional.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw, **kw),
           ref=_bce_logits_ref,
           samples=_bce_logits_samples,
           errors=(_E("shape", lambda t: rtx.nn.functional.binary_cross_entropy_with_logits(
                       t, t[0]), ValueError, "Target size"),
                   _E("int", lambda t: rtx.nn.functional.binary_cross_entropy_with_logits(
                       t.long(), t), TypeError, "floating point"),
                   _E("weight", lambda t: rtx.nn.functional.binary_cross_entropy_with_logits(
                       t, t, weight=rtx.ones(4)), ValueError, "broadcast"),
                   _E("reduction", lambda t: rtx.nn.functional.binary_cross_entropy_with_logits(
                       t, t, reduction="avg"), ValueError, "reduction"))),
    OpInfo("bce_with_logits_forward", "loss", differentiable=False,
           backend_call=lambda B, f: B.concat(
               [B.bce_with_logits_forward(f(X - 1.5), f(X / 2.5), None),
                B.bce_with_logits_forward(f(X - 1.5), f(X / 2.5), f(X))], 0)),
    OpInfo("bce_with_logits_backward", "loss", differentiable=False,
           backend_call=lambda B, f: B.concat(
               [*B.bce_with_logits_backward(f(X - 1.5), f(X / 2.5), f(X), f(X - 1), True, True),
                B.bce_with_logits_backward(f(X - 1.5), f(X / 2.5), None, f(X - 1))[0]], 0)),
    OpInfo("nll_forward", "loss", differentiable=False,
           backend_call=lambda B, f: B.nll_forward(f(X), IDX)),
    OpInfo("nll_backward", "loss", differentiable=False,
           backend_call=lambda B, f: B.nll_backward(f(np.array([0.5, 0.0, 2.0])), IDX, (3, 4))),
    OpInfo("tensor", "creation", differentiable=False, errors=(
        _E("ragged", lambda t: rtx.tensor([[1, 2], [3]]), ValueError),
        _E("mixed", lambda t: rtx.tensor([1, "a"]), TypeError),
        _E("complex", lambda t: rtx.tensor(np.ones(3, np.complex64)), TypeError),
        _E("float16", lambda t: rtx.tensor(np.ones(3), dtype=np.float16), TypeError),
    )),
]

OP_DB: dict[str, OpInfo] = {op.name: op for op in OPS}
assert len(OP_DB) == len(OPS), "an op is declared twice"


def ops(kind: str | None = None, *, differentiable: bool | None = None,
        fuzz: bool | None = None) -> list[OpInfo]:
    """The entries of ``kind`` (all when None), optionally filtered."""
    return [op for op in OPS
            if (kind is None or op.kind == kind)
            and (differentiable is None or op.differentiable == differentiable)
            and (fuzz is None or op.fuzz == fuzz)]


def names(kind: str | None = None, **filters: Any) -> list[str]:
    return [op.name for op in ops(kind, **filters)]


def gradcheck_ops(kind: str) -> list[OpInfo]:
    return [op for op in ops(kind, differentiable=True) if op.gradcheck]


def error_inputs() -> Iterator[tuple[str, OpInfo, ErrorInput]]:
    """Every op's bad inputs, as (test id, op, case)."""
    for op in OPS:
        for e in op.errors:
            yield f"{op.name}-{e.id}", op, e


def backend_calls() -> dict[str, Callable[[Any, Callable[[Any], Any]], Any]]:
    """One call per Backend op, by name (the backend-parity table)."""
    return {op.name: op.backend_call for op in OPS if op.backend_call is not None}


def sample(shape: tuple[int, ...], dtype: Any, low: float, high: float,
           rng: np.random.Generator) -> np.ndarray:
    """Uniform values in [low, high) of ``dtype``: the value tests' sample inputs."""
    return rng.uniform(low, high, size=shape).astype(dtype)
