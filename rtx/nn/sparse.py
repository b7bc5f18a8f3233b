"""``Embedding``: a lookup table of learnable rows (PyTorch's ``nn.Embedding``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autograd.grad_mode import no_grad
from ..creation import Generator, empty
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Embedding"]


class Embedding(Module):
    """``weight[input]`` for int indices of any shape: ``[*input.shape, embedding_dim]``.

    Args:
        num_embeddings: rows of the table; embedding_dim: width of a row.
        padding_idx: a row (negative counts from the end) initialised to zero
            that never gets a gradient, so it stays what it is.
        sparse: ``weight.grad`` is row-sparse (only the rows in the batch:
            ``grad.is_sparse``, ``grad._indices()``, ``grad._values()``); only
            ``rtx.optim.SparseAdam`` takes such a gradient (the dense optimisers
            refuse it, as PyTorch's do).
        _weight: an initial ``[num_embeddings, embedding_dim]`` weight (PyTorch's
            keyword), used as given (no copy).

    ``weight`` is initialised from N(0, 1) (PyTorch's ``normal_``), drawn from
    rtx's default generator (``rtx.manual_seed``) or from ``generator``.
    """

    num_embeddings: int
    embedding_dim: int
    padding_idx: int | None
    sparse: bool
    weight: Parameter

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 sparse: bool = False, _weight: Tensor | None = None, _freeze: bool = False,
                 dtype: Any = None, generator: Generator | None = None) -> None:
        super().__init__()
        for name, v in (("num_embeddings", num_embeddings), ("embedding_dim", embedding_dim)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"Embedding: {name} must be a non-negative int, got {v!r}")
        if not isinstance(sparse, (bool, np.bool_)):
            raise TypeError(f"Embedding: sparse must be a bool, got {type(sparse).__name__}")
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        pad = F._padding_idx(padding_idx, self.num_embeddings, "Embedding")
        self.padding_idx = None if pad < 0 else pad
        self.sparse = bool(sparse)
        if _weight is None:
            self.weight = Parameter(empty(self.num_embeddings, self.embedding_dim, dtype=dtype),
                                    requires_grad=not _freeze)
            self.reset_parameters(generator)
        else:
            if not isinstance(_weight, Tensor):
                raise TypeError(f"Embedding: _weight must be an rtx.Tensor, got "
                                f"{type(_weight).__name__}")
            if _weight.shape != (self.num_embeddings, self.embedding_dim):
                raise ValueError(f"Embedding: _weight must have shape "
                                 f"[{self.num_embeddings}, {self.embedding_dim}], got "
                                 f"{_weight.shape}")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self, generator: Generator | None = None) -> None:
        init.normal_(self.weight, generator=generator)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self) -> None:
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input: Any) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx, self.sparse)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, sparse: bool = False) -> Embedding:
        """An ``Embedding`` over ``embeddings`` (2-D; used as given, no copy), frozen
        (``requires_grad=False``) unless ``freeze=False`` (PyTorch's)."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            raise ValueError("Embedding.from_pretrained: embeddings must be a 2-D rtx.Tensor")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx=padding_idx, sparse=sparse, _weight=embeddings,
                   _freeze=freeze)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.sparse:
            s += ", sparse=True"
        return s
