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
    cuda,  # rtx.cuda.is_available() -> False (issue 20)
    fusion,
)
from ._backend_state import get_default_backend, set_default_backend, use_backend
from ._config import config, show_config
from ._faces import *  # noqa: F403 - the declared ops' functions (rtx/_faces.py)
from ._faces import __all__ as _face_names  # noqa: I001 - their names, for __all__
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
from .backend.index_plan import EdgeIndex, IndexPlan
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
    argmax,
    cat,
    concat,
    matmul,
    max,
    min,
    permute,
    reshape,
    stack,
    transpose,
    where,
)
from .serialization import load, save
from .tensor import Tensor, bool_, float32, float64, int32, int64

bool = bool_  # noqa: A001 - rtx.bool, like torch.bool

# layers and optimisers sit on top of the core (imported last: they use all of it);
# `import rtx` alone makes rtx.nn and rtx.optim usable
from . import data, datasets, loader, metrics, nn, optim, transforms, utils  # noqa: E402

# PyTorch's device habits (issue 20): rtx.device("cpu"), rtx.cuda.is_available() -> False
from ._device import device  # noqa: E402
from .creation import (  # noqa: E402
    as_tensor,
    empty_like,
    full_like,
    rand_like,
    randint,
    randn_like,
)

__all__ = [
    "Backend", "CpuBackend", "EdgeIndex", "Generator", "IndexPlan", "MinimalBackend", "Storage",
    "Tensor", "__version__", "arange", "argmax", "autograd", "bool", "cat", "concat", "config",
    "empty", "empty_cache", "enable_grad", "float32", "float64", "from_dlpack", "from_numpy",
    "full", "fusion", "get_cache_limit", "get_default_backend", "get_num_threads", "int32",
    "int64", "is_grad_enabled", "manual_seed", "matmul", "max", "memory_stats", "min",
    "no_grad", "ones", "ones_like", "optim", "permute", "rand", "randn",
    "reset_peak_memory_stats", "reshape", "set_cache_limit", "set_default_backend",
    "set_grad_enabled", "set_num_threads", "show_config", "stack", "tensor", "transpose",
    "use_backend", "where", "zeros", "zeros_like",
    "data", "datasets", "load", "loader", "metrics", "nn", "save", "transforms", "utils",
    "as_tensor", "cuda", "device", "empty_like", "full_like", "rand_like", "randint",
    "randn_like",
    # the declared ops' functions (add, relu, segment_softmax, ...): rtx/_faces.py
    *_face_names,
]
