# Row gather (index_select) and deterministic row scatter-add (index_add)
# along dim 0.  Inputs arrive validated and C-contiguous from the Python
# boundary (rtx/backend/cpu/index.py): 2-D ``(rows, F)`` data, 1-D indices already
# bounds-checked.  One source serves float32/float64 x int32/int64.
#
# Determinism of scatter-add: every output element is written by exactly one
# thread, which zero-fills it and then adds its source rows in increasing
# source position.  That is the order of the serial loop (and of numpy's
# ``np.add.at``), so the bits depend neither on the thread count nor on the
# strategy; no thread ever races on ``+=`` and there are no atomics.
#
# Scatter strategies (all give the same bits):
#   ROWS  each thread owns a contiguous range of destination rows (balanced by
#         a sample of the indices), zero-fills it, then scans all indices and
#         adds the rows that land in its range.  No sort, no scratch memory,
#         nothing to cache: cold == warm.  Each thread reads all indices, so it
#         is meant for small team sizes (<= CSR_MIN_THREADS).
#   CSR   a stable counting sort groups source positions by destination; each
#         thread reduces whole destination rows.  Scratch: N+1 + E int64.
#   COLS  each thread owns a block of feature columns for every row.  Balanced
#         for any index distribution; chosen for wide rows.

# Bytes moved below which a kernel stays on one thread: waking the OpenMP team
# and joining it costs a few microseconds, and below these sizes the serial
# loop finishes sooner.  Measured with ``python benchmarks/run.py index
# --threshold`` on 2 cores (docs/performance.md): gather F=16 loses at
# 256 KiB (0.91x) and wins from 512 KiB (1.27x); scatter F=64 (ROWS) still
# loses at 1 MiB (0.71x) and wins at 4 MiB (1.26-1.8x).
cdef Py_ssize_t GATHER_PARALLEL_MIN = 512 << 10
cdef Py_ssize_t SCATTER_PARALLEL_MIN = 2 << 20
# Gathers writing at least this many bytes use non-temporal stores.
cdef Py_ssize_t GATHER_STREAM_MIN = 64 << 20
# Rows narrower than this stay serial: each ROWS thread scans all indices and
# streams through all of ``src`` (the hardware prefetcher fetches the rows it
# skips), which then costs as much as the adds it saves.  Measured for
# E = 1e6 float32 across runs: F=1 serial 0.7-1 ms vs ROWS 5-9 ms; F=16
# serial 4-16 ms vs ROWS 5-43 ms; from F=64 ROWS wins (43-94 vs 48-137 ms).
cdef Py_ssize_t SCATTER_MIN_ROW_BYTES = 128
# Team size from which CSR replaces ROWS (ROWS reads every index once per thread).
cdef int CSR_MIN_THREADS = 8
# Bytes of a thread's column block from which COLS replaces ROWS.
cdef Py_ssize_t COLS_MIN_BLOCK_BYTES = 4096

#: Final[dict[str, int]]
SCATTER_STRATEGIES = {"auto": 0, "serial": 1, "rows": 2, "csr": 3, "cols": 4}
cdef enum:
    S_AUTO = 0
    S_SERIAL = 1
    S_ROWS = 2
    S_CSR = 3
    S_COLS = 4
    COMPACT_BLOCK = 2048


def set_gather_stream_min(Py_ssize_t nbytes):
    #: -> int
    """Output size (bytes) from which gathers use non-temporal stores; returns the old one."""
    global GATHER_STREAM_MIN
    old = GATHER_STREAM_MIN
    if nbytes < 0:
        raise ValueError("nbytes must be >= 0")
    GATHER_STREAM_MIN = nbytes
    return old


def get_parallel_thresholds():
    #: -> dict[str, int]
    """The serial/parallel cut-overs: bytes moved per call (``gather``,
    ``scatter``) and the narrowest row (bytes) a scatter parallelises."""
    return {"gather": GATHER_PARALLEL_MIN, "scatter": SCATTER_PARALLEL_MIN,
            "scatter_min_row_bytes": SCATTER_MIN_ROW_BYTES}


