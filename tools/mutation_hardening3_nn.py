"""Issue 17's mutation pass over the nn / numerics / fusion / threads fixes.

    python tools/mutation_hardening3_nn.py [--only ID[,ID...]] [--list] [--keep]

The same machinery as ``tools/mutation_pass.py`` (copy the tree, apply one
single-line edit, rebuild if a ``.pxi`` changed, run the targeted tests), with
mutants of the code issue 17 added or of the places its tests were written to
watch: the edge caches, plan pickling, the engine's gradient cast, the fused
max/min rules, the pass budget, the Fusion lock, dtype inference, and the four
single-test kills the issue named (HeteroConv mean, the CSR softmax's ``- max``,
``all_reduce(op="mean")``, AdamW's ``lr``).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mutation_pass  # noqa: E402
from mutation_pass import Mutant  # noqa: E402

NN = "tests/nn/test_hardening3_nn.py"
FU = "tests/backend/test_hardening3_fusion.py"
DT = "tests/autograd/test_hardening3_dtypes.py"

MUTANTS = [
    # ---------------------------------------------- the single-test kills
    Mutant("heteroconv-mean-all-relations", "rtx/nn/conv/hetero_conv.py",
           'return acc * (1.0 / len(xs)) if self.aggr == "mean" else acc',
           'return acc * (1.0 / len(self.edge_types)) if self.aggr == "mean" else acc',
           [NN], "mean divides by the layer's relation count", k="heteroconv_mean"),
    Mutant("csr-softmax-no-max", "rtx/_segment.pxi",
           "                    v = _exp(sp[e * H + h0 + j] - m[j])",
           "                    v = _exp(sp[e * H + h0 + j])",
           [NN], "CSR segment softmax without the - max shift", k="wide_rows"),
    Mutant("entry-softmax-no-max", "rtx/_segment.pxi",
           "            v = _exp(sp[q + j] - m[r + j])",
           "            v = _exp(sp[q + j])",
           [NN], "entry-order segment softmax without the - max shift", k="wide_rows"),
    Mutant("all-reduce-mean-no-divide", "rtx/distributed/_comm.py",
           "        np.divide(buf, comm.Get_size(), out=buf)",
           "        np.divide(buf, 1, out=buf)",
           [NN], "all_reduce(op='mean') returns the sum", k="all_reduce_mean"),
    Mutant("adamw-decay-without-lr", "rtx/optim/adam.py",
           "                    p.mul_(1 - lr * wd)",
           "                    p.mul_(1 - wd)",
           [NN], "AdamW's decoupled decay forgets lr", k="adamw"),
    # ------------------------------------------------------------ edge caches
    # (issue 18: GATConv's and HetGAT's by-value caches became the one raw-edge cache of
    # rtx/backend/index_plan.py; the mutants follow it, each run by its own tests)
    Mutant("edge-cache-rereads-entry", "rtx/backend/index_plan.py",
           "                return ei\n        ei = EdgeIndex(a, ns, nd, _op=op)",
           "                return self._entries[key][-1][1]\n"
           "        ei = EdgeIndex(a, ns, nd, _op=op)",
           [NN], "a cache hit returns whatever entry is stored now",
           k="entry_it_compared or four_threads"),
    Mutant("hetgat-cache-rereads-entry", "rtx/backend/index_plan.py",
           "                return ei\n        ei = EdgeIndex(a, ns, nd, _op=op)",
           "                return self._entries[key][-1][1]\n"
           "        ei = EdgeIndex(a, ns, nd, _op=op)",
           [NN], "HetGAT's cache hit returns whatever entry is stored now",
           k="hetgat_edges_hit or hetgat_in_threads"),
    Mutant("edge-cache-no-private-copy", "rtx/backend/index_plan.py",
           "        self._idx = own\n        self._num_rows = n\n",
           "        self._idx = arr if arr.flags.writeable else own\n        self._num_rows = n\n",
           [NN], "the cached edges alias the caller's array", k="in_place"),
    # (gat-pickle-keeps-cache is gone: a GATConv holds no edge cache any more, which
    # test_gatconv_copies_after_forward_give_identical_outputs asserts)
    Mutant("plan-setstate-unchecked", "rtx/backend/index_plan.py",
           '        IndexPlan.__init__(self, slots["_idx"], slots["_num_rows"])',
           '        self._idx, self._num_rows, self._csr = slots["_idx"], slots["_num_rows"], None',
           [NN], "an unpickled plan's indices are not re-checked", k="crafted"),
    # ------------------------------------------------------- gradient dtype
    Mutant("engine-no-grad-cast", "rtx/_autodiff/graph.py",
           "        if dt is not None and B.dtype(g) != dt:",
           "        if False and dt is not None and B.dtype(g) != dt:",
           [NN], "the engine passes a float64 gradient into a float32 rule",
           k="float64_gradient or float32_then"),
    Mutant("function-no-grad-cast", "rtx/autograd/function.py",
           "            elif meta is not None and B.dtype(gk) != meta[1]:",
           "            elif False:",
           [NN], "a custom Function's rule gets another dtype", k="outputs_dtype"),
    # ------------------------------------------------------------- fusion
    Mutant("fused-max-tie-first", "rtx/_fused.pxi",
           "            keep = (x > y) | (x != x)",
           "            keep = (x >= y) | (x != x)",
           [FU], "fused maximum returns the first operand on a tie", k="bitwise"),
    Mutant("fused-min-drops-nan", "rtx/_fused.pxi",
           "            keep = (x < y) | (x != x)",
           "            keep = (x < y)",
           [FU], "fused minimum drops a NaN first operand", k="bitwise or pinned"),
    Mutant("fused-relu-keeps-neg-zero", "rtx/_fused.pxi",
           "            keep = (x > 0) | (x != x)",
           "            keep = (x >= 0) | (x != x)",
           [FU], "fused relu(-0.0) is -0.0", k="relu"),
    Mutant("flush-one-giant-pass", "rtx/fusion/backend.py",
           "                            if batch and total + n.size > MAX_PASS_NODES:",
           "                            if False:",
           [FU], "a flush runs all pending results as one program", k="five_thousand"),
    Mutant("no-unfused-fallback", "rtx/fusion/backend.py",
           "            self.stats[\"unfused_fallbacks\"] += 1\n"
           "            self._run_unfused(roots)",
           "            raise",
           [FU], "a refused pass stays pending", k="poisons"),
    Mutant("pending-add-unlocked", "rtx/fusion/backend.py",
           "        with self._lock:  # another thread's flush may be iterating the set\n"
           "            self._pending.add(node)",
           "        self._pending.add(node)",
           [FU], "records into the pending set without the lock", k="sharing_one"),
    Mutant("clear-cache-unlocked", "rtx/fusion/backend.py",
           "        with self._lock:  # a flush in another thread may be using the cache\n"
           "            self._cache.clear()",
           "        self._cache.clear()",
           [FU], "clear_cache without the lock", k="clear_cache"),
    Mutant("fusion-for-unlocked", "rtx/fusion/__init__.py",
           "        with _fusions_lock:  # check-then-insert: two threads must not make two",
           "        if True:",
           [FU], "fusion_for's check-then-insert unlocked", k="fusion_for"),
    # ------------------------------------------------------------- dtypes
    Mutant("infer-floats-always-float32", "rtx/_dtypes.py",
           "        return _widen(max(floats, key=lambda d: d.itemsize))",
           "        return float32",
           [DT], "a float64 leaf no longer wins", k="table"),
    Mutant("infer-ints-numpy-promotion", "rtx/_dtypes.py",
           "    floats = [d for d in leaves if d.kind == \"f\"]\n    if floats:",
           "    floats = [d for d in leaves if d.kind == \"f\"]\n    if floats and not any(\n"
           "            d.kind in \"iu\" for d in leaves):",
           [DT], "integers and floats mixed fall back to numpy's promotion", k="table"),
    Mutant("widen-ints-to-int32", "rtx/_dtypes.py",
           "    if dt.kind in \"iu\":\n        return int64",
           "    if dt.kind in \"iu\":\n        return int32",
           [DT], "small integer dtypes widen to int32", k="table"),
    Mutant("big-ints-refused-with-floats", "rtx/_dtypes.py",
           "        if want is not None and want.kind == \"f\":",
           "        if False:",
           [DT], "[2**70, 1.0] range-checked as ints", k="table or big_ints"),
    Mutant("operand-numpy-float-strong", "rtx/tensor.py",
           "        if isinstance(x, np.generic):\n            # a numpy scalar acts",
           "        if isinstance(x, np.generic) and not isinstance(x, float):\n"
           "            # a numpy scalar acts",
           [DT], "np.float64 operands pass as floats and promote strongly", k="operands"),
    Mutant("full-numpy-int-float32", "rtx/creation.py",
           "        elif isinstance(fill_value, (int, np.integer)):",
           "        elif isinstance(fill_value, int):",
           [DT], "full() with a numpy integer gives float32", k="full"),
    Mutant("arange-bool-float", "rtx/creation.py",
           "        ints = all(isinstance(v, int) for v in (start, end, step))",
           "        ints = all(isinstance(v, int) and not isinstance(v, bool)\n"
           "                   for v in (start, end, step))",
           [DT], "arange(True) is float32", k="arange"),
]


if __name__ == "__main__":
    mutation_pass.MUTANTS = MUTANTS
    sys.exit(mutation_pass.main())
