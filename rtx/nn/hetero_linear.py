"""``HeteroLinear`` / ``HeteroDictLinear``: one linear map per type (PyG's), all
types in one grouped matmul (``rtx.segment_matmul``).

Same arguments, defaults, parameter names and shapes as
``torch_geometric.nn.HeteroLinear`` (``weight`` ``[num_types, in, out]``,
``bias`` ``[num_types, out]``) and ``HeteroDictLinear`` (``lins.<type>.weight``
``[out, in]``, ``lins.<type>.bias``), so a PyG ``state_dict`` converted to
numpy loads as is; ``-1`` input sizes are lazy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..autograd.grad_mode import no_grad
from ..backend.index_plan import IndexPlan, as_plan
from ..creation import empty
from ..functional import concat, index_select, segment_matmul, stack
from ..tensor import Tensor
from . import init
from .containers import ModuleDict
from .lazy import UninitializedParameter, check_lazy_channels, is_lazy
from .linear import Linear
from .module import Module
from .parameter import Parameter

__all__ = ["HeteroDictLinear", "HeteroLinear"]

_WEIGHT_INITS = (None, "kaiming_uniform", "glorot", "uniform")
_BIAS_INITS = (None, "zeros")


def _pos_int(v: Any, name: str, layer: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{layer}: {name} must be an int >= 1, got {v!r}")
    return int(v)


class HeteroLinear(Module):
    r"""``x'_i = x_i @ weight[type_i] + bias[type_i]``: PyG's ``HeteroLinear``.

    Args:
        in_channels: input size (``-1``: lazy, sized by the first input).
        out_channels: output size.  ``num_types``: the number of types.
        is_sorted: PyG's hint that ``type_vec`` is sorted; accepted and not
            needed (the grouped matmul takes rows in any order, so a wrong hint
            cannot give wrong results).
        bias: learnable ``bias`` ``[num_types, out_channels]``.
        weight_initializer / bias_initializer: PyG's ``Linear`` options
            (``None`` = kaiming-uniform with ``a = sqrt(5)``, i.e. U(±1/sqrt(in));
            ``"glorot"``, ``"uniform"``; bias ``None`` = U(±1/sqrt(in)) or
            ``"zeros"``).

    ``forward(x, type_vec)``: ``x`` ``[N, in]``, ``type_vec`` ``N`` ints in
    ``[0, num_types)`` (numpy, rtx tensor, or an ``rtx.IndexPlan`` over
    ``num_types``: checked once and its type grouping reused, so pass a plan
    when the types repeat across calls).  One pass of ``rtx.segment_matmul``
    over all types (PyG loops over the types or calls pyg_lib).
    """

    def __init__(self, in_channels: int, out_channels: int, num_types: int,
                 is_sorted: bool = False, bias: bool = True,
                 weight_initializer: str | None = None,
                 bias_initializer: str | None = None) -> None:
        super().__init__()
        layer = type(self).__name__
        self.in_channels = check_lazy_channels(in_channels, "in_channels", layer)
        self.out_channels = _pos_int(out_channels, "out_channels", layer)
        self.num_types = _pos_int(num_types, "num_types", layer)
        self.is_sorted = bool(is_sorted)
        if weight_initializer not in _WEIGHT_INITS:
            raise ValueError(f"{layer}: weight_initializer must be one of {_WEIGHT_INITS}, got "
                             f"{weight_initializer!r}")
        if bias_initializer not in _BIAS_INITS:
            raise ValueError(f"{layer}: bias_initializer must be one of {_BIAS_INITS}, got "
                             f"{bias_initializer!r}")
        self.weight_initializer = weight_initializer
        self.bias_initializer = bias_initializer
        T, M = self.num_types, self.out_channels
        if self.in_channels < 0:
            self.weight: Parameter = UninitializedParameter((T, -1, M))
        else:
            self.weight = Parameter(empty(T, self.in_channels, M))
        if bias:
            self.bias: Parameter | None = Parameter(empty(T, M))
            if self.in_channels < 0:
                init.zeros_(self.bias)  # drawn when the width is known
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's ``reset_weight_`` / ``reset_bias_`` (nothing while lazy)."""
        n = -1 if is_lazy(self.weight) else self.weight.shape[1]
        if n < 0:
            return
        w = self.weight
        if self.weight_initializer == "glorot":
            b = math.sqrt(6.0 / (w.shape[-2] + w.shape[-1]))
        else:  # None / kaiming_uniform (a = sqrt(5)) and "uniform": U(+-1/sqrt(in))
            b = 1.0 / math.sqrt(n) if n > 0 else 0.0
        init.uniform_(w, -b, b)
        if self.bias is not None:
            if self.bias_initializer == "zeros":
                init.zeros_(self.bias)
            else:
                bound = 1.0 / math.sqrt(n) if n > 0 else 0.0
                init.uniform_(self.bias, -bound, bound)

    def materialize(self, in_channels: int) -> None:
        """Size a lazy weight ``[num_types, in_channels, out]`` and initialise."""
        w = self._parameters["weight"]
        if not is_lazy(w):
            return
        assert isinstance(w, UninitializedParameter)
        with no_grad():
            w.materialize((self.num_types, int(in_channels), self.out_channels))
            self.in_channels = int(in_channels)
            self.reset_parameters()

    def forward(self, x: Tensor, type_vec: Any) -> Tensor:
        layer = type(self).__name__
        if not isinstance(x, Tensor):
            raise TypeError(f"{layer}: x must be an rtx.Tensor, got {type(x).__name__}")
        if x.ndim != 2:
            raise ValueError(f"{layer}: x must be [N, in_channels], got shape {x.shape}")
        self.materialize(x.shape[1])
        if x.shape[1] != self.weight.shape[1]:
            raise ValueError(f"{layer}: x must be [N, {self.weight.shape[1]}], got shape "
                             f"{x.shape}")
        plan = as_plan(type_vec, self.num_types, layer, length=x.shape[0])
        out = segment_matmul(x, plan, self.weight)
        if self.bias is not None:
            out = out + index_select(self.bias, plan)
        return out

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
                f"num_types={self.num_types}, bias={self.bias is not None})")