def set_parallel_thresholds(gather=None, scatter=None, scatter_min_row_bytes=None):
    #: -> dict[str, int]
    #: gather: int | None
    #: scatter: int | None
    #: scatter_min_row_bytes: int | None
    """Tune the serial/parallel cut-overs (see ``get_parallel_thresholds``).

    For benchmarks and tests; results never depend on them.  Returns the
    previous values as a dict (``set_parallel_thresholds(**old)`` restores).
    """
    global GATHER_PARALLEL_MIN, SCATTER_PARALLEL_MIN, SCATTER_MIN_ROW_BYTES
    old = get_parallel_thresholds()
    for name, v in (("gather", gather), ("scatter", scatter),
                    ("scatter_min_row_bytes", scatter_min_row_bytes)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0
                              or v > MAX_STORAGE_BYTES):
            raise ValueError(f"{name} threshold must be an int in [0, 2**62], got {v!r}")
    if gather is not None:
        GATHER_PARALLEL_MIN = gather
    if scatter is not None:
        SCATTER_PARALLEL_MIN = scatter
    if scatter_min_row_bytes is not None:
        SCATTER_MIN_ROW_BYTES = scatter_min_row_bytes
    return old


def first_out_of_bounds(const index_t[::1] idx, Py_ssize_t n):
    #: -> int
    """Position of the first index outside ``[0, n)``, or -1 when all are valid.

    Scans blocks with a branch-free (vectorisable) test and locates the bad
    position only inside the first block that has one.
    """
    cdef Py_ssize_t m = idx.shape[0]
    cdef Py_ssize_t b, i, end
    cdef Py_ssize_t bad = -1
    cdef uint64_t un = <uint64_t>n if n > 0 else 0
    cdef int anybad
    if m == 0:
        return -1
    with nogil:
        b = 0
        while b < m:
            end = b + 4096 if b + 4096 < m else m
            anybad = 0
            for i in range(b, end):
                anybad |= <int>(<uint64_t><int64_t>idx[i] >= un)
            if anybad:
                for i in range(b, end):
                    if <uint64_t><int64_t>idx[i] >= un:
                        bad = i
                        break
                break
            b = end
    return bad


def count_descents(const index_t[::1] idx):
    #: -> int
    """How many positions i have ``idx[i + 1] < idx[i]`` (0: ascending)."""
    cdef Py_ssize_t i, n = idx.shape[0]
    cdef Py_ssize_t d = 0
    with nogil:
        for i in range(n - 1):
            d += idx[i + 1] < idx[i]
    return d


# ------------------------------------------------------------------- gather
cdef void _gather_block(const real* xp, const index_t* ip, real* op,
                        Py_ssize_t i0, Py_ssize_t i1, Py_ssize_t F, bint stream) noexcept nogil:
    cdef Py_ssize_t i
    cdef size_t rowbytes = <size_t>F * sizeof(real)
    if F == 1:
        for i in range(i0, i1):
            op[i] = xp[ip[i]]
    elif stream:
        for i in range(i0, i1):
            if i + PREFETCH_AHEAD < i1:
                rtx_prefetch_row(xp + <Py_ssize_t>ip[i + PREFETCH_AHEAD] * F, rowbytes)
            rtx_stream_copy(op + i * F, xp + <Py_ssize_t>ip[i] * F, rowbytes)
        rtx_store_fence()
    else:
        for i in range(i0, i1):
            _copy_row(op + i * F, xp + <Py_ssize_t>ip[i] * F, F)


