"""``Optimizer``: the base of the optimisers (PyTorch-shaped, with parameter groups).

Updates run in place on the parameters (their own in-place methods under
``rtx.no_grad()``), so a ``Parameter`` held by a module and by the optimiser
stays one object.  ``state_dict()`` / ``load_state_dict()`` follow PyTorch's
layout: ``{"state": {index: {name: array | number}}, "param_groups": [{hyper-
parameters..., "params": [index, ...]}]}``, parameters numbered in group order;
state tensors are saved as numpy arrays (copies).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from ..autograd.grad_mode import no_grad
from ..tensor import Tensor, as_tensor

ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]


class Optimizer:
    """Base class: ``params`` is an iterable of tensors or of dicts (parameter
    groups, each with ``"params"`` and optional per-group hyper-parameters)."""

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[int, dict[str, Any]] = {}  # keyed by id(parameter)
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got a Tensor")
        if isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered collections")
        groups: list[Any] = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    # ------------------------------------------------------------ groups
    def _check_hyper(self, group: dict[str, Any]) -> None:
        """Per-optimiser validation of a group's hyper-parameters (ValueError)."""
        if group["lr"] < 0:
            raise ValueError(f"Invalid learning rate: {group['lr']}")

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        ps = param_group.get("params")
        if isinstance(ps, Tensor):
            ps = [ps]
        elif isinstance(ps, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections")
        ps = list(ps) if ps is not None else []
        if not ps:
            raise ValueError("optimizer got an empty parameter list")
        for p in ps:
            if not isinstance(p, Tensor) or not p.requires_grad or not p.is_leaf:
                raise ValueError("optimizer parameters must be leaf tensors with requires_grad")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in ps}) != len(ps) or any(id(p) in seen for p in ps):
            raise ValueError("some parameters appear more than once (in a group or in "
                             "several groups)")
        group = {**self.defaults, **{k: v for k, v in param_group.items() if k != "params"}}
        group["params"] = ps
        self._check_hyper(group)
        self.param_groups.append(group)

    @property
    def params(self) -> list[Tensor]:
        """Every parameter, in group order."""
        return [p for g in self.param_groups for p in g["params"]]

    @property
    def lr(self) -> float:
        """The first group's learning rate (setting it sets every group's)."""
        return float(self.param_groups[0]["lr"])

    @lr.setter
    def lr(self, value: float) -> None:
        for g in self.param_groups:
            g["lr"] = value

    # -------------------------------------------------------------- step
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient: ``.grad = None`` (default) or zero it."""
        for p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                with no_grad():
                    p.grad.zero_()

    def step(self) -> None:
        raise NotImplementedError

    def _check_dense(self) -> None:
        """A dense optimiser refuses a row-sparse gradient (``Embedding(sparse=True)``)
        before it updates anything, as PyTorch's do."""
        for p in self.params:
            if p.grad is not None and is_sparse_grad(p.grad):
                raise RuntimeError(f"{type(self).__name__} does not support sparse gradients, "
                                   "please consider SparseAdam instead")

    def _grads(self, group: dict[str, Any]) -> Iterator[tuple[Tensor, Tensor]]:
        """Each parameter of ``group`` that has a gradient, with its L2-decayed
        gradient ``g + weight_decay * p`` (a new tensor when decayed)."""
        wd = group.get("weight_decay", 0.0)
        for p in group["params"]:
            if p.grad is None:
                continue
            g = p.grad
            if wd:
                g = g + p * wd
            yield p, g

    # -------------------------------------------------------- state dict
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {i: {...}}, "param_groups": [...]}`` (PyTorch's layout);
        tensors become numpy copies, so ``rtx.save`` can write it."""
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            ids = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": ids})
        state = {}
        for pid, st in self.state.items():
            if pid in index:
                state[index[pid]] = {
                    k: np.array(v.numpy(), copy=True) if isinstance(v, Tensor) else v
                    for k, v in st.items()
                }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore hyper-parameters and state saved by ``state_dict()`` (or read
        back by ``rtx.load``).  Everything is checked before anything changes:
        the groups must match in number and size, state arrays in shape."""
        if not isinstance(state_dict, Mapping) or set(state_dict) != {"state", "param_groups"}:
            raise ValueError("optimizer state_dict must be a mapping with keys 'state' and "
                             "'param_groups'")
        saved = list(state_dict["param_groups"])
        if len(saved) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        params = self.params
        for g, s in zip(self.param_groups, saved, strict=True):
            if len(g["params"]) != len(s["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
        saved_ids = [i for s in saved for i in s["params"]]
        order = {int(i): params[k] for k, i in enumerate(saved_ids)}
        new_state: dict[int, dict[str, Any]] = {}
        for i, st in dict(state_dict["state"]).items():
            p = order.get(int(i))
            if p is None:
                raise ValueError(f"loaded state dict has state for parameter {i}, which no "
                                 "parameter group lists")
            conv: dict[str, Any] = {}
            for k, v in dict(st).items():
                if isinstance(v, (np.ndarray, Tensor)):
                    a = np.asarray(v.numpy() if isinstance(v, Tensor) else v)
                    if a.shape != p.shape:
                        raise ValueError(
                            f"loaded state for parameter {i} ('{k}') has shape {a.shape}, "
                            f"the parameter has shape {p.shape}"
                        )
                    dt = p.dtype if a.dtype.kind == "f" else a.dtype
                    conv[k] = as_tensor(np.array(a, dtype=dt), p._ad)
                else:
                    conv[k] = v
            new_state[id(p)] = conv
        for g, s in zip(self.param_groups, saved, strict=True):
            g.update({k: v for k, v in s.items() if k != "params"})
        self.state = new_state

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(k for k in g if k != "params"):
                lines.append(f"    {k}: {g[k]}")
        return "\n".join(lines) + "\n)"


def is_sparse_grad(g: Any) -> bool:
    """Whether ``g`` (a ``.grad``) is row-sparse (``Embedding(sparse=True)``'s)."""
    return bool(getattr(g, "is_sparse", False))


__all__ = ["Optimizer", "is_sparse_grad"]
