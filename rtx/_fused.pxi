# Fused elementwise evaluator (rtx.fusion): runs a small register-machine
# program over cache-sized blocks of a broadcast output, in parallel over
# blocks, with no Python per element or per block.
#
# A program is ``ninstr`` rows of 6 int32: ``op, dst, a, b, c, imm``.
# Registers ``0 .. nin-1`` are the inputs, ``nin .. nin+nconst-1`` the scalar
# constants (filled once per thread), the rest temporaries.  Each register is
# a block-sized slice of a thread's scratch, except that a contiguous input
# that covers the whole output is read in place, and an output register points
# straight into its output array (so an output is written exactly once, with
# no copy).  A short program runs over a block a sub-block (512 bytes) at a
# time, its temporaries in the first sub-block of their slots (see
# FUSED_SUB_BYTES).  Unused operand fields are -1; ``imm`` indexes ``imms`` (the
# slope of leaky_relu, the alpha of elu).
#
# Every element is computed independently of how the elements are blocked or
# which thread runs a block, so results are bit-for-bit identical for any
# thread count and block size.
#
# Everything the nogil loop reads is validated first, at the Python boundary
# (``fused_eval``): opcodes, operand arity, register indices (each read only
# after it is written), output registers (distinct, written exactly once),
# output buffers (dtype, size, C-contiguity, writable, no overlap with an
# input or another output) and inputs (dtype, broadcast-compatible shape,
# strides computed HERE from the arrays themselves, so each read stays inside
# its input).  The program and constants are private C copies.
#
# A pass may also SUM one register over the whole output (``sum_reg``: a loss
# ``chain.sum()`` without storing the chain): the elements are summed in exactly
# numpy's order (``np.add.reduce`` over a C-contiguous array: pairwise, blocks of
# at most 128 summed with 8 accumulators, ``pairwise_sum`` in numpy's
# loops_utils.h), so the result has numpy's bits for any thread count.  The
# pairwise tree is cut at its nodes of at most FX_SUM_CHUNK elements (chunks):
# threads evaluate and sum chunks in parallel (each chunk through a private
# buffer), then the nodes above the chunks are added serially, in the tree's order.

from cython.parallel cimport parallel

from libc.math cimport erf, erff, exp, expf, expm1, fabs, fabsf, log, logf, sqrt, sqrtf
from libc.math cimport pow as c_pow
from libc.math cimport powf, tanh, tanhf
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

cimport numpy as cnp

from collections import namedtuple as _namedtuple_fx


cnp.import_array()

cdef enum:
    FX_COPY = 0
    FX_NEG = 1
    FX_EXP = 2
    FX_LOG = 3
    FX_SQRT = 4
    FX_ABS = 5
    FX_SIGN = 6
    FX_TANH = 7
    FX_SIGMOID = 8
    FX_RELU = 9
    FX_LEAKY_RELU = 10
    FX_ELU = 11
    FX_ADD = 12
    FX_SUB = 13
    FX_MUL = 14
    FX_DIV = 15
    FX_POW = 16
    FX_MAXIMUM = 17
    FX_MINIMUM = 18
    FX_EQ = 19
    FX_NE = 20
    FX_LT = 21
    FX_LE = 22
    FX_GT = 23
    FX_GE = 24
    FX_WHERE = 25
    FX_ERF = 26
    FX_NOPS = 27
    FX_MAX_DIMS = 64
    FX_MAX_REGS = 4096

cdef enum:          # how a block reads an input (FxPlan.direct)
    FX_GATHER = 0
    FX_DIRECT = 1
    FX_SPLAT = 2

# name -> FusedOp(opcode, number of register operands, uses an immediate, result
# is a truth value).  The one table of what the evaluator computes: the CPU
# backend's fixed programs and Fusion (which ops it records, their arity,
# which take a parameter, which give a bool) are built from it.
#: stub
#: class FusedOp(NamedTuple):
#:     opcode: int
#:     arity: int
#:     immediate: bool
#:     predicate: bool
FusedOp = _namedtuple_fx("FusedOp", ("opcode", "arity", "immediate", "predicate"))

#: Final[dict[str, FusedOp]]
FUSED_OPS = {
    "copy": FusedOp(FX_COPY, 1, False, False), "neg": FusedOp(FX_NEG, 1, False, False),
    "exp": FusedOp(FX_EXP, 1, False, False), "log": FusedOp(FX_LOG, 1, False, False),
    "sqrt": FusedOp(FX_SQRT, 1, False, False), "abs": FusedOp(FX_ABS, 1, False, False),
    "sign": FusedOp(FX_SIGN, 1, False, False), "tanh": FusedOp(FX_TANH, 1, False, False),
    "sigmoid": FusedOp(FX_SIGMOID, 1, False, False), "relu": FusedOp(FX_RELU, 1, False, False),
    "leaky_relu": FusedOp(FX_LEAKY_RELU, 1, True, False),
    "elu": FusedOp(FX_ELU, 1, True, False),
    "add": FusedOp(FX_ADD, 2, False, False), "sub": FusedOp(FX_SUB, 2, False, False),
    "mul": FusedOp(FX_MUL, 2, False, False), "div": FusedOp(FX_DIV, 2, False, False),
    "pow": FusedOp(FX_POW, 2, False, False),
    "maximum": FusedOp(FX_MAXIMUM, 2, False, False),
    "minimum": FusedOp(FX_MINIMUM, 2, False, False),
    "eq": FusedOp(FX_EQ, 2, False, True), "ne": FusedOp(FX_NE, 2, False, True),
    "lt": FusedOp(FX_LT, 2, False, True), "le": FusedOp(FX_LE, 2, False, True),
    "gt": FusedOp(FX_GT, 2, False, True), "ge": FusedOp(FX_GE, 2, False, True),
    "where": FusedOp(FX_WHERE, 3, False, False),
    "erf": FusedOp(FX_ERF, 1, False, False),
}

cdef int _FX_ARITY[FX_NOPS]
cdef bint _FX_IMM[FX_NOPS]
for _spec in FUSED_OPS.values():
    _FX_ARITY[_spec.opcode] = _spec.arity
    _FX_IMM[_spec.opcode] = _spec.immediate

