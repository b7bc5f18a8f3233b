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
HK = "tests/test_hardening_kernels.py"
TS = "tests/test_sampler.py"


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
           ["tests/test_index_ops.py", "tests/test_ownership.py"],
           "ROWS compaction takes the first row of the next thread's range",
           k="scatter or strateg or add"),
    Mutant("serial-zero-fill-short", "rtx/_index.pxi",
           "    memset(op, 0, <size_t>(N * F) * sizeof(real))\n    if F == 1:",
           "    memset(op, 0, <size_t>(N * F))\n    if F == 1:",
           ["tests/test_index_ops.py"], "serial scatter zero-fills N*F bytes, not elements",
           k="add"),
    Mutant("gather-team-unclamped", "rtx/_index.pxi",
           "    if T > E:\n        T = E\n    if T > 256:\n        T = 256",
           "    if T > E:\n        T = E",
           [HK], "gather_rows passes any num_threads to OpenMP", k="clamp"),
    Mutant("bounds-check-off-by-one", "rtx/_index.pxi",
           "            anybad |= <int>(<uint64_t><int64_t>idx[i] >= un)",
           "            anybad |= <int>(<uint64_t><int64_t>idx[i] > un)",
           ["tests/test_index_ops.py", HK], "first_out_of_bounds accepts index n",
           k="bad or bound"),
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
           [HK, "tests/test_index_ops.py"], "the copy stops at the first bad block",
           k="snapshot or large or bitwise"),
    # ------------------------------------------------------------ storage
    Mutant("current-bytes-bypass", "rtx/_storage.pxi",
           "    rtx_aligned_free(ptr)\n    _system_frees += 1\n",
           "    rtx_aligned_free(ptr)\n    _system_frees += 1\n    _current_bytes += cls\n",
           [HK], "current_bytes not decremented when a freed block bypasses the cache",
           k="memory_stats"),
    Mutant("cache-limit-ignores-cached", "rtx/_storage.pxi",
           "    if not _shutting_down and cls <= _cache_limit - _cached_bytes:",
           "    if not _shutting_down and cls <= _cache_limit:",
           [HK], "the cache grows past its limit", k="memory_stats"),
    Mutant("size-class-rounds-down", "rtx/_storage.pxi",
           "        return (nbytes + ALIGNMENT - 1) & ~(<Py_ssize_t>ALIGNMENT - 1)",
           "        return nbytes & ~(<Py_ssize_t>ALIGNMENT - 1)",
           [HK, "tests/test_storage.py"], "small size classes round down (heap overflow)",
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
           "    if _kernels.is_index_snapshot(idx):\n        check_bounds(idx, n, op)\n",
           "    if _kernels.is_index_snapshot(idx):\n",
           ["tests/test_index_ops.py"], "a reused snapshot is not bounds-checked again",
           k="bad"),
    Mutant("tape-keeps-user-indices", "rtx/backend/index.py",
           "    return _kernels.snapshot_indices(arr, -1)[0]",
           "    return arr",
           [HK], "the public ops pass the user's own array on (the tape keeps it)",
           k="backward or never_crashes"),
    # ------------------------------------------------------------ sampler
    Mutant("sample-key-ignores-batch", "rtx/_sample.pxi",
           "rtx_combine(rtx_combine(0x5EED5A3D1E5A3D1EULL, seed), epoch), batch)",
           "rtx_combine(rtx_combine(0x5EED5A3D1E5A3D1EULL, seed), epoch), 0)",
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
           "rtx_below(rtx_draw(key, <uint64_t>q), <uint64_t>deg)]",
           "rtx_below(rtx_draw(key, <uint64_t>q), <uint64_t>(deg - 1 if deg > 1 else 1))]",
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
    Mutant("num-rows-negative", "rtx/backend/index.py",
           "    if n < 0:\n        raise ValueError(f\"index_add(): num_rows must be >= 0",
           "    if n < -1:\n        raise ValueError(f\"index_add(): num_rows must be >= 0",
           ["tests/test_index_ops.py"], "num_rows = -1 accepted", k="num_rows"),
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
    p = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=dst,
                       capture_output=True, text=True)
    return p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]


def _run_tests(dst: str, m: Mutant | None, tests: list[str], k: str,
               timeout: float) -> tuple[int, str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = dst
    env["RTX_FUZZ_EXAMPLES"] = "30"
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
           *tests]
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
