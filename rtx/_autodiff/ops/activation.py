"""Op rules, activation family: relu, leaky_relu, elu, gelu, sigmoid, tanh, softmax,
log_softmax.

Each rule's forward and backward side by side (see ``base.py``)."""

from __future__ import annotations

import math

from .base import Op

_SQRT1_2 = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715


class Relu(Op):
    """``max(input, 0)``; the gradient at 0 is 0."""

    signature = "input: Tensor"
    faces = ("method", "function", "nn")
    fused = "relu"
    name = "relu"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        out = ctx.out = B.relu(a)
        return out

    @staticmethod
    def backward(ctx, B, g):
        # PyTorch's threshold rule: 0 where out <= 0, else g (a NaN input passes g)
        return (B.relu_backward(ctx.out, g),)


class LeakyRelu(Op):
    """``input`` where ``input > 0``, else ``negative_slope * input``."""

    signature = "input: FloatTensor, negative_slope: float = 0.01"
    faces = ("method", "function", "nn")
    fused = "leaky_relu"
    name = "leaky_relu"
    saves = (0,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, negative_slope):
        ctx.a, ctx.slope = a, negative_slope
        return B.leaky_relu(a, negative_slope)

    @staticmethod
    def backward(ctx, B, g):
        # g where a > 0, else g * slope
        return (B.leaky_relu_backward(ctx.a, g, ctx.slope),)


class Elu(Op):
    """``input`` where ``input > 0``, else ``alpha * (exp(input) - 1)``."""

    signature = "input: FloatTensor, alpha: float = 1.0"
    faces = ("method", "function", "nn")
    fused = "elu"
    name = "elu"
    saves = (0, -1)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, alpha):
        out = B.elu(a, alpha)
        ctx.a, ctx.out, ctx.alpha = a, out, alpha
        return out

    @staticmethod
    def backward(ctx, B, g):
        # x <= 0: alpha * exp(x) = out + alpha; else 1 (so a NaN input passes g, as in
        # PyTorch's elu_backward)
        return (B.elu_backward(ctx.a, ctx.out, g, ctx.alpha),)


class Gelu(Op):
    """The Gaussian error linear unit, as ``torch.nn.functional.gelu``:
    ``input * Phi(input)`` with ``Phi(x) = (1 + erf(x / sqrt(2))) / 2``
    (``approximate="none"``), or ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715
    * x**3)))`` (``approximate="tanh"``).  Written with elementwise ops (``erf``,
    ``tanh``, ...): Fusion fuses the chain."""

    signature = "input: FloatTensor, approximate: str = 'none'"
    faces = ("method", "function", "nn")
    name = "gelu"
    saves = (0,)
    fresh_grads = True

    @staticmethod
    def check(input, approximate):
        if approximate not in ("none", "tanh"):
            raise ValueError(f"gelu(): approximate must be 'none' or 'tanh', "
                             f"got {approximate!r}")

    @staticmethod
    def forward(ctx, B, a, approximate):
        ctx.a, ctx.approximate = a, approximate
        if approximate == "tanh":
            inner = B.mul(B.add(a, B.mul(B.mul(B.mul(a, a), a), _GELU_CUBIC)), _SQRT_2_OVER_PI)
            return B.mul(B.mul(a, 0.5), B.add(B.tanh(inner), 1.0))
        return B.mul(B.mul(a, 0.5), B.add(B.elementwise("erf", B.mul(a, _SQRT1_2)), 1.0))

    @staticmethod
    def backward(ctx, B, g):
        a = ctx.a
        if ctx.approximate == "tanh":
            # 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 c x^2), t = tanh(inner)
            x2 = B.mul(a, a)
            inner = B.mul(B.add(a, B.mul(B.mul(x2, a), _GELU_CUBIC)), _SQRT_2_OVER_PI)
            t = B.tanh(inner)
            left = B.mul(B.add(t, 1.0), 0.5)
            dinner = B.mul(B.add(B.mul(x2, 3.0 * _GELU_CUBIC), 1.0), _SQRT_2_OVER_PI)
            right = B.mul(B.mul(B.mul(a, 0.5), B.sub(1.0, B.mul(t, t))), dinner)
            return (B.mul(g, B.add(left, right)),)
        # Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
        cdf = B.mul(B.add(B.elementwise("erf", B.mul(a, _SQRT1_2)), 1.0), 0.5)
        pdf = B.mul(B.exp(B.mul(B.mul(a, a), -0.5)), _INV_SQRT_2PI)
        return (B.mul(g, B.add(cdf, B.mul(a, pdf))),)


class Sigmoid(Op):
    """``1 / (1 + exp(-input))``, computed stably."""

    signature = "input: FloatTensor"
    faces = ("method", "function", "nn")
    fused = "sigmoid"
    name = "sigmoid"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        out = ctx.out = B.sigmoid(a)
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.sigmoid_backward(ctx.out, g),)   # g * s * (1 - s), one pass


class Tanh(Op):
    """The hyperbolic tangent."""

    signature = "input: FloatTensor"
    faces = ("method", "function", "nn")
    fused = "tanh"
    name = "tanh"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        out = ctx.out = B.tanh(a)
        return out

    @staticmethod
    def backward(ctx, B, g):
        return (B.tanh_backward(ctx.out, g),)      # g * (1 - t * t), one pass


class Softmax(Op):
    """Numerically stable softmax along ``dim`` (a 0-d tensor: dim 0 or -1)."""

    signature = "input: FloatTensor, dim: Dim = -1"
    faces = ("method", "function", "nn")
    name = "softmax"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, dim):
        if not B.shape(a):  # a 0-d tensor: the softmax of its one element
            out = ctx.out = B.reshape(B.softmax(B.reshape(a, (1,)), 0), ())
            ctx.dim = None
            return out
        out = ctx.out = B.softmax(a, dim)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, B, g):
        # dx = y * (g - sum(g * y, dim, keepdim)), the row sum broadcast explicitly.
        y = ctx.out
        shape = tuple(B.shape(y))
        s = B.broadcast_to(B.sum(B.mul(g, y), ctx.dim, keepdim=True), shape)
        return (B.mul(y, B.sub(g, s)),)


class LogSoftmax(Op):
    """Numerically stable log-softmax along ``dim`` (a 0-d tensor: dim 0 or -1)."""

    signature = "input: FloatTensor, dim: Dim = -1"
    faces = ("method", "function", "nn")
    name = "log_softmax"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, dim):
        if not B.shape(a):
            out = ctx.out = B.reshape(B.log_softmax(B.reshape(a, (1,)), 0), ())
            ctx.dim = None
            return out
        out = ctx.out = B.log_softmax(a, dim)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, B, g):
        # dx = g - softmax(x) * sum(g, dim, keepdim), the row sum broadcast explicitly.
        shape = tuple(B.shape(ctx.out))
        s = B.broadcast_to(B.sum(g, ctx.dim, keepdim=True), shape)
        return (B.sub(g, B.mul(B.exp(ctx.out), s)),)
