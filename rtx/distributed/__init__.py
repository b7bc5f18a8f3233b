"""rtx.distributed: data-parallel and graph-partitioned training over MPI.

Optional: needs ``pip install "rtx-gnn[mpi]"`` (mpi4py and an MPI library).
``import rtx`` never imports this package, and importing it does not import
mpi4py: that happens in ``init()``.  Run under an MPI launcher::

    mpiexec -n 2 python train.py

>>> import rtx.distributed as dist
>>> dist.init()                                        # doctest: +SKIP
>>> dist.all_reduce(t, op="mean")                      # doctest: +SKIP

Every collective first agrees with the other ranks on what is being called
(so ranks out of step raise instead of hanging or mixing data), waits under a
watchdog, and an uncaught exception on one rank ends every rank.  See
``docs/distributed.md``.
"""

from ._comm import (
    CollectiveMismatchError,
    all_gather,
    all_reduce,
    barrier,
    broadcast,
    destroy_process_group,
    get_comm,
    get_timeout,
    init,
    is_initialized,
    launched_by_mpi,
    rank,
    world_size,
)
from .checkpoint import load_checkpoint, save_checkpoint
from .ddp import DistributedDataParallel
from .partitioning import shard
from .shards import load_shard, partition, partition_all, partition_stats

__all__ = [
    "CollectiveMismatchError",
    "DistributedDataParallel",
    "all_gather",
    "all_reduce",
    "barrier",
    "broadcast",
    "destroy_process_group",
    "get_comm",
    "get_timeout",
    "init",
    "is_initialized",
    "launched_by_mpi",
    "load_checkpoint",
    "load_shard",
    "partition",
    "partition_all",
    "partition_stats",
    "rank",
    "save_checkpoint",
    "shard",
    "world_size",
]
