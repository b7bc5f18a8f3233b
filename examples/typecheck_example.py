"""One step of graph message passing with rtx, fully annotated.

It runs (``python examples/typecheck_example.py``) and it is type-checked:
``mypy`` (configured in pyproject.toml) checks this file in strict mode against
rtx's inline hints and the ``rtx/_kernels.pyi`` stubs, the way a user's code
is checked against the installed wheel (which ships ``py.typed``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import rtx


def mean_aggregate(x: rtx.Tensor, edge_index: npt.NDArray[np.int64], num_nodes: int) -> rtx.Tensor:
    """Mean of the source features arriving at each destination node."""
    src, dst = edge_index[0], edge_index[1]
    messages = rtx.index_select(x, rtx.from_numpy(src))
    summed = rtx.index_add(messages, rtx.from_numpy(dst), num_nodes)
    degree = np.bincount(dst, minlength=num_nodes).astype(np.float64).clip(min=1.0)
    return summed / rtx.from_numpy(degree.reshape(-1, 1))


def train_step(seed: int = 0) -> float:
    num_nodes, features = 6, 4
    edge_index = np.array([[0, 1, 2, 3, 4, 5, 0], [1, 2, 3, 4, 5, 0, 3]], dtype=np.int64)
    x = rtx.randn(num_nodes, features, dtype=rtx.float64, seed=seed)
    weight = rtx.randn(features, 2, dtype=rtx.float64, requires_grad=True, seed=seed + 1)
    h = mean_aggregate(x, edge_index, num_nodes) @ weight
    loss = h.relu().sum()
    loss.backward()
    grad = weight.grad
    assert grad is not None and grad.shape == (features, 2)
    with rtx.no_grad():
        weight.sub_(grad, alpha=0.1)
    value: float = loss.item()
    return value


def interop_demo() -> None:
    t = rtx.arange(6, dtype=rtx.float32).reshape(2, 3)
    view = np.from_dlpack(t)     # zero-copy through DLPack
    view[0, 0] = 10.0
    assert t[0, 0].item() == 10.0
    back: rtx.Tensor = rtx.from_dlpack(view)
    assert back.shape == (2, 3)
    stats = rtx.memory_stats()
    peak: int = stats["peak_bytes"]
    assert peak >= 0


if __name__ == "__main__":
    rtx.set_num_threads(None)
    print(f"rtx {rtx.__version__}, {rtx.get_num_threads()} threads, loss {train_step():.6f}")
    interop_demo()
