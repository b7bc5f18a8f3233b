# Negative sampling: k distinct pair codes in [0, population) outside a sorted set of
# existing codes, uniformly at random (the Python face, which encodes node pairs as
# codes and decodes them back, is rtx/utils/_negative_sampling.py).
#
# Two exact methods, chosen by the size of the request:
#
# - rejection (2k <= available): draw codes uniformly (an unbiased bounded draw
#   from a counter-based stream: splitmix64's finaliser over seed + draw number),
#   reject an existing code (binary search in ``existing``) or one already chosen
#   (an open-addressing hash set of 2^ceil(log2 2k) slots; for populations up to
#   2^27 codes one bitmap holds both, accepting the same draws); the accepted codes, in
#   draw order, are a uniform random k-subset in random order.  Each draw succeeds
#   with probability >= (available - k) / population >= available / (2 population).
# - selection (2k > available): Knuth's algorithm S over the complement in order
#   (a merge against ``existing``: O(population) time, no memory beyond the output),
#   then a Fisher-Yates shuffle of the output.
#
# ``existing`` is the caller's private array (np.unique's result: sorted, distinct,
# in range -- checked here before the loop: ValueError), the output a new array.
# The loops hold no GIL and touch nothing shared.

from libc.stdlib cimport calloc

import numpy as _np_neg

cdef extern from *:
    """
    static inline uint64_t rtx_neg_mix(uint64_t z) {
        z += 0x9E3779B97F4A7C15ULL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    """
    uint64_t rtx_neg_mix(uint64_t z) noexcept nogil


# Populations up to this many codes use a bitmap (at most 16 MiB) for the existing and
# chosen codes; larger ones a binary search and a hash set of the chosen.
cdef int64_t NEG_BITMAP_MAX = 1 << 27


def set_negative_bitmap_max(int64_t n):
    #: -> int
    """Set the largest population sampled with a bitmap (tests compare both paths);
    returns the previous value."""
    global NEG_BITMAP_MAX
    old = NEG_BITMAP_MAX
    NEG_BITMAP_MAX = n
    return old


cdef struct _NegRng:
    uint64_t seed
    uint64_t n


cdef inline uint64_t _neg_next(_NegRng* r) noexcept nogil:
    r.n += 1
    return rtx_neg_mix(r.seed ^ rtx_neg_mix(r.n))


cdef inline uint64_t _neg_below(_NegRng* r, uint64_t bound) noexcept nogil:
    """Uniform in [0, bound) (bound >= 1), without modulo bias."""
    cdef uint64_t x, threshold = (<uint64_t>0 - bound) % bound
    while True:
        x = _neg_next(r)
        if x >= threshold:
            return x % bound


cdef inline bint _neg_in_sorted(const int64_t* a, Py_ssize_t n, int64_t v) noexcept nogil:
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo < n and a[lo] == v


cdef int _neg_reject(const int64_t* ex, Py_ssize_t E, int64_t population, int64_t k,
                     _NegRng* r, int64_t* out) noexcept nogil:
    """Rejection sampling into out[0:k]; -1 when the hash set cannot be allocated."""
    cdef uint64_t cap = 1, mask, h
    cdef int64_t m = 0, c
    cdef int64_t* table
    while cap < <uint64_t>(2 * k):
        cap <<= 1
    table = <int64_t*>malloc(cap * sizeof(int64_t))
    if table == NULL:
        return -1
    memset(table, 0xFF, cap * sizeof(int64_t))   # every slot -1: empty
    mask = cap - 1
    while m < k:
        c = <int64_t>_neg_below(r, <uint64_t>population)
        if E and _neg_in_sorted(ex, E, c):
            continue
        h = rtx_neg_mix(<uint64_t>c) & mask
        while table[h] != -1 and table[h] != c:
            h = (h + 1) & mask
        if table[h] == c:
            continue
        table[h] = c
        out[m] = c
        m += 1
    free(table)
    return 0


cdef int _neg_reject_bitmap(const int64_t* ex, Py_ssize_t E, int64_t population, int64_t k,
                            _NegRng* r, int64_t* out) noexcept nogil:
    """``_neg_reject`` with one bit per code (existing or chosen) instead of the binary
    search and the hash set: the same draws are accepted, so the same output."""
    cdef size_t words = <size_t>((population + 63) // 64)
    cdef uint64_t* bits = <uint64_t*>calloc(words, sizeof(uint64_t))
    cdef uint64_t bit
    cdef int64_t m = 0, c
    cdef Py_ssize_t e
    if bits == NULL:
        return -1
    for e in range(E):
        bits[ex[e] >> 6] |= (<uint64_t>1) << (ex[e] & 63)
    while m < k:
        c = <int64_t>_neg_below(r, <uint64_t>population)
        bit = (<uint64_t>1) << (c & 63)
        if bits[c >> 6] & bit:
            continue
        bits[c >> 6] |= bit
        out[m] = c
        m += 1
    free(bits)
    return 0


cdef void _neg_select(const int64_t* ex, Py_ssize_t E, int64_t population, int64_t k,
                      _NegRng* r, int64_t* out) noexcept nogil:
    """Algorithm S over the complement of ``ex``, then a shuffle of out[0:k]."""
    cdef int64_t left = population - E, need = k, c = 0, m = 0, j, t
    cdef Py_ssize_t e = 0
    cdef double u
    while need > 0 and c < population:
        if e < E and ex[e] == c:
            e += 1
            c += 1
            continue
        u = (_neg_next(r) >> 11) * (1.0 / 9007199254740992.0)   # [0, 1), 53 bits
        if u * <double>left < <double>need:
            out[m] = c
            m += 1
            need -= 1
        left -= 1
        c += 1
    for j in range(k - 1, 0, -1):
        t = <int64_t>_neg_below(r, <uint64_t>(j + 1))
        c = out[j]
        out[j] = out[t]
        out[t] = c


def negative_codes(const int64_t[::1] existing, int64_t population, int64_t k,
                   uint64_t seed):
    #: -> npt.NDArray[np.int64]
    """``k`` distinct codes in ``[0, population)`` not in ``existing`` (sorted,
    distinct, in range), uniformly at random from ``seed``: an int64 array of ``k``."""
    cdef Py_ssize_t E = existing.shape[0], i
    if population < 0 or k < 0 or E > population or k > population - E:
        raise ValueError(f"negative_codes: cannot draw {k} of the {population - E} codes "
                         f"left in a population of {population}")
    for i in range(E):
        if (existing[i] < 0 or existing[i] >= population
                or (i and existing[i] <= existing[i - 1])):
            raise ValueError(f"negative_codes: existing[{i}] = {existing[i]} is out of order "
                             f"or outside [0, {population})")
    res = _np_neg.empty(k, dtype=_np_neg.int64)
    cdef int64_t[::1] out = res
    cdef _NegRng r
    r.seed = seed
    r.n = 0
    cdef int rc = 0
    cdef const int64_t* ex = NULL
    if k == 0:
        return res
    if E:
        ex = &existing[0]
    with nogil:
        if 2 * k > population - E:
            _neg_select(ex, E, population, k, &r, &out[0])
        elif population <= NEG_BITMAP_MAX:
            rc = _neg_reject_bitmap(ex, E, population, k, &r, &out[0])
        else:
            rc = _neg_reject(ex, E, population, k, &r, &out[0])
    if rc != 0:
        raise MemoryError(f"negative_codes: no memory for the set of chosen codes ({k})")
    return res
