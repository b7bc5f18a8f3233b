"""A mutation pass: do the tests catch realistic single-line bugs?

    python tools/mutation_pass.py [--only ID[,ID...]] [--list] [--keep]

Each mutant is one small, realistic edit (an off-by-one, a dropped check, a
missing ``Py_INCREF``, a counter not updated on one path, a threshold
comparison flipped) in the kernels, the allocator, DLPack or the validation
at the Python boundary.  For each: copy the tree to ``build/mutation/<id>``,
apply the edit (it must match exactly once), rebuild the extension when a
``.pyx``/``.pxi`` changed (else reuse this tree's built extension), run the
mutant's targeted tests (``-x``), and call it

* caught -- the tests failed (or timed out),
* missed -- they passed: a bug the suite cannot see,
* invalid -- the edit did not apply or the mutant did not build.

A baseline run (no edit) of every selected test must pass first.  Exit
status 1 when a mutant is missed or invalid.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "build", "mutation")
HK = "tests/kernels/test_hardening_kernels.py"
TT = "tests/data/test_transforms.py"
TM = "tests/data/test_metrics.py"
TH = "tests/data/test_datasets_hgb.py"
TNK = "tests/data/test_negative_kernel.py"
TBCE = "tests/nn/test_bce.py"
HF = "tests/data/test_hardening3_files.py"
SER = "rtx/serialization.py"
HET = "rtx/datasets/hetero.py"
MAG = "rtx/datasets/mag.py"
TMAG = "tests/data/test_datasets_mag.py"
H3 = "tests/data/test_hardening3_interop.py"
TS = "tests/graph/test_sampler.py"
TL = "tests/graph/test_loader.py"
LD = "rtx/loader/loader.py"
DCOMM = "rtx/distributed/_comm.py"
TDIST = "tests/distributed/test_distributed.py"
TCOL = "tests/mpi/test_collectives.py"
TFAIL = "tests/mpi/test_failures.py"
THET = "tests/mpi/test_hetgat_mpi.py"
TRES = "tests/mpi/test_resume.py"
# issue 21 (layers): SAGEConv, GATv2Conv + gatv2_scores, norms, lazy sizes
TSAGE = "tests/nn/test_conv_sage.py"
TGAT2 = "tests/nn/test_conv_gatv2.py"
TNORM = "tests/nn/test_norm.py"
TLAZY = "tests/nn/test_lazy.py"
# issue 21 (h21-port): grouped matmul, HeteroLinear, RGCNConv / RGCN
THLIN = "tests/nn/test_hetero_linear.py"
TRGCN = "tests/nn/test_conv_rgcn.py"
TSMS = "tests/kernels/test_segment_matmul_sum.py"
TTG = "tests/kernels/test_team_gemm.py"
TMT = "tests/kernels/test_matmul_threads.py"
TLK = "tests/kernels/test_loss_kernels.py"
TMK = "tests/kernels/test_message_kernels.py"
TGS = "tests/graph/test_gat_scores.py"
THD = "tests/graph/test_head_dot.py"
TIP = "tests/graph/test_index_plan.py"


@dataclass
class Mutant:
    id: str
    path: str
    find: str
    replace: str
    tests: list[str]
    what: str
    k: str = ""
    extra: list[str] = field(default_factory=list)
    mpi: int = 0  # > 0: run the tests under `mpiexec -n <mpi>` (tests/mpi)


MUTANTS = [
    # ------------------------------------------------------------ kernels
    Mutant("csr-never", "rtx/_index.pxi",
           "    if T >= CSR_MIN_THREADS:\n        return S_CSR",
           "    if T > CSR_MIN_THREADS:\n        return S_CSR",
           [HK], "auto dispatch never picks CSR at exactly CSR_MIN_THREADS", k="strategy"),
    Mutant("cols-threshold", "rtx/_index.pxi",
           "    if F * itemsize >= COLS_MIN_BLOCK_BYTES * T:",
           "    if F * itemsize >= COLS_MIN_BLOCK_BYTES * T * 4:",
           [HK], "COLS cut-over 4x too high", k="strategy"),
    Mutant("rows-compact-off-by-one", "rtx/_index.pxi",
           "            n += d < width",
           "            n += d <= width",
           ["tests/graph/test_index_ops.py", "tests/kernels/test_ownership.py"],
           "ROWS compaction takes the first row of the next thread's range",
           k="scatter or strateg or add"),
    Mutant("serial-zero-fill-short", "rtx/_index.pxi",
           "    memset(op, 0, <size_t>(N * F) * sizeof(real))\n    if F == 1:",
           "    memset(op, 0, <size_t>(N * F))\n    if F == 1:",
           ["tests/graph/test_index_ops.py"], "serial scatter zero-fills N*F bytes, not elements",
           k="add"),
    Mutant("gather-team-unclamped", "rtx/_index.pxi",
           "    if T > E:\n        T = E\n    if T > MAX_KERNEL_THREADS:\n"
           "        T = MAX_KERNEL_THREADS",
           "    if T > E:\n        T = E",
           [HK], "gather_rows passes any num_threads to OpenMP", k="clamp"),
    Mutant("bounds-check-off-by-one", "rtx/_index.pxi",
           "            anybad |= <int>(<uint64_t><int64_t>idx[i] >= un)",
           "            anybad |= <int>(<uint64_t><int64_t>idx[i] > un)",
           ["tests/graph/test_index_ops.py", HK], "first_out_of_bounds accepts index n",
           k="bad or bound"),
    Mutant("csr-split-drops-last-row", "rtx/_csr.pxi",
           "    bounds[nchunks] = N\n",
           "    bounds[nchunks] = N - 1 if N > 1 else N\n",
           ["tests/graph/test_segment.py", "tests/graph/test_message.py",
            "tests/graph/test_graph_ops_db.py"],
           "the one CSR driver's split never hands out the last row", k="bitwise"),
    Mutant("segment-min-tie-last", "rtx/_segment.pxi",
           "                if (v < row[j] or v != v) and row[j] == row[j]:",
           "                if (v <= row[j] or v != v) and row[j] == row[j]:",
           ["tests/backend/test_segment_min_backend.py"], "segment_min: the LAST tied entry wins",
           k="ties or definition"),
    # ------------------------------------------------------------ snapshot
    Mutant("snapshot-checks-user-memory", "rtx/_snapshot.pxi",
           "            anybad |= <int>(<uint64_t><int64_t>dst[i] >= un)",
           "            anybad |= <int>(<uint64_t><int64_t>src[i] >= un)",
           [HK], "the fused check reads the user's array again (TOCTOU)", k="judges"),
    Mutant("snapshot-writable", "rtx/_snapshot.pxi",
           "        if (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE:\n"
           "            raise BufferError(\"rtx index snapshots are read-only\")",
           "        pass",
           [HK], "snapshot memory accepts writable exports", k="snapshot"),
    Mutant("snapshot-stops-at-bad-block", "rtx/_snapshot.pxi",
           "                        bad = i\n                        break",
           "                        return i",
           [HK, "tests/graph/test_index_ops.py"], "the copy stops at the first bad block",
           k="snapshot or large or bitwise"),
    # ------------------------------------------------------------ storage
    Mutant("current-bytes-bypass", "rtx/_storage.pxi",
           "    rtx_aligned_free(ptr)\n    _system_frees += 1\n",
           "    rtx_aligned_free(ptr)\n    _system_frees += 1\n    _current_bytes += cls\n",
           [HK], "current_bytes not decremented when a freed block bypasses the cache",
           k="memory_stats"),
    Mutant("cache-limit-ignores-cached", "rtx/_storage.pxi",
           "    while cls > _cache_limit - _cached_bytes:",
           "    while cls > _cache_limit:",
           [HK], "the cache grows past its limit", k="memory_stats"),
    Mutant("size-class-rounds-down", "rtx/_storage.pxi",
           "        return (nbytes + ALIGNMENT - 1) & ~(<Py_ssize_t>ALIGNMENT - 1)",
           "        return nbytes & ~(<Py_ssize_t>ALIGNMENT - 1)",
           [HK, "tests/kernels/test_storage.py"], "small size classes round down (heap overflow)",
           k="memory_stats or storage or size"),
    # ------------------------------------------------------------ dlpack
    Mutant("dlpack-no-incref", "rtx/_dlpack.pxi",
           "    Py_INCREF(arr)\n", "    pass\n",
           [HK], "DLPack export does not take the owner reference", k="owner_reference"),
    Mutant("dlpack-unchecked-index", "rtx/_dlpack.pxi",
           "        a, b = value\n", "        a, b = value[0], value[1]\n",
           [HK], "dl_device / max_version indexed without a length check",
           k="dlpack_arguments_in_a_child"),
    Mutant("dlpack-any-device-id", "rtx/_dlpack.pxi",
           "        if dev != (kDLCPU, 0):", "        if dev[0] != kDLCPU:",
           [HK], "dl_device (1, n) accepted for any device id", k="dlpack"),
    # ------------------------------------------------------------ Python boundary
    Mutant("snapshot-reused-unchecked", "rtx/backend/index.py",
           "    if is_index_snapshot(idx):\n        check_bounds(idx, n, op)\n",
           "    if is_index_snapshot(idx):\n",
           ["tests/graph/test_index_ops.py"], "a reused snapshot is not bounds-checked again",
           k="bad"),
    Mutant("tape-keeps-user-indices", "rtx/backend/index.py",
           "    return snapshot_indices(arr, -1)[0]",
           "    return arr",
           [HK], "the public ops pass the user's own array on (the tape keeps it)",
           k="backward or never_crashes"),
    # ------------------------------------------------------------ sampler
    Mutant("sample-key-ignores-batch", "rtx/_sample.pxi",
           "0x5EED5A3D1E5A3D1EULL, seed), epoch),\n                                batch)",
           "0x5EED5A3D1E5A3D1EULL, seed), epoch),\n                                0)",
           [TS], "the random stream does not depend on the batch index"),
    Mutant("sample-key-by-position", "rtx/_sample.pxi",
           "    key = rtx_combine(c.hkey[j], <uint64_t>v)",
           "    key = rtx_combine(c.hkey[j], <uint64_t>p)",
           [TS], "draws keyed by the pair's position, not the node's global id"),
    Mutant("sample-relabel-always-new", "rtx/_sample.pxi",
           "            if loc < 0:\n                loc = nv.n",
           "            if True:\n                loc = nv.n",
           [TS], "relabelling gives a node seen before a new local id"),
    Mutant("sample-relabel-every-relation", "rtx/_sample.pxi",
           "        if c.rel_src[j] != t:\n            continue\n", "",
           [TS], "a type's relabelling also rewrites the relations out of other types"),
    Mutant("sample-output-one-relation", "rtx/_sample.pxi",
           "                    for i in prange(self.T + self.R, num_threads=nt,",
           "                    for i in prange(self.T + self.R - 1, num_threads=nt,",
           [TS], "the parallel output fill skips the last relation", k="thread"),
    Mutant("sample-floyd-no-membership", "rtx/_sample.pxi",
           "                if pos[q] == t:",
           "                if pos[q] == t and False:",
           [TS], "Floyd's algorithm forgets what it drew (repeats without replacement)"),
    Mutant("sample-replace-misses-last", "rtx/_sample.pxi",
           "rtx_below(rtx_draw(key, <uint64_t>q), <uint64_t>deg)\n",
           "rtx_below(rtx_draw(key, <uint64_t>q), <uint64_t>(deg - 1 if deg > 1 else 1))\n",
           [TS], "with replacement the last neighbour is never drawn"),
    Mutant("sample-replace-takes-all", "rtx/_sample.pxi",
           "    if f < 0 or (not c.replace and f >= deg):",
           "    if f < 0 or f >= deg:",
           [TS], "fanout >= degree with replacement copies the neighbourhood instead"),
    Mutant("sample-unsorted", "rtx/_sample.pxi",
           "        _sort_positions(pos, n)\n", "",
           [TS], "drawn neighbours left in Floyd's order, not edge order"),
    Mutant("sample-frontier-stays", "rtx/_sample.pxi",
           "        c.fb[t] = c.fe[t]\n", "",
           [TS], "hop k + 1 expands every node so far, not only what hop k added"),
    Mutant("sample-maps-not-reset", "rtx/_sample.pxi",
           "                m[c.nid[t].p[i]] = -1", "                pass",
           [TS], "the global -> local maps go back to the pool dirty"),
    Mutant("sample-ptr-pad-zero", "rtx/_sample.pxi",
           "        ptr[i] = E", "        ptr[i] = 0",
           [TS], "pointers of never-expanded destinations are 0, not E"),
    Mutant("sample-seed-check-off-by-one", "rtx/_sample.pxi",
           "        if <uint64_t>nv.p[i] >= <uint64_t>n_st:",
           "        if <uint64_t>nv.p[i] > <uint64_t>n_st:",
           [TS], "the kernel accepts seed id n", k="kernel"),
    Mutant("sample-shared-scratch", "rtx/_sample.pxi",
           "            pos = c.scratch + tid * c.stride",
           "            pos = c.scratch",
           [TS], "threads share one Floyd scratch (a race)", k="thread"),
    Mutant("sample-fanout-check", "rtx/loader/sampler.py",
           "        if n < -1:", "        if n < -2:",
           [TS], "fanout -2 passes the Python check", k="bad_num_neighbors"),
    Mutant("trusted-accepts-writable", "rtx/backend/index_plan.py",
           "        if not is_index_snapshot(indices):\n", "        if False:\n",
           [TS], "IndexPlan._trusted accepts writable memory", k="trusted"),
    Mutant("num-rows-negative", "rtx/_dtypes.py",      # the one row-count check
           "    if n < 0:\n        raise ValueError(f\"{op}(): {what} must be >= 0",
           "    if n < -1:\n        raise ValueError(f\"{op}(): {what} must be >= 0",
           ["tests/graph/test_index_ops.py"], "num_rows = -1 accepted", k="num_rows"),
    # ------------------------------------------------ data side (transforms, sampling, HGB)
    Mutant("ns-decode-self-loop", "rtx/utils/_negative_sampling.py",
           "    return row, col + (col >= row)",
           "    return row, col + (col > row)",
           [TT], "negative_sampling decodes pair codes off by one (self-loops, wrong pairs)",
           k="negative_sampling"),
    Mutant("ns-existing-kept", "rtx/_negative.pxi",      # the bitmap path (small graphs)
           "    for e in range(E):\n        bits[ex[e] >> 6]",
           "    for e in range(0):\n        bits[ex[e] >> 6]",
           [TT, TNK], "negative_sampling keeps candidates that are existing edges",
           k="negative"),
    Mutant("ns-existing-kept-hash", "rtx/_negative.pxi",
           "        if E and _neg_in_sorted(ex, E, c):", "        if False:",
           [TNK], "the hash path keeps candidates that are existing edges", k="negative"),
    Mutant("ns-duplicates", "rtx/_negative.pxi",
           "        bits[c >> 6] |= bit\n        out[m] = c",
           "        out[m] = c",
           [TT, TNK], "negative_sampling returns the same pair twice", k="negative"),
    Mutant("ns-duplicates-hash", "rtx/_negative.pxi",
           "        if table[h] == c:\n            continue",
           "        if False:\n            continue",
           [TNK], "the hash path returns the same pair twice", k="negative"),
    Mutant("ns-select-unshuffled", "rtx/_negative.pxi",
           "    for j in range(k - 1, 0, -1):", "    for j in range(0):",
           [TNK], "the selection pass returns the complement in order", k="uniform"),
    Mutant("bce-grad-sign", "rtx/backend/loss.py",
           "        gx = s\n        gx -= y\n", "        gx = s\n        gx += y\n",
           [TBCE], "binary_cross_entropy_with_logits' gradient has the wrong sign", k=""),
    Mutant("bce-pos-weight-ignored", "rtx/backend/loss.py",
           "    u *= pw\n", "    u *= 1\n",
           [TBCE], "pos_weight ignored in the loss", k=""),
    Mutant("ns-undirected-one-way", "rtx/utils/_negative_sampling.py",
           "        lo, hi = np.minimum(row, col), np.maximum(row, col)",
           "        lo, hi = row, col",
           [TT], "force_undirected ignores an edge's other direction (PyG's rule)",
           k="negative_sampling"),
    Mutant("ns-ratio", "rtx/utils/_negative_sampling.py",
           "        k = int(num_neg_samples * E)", "        k = int(num_neg_samples)",
           [TT], "a float num_neg_samples taken as a count", k="negative_sampling"),
    Mutant("coalesce-rows-only", "rtx/transforms/to_undirected.py",
           "    first[1:] = (srt[0, 1:] != srt[0, :-1]) | (srt[1, 1:] != srt[1, :-1])",
           "    first[1:] = srt[0, 1:] != srt[0, :-1]",
           [TT], "ToUndirected merges edges that share only a source", k="undirected"),
    Mutant("rev-type-direction", "rtx/transforms/to_undirected.py",
           '                inv = data[dst, f"rev_{rel}", src]',
           '                inv = data[src, f"rev_{rel}", dst]',
           [TT], "the reverse relation keeps the forward node types", k="undirected"),
    Mutant("loops-on-bipartite", "rtx/transforms/add_self_loops.py",
           '            if src != dst or "edge_index" not in store:',
           '            if "edge_index" not in store:',
           [TT], "AddSelfLoops also adds loops between two node types", k="self_loops"),
    Mutant("loops-mean-div0", "rtx/transforms/add_self_loops.py",
           "np.maximum(cnt, 1)", "np.maximum(cnt, 0)",
           [TT], "fill_value='mean' divides by zero for nodes without edges", k="self_loops"),
    Mutant("normalize-no-shift", "rtx/transforms/normalize_features.py",
           "                a = a - a.min()", "                a = a",
           [TT], "NormalizeFeatures skips PyG's subtraction of the minimum", k="normalize"),
    Mutant("node-split-overlap", "rtx/transforms/random_node_split.py",
           "train[perm[nv + nte:]] = True", "train[perm[nv + nte - 1:]] = True",
           [TT], "train_rest: one test node also trains", k="node_split"),
    Mutant("node-split-per-class", "rtx/transforms/random_node_split.py",
           "            idx = idx[rng.permutation(idx.size)][:self.num_train_per_class]",
           "            idx = idx[rng.permutation(idx.size)]",
           [TT], "test_rest/random: every labelled node trains", k="node_split"),
    Mutant("link-split-leak", "rtx/transforms/random_link_split.py",
           "et, train_edges[num_disjoint:], is_undirected, rev)",
           "et, train_val_edges, is_undirected, rev)",
           [TT], "validation edges leak into training message passing", k="link_split"),
    Mutant("link-split-rev-unflipped", "rtx/transforms/random_link_split.py",
           "like(np.ascontiguousarray(new[::-1]), ei_old)",
           "like(np.ascontiguousarray(new), ei_old)",
           [TT], "reverse relation gets the forward edge_index", k="link_split"),
    Mutant("link-split-neg-overlap", "rtx/transforms/random_link_split.py",
           "                               neg[:, num_neg_val + num_neg_test:], train_data[et])",
           "                               neg[:, num_neg_val:], train_data[et])",
           [TT], "training negatives include the test negatives", k="link_split"),
    Mutant("link-split-label-unshifted", "rtx/transforms/random_link_split.py",
           "                label = label + 1", "                label = label",
           [TT], "own edge labels not shifted next to 0-labelled negatives", k="link_split"),
    Mutant("f1-den", "rtx/metrics.py",
           "    den = 2 * tp + fp + fn\n", "    den = 2 * tp + fp\n",
           [TM], "macro-F1 ignores false negatives", k="f1"),
    Mutant("f1-micro", "rtx/metrics.py",
           "float(2 * tp.sum() / den)", "float(tp.sum() / den)",
           [TM], "micro-F1 loses its factor 2", k="f1"),
    Mutant("auc-ties", "rtx/metrics.py",
           "    avg = (start + end + 1) / 2.0", "    avg = start + 1.0",
           [TM], "ROC-AUC ranks ties by position, not on average", k="roc_auc"),
    Mutant("mrr-optimistic", "rtx/metrics.py",
           "    return 0.5 * (gt + ge) + 1.0, neg", "    return gt + 1.0, neg",
           [TM], "MRR counts ties in the positive's favour", k="mrr or ranking"),
    Mutant("hits-shared-ge", "rtx/metrics.py",
           "        return float(np.mean(pos > kth))", "        return float(np.mean(pos >= kth))",
           [TM], "shared-negative Hits@K counts a tie with the k-th negative", k="mrr or ranking"),
    Mutant("hgb-dst-shift", "rtx/datasets/hgb.py",
           "        ei = np.stack([src[idx] - shift[s], dst[idx] - shift[e]]) if idx.size \\",
           "        ei = np.stack([src[idx] - shift[s], dst[idx] - shift[s]]) if idx.size \\",
           [TH], "destination ids shifted by the source type's offset", k="contents"),
    Mutant("hgb-to-rule", "rtx/datasets/hgb.py",
           "    if (rule_to or len(parts) == 2) and (rel == dst or rel[1:] == dst):",
           "    if (rule_to or len(parts) == 2) and rel == dst:",
           [TH], "'movie->director' named '>director', not 'to' (PyG)", k="imdb"),
    Mutant("hgb-rows-unsorted", "rtx/datasets/hgb.py",
           '                x = x[np.argsort(ids[mine], kind="stable")]',
           "                x = x",
           [TH], "features of shuffled node lines left in file order", k="order"),
    Mutant("hgb-weights-always", "rtx/datasets/hgb.py",
           "        if wr.size and not np.all(wr == 1.0):", "        if wr.size:",
           [TH], "edge_weight stored for unweighted relations (PyG leaves it out)", k="contents"),
    Mutant("hgb-val-overlap", "rtx/datasets/hgb.py",
           '    masks["train_mask"][perm[n_val:]] = True',
           '    masks["train_mask"][perm[n_val - 1:]] = True',
           [TH], "one validation node also trains", k="contents or seeded"),
    Mutant("hgb-dst-type-unchecked", "rtx/datasets/hgb.py",
           "            bad = np.flatnonzero((hs != want[0]) | (ts != want[1]))",
           "            bad = np.flatnonzero(hs != want[0])",
           [TH], "a link whose destination type disagrees with its link type accepted",
           k="malformed"),
    Mutant("hgb-label-type-one-sided", "rtx/datasets/hgb.py",
           "        if t != int(type_of[nid]):", "        if t < int(type_of[nid]):",
           [TH], "label.dat node type checked only one way", k="malformed"),
    # ------------------------------------------------------------ files (issue 17)
    Mutant("escape-no-percent", SER,
           'if c in "%/\\\\" or ord(c) < 32', 'if c in "/\\\\" or ord(c) < 32',
           [HF], "'%' inside a key not escaped ('%2F' and '/' share a member)",
           k="collide or injective"),
    Mutant("escape-int-like-str", SER,
           "    if _INT_KEY.fullmatch(s):\n", "    if False:\n",
           [HF, "tests/nn/test_nn.py"], "str key '1' and int key 1 share a member",
           k="collide or injective"),
    Mutant("npy-suffix-unescaped", SER,
           '    if key.endswith(".npy"):', '    if False:',
           [HF], "key 'a.npy' shows to numpy as the member of key 'a'", k="collide"),
    Mutant("reserved-name-unescaped", SER,
           "    if key in _RESERVED:\n", "    if False:\n",
           [HF], "a user key '__rtx_tree__' overwrites the manifest", k="collide or injective"),
    Mutant("name-limit-off-by-one", SER,
           "_MAX_NAME_BYTES = 0xFFFF ", "_MAX_NAME_BYTES = 0x10000 ",
           [HF], "a 65536-byte member name passes the check (zipfile fails midway)",
           k="long_key"),
    Mutant("save-not-atomic", SER,
           '        with atomic_write(target, "wb") as fh:',
           '        with open(target, "wb") as fh:',
           [HF], "rtx.save truncates the target before writing", k="midway or long_key"),
    Mutant("manifest-not-required", SER,
           '    if MARK_KEY + ".npy" in names and TREE_KEY + ".npy" not in names:',
           '    if False:',
           [HF], "a cut-short file (mark, no manifest) loads as a flat dict",
           k="cut_short or crafted"),
    Mutant("extra-members-ignored", SER,
           "    if extra:\n", "    if False:\n",
           [HF], "members the manifest does not name are ignored", k="crafted"),
    Mutant("member-used-twice", SER,
           "            if key in self.used:", "            if False:",
           [HF], "the manifest may name one member twice", k="crafted"),
    Mutant("duplicate-members", SER,
           "        if info.filename in seen:", "        if False:",
           [HF], "two members of one name: the last wins", k="duplicate"),
    Mutant("deflate-ratio-unchecked", SER,
           "_DEFLATE_RATIO = 1032 ", "_DEFLATE_RATIO = 1 << 40 ",
           [HF], "a few KB may declare 64 GiB (zip bomb)", k="crafted or bombs"),
    Mutant("overlap-unchecked", SER,
           "        if info.header_offset < end:", "        if False:",
           [HF], "overlapping members (a quoted-overlap zip bomb) accepted", k="crafted or bombs"),
    Mutant("past-end-unchecked", SER,
           "info.header_offset + info.compress_size > size:", "info.header_offset > size:",
           [HF], "a member may extend past the file's end", k="crafted"),
    Mutant("stored-size-unchecked", SER,
           "        if info.compress_type == zipfile.ZIP_STORED and info.file_size != "
           "info.compress_size:",
           "        if False:",
           [HF], "a stored member may declare more bytes than it holds", k="crafted"),
    Mutant("header-size-one-sided", SER,
           "        if count * dtype.itemsize != info.file_size - head:",
           "        if count * dtype.itemsize > info.file_size - head:",
           [HF], "a member with data past the array's end loads", k="crafted"),
    Mutant("memory-budget-off-by-one", SER,
           "    if budget is not None and total > budget:",
           "    if budget is not None and total > budget + 1:",
           [HF], "the memory budget lets one byte too many through", k="budget"),
    Mutant("fortran-not-transposed", SER,
           "        return arr.reshape(shape[::-1]).T", "        return arr.reshape(shape)",
           [HF], "a Fortran-order member loads transposed", k="valid_edge"),
    Mutant("uint64-labels-wrap", HET,
           "        if n and int(ya.max()) > np.iinfo(np.int64).max:", "        if False:",
           [HF], "uint64 labels >= 2**63 wrap negative in the int64 cast", k="uint64"),
    Mutant("nonfinite-any", HET,
           "            if not finite.all():", "            if not finite.any():",
           [HF], "features with some NaN / inf pass", k="non_finite or checks_first"),
    Mutant("partial-masks-split", HET,
           "    elif not given:", "    elif len(given) < 3:",
           [HF], "a file with only train_mask gets a random split", k="partial"),
    Mutant("hetgraph-zero-d-y", HET,
           "    if y.ndim != 1:", "    if False:",
           [HF], "a 0-d y is an IndexError", k="clear"),
    Mutant("save-hetgraph-unchecked", HET,
           "    g = HeteroGraph(dict(data.x_dict), dict(data.edge_index_dict), data.y, "
           "data.train_mask,\n                    data.val_mask, data.test_mask, data.target)",
           "    g = data",
           [HF], "save_hetgraph writes a graph changed after it was built", k="checks_first"),
    # ------------------------------------------- rtx.datasets.mag (ogbn-mag)
    Mutant("mag-range-off-by-one", MAG,
           "    bad = (col < 0) | (col >= n)",
           "    bad = (col < 0) | (col > n)",
           [TMAG], "load_ogb_mag accepts an edge index equal to the node count", k="malformed"),
    Mutant("mag-columns-compensated", MAG,
           "        ok = bool(nl[:, -1].all()) and not nl[:, :-1].any()",
           "        ok = True",
           [TMAG], "a 3-column line followed by a 1-column line passes as two 2-column lines",
           k="malformed"),
    Mutant("mag-int64-saturates", MAG,
           "            ok = not ((vals == _INT64_MAX) | (vals == -_INT64_MAX - 1)).any()",
           "            ok = True",
           [TMAG], "an integer beyond int64 is read as int64's maximum", k="malformed"),
    Mutant("mag-line-numbers-from-0", MAG,
           "            carry, line = b\"\", 1",
           "            carry, line = b\"\", 0",
           [TMAG], "error messages name the line before the bad one", k="malformed"),
    Mutant("mag-chunk-cut", MAG,
           "                cut = data.rfind(b\"\\n\") + 1",
           "                cut = data.rfind(b\"\\n\")",
           [TMAG], "a chunk is cut before its last newline", k="chunk or reads"),
    Mutant("mag-slurp", MAG,
           "                block = f.read(_CHUNK)",
           "                block = f.read()",
           [TMAG], "each file read whole before parsing (twice its text in memory)",
           k="streams"),
    Mutant("mag-short-edge-file", MAG,
           "    if filled != E:\n        raise _bad(path, None, f\"holds {filled} edges",
           "    if filled > E:\n        raise _bad(path, None, f\"holds {filled} edges",
           [TMAG], "an edge file shorter than num-edge-list.csv.gz is accepted", k="malformed"),
    Mutant("mag-split-overlap", MAG,
           "            if not dup.any() and not (srt[1:] == srt[:-1]).any():",
           "            if True:",
           [TMAG], "overlapping or repeated split indices are accepted", k="malformed"),
    Mutant("mag-no-missing-check", MAG,
           "    if not os.path.isfile(path):\n        raise MissingFileError",
           "    if False:\n        raise MissingFileError",
           [TMAG], "a missing file is a plain FileNotFoundError (not a ValueError)",
           k="missing"),
    Mutant("mag-nonfinite-features", MAG,
           "        if not fin.all():",
           "        if False:",
           [TMAG], "a nan feature is not reported with its file and line", k="malformed"),
    Mutant("mag-round-down", MAG,
           "        return int(math.floor(n * scale + 0.5))",
           "        return int(n * scale)",
           [TMAG], "scaled counts truncated instead of rounded", k="counts"),
    Mutant("mag-split-year", MAG,
           "    paper.train_mask = from_numpy(year < 2018)",
           "    paper.train_mask = from_numpy(year <= 2018)",
           [TMAG], "2018 papers in the training split", k="split"),
    Mutant("mag-duplicates-kept", MAG,
           "        np.not_equal(keys[1:], keys[:-1], out=keep[1:])",
           "        keep[1:] = True",
           [TMAG], "duplicate edges are not removed", k="duplicate"),
    Mutant("mag-paper-without-author", MAG,
           "        if first and min_one:",
           "        if False and min_one:",
           [TMAG], "papers without an author or a topic", k="every_paper"),
    Mutant("mag-self-citations", MAG,
           "        return (p * n_p + q)[rank[q] < rank[p]]",
           "        return (p * n_p + q)[rank[q] <= rank[p]]",
           [TMAG], "a paper may cite itself", k="citations"),
    Mutant("mag-reverse-not-reversed", MAG,
           "from_numpy(np.ascontiguousarray(ei[::-1]))",
           "from_numpy(np.ascontiguousarray(ei))",
           [TMAG], "rev_<rel> holds the forward edges", k="reverse"),
    Mutant("mag-no-feature-signal", MAG,
           "        x[lo:lo + step] += mu[y[lo:lo + step]]",
           "        x[lo:lo + step] += 0",
           [TMAG], "the features carry no class signal", k="class_signal"),
    Mutant("mag-no-citation-homophily", MAG,
           "_HOMOPHILY = {\"cites\": 0.2,",
           "_HOMOPHILY = {\"cites\": 0.0,",
           [TMAG], "citations ignore classes", k="class_signal"),
    # ------------------------------------------------ hardening 3 (issue 17): interop
    Mutant("plan-indices-no-copy", "rtx/backend/index_plan.py",
           "        return _public_copy(self._idx)", "        return self._idx",
           [H3], "plan.indices hands out the plan's own array", k="handed_out or reproducer"),
    Mutant("plan-csr-no-copy", "rtx/backend/index_plan.py",
           "        return _public_copy(ptr), _public_copy(perm)", "        return ptr, perm",
           [H3], "plan.csr() hands out the cached grouping", k="handed_out or reproducer"),
    Mutant("public-copy-is-snapshot", "rtx/backend/index_plan.py",
           "    out = np.array(a, copy=True)\n", "    out = snapshot_indices(a, -1)[0]\n",
           [H3], "the public copy lives in a snapshot (which the backends trust)",
           k="handed_out"),
    Mutant("ctx-indices-public", "rtx/_autodiff/ops/index.py",
           "        ctx._indices, ctx.n = indices, B.shape(x)[0]",
           # (issue 18: the rule keeps the IndexPlan, whose accessors copy: the snapshot
           # the backends trust is its private array)
           "        ctx._indices, ctx.n = indices, B.shape(x)[0]\n"
           "        ctx.indices = indices._idx",
           [H3], "index_select's snapshot saved under a public name too", k="saved_state"),
    Mutant("dlpack-negative-copy-false", "rtx/_dlpack.pxi",
           "    if copy is not True and _reversed(arr):",
           "    if copy is None and _reversed(arr):",
           [H3], "copy=False exports a negative-stride view", k="negative"),
    Mutant("dlpack-negative-extent-one", "rtx/_dlpack.pxi",
           "        if s < 0 and n > 1:", "        if s < 0 and n > 0:",
           [H3], "a harmless negative stride (extent 1) is refused", k="negative"),
    Mutant("dlpack-empty-reversed", "rtx/_dlpack.pxi",
           "    if arr.size == 0:\n        return False\n    for n, s in", "    for n, s in",
           [H3], "an empty view with a negative stride is refused", k="negative"),
    Mutant("dlpack-stride-sign-kept", "rtx/_dlpack.pxi",
           "        dims[ndim + i] = abs(arr.strides[i]) // itemsize",
           "        dims[ndim + i] = arr.strides[i] // itemsize",
           [H3], "a harmless negative stride is exported negative", k="negative"),
    Mutant("from-dlpack-no-copy-retry", "rtx/creation.py",
           "        a = np.from_dlpack(obj, copy=True)\n", "        raise\n",
           [H3], "rtx.from_dlpack(copy=None) gives up on a producer that needs a copy",
           k="negative"),
    Mutant("storage-free-allocates", "rtx/_storage.pxi",
           "        if rtx_cache_push(cls, ptr):",
           "        _held = [cls]\n        if rtx_cache_push(cls, ptr):",
           [H3], "a free allocates a Python object (a collection can run inside it)",
           k="reentrant"),
    Mutant("storage-evicts-newest", "rtx/_storage.pxi",
           "        int i = rtx_lru_head;", "        int i = rtx_lru_tail;",
           [H3, "tests/kernels/test_storage.py"],
           "eviction takes the most recently touched class", k="evict or model"),
    # the small ops' C paths and the slot maker (2026-12-06)
    Mutant("owned-binary-broadcasts", "rtx/_storage.pxi",
           "is not d or not cnp.PyArray_SAMESHAPE(x, y)", "is not d",
           ["tests/kernels/test_storage.py"],
           "owned_binary takes a pair of shapes it was never meant to (broadcasting)",
           k="owned"),
    Mutant("fused-unary-any-layout", "rtx/_fused.pxi",
           "(t != cnp.NPY_FLOAT32 and t != cnp.NPY_FLOAT64) or not "
           "cnp.PyArray_IS_C_CONTIGUOUS(x)",
           "(t != cnp.NPY_FLOAT32 and t != cnp.NPY_FLOAT64)",
           ["tests/backend/test_fusion.py"],
           "fused_unary reads a strided array as if it were contiguous", k="fused_unary"),
    Mutant("slot-maker-no-incref", "rtx/_record.pxi",
           "    Py_INCREF(v)\n    slot[0] = <PyObject*>v",
           "    slot[0] = <PyObject*>v",
           ["tests/kernels/test_slot_maker.py"],
           "a slot stores a borrowed reference (freed under it later)"),
    # the small matmul in C and relu on the fused loop (2026-12-06, second round)
    Mutant("owned-matmul-misaligned", "rtx/_storage.pxi",
           "    if cnp.PyArray_DIM(x, 1) != cnp.PyArray_DIM(y, 0):\n        return None",
           "    if False:\n        return None",
           ["tests/kernels/test_storage.py"],
           "owned_matmul takes misaligned shapes (numpy raises midway instead of None)",
           k="owned_matmul"),
    Mutant("owned-matmul-any-dtype", "rtx/_storage.pxi",
           "(d is not _ST_F32 and d is not _ST_F64) or <object>cnp.PyArray_DESCR(y) is not d",
           "(d is not _ST_F32 and d is not _ST_F64)",
           ["tests/kernels/test_storage.py"],
           "owned_matmul multiplies a float32 by a float64 into a float32 buffer",
           k="owned_matmul"),
    Mutant("owned-matmul-output-unbounded", "rtx/_storage.pxi",
           "    if (<double>dims[0] * <double>dims[1] >= <double>max_size\n            or ",
           "    if (",
           ["tests/kernels/test_storage.py"],
           "with k = 0 owned_matmul sizes an m x n output by m * n * k (a wrapped byte count)",
           k="owned_matmul"),
    Mutant("fused-relu-drops-nan", "rtx/_fused.pxi",
           "            keep = (x > 0) | (x != x)\n", "            keep = (x > 0)\n",
           ["tests/backend/test_hardening3_fusion.py"],
           "relu's fused loop (also the CPU relu's small path) turns NaN into 0",
           k="numpys_maximum"),
    # issue 22: segment_matmul_sum (RGCNConv's chunked transform-and-sum)
    Mutant("accumulate-serial-ignores-zero", "rtx/_index.pxi",
           "            _scatter_row_range(&src[0, 0], &idx[0], E, F, &out[0, 0], 0, N, zero)",
           "            _scatter_row_range(&src[0, 0], &idx[0], E, F, &out[0, 0], 0, N, False)",
           [TSMS], "the one-thread accumulate never zero-fills its first chunk's output",
           k="scatter_accumulate"),
    Mutant("sms-weight-grad-overwrites", "rtx/backend/grouped.py",
           "                    np.add(gw[t], part, out=gw[t])",
           "                    np.copyto(gw[t], part)",
           [TSMS], "a type's later chunk overwrites its weight gradient instead of adding",
           k="chunked"),
    Mutant("sms-chunk-drops-a-row", "rtx/backend/grouped.py",
           "for r in range(r0, r1, step)]", "for r in range(r0, r1 - 1, step)]",
           [TSMS], "the chunks of a type block skip its last row when the step divides it",
           k="chunked or untouched"),
    # issue 22: a split matmul's pieces run by rtx's OpenMP team (rtx/_gemm.pxi)
    Mutant("team-gemm-piece-short", "rtx/_gemm.pxi",
           "            hi = L * (p + 1) // pieces\n",
           "            hi = L * (p + 1) // pieces - (1 if p == 0 else 0)\n",
           [TTG], "the first piece of a split stops one row (or column) short", k="split"),
    Mutant("team-gemm-takes-syrk", "rtx/_gemm.pxi",
           "    if (<const void*>A == <const void*>B and as0 == bs1 and as1 == bs0 and ta != tb):",
           "    if False:",
           [TTG], "a @ a.T goes to ?gemm, where numpy calls syrk (other bits)", k="declines"),
    Mutant("team-gemm-parts-overlap-unchecked", "rtx/_gemm.pxi",
           "    if pbase != NULL:\n        olo = <char*>pbase",
           "    if False:\n        olo = <char*>pbase",
           [TTG], "inner-split partials that overlap an input are written anyway",
           k="overlaps"),
    Mutant("team-gemm-partials-not-added", "rtx/backend/_matmul.py",
           "        for p in rest:\n            np.add(out, p, out=out)",
           "        for p in rest[:1]:\n            np.add(out, p, out=out)",
           [TMT], "an inner split adds only its first two partial products", k="matches"),
    # issue 22: cross-entropy's row kernels (rtx/_loss.pxi)
    Mutant("ce-row-max-drops-the-tail", "rtx/_loss.pxi",
           "for (; j < C; j++) {", "for (; j < C - 1; j++) {",
           [TLK], "the row max skips the row's last column past the lanes", k="values"),
    Mutant("ce-nan-row-not-reread", "rtx/_loss.pxi",
           "        if (c != c) {", "        if (0) {",
           [TLK], "a row with a NaN or an infinity keeps the lanes' max (NaN lost)",
           k="nan_and_infinity"),
    Mutant("ce-grad-target-not-subtracted", "rtx/_loss.pxi",
           "                o[t] = (EXP((x[t] - m) - l) - (T)1) * s;",
           "                o[t] = EXP((x[t] - m) - l) * s;",
           [TLK], "the backward forgets the one-hot term", k="values"),
    # issue 22: float32 message passing's C row loops, SSE2 and AVX2 (rtx/_message.pxi)
    Mutant("msg-avx2-dot-wrong-pairs", "rtx/_message.pxi",
           "_mm256_shuffle_ps(q[0], q[1], _MM_SHUFFLE(3, 1, 3, 1))",
           "_mm256_shuffle_ps(q[0], q[1], _MM_SHUFFLE(2, 0, 2, 0))",
           [TMK], "the AVX2 dots add a head's even lanes twice (skipped without AVX2)",
           k="avx2"),
    Mutant("msg-rows-unweighted-short", "rtx/_message.pxi",
           "                    for (Py_ssize_t j = 0; j < F; j++) row[j] += xs[j];",
           "                    for (Py_ssize_t j = 0; j < F - 1; j++) row[j] += xs[j];",
           [TMK], "the C forward's unweighted rows drop their last column", k="in_order"),
    Mutant("msg-bwd-dot-reads-g-twice", "rtx/_message.pxi",
           "                    DOT(grow, xs, H, C, gwp + e * H);",
           "                    DOT(grow, grow, H, C, gwp + e * H);",
           [TMK], "the C backward's weight gradient dots g with itself", k="bitwise"),
    # issue 22: GAT's fused edge scores (rtx/_gatv2.pxi, rtx/_autodiff/ops/gatv2.py)
    Mutant("gat-scores-one-head", "rtx/_gatv2.pxi",
           "        z = s[h] + d[h]\n", "        z = s[h] + d[0]\n",
           [TGS], "every head adds the target's first logit", k="composed"),
    Mutant("gat-scores-negative-slope-from-output", "rtx/_autodiff/ops/gatv2.py",
           "        if slope >= 0:\n            # leaky_relu's rule reads",
           "        if True:\n            # leaky_relu's rule reads",
           [TGS], "a negative slope's backward reads the output's sign, not the sum's",
           k="composed"),
    Mutant("head-dot-lone-block", "rtx/_gatv2.pxi",
           "const Py_ssize_t b1 = b + 1 < nb ? b + 1 : b;",
           "const Py_ssize_t b1 = b + 1 < nb ? b + 1 : 0;",
           [THD], "a lone last block of grad_att's sums pairs with block 0", k="bits_of_each"),
    Mutant("head-dot-block-head", "rtx/_gatv2.pxi",
           "const Py_ssize_t h0 = b * 16 / C, h1 = b1 * 16 / C;",
           "const Py_ssize_t h0 = b * 16 / C, h1 = h0;",
           [THD], "the second block of a pair scales by the first block's head",
           k="bits_of_each"),
    Mutant("csr-narrow-negzero", "rtx/_csr.pxi",
           "        for j in range(W):\n            acc[j] = 0\n",
           "        for j in range(W):\n            acc[j] = -0.0\n",
           [TIP], "the narrow grouped sums start from -0.0 (empty rows, all -0.0 rows)",
           k="narrow_rows"),
    Mutant("softmax-runs-split", "rtx/_segment.pxi",
           "nr += ip[e0 + k] != ip[e0 + k - 1]",
           "nr += 1",
           ["tests/graph/test_segment.py"],
           "the run-indexed softmax state starts a new run at every entry",
           k="sorted_chunks"),
    Mutant("arith-scalar-rev", "rtx/_vmath.pxi",
           "switch (op + 4 * (rev != 0)) {",
           "switch (op) {",
           ["tests/kernels/test_storage.py"],
           "a Python number first (2 - x) is computed as x - 2",
           k="numpys_bits"),
    Mutant("softmax-streams-cut", "rtx/_segment.pxi",
           "c[t] = _sorted_cut(ip, n, t, ENT_STREAMS)",
           "c[t] = (n * t) // ENT_STREAMS",
           ["tests/graph/test_segment.py"],
           "the interleaved parts of a sorted one-head chunk are cut inside segments",
           k="sorted_chunks"),
    Mutant("softmax-streams-tail", "rtx/_segment.pxi",
           "_ent_sum(pp + c[t] + L, ip + c[t] + L, c[t + 1] - c[t] - L, 1, d)",
           "_ent_sum(pp + c[t] + L, ip + c[t] + L, c[t + 1] - c[t] - L - (t == 1), 1, d)",
           ["tests/graph/test_segment.py"],
           "one part's tail loses its last entry in the interleaved sums",
           k="sorted_chunks"),
    Mutant("snapshot-parts-offset", "rtx/_snapshot.pxi",
           "a = m * t // threads + res[t]",
           "a = res[t]",
           ["tests/kernels/test_hardening_kernels.py"],
           "a bad index found by a later part is reported at its offset in the part",
           k="parts"),
    Mutant("snapshot-parts-last", "rtx/_snapshot.pxi",
           "m * (t + 1) // threads - a, un, check)",
           "m * (t + 1) // threads - a - (t == threads - 1), un, check)",
           ["tests/kernels/test_hardening_kernels.py"],
           "the last part leaves its last index uncopied and unchecked",
           k="parts"),
    Mutant("backend-state-strong", "rtx/_backend_state.py",
           "_autodiffs: weakref.WeakValueDictionary[int, Autodiff] = weakref.WeakValueDictionary()",
           "_autodiffs: dict[int, Autodiff] = {}",
           [H3], "every backend passed to use_backend stays alive", k="keep or grow"),
    Mutant("fusion-for-strong", "rtx/fusion/__init__.py",
           "_fusions: weakref.WeakValueDictionary[int, Fusion] = weakref.WeakValueDictionary()",
           "_fusions: dict[int, Fusion] = {}",
           [H3], "every backend fused by fusion_for stays alive", k="fusion_for"),
    Mutant("expand-copies", "rtx/_autodiff/ops/shape.py",
           "        return B.expand(a, shape)", "        return B.broadcast_to(a, shape)",
           [H3], "Tensor.expand copies again", k="expand"),
    Mutant("expand-read-only", "rtx/backend/cpu/shape.py",
           "            v.flags.writeable = True\n", "            pass\n",
           [H3], "a non-overlapping part of an expansion no longer writes the base",
           k="expand or expanded"),
    Mutant("overlap-off-by-one", "rtx/backend/cpu/creation.py",
           "        if s == 0 and n > 1:", "        if s == 0 and n > 2:",
           [H3], "an expansion of 2 along a dim accepts in-place writes",
           k="expand or expanded"),
    Mutant("overlap-empty", "rtx/backend/cpu/creation.py",
           "        if not dst.flags.c_contiguous and _overlaps_itself(dst):",
           "        if _overlaps_itself(dst):",
           [H3], "an in-place write into an empty expansion raises", k="expand or expanded"),
    # ---------------------------------------- issue 18: declarations, dtypes, one check
    Mutant("edge-cache-no-compare", "rtx/backend/index_plan.py",
           "            if _same_values(a[0], ei.src._idx) and _same_values(a[1], "
           "ei.dst._idx):",
           "            if True:",
           ["tests/autograd/test_check_count.py", "tests/nn/test_hardening3_nn.py"],
           "a raw edge_index is a hit on its fingerprint alone", k="in_place or repeated"),
    Mutant("self-loops-not-cached", "rtx/backend/index_plan.py",
           "                    loops = self._loops = self._build_loops()",
           "                    loops = self._build_loops()",
           ["tests/nn/test_hetgat.py"], "with_self_loops() rebuilt on every call",
           k="checked_once"),
    Mutant("promotion-zero-dim-float-wins", "rtx/_dtypes.py",
           '    if lower is None or higher.kind == "f":',
           "    if lower is None:",
           ["tests/autograd/test_dtypes.py"], "a zero-dim float64 promotes a float32 tensor",
           k="torchs or three_classes"),
    Mutant("check-rows-unbounded", "rtx/_dtypes.py",
           "    if n > sys.maxsize:",
           "    if False:",
           ["tests/autograd/test_dtypes.py"], "a row count past the platform's size passes",
           k="row_count"),
    Mutant("face-reflected-not-swapped", "rtx/_faces.py",
           '    if face.startswith("__r") and len(pos) == 2:',
           "    if False:",
           ["tests/autograd/test_ops.py"], "2 - t computes t - 2 (a reflected operator face)",
           k="python_scalars"),
    Mutant("array-copy-false-converts", "rtx/tensor.py",
           "            if copy is False:  # numpy 2's protocol",
           "            if copy is True:  # numpy 2's protocol",
           [H3], "np.asarray(t, dtype=..., copy=False) copies silently", k="array_protocol"),
    # ------------------------------------------- loaders (issue 19 item 2, issue 20 item 5)
    Mutant("sample-dict-first-type-only", "rtx/_sample.pxi",
           "                while rc == 0 and k < K:", "                while rc == 0 and k < 1:",
           [TS], "seeds of a second node type are dropped", k="dict"),
    Mutant("sample-eid-all-unshifted", "rtx/_sample.pxi",
           "                po[q] = start + q", "                po[q] = q",
           [TS], "edge ids of a whole neighbourhood forget the node's CSR offset",
           k="edge_ids or dict"),
    Mutant("sample-eid-replace-position", "rtx/_sample.pxi",
           "                po[q] = start + r", "                po[q] = start + q",
           [TS], "edge ids with replacement name the q-th edge, not the drawn one",
           k="edge_ids or dict"),
    Mutant("sample-eid-no-permutation", "rtx/_sample.pxi",
           "            o[k] = pm[ps[k]]", "            o[k] = ps[k]",
           [TS], "edge ids are CSR positions, not positions in edge_index",
           k="edge_ids or dict"),
    Mutant("loader-shuffle-same-every-epoch", LD,
           "rng = np.random.default_rng([_TAG_SHUFFLE, self.seed, epoch])",
           "rng = np.random.default_rng([_TAG_SHUFFLE, self.seed, 0])",
           [TL], "every epoch shuffles the same way", k="covers"),
    Mutant("loader-sample-stream-epoch0", LD,
           "        out = self.sampler.sample((self.input_type, seeds), epoch, b,",
           "        out = self.sampler.sample((self.input_type, seeds), 0, b,",
           [TL], "every epoch samples the same neighbourhoods", k="epochs_differ"),
    Mutant("loader-len-drops-last", LD,
           "        return n // bs if self.drop_last else -(-n // bs)",
           "        return n // bs",
           [TL], "the last, partial batch is always dropped", k="covers or layout"),
    Mutant("loader-mask-input-id-positions", LD,
           "        input_id = pos if self._input_id is None else self._input_id[pos]",
           "        input_id = pos",
           [TL], "a mask's input_id are positions, not PyG's node ids", k="layout"),
    Mutant("loader-gather-sorted", LD,
           "                store[k] = _gather(v, n_id)",
           "                store[k] = _gather(v, np.sort(n_id))",
           [TL], "node attributes gathered in another order than n_id", k="layout"),
    Mutant("loader-edge-attr-sorted", LD,
           "                    store[k] = _gather(v, e_id)",
           "                    store[k] = _gather(v, np.sort(e_id))",
           [TL], "edge attributes gathered in another order than e_id", k="layout"),
    Mutant("loader-prefetch-unbounded", LD,
           "        self.slots = threading.Semaphore(prefetch)",
           "        self.slots = threading.Semaphore(prefetch + 1)",
           [TL], "the thread makes one batch more than prefetch ahead", k="bounded"),
    Mutant("loader-error-swallowed", LD,
           "                self.close()\n                raise exc",
           "                self.close()\n                return batch",
           [TL], "an exception in the worker becomes a None batch", k="errors"),
    Mutant("loader-stop-not-checked", LD,
           "            if st.stop.is_set():\n                return\n", "",
           [TL], "the worker ignores the stop request (breaking out hangs)", k="breaking"),
    Mutant("loader-shutdown-no-wake", LD,
           "    st.slots.release()            # wake a worker waiting for a slot\n", "",
           [TL], "closing leaves a worker waiting for a slot (join hangs)", k="breaking"),
    Mutant("link-negatives-may-be-edges", LD,
           "            rows.append(g[0].astype(np.int64, copy=False))\n"
           "            cols.append(g[1].astype(np.int64, copy=False))\n", "",
           [TL], "negatives are checked against the seed edges only, not the graph's",
           k="link"),
    Mutant("link-label-index-swapped", LD,
           "            store[\"edge_label_index\"] = from_numpy(np.stack([inv_src, inv_dst]))",
           "            store[\"edge_label_index\"] = from_numpy(np.stack([inv_dst, inv_src]))",
           [TL], "edge_label_index rows swapped", k="link"),
    Mutant("link-labels-not-shifted", LD,
           "            if mode == \"binary\" and lab.size and lab.min() == 0:",
           "            if False:",
           [TL], "given labels starting at 0 collide with the negatives' 0", k="link_labels"),
    Mutant("link-triplet-unchecked", LD,
           "            bad = self._taken(srep, neg, ex)\n",
           "            bad = np.zeros(srep.shape[0], dtype=bool)\n",
           [TL], "triplet negatives may be edges of the graph", k="link"),
    Mutant("link-triplet-self-loops", LD,
           "            loop = row == col\n",
           "            loop = np.zeros(row.shape[0], dtype=bool)\n",
           [TL], "triplet negatives within one node type may be the source itself", k="link"),
    # ------------------------------------- issue 23: bounded failures, shards, halo exchange
    Mutant("agree-ignores-op", DCOMM,
           "    control = [_F_KIND, _F_OP, _F_ROOT, _F_EXTRA, _F_EXTRA + 1]",
           "    control = [_F_KIND, _F_ROOT, _F_EXTRA, _F_EXTRA + 1]",
           [TCOL], "ranks that reduce with different ops are not told", k="different_ops",
           mpi=2),
    Mutant("agree-ignores-root", DCOMM,
           "    control = [_F_KIND, _F_OP, _F_ROOT, _F_EXTRA, _F_EXTRA + 1]",
           "    control = [_F_KIND, _F_OP, _F_EXTRA, _F_EXTRA + 1]",
           [TCOL], "broadcasts from different roots are not told", k="different_ops", mpi=2),
    Mutant("agree-ignores-dtype", DCOMM,
           "    shape_f = slice(_F_DTYPE, _F_SHAPE_HASH + 1)",
           "    shape_f = slice(_F_NDIM, _F_SHAPE_HASH + 1)",
           [TCOL], "tensors of different dtypes meet in one collective", k="mismatched",
           mpi=2),
    Mutant("bool-max-is-and", DCOMM,
           "        return MPI.LOR if op in (\"lor\", \"max\") else MPI.LAND",
           "        return MPI.LOR if op == \"lor\" else MPI.LAND",
           [TCOL], "all_reduce(op='max') of bools is a logical and", k="bool", mpi=2),
    Mutant("no-abort-on-exception", DCOMM,
           "        sys.excepthook = _excepthook\n", "        pass\n",
           [TFAIL], "an exception on one rank leaves the others waiting",
           k="an_exception_on_one_rank", mpi=2),
    Mutant("no-exit-handshake", DCOMM,
           "    atexit.register(_at_exit)  # after mpi4py's own (atexit runs last-in first-out)",
           "    pass",
           [TFAIL], "a rank that exits early leaves the others waiting", k="early_exit", mpi=2),
    Mutant("watchdog-never-fires", DCOMM,
           "    deadline = t0 + _TIMEOUT\n", "    deadline = t0 + _TIMEOUT * 1000\n",
           [TFAIL], "the watchdog waits 1000x its timeout", k="watchdog", mpi=2),
    Mutant("ddp-no-forward-count", "rtx/distributed/ddp.py",
           "extra=(self._forwards, self._syncs + 1)", "extra=(0, self._syncs + 1)",
           [TFAIL], "an extra backward on one rank is reduced with another rank's next step",
           k="extra_backward", mpi=2),
    Mutant("halo-backward-counts-swapped", "rtx/distributed/halo.py",
           "        reqs, outs, keep = self._post(list(grads), self.recv_rows, self.send_rows, "
           "None,",
           "        reqs, outs, keep = self._post(list(grads), self.send_rows, self.recv_rows, "
           "None,",
           [THET], "the backward exchange sends the gradients with the forward's counts",
           k="adjoint or halo_exchange_matches", mpi=2),
    Mutant("overlap-dst-logits-of-src", "rtx/distributed/hetgat.py",
           "                          h_own[d] @ wa_dst.T))",
           "                          h_own[s] @ wa_dst.T if s == d else h_own[d] @ wa_src.T))",
           [THET], "the overlapped layer scores destinations with the source attention",
           k="halo_exchange_matches", mpi=2),
    Mutant("halo-not-sorted-by-owner", "rtx/distributed/shards.py",
           "        halo = halo[np.lexsort((halo, parts[nt][halo]))]  # by owner, then global id",
           "        halo = np.sort(halo)",
           [TDIST], "a shard's halo is not grouped by owner", k="halo_subgraph"),
    Mutant("halo-every-source", "rtx/distributed/shards.py",
           "        need[et[0]][ei[0][hit]] = True\n    nodes",
           "        need[et[0]][ei[0]] = True\n    nodes",
           [TDIST], "the halo holds sources of edges into other parts too", k="halo_subgraph"),
    Mutant("shard-sha-unchecked", "rtx/distributed/shards.py",
           "    if _sha256(path) != entry[\"sha256\"]:", "    if False:",
           [TDIST], "a damaged shard file is read", k="damaged"),
    Mutant("stats-layer-relations-ignored", "rtx/distributed/shards.py",
           "            for r, c in enumerate(halo_counts(rels[layer], nt)):",
           "            for r, c in enumerate(halo_counts(list(eis), nt)):",
           [TDIST], "every layer's halo counted over every relation", k="without_features"),
    Mutant("rng-not-restored", "rtx/distributed/checkpoint.py",
           "        _set_rng_state(mine[\"rng\"])\n", "        pass\n",
           [TRES], "a resumed run draws other random numbers", k="random_stream", mpi=2),
    Mutant("resume-optimizer-not-restored", "rtx/distributed/checkpoint.py",
           "        optimizer.load_state_dict(state[\"optimizer\"])\n", "        pass\n",
           [TRES], "a resumed run restarts Adam's moments", k="2_ranks and exchange", mpi=2),
    Mutant("fingerprint-skips-epochs", "rtx/examples/_distributed.py",
           "_PER_RANK = (\"threads\", \"progress\",",
           "_PER_RANK = (\"epochs\", \"threads\", \"progress\",",
           [TFAIL], "ranks with different --epochs are not refused", k="other_arguments",
           mpi=2),
    Mutant("cli-error-printed-by-every-rank", "rtx/examples/_distributed.py",
           "        if dist.rank() == 0:\n            print(f\"{self.ap.prog}: error:",
           "        if True:\n            print(f\"{self.ap.prog}: error:",
           [TFAIL], "a user error is printed by every rank", k="printed_once", mpi=2),
    Mutant("threads-not-divided", "rtx/examples/_distributed.py",
           "    n = max(1, usable // here)", "    n = usable",
           [THET], "every rank takes every core", k="batch_logs", mpi=2),
    # ------------------------------------------------- issue 21: layers (h21)
    Mutant("lazy-template-any-rows", "rtx/nn/lazy.py",
           "any(d < 0 or (k >= 0 and d != k) for d, k in zip(s, t, strict=True))",
           "any(d < 0 for d in s)",
           [TLAZY], "a lazy weight accepts a checkpoint with the wrong number of rows"),
    Mutant("lazy-shared-two-shapes", "rtx/nn/lazy.py",
           "        elif id(t) in seen and seen[id(t)][1] != shape:",
           "        elif False:",
           [TLAZY], "a shared lazy parameter is sized twice from one checkpoint"),
    Mutant("lazy-state-dict-silent", "rtx/nn/module.py",
           "                    if is_lazy(p):  # lazy sizes (rtx/nn/lazy.py)",
           "                    if False:",
           [TLAZY], "state_dict() of a lazy module does not name the lazy key"),
    Mutant("linear-lazy-not-initialised", "rtx/nn/linear.py",
           "            w.materialize((self.out_features, in_features))\n"
           "            self.reset_parameters()",
           "            w.materialize((self.out_features, in_features))",
           [TLAZY], "a lazy Linear keeps uninitialised memory as its weights"),
    Mutant("sage-mean-not-divided", "rtx/nn/conv/sage_conv.py",
           "            agg = agg * self._inv_degree(ei, x_src.dtype)",
           "            agg = agg",
           [TSAGE], "mean aggregation is a sum"),
    Mutant("sage-narrow-bias-dropped", "rtx/nn/conv/sage_conv.py",
           "            return agg if lin.bias is None else agg + lin.bias",
           "            return agg",
           [TSAGE], "the narrowing sum / mean path loses lin_l's bias"),
    Mutant("sage-root-on-sources", "rtx/nn/conv/sage_conv.py",
           "            out = out + self.lin_r(x_dst)",
           "            out = out + self.lin_r(x_src)",
           [TSAGE], "the root term reads the source features"),
    Mutant("gatv2-fill-mean-is-sum", "rtx/nn/conv/gatv2_conv.py",
           "                    fill = fill * tensor((1.0 / cnt).astype(attr.dtype)"
           ".reshape(-1, 1))",
           "                    fill = fill",
           [TGAT2], "fill_value='mean' sums the incoming edges' features"),
    Mutant("gatv2-residual-on-sources", "rtx/nn/conv/gatv2_conv.py",
           "            out = out + self.res(x_dst)",
           "            out = out + self.res(x_src)",
           [TGAT2], "the residual maps the source features"),
    Mutant("bn-running-var-biased", "rtx/nn/norm.py",
           "            v = (var.detach().reshape(self.num_features) * (n / (n - 1))).to(",
           "            v = (var.detach().reshape(self.num_features) * 1.0).to(",
           [TNORM], "running_var tracks the biased batch variance"),
    Mutant("bn-eval-uses-batch-stats", "rtx/nn/norm.py",
           "        use_batch = self.training or not self.track_running_stats",
           "        use_batch = True",
           [TNORM], "eval mode normalises with the batch's statistics"),
    Mutant("layernorm-eps-outside-root", "rtx/nn/norm.py",
           "\n        var = (xc * xc).mean(dims, keepdim=True)\n"
           "        out = xc / sqrt(var + self.eps)",
           "\n        var = (xc * xc).mean(dims, keepdim=True)\n"
           "        out = xc / (sqrt(var) + self.eps)",
           [TNORM], "LayerNorm adds eps outside the square root"),
    Mutant("graph-ln-count-nodes-only", "rtx/nn/norm.py",
           "            norm = tensor((1.0 / (cnt * x.shape[1])).astype(x.dtype).reshape(-1, 1))",
           "            norm = tensor((1.0 / cnt).astype(x.dtype).reshape(-1, 1))",
           [TNORM], "per-graph statistics divide by the node count, not nodes x channels"),
    Mutant("gatv2-kernel-slope-flipped", "rtx/_gatv2.pxi",
           "        d[j] = 1 if z[j] > 0 else slope",
           "        d[j] = slope if z[j] > 0 else 1",
           [TGAT2], "the fused scores' leaky ReLU slopes the positive side", k="op_"),
    Mutant("gatv2-kernel-att-chunks-skipped", "rtx/_gatv2.pxi",
           "    for c in range(c0, c1):",
           "    for c in range(c0, c1 - 1):",
           [TGAT2], "the by-target backward skips the last chunk of each range", k="op_"),
    Mutant("gatv2-kernel-sum-drops-third", "rtx/_gatv2.pxi",
           "    if j + 2 < n:\n        s2 = s2 + t[j + 2]\n",
           "",
           [TGAT2], "a head's sum drops the third of three trailing channels", k="op_"),
    Mutant("grouped-wgrad-drops-tail-row", "rtx/_grouped.pxi",
           "        while p < pend:\n            i0 = perm[p]",
           "        while p + 1 < pend:\n            i0 = perm[p]",
           [THLIN], "grad_weight drops a type's last row when its count is not a multiple "
           "of four", k="values_and_gradients"),
    Mutant("grouped-rows-skip-last-chunk", "rtx/_grouped.pxi",
           "        for p in range(c * GROUPED_CHUNK, p1):",
           "        for p in range(c * GROUPED_CHUNK, p1 - 1):",
           [THLIN], "the threaded row pass skips the last row of every chunk", k="bits"),
    Mutant("grouped-blas-wgrad-not-zeroed", "rtx/backend/cpu/grouped.py",
           "                gw = empty(weight.shape, weight.dtype, zero=True)",
           "                gw = empty(weight.shape, weight.dtype)",
           [THLIN], "the sorted path leaves a type without rows with garbage gradients",
           k="values_and_gradients"),
    Mutant("hetero-linear-bias-type0", "rtx/nn/hetero_linear.py",
           "            out = out + index_select(self.bias, plan)",
           "            out = out + self.bias[0]",
           [THLIN], "every row gets the first type's bias", k="hetero_linear_matches"),
    Mutant("rgcn-mean-is-sum", "rtx/nn/conv/rgcn_conv.py",
           "        inv = (1.0 / counts)[pair_of_edge]",
           "        inv = np.ones_like(pair_of_edge, dtype=np.float64)",
           [TRGCN], "aggr='mean' sums each relation's messages", k="plain"),
    Mutant("rgcn-pairs-by-target-only", "rtx/nn/conv/rgcn_conv.py",
           "        key = types.indices.astype(np.int64, copy=False) * n_dst + dst",
           "        key = 0 * types.indices.astype(np.int64, copy=False) * n_dst + dst",
           [TRGCN], "every edge is treated as relation 0", k="plain"),
    Mutant("rgcn-cache-ignores-types", "rtx/nn/conv/rgcn_conv.py",
           "        if cached is not None and cached[0] is ei and cached[1] is types:",
           "        if cached is not None and cached[0] is ei:",
           [TRGCN], "new edge types on the same edges reuse the old grouping", k="reused"),
]


def _copy_tree(dst: str) -> None:
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    for name in ("setup.py", "pyproject.toml", "README.md", "MANIFEST.in"):
        if os.path.exists(os.path.join(ROOT, name)):
            shutil.copy2(os.path.join(ROOT, name), dst)
    ign = shutil.ignore_patterns("__pycache__", "*.c", "*.o", ".hypothesis")
    shutil.copytree(os.path.join(ROOT, "rtx"), os.path.join(dst, "rtx"), ignore=ign)
    shutil.copytree(os.path.join(ROOT, "tests"), os.path.join(dst, "tests"), ignore=ign)


def _build(dst: str) -> tuple[bool, str]:
    for f in os.listdir(os.path.join(dst, "rtx")):
        if f.startswith("_kernels") and f.endswith(".so"):
            os.remove(os.path.join(dst, "rtx", f))
    # the kernels only: the tests run the .py modules (RTX_PURE_PYTHON, _run_tests),
    # which the Python mutants edit
    env = {**os.environ, "RTX_COMPILE_PY": "0"}
    p = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=dst,
                       capture_output=True, text=True, env=env)
    return p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]


def _run_tests(dst: str, m: Mutant | None, tests: list[str], k: str,
               timeout: float) -> tuple[int, str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = dst
    env["RTX_FUZZ_EXAMPLES"] = "30"
    env["RTX_PURE_PYTHON"] = "1"   # a mutant in a compiled module's .py must take effect
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
           *tests]
    if m is not None and m.mpi:  # tests/mpi: under a launcher; a hang ends in 150 s
        cmd = ["mpiexec", "-n", str(m.mpi), *cmd]
        env["RTX_DIST_TIMEOUT"] = "150"  # above tests/mpi/jobs.py's 90 s job timeout
    if k:
        cmd += ["-k", k]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=dst, env=env, capture_output=True, text=True,
                           timeout=timeout)
        return p.returncode, (p.stdout + p.stderr)[-3000:], time.perf_counter() - t0
    except subprocess.TimeoutExpired:
        return -999, "timeout", time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep build/mutation/<id> trees")
    ap.add_argument("--timeout", type=float, default=400)
    args = ap.parse_args()
    mutants = [m for m in MUTANTS if not args.only or m.id in args.only.split(",")]
    if args.list:
        for m in mutants:
            print(f"{m.id:30s} {m.path:24s} {m.what}")
        return 0
    os.makedirs(WORK, exist_ok=True)

    # baseline: the unmutated tree passes every selected test
    base = os.path.join(WORK, "baseline")
    print("=== mutation: baseline build + tests", flush=True)
    _copy_tree(base)
    ok, log = _build(base)
    if not ok:
        print(log)
        return 1
    so = [f for f in os.listdir(os.path.join(base, "rtx"))
          if f.startswith("_kernels") and f.endswith(".so")]
    union = sorted({t for m in mutants for t in m.tests})
    rc, out, secs = _run_tests(base, None, union, "", args.timeout * 3)
    if rc != 0:
        print(f"baseline FAILS ({rc}):\n{out}")
        return 1
    for n in sorted({m.mpi for m in mutants if m.mpi}):  # the MPI tests, under mpiexec
        probe = Mutant("baseline", "", "", "", [], "", mpi=n)
        mpi_union = sorted({t for m in mutants if m.mpi == n for t in m.tests})
        rc, out, secs = _run_tests(base, probe, mpi_union, "", args.timeout * 3)
        if rc != 0:
            print(f"baseline FAILS under mpiexec -n {n} ({rc}):\n{out}")
            return 1
    print("=== mutation: baseline passes", flush=True)

    results = []
    for m in mutants:
        dst = os.path.join(WORK, m.id)
        _copy_tree(dst)
        path = os.path.join(dst, m.path)
        with open(path) as fh:
            text = fh.read()
        n = text.count(m.find)
        if n != 1:
            results.append((m, "invalid", f"edit matches {n} times", 0.0))
            print(f"--- {m.id}: INVALID (matches {n} times)", flush=True)
            continue
        with open(path, "w") as fh:
            fh.write(text.replace(m.find, m.replace))
        if m.path.endswith((".pyx", ".pxi")):
            ok, log = _build(dst)
            if not ok:
                results.append((m, "invalid", "does not build: " + log[-300:], 0.0))
                print(f"--- {m.id}: INVALID (build failed)", flush=True)
                continue
        else:
            for f in so:
                shutil.copy2(os.path.join(base, "rtx", f), os.path.join(dst, "rtx", f))
        rc, out, secs = _run_tests(dst, m, m.tests, m.k, args.timeout)
        verdict = "caught" if rc != 0 else "missed"
        first = next((ln for ln in out.splitlines() if ln.startswith(("FAILED", "ERROR"))),
                     "timeout" if rc == -999 else f"exit {rc}")
        results.append((m, verdict, first, secs))
        print(f"--- {m.id}: {verdict.upper()} in {secs:.0f} s  {first[:160]}", flush=True)
        if not args.keep:
            shutil.rmtree(dst, ignore_errors=True)

    caught = sum(r[1] == "caught" for r in results)
    print(f"\n=== mutation: {caught}/{len(results)} caught")
    for m, verdict, why, _secs in results:
        print(f"{verdict:8s} {m.id:30s} {m.path:22s} {m.what}")
        if verdict != "caught":
            print(f"         {why[:300]}")
    return 0 if caught == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
