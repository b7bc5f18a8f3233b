"""Differentiable ops: each forward sits next to its backward rule.

``forward(ctx, B, *inputs, **attrs)`` computes on the inner backend ``B``'s
primitives and may save state on ``ctx`` (primitives, shapes and attributes,
never ``Tensor`` s); ``backward(ctx, B, g)`` returns one gradient (or ``None``)
per positional input.  ``ctx.needs_input_grad[i]`` says whether input ``i``
needs a gradient, so a rule computes only what is used.  On the untracked path
``ctx`` is ``SINK``, which stores nothing: a forward must never read back what it
saved (write ``out = ctx.out = ...; return out``), and may skip computing what only
its backward reads (``if ctx is not SINK: ctx.sa = ...``).

**The declaration.**  A rule class is also the op's one declaration: besides
``forward`` / ``backward`` and what the engine needs (``saves``, ``view``,
``fresh_grads``, ``differentiable``) it names its public ``signature`` (PyTorch's
parameter names, with their defaults and input kinds, see ``KINDS``), its
``faces`` (``"method"``: ``Tensor.<name>``; ``"function"``: ``rtx.<name>``;
``"nn"``: ``rtx.nn.functional.<name>``; ``"inplace"``: ``Tensor.<name>_``;
operator names such as ``"__add__"`` / ``"__radd__"``), its ``fused`` opcode
(a key of ``rtx._kernels.FUSED_OPS``, for the fused evaluator and Fusion) and
an optional ``check(*params)`` run by every face before the rule (shape rules
beyond the kinds').  ``rtx/_faces.py`` generates the faces from it once, at
import; ``defaults`` (name -> default) is derived from the signature.

Gradients are reduced back to each input's shape (``unbroadcast``) explicitly,
never left to luck.  ``fresh_grads = True`` declares that a rule returns only
newly computed buffers (no alias of ``g`` or of each other); rules that pass
``g`` (or a view of it) through keep the default ``False`` and the engine
copies such a buffer before it becomes a leaf's ``.grad`` when ``g`` was
shared or went to several inputs; ``None`` (custom ``Function`` s) means
anything may be returned, even saved state, so the engine always copies.
"""

from __future__ import annotations

import ast
from typing import Any, ClassVar

import numpy as np

from ..sparse import coalesce_rows, row_plan  # noqa: F401 - for the rules (row-sparse grads)

OPS: dict[str, type[Op]] = {}

# The input kinds a signature's annotations name, and what a face makes of each
# (tests/autograd/test_faces.py exercises every one):
KINDS = {
    "Tensor": "a tensor (a function face converts array-likes on the default backend)",
    "FloatTensor": "a tensor; integer and bool tensors become float32 (PyTorch)",
    "Operand": "a tensor or a Python / numpy scalar (the operands of arithmetic)",
    "Data": "a float32 / float64 tensor of at least 1 dim (TypeError / ValueError)",
    "OptTensor": "None or a tensor (on the first tensor's backend)",
    "Rows": "a row count (rtx._dtypes.check_rows)",
    "Index": "-> IndexPlan: Index(rows=<Rows param or tensor>, length=<tensor>, dim=<Dim>)",
    "EdgeIndex": "-> EdgeIndex: EdgeIndex(src=<tensor: its rows>, dst=<Rows param or tensor>)",
    "Dim": "a dim of the first tensor (rtx._dtypes.check_dim)",
    "Dims": "None, a dim or distinct dims of the first tensor (rtx._dtypes.check_dims)",
}
# kinds passed to the rule positionally (inputs); the rest are keyword attributes
POSITIONAL_KINDS = frozenset(("Tensor", "FloatTensor", "Operand", "Data", "OptTensor", "Rows",
                              "Index", "EdgeIndex"))


class _Empty:
    def __repr__(self) -> str:
        return "<required>"


EMPTY: Any = _Empty()  # a parameter without a default


