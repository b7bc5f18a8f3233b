"""Type stubs for rtx's compiled extension module ``rtx._kernels``.

Generated from the Cython sources (``rtx/*.pxi``, in ``rtx/_kernels.pyx``'s include
order) by ``python tools/gen_faces.py``: do not edit by hand; change the ``.pxi``
(types the Cython signature cannot say go in ``#:`` comments, see
``tools/kernel_stubs.py``).  ``tests/autograd/test_faces.py`` fails when this file
is stale and ``tests/project/test_wheel_contents.py`` compares it with the built module.
"""

from typing import Any, Final, Literal, NamedTuple, TypedDict

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

# ---------------------------------------------------------------- _openmp.pxi
def openmp_enabled() -> bool: ...
def omp_max_threads() -> int: ...
def build_cflags() -> str: ...

# ---------------------------------------------------------------- _common.pxi
_Real = npt.NDArray[np.float32] | npt.NDArray[np.float64]
_Index = npt.NDArray[np.int32] | npt.NDArray[np.int64]
_I64 = npt.NDArray[np.int64]
_F64 = npt.NDArray[np.float64]

# ------------------------------------------------------------------ _diag.pxi
def last_kernel_thread_ids() -> list[int]: ...
def parallel_thread_ids(n: int, num_threads: int) -> int: ...
def copy_bandwidth_kernel(
    src: npt.NDArray[np.uint8], dst: npt.NDArray[np.uint8], num_threads: int
) -> None: ...

# --------------------------------------------------------------- _storage.pxi
class _MemoryStats(TypedDict):
    current_bytes: int
    peak_bytes: int
    allocations: int
    frees: int
    cache_hits: int
    cached_bytes: int
    cache_limit: int
    system_allocations: int
    system_frees: int
    hugepage_hints: int

def memory_stats() -> _MemoryStats: ...
def reset_peak_memory_stats() -> None: ...
def empty_cache() -> None: ...

@disjoint_base
class uncached_frees:
    """A block whose frees (this thread's) go to the system, not the cache."""

    def __enter__(self) -> uncached_frees: ...
    def __exit__(self, *exc: object) -> bool: ...

def set_cache_limit(nbytes: int) -> None: ...
def get_cache_limit() -> int: ...

@disjoint_base
class Storage:
    """One owned, 64-byte aligned (2 MiB for large blocks) C allocation."""

    @property
    def nbytes(self) -> int: ...
    @property
    def exports(self) -> int: ...
    def __new__(cls, nbytes: int, zero: bool = False) -> Storage: ...
    @property
    def address(self) -> int: ...

def storage_array(
    shape: tuple[int, ...], dtype: np.dtype[Any], zero: bool = False
) -> npt.NDArray[Any]: ...
def owned_binary(ufunc: Any, a: object, b: object, max_size: int) -> npt.NDArray[Any] | None: ...
def owned_matmul(a: object, b: object, max_size: int) -> npt.NDArray[Any] | None: ...
def owned_unary(ufunc: Any, a: object) -> npt.NDArray[Any] | None: ...

# -------------------------------------------------------------- _snapshot.pxi
@disjoint_base
class IndexSnapshot:
    """Read-only bytes in an rtx-owned Storage (the memory of index snapshots)."""

    def __new__(cls, nbytes: int) -> IndexSnapshot: ...
    @property
    def nbytes(self) -> int: ...

