"""Op rules, activation family: relu, leaky_relu, elu, sigmoid, tanh, softmax, log_softmax.

Each rule's forward and backward side by side (see ``base.py``)."""

from __future__ import annotations

from .base import Op


class Relu(Op):
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
    name = "leaky_relu"
    saves = (0,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, negative_slope=0.01):
        ctx.a, ctx.slope = a, negative_slope
        return B.leaky_relu(a, negative_slope)

    @staticmethod
    def backward(ctx, B, g):
        # g where a > 0, else g * slope
        return (B.leaky_relu_backward(ctx.a, g, ctx.slope),)


class Elu(Op):
    name = "elu"
    saves = (0, -1)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, alpha=1.0):
        out = B.elu(a, alpha)
        ctx.a, ctx.out, ctx.alpha = a, out, alpha
        return out

    @staticmethod
    def backward(ctx, B, g):
        # x <= 0: alpha * exp(x) = out + alpha; else 1 (so a NaN input passes g, as in
        # PyTorch's elu_backward)
        return (B.elu_backward(ctx.a, ctx.out, g, ctx.alpha),)


class Sigmoid(Op):
    name = "sigmoid"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        out = ctx.out = B.sigmoid(a)
        return out

    @staticmethod
    def backward(ctx, B, g):
        s = ctx.out
        return (B.mul(B.mul(g, s), B.sub(1, s)),)


class Tanh(Op):
    name = "tanh"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a):
        out = ctx.out = B.tanh(a)
        return out

    @staticmethod
    def backward(ctx, B, g):
        t = ctx.out
        return (B.mul(g, B.sub(1, B.mul(t, t))),)


class Softmax(Op):
    name = "softmax"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, dim):
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
    name = "log_softmax"
    saves = (-1,)
    fresh_grads = True

    @staticmethod
    def forward(ctx, B, a, dim):
        out = ctx.out = B.log_softmax(a, dim)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, B, g):
        # dx = g - softmax(x) * sum(g, dim, keepdim), the row sum broadcast explicitly.
        shape = tuple(B.shape(ctx.out))
        s = B.broadcast_to(B.sum(g, ctx.dim, keepdim=True), shape)
        return (B.sub(g, B.mul(B.exp(ctx.out), s)),)
