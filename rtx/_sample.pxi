# Heterogeneous neighbour sampling (the Python face is rtx/loader/sampler.py).
#
# The graph: per relation j = (s, r, d) a destination-grouped adjacency, ``ptr_j``
# (int64, N_d + 1) and ``col_j`` (int32 or int64 source ids, one dtype for all
# relations), both immutable index snapshots checked once here.
#
# One call samples a batch hop by hop with PyG's semantics: the seeds are hop 0's
# frontier of their type; at hop k every relation (s, r, d), in the order given,
# lets each frontier node of type d draw fanout[j][k] of its s-type in-neighbours
# (-1: all of them; without replacement min(fanout, degree), with replacement
# exactly fanout when the degree is > 0; drawn without replacement, a node's
# neighbours come out in edge order, as "all" does).  Sources not seen before are appended to
# n_id[s] (a node appears once per type, in first-appearance order over relations,
# frontier nodes and draws); the frontier of hop k + 1 is what hop k appended.
#
# Determinism: the draws of a frontier node are a counter-based stream
# (splitmix64's finaliser over a hash of (seed, epoch, batch, hop, relation, the
# node's GLOBAL id) plus the draw number), so they do not depend on which thread
# draws them or on the order of the frontier.  Per hop: a count pass (each
# (relation, frontier node) pair's number of draws), a serial prefix sum (each
# pair's slot in its relation's edge list), a fill pass writing the drawn global
# ids into those slots, then a relabelling pass that, per source node type, goes
# over that type's slots serially in (relation, frontier node, draw) order,
# assigns local ids (first appearance wins) and rewrites the slots to local ids.
# The count and fill passes write disjoint slots, the relabelling gives each node
# type (its map, its n_id, the slots of the relations out of it) to one thread,
# and the outputs are filled per type and relation: the result is the same bits
# at any thread count.
#
# The global -> local maps are one int64 array of N_t entries (-1 = not sampled)
# per node type, taken from a pool for the call and put back after every entry the
# call set was reset: a call touches only what it sampled, never O(N) per batch,
# and concurrent calls (a loader thread and the main thread) use different maps.
# The graph arrays are read-only; all other state is per call.  No call holds the
# GIL while it samples.
#
# Seeds may be of several node types at once (a link loader's two end point types):
# each type's seeds are copied into its n_id first and all of them are hop 0's
# frontier (pyg-lib's seed_dict).  With edge ids (the kernel built with ``eperms``,
# each relation's CSR position -> edge id permutation), the fill pass also writes
# each draw's CSR position into a second slot array, and the outputs map those
# through the permutation: PyG's ``e_id``.
#
# The edges of a relation come out grouped by destination: the frontier of a hop
# is a contiguous range of local ids following the previous hop's, and a hop's
# pairs are filled in frontier order, so destination local ids never decrease.
# The call returns the destination pointers ``ptr`` (over all n_id[d]) and the
# identity permutation: exactly the CSR grouping ``IndexPlan.csr()`` would compute
# (a stable counting sort of already sorted indices), built without a sort.

from libc.stdlib cimport calloc, qsort, realloc

cdef extern from *:
    """
    #define RTX_GOLDEN 0x9E3779B97F4A7C15ULL
    /* splitmix64's finaliser: a bijection of 64-bit words with full avalanche. */
    static inline uint64_t rtx_mix64(uint64_t z) {
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    static inline uint64_t rtx_combine(uint64_t h, uint64_t x) {
        return rtx_mix64(h ^ (x + RTX_GOLDEN + (h << 6) + (h >> 2)));
    }
    /* Draw i of the stream ``key`` (splitmix64 with state key + i * golden). */
    static inline uint64_t rtx_draw(uint64_t key, uint64_t i) {
        return rtx_mix64(key + (i + 1) * RTX_GOLDEN);
    }
    /* floor(r * n / 2^64): uniform in [0, n) up to a bias below n / 2^64.  The
       portable branch computes the same high word, so every compiler draws the
       same bits. */
    static inline uint64_t rtx_below(uint64_t r, uint64_t n) {
    #if defined(__SIZEOF_INT128__)
        return (uint64_t)(((unsigned __int128)r * n) >> 64);
    #else
        uint64_t rl = (uint32_t)r, rh = r >> 32, nl = (uint32_t)n, nh = n >> 32;
        uint64_t ll = rl * nl, lh = rl * nh, hl = rh * nl, hh = rh * nh;
        uint64_t mid = (ll >> 32) + (uint32_t)lh + (uint32_t)hl;
        return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
    #endif
    }
    """
    const uint64_t RTX_GOLDEN
    uint64_t rtx_mix64(uint64_t z) noexcept nogil
    uint64_t rtx_combine(uint64_t h, uint64_t x) noexcept nogil
    uint64_t rtx_draw(uint64_t key, uint64_t i) noexcept nogil
    uint64_t rtx_below(uint64_t r, uint64_t n) noexcept nogil

import threading as _threading_sample

import numpy as _np_sample

cdef enum:
    # Fanouts up to this test membership by a scan of the positions drawn so far
    # (at most 32 * 31 / 2 compares); larger ones use a per-thread hash set.  Both
    # give the same draws.
    FLOYD_SCAN_MAX = 32
    # Pairs handed to a thread at a time by the fill pass.
    SAMPLE_CHUNK = 64
    # Sampled ids prefetched ahead by the relabelling pass.
    RELABEL_AHEAD = 16
    # Output arrays per relation: sources, destinations, pointers, permutation,
    # edge ids.
    OUT_PER_REL = 5