class Param:
    """One parameter of a declared signature."""

    __slots__ = ("name", "kind", "default", "kwonly", "args")

    def __init__(self, name: str, kind: str, default: Any, kwonly: bool,
                 args: dict[str, str]) -> None:
        self.name, self.kind, self.default, self.kwonly, self.args = (
            name, kind, default, kwonly, args)

    @property
    def positional(self) -> bool:
        """Whether the rule takes it positionally (an input) or as a keyword attribute."""
        return self.kind in POSITIONAL_KINDS

    def __repr__(self) -> str:
        return f"Param({self.name!r}, {self.kind!r}, default={self.default!r})"


def parse_signature(op: str, sig: str) -> tuple[Param, ...]:
    """``"input: FloatTensor, negative_slope: float = 0.01"`` -> Params (ValueError
    for a kind that is not one of ``KINDS`` or a plain type name)."""
    fn = ast.parse(f"def f({sig}): pass").body[0]
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    out = []
    plain = [(x, False) for x in a.args] + [(x, True) for x in a.kwonlyargs]
    defaults: list[Any] = [EMPTY] * (len(a.args) - len(a.defaults)) + [
        ast.literal_eval(d) for d in a.defaults]
    defaults += [EMPTY if d is None else ast.literal_eval(d) for d in a.kw_defaults]
    for (arg, kwonly), default in zip(plain, defaults, strict=True):
        ann = arg.annotation
        args: dict[str, str] = {}
        if isinstance(ann, ast.Call):
            args = {k.arg: ast.unparse(k.value) for k in ann.keywords if k.arg}
            ann = ann.func
        kind = ast.unparse(ann) if ann is not None else "Any"
        if kind not in KINDS and kind not in ("float", "int", "bool", "Any", "str"):
            raise ValueError(f"{op}: parameter {arg.arg!r} has an unknown kind {kind!r}")
        out.append(Param(arg.arg, kind, default, kwonly, args))
    return tuple(out)


class _Sink:
    """The untracked path's context: saving to it keeps nothing alive."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        pass


SINK = _Sink()

_SCALARS = (int, float, bool, np.generic)
_ndarray = np.ndarray


def _is_prim(x: Any) -> bool:
    # (an ndarray, the CPU backend's primitive, answered by one identity test: the
    # isinstance over four scalar types cost more than the shape it guards)
    return type(x) is _ndarray or not isinstance(x, _SCALARS)


def unbroadcast(B: Any, g: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``g`` over the dims along which an input of ``shape`` was broadcast."""
    gshape = tuple(B.shape(g))
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    dims = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and gshape[i + lead] != 1
    )
    if dims:
        g = B.sum(g, dims, keepdim=True)
    return B.reshape(g, shape)


class Op:
    """Base of every recorded op.  ``name`` is the registry key."""

    name = "op"
    differentiable = True
    fresh_grads = False
    view = False  # True: the result may alias the first input's buffer (a view)
    # Which buffers the forward saves on ctx (input positions; -1 = the output), for
    # the version-counter check; None = find out by inspecting ctx (slower).
    # tests/autograd/test_version_counter.py checks each declaration against the inspection.
    saves: tuple[int, ...] | None = None
    # ---- the declaration (see the module docstring); faces: rtx/_faces.py
    signature: ClassVar[str | None] = None
    faces: ClassVar[tuple[str, ...]] = ()
    fused: ClassVar[str | None] = None
    params: ClassVar[tuple[Param, ...]] = ()
    defaults: ClassVar[dict[str, Any]] = {}
    check: ClassVar[Any] = None

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.__dict__.get("name"):
            OPS[cls.name] = cls
        if "signature" in cls.__dict__ and cls.signature is not None:
            cls.params = parse_signature(cls.name, cls.signature)
            cls.defaults = {p.name: p.default for p in cls.params if p.default is not EMPTY}

    @staticmethod
    def forward(ctx: Any, B: Any, *args: Any, **attrs: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Any, B: Any, g: Any) -> tuple[Any, ...]:
        raise NotImplementedError
