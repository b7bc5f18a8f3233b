"""rtx.autograd: the tape (``Autodiff``), grad mode, differentiable ops, custom
``Function`` s, ``backward`` / ``grad``, and gradient checking."""

from .._autodiff.autodiff import Autodiff
from .._autodiff.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .._autodiff.graph import Node, OutputEdge
from .function import Function, FunctionCtx
from .gradcheck import GradcheckError, check_adjoint, gradcheck
from .graph import backward, grad

__all__ = [
    "Autodiff",
    "Function",
    "FunctionCtx",
    "GradcheckError",
    "Node",
    "OutputEdge",
    "backward",
    "check_adjoint",
    "enable_grad",
    "grad",
    "gradcheck",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
]
