"""Prove that the memory-checking jobs bite.

    python tools/selftest/run.py TOOL MODULE_DIR RTX_DIR [--supp FILE] [--lsan-supp FILE]

TOOL is ``asan`` (ASan + UBSan), ``lsan`` (the ASan job's leak-check environment) or
``valgrind``.  MODULE_DIR holds the deliberate-bug module built by
``tools/selftest/build.py`` (with ``--asan`` for asan/lsan); RTX_DIR is the
directory whose ``rtx/`` package the job under test imports (the controls use
``rtx.Storage``).  Every case runs in its own process with exactly the
environment and flags of the job.  A bug case passes when the process exits
non-zero AND its output contains the expected report; a control passes when
it exits 0 with no report.  Exit status: 0 when every case passed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.dirname(HERE)
sys.path.insert(0, TOOLS)
from memcheck_env import asan_env, lsan_env, valgrind_cmd, valgrind_env  # noqa: E402

ANY_ASAN = r"ERROR: AddressSanitizer|runtime error:"
ANY_VALGRIND = r"ERROR SUMMARY: [1-9]"

# (function, expected report regex) per tool; None = control, must be clean.
CASES = {
    "asan": [
        ("double_free", r"AddressSanitizer: attempting double-free"),
        ("heap_overflow", r"AddressSanitizer: heap-buffer-overflow"),
        ("use_after_free", r"AddressSanitizer: heap-use-after-free"),
        ("prange_overflow", r"AddressSanitizer: heap-buffer-overflow(?s:.*)_omp_fn"),
        ("dangling_export", r"AddressSanitizer: heap-use-after-free(?s:.*)checksum"),
        ("clean", None),
        ("owned_export", None),
    ],
    "lsan": [
        ("leak", r"ERROR: LeakSanitizer: detected memory leaks(?s:.*)rtx_selftest_bugs"),
        ("clean", None),
        ("owned_export", None),
    ],
    "valgrind": [
        ("double_free", r"Invalid free\(\)"),
        ("heap_overflow", r"Invalid write of size 8(?s:.*)heap_overflow"),
        ("use_after_free", r"Invalid read of size 8(?s:.*)use_after_free"),
        ("prange_overflow", r"Invalid write of size 8(?s:.*)_omp_fn"),
        ("dangling_export", r"Invalid read of size 8(?s:.*)checksum"),
        ("dangling_export_numpy", r"Invalid read of size(?s:.*)_multiarray_umath"),
        ("leak", r"definitely lost(?s:.*)rtx_selftest_bugs"),
        ("clean", None),
        ("owned_export", None),
    ],
}
CLEAN_RE = {"asan": ANY_ASAN, "lsan": r"ERROR: LeakSanitizer|" + ANY_ASAN,
            "valgrind": ANY_VALGRIND + r"|definitely lost: [1-9]"}


def run_case(tool: str, fn: str, module_dir: str, rtx_dir: str, supp: str | None,
             lsan_supp: str | None) -> tuple[int, str, float]:
    code = f"import rtx_selftest_bugs as m; m.{fn}()"
    pythonpath = os.pathsep.join([module_dir, rtx_dir])
    if tool == "asan":
        env = asan_env(pythonpath)
        cmd = [sys.executable, "-c", code]
    elif tool == "lsan":
        # As the leak pass runs: pytest with the plugin, whose check at the
        # end of the session is the only one (the environment turns off the
        # check at exit).
        env = lsan_env(os.pathsep.join([pythonpath, TOOLS]), lsan_supp)
        test = os.path.join(module_dir, f"test_lsan_{fn}.py")
        with open(test, "w") as fh:
            fh.write(f"def test_{fn}():\n    {code}\n")
        ini = os.path.join(module_dir, "pytest.ini")
        with open(ini, "w") as fh:
            fh.write("[pytest]\n")
        cmd = [sys.executable, "-m", "pytest", "-q", "-c", ini, "-p", "pytest_memcheck",
               "-p", "no:cacheprovider", "--capture=sys", test]
    else:
        env = valgrind_env(pythonpath)
        cmd = valgrind_cmd(supp) + [sys.executable, "-c", code]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=module_dir, capture_output=True, text=True,
                       timeout=600)
    return p.returncode, p.stdout + p.stderr, time.perf_counter() - t0


def main() -> int:
    args = sys.argv[1:]
    supp = lsan_supp = None
    if "--supp" in args:
        i = args.index("--supp")
        supp = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    if "--lsan-supp" in args:
        i = args.index("--lsan-supp")
        lsan_supp = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    if len(args) != 3 or args[0] not in CASES:
        print(__doc__)
        return 2
    tool, module_dir, rtx_dir = args[0], os.path.abspath(args[1]), os.path.abspath(args[2])
    cases = CASES[tool]
    workers = 2 if tool == "valgrind" else 4
    with ThreadPoolExecutor(workers) as pool:
        futs = [pool.submit(run_case, tool, fn, module_dir, rtx_dir, supp, lsan_supp)
                for fn, _ in cases]
        results = [f.result() for f in futs]
    failed = 0
    for (fn, expect), (rc, out, secs) in zip(cases, results, strict=True):
        if expect is None:
            ok = rc == 0 and not re.search(CLEAN_RE[tool], out)
            if tool == "lsan":   # and the plugin's check did run
                ok = ok and re.search(r"leak check at session end: none", out) is not None
            what = "clean run (control)"
        else:
            ok = rc != 0 and re.search(expect, out) is not None
            what = "caught: " + expect.split("(?s")[0]
        status = "PASS" if ok else "FAIL"
        print(f"selftest[{tool}] {status} {fn:22s} exit={rc:<4d} {secs:5.1f}s  {what}")
        if not ok:
            failed += 1
            print("---- output (last 60 lines) ----")
            print("\n".join(out.splitlines()[-60:]))
            print("--------------------------------")
    n_bugs = sum(1 for _, e in cases if e is not None)
    print(f"selftest[{tool}]: {len(cases) - failed}/{len(cases)} cases as expected "
          f"({n_bugs} deliberate bugs, {len(cases) - n_bugs} clean controls)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