# (relation, frontier node) pairs in a hop from which the count and fill passes
# use threads; below it the team's start-up costs more than the pass.
cdef Py_ssize_t SAMPLE_PARALLEL_MIN = 1024
# Edges in a batch per pair of SAMPLE_PARALLEL_MIN from which the outputs are
# filled by several threads (65536 edges at the default).
cdef Py_ssize_t OUTPUT_PARALLEL_EDGES_PER_PAIR = 64
# Largest fanout the kernel takes (counts and prefix sums then stay far from
# int64 overflow).
cdef int64_t SAMPLE_MAX_FANOUT = 2147483647


def set_sample_parallel_min(Py_ssize_t pairs):
    #: -> int
    """(relation, frontier node) pairs per hop from which the sampler uses threads
    (and 64 times as many edges per batch for filling the outputs); returns the old
    value (for tests and benchmarks: samples never depend on it)."""
    global SAMPLE_PARALLEL_MIN
    if pairs < 0:
        raise ValueError("pairs must be >= 0")
    old = SAMPLE_PARALLEL_MIN
    SAMPLE_PARALLEL_MIN = pairs
    return old


cdef struct _Vec:
    int64_t* p
    Py_ssize_t n
    Py_ssize_t cap


cdef int _vec_reserve(_Vec* v, Py_ssize_t need) noexcept nogil:
    """Capacity for ``need`` entries (0, or -1 when out of memory)."""
    cdef Py_ssize_t cap
    cdef int64_t* q
    if need <= v.cap:
        return 0
    if need > (<Py_ssize_t>1 << 59):
        return -1
    cap = 2 * v.cap
    if cap < need:
        cap = need
    if cap < 16:
        cap = 16
    q = <int64_t*>realloc(v.p, <size_t>cap * sizeof(int64_t))
    if q == NULL:
        return -1
    v.p = q
    v.cap = cap
    return 0


cdef struct _Call:
    # the graph (read-only, owned by the HeteroSamplerKernel)
    Py_ssize_t T
    Py_ssize_t R
    Py_ssize_t L
    bint replace
    const Py_ssize_t* rel_src
    const Py_ssize_t* rel_dst
    const int64_t** ptrs
    const int64_t* fanouts      # [R * L]
    const int64_t** eperm       # [R] CSR position -> edge id, or NULL (no edge ids)
    # this call
    int nthreads
    uint64_t key
    Py_ssize_t hop
    int64_t** maps              # [T] global -> local, -1 = not sampled
    _Vec* nid                   # [T] global ids, in local order
    _Vec* esrc                  # [R] source ids of the edges (local once relabelled)
    _Vec* eptr                  # [R] destination pointers so far (eptr[0] = 0)
    int* tstat                  # [T] relabelling status per type (0 / -1)
    Py_ssize_t* fb              # [T] frontier begin
    Py_ssize_t* fe              # [T] frontier end
    Py_ssize_t* roff            # [R + 1] first pair of each relation in this hop
    uint64_t* hkey              # [R] the hop's stream key of each relation
    int64_t** eout              # [R] this hop's edge slots of each relation
    _Vec* epos                  # [R] CSR positions of the drawn edges (with eperm)
    int64_t** pout              # [R] this hop's position slots of each relation
    _Vec cnt                    # [P] draws of each pair
    _Vec eoff                   # [P] first slot of each pair in its relation's edges
    int64_t* hop_nodes          # [(L + 1) * T] nodes added per hop and type
    int64_t* hop_edges          # [L * R] edges sampled per hop and relation
    int64_t* scratch            # [nthreads * stride] Floyd's positions + hash set
    Py_ssize_t stride
    Py_ssize_t tbits            # log2 of the hash set's slots (0: scan)


cdef inline int64_t _num_draws(int64_t f, int64_t deg, bint replace) noexcept nogil:
    if deg == 0 or f == 0:
        return 0
    if f < 0:
        return deg
    if replace:
        return f
    return f if f < deg else deg


cdef inline Py_ssize_t _rel_of(const Py_ssize_t* roff, Py_ssize_t R, Py_ssize_t p) noexcept nogil:
    """The relation whose pair range holds pair ``p`` (the last j with roff[j] <= p)."""
    cdef Py_ssize_t lo = 0, hi = R - 1, mid
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if roff[mid] <= p:
            lo = mid
        else:
            hi = mid - 1
    return lo


cdef void _floyd(uint64_t key, int64_t deg, int64_t f, int64_t* pos, int64_t* table,
                 Py_ssize_t tbits) noexcept nogil:
    """``pos[0:f]`` = a uniform f-subset of [0, deg) (Floyd's algorithm; 0 < f < deg),
    in the order it is drawn.  ``tbits`` > 0: membership through ``table`` (2**tbits
    slots, at least 2 * f), else a scan of ``pos``."""
    cdef int64_t jj, t, q
    cdef Py_ssize_t n = 0, slot, mask = 0
    cdef bint seen
    if tbits > 0:
        mask = ((<Py_ssize_t>1) << tbits) - 1
        memset(table, 0, <size_t>(mask + 1) * sizeof(int64_t))
    for jj in range(deg - f, deg):
        t = <int64_t>rtx_below(rtx_draw(key, <uint64_t>n), <uint64_t>(jj + 1))
        seen = False
        if tbits == 0:
            for q in range(n):
                if pos[q] == t:
                    seen = True
                    break
            if seen:
                t = jj
        else:
            slot = <Py_ssize_t>((<uint64_t>t * RTX_GOLDEN) >> (64 - tbits))
            while table[slot] != 0:
                if table[slot] == t + 1:
                    seen = True
                    break
                slot = (slot + 1) & mask
            if seen:
                # jj was never drawn (everything so far is < jj): insert it
                t = jj
                slot = <Py_ssize_t>((<uint64_t>t * RTX_GOLDEN) >> (64 - tbits))
                while table[slot] != 0:
                    slot = (slot + 1) & mask
            table[slot] = t + 1
        pos[n] = t
        n += 1


