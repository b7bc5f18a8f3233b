"""rtx.distributed: data-parallel and graph-partitioned training over MPI.

Optional: needs ``pip install "rtx-gnn[mpi]"`` (mpi4py and an MPI library).
``import rtx`` never imports this package, and importing it does not import
mpi4py: that happens in ``init()``.  Run under an MPI launcher::

    mpiexec -n 2 python train.py

>>> import rtx.distributed as dist
>>> dist.init()                                        # doctest: +SKIP
>>> dist.all_reduce(t, op="mean")                      # doctest: +SKIP

See ``docs/distributed.md``.
"""

from ._comm import (
    all_gather,
    all_reduce,
    barrier,
    broadcast,
    get_comm,
    init,
    is_initialized,
    launched_by_mpi,
    rank,
    world_size,
)
from .ddp import DistributedDataParallel

__all__ = [
    "DistributedDataParallel",
    "all_gather",
    "all_reduce",
    "barrier",
    "broadcast",
    "get_comm",
    "init",
    "is_initialized",
    "launched_by_mpi",
    "rank",
    "world_size",
]
