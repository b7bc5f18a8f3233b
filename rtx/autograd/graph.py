"""``backward`` and ``grad`` (``torch.autograd.backward`` / ``grad``): the engine's
(``rtx/_autodiff/backward.py``), re-exported here with the post-backward hook
registry (``register_post_backward_hook``)."""

from __future__ import annotations

from .._autodiff.backward import backward, grad
from .._autodiff.graph import register_post_backward_hook

__all__ = ["backward", "grad", "register_post_backward_hook"]
