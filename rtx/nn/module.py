"""``Module``: the base of every layer (PyTorch-shaped).

A module registers the ``Parameter`` s, buffers and sub-modules assigned to its
attributes, in assignment order; ``named_parameters()`` / ``state_dict()`` walk
that tree with dotted names (``"layers.0.weight"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from .._device import unavailable
from .._dtypes import check_dtype, dtype_name
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor, parse_to
from .lazy import is_lazy, lazy_state_errors
from .parameter import Parameter


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` did not match."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        # PyTorch's wording when everything matched (torch.nn.modules.module._IncompatibleKeys)
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"IncompatibleKeys(missing_keys={self.missing_keys!r}, "
                f"unexpected_keys={self.unexpected_keys!r})")

    def __str__(self) -> str:
        return self.__repr__()


def _addindent(s: str, spaces: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _shape_str(shape: tuple[int, ...]) -> str:
    return "rtx.Size([" + ", ".join(str(s) for s in shape) + "])"


class Module:
    """Base class of all layers: subclass it, assign parameters / sub-modules in
    ``__init__`` (after ``super().__init__()``) and define ``forward``."""

    training: bool
    _parameters: dict[str, Parameter | None]
    _buffers: dict[str, Tensor | None]
    _non_persistent: set[str]
    _modules: dict[str, Module | None]

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", {})

    # ------------------------------------------------------------ forward
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------- registration
    def _check_init(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    @staticmethod
    def _check_name(name: Any, kind: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if "." in name or name == "":
            raise KeyError(f'{kind} name can\'t contain "." and can\'t be empty, got {name!r}')

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._check_init("parameters")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(rtx.nn.Parameter or None required)"
            )
        if param is not None and not param.is_leaf:
            raise ValueError(f"cannot assign a non-leaf tensor to parameter '{name}'")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor that is state but not learnable (e.g. running statistics);
        persistent buffers appear in ``state_dict()``."""
        self._check_init("buffers")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                "(rtx.Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        self._check_init("child modules")
        self._check_name(name, "module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            self._check_init("parameters")
            _remove_from(name, d)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(rtx.nn.Parameter or None expected)"
                )
            params[name] = None
        elif isinstance(value, Module):
            self._check_init("child modules")
            _remove_from(name, d)
            self._modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(rtx.nn.Module or None expected)"
                )
            d["_modules"][name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                    "(rtx.Tensor or None expected)"
                )
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        keys = set(super().__dir__())
        keys |= set(self._parameters) | set(self._buffers) | set(self._modules)
        return sorted(keys)

    # ------------------------------------------------------------ walking
    def named_modules(self, memo: set[int] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """This module and every sub-module, depth first, with dotted names."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, store: str, prefix: str, recurse: bool,
                       remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else iter([(prefix, self)])
        for mprefix, m in mods:
            for name, v in getattr(m, store).items():
                if v is None:
                    continue
                if remove_duplicate:
                    if id(v) in seen:
                        continue
                    seen.add(id(v))
                yield mprefix + ("." if mprefix else "") + name, v

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs; a shared parameter is listed once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        mod: Module = self
        if target == "":
            return mod
        for item in target.split("."):
            sub = mod._modules.get(item)
            if sub is None:
                raise AttributeError(f"{type(mod).__name__} has no submodule `{item}`")
            mod = sub
        return mod

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """``fn`` on every sub-module (children first) and then on this module."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -------------------------------------------------------------- modes
    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        object.__setattr__(self, "training", mode)
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients: ``.grad = None`` (default), or zero them in place."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                with no_grad():
                    p.grad.zero_()

    # -------------------------------------------------------------- dtype
    def to(self, *args: Any, **kwargs: Any) -> Module:
        """PyTorch's ``Module.to``: ``to(device)``, ``to(dtype)``, ``to(device, dtype)``,
        ``to(tensor)``, keywords ``device=`` / ``dtype=`` / ``non_blocking=``.

        The device is always the CPU (``"cpu"``, ``"cpu:0"``, ``rtx.device("cpu")``;
        any other is a RuntimeError: rtx runs on CPUs only).  A dtype (a float
        dtype) casts every floating point parameter and buffer, in place: the
        Parameter objects stay the same objects (create the optimiser after this,
        as in PyTorch, or re-create it: its state is not converted)."""
        dtype, _ = parse_to("Module.to", args, kwargs)
        if dtype is None:
            return self
        dt = check_dtype(dtype)
        if dt.kind != "f":
            raise TypeError(
                f"Module.to() only accepts floating point dtypes, got {dtype_name(dt)}"
            )
        for m in self.modules():
            for p in m._parameters.values():
                if p is not None and p.dtype != dt:
                    B = p._ad.inner
                    # rebinding the buffer keeps the object (and its registration) alive
                    p._value = B.cast(p._value, dt)
                    p._vc = None  # a new buffer, aliased by nothing: a fresh counter
                    if p.grad is not None:
                        p.grad = p.grad.to(dt)
            for name, b in m._buffers.items():
                if b is not None and b.dtype.kind == "f" and b.dtype != dt:
                    m._buffers[name] = b.detach().to(dt)
        return self

    def cpu(self) -> Module:
        """``self``: rtx modules live on the CPU."""
        return self

    def cuda(self, device: Any = None) -> Module:
        """Always a RuntimeError: rtx runs on CPUs only."""
        raise unavailable("cuda" if device is None else f"cuda:{device}")

    def float(self) -> Module:
        return self.to(np.float32)

    def double(self) -> Module:
        return self.to(np.float64)

    # -------------------------------------------------------- state dicts
    def state_dict(self, destination: dict[str, np.ndarray] | None = None,
                   prefix: str = "") -> dict[str, np.ndarray]:
        """Every parameter and persistent buffer as a numpy array (a copy), keyed
        by dotted name, in registration order."""
        out: dict[str, np.ndarray] = {} if destination is None else destination
        for mprefix, m in self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False):
            dot = mprefix + ("." if mprefix else "")
            for name, p in m._parameters.items():
                if p is not None:
                    if is_lazy(p):  # lazy sizes (rtx/nn/lazy.py)
                        raise RuntimeError(f"state_dict(): {dot + name} is an uninitialized "
                                           "(lazy) parameter; run one forward pass first")
                    out[dot + name] = np.array(p.numpy(), copy=True)
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent:
                    out[dot + name] = np.array(b.numpy(), copy=True)
        return out

    def _state_targets(self) -> dict[str, tuple[Module, str, Tensor]]:
        targets: dict[str, tuple[Module, str, Tensor]] = {}
        for mprefix, m in self.named_modules(remove_duplicate=False):
            dot = mprefix + ("." if mprefix else "")
            for name, p in m._parameters.items():
                if p is not None:
                    targets[dot + name] = (m, name, p)
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent:
                    targets[dot + name] = (m, name, b)
        return targets

    def load_state_dict(self, state_dict: Mapping[str, Any],
                        strict: bool = True) -> IncompatibleKeys:
        """Copy values from ``state_dict`` (numpy arrays or tensors) into this
        module's parameters and buffers, in place (cast to their dtypes).

        Every key is checked before anything is written: a shape mismatch is
        always an error; missing / unexpected keys are errors when ``strict``
        (otherwise they are returned).  Raises ``RuntimeError`` listing all
        problems, in PyTorch's wording.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"expected a mapping for state_dict, got {type(state_dict).__name__}")
        targets = self._state_targets()
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        errors: list[str] = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.append("Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")
        values: list[tuple[Tensor, np.ndarray]] = []
        lazy_errors, lazy_keys = lazy_state_errors(targets, state_dict)  # rtx/nn/lazy.py
        errors.extend(lazy_errors)
        for key, (_, _, t) in targets.items():
            if key not in state_dict:
                continue
            v = state_dict[key]
            try:
                arr = np.asarray(v.numpy() if isinstance(v, Tensor) else v)
            except Exception as exc:  # noqa: BLE001 - reported below, nothing written yet
                errors.append(f"While copying the parameter named \"{key}\": {exc}.")
                continue
            if arr.dtype.kind not in "biuf":
                errors.append(
                    f'While copying the parameter named "{key}", expected a numeric array, '
                    f"got dtype {arr.dtype}."
                )
                continue
            if key not in lazy_keys and tuple(arr.shape) != t.shape:
                errors.append(
                    f"size mismatch for {key}: copying a param with shape "
                    f"{_shape_str(tuple(arr.shape))} from checkpoint, the shape in current "
                    f"model is {_shape_str(t.shape)}."
                )
                continue
            values.append((t, arr))
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        with no_grad():
            for t, arr in values:
                if is_lazy(t):  # sized by the checkpoint, as PyG's lazy Linear
                    t.materialize(arr.shape)  # type: ignore[attr-defined]
                t.copy_(np.ascontiguousarray(arr).astype(t.dtype, copy=False))
        return IncompatibleKeys(missing, unexpected)

    # --------------------------------------------------------------- repr
    def extra_repr(self) -> str:
        """The text inside this module's parentheses (override in layers)."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for key, m in self._modules.items():
            lines.append(f"({key}): " + _addindent(repr(m), 2))
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _remove_from(name: str, d: dict[str, Any]) -> None:
    """Forget ``name`` wherever it is registered (before re-registering it)."""
    d.pop(name, None)
    for store in ("_parameters", "_buffers", "_modules"):
        s = d.get(store)
        if s is not None and name in s:
            del s[name]
    nonp = d.get("_non_persistent")
    if nonp is not None:
        nonp.discard(name)


__all__ = ["IncompatibleKeys", "Module"]
