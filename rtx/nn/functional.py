"""``rtx.nn.functional``: activations, dropout and losses (PyTorch's semantics).

Graph ops (``segment_softmax``, ``message_passing``) are re-exported here from
their own module; see the marked place below.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..creation import Generator, _rng
from ..functional import _t
from ..functional import elu as _elu
from ..functional import leaky_relu as _leaky_relu
from ..functional import log_softmax as _log_softmax
from ..functional import relu as _relu
from ..functional import softmax as _softmax
from ..tensor import Tensor, _as_tensor

# --------------------------------------------------------------------------
# Graph ops are re-exported here (one import line, added by the lead):
#   from ..<graph ops module> import message_passing, segment_softmax
# --------------------------------------------------------------------------


def relu(input: Any) -> Tensor:
    """``max(x, 0)``; the gradient at 0 is 0."""
    return _relu(input)


def leaky_relu(input: Any, negative_slope: float = 0.01) -> Tensor:
    """``x`` where ``x > 0``, else ``negative_slope * x``."""
    return _leaky_relu(input, negative_slope)


def elu(input: Any, alpha: float = 1.0) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    return _elu(input, alpha)


def softmax(input: Any, dim: int = -1) -> Tensor:
    """Numerically stable softmax along ``dim``."""
    return _softmax(input, dim)


def log_softmax(input: Any, dim: int = -1) -> Tensor:
    """Numerically stable log-softmax along ``dim``."""
    return _log_softmax(input, dim)


def _check_p(p: Any) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating, np.integer)):
        raise TypeError(f"dropout probability has to be a number, got {type(p).__name__}")
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return float(p)


def dropout(input: Any, p: float = 0.5, training: bool = True,
            generator: Generator | None = None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)``
    (identity when ``training`` is False or ``p == 0``; all zeros when ``p == 1``).

    The mask is drawn (as uniforms ``u >= p``) from ``generator`` or rtx's
    default generator, so ``rtx.manual_seed`` makes it reproducible.
    """
    p = _check_p(p)
    x = _t(input)
    if not training or p == 0.0:
        return x
    if x.dtype.kind != "f":
        raise TypeError(f"dropout(): expected a floating point tensor, got {x.dtype}")
    u = _rng(None, generator).random(x.shape)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    mask = np.where(u >= p, scale, 0.0).astype(x.dtype)
    return x * _as_tensor(mask, x._ad)