cdef int _cmp_i64(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*>a)[0]
    cdef int64_t y = (<const int64_t*>b)[0]
    return (x > y) - (x < y)


cdef void _sort_positions(int64_t* pos, int64_t n) noexcept nogil:
    """Ascending (distinct values: any correct sort gives the same order)."""
    cdef int64_t i, k, v
    if n > FLOYD_SCAN_MAX:
        qsort(pos, <size_t>n, sizeof(int64_t), _cmp_i64)
        return
    for i in range(1, n):
        v = pos[i]
        k = i - 1
        while k >= 0 and pos[k] > v:
            pos[k + 1] = pos[k]
            k -= 1
        pos[k + 1] = v


cdef void _fill_pair(_Call* c, const index_t** cols, Py_ssize_t p, int64_t* pos,
                     int64_t* table) noexcept nogil:
    """Write pair ``p``'s draws (global source ids) into its edge slots."""
    cdef Py_ssize_t j = _rel_of(c.roff, c.R, p)
    cdef int64_t n = c.cnt.p[p]
    cdef Py_ssize_t d, q
    cdef int64_t v, start, deg, f, r
    cdef const index_t* col
    cdef int64_t* out
    cdef int64_t* po
    cdef uint64_t key
    if n == 0:
        return
    d = c.rel_dst[j]
    v = c.nid[d].p[c.fb[d] + (p - c.roff[j])]
    start = c.ptrs[j][v]
    deg = c.ptrs[j][v + 1] - start
    f = c.fanouts[j * c.L + c.hop]
    col = cols[j] + start
    out = c.eout[j] + c.eoff.p[p]
    # the CSR positions of the draws, when edge ids are asked for
    po = c.pout[j] + c.eoff.p[p] if c.eperm != NULL else NULL
    if f < 0 or (not c.replace and f >= deg):
        for q in range(deg):
            out[q] = <int64_t>col[q]
        if po != NULL:
            for q in range(deg):
                po[q] = start + q
        return
    key = rtx_combine(c.hkey[j], <uint64_t>v)
    if c.replace:
        for q in range(n):
            r = <int64_t>rtx_below(rtx_draw(key, <uint64_t>q), <uint64_t>deg)
            out[q] = <int64_t>col[r]
            if po != NULL:
                po[q] = start + r
    else:
        _floyd(key, deg, n, pos, table, c.tbits if n > FLOYD_SCAN_MAX else 0)
        _sort_positions(pos, n)
        for q in range(n):
            out[q] = <int64_t>col[pos[q]]
        if po != NULL:
            for q in range(n):
                po[q] = start + pos[q]


cdef inline void _count_pair(_Call* c, Py_ssize_t p) noexcept nogil:
    cdef Py_ssize_t j = _rel_of(c.roff, c.R, p)
    cdef Py_ssize_t d = c.rel_dst[j]
    cdef int64_t v = c.nid[d].p[c.fb[d] + (p - c.roff[j])]
    cdef int64_t deg = c.ptrs[j][v + 1] - c.ptrs[j][v]
    c.cnt.p[p] = _num_draws(c.fanouts[j * c.L + c.hop], deg, c.replace)


cdef int _relabel_type(_Call* c, Py_ssize_t t) noexcept nogil:
    """This hop's sources of type ``t`` to local ids, relation by relation in order
    (0, or -1 when out of memory).  Touches only type t's map and n_id and the
    edges of the relations out of t."""
    cdef Py_ssize_t j
    cdef int64_t q, n, loc, u
    cdef _Vec* nv = &c.nid[t]
    cdef int64_t* m = c.maps[t]
    cdef int64_t* buf
    for j in range(c.R):
        if c.rel_src[j] != t:
            continue
        n = c.hop_edges[c.hop * c.R + j]
        if _vec_reserve(nv, nv.n + n) != 0:
            return -1
        buf = c.eout[j]
        for q in range(n):
            if q + RELABEL_AHEAD < n:
                rtx_prefetch(m + buf[q + RELABEL_AHEAD])
            u = buf[q]
            loc = m[u]
            if loc < 0:
                loc = nv.n
                m[u] = loc
                nv.p[loc] = u
                nv.n += 1
            buf[q] = loc
        c.esrc[j].n += n
    return 0