def gather_rows(const real[:, ::1] x, const index_t[::1] idx, real[:, ::1] out,
                int num_threads):
    """out[i, :] = x[idx[i], :] (indices pre-validated).

    Parallel when at least ``GATHER_PARALLEL_MIN`` bytes are copied, serial
    below.  The rows are cut into about 8 chunks per thread, handed out
    dynamically: on a shared machine a thread the OS runs late then finds
    most chunks done by the others instead of holding up a fixed half.
    """
    cdef Py_ssize_t E = idx.shape[0]
    cdef Py_ssize_t F = x.shape[1]
    cdef Py_ssize_t c, T, chunk, nchunks, i0, i1, min_rows
    cdef const real* xp
    cdef const index_t* ip
    cdef real* op
    cdef bint stream
    if out.shape[0] != E or out.shape[1] != F:
        raise ValueError("gather_rows: out has the wrong shape")
    _reset_seen()
    if E == 0 or F == 0:
        return
    xp = &x[0, 0]
    ip = &idx[0]
    op = &out[0, 0]
    T = num_threads
    if T > E:
        T = E
    if T > MAX_KERNEL_THREADS:
        T = MAX_KERNEL_THREADS
    # Outputs much larger than the caches are written with non-temporal
    # stores: no read-for-ownership of the destination lines.
    stream = (RTX_HAVE_STREAM and E * F * <Py_ssize_t>sizeof(real) >= GATHER_STREAM_MIN
              and (F * sizeof(real)) % 16 == 0 and (<size_t>op) % 16 == 0)
    with nogil:
        if T > 1 and E * F * <Py_ssize_t>sizeof(real) >= GATHER_PARALLEL_MIN:
            chunk = (E + 8 * T - 1) // (8 * T)
            # chunks of at least 64 KiB of output
            min_rows = (65536 // <Py_ssize_t>sizeof(real) + F - 1) // F
            if chunk < min_rows:
                chunk = min_rows
            nchunks = (E + chunk - 1) // chunk
            with parallel(num_threads=T):
                _mark_seen()
                for c in prange(nchunks, schedule="dynamic", chunksize=1):
                    i0 = c * chunk
                    i1 = i0 + chunk
                    if i1 > E:
                        i1 = E
                    _gather_block(xp, ip, op, i0, i1, F, stream)
        else:
            _mark_seen()
            _gather_block(xp, ip, op, 0, E, F, stream)


# -------------------------------------------------------------- scatter-add
cdef void _scatter_serial(const real* sp, const index_t* ip, Py_ssize_t E, Py_ssize_t F,
                          real* op, Py_ssize_t N) noexcept nogil:
    cdef Py_ssize_t i
    memset(op, 0, <size_t>(N * F) * sizeof(real))
    if F == 1:
        for i in range(E):
            op[ip[i]] += sp[i]
    else:
        for i in range(E):
            _add_row(op + <Py_ssize_t>ip[i] * F, sp + i * F, F)


cdef void _scatter_row_range(const real* sp, const index_t* ip, Py_ssize_t E, Py_ssize_t F,
                             real* op, Py_ssize_t lo, Py_ssize_t hi, bint zero) noexcept nogil:
    """Zero rows [lo, hi) (when ``zero``) and add every source row whose
    destination is in it.

    Indices are scanned in blocks; the positions that land in the range are
    compacted branch-free (no mispredictions on random indices), then added
    in increasing position with the next source rows prefetched.
    """
    cdef Py_ssize_t i, b, end, k, n, p
    cdef uint64_t width = <uint64_t>(hi - lo)
    cdef uint64_t d
    cdef Py_ssize_t pos[COMPACT_BLOCK]
    cdef Py_ssize_t dst[COMPACT_BLOCK]
    if hi <= lo:
        return
    if zero:
        memset(op + lo * F, 0, <size_t>((hi - lo) * F) * sizeof(real))
    b = 0
    while b < E:
        end = b + COMPACT_BLOCK if b + COMPACT_BLOCK < E else E
        n = 0
        for i in range(b, end):
            d = <uint64_t>(<int64_t>ip[i] - lo)
            pos[n] = i
            dst[n] = lo + <Py_ssize_t>d
            n += d < width
        if F == 1:
            for k in range(n):
                op[dst[k]] += sp[pos[k]]
        else:
            for k in range(n):
                if k + PREFETCH_AHEAD < n:
                    p = pos[k + PREFETCH_AHEAD]
                    rtx_prefetch_row(sp + p * F, <size_t>F * sizeof(real))
                    rtx_prefetch_row(op + dst[k + PREFETCH_AHEAD] * F, <size_t>F * sizeof(real))
                _add_row(op + dst[k] * F, sp + pos[k] * F, F)
        b = end


cdef void _scatter_rows(const real* sp, const index_t* ip, Py_ssize_t E, Py_ssize_t F,
                        real* op, Py_ssize_t N, int T, bint zero) noexcept nogil:
    """ROWS: each of T threads owns a balanced range of destination rows, zeroes
    it (when ``zero``) and adds the source rows that land in it."""
    cdef Py_ssize_t bounds[257]
    cdef Py_ssize_t t
    _row_bounds(ip, E, N, T, bounds)
    for t in prange(T, num_threads=T, schedule="static", chunksize=1):
        _mark_seen()
        _scatter_row_range(sp, ip, E, F, op, bounds[t], bounds[t + 1], zero)


cdef void _scatter_cols(const real* sp, const index_t* ip, Py_ssize_t E, Py_ssize_t F,
                        real* op, Py_ssize_t N, int T) noexcept nogil:
    cdef Py_ssize_t t, i, r, c0, c1
    cdef Py_ssize_t chunk = (F + T - 1) // T
    # Blocks of whole cache lines (16 floats / 8 doubles) where F allows.
    chunk = (chunk + 15) // 16 * 16
    for t in prange(T, num_threads=T, schedule="static", chunksize=1):
        _mark_seen()
        c0 = t * chunk
        c1 = c0 + chunk
        if c1 > F:
            c1 = F
        if c0 < c1:
            for r in range(N):
                memset(op + r * F + c0, 0, <size_t>(c1 - c0) * sizeof(real))
            for i in range(E):
                _add_row(op + <Py_ssize_t>ip[i] * F + c0, sp + i * F + c0, c1 - c0)


cdef int _scatter_csr(const real* sp, const index_t* ip, Py_ssize_t E, Py_ssize_t F,
                      real* op, Py_ssize_t N, int T) noexcept nogil:
    """Counting sort by destination, then whole destination rows per thread."""
    cdef int rc
    cdef int64_t* ptr = <int64_t*>malloc(<size_t>(N + 2) * sizeof(int64_t))
    cdef int64_t* perm = <int64_t*>malloc(<size_t>(E if E > 0 else 1) * sizeof(int64_t))
    if ptr == NULL or perm == NULL:
        free(ptr)
        free(perm)
        return -1
    _csr_build(ip, E, N, ptr, perm)
    # Contiguous row ranges of equal work (entries + rows), one per thread,
    # statically: the same thread always gets the same rows.
    rc = _csr_reduce_parallel(sp, perm, ptr, N, F, op, T, CSR_PER_THREAD)
    free(ptr)
    free(perm)
    return rc


cdef inline int _auto_strategy(Py_ssize_t E, Py_ssize_t N, Py_ssize_t F, Py_ssize_t itemsize,
                               int T) noexcept:
    """The strategy auto dispatch picks (T already clamped to [1, 256])."""
    if (T == 1 or (E + N) * F * itemsize < SCATTER_PARALLEL_MIN
            or F * itemsize < SCATTER_MIN_ROW_BYTES):
        return S_SERIAL
    if F * itemsize >= COLS_MIN_BLOCK_BYTES * T:
        return S_COLS
    if T >= CSR_MIN_THREADS:
        return S_CSR
    return S_ROWS


_STRATEGY_NAMES = {v: k for k, v in SCATTER_STRATEGIES.items()}
# The strategy the last scatter_add_rows call ran (diagnostic, like _seen).
cdef int _last_strategy = S_AUTO


def last_scatter_strategy():
    #: -> Literal["auto", "serial", "rows", "csr", "cols"]
    """Name of the strategy the last ``scatter_add_rows`` call ran ("auto" before any)."""
    return _STRATEGY_NAMES[_last_strategy]


def scatter_strategy_for(Py_ssize_t E, Py_ssize_t N, Py_ssize_t F, Py_ssize_t itemsize,
                         int num_threads):
    #: -> Literal["serial", "rows", "csr", "cols"]
    """Name of the strategy auto dispatch picks for ``E`` source rows, ``N``
    destination rows of ``F`` items of ``itemsize`` bytes and a team of ``num_threads``."""
    cdef int T = _clamp_threads(num_threads)
    if E < 0 or N < 0 or F < 0 or itemsize < 1:
        raise ValueError("scatter_strategy_for: sizes must be >= 0 (itemsize >= 1)")
    return _STRATEGY_NAMES[_auto_strategy(E, N, F, itemsize, T)]


def scatter_dispatch_constants():
    #: -> tuple[int, int]
    """``(COLS_MIN_BLOCK_BYTES, CSR_MIN_THREADS)``: auto dispatch's fixed cut-overs."""
    return COLS_MIN_BLOCK_BYTES, CSR_MIN_THREADS


def scatter_add_rows(const real[:, ::1] src, const index_t[::1] idx, real[:, ::1] out,
                     int num_threads, int strategy=0):
    """out = 0; out[idx[i], :] += src[i, :] (indices pre-validated).

    ``out`` may hold anything on entry: the kernel zero-fills it, each thread
    the part it will reduce into (first touch by its owner).  Deterministic for
    any ``num_threads`` and ``strategy`` (see the note at the top of this file);
    ``strategy`` is one of ``SCATTER_STRATEGIES`` (0 = auto).
    """
    cdef Py_ssize_t E = idx.shape[0]
    cdef Py_ssize_t F = src.shape[1]
    cdef Py_ssize_t N = out.shape[0]
    cdef Py_ssize_t itemsize = sizeof(real)
    cdef const real* sp
    cdef const index_t* ip
    cdef real* op
    cdef int T = num_threads
    cdef int rc = 0
    global _last_strategy
    if src.shape[0] != E or out.shape[1] != F:
        raise ValueError("scatter_add_rows: shapes do not match")
    if strategy < 0 or strategy > S_COLS:
        raise ValueError(f"scatter_add_rows: unknown strategy {strategy}")
    _reset_seen()
    _last_strategy = S_SERIAL
    if N == 0 or F == 0:
        return
    op = &out[0, 0]
    if E == 0:
        with nogil:
            _mark_seen()
            memset(op, 0, <size_t>(N * F) * sizeof(real))
        return
    sp = &src[0, 0]
    ip = &idx[0]
    T = _clamp_threads(T)
    if strategy == S_AUTO:
        strategy = _auto_strategy(E, N, F, itemsize, T)
    if T == 1:
        strategy = S_SERIAL
    _last_strategy = strategy
    with nogil:
        if strategy == S_SERIAL:
            _mark_seen()
            _scatter_serial(sp, ip, E, F, op, N)
        elif strategy == S_ROWS:
            _scatter_rows(sp, ip, E, F, op, N, T, True)
        elif strategy == S_COLS:
            _scatter_cols(sp, ip, E, F, op, N, T)
        else:
            rc = _scatter_csr(sp, ip, E, F, op, N, T)
    if rc != 0:
        raise MemoryError("rtx.index_add: cannot allocate the destination grouping")


def scatter_add_csr(const real[:, ::1] src, const int64_t[::1] perm, const int64_t[::1] ptr,
                    real[:, ::1] out, int num_threads):
    """``scatter_add_rows`` over a prebuilt grouping (an ``IndexPlan``'s CSR):
    out = 0; for each row r, add src[perm[k]] for k in [ptr[r], ptr[r + 1]).

    Bitwise equal to ``scatter_add_rows`` with the indices the grouping came
    from (same per-row order).  ``ptr``/``perm`` must come from ``csr_build``.
    """
    cdef Py_ssize_t E = src.shape[0]
    cdef Py_ssize_t F = src.shape[1]
    cdef Py_ssize_t N = out.shape[0]
    cdef const real* sp = NULL
    cdef const int64_t* pp = NULL
    cdef int T, rc
    if out.shape[1] != F or perm.shape[0] != E or ptr.shape[0] < N + 1:
        raise ValueError("scatter_add_csr: shapes do not match")
    if N > 0 and ptr[N] != E:
        raise ValueError("scatter_add_csr: the grouping does not cover src")
    _reset_seen()
    if N == 0 or F == 0:
        return
    T = num_threads
    if (E + N) * F * <Py_ssize_t>sizeof(real) < SCATTER_PARALLEL_MIN:
        T = 1
    T = _team_size(T, N)
    if E > 0:
        sp = &src[0, 0]
        pp = &perm[0]
    with nogil:
        rc = _csr_reduce_parallel(sp, pp, &ptr[0], N, F, &out[0, 0], T, CSR_DYNAMIC)
    if rc != 0:
        raise MemoryError("scatter_add_csr: out of memory")


def scatter_accumulate_rows(const real[:, ::1] src, const index_t[::1] idx, real[:, ::1] out,
                            int num_threads, bint zero=False):
    """out[idx[i], :] += src[i, :] in increasing i, into ``out`` as it is, or
    zero-filled first when ``zero`` (each thread the rows it owns): a chunked
    scatter (``segment_matmul_sum``) zero-fills with its first chunk and adds
    the others into the same output.  Indices must be pre-validated (a
    checked plan's).

    Each output row is written by one thread (ROWS: the threads own balanced
    ranges of destination rows), in increasing source position, so a sequence
    of calls over consecutive source chunks gives ``scatter_add_rows``' bits
    over their concatenation, for any ``num_threads``."""
    cdef Py_ssize_t E = idx.shape[0]
    cdef Py_ssize_t F = src.shape[1]
    cdef Py_ssize_t N = out.shape[0]
    cdef int T
    if src.shape[0] != E or out.shape[1] != F:
        raise ValueError("scatter_accumulate_rows: shapes do not match")
    _reset_seen()
    if N == 0 or F == 0:
        if E > 0 and F > 0:
            raise IndexError("scatter_accumulate_rows: out has no rows to add into")
        return
    if E == 0:
        if zero:
            out[:, :] = 0
        return
    T = _clamp_threads(num_threads)
    if (E * F * <Py_ssize_t>sizeof(real) < SCATTER_PARALLEL_MIN
            or F * <Py_ssize_t>sizeof(real) < SCATTER_MIN_ROW_BYTES):
        T = 1
    with nogil:
        if T == 1:
            _mark_seen()
            _scatter_row_range(&src[0, 0], &idx[0], E, F, &out[0, 0], 0, N, zero)
        else:
            _scatter_rows(&src[0, 0], &idx[0], E, F, &out[0, 0], N, T, zero)


# ------------------------------------------------------------ block concatenation
# ``concat`` along dim 0 of C-contiguous arrays (and any concat whose leading
# dims are all 1): the output is the inputs' bytes one after another.  numpy
# copies them on one thread; this splits the output's bytes into equal chunks
# handed out to rtx's threads (each chunk one or more memcpy).  Below
# CONCAT_PARALLEL_MIN bytes, one thread (the team's start costs more).
cdef Py_ssize_t CONCAT_PARALLEL_MIN = 1 << 20
cdef enum:
    CONCAT_CHUNK = 1 << 20      # bytes per parallel work item


def concat_bytes(list srcs, unsigned char[::1] out not None, int num_threads):
    #: srcs: list[npt.NDArray[np.uint8]]
    """``out[:] = b"".join(srcs)``: each source a 1-D uint8 array (a byte view of
    a C-contiguous array), their lengths summing to ``len(out)``; the copy split
    over ``num_threads`` threads when it is large enough.  ``out`` must not
    overlap a source."""
    cdef Py_ssize_t n = len(srcs)
    cdef Py_ssize_t total = out.shape[0]
    cdef Py_ssize_t i, c, nchunks, lo, hi, s0
    cdef const unsigned char[::1] v
    cdef int T
    cdef const unsigned char** ptrs
    cdef Py_ssize_t* starts
    views = []
    s0 = 0
    for i in range(n):
        if srcs[i] is None:
            raise TypeError("concat_bytes: a source is None")
        v = srcs[i]            # TypeError unless a 1-D contiguous byte buffer
        views.append(v)        # (held: the buffers stay exported, so unresized)
        s0 += v.shape[0]
    if s0 != total:
        raise ValueError(f"concat_bytes: the sources hold {s0} bytes, out {total}")
    if total == 0:
        return
    ptrs = <const unsigned char**>malloc(<size_t>(n if n > 0 else 1) * sizeof(void*))
    starts = <Py_ssize_t*>malloc(<size_t>(n + 1) * sizeof(Py_ssize_t))
    if ptrs == NULL or starts == NULL:
        free(ptrs)
        free(starts)
        raise MemoryError("concat_bytes: out of memory")
    s0 = 0
    for i in range(n):
        v = views[i]
        starts[i] = s0
        ptrs[i] = &v[0] if v.shape[0] > 0 else NULL
        s0 += v.shape[0]
    starts[n] = s0
    nchunks = (total + CONCAT_CHUNK - 1) // CONCAT_CHUNK
    T = 1 if total < CONCAT_PARALLEL_MIN else _team_size(_clamp_threads(num_threads), nchunks)
    _reset_seen()
    with nogil:
        for c in prange(nchunks, num_threads=T, schedule="dynamic", chunksize=1):
            _mark_seen()
            lo = c * CONCAT_CHUNK
            hi = lo + CONCAT_CHUNK if lo + CONCAT_CHUNK < total else total
            _concat_range(ptrs, starts, n, &out[0], lo, hi)
    free(ptrs)
    free(starts)


cdef void _concat_range(const unsigned char** ptrs, const Py_ssize_t* starts, Py_ssize_t n,
                        unsigned char* out, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Output bytes [lo, hi) from the sources that cover them (starts ascending)."""
    cdef Py_ssize_t i = 0, a, b
    cdef Py_ssize_t j = n
    # the last source starting at or before lo (binary search)
    while j - i > 1:
        b = (i + j) // 2
        if starts[b] <= lo:
            i = b
        else:
            j = b
    while i < n and starts[i] < hi:
        a = starts[i] if starts[i] > lo else lo
        b = starts[i + 1] if starts[i + 1] < hi else hi
        if b > a:
            memcpy(out + a, ptrs[i] + (a - starts[i]), <size_t>(b - a))
        i += 1