# Elements below which a fused call runs on one thread (waking the team costs
# a few microseconds; 32K elements are ~10-40 us of work).
cdef Py_ssize_t FUSED_PARALLEL_MIN = 1 << 15
# Bytes a pass moves (its outputs and the inputs it reads in full) from which it
# writes its outputs with non-temporal stores: past the last-level cache, the
# first outputs are evicted before the pass ends, and a cached store first reads
# the line it overwrites.  Measured on the 2-core Xeon VM (a 2-thread copy then a
# read of the copy): cached stores faster up to 80 MB moved, streaming from 134 MB.
cdef Py_ssize_t FUSED_STREAM_MIN_BYTES = 128 << 20
cdef Py_ssize_t FUSED_STREAMED = 0     # passes that streamed (fused_stream_count)
# Bytes of a block a short program (at most FUSED_SUB_MAX_INSTR instructions) runs
# over at a time (a sub-block; 0: the whole block).  Each op then reads its
# operands and writes its result in runs of a few cache lines, so every input
# stream is read in turn every few dozen cycles (the memory keeps all of them in
# flight), the temporaries stay in L1 and a streamed output leaves as it is made.
# 4-op chain over 10M float32, 2 threads (the AMD EPYC VM, alternating in one
# process, medians): 5.8-6.5 ms with whole blocks (and the touch below) -> 4.8-5.6
# ms with 512-byte sub-blocks (256: 7.1, 1024: 5.9, 2048: 7.0; an op's call costs
# ~3 ns).  A long program keeps whole blocks: there the sub-blocks measured no
# gain or a loss (27 instructions, 4 inputs, 4 outputs: 16.0-16.7 -> 15.8-18.1 ms).
cdef Py_ssize_t FUSED_SUB_BYTES = 512
cdef int FUSED_SUB_MAX_INSTR = 8
cdef Py_ssize_t FUSED_SUBBLOCKED = 0   # passes run in sub-blocks (fused_sub_count)
# A streamed pass run in whole blocks first reads one byte of each cache line of
# a block of every input it reads in place, the inputs interleaved
# (``rtx_fx_touch``): the program then reads one or two inputs at a time, and a
# core fetching one stream at a time from memory leaves most of its parallelism
# unused.  4-op chain over 10M float32 on 2 threads (the AMD EPYC VM, on / off in
# one process, whole blocks): 7.1-7.9 -> 5.6-6.4 ms.  With sub-blocks it measured
# a loss (5.0 -> 6.5 ms), and passes that do not stream skip it: their inputs are
# mostly in cache, where it measured a cost.  It only loads (the same bits either
# way).
cdef bint FUSED_TOUCH = True


cdef struct FxPlan:
    int nin
    int nconst
    int nregs
    int ninstr
    int nout
    int nd
    Py_ssize_t total
    Py_ssize_t block
    int32_t* prog
    int32_t* out_regs
    int64_t* shape      # nd
    int64_t* strides    # nin * nd, in elements
    # direct, per input: FX_GATHER, FX_DIRECT (read in place: contiguous, covers the
    # output) or FX_SPLAT (one element broadcast everywhere: its slot is filled once
    # per thread)
    char* direct
    double* consts      # nconst
    double* imms
    char** inp          # nin base pointers
    char** outp         # nout base pointers
    int sum_reg         # the register summed (-1: none)
    bint stream         # outputs computed in their scratch slots, then streamed out
    Py_ssize_t sub      # elements per sub-block (>= block: the whole block at once)
    # adv, per register: 1 where its pointer moves with the sub-block (inputs
    # read in place or gathered, outputs written in place, the summed register),
    # 0 where it stays at its slot's start (temporaries, constants, one-value
    # inputs, streamed outputs)
    char* adv


# ------------------------------------------------------------------ the ops
cdef inline real _sel(bint keep, real x, real y) noexcept nogil:
    if real is float:
        return rtx_self(keep, x, y)
    else:
        return rtx_seld(keep, x, y)