cdef int _sample_hop(_Call* c, const index_t** cols) noexcept nogil:
    """Hop ``c.hop`` for every relation: 0, or -1 when out of memory."""
    cdef Py_ssize_t R = c.R, T = c.T
    cdef Py_ssize_t j, t, d, p, q, nf, r0
    cdef Py_ssize_t P = 0
    cdef int64_t base
    cdef int64_t* pos = NULL
    cdef int64_t* table = NULL
    cdef int64_t* ep
    cdef int nt, tid = 0
    cdef Py_ssize_t tslots = ((<Py_ssize_t>1) << c.tbits) if c.tbits > 0 else 0
    for j in range(R):
        c.roff[j] = P
        d = c.rel_dst[j]
        P += c.fe[d] - c.fb[d]
        c.hkey[j] = rtx_combine(rtx_combine(c.key, <uint64_t>c.hop), <uint64_t>j)
    c.roff[R] = P
    if _vec_reserve(&c.cnt, P) != 0 or _vec_reserve(&c.eoff, P) != 0:
        return -1
    nt = c.nthreads if P >= SAMPLE_PARALLEL_MIN else 1
    # count pass: each pair's number of draws
    if nt > 1:
        for p in prange(P, num_threads=nt, schedule="static"):
            _count_pair(c, p)
    else:
        for p in range(P):
            _count_pair(c, p)
    # prefix sums per relation: each pair's first slot in this hop's edges; the
    # relation's destination pointers grow by its frontier
    for j in range(R):
        r0 = c.roff[j]
        nf = c.roff[j + 1] - r0
        base = 0
        for p in range(r0, r0 + nf):
            c.eoff.p[p] = base
            base += c.cnt.p[p]
        if (_vec_reserve(&c.esrc[j], c.esrc[j].n + base) != 0
                or _vec_reserve(&c.eptr[j], c.eptr[j].n + nf) != 0):
            return -1
        if c.eperm != NULL:
            if _vec_reserve(&c.epos[j], c.epos[j].n + base) != 0:
                return -1
            c.pout[j] = c.epos[j].p + c.epos[j].n
            c.epos[j].n += base
        ep = c.eptr[j].p + c.eptr[j].n
        for q in range(nf):
            ep[q] = c.esrc[j].n + c.eoff.p[r0 + q] + c.cnt.p[r0 + q]
        c.eptr[j].n += nf
        c.eout[j] = c.esrc[j].p + c.esrc[j].n
        c.hop_edges[c.hop * R + j] = base
    # fill pass: disjoint slots, any thread, any order
    if nt > 1:
        with parallel(num_threads=nt):
            tid = rtx_omp_thread_num()
            pos = c.scratch + tid * c.stride
            table = pos + (c.stride - tslots)
            _mark_seen()
            for p in prange(P, schedule="dynamic", chunksize=SAMPLE_CHUNK):
                _fill_pair(c, cols, p, pos, table)
    else:
        _mark_seen()
        for p in range(P):
            _fill_pair(c, cols, p, c.scratch, c.scratch + (c.stride - tslots))
    # relabel: per source type serially in (relation, frontier node, draw) order (the
    # first appearance gets the next local id of its type); the types are
    # independent, so they go to different threads
    if nt > 1 and T > 1:
        for t in prange(T, num_threads=nt, schedule="dynamic", chunksize=1):
            c.tstat[t] = _relabel_type(c, t)
        for t in range(T):
            if c.tstat[t] != 0:
                return -1
    else:
        for t in range(T):
            if _relabel_type(c, t) != 0:
                return -1
    # what this hop added is the next frontier
    for t in range(T):
        c.hop_nodes[(c.hop + 1) * T + t] = c.nid[t].n - c.fe[t]
        c.fb[t] = c.fe[t]
        c.fe[t] = c.nid[t].n
    return 0


cdef int _call_alloc(_Call* c) noexcept nogil:
    """The call's buffers (0, or -1 when out of memory; _call_free frees any)."""
    cdef Py_ssize_t j
    c.nid = <_Vec*>calloc(<size_t>c.T, sizeof(_Vec))
    c.esrc = <_Vec*>calloc(<size_t>(c.R + 1), sizeof(_Vec))
    c.eptr = <_Vec*>calloc(<size_t>(c.R + 1), sizeof(_Vec))
    c.tstat = <int*>calloc(<size_t>c.T, sizeof(int))
    c.fb = <Py_ssize_t*>calloc(<size_t>c.T, sizeof(Py_ssize_t))
    c.fe = <Py_ssize_t*>calloc(<size_t>c.T, sizeof(Py_ssize_t))
    c.roff = <Py_ssize_t*>calloc(<size_t>(c.R + 1), sizeof(Py_ssize_t))
    c.hkey = <uint64_t*>calloc(<size_t>(c.R + 1), sizeof(uint64_t))
    c.eout = <int64_t**>calloc(<size_t>(c.R + 1), sizeof(int64_t*))
    c.epos = <_Vec*>calloc(<size_t>(c.R + 1), sizeof(_Vec))
    c.pout = <int64_t**>calloc(<size_t>(c.R + 1), sizeof(int64_t*))
    c.hop_nodes = <int64_t*>calloc(<size_t>((c.L + 1) * c.T), sizeof(int64_t))
    c.hop_edges = <int64_t*>calloc(<size_t>(c.L * c.R + 1), sizeof(int64_t))
    c.scratch = <int64_t*>malloc(<size_t>(c.nthreads * c.stride) * sizeof(int64_t))
    if (c.nid == NULL or c.esrc == NULL or c.eptr == NULL or c.tstat == NULL
            or c.fb == NULL or c.fe == NULL
            or c.roff == NULL or c.hkey == NULL or c.eout == NULL or c.epos == NULL
            or c.pout == NULL or c.hop_nodes == NULL
            or c.hop_edges == NULL or c.scratch == NULL):
        return -1
    for j in range(c.R):
        if _vec_reserve(&c.eptr[j], 1) != 0:
            return -1
        c.eptr[j].p[0] = 0
        c.eptr[j].n = 1
    return 0


