"""rtx: a Cython/OpenMP tensor library with its own autograd, for training
graph neural networks fast on CPUs.

>>> import rtx
>>> x = rtx.randn(4, 3, requires_grad=True, seed=0)
>>> loss = (x @ x.T).softmax(-1).sum()
>>> loss.backward()
"""

from . import (
    _loader,  # noqa: F401 - loads the extension first (see _loader.py)
    autograd,
    fusion,
)
from ._backend_state import get_default_backend, set_default_backend, use_backend
from ._config import config, show_config
from ._kernels import (
    Storage,
    empty_cache,
    get_cache_limit,
    memory_stats,
    reset_peak_memory_stats,
    set_cache_limit,
)
from ._threads import get_num_threads, set_num_threads
from ._version import __version__
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .backend import Backend, CpuBackend, MinimalBackend
from .creation import (
    Generator,
    arange,
    empty,
    from_dlpack,
    from_numpy,
    full,
    manual_seed,
    ones,
    ones_like,
    rand,
    randn,
    tensor,
    zeros,
    zeros_like,
)
from .functional import (
    abs,
    add,
    argmax,
    cat,
    concat,
    div,
    elu,
    eq,
    exp,
    ge,
    gt,
    index_add,
    index_select,
    le,
    leaky_relu,
    log,
    log_softmax,
    lt,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mul,
    ne,
    neg,
    permute,
    pow,
    relu,
    reshape,
    sigmoid,
    sign,
    softmax,
    sqrt,
    stack,
    sub,
    sum,
    tanh,
    transpose,
    where,
)
from .graph_ops import (
    EdgeIndex,
    IndexPlan,
    gatv2_scores,
    message_passing,
    segment_max,
    segment_mean,
    segment_softmax,
    segment_sum,
)
from .serialization import load, save
from .tensor import Tensor, bool_, float32, float64, int32, int64

bool = bool_  # noqa: A001 - rtx.bool, like torch.bool

# layers and optimisers sit on top of the core (imported last: they use all of it);
# `import rtx` alone makes rtx.nn and rtx.optim usable
from . import data, datasets, loader, metrics, nn, optim, transforms, utils  # noqa: E402

__all__ = [
    "Backend", "CpuBackend", "Generator", "MinimalBackend", "Storage", "Tensor",
    "__version__", "abs", "add", "arange", "argmax", "autograd", "bool", "cat", "concat",
    "config", "div", "elu", "empty", "empty_cache", "enable_grad", "eq", "exp",
    "float32", "float64", "from_dlpack", "from_numpy", "full", "fusion", "ge",
    "get_cache_limit",
    "get_default_backend", "get_num_threads", "gt", "index_add", "index_select",
    "int32", "int64", "is_grad_enabled", "le", "leaky_relu", "log", "log_softmax", "lt",
    "manual_seed", "matmul", "max", "maximum", "mean", "memory_stats", "min", "minimum",
    "mul", "ne", "neg", "no_grad", "ones", "optim", "ones_like", "permute", "pow", "rand", "randn",
    "relu", "reset_peak_memory_stats", "reshape", "set_cache_limit", "set_default_backend",
    "set_grad_enabled", "set_num_threads", "show_config", "sigmoid", "sign", "softmax",
    "sqrt", "stack", "sub", "sum", "tanh", "tensor", "transpose", "use_backend", "where",
    "zeros", "zeros_like",
    "data", "datasets", "load", "loader", "metrics", "nn", "optim", "save", "transforms",
    "utils",
    # graph-learning primitives (rtx/graph_ops.py)
    "EdgeIndex", "IndexPlan", "gatv2_scores", "message_passing", "segment_max", "segment_mean",
    "segment_softmax", "segment_sum",
]
