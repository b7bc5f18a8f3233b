"""Grad mode: ``no_grad`` / ``enable_grad`` (thread-local, as in PyTorch)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_state = threading.local()


def is_grad_enabled() -> bool:
    return getattr(_state, "enabled", True)


def set_grad_enabled(mode: bool) -> None:
    _state.enabled = bool(mode)


class _GradMode:
    mode = True

    def __enter__(self) -> None:
        self._prev = is_grad_enabled()
        set_grad_enabled(self.mode)

    def __exit__(self, *exc: Any) -> None:
        set_grad_enabled(self._prev)

    def __call__(self, fn: F) -> F:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            prev = is_grad_enabled()
            set_grad_enabled(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                set_grad_enabled(prev)

        return wrapper  # type: ignore[return-value]


class no_grad(_GradMode):  # noqa: N801 - PyTorch's name
    """Context manager / decorator: ops record nothing on the tape."""

    mode = False


class enable_grad(_GradMode):  # noqa: N801 - PyTorch's name
    """Context manager / decorator: re-enable recording inside ``no_grad``."""

    mode = True