cdef int _call_seeds(_Call* c, const int64_t* seeds, Py_ssize_t B, Py_ssize_t st,
                     int64_t n_st, Py_ssize_t* bad, int64_t* badval) noexcept nogil:
    """Copy the seeds into n_id[st] and check the COPY (-2 and the first bad
    position when one is outside [0, n_st)); then map each to its first position."""
    cdef Py_ssize_t i
    cdef _Vec* nv = &c.nid[st]
    cdef int64_t* m
    cdef int64_t u
    if _vec_reserve(nv, B) != 0:
        return -1
    memcpy(nv.p, seeds, <size_t>B * sizeof(int64_t))
    for i in range(B):
        if <uint64_t>nv.p[i] >= <uint64_t>n_st:
            bad[0] = i
            badval[0] = nv.p[i]
            return -2
    nv.n = B     # from here on the reset covers them
    m = c.maps[st]
    for i in range(B):
        u = nv.p[i]
        if m[u] < 0:
            m[u] = i
    c.fe[st] = B
    c.hop_nodes[st] = B
    return 0


cdef void _call_free(_Call* c) noexcept nogil:
    """Reset every map entry the call set, then free its buffers."""
    cdef Py_ssize_t t, i, j
    cdef int64_t* m
    if c.nid != NULL:
        for t in range(c.T):
            m = c.maps[t]
            for i in range(c.nid[t].n):
                m[c.nid[t].p[i]] = -1
            free(c.nid[t].p)
    if c.esrc != NULL:
        for j in range(c.R):
            free(c.esrc[j].p)
    if c.eptr != NULL:
        for j in range(c.R):
            free(c.eptr[j].p)
    if c.epos != NULL:
        for j in range(c.R):
            free(c.epos[j].p)
    free(c.nid)
    free(c.esrc)
    free(c.eptr)
    free(c.tstat)
    free(c.fb)
    free(c.fe)
    free(c.roff)
    free(c.hkey)
    free(c.eout)
    free(c.epos)
    free(c.pout)
    free(c.hop_nodes)
    free(c.hop_edges)
    free(c.scratch)
    free(c.cnt.p)
    free(c.eoff.p)


cdef void _output_item(_Call* c, int64_t** outs, Py_ssize_t item) noexcept nogil:
    """Fill output ``item``: n_id of type ``item`` (< T), else relation item - T's
    source ids, destination ids, destination pointers, identity permutation and
    (with edge ids) edge ids (``outs``: T n_id, then OUT_PER_REL per relation)."""
    cdef Py_ssize_t j, i, nd
    cdef int64_t k, E
    cdef int64_t* ptr
    cdef int64_t* o
    cdef const int64_t* pm
    cdef const int64_t* ps
    if item < c.T:
        if c.nid[item].n > 0:
            memcpy(outs[item], c.nid[item].p, <size_t>c.nid[item].n * sizeof(int64_t))
        return
    j = item - c.T
    E = c.esrc[j].n
    nd = c.nid[c.rel_dst[j]].n
    if E > 0:
        memcpy(outs[c.T + OUT_PER_REL * j], c.esrc[j].p, <size_t>E * sizeof(int64_t))
    # pointers: the frontiers' (a prefix of n_id[dst]), then the nodes never
    # expanded (no edges)
    ptr = outs[c.T + OUT_PER_REL * j + 2]
    memcpy(ptr, c.eptr[j].p, <size_t>c.eptr[j].n * sizeof(int64_t))
    for i in range(c.eptr[j].n, nd + 1):
        ptr[i] = E
    o = outs[c.T + OUT_PER_REL * j + 1]
    for i in range(nd):
        for k in range(ptr[i], ptr[i + 1]):
            o[k] = i
    o = outs[c.T + OUT_PER_REL * j + 3]
    for k in range(E):
        o[k] = k
    if c.eperm != NULL:
        # edge ids: the drawn CSR positions through the destination grouping's
        # permutation (position -> edge id); positions are < E_j by construction
        o = outs[c.T + OUT_PER_REL * j + 4]
        pm = c.eperm[j]
        ps = c.epos[j].p
        for k in range(E):
            o[k] = pm[ps[k]]


cdef class _SampleMaps:
    """One global -> local map per node type (int64, -1 = not sampled)."""

    cdef int64_t** maps
    cdef Py_ssize_t T

    def __cinit__(self, const int64_t[::1] num_nodes):
        cdef Py_ssize_t t, n
        self.T = num_nodes.shape[0]
        self.maps = <int64_t**>calloc(<size_t>(self.T + 1), sizeof(int64_t*))
        if self.maps == NULL:
            raise MemoryError("NeighborSampler: out of memory")
        for t in range(self.T):
            n = num_nodes[t]
            self.maps[t] = <int64_t*>malloc(<size_t>(n if n > 0 else 1) * sizeof(int64_t))
            if self.maps[t] == NULL:
                raise MemoryError("NeighborSampler: out of memory")
            with nogil:
                memset(self.maps[t], 0xFF, <size_t>n * sizeof(int64_t))   # all -1

    def __dealloc__(self):
        cdef Py_ssize_t t
        if self.maps != NULL:
            for t in range(self.T):
                free(self.maps[t])
            free(self.maps)


cdef _new_i64(Py_ssize_t n, int64_t** out):
    """An n-entry int64 numpy array over a fresh IndexSnapshot (read-only to
    everyone else; ``out`` receives its memory, for the caller to fill)."""
    cdef IndexSnapshot mem = IndexSnapshot(n * <Py_ssize_t>sizeof(int64_t))
    out[0] = <int64_t*>mem._st.ptr
    return _np_sample.ndarray((n,), _np_sample.int64, mem)