cdef void _fx_unary(int op, real* d, const real* a, real k, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef real x, e, y, p, q
    cdef bint keep
    if op == FX_COPY:
        for i in range(n):
            d[i] = a[i]
    elif op == FX_NEG:
        for i in range(n):
            d[i] = -a[i]
    elif op == FX_EXP:
        for i in range(n):
            if real is float:
                d[i] = expf(a[i])
            else:
                d[i] = exp(a[i])
    elif op == FX_LOG:
        for i in range(n):
            if real is float:
                d[i] = logf(a[i])
            else:
                d[i] = log(a[i])
    elif op == FX_SQRT:
        for i in range(n):
            if real is float:
                d[i] = sqrtf(a[i])
            else:
                d[i] = sqrt(a[i])
    elif op == FX_ABS:
        for i in range(n):
            if real is float:
                d[i] = fabsf(a[i])
            else:
                d[i] = fabs(a[i])
    elif op == FX_SIGN:
        # sign(0) = 0, sign(nan) = nan
        for i in range(n):
            x = a[i]
            e = <real>((x > 0) - (x < 0))
            keep = x != x
            d[i] = _sel(keep, x, e)
    elif op == FX_TANH:
        for i in range(n):
            if real is float:
                d[i] = tanhf(a[i])
            else:
                d[i] = tanh(a[i])
    elif op == FX_ERF:
        for i in range(n):
            if real is float:
                d[i] = erff(a[i])
            else:
                d[i] = erf(a[i])
    elif op == FX_SIGMOID:
        # the CPU backend's stable form: exp(-|x|) never overflows (float: the
        # vectorised rtx_expf in _vmath.pxi's loop, in its AVX2 / AVX-512F copy
        # where the CPU has one; double: libm)
        if real is float:
            rtx_sigmoid_block_f32(d, a, n)
        else:
            for i in range(n):
                x = a[i]
                e = exp(-fabs(x))
                y = 1 + e
                p = 1 / y
                q = e / y
                keep = x >= 0
                d[i] = _sel(keep, p, q)
    elif op == FX_RELU:
        # maximum(x, 0) exactly as numpy's (the CPU backend's): NaN propagates,
        # and the 0 wins a tie (relu(-0.0) is +0.0)
        for i in range(n):
            x = a[i]
            keep = (x > 0) | (x != x)
            d[i] = _sel(keep, x, 0)
    elif op == FX_LEAKY_RELU:     # _vmath.pxi's loop (SIMD copies)
        if real is float:
            rtx_leaky_f32(d, a, k, n)
        else:
            rtx_leaky_f64(d, a, k, n)
    elif op == FX_ELU:
        # x > 0: x; else alpha * expm1(x) (x <= 0 or NaN there; float: the
        # vectorised expm1f in _vmath.pxi, in its AVX2 / AVX-512F copy where the
        # CPU has one; double: libm)
        if real is float:
            rtx_elu_block_f32(d, a, k, n)
        else:
            for i in range(n):
                x = a[i]
                y = k * expm1(x)
                keep = x > 0
                d[i] = _sel(keep, x, y)


cdef void _fx_binary(int op, real* d, const real* a, const real* b,
                     Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef real x, y
    cdef bint keep
    if FX_ADD <= op <= FX_DIV:     # _vmath.pxi's loops (SIMD copies; numpy's bits)
        if real is float:
            rtx_arith_f32(op - FX_ADD + RTX_ARITH_ADD, d, a, b, n)
        else:
            rtx_arith_f64(op - FX_ADD + RTX_ARITH_ADD, d, a, b, n)
    elif op == FX_POW:
        for i in range(n):
            if real is float:
                d[i] = powf(a[i], b[i])
            else:
                d[i] = c_pow(a[i], b[i])
    elif op == FX_MAXIMUM:
        # numpy's rule bit for bit: a NaN operand is returned (the first if both
        # are NaN), and a tie (-0.0 vs +0.0) returns the second operand
        for i in range(n):
            x = a[i]
            y = b[i]
            keep = (x > y) | (x != x)
            d[i] = _sel(keep, x, y)
    elif op == FX_MINIMUM:
        for i in range(n):
            x = a[i]
            y = b[i]
            keep = (x < y) | (x != x)
            d[i] = _sel(keep, x, y)
    elif FX_EQ <= op <= FX_GE:     # 1 or 0 (_vmath.pxi's loops, SIMD copies)
        if real is float:
            rtx_cmp_f32(op - FX_EQ + RTX_CMP_EQ, d, a, b, n)
        else:
            rtx_cmp_f64(op - FX_EQ + RTX_CMP_EQ, d, a, b, n)


cdef void _fx_where(real* d, const real* c, const real* a, const real* b,
                    Py_ssize_t n) noexcept nogil:
    # _vmath.pxi's bitwise select (SIMD copies)
    if real is float:
        rtx_where_f32(d, c, a, b, n)
    else:
        rtx_where_f64(d, c, a, b, n)


# ----------------------------------------------------------- the block loop
cdef void _fx_gather(real* dst, const real* base, const int64_t* strides,
                     const int64_t* shape, int nd, Py_ssize_t start,
                     Py_ssize_t n) noexcept nogil:
    """Elements ``start .. start+n`` (row-major over ``shape``) of a strided input."""
    cdef int64_t idx[FX_MAX_DIMS]
    cdef Py_ssize_t rem = start, off = 0, i = 0, run, j, sl, L
    cdef int d, last = nd - 1
    cdef const real* p
    cdef real v
    for d in range(nd - 1, -1, -1):
        idx[d] = rem % shape[d]
        rem = rem // shape[d]
        off += idx[d] * strides[d]
    sl = strides[last]
    L = shape[last]
    while i < n:
        run = L - idx[last]
        if run > n - i:
            run = n - i
        p = base + off
        if sl == 0:
            v = p[0]    # (a local: dst may alias p for all the compiler knows)
            for j in range(run):
                dst[i + j] = v
        elif sl == 1:
            for j in range(run):
                dst[i + j] = p[j]
        else:
            for j in range(run):
                dst[i + j] = p[j * sl]
        i += run
        off += run * sl
        idx[last] += run
        if idx[last] == L and i < n:
            off -= L * sl
            idx[last] = 0
            d = last - 1
            while d >= 0:
                idx[d] += 1
                off += strides[d]
                if idx[d] < shape[d]:
                    break
                off -= shape[d] * strides[d]
                idx[d] = 0
                d -= 1


cdef void _fx_thread_init(const FxPlan* P, real** regp, real* slots) noexcept nogil:
    """Point each register at its scratch slot; fill the constant registers and
    the slots of the inputs that hold one value (``FX_SPLAT``)."""
    cdef int r
    cdef Py_ssize_t i
    cdef real v
    for r in range(P.nregs):
        regp[r] = slots + r * P.block
    for r in range(P.nconst):
        v = <real>P.consts[r]
        for i in range(P.block):
            regp[P.nin + r][i] = v
    for r in range(P.nin):
        if P.direct[r] == FX_SPLAT:
            v = (<const real*>P.inp[r])[0]
            for i in range(P.block):
                regp[r][i] = v


cdef extern from *:
    """
    /* Read one byte of every cache line of p[0 .. k)'s first nbytes, the
       inputs interleaved, so that their misses overlap (see FUSED_TOUCH).
       Loads, not prefetches: prefetching the block (or the next) measured no
       gain. */
    static inline void rtx_fx_touch(const char* const* p, int k, size_t nbytes) {
        volatile char sink;
        for (size_t off = 0; off < nbytes; off += 64)
            for (int r = 0; r < k; r++)
                sink = p[r][off];
        (void)sink;
    }
    """
    void rtx_fx_touch(const char* const* p, int k, size_t nbytes) noexcept nogil


cdef inline void _fx_stream_out(char* d, const char* s, Py_ssize_t nbytes) noexcept nogil:
    """``d[0, nbytes) = s[0, nbytes)``, the 16-byte aligned middle of ``d`` with
    non-temporal stores (the same bytes; ``rtx_store_fence`` before others read)."""
    cdef Py_ssize_t head = (16 - <Py_ssize_t>(<size_t>d & 15)) & 15
    cdef Py_ssize_t body
    if head > nbytes:
        head = nbytes
    body = (nbytes - head) & ~(<Py_ssize_t>15)
    if head:
        memcpy(d, s, <size_t>head)
    if body:
        rtx_stream_copy(d + head, s + head, <size_t>body)
    if head + body < nbytes:
        memcpy(d + head + body, s + head + body, <size_t>(nbytes - head - body))


cdef inline void _fx_run(const FxPlan* P, real** regp, Py_ssize_t n) noexcept nogil:
    """The program over ``n`` elements of the registers ``regp``."""
    cdef int k, op
    cdef const int32_t* ins
    cdef real imm
    for k in range(P.ninstr):
        ins = P.prog + 6 * k
        op = ins[0]
        if op == FX_WHERE:
            _fx_where(regp[ins[1]], regp[ins[2]], regp[ins[3]], regp[ins[4]], n)
        elif _FX_ARITY[op] == 2:
            _fx_binary(op, regp[ins[1]], regp[ins[2]], regp[ins[3]], n)
        else:
            imm = <real>P.imms[ins[5]] if ins[5] >= 0 else 0
            _fx_unary(op, regp[ins[1]], regp[ins[2]], imm, n)


cdef void _fx_block(const FxPlan* P, real** regp, real* slots, Py_ssize_t start,
                    Py_ssize_t n, real* sum_dst) noexcept nogil:
    """Run the program over elements ``start .. start+n`` (``n <= P.block``),
    ``P.sub`` elements at a time; ``sum_dst`` (or NULL): where the summed
    register writes them instead of its scratch slot.  ``regp`` holds
    ``2 * P.nregs`` pointers: the block's registers, then a sub-block's."""
    cdef int r
    cdef Py_ssize_t j, m
    cdef real** cur = regp + P.nregs
    cdef const char* touch[8]
    cdef int ntouch = 0
    for r in range(P.nin):
        if P.direct[r] == FX_DIRECT:
            regp[r] = (<real*>P.inp[r]) + start
            if ntouch < 8:
                touch[ntouch] = <const char*>regp[r]
                ntouch += 1
        elif P.direct[r] == FX_GATHER:
            regp[r] = slots + r * P.block
            _fx_gather(regp[r], <const real*>P.inp[r], P.strides + r * P.nd, P.shape,
                       P.nd, start, n)
    for r in range(P.nout):
        if P.stream:
            regp[P.out_regs[r]] = slots + P.out_regs[r] * P.block
        else:
            regp[P.out_regs[r]] = (<real*>P.outp[r]) + start
    if sum_dst != NULL:
        regp[P.sum_reg] = sum_dst
    if P.stream and ntouch > 1 and FUSED_TOUCH and P.sub >= P.block:
        rtx_fx_touch(touch, ntouch, <size_t>(n * sizeof(real)))
    j = 0
    while j < n:
        m = n - j
        if m > P.sub:
            m = P.sub
        for r in range(P.nregs):
            cur[r] = regp[r] + j if P.adv[r] else regp[r]
        _fx_run(P, cur, m)
        if P.stream:
            for r in range(P.nout):
                _fx_stream_out(P.outp[r] + (start + j) * <Py_ssize_t>sizeof(real),
                               <const char*>cur[P.out_regs[r]], m * <Py_ssize_t>sizeof(real))
        j += m


cdef inline void _fx_block_at(const FxPlan* P, real** regp, real* slots,
                              Py_ssize_t b) noexcept nogil:
    cdef Py_ssize_t start = b * P.block
    cdef Py_ssize_t n = P.total - start
    if n > P.block:
        n = P.block
    _fx_block(P, regp, slots, start, n, NULL)


cdef void _fx_execute(real* tag, const FxPlan* P, char* scratch, Py_ssize_t per_thread,
                      real** regp_all, int nt) noexcept nogil:
    cdef Py_ssize_t nblocks = (P.total + P.block - 1) // P.block
    cdef Py_ssize_t b
    cdef int tid = 0
    cdef real** regp = regp_all
    cdef real* slots = <real*>scratch
    if nt <= 1:
        _fx_thread_init(P, regp_all, <real*>scratch)
        for b in range(nblocks):
            _fx_block_at(P, regp_all, <real*>scratch, b)
        if P.stream:
            rtx_store_fence()
        return
    with parallel(num_threads=nt):
        tid = rtx_omp_thread_num()
        regp = regp_all + 2 * tid * P.nregs
        slots = <real*>(scratch + tid * per_thread)
        _fx_thread_init(P, regp, slots)
        for b in prange(nblocks, schedule="dynamic", chunksize=8):
            _fx_block_at(P, regp, slots, b)
        if P.stream:
            rtx_store_fence()   # this thread's streamed stores, before the join


# ------------------------------------------------ the sum in numpy's order
cdef enum:
    FX_SUM_CHUNK = 16384    # the largest pairwise-tree node a thread sums alone
    FX_PW_BLOCK = 128       # numpy's PW_BLOCKSIZE


cdef extern from *:
    """
    /* One leaf of numpy's pairwise_sum (8 <= n <= 128): 8 accumulators over the
       multiple-of-8 part, combined as a tree, then the rest in order.  Written
       with an accumulator array so gcc keeps the 8 in vector registers (each
       lane is one accumulator: the same additions as the scalar form). */
    static inline float rtx_pw_leaf_f(const float* a, ptrdiff_t n) {
        float r[8], res;
        ptrdiff_t i, j;
        for (j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (j = 0; j < 8; j++) r[j] += a[i + j];
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    static inline double rtx_pw_leaf_d(const double* a, ptrdiff_t n) {
        double r[8], res;
        ptrdiff_t i, j;
        for (j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (j = 0; j < 8; j++) r[j] += a[i + j];
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    """
    float rtx_pw_leaf_f(const float* a, Py_ssize_t n) noexcept nogil
    double rtx_pw_leaf_d(const double* a, Py_ssize_t n) noexcept nogil


cdef real _fx_pairwise(const real* a, Py_ssize_t n) noexcept nogil:
    """numpy's ``pairwise_sum`` of a contiguous run, the same operations in the
    same order (so the same bits)."""
    cdef Py_ssize_t i, n2
    cdef real res, lo, hi
    if n < 8:
        res = 0
        for i in range(n):
            res = res + a[i]
        return res
    if n <= FX_PW_BLOCK:
        if real is float:
            return rtx_pw_leaf_f(a, n)
        else:
            return rtx_pw_leaf_d(a, n)
    n2 = n // 2
    n2 -= n2 % 8
    lo = _fx_pairwise(a, n2)
    hi = _fx_pairwise(a + n2, n - n2)
    return lo + hi


cdef Py_ssize_t _fx_sum_chunks(Py_ssize_t start, Py_ssize_t n, Py_ssize_t* starts,
                               Py_ssize_t* sizes, Py_ssize_t k) noexcept nogil:
    """The pairwise tree's chunks (its first nodes of at most FX_SUM_CHUNK
    elements) under the node ``start, n``, in order, from index ``k`` (arrays
    may be NULL: count only); returns the next index."""
    cdef Py_ssize_t n2
    if n <= FX_SUM_CHUNK:
        if starts != NULL:
            starts[k] = start
            sizes[k] = n
        return k + 1
    n2 = n // 2
    n2 -= n2 % 8
    k = _fx_sum_chunks(start, n2, starts, sizes, k)
    return _fx_sum_chunks(start + n2, n - n2, starts, sizes, k)


cdef real _fx_sum_combine(const real* part, Py_ssize_t n, Py_ssize_t* k) noexcept nogil:
    """The tree's nodes above the chunks: ``part`` holds the chunks' sums in
    order; ``k`` the next one to use."""
    cdef Py_ssize_t n2
    cdef real lo, hi
    if n <= FX_SUM_CHUNK:
        lo = part[k[0]]
        k[0] += 1
        return lo
    n2 = n // 2
    n2 -= n2 % 8
    lo = _fx_sum_combine(part, n2, k)
    hi = _fx_sum_combine(part, n - n2, k)
    return lo + hi


cdef void _fx_sum_chunk(const FxPlan* P, real** regp, real* slots, real* buf,
                        const Py_ssize_t* starts, const Py_ssize_t* sizes, real* part,
                        Py_ssize_t c, int stored) noexcept nogil:
    """Chunk ``c``: the program over its elements, the summed register written
    to ``buf`` (or, when it is also an output -- ``stored`` is its index --
    read back from that output), its pairwise sum to ``part[c]``."""
    cdef Py_ssize_t s = 0, m
    cdef Py_ssize_t n = sizes[c], start = starts[c]
    while s < n:
        m = n - s
        if m > P.block:
            m = P.block
        _fx_block(P, regp, slots, start + s, m, NULL if stored >= 0 else buf + s)
        s += m
    if stored >= 0:
        part[c] = _fx_pairwise((<const real*>P.outp[stored]) + start, n)
    else:
        part[c] = _fx_pairwise(buf, n)


cdef void _fx_execute_sum(real* tag, const FxPlan* P, char* scratch, Py_ssize_t per_thread,
                          real** regp_all, int nt, const Py_ssize_t* starts,
                          const Py_ssize_t* sizes, Py_ssize_t nchunks, real* part,
                          real* result) noexcept nogil:
    """The program over every chunk, each chunk's sum, then the sum of the
    whole output (``0 + pairwise``, as ``np.add.reduce`` starts from its identity).
    The chunk buffer of a thread follows its register slots in its scratch."""
    cdef Py_ssize_t c
    cdef Py_ssize_t k = 0
    cdef int tid = 0
    cdef real** regp = regp_all
    cdef real* slots = <real*>scratch
    cdef real* buf = <real*>(scratch + per_thread) - FX_SUM_CHUNK
    cdef real zero = 0
    cdef int r, stored = -1
    for r in range(P.nout):
        if P.out_regs[r] == P.sum_reg:
            stored = r
    if nt <= 1:
        _fx_thread_init(P, regp_all, slots)
        for c in range(nchunks):
            _fx_sum_chunk(P, regp_all, slots, buf, starts, sizes, part, c, stored)
        if P.stream:
            rtx_store_fence()
    else:
        with parallel(num_threads=nt):
            tid = rtx_omp_thread_num()
            regp = regp_all + 2 * tid * P.nregs
            slots = <real*>(scratch + tid * per_thread)
            buf = <real*>(scratch + (tid + 1) * per_thread) - FX_SUM_CHUNK
            _fx_thread_init(P, regp, slots)
            for c in prange(nchunks, schedule="dynamic", chunksize=1):
                _fx_sum_chunk(P, regp, slots, buf, starts, sizes, part, c, stored)
            if P.stream:
                rtx_store_fence()   # this thread's streamed stores, before the join
    result[0] = zero + _fx_sum_combine(part, P.total, &k)


# ------------------------------------------------------- the Python boundary
cdef inline Py_ssize_t _fx_data(cnp.ndarray a) noexcept:
    return <Py_ssize_t>cnp.PyArray_DATA(a)


cdef tuple _fx_extent(cnp.ndarray a):
    """(lowest, highest+1) byte address an array's elements occupy."""
    cdef Py_ssize_t lo = _fx_data(a), hi = lo
    cdef int d
    cdef cnp.npy_intp* sh = cnp.PyArray_DIMS(a)
    cdef cnp.npy_intp* st = cnp.PyArray_STRIDES(a)
    if cnp.PyArray_SIZE(a) == 0:
        return lo, lo
    for d in range(cnp.PyArray_NDIM(a)):
        if st[d] < 0:
            lo += (sh[d] - 1) * st[d]
        else:
            hi += (sh[d] - 1) * st[d]
    return lo, hi + cnp.PyArray_ITEMSIZE(a)


import numpy as _np_fx

# Programs already validated, by content (the private copy's bytes, the register
# counts, the immediates' count, the output registers): a program is checked once,
# not on every call (at 16x16 the checks cost more than the work).  Bounded.
cdef dict _fx_valid = {}
cdef Py_ssize_t FX_VALID_MAX = 4096


cdef _fx_check_program(const int32_t* prog, int ninstr, int nregs, int nin, int nconst,
                       Py_ssize_t nimm, const int32_t* out_regs, int nout, int sum_reg):
    """Raise ValueError unless the program (a private copy) is well formed.
    (``nregs`` is in range: fused_eval checks it before sizing its memory.)"""
    cdef int k, j, op, arity, r
    cdef Py_ssize_t s
    defined = [True] * (nin + nconst) + [False] * (nregs - nin - nconst)
    writes = [0] * nregs
    for k in range(ninstr):
        op = prog[6 * k]
        if not 0 <= op < FX_NOPS:
            raise ValueError(f"fused_eval: instruction {k} has an unknown opcode {op}")
        arity = _FX_ARITY[op]
        r = prog[6 * k + 1]
        if not nin + nconst <= r < nregs:
            raise ValueError(f"fused_eval: instruction {k} writes register {r}, "
                             "which is not a temporary")
        for j in range(3):
            s = prog[6 * k + 2 + j]
            if j < arity:
                if not 0 <= s < nregs or not defined[s]:
                    raise ValueError(f"fused_eval: instruction {k} reads register {s}, "
                                     "which is out of range or not yet written")
            elif s != -1:
                raise ValueError(f"fused_eval: instruction {k} has a stray operand {s}")
        s = prog[6 * k + 5]
        if _FX_IMM[op]:
            if not 0 <= s < nimm:
                raise ValueError(f"fused_eval: instruction {k} reads immediate {s}, "
                                 "which is out of range")
        elif s != -1:
            raise ValueError(f"fused_eval: instruction {k} has a stray immediate {s}")
        defined[r] = True
        writes[r] += 1
    if len({out_regs[j] for j in range(nout)}) != nout:
        raise ValueError("fused_eval: output registers must be distinct")
    for j in range(nout):
        r = out_regs[j]
        if not nin + nconst <= r < nregs or writes[r] != 1:
            raise ValueError(f"fused_eval: output register {r} must be a temporary "
                             "written by exactly one instruction")
    if sum_reg != -1 and (not nin + nconst <= sum_reg < nregs or writes[sum_reg] != 1):
        raise ValueError(f"fused_eval: the summed register {sum_reg} must be a temporary "
                         "written by exactly one instruction")


cdef inline Py_ssize_t _fx_up(Py_ssize_t n) noexcept:
    return (n + 63) & ~(<Py_ssize_t>63)


cdef inline bint _fx_int32_c(object a) noexcept:
    """Whether ``a`` is an int32 C-contiguous numpy array in native byte order
    (then read as it is: no ``ascontiguousarray`` call)."""
    return (isinstance(a, cnp.ndarray)
            and cnp.PyArray_TYPE(<cnp.ndarray>a) == cnp.NPY_INT32
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>a)
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a))


