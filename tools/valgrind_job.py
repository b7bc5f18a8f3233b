"""The valgrind memcheck job over the tests marked ``valgrind``, then the self-test.

    python tools/valgrind_job.py [--all] [--no-selftest] [--gen-suppressions] [-- PYTEST ARGS]

1. Stages a private copy of the rtx package in ``build/valgrind/src`` and builds
   its extension the normal way plus debug info (``-O3 -g``, fresh objects).
2. Runs ``valgrind --tool=memcheck`` on ``python -m pytest -m valgrind`` (the
   ownership, kernel and interop tests; ``--all``: the whole suite, ~25x slower)
   with ``PYTHONMALLOC=malloc`` (every allocation visible) and
   ``OMP_WAIT_POLICY=passive`` (idle OpenMP threads sleep instead of spinning).
   Any memcheck error or definitely-lost block fails the job
   (``--error-exitcode=99 --errors-for-leak-kinds=definite``).  The only
   suppressions (``tools/valgrind-python.supp``) cover interpreter/loader noise.
3. Self-test: deliberate bugs in ``tools/selftest`` (a plain -O0 -g build), each
   in its own process under the same valgrind flags, must each be reported.

Exit status 0 only when every phase passed.  Run it with the real interpreter
(``.venv/bin/python tools/valgrind_job.py``), not a pyenv shim.
"""

from __future__ import annotations

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memcheck_env as mc  # noqa: E402


def main() -> int:
    argv, extra = mc.split_args(sys.argv[1:])
    whole = "--all" in argv
    selftest = "--no-selftest" not in argv
    gen = "--gen-suppressions" in argv
    py = mc.real_python()
    base, src, run_dir = mc.job_dirs("valgrind")
    times: dict[str, float] = {}
    failures: list[str] = []
    t_all = time.perf_counter()

    print(f"=== valgrind: building rtx ({mc.VALGRIND_CFLAGS}) in {src}", flush=True)
    mc.stage_package(src)
    times["build"] = mc.build_extension(src, mc.VALGRIND_CFLAGS,
                                        log=os.path.join(base, "build.log"))
    os.makedirs(run_dir, exist_ok=True)
    env = mc.valgrind_env(mc.pythonpath_for(src))
    env.update(mc.memcheck_vars(src, "-g", "valgrind"))

    selection = [] if whole else ["-m", "valgrind"]
    paths = mc.test_paths(extra)
    if not whole and paths[-1] == os.path.join(mc.ROOT, "tests"):
        # Only the files that mark tests: collecting the rest (hypothesis, scipy
        # imports, thousands of parametrised ids) costs minutes under valgrind.
        tdir = paths.pop()
        marked = sorted(
            os.path.join(d, f) for d, _, files in os.walk(tdir) for f in files
            if f.startswith("test_") and f.endswith(".py")
            and "mark.valgrind" in open(os.path.join(d, f), encoding="utf-8").read()
        )
        paths += marked or [tdir]
    vg = mc.valgrind_cmd()
    if gen:
        vg.append("--gen-suppressions=all")
    cmd = vg + mc.pytest_cmd(src, ["-q", *selection, *paths])
    print("=== valgrind: memcheck over " + ("the whole suite" if whole else
                                            "the tests marked 'valgrind'"), flush=True)
    log = os.path.join(base, "memcheck.log")
    rc, times["memcheck"] = mc.run_logged(cmd, env, run_dir, log)
    with open(log, errors="replace") as fh:
        text = fh.read()
    summary = re.findall(r"ERROR SUMMARY: (\d+) errors", text)
    lost = re.findall(r"definitely lost: ([\d,]+) bytes", text)
    ran = re.findall(r"(\d+) passed", text)
    print(f"=== valgrind: tests passed {ran[-1] if ran else 0}, memcheck errors "
          f"{summary[-1] if summary else '?'}, definitely lost "
          f"{lost[-1] if lost else '0'} bytes, exit {rc}")
    if rc != 0 or not summary or summary[-1] != "0":
        failures.append(f"memcheck: exit {rc} (99 = a memcheck error or definite leak, "
                        "1 = a test failed)")
    if not ran:
        failures.append("memcheck: no test ran")

    if selftest:
        print("=== valgrind: self-test (deliberate bugs must be caught)", flush=True)
        t0 = time.perf_counter()
        failures += mc.run_selftest(py, base, src, ("valgrind",), [])
        times["selftest"] = time.perf_counter() - t0

    times["total"] = time.perf_counter() - t_all
    return mc.finish("valgrind", times, failures,
                     "no memcheck error or definite leak; every deliberate bug caught")


if __name__ == "__main__":
    sys.exit(main())