#: stub
#: _SampleResult = tuple[
#:     list[_I64], list[_I64], list[_I64], list[_I64], list[_I64], _I64, _I64, list[_I64] | None
#: ]
cdef class HeteroSamplerKernel:
    """The graph side of ``rtx.loader.NeighborSampler`` (see the top of
    ``_sample.pxi``).  ``ptrs[j]`` / ``cols[j]``: relation j's destination-grouped
    adjacency as index snapshots; ``fanouts``: int64 [R, L].  ``eperms`` (optional):
    per relation the grouping's permutation (CSR position -> edge id, an int64
    index snapshot of E_j entries in [0, E_j)); given, every call also returns the
    edge id of each sampled edge (8 more bytes per edge of the graph, kept)."""

    cdef Py_ssize_t T
    cdef Py_ssize_t R
    cdef Py_ssize_t L
    cdef bint replace
    cdef bint is64
    cdef int64_t* num_nodes
    cdef Py_ssize_t* rel_src
    cdef Py_ssize_t* rel_dst
    cdef const int64_t** ptrs
    cdef const void** cols
    cdef const int64_t** eperms
    cdef int64_t* fanouts
    cdef int64_t maxf
    cdef Py_ssize_t tbits
    cdef object _num_nodes
    cdef list _keep
    cdef list _pool
    cdef object _lock

    def __cinit__(self, num_nodes, rel_src, rel_dst, list ptrs, list cols, fanouts,
                  bint replace, list eperms=None):
        #: num_nodes: npt.ArrayLike
        #: rel_src: npt.ArrayLike
        #: rel_dst: npt.ArrayLike
        #: ptrs: list[_I64]
        #: cols: list[_Index]
        #: fanouts: npt.ArrayLike
        #: eperms: list[_I64] | None
        cdef const int64_t[::1] nn = _np_sample.ascontiguousarray(num_nodes, _np_sample.int64)
        cdef const int64_t[::1] rs = _np_sample.ascontiguousarray(rel_src, _np_sample.int64)
        cdef const int64_t[::1] rd = _np_sample.ascontiguousarray(rel_dst, _np_sample.int64)
        cdef const int64_t[:, ::1] fo = _np_sample.ascontiguousarray(fanouts, _np_sample.int64)
        cdef const int64_t[::1] pv
        cdef const int64_t[::1] ev
        cdef const int32_t[::1] c32
        cdef const int64_t[::1] c64
        cdef Py_ssize_t t, j, h, i, nd, E, bad
        cdef int64_t f, maxdeg = 0, maxf = 0, deg
        self.num_nodes = NULL
        self.rel_src = NULL
        self.rel_dst = NULL
        self.ptrs = NULL
        self.cols = NULL
        self.eperms = NULL
        self.fanouts = NULL
        self.T = nn.shape[0]
        self.R = rs.shape[0]
        self.L = fo.shape[1]
        self.replace = replace
        if self.T < 1:
            raise ValueError("HeteroSamplerKernel: no node types")
        if rd.shape[0] != self.R or len(ptrs) != self.R or len(cols) != self.R \
                or fo.shape[0] != self.R or (eperms is not None and len(eperms) != self.R):
            raise ValueError("HeteroSamplerKernel: one source type, destination type, "
                             "ptr, col, fanout row (and eperm) per relation")
        self.num_nodes = <int64_t*>malloc(<size_t>self.T * sizeof(int64_t))
        self.rel_src = <Py_ssize_t*>malloc(<size_t>(self.R + 1) * sizeof(Py_ssize_t))
        self.rel_dst = <Py_ssize_t*>malloc(<size_t>(self.R + 1) * sizeof(Py_ssize_t))
        self.ptrs = <const int64_t**>calloc(<size_t>(self.R + 1), sizeof(int64_t*))
        self.cols = <const void**>calloc(<size_t>(self.R + 1), sizeof(void*))
        self.fanouts = <int64_t*>malloc(<size_t>(self.R * self.L + 1) * sizeof(int64_t))
        if eperms is not None:
            self.eperms = <const int64_t**>calloc(<size_t>(self.R + 1), sizeof(int64_t*))
            if self.eperms == NULL:
                raise MemoryError("HeteroSamplerKernel: out of memory")
        if (self.num_nodes == NULL or self.rel_src == NULL or self.rel_dst == NULL
                or self.ptrs == NULL or self.cols == NULL or self.fanouts == NULL):
            raise MemoryError("HeteroSamplerKernel: out of memory")
        for t in range(self.T):
            if nn[t] < 0:
                raise ValueError(f"HeteroSamplerKernel: node type {t} has {nn[t]} nodes")
            self.num_nodes[t] = nn[t]
        self._num_nodes = _np_sample.array(nn, dtype=_np_sample.int64)
        self._keep = []
        self.is64 = True
        for j in range(self.R):
            if not (0 <= rs[j] < self.T and 0 <= rd[j] < self.T):
                raise ValueError(f"HeteroSamplerKernel: relation {j} names a node type "
                                 f"outside [0, {self.T})")
            self.rel_src[j] = rs[j]
            self.rel_dst[j] = rd[j]
            p_arr, c_arr = ptrs[j], cols[j]
            if not (is_index_snapshot(p_arr) and is_index_snapshot(c_arr)):
                raise TypeError("HeteroSamplerKernel: ptrs and cols must be rtx index "
                                "snapshots (immutable)")
            if p_arr.dtype != _np_sample.int64:
                raise TypeError("HeteroSamplerKernel: ptrs must be int64")
            if j == 0:
                self.is64 = c_arr.dtype == _np_sample.int64
            if c_arr.dtype != (_np_sample.int64 if self.is64 else _np_sample.int32):
                raise TypeError("HeteroSamplerKernel: every col must have the same dtype")
            pv = p_arr
            nd = self.num_nodes[rd[j]]
            E = c_arr.shape[0]
            if pv.shape[0] != nd + 1 or pv[0] != 0 or pv[nd] != E:
                raise ValueError(f"HeteroSamplerKernel: ptrs[{j}] does not group "
                                 f"{E} edges over {nd} destinations")
            bad = -1
            with nogil:
                for i in range(nd):
                    deg = pv[i + 1] - pv[i]
                    if deg < 0:
                        bad = i
                        break
                    if deg > maxdeg:
                        maxdeg = deg
            if bad >= 0:
                raise ValueError(f"HeteroSamplerKernel: ptrs[{j}] decreases at {bad}")
            if first_out_of_bounds(c_arr, self.num_nodes[rs[j]]) >= 0:
                raise IndexError(f"HeteroSamplerKernel: cols[{j}] holds a source id "
                                 f"outside [0, {self.num_nodes[rs[j]]})")
            self.ptrs[j] = &pv[0]
            if E > 0:
                if self.is64:
                    c64 = c_arr
                    self.cols[j] = &c64[0]
                else:
                    c32 = c_arr
                    self.cols[j] = &c32[0]
            self._keep.append((p_arr, c_arr))
            if eperms is not None:
                e_arr = eperms[j]
                if not is_index_snapshot(e_arr) or e_arr.dtype != _np_sample.int64:
                    raise TypeError("HeteroSamplerKernel: eperms must be int64 rtx index "
                                    "snapshots (immutable)")
                if e_arr.shape[0] != E:
                    raise ValueError(f"HeteroSamplerKernel: eperms[{j}] has "
                                     f"{e_arr.shape[0]} entries for {E} edges")
                if first_out_of_bounds(e_arr, E) >= 0:
                    raise IndexError(f"HeteroSamplerKernel: eperms[{j}] holds an edge id "
                                     f"outside [0, {E})")
                if E > 0:
                    ev = e_arr
                    self.eperms[j] = &ev[0]
                self._keep.append(e_arr)
            for h in range(self.L):
                f = fo[j, h]
                if f < -1 or f > SAMPLE_MAX_FANOUT:
                    raise ValueError(f"HeteroSamplerKernel: fanout {f} outside "
                                     f"[-1, {SAMPLE_MAX_FANOUT}]")
                self.fanouts[j * self.L + h] = f
                if not replace and f > maxf:
                    maxf = f
        # Floyd's algorithm runs only for 0 < fanout < degree
        if maxf > maxdeg - 1:
            maxf = maxdeg - 1 if maxdeg > 0 else 0
        self.maxf = maxf
        self.tbits = 0
        if maxf > FLOYD_SCAN_MAX:
            while ((<int64_t>1) << self.tbits) < 2 * maxf:
                self.tbits += 1
        self._pool = []
        self._lock = _threading_sample.Lock()

    def __dealloc__(self):
        free(self.num_nodes)
        free(self.rel_src)
        free(self.rel_dst)
        free(self.ptrs)
        free(self.cols)
        free(self.eperms)
        free(self.fanouts)

    @property
    def num_hops(self):
        #: -> int
        return self.L

    @property
    def has_edge_ids(self):
        #: -> bool
        return self.eperms != NULL

    @property
    def num_map_sets(self):
        #: -> int
        """Global -> local map sets allocated so far (one per concurrent call)."""
        return len(self._pool)

    cdef _SampleMaps _acquire(self):
        with self._lock:
            if self._pool:
                return self._pool.pop()
        return _SampleMaps(self._num_nodes)

    cdef void _give_back(self, _SampleMaps maps):
        with self._lock:
            self._pool.append(maps)

    def sample(self, seeds, seed_types, uint64_t seed, uint64_t epoch,
               uint64_t batch, int num_threads):
        #: -> _SampleResult
        #: seeds: list[_I64] | _I64
        #: seed_types: list[int] | int
        """Sample one batch from the seeds ``seeds[k]`` (int64) of node type
        ``seed_types[k]`` (lists; distinct types; together at least one seed): all
        of them are hop 0's frontier.  One array and one int: a single seed type.
        Returns ``(n_id, src, dst, ptr, perm, hop_nodes, hop_edges, e_id)``: per
        node type the global ids (int64, seeds first); per
        relation the local source and destination ids of its edges, the
        destination CSR pointers over all n_id[dst] and the identity permutation
        (all read-only int64 arrays); nodes added per hop and type
        [L + 1, T] and edges per hop and relation [L, R]; per relation the edge
        ids of the sampled edges (read-only int64; ``None`` without eperms)."""
        cdef Py_ssize_t K
        cdef Py_ssize_t B = 0, bad = -1, h, j, t, i, k, nd, E, total, badk = 0
        cdef int64_t badval = 0
        cdef int rc = 0, nt
        cdef _Call c
        cdef _SampleMaps maps = None
        cdef int64_t** outs = NULL
        cdef const int64_t[::1] sv
        cdef const int64_t** sp = NULL
        cdef Py_ssize_t* sn = NULL
        cdef Py_ssize_t* stp = NULL
        cdef bint want_eid = self.eperms != NULL
        if not isinstance(seeds, list):
            seeds, seed_types = [seeds], [seed_types]
        if not isinstance(seed_types, list):
            raise TypeError("sample: seed_types must be a list of ints")
        K = len(seeds)
        if len(seed_types) != K or K < 1:
            raise ValueError("sample: one seed type per seed array, at least one")
        keep = []
        for k in range(K):
            t = seed_types[k]
            if not (0 <= t < self.T):
                raise ValueError(f"sample: seed_type {t} outside [0, {self.T})")
            if seed_types.index(t) != k:
                raise ValueError(f"sample: seed_type {t} given twice")
            a = _np_sample.ascontiguousarray(seeds[k], _np_sample.int64)
            if a.ndim != 1:
                raise ValueError("sample: seeds must be 1-D")
            keep.append(a)
            B += a.shape[0]
        if B == 0:
            raise ValueError("sample: no seeds")
        memset(&c, 0, sizeof(_Call))
        try:
            sp = <const int64_t**>calloc(<size_t>K, sizeof(int64_t*))
            sn = <Py_ssize_t*>calloc(<size_t>K, sizeof(Py_ssize_t))
            stp = <Py_ssize_t*>calloc(<size_t>K, sizeof(Py_ssize_t))
            if sp == NULL or sn == NULL or stp == NULL:
                raise MemoryError("NeighborSampler.sample: out of memory")
            for k in range(K):
                sv = keep[k]
                sn[k] = sv.shape[0]
                stp[k] = seed_types[k]
                if sn[k] > 0:
                    sp[k] = &sv[0]
            _reset_seen()
            maps = self._acquire()
            c.T = self.T
            c.R = self.R
            c.L = self.L
            c.replace = self.replace
            c.rel_src = self.rel_src
            c.rel_dst = self.rel_dst
            c.ptrs = self.ptrs
            c.eperm = self.eperms
            c.fanouts = self.fanouts
            c.nthreads = _clamp_threads(num_threads)
            c.key = rtx_combine(rtx_combine(rtx_combine(0x5EED5A3D1E5A3D1EULL, seed), epoch),
                                batch)
            c.maps = maps.maps
            c.tbits = self.tbits
            c.stride = self.maxf + ((<Py_ssize_t>1 << self.tbits) if self.tbits > 0 else 0)
            if c.stride < 1:
                c.stride = 1
            with nogil:
                rc = _call_alloc(&c)
                k = 0
                while rc == 0 and k < K:
                    if sn[k] > 0:
                        rc = _call_seeds(&c, sp[k], sn[k], stp[k], self.num_nodes[stp[k]],
                                         &bad, &badval)
                        badk = k
                    k += 1
                h = 0
                while rc == 0 and h < c.L:
                    c.hop = h
                    if self.is64:
                        rc = _sample_hop(&c, <const int64_t**>self.cols)
                    else:
                        rc = _sample_hop(&c, <const int32_t**>self.cols)
                    h += 1
            if rc == -1:
                raise MemoryError("NeighborSampler.sample: out of memory")
            if rc == -2:
                raise IndexError(f"sample: seeds[{bad}] = {badval} is out of range for "
                                 f"{self.num_nodes[stp[badk]]} nodes")
            # the outputs: allocated with the GIL, filled without it
            outs = <int64_t**>calloc(<size_t>(self.T + OUT_PER_REL * self.R + 1),
                                     sizeof(int64_t*))
            if outs == NULL:
                raise MemoryError("NeighborSampler.sample: out of memory")
            n_id = [_new_i64(c.nid[t].n, &outs[t]) for t in range(self.T)]
            src, dst, ptrs, perms = [], [], [], []
            e_id = [] if want_eid else None
            for j in range(self.R):
                E = c.esrc[j].n
                nd = c.nid[self.rel_dst[j]].n
                src.append(_new_i64(E, &outs[self.T + OUT_PER_REL * j]))
                dst.append(_new_i64(E, &outs[self.T + OUT_PER_REL * j + 1]))
                ptrs.append(_new_i64(nd + 1, &outs[self.T + OUT_PER_REL * j + 2]))
                perms.append(_new_i64(E, &outs[self.T + OUT_PER_REL * j + 3]))
                if want_eid:
                    e_id.append(_new_i64(E, &outs[self.T + OUT_PER_REL * j + 4]))
            hop_nodes = _np_sample.empty((self.L + 1, self.T), _np_sample.int64)
            hop_edges = _np_sample.empty((self.L, self.R), _np_sample.int64)
            total = 0
            for j in range(self.R):
                total += c.esrc[j].n
            nt = c.nthreads if total >= OUTPUT_PARALLEL_EDGES_PER_PAIR * SAMPLE_PARALLEL_MIN else 1
            with nogil:
                if nt > 1:
                    for i in prange(self.T + self.R, num_threads=nt, schedule="dynamic",
                                    chunksize=1):
                        _output_item(&c, outs, i)
                else:
                    for i in range(self.T + self.R):
                        _output_item(&c, outs, i)
            for h in range(self.L + 1):
                for t in range(self.T):
                    hop_nodes[h, t] = c.hop_nodes[h * self.T + t]
            for h in range(self.L):
                for j in range(self.R):
                    hop_edges[h, j] = c.hop_edges[h * self.R + j]
            return n_id, src, dst, ptrs, perms, hop_nodes, hop_edges, e_id
        finally:
            free(outs)
            free(sp)
            free(sn)
            free(stp)
            with nogil:
                _call_free(&c)
            if maps is not None:
                self._give_back(maps)
