"""The autodiff engine: grad mode, the tape (``Node``, the backward walk), the
``Autodiff`` backend decorator and the op rules by family (``ops/``).

It sits between the backends and ``Tensor`` and never imports ``Tensor``: the
Tensor class registers itself (``autodiff.register_tensor_type``) when it is
defined.  The public face above Tensor is ``rtx.autograd``.
"""

from .autodiff import Autodiff, register_tensor_type
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .graph import Node, OutputEdge
from .ops import OPS, Op

__all__ = ["OPS", "Autodiff", "Node", "Op", "OutputEdge", "enable_grad", "is_grad_enabled",
           "no_grad", "register_tensor_type", "set_grad_enabled"]
