"""The ASan + UBSan + LeakSanitizer job, then the self-test.

    python tools/asan_job.py [--no-leaks] [--no-selftest] [-- PYTEST ARGS]

1. Stages a private copy of the rtx package in ``build/asan/src`` and builds its
   extension with ``-fsanitize=address,undefined -fno-sanitize-recover=undefined
   -fno-omit-frame-pointer -g -O1`` (fresh objects: ``--force``, own build dirs).
2. Runs the WHOLE test suite once against that copy with the uninstrumented
   CPython: ``LD_PRELOAD=libasan.so PYTHONMALLOC=malloc``, pytest
   ``--capture=sys`` (fd capture swallows the report), ASan and UBSan on every
   access and LeakSanitizer (``detect_leaks=1:malloc_context_size=2``,
   suppressions in ``tools/lsan.supp``: interpreter-owned allocations only)
   checked once by the pytest plugin at the end of the session (not at exit: see
   ``memcheck_env.lsan_env``).  Any ASan/UBSan report or leak fails the job.
   Should LeakSanitizer's tracer itself crash (its fatal error, no report), the
   suite runs once more.
   One pass finds what the two passes of earlier rounds (ASan alone, then the
   suite again with leak detection, in the same ASan build) found: the second
   pass was the first plus the leak check.  What the leak check costs is its
   short allocation stacks (two frames); ``--no-leaks`` runs the suite with leak
   detection off and full allocation and free stacks, to read a report.
3. Self-test: deliberate bugs in ``tools/selftest`` (built at -O0 with the same
   flags), each in its own process, must each exit non-zero with a report.

Exit status 0 only when every phase passed.  Run it with the real interpreter
(``.venv/bin/python tools/asan_job.py``), not a pyenv shim.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memcheck_env as mc  # noqa: E402


def scan(log: str) -> list[str]:
    with open(log, errors="replace") as fh:
        return [ln.rstrip() for ln in fh if re.search(mc.REPORT_PATTERN, ln)]


def tracer_crashed(log: str) -> bool:
    with open(log, errors="replace") as fh:
        return re.search(mc.LSAN_TRACER_CRASH, fh.read()) is not None


def main() -> int:
    argv, extra = mc.split_args(sys.argv[1:])
    unknown = [a for a in argv if a not in ("--no-leaks", "--no-selftest")]
    if unknown:
        print(f"asan_job: unknown option {unknown[0]} (see the module docstring)")
        return 2
    leaks = "--no-leaks" not in argv
    selftest = "--no-selftest" not in argv
    py = mc.real_python()
    base, src, run_dir = mc.job_dirs("asan")
    times: dict[str, float] = {}
    failures: list[str] = []
    t_all = time.perf_counter()

    # ---------------------------------------------------------------- build
    print(f"=== asan: building an instrumented rtx in {src}", flush=True)
    mc.stage_package(src)
    times["build"] = mc.build_extension(src, mc.SAN_CFLAGS, mc.SAN_LDFLAGS,
                                        log=os.path.join(base, "build.log"))
    os.makedirs(run_dir, exist_ok=True)
    pp = mc.pythonpath_for(src)
    env = mc.asan_env(pp)
    env.update(mc.memcheck_vars(src, "-fsanitize=address", "asan"))
    probe = subprocess.run(
        [py, "-c", "import rtx, rtx._kernels as k; print(rtx.__file__); print(k.build_cflags())"],
        env=env, cwd=run_dir, capture_output=True, text=True)
    print(probe.stdout + probe.stderr, end="")
    if probe.returncode != 0 or not probe.stdout.startswith(os.path.join(src, "rtx")):
        print("asan: the instrumented rtx does not import from the run directory")
        return 1

    def suite(label: str, key: str, env: dict[str, str], targets: list[str], log: str,
              retry_tracer_crash: bool = False) -> None:
        path = os.path.join(base, log)
        times[key] = 0.0
        for attempt in (1, 2):
            rc, secs = mc.run_logged(mc.pytest_cmd(src, ["-q", *targets]), env, run_dir, path)
            times[key] += secs
            reports = scan(path)
            if not (retry_tracer_crash and attempt == 1 and rc != 0 and not reports
                    and tracer_crashed(path)):
                break
            # LeakSanitizer's own intermittent failure (google/sanitizers#1353):
            # no finding, and the pass proved nothing.  Once more, in full.
            print(f"=== asan: {label}: LeakSanitizer's tracer crashed (no report); "
                  "running the pass once more", flush=True)
            os.replace(path, path + ".tracer-crash")
        if rc != 0 or reports:
            failures.append(f"{label}: exit {rc}, {len(reports)} report line(s)")
            for r in reports[:20]:
                print("  REPORT:", r)

    # ------------------------- whole suite, ASan + UBSan (+ LeakSanitizer)
    tests = mc.test_paths(extra)
    if leaks:
        print("=== asan: whole test suite under ASan + UBSan + LeakSanitizer", flush=True)
        lenv = mc.lsan_env(pp)
        lenv.update(mc.memcheck_vars(src, "-fsanitize=address", "asan+lsan"))
        suite("ASan/UBSan/LSan suite", "suite", lenv, tests, "pytest-asan.log",
              retry_tracer_crash=True)
    else:
        print("=== asan: whole test suite under ASan + UBSan (no leak check)", flush=True)
        suite("ASan/UBSan suite", "suite", env, tests, "pytest-asan.log")

    # ------------------------------------------------------------ self-test
    if selftest:
        print("=== asan: self-test (deliberate bugs must be caught)", flush=True)
        t0 = time.perf_counter()
        failures += mc.run_selftest(py, base, src, ("asan", "lsan") if leaks else ("asan",),
                                    ["--asan"])
        times["selftest"] = time.perf_counter() - t0

    times["total"] = time.perf_counter() - t_all
    return mc.finish("asan", times, failures,
                     "no ASan/UBSan/LSan report; every deliberate bug caught")


if __name__ == "__main__":
    sys.exit(main())