class HeteroDictLinear(Module):
    r"""``x'_t = x_t @ lins[t].weight.T + lins[t].bias`` for every type ``t`` of a
    dict: PyG's ``HeteroDictLinear``.

    ``in_channels``: an int (``types`` then required) or ``{type: size}``
    (``-1`` lazy).  Parameters ``lins.<type>.weight`` ``[out, in]`` and
    ``lins.<type>.bias`` (PyG's ``Linear`` under a ``ModuleDict``).  When the
    types given to ``forward`` share one input width, their rows go through ONE
    ``rtx.segment_matmul`` (stacked weights, one type per block of rows, the
    type plan built once per set of row counts); different widths cannot share
    a matmul and take one ``Linear`` each.
    """

    def __init__(self, in_channels: int | Mapping[str, int], out_channels: int,
                 types: Sequence[str] | None = None, bias: bool = True,
                 weight_initializer: str | None = None,
                 bias_initializer: str | None = None) -> None:
        super().__init__()
        layer = type(self).__name__
        if isinstance(in_channels, Mapping):
            chans = {k: check_lazy_channels(v, f"in_channels[{k!r}]", layer)
                     for k, v in in_channels.items()}
            if types is not None and set(chans) != set(types):
                raise ValueError(f"{layer}: the provided 'types' do not match the keys in the "
                                 "'in_channels' dictionary")
        else:
            if types is None:
                raise ValueError(f"{layer}: provide a list of 'types' when 'in_channels' is an "
                                 "integer")
            ch = check_lazy_channels(in_channels, "in_channels", layer)
            chans = {k: ch for k in types}
        self.types = list(chans)
        self.in_channels = chans
        self.out_channels = _pos_int(out_channels, "out_channels", layer)
        self.lins = ModuleDict({k: Linear(c, self.out_channels, bias=bias,
                                          weight_initializer=weight_initializer,
                                          bias_initializer=bias_initializer)
                                for k, c in chans.items()})
        self._plans: dict[tuple[int, ...], IndexPlan] = {}

    def reset_parameters(self) -> None:
        for lin in self.lins.values():
            lin.reset_parameters()

    def _type_plan(self, sizes: tuple[int, ...]) -> IndexPlan:
        """The rows' types of the stacked input (type ``j`` for the ``j``-th block):
        our own sorted array, checked once per set of block sizes."""
        plan = self._plans.get(sizes)
        if plan is None:
            idx = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
            plan = IndexPlan(idx, len(sizes))
            if len(self._plans) >= 8:
                self._plans.clear()
            self._plans[sizes] = plan
        return plan

    def forward(self, x_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
        layer = type(self).__name__
        keys = [k for k in x_dict if k in self.lins._modules]
        for k in keys:
            x = x_dict[k]
            if not isinstance(x, Tensor) or x.ndim != 2:
                raise ValueError(f"{layer}: x_dict[{k!r}] must be an [N, F] rtx.Tensor")
            lin = self.lins[k]
            assert isinstance(lin, Linear)
            lin.materialize(x.shape[1])
            if x.shape[1] != lin.in_features:
                raise ValueError(f"{layer}: x_dict[{k!r}] must be [N, {lin.in_features}], got "
                                 f"shape {x.shape}")
        widths = {x_dict[k].shape[1] for k in keys}
        dtypes = {x_dict[k].dtype for k in keys}
        if len(keys) < 2 or len(widths) != 1 or len(dtypes) != 1:
            return {k: self.lins[k](x_dict[k]) for k in keys}
        lins = [self.lins[k] for k in keys]
        sizes = tuple(x_dict[k].shape[0] for k in keys)
        plan = self._type_plan(sizes)
        w = stack([lin.weight.T for lin in lins], 0)          # [T, in, out]
        out = segment_matmul(concat([x_dict[k] for k in keys], 0), plan, w)
        if all(lin.bias is not None for lin in lins):
            out = out + index_select(stack([lin.bias for lin in lins], 0), plan)
        res: dict[str, Tensor] = {}
        start = 0
        for k, n in zip(keys, sizes, strict=True):
            res[k] = out[start:start + n]
            start += n
        return res

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
                f"bias={all(lin.bias is not None for lin in self.lins.values())})")