def fused_eval(prog, int nregs, list inputs, consts, imms, list outputs, out_regs,
               tuple shape, int num_threads=1, Py_ssize_t block=2048, int sum_reg=-1,
               sum_out=None):
    #: prog: npt.ArrayLike
    #: inputs: list[_Real]
    #: consts: npt.ArrayLike
    #: imms: npt.ArrayLike
    #: outputs: list[_Real]
    #: out_regs: npt.ArrayLike
    #: shape: tuple[int, ...]
    #: sum_out: _Real | None
    """Run a fused elementwise program (see the top of ``_fused.pxi``).

    ``inputs``: arrays of the program's dtype (float32 or float64), each
    broadcastable to ``shape``; ``outputs``: fresh C-contiguous arrays of
    ``shape`` and that dtype, written at ``out_regs``.  With ``sum_reg`` (a
    temporary register) the sum of that register over the whole output, in
    numpy's order, is written to ``sum_out`` (one element of the dtype); then
    ``outputs`` may be empty.  Raises ``TypeError`` / ``ValueError`` before
    anything is written when any part is inconsistent.  A pass that moves at
    least ``get_fused_stream_min_bytes()`` writes its outputs with non-temporal
    stores (the same bits).
    """
    global FUSED_STREAMED, FUSED_SUBBLOCKED
    cdef cnp.ndarray pa, oa, x
    cdef int nin = len(inputs), nout = len(outputs), nconst, ninstr, D, nd, i, j, k, g, xd
    cdef int nt, typenum, nz, r
    cdef bint summing
    cdef Py_ssize_t total = 1, itemsize, per_thread, s, acc, nimm, lo, hi, nbytes, moved
    cdef Py_ssize_t nchunks = 0, o_cst, o_csz, o_part
    cdef Py_ssize_t* cst_c
    cdef float sum_f = 0
    cdef double sum_d = 0
    cdef Py_ssize_t* csz_c
    cdef char* part_c
    cdef Py_ssize_t o_prog, o_outr, o_shp, o_str, o_dir, o_con, o_imm, o_inp, o_outp
    cdef Py_ssize_t o_regp, o_span, o_sv, o_scr, o_adv
    cdef FxPlan P
    cdef char* block_c = NULL
    cdef char* sp
    cdef int32_t* prog_c
    cdef int32_t* outr_c
    cdef int64_t* shp_c
    cdef int64_t* str_c
    cdef char* dir_c
    cdef char* adv_c
    cdef double* con_c
    cdef double* imm_c
    cdef char** inp_c
    cdef char** outp_c
    cdef void** regp
    cdef Py_ssize_t* span_c     # (lo, hi) per output, then per input
    cdef int64_t* sv_c          # nin * D element strides (0 where broadcast)
    cdef int64_t full_shape[FX_MAX_DIMS]
    cdef cnp.npy_intp* xs
    cdef cnp.npy_intp* xst

    # -- arguments as arrays of the kernel's types (no copy when they already are)
    pa = prog if _fx_int32_c(prog) else _np_fx.ascontiguousarray(prog, dtype=_np_fx.int32)
    if pa.ndim != 2 or pa.shape[1] != 6:
        raise ValueError("fused_eval: the program must be an (n, 6) int32 array")
    # (the callers' lists of Python floats are read as they are: no array made)
    if type(consts) is not list:
        consts = _np_fx.ascontiguousarray(consts, dtype=_np_fx.float64).reshape(-1)
    if type(imms) is not list:
        imms = _np_fx.ascontiguousarray(imms, dtype=_np_fx.float64).reshape(-1)
    if _fx_int32_c(out_regs) and cnp.PyArray_NDIM(<cnp.ndarray>out_regs) == 1:
        oa = out_regs
    else:
        oa = _np_fx.ascontiguousarray(out_regs, dtype=_np_fx.int32).reshape(-1)
    ninstr = <int>pa.shape[0]
    nconst = len(consts)
    nimm = len(imms)
    summing = sum_reg != -1
    if oa.shape[0] != nout or (nout < 1 and not summing):
        raise ValueError("fused_eval: need one output register per output (and >= 1 output "
                         "or a summed register)")
    if not nin + nconst <= nregs <= FX_MAX_REGS:
        raise ValueError(f"fused_eval: nregs={nregs} must be in [{nin + nconst}, {FX_MAX_REGS}]")

    # -- shape
    D = len(shape)
    if D > FX_MAX_DIMS:
        raise ValueError(f"fused_eval: at most {FX_MAX_DIMS} dims")
    for i in range(D):
        s = shape[i]
        if s < 0:
            raise ValueError(f"fused_eval: negative extent in shape {shape}")
        full_shape[i] = s
        if s and total > (<Py_ssize_t>1 << 62) // s:
            raise ValueError(f"fused_eval: shape {shape} is too large")
        total *= s
    if not 16 <= block <= (1 << 16):
        raise ValueError("fused_eval: block must be in [16, 65536]")
    if block > total:
        # one block holds everything: no larger than the elements (rounded up to
        # 64), so a small call sizes and fills (constants) no more scratch than it
        # uses.  (Blocks only cut the work; the bits never depend on them.)
        block = max(16, _fx_up(total))

    # -- one block of private C memory for everything the nogil loop reads
    first = outputs[0] if nout else sum_out
    if not isinstance(first, cnp.ndarray) or cnp.PyArray_TYPE(<cnp.ndarray>first) not in (
            cnp.NPY_FLOAT32, cnp.NPY_FLOAT64):
        raise TypeError("fused_eval: outputs must be float32 or float64 numpy arrays")
    typenum = cnp.PyArray_TYPE(<cnp.ndarray>first)
    itemsize = cnp.PyArray_ITEMSIZE(<cnp.ndarray>first)
    if summing:
        if (not isinstance(sum_out, cnp.ndarray)
                or cnp.PyArray_TYPE(<cnp.ndarray>sum_out) != typenum):
            raise TypeError(f"fused_eval: sum_out must be a {first.dtype} numpy array")
        if (cnp.PyArray_SIZE(<cnp.ndarray>sum_out) != 1
                or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>sum_out)):
            raise ValueError("fused_eval: sum_out must be a writable array of one element")
        if total:
            nchunks = _fx_sum_chunks(0, total, NULL, NULL, 0)
    elif sum_out is not None:
        raise ValueError("fused_eval: sum_out without a summed register (sum_reg)")
    nt = _clamp_threads(num_threads)
    if total < FUSED_PARALLEL_MIN:
        nt = 1
    if nt > (total + block - 1) // block:
        nt = <int>((total + block - 1) // block)
    if summing and nt > nchunks:
        nt = <int>nchunks
    if nt < 1:
        nt = 1
    per_thread = _fx_up(nregs * block * itemsize)
    if summing:
        per_thread += _fx_up(FX_SUM_CHUNK * itemsize)  # the chunk buffer, at the end
    o_prog = 0
    o_outr = o_prog + _fx_up(max(ninstr, 1) * 6 * sizeof(int32_t))
    o_shp = o_outr + _fx_up(nout * sizeof(int32_t))
    o_str = o_shp + _fx_up(max(D, 1) * sizeof(int64_t))
    o_dir = o_str + _fx_up(max(nin, 1) * max(D, 1) * sizeof(int64_t))
    o_con = o_dir + _fx_up(max(nin, 1))
    o_imm = o_con + _fx_up(max(nconst, 1) * sizeof(double))
    o_inp = o_imm + _fx_up(max(nimm, 1) * sizeof(double))
    o_outp = o_inp + _fx_up(max(nin, 1) * sizeof(char*))
    o_regp = o_outp + _fx_up(nout * sizeof(char*))
    o_adv = o_regp + _fx_up(2 * nt * nregs * sizeof(void*))
    o_span = o_adv + _fx_up(nregs)
    o_sv = o_span + _fx_up(2 * (nout + nin) * sizeof(Py_ssize_t))
    o_cst = o_sv + _fx_up(max(nin, 1) * max(D, 1) * sizeof(int64_t))
    o_csz = o_cst + _fx_up(max(nchunks, 1) * sizeof(Py_ssize_t))
    o_part = o_csz + _fx_up(max(nchunks, 1) * sizeof(Py_ssize_t))
    o_scr = o_part + _fx_up(max(nchunks, 1) * sizeof(double))
    nbytes = o_scr + nt * per_thread + 64
    block_c = <char*>malloc(nbytes)
    if block_c == NULL:
        raise MemoryError("fused_eval: out of memory for the program's scratch")
    try:
        prog_c = <int32_t*>(block_c + o_prog)
        outr_c = <int32_t*>(block_c + o_outr)
        shp_c = <int64_t*>(block_c + o_shp)
        str_c = <int64_t*>(block_c + o_str)
        dir_c = block_c + o_dir
        con_c = <double*>(block_c + o_con)
        imm_c = <double*>(block_c + o_imm)
        inp_c = <char**>(block_c + o_inp)
        outp_c = <char**>(block_c + o_outp)
        regp = <void**>(block_c + o_regp)
        adv_c = block_c + o_adv
        span_c = <Py_ssize_t*>(block_c + o_span)
        sv_c = <int64_t*>(block_c + o_sv)
        cst_c = <Py_ssize_t*>(block_c + o_cst)
        csz_c = <Py_ssize_t*>(block_c + o_csz)
        part_c = block_c + o_part
        memcpy(prog_c, cnp.PyArray_DATA(pa), ninstr * 6 * sizeof(int32_t))
        memcpy(outr_c, cnp.PyArray_DATA(oa), nout * sizeof(int32_t))
        for j in range(nconst):
            con_c[j] = consts[j]
        for j in range(nimm):
            imm_c[j] = imms[j]

        # -- the program, checked on the private copy (once per distinct program)
        key = (<bytes>(<char*>prog_c)[:ninstr * 6 * sizeof(int32_t)], nregs, nin, nconst,
               nimm, <bytes>(<char*>outr_c)[:nout * sizeof(int32_t)], sum_reg)
        if key not in _fx_valid:
            _fx_check_program(prog_c, ninstr, nregs, nin, nconst, nimm, outr_c, nout, sum_reg)
            if len(_fx_valid) >= FX_VALID_MAX:
                _fx_valid.clear()
            _fx_valid[key] = None

        # -- outputs and inputs
        for j in range(nout):
            o = outputs[j]
            if not isinstance(o, cnp.ndarray) or cnp.PyArray_TYPE(<cnp.ndarray>o) != typenum:
                raise TypeError(f"fused_eval: every output must be a {first.dtype} numpy array")
            if (not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>o)
                    or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>o)
                    or cnp.PyArray_SIZE(<cnp.ndarray>o) != total):
                raise ValueError("fused_eval: outputs must be writable, C-contiguous and hold "
                                 f"{total} elements")
            span_c[2 * j], span_c[2 * j + 1] = _fx_extent(<cnp.ndarray>o)
            outp_c[j] = <char*>_fx_data(<cnp.ndarray>o)
        for i in range(nin):
            xo = inputs[i]
            if not isinstance(xo, cnp.ndarray) or cnp.PyArray_TYPE(<cnp.ndarray>xo) != typenum:
                raise TypeError(f"fused_eval: every input must be a {first.dtype} numpy array")
            x = <cnp.ndarray>xo
            xd = cnp.PyArray_NDIM(x)
            if xd > D:
                raise ValueError(
                    f"fused_eval: input of shape {xo.shape} has more dims than {shape}")
            xs = cnp.PyArray_DIMS(x)
            xst = cnp.PyArray_STRIDES(x)
            for j in range(D):
                sv_c[i * D + j] = 0
            for j in range(xd):
                if xs[j] != 1 and xs[j] != full_shape[D - xd + j]:
                    raise ValueError(f"fused_eval: input of shape {xo.shape} does not broadcast "
                                     f"to {shape}")
                if xst[j] % itemsize:
                    raise ValueError("fused_eval: input strides must be multiples of the itemsize")
                if xs[j] != 1:
                    sv_c[i * D + D - xd + j] = xst[j] // itemsize
            span_c[2 * (nout + i)], span_c[2 * (nout + i) + 1] = _fx_extent(x)
            inp_c[i] = <char*>_fx_data(x)
        for i in range(nout):
            lo, hi = span_c[2 * i], span_c[2 * i + 1]
            for j in range(nout + nin):
                if j != i and (j < i or j >= nout) and lo < span_c[2 * j + 1] \
                        and span_c[2 * j] < hi:
                    raise ValueError("fused_eval: an output overlaps an input or another output")
        if summing:
            lo, hi = _fx_extent(<cnp.ndarray>sum_out)
            for j in range(nout + nin):
                if lo < span_c[2 * j + 1] and span_c[2 * j] < hi:
                    raise ValueError("fused_eval: sum_out overlaps an input or an output")
        if total == 0:
            if summing:
                sum_out.fill(0)
            return

        # -- collapse dims: size-1 dims dropped, neighbours merged where every
        # input is contiguous across them.  Groups go to shp_c, their strides to
        # str_c in rows D apart (the input's row of sv_c), then packed nd apart.
        nd = 0
        for j in range(D):
            if full_shape[j] == 1:
                continue
            g = nd - 1
            if g >= 0:
                for i in range(nin):
                    if str_c[i * D + g] != sv_c[i * D + j] * full_shape[j]:
                        g = -1
                        break
            if g >= 0:
                shp_c[g] *= full_shape[j]
            else:
                g = nd
                shp_c[g] = full_shape[j]
                nd += 1
            for i in range(nin):
                str_c[i * D + g] = sv_c[i * D + j]
        if nd == 0:
            nd = 1
            shp_c[0] = 1
            for i in range(nin):
                str_c[i] = 0
        elif nd != D:
            # (in place: each destination precedes the sources still to be read)
            for i in range(nin):
                for j in range(nd):
                    str_c[i * nd + j] = str_c[i * D + j]
        for i in range(nin):
            acc = 1
            dir_c[i] = FX_DIRECT
            nz = 0
            for j in range(nd - 1, -1, -1):
                if str_c[i * nd + j] != acc:
                    dir_c[i] = FX_GATHER
                if str_c[i * nd + j] != 0:
                    nz = 1
                acc *= shp_c[j]
            if nz == 0 and total > 1:
                dir_c[i] = FX_SPLAT
        P.nin = nin
        P.nconst = nconst
        P.nregs = nregs
        P.ninstr = ninstr
        P.nout = nout
        P.nd = nd
        P.total = total
        P.block = block
        P.prog = prog_c
        P.out_regs = outr_c
        P.shape = shp_c
        P.strides = str_c
        P.direct = dir_c
        P.consts = con_c
        P.imms = imm_c
        P.inp = inp_c
        P.outp = outp_c
        P.sum_reg = sum_reg
        # stream the outputs of a pass that moves more than the cache holds (not
        # when the summed register is stored: its sum reads that output back)
        moved = nout
        for i in range(nin):
            if dir_c[i] != FX_SPLAT:
                moved += 1
        P.stream = (RTX_HAVE_STREAM and nout > 0
                    and moved * total * itemsize >= FUSED_STREAM_MIN_BYTES)
        for j in range(nout):
            if outr_c[j] == sum_reg:
                P.stream = False
        if P.stream:
            FUSED_STREAMED += 1
        for r in range(nregs):
            adv_c[r] = r < nin and dir_c[r] != FX_SPLAT
        if not P.stream:
            for j in range(nout):
                adv_c[outr_c[j]] = 1
        if summing:
            adv_c[sum_reg] = 1
        P.adv = adv_c
        # sub-blocks for a short program over more than one block (a pass that
        # fits one block is in cache: it runs as one)
        P.sub = block
        if (0 < FUSED_SUB_BYTES // itemsize < block < total
                and ninstr <= FUSED_SUB_MAX_INSTR):
            P.sub = FUSED_SUB_BYTES // itemsize
            FUSED_SUBBLOCKED += 1
        if summing:
            _fx_sum_chunks(0, total, cst_c, csz_c, 0)
        # 64-byte aligned scratch slots
        sp = block_c + o_scr
        sp = sp + ((64 - (<size_t>sp) % 64) % 64)
        with nogil:
            if summing and itemsize == 4:
                _fx_execute_sum(<float*>NULL, &P, sp, per_thread, <float**>regp, nt, cst_c,
                                csz_c, nchunks, <float*>part_c, &sum_f)
            elif summing:
                _fx_execute_sum(<double*>NULL, &P, sp, per_thread, <double**>regp, nt, cst_c,
                                csz_c, nchunks, <double*>part_c, &sum_d)
            elif itemsize == 4:
                _fx_execute(<float*>NULL, &P, sp, per_thread, <float**>regp, nt)
            else:
                _fx_execute(<double*>NULL, &P, sp, per_thread, <double**>regp, nt)
        if summing:
            sum_out.flat[0] = sum_f if itemsize == 4 else sum_d
    finally:
        free(block_c)


