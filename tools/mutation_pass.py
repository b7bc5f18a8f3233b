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
H3 = "tests/test_hardening3_interop.py"


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
           "    return not _shutting_down and cls <= _cache_limit - _cached_bytes",
           "    return not _shutting_down and cls <= _cache_limit",
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
           "    if is_index_snapshot(idx):\n        check_bounds(idx, n, op)\n",
           "    if is_index_snapshot(idx):\n",
           ["tests/test_index_ops.py"], "a reused snapshot is not bounds-checked again",
           k="bad"),
    Mutant("tape-keeps-user-indices", "rtx/backend/index.py",
           "    return snapshot_indices(arr, -1)[0]",
           "    return arr",
           [HK], "the public ops pass the user's own array on (the tape keeps it)",
           k="backward or never_crashes"),
    Mutant("num-rows-negative", "rtx/backend/index.py",
           "    if n < 0:\n        raise ValueError(f\"index_add(): num_rows must be >= 0",
           "    if n < -1:\n        raise ValueError(f\"index_add(): num_rows must be >= 0",
           ["tests/test_index_ops.py"], "num_rows = -1 accepted", k="num_rows"),
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
           "        ctx._indices, ctx.n = ctx.indices, _ = indices, B.shape(x)[0]",
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
    Mutant("storage-bucket-not-relooked", "rtx/_storage.pxi",
           "                bucket = _cache.get(cls)   # the cache as it is now\n", "",
           [H3], "the bucket made by a re-entrant free is overwritten", k="reentrant"),
    Mutant("storage-limit-not-rechecked", "rtx/_storage.pxi",
           "            if _fits(cls):                 # re-entered frees may have filled it",
           "            if True:",
           [H3], "a re-entrant free pushes the cache past its limit", k="reentrant"),
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
    Mutant("expand-read-only", "rtx/backend/cpu.py",
           "            v.flags.writeable = True\n", "            pass\n",
           [H3], "a non-overlapping part of an expansion no longer writes the base",
           k="expand or expanded"),
    Mutant("overlap-off-by-one", "rtx/backend/cpu.py",
           "        if s == 0 and n > 1:", "        if s == 0 and n > 2:",
           [H3], "an expansion of 2 along a dim accepts in-place writes",
           k="expand or expanded"),
    Mutant("overlap-empty", "rtx/backend/cpu.py",
           "        if not dst.flags.c_contiguous and _overlaps_itself(dst):",
           "        if _overlaps_itself(dst):",
           [H3], "an in-place write into an empty expansion raises", k="expand or expanded"),
    Mutant("array-copy-false-converts", "rtx/tensor.py",
           "            if copy is False:  # numpy 2's protocol",
           "            if copy is True:  # numpy 2's protocol",
           [H3], "np.asarray(t, dtype=..., copy=False) copies silently", k="array_protocol"),
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
