"""Grad mode: ``no_grad`` / ``enable_grad`` / ``set_grad_enabled`` (thread-local,
as in PyTorch).  Each works as a context manager and as a decorator
(``@rtx.no_grad()`` or bare ``@rtx.no_grad``)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

class _State(threading.local):
    """This thread's grad mode.  The class attribute is every thread's default:
    reading it never fails (a ``getattr`` default would build and clear an
    ``AttributeError`` on every op of a thread that never set the mode)."""

    enabled = True


_state = _State()


def is_grad_enabled() -> bool:
    """Whether ops on tensors that require grad are recorded (this thread)."""
    return _state.enabled


def _set(mode: bool) -> None:
    _state.enabled = bool(mode)


class _GradMode:
    """Base: sets grad mode to ``self.mode`` inside the block / decorated call."""

    mode = True

    def __new__(cls, *args: Any) -> Any:
        if cls is not set_grad_enabled and len(args) == 1 and callable(args[0]):
            # bare decorator: @no_grad
            return object.__new__(cls)(args[0])
        return object.__new__(cls)

    def __init__(self, *args: Any) -> None:
        self._prev: list[bool] = []

    def __enter__(self) -> None:
        self._prev.append(is_grad_enabled())
        _set(self.mode)

    def __exit__(self, *exc: Any) -> None:
        _set(self._prev.pop())

    def __call__(self, fn: F) -> F:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            prev = is_grad_enabled()
            _set(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                _set(prev)

        return wrapper  # type: ignore[return-value]

    def clone(self) -> _GradMode:
        return type(self)()


class no_grad(_GradMode):  # noqa: N801 - PyTorch's name
    """Context manager / decorator: ops record nothing on the tape."""

    mode = False


class enable_grad(_GradMode):  # noqa: N801 - PyTorch's name
    """Context manager / decorator: re-enable recording inside ``no_grad``."""

    mode = True


class set_grad_enabled(_GradMode):  # noqa: N801 - PyTorch's name
    """``set_grad_enabled(mode)``: sets grad mode now (a plain call), or for a
    ``with`` block / decorated function, restoring the previous mode after."""

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self.mode = bool(mode)
        self._entry = is_grad_enabled()
        _set(self.mode)

    def __enter__(self) -> None:
        self._prev.append(self._entry)
        _set(self.mode)

    def __call__(self, fn: F) -> F:
        _set(self._entry)  # as a decorator it applies per call, not now
        return super().__call__(fn)

    def clone(self) -> set_grad_enabled:
        return set_grad_enabled(self.mode)