def fused_unary(str name, a, double k=0.0):
    #: a: object
    #: -> npt.NDArray[Any] | None
    """The fused evaluator's unary op ``name`` (a key of ``FUSED_OPS``; ``k`` its
    immediate, for ``leaky_relu`` / ``elu``) over ``a`` into a new owned array,
    by the evaluator's own loop on the calling thread: ``fused_eval``'s bits
    without a program, for the small calls where its planning costs more than the
    loop.  Only for a C-contiguous float32 / float64 numpy array of fewer than
    ``get_fused_parallel_min()`` elements (a size ``fused_eval`` runs on one
    thread too); None for any other ``a`` (the caller takes the general path).
    ``ValueError`` for a name that is not a unary op."""
    cdef cnp.ndarray x, out
    cdef int op, t
    cdef Py_ssize_t n
    spec = FUSED_OPS.get(name)
    if spec is None or spec.arity != 1 or spec.predicate:
        raise ValueError(f"fused_unary: {name!r} is not a unary op of the fused evaluator")
    op = spec.opcode
    if type(a) is not cnp.ndarray:
        return None
    x = <cnp.ndarray>a
    t = cnp.PyArray_TYPE(x)
    if (t != cnp.NPY_FLOAT32 and t != cnp.NPY_FLOAT64) or not cnp.PyArray_IS_C_CONTIGUOUS(x):
        return None
    n = cnp.PyArray_SIZE(x)
    if n >= FUSED_PARALLEL_MIN:
        return None
    out = _storage_like(x)
    with nogil:    # (out is private; x's size and data pointer were read above)
        if t == cnp.NPY_FLOAT32:
            _fx_unary(op, <float*>cnp.PyArray_DATA(out), <const float*>cnp.PyArray_DATA(x),
                      <float>k, n)
        else:
            _fx_unary(op, <double*>cnp.PyArray_DATA(out), <const double*>cnp.PyArray_DATA(x),
                      k, n)
    return out


