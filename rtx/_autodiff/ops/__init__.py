"""Differentiable ops, one module per op family."""