def snapshot_indices(idx: _Index, n: int, threads: int = 1) -> tuple[_Index, int]: ...
def is_index_snapshot(arr: object) -> bool: ...
def memeq(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> bool: ...

# ------------------------------------------------------------------- _csr.pxi
def set_segment_parallel_min(nbytes: int) -> int: ...
def csr_build(idx: _Index, ptr: _I64, perm: _I64) -> None: ...

# ---------------------------------------------------------------- _record.pxi
@disjoint_base
class SlotMaker:
    """Makes instances of ``owner`` (or of a subclass) with slots set in C."""

    def __new__(
        cls, owner: type[Any], names: tuple[Any, ...], defaults: tuple[Any, ...] = ...
    ) -> SlotMaker: ...
    def make(
        self, cls: type[Any], a: Any = ..., b: Any = ..., c: Any = ..., d: Any = ..., e: Any = ...,
        f: Any = ..., g: Any = ..., h: Any = ...,
    ) -> Any: ...

# ----------------------------------------------------------------- _index.pxi
SCATTER_STRATEGIES: Final[dict[str, int]]
def set_gather_stream_min(nbytes: int) -> int: ...
def get_parallel_thresholds() -> dict[str, int]: ...
def set_parallel_thresholds(
    gather: int | None = None, scatter: int | None = None, scatter_min_row_bytes: int | None = None
) -> dict[str, int]: ...
def first_out_of_bounds(idx: _Index, n: int) -> int: ...
def count_descents(idx: _Index) -> int: ...
def gather_rows(x: _Real, idx: _Index, out: _Real, num_threads: int) -> None: ...
def last_scatter_strategy() -> Literal["auto", "serial", "rows", "csr", "cols"]: ...
def scatter_strategy_for(
    E: int, N: int, F: int, itemsize: int, num_threads: int
) -> Literal["serial", "rows", "csr", "cols"]: ...
def scatter_dispatch_constants() -> tuple[int, int]: ...
def scatter_add_rows(
    src: _Real, idx: _Index, out: _Real, num_threads: int, strategy: int = 0
) -> None: ...
def scatter_add_csr(src: _Real, perm: _I64, ptr: _I64, out: _Real, num_threads: int) -> None: ...
def scatter_accumulate_rows(
    src: _Real, idx: _Index, out: _Real, num_threads: int, zero: bool = False
) -> None: ...
def concat_bytes(
    srcs: list[npt.NDArray[np.uint8]], out: npt.NDArray[np.uint8], num_threads: int
) -> None: ...

# --------------------------------------------------------------- _segment.pxi
def segment_softmax_csr(
    scores: _Real, perm: _I64, ptr: _I64, out: _Real, num_threads: int
) -> None: ...
def segment_softmax_backward_csr(
    y: _Real, grad: _Real, perm: _I64, ptr: _I64, out: _Real, num_threads: int
) -> None: ...
def segment_mean_csr(src: _Real, perm: _I64, ptr: _I64, out: _Real, num_threads: int) -> None: ...
def segment_mean_backward_csr(
    grad: _Real, perm: _I64, ptr: _I64, out: _Real, num_threads: int
) -> None: ...
def segment_max_csr(
    src: _Real, perm: _I64, ptr: _I64, out: _Real, argmax: _I64, num_threads: int
) -> None: ...
def segment_max_backward_csr(
    grad: _Real, argmax: _I64, perm: _I64, ptr: _I64, out: _Real, num_threads: int
) -> None: ...
def segment_min_csr(
    src: _Real, perm: _I64, ptr: _I64, out: _Real, argmin: _I64, num_threads: int
) -> None: ...
def segment_min_backward_csr(
    grad: _Real, argmin: _I64, perm: _I64, ptr: _I64, out: _Real, num_threads: int
) -> None: ...
def softmax_entry_mode(H: int, itemsize: int, num_threads: int, backward: bool) -> bool: ...
def segment_softmax_entries(
    scores: _Real, idx: _Index, num_segments: int, out: _Real, num_threads: int,
    is_sorted: bool = False,
) -> None: ...
def segment_softmax_backward_entries(
    y: _Real, grad: _Real, idx: _Index, num_segments: int, out: _Real, num_threads: int,
    is_sorted: bool = False,
) -> None: ...

# --------------------------------------------------------------- _message.pxi
def message_avx2(enable: bool | None = None) -> bool: ...
def message_avx2_available() -> bool: ...
def message_csr(
    x: _Real, other: _Index, weight: _Real, weighted: bool, perm: _I64, ptr: _I64, out: _Real,
    heads: int, num_threads: int, in_group_order: bool = False,
) -> None: ...
def sddmm_dot(
    grad: _Real, x: _Real, src: _Index, dst: _Index, out: _Real, num_threads: int
) -> None: ...
def message_backward_csr(
    grad: _Real,
    x: _Real,
    dst: _Index,
    weight: _Real,
    weighted: bool,
    need_weight: bool,
    perm: _I64,
    ptr: _I64,
    grad_x: _Real,
    grad_weight: _Real,
    heads: int,
    num_threads: int,
    in_group_order: bool = False,
) -> None: ...

# ----------------------------------------------------------------- _gatv2.pxi
def gatv2_scores_csr(
    xl: _Real, xr: _Real, att: _Real, src: _Index, xe: _Real, has_e: bool, negative_slope: float,
    perm: _I64, ptr: _I64, out: _Real, num_threads: int, in_group_order: bool = False,
) -> None: ...
def gatv2_att_chunks(E: int, N: int) -> int: ...
def gatv2_bwd_dst(
    grad: _Real,
    xl: _Real,
    xr: _Real,
    att: _Real,
    src: _Index,
    xe: _Real,
    has_e: bool,
    negative_slope: float,
    perm: _I64,
    ptr: _I64,
    grad_xr: _Real,
    need_xr: bool,
    grad_xe: _Real,
    need_e: bool,
    att_part: _F64,
    need_att: bool,
    num_threads: int,
    in_group_order: bool = False,
) -> None: ...
def gatv2_bwd_src(
    grad: _Real,
    xl: _Real,
    xr: _Real,
    att: _Real,
    dst: _Index,
    xe: _Real,
    has_e: bool,
    negative_slope: float,
    perm: _I64,
    ptr: _I64,
    grad_xl: _Real,
    num_threads: int,
    in_group_order: bool = False,
) -> None: ...
def head_dot_chunks(N: int) -> int: ...
def head_dot_rows(x: _Real, att: _Real, out: _Real, num_threads: int) -> None: ...
def head_dot_backward(
    grad: _Real, x: _Real, att: _Real, grad_x: _Real, need_x: bool, att_part: _F64, need_att: bool,
    num_threads: int,
) -> None: ...
def gat_scores_rows(
    a_src: _Real, a_dst: _Real, src: _Index, dst: _Index, negative_slope: float, out: _Real,
    num_threads: int,
) -> None: ...

# --------------------------------------------------------------- _grouped.pxi
def set_grouped_parallel_min(nbytes: int) -> int: ...
def segment_matmul_rows(
    x: _Real, types: _Index, perm: _I64, weight: _Real, out: _Real, num_threads: int
) -> None: ...
def segment_matmul_weight_grad(
    x: _Real, grad: _Real, perm: _I64, ptr: _I64, grad_weight: _Real, num_threads: int
) -> None: ...

# ---------------------------------------------------------------- _narrow.pxi
def narrow_available() -> bool: ...
def narrow_tn(x: _Real, g: _Real, bounds: _I64, out: _Real, num_threads: int) -> None: ...

# ------------------------------------------------------------------ _gemm.pxi
def gemm_bind(path: str, prefix: str, suffix: str) -> bool: ...
def gemm_unbind() -> None: ...
def gemm_bound() -> bool: ...
def gemm_ilp64() -> bool: ...
def gemm_split(
    a: _Real, b: _Real, out: _Real, parts: npt.NDArray[Any] | None, pieces: int, inner: bool,
    num_threads: int,
) -> bool: ...

# ----------------------------------------------------------------- _dense.pxi
def sum_rows(a: _Real, out: _Real, num_threads: int) -> None: ...
def inplace_arith(op: str, dst: _Real, src: _Real, num_threads: int) -> None: ...

# ---------------------------------------------------------------- _sample.pxi
def set_sample_parallel_min(pairs: int) -> int: ...

_SampleResult = tuple[
    list[_I64], list[_I64], list[_I64], list[_I64], list[_I64], _I64, _I64, list[_I64] | None
]

@disjoint_base
class HeteroSamplerKernel:
    """The graph side of ``rtx.loader.NeighborSampler`` (see the top of ``_sample.pxi``)."""

    def __new__(
        cls, num_nodes: npt.ArrayLike, rel_src: npt.ArrayLike, rel_dst: npt.ArrayLike,
        ptrs: list[_I64], cols: list[_Index], fanouts: npt.ArrayLike, replace: bool,
        eperms: list[_I64] | None = None,
    ) -> HeteroSamplerKernel: ...
    @property
    def num_hops(self) -> int: ...
    @property
    def has_edge_ids(self) -> bool: ...
    @property
    def num_map_sets(self) -> int: ...
    def sample(
        self, seeds: list[_I64] | _I64, seed_types: list[int] | int, seed: int, epoch: int,
        batch: int, num_threads: int,
    ) -> _SampleResult: ...

# ---------------------------------------------------------------- _dlpack.pxi
DLPACK_VERSION: Final[tuple[int, int]]
DLPACK_CPU_DEVICE: Final[tuple[int, int]]

class _DLPackStats(TypedDict):
    exported: int
    deleted: int

def dlpack_stats() -> _DLPackStats: ...
def dlpack_export(
    arr: npt.NDArray[Any], stream: Any = None, max_version: tuple[int, int] | None = None,
    dl_device: tuple[int, int] | None = None, copy: bool | None = None, copied: bool = False,
) -> Any: ...
def dlpack_capsule_state(capsule: object) -> Literal["unused", "used", "other"]: ...

# ----------------------------------------------------------------- _fused.pxi
class FusedOp(NamedTuple):
    opcode: int
    arity: int
    immediate: bool
    predicate: bool

FUSED_OPS: Final[dict[str, FusedOp]]
def fused_eval(
    prog: npt.ArrayLike, nregs: int, inputs: list[_Real], consts: npt.ArrayLike,
    imms: npt.ArrayLike, outputs: list[_Real], out_regs: npt.ArrayLike, shape: tuple[int, ...],
    num_threads: int = 1, block: int = 2048, sum_reg: int = -1, sum_out: _Real | None = None,
) -> None: ...
def fused_unary(name: str, a: object, k: float = 0.0) -> npt.NDArray[Any] | None: ...
def fused_stream_count() -> int: ...
def fused_sub_count() -> int: ...
def set_fused_touch(on: bool) -> bool: ...
def set_fused_sub_bytes(n: int) -> int: ...
def get_fused_stream_min_bytes() -> int: ...
def set_fused_stream_min_bytes(n: int) -> int: ...
def get_fused_parallel_min() -> int: ...
def set_fused_parallel_min(n: int) -> int: ...

# -------------------------------------------------------------- _negative.pxi
def set_negative_bitmap_max(n: int) -> int: ...
def negative_codes(existing: _I64, population: int, k: int, seed: int) -> npt.NDArray[np.int64]: ...

# ----------------------------------------------------------------- _optim.pxi
def adam_rows(
    param: _Real, exp_avg: _Real, exp_avg_sq: _Real, rows: _Index, grad: _Real, beta1: float,
    beta2: float, eps: float, step_size: float, num_threads: int,
) -> None: ...
def adam_step(
    param: _Real,
    exp_avg: _Real,
    exp_avg_sq: _Real,
    grad: _Real,
    beta1: float,
    beta2: float,
    eps: float,
    step_size: float,
    bias2_sqrt: float,
    weight_decay: float,
    decoupled: bool,
    lr: float,
    num_threads: int,
    max_exp_avg_sq: _Real | None = None,
) -> None: ...

# ------------------------------------------------------------------ _loss.pxi
def cross_entropy_rows(
    x: _Real, target: _I64, loss: _Real, stats: _Real, num_threads: int
) -> None: ...
def cross_entropy_rows_backward(
    x: _Real, stats: _Real, target: _I64, scale: _Real, out: _Real, num_threads: int
) -> None: ...