def fused_stream_count():
    #: -> int
    """How many fused passes wrote their outputs with non-temporal stores."""
    return FUSED_STREAMED


def fused_sub_count():
    #: -> int
    """How many fused passes ran their program in sub-blocks."""
    return FUSED_SUBBLOCKED


def set_fused_touch(bint on):
    #: -> bool
    """Whether a streamed fused pass touches the block of its in-place inputs it
    is about to compute first (the default; the same bits either way); returns
    the old setting."""
    global FUSED_TOUCH
    old = FUSED_TOUCH
    FUSED_TOUCH = on
    return old


def set_fused_sub_bytes(Py_ssize_t n):
    #: -> int
    """How many bytes of a block a fused pass runs its program over at a time,
    for a short program (at most 8 instructions) over more than one block (0:
    whole blocks; the same bits either way); returns the old setting."""
    global FUSED_SUB_BYTES
    if n < 0:
        raise ValueError("the sub-block must be >= 0 bytes")
    old = FUSED_SUB_BYTES
    FUSED_SUB_BYTES = n
    return old


def get_fused_stream_min_bytes():
    #: -> int
    """Bytes a fused pass moves (outputs and full inputs) from which it writes its
    outputs with non-temporal stores (the same bits)."""
    return FUSED_STREAM_MIN_BYTES


def set_fused_stream_min_bytes(Py_ssize_t n):
    #: -> int
    """Set the fused kernels' streaming threshold (bytes); returns the old one."""
    global FUSED_STREAM_MIN_BYTES
    if n < 0:
        raise ValueError("the threshold must be >= 0")
    old = FUSED_STREAM_MIN_BYTES
    FUSED_STREAM_MIN_BYTES = n
    return old


def get_fused_parallel_min():
    #: -> int
    """Elements below which a fused call runs on one thread."""
    return FUSED_PARALLEL_MIN


def set_fused_parallel_min(Py_ssize_t n):
    #: -> int
    """Set the fused kernels' parallel threshold (elements); returns the old one."""
    global FUSED_PARALLEL_MIN
    if n < 0:
        raise ValueError("the threshold must be >= 0")
    old = FUSED_PARALLEL_MIN
    FUSED_PARALLEL_MIN = n
    return old
