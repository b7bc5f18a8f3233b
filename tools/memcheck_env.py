"""Shared pieces of the memory-checking jobs (tools/asan_job.py, tools/valgrind_job.py,
tools/selftest/run.py): tool flags and environments, and building a private,
instrumented copy of the rtx package that the tests then import.

Why a private copy: CI installs rtx into a virtual environment and developers
build it in place; the jobs must test *their* build.  The copy lives under
``build/<job>/src/rtx`` (Python sources + the instrumented extension), goes
first on ``PYTHONPATH``, and pytest runs from an empty directory so neither the
source tree's ``rtx/`` nor an installed one can shadow it.  The pytest plugin
``tools/pytest_memcheck.py`` asserts which ``rtx`` was imported.

Facts behind the flags: /work/shared/memsafety-notes.md (and docs/memory-safety.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")

SAN_CFLAGS = ("-fsanitize=address,undefined -fno-sanitize-recover=undefined "
              "-fno-omit-frame-pointer -g -O1")
SAN_LDFLAGS = "-fsanitize=address,undefined"
VALGRIND_CFLAGS = "-O3 -g"   # the normal optimisation level, with debug info

# allocator_may_return_null=1: a huge request returns NULL (rtx raises
# MemoryError) as plain malloc does, instead of ASan aborting the process.
ASAN_BASE = "halt_on_error=1:abort_on_error=0:allocator_may_return_null=1:" \
            "detect_odr_violation=0"
UBSAN_OPTIONS = "print_stacktrace=1:halt_on_error=1"

# A line that says a tool found something (searched in every job's output,
# so a report from a child process the tests start is not missed either).
REPORT_PATTERN = (r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|"
                  r"SUMMARY: UndefinedBehaviorSanitizer")


def real_python() -> str:
    """This interpreter's binary; refuse wrapper scripts (a pyenv shim is bash:
    LD_PRELOAD'ing a sanitizer into it floods the run with bash's leaks)."""
    exe = sys.executable
    with open(os.path.realpath(exe), "rb") as fh:
        if fh.read(4) != b"\x7fELF":
            sys.exit(f"{exe} is not an ELF binary; run the job with the real interpreter "
                     "(e.g. .venv/bin/python)")
    return exe


def _cc() -> str:
    return os.environ.get("CC", "gcc").split()[0]


def runtime_lib(name: str) -> str:
    """Absolute path of a sanitizer runtime (libasan.so, liblsan.so) of the compiler."""
    path = subprocess.run([_cc(), f"-print-file-name={name}"], check=True,
                          capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(path) or not os.path.exists(path):
        sys.exit(f"{_cc()} has no {name}; install the compiler's sanitizer runtime")
    return path


def _base_env(pythonpath: str) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH"):
        env.pop(k, None)
    env["PYTHONPATH"] = pythonpath
    env["PYTHONMALLOC"] = "malloc"        # every Python allocation visible to the tool
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    return env


def asan_env(pythonpath: str) -> dict[str, str]:
    env = _base_env(pythonpath)
    # libstdc++ too: C++ libraries loaded later (torch, via the interop tests)
    # throw exceptions, and ASan's __cxa_throw interceptor must find the real
    # one at start-up ("CHECK failed: ... real___cxa_throw != 0" otherwise).
    env["LD_PRELOAD"] = " ".join([runtime_lib("libasan.so"), runtime_lib("libstdc++.so")])
    env["ASAN_OPTIONS"] = "detect_leaks=0:" + ASAN_BASE
    env["UBSAN_OPTIONS"] = UBSAN_OPTIONS
    return env


def lsan_env(pythonpath: str, suppressions: str | None = None) -> dict[str, str]:
    """ASan with leak detection, checked once by the pytest plugin at the end of
    the session (``RTX_MEMCHECK_LEAKS=1``) instead of at exit.

    Why not at exit: LeakSanitizer's check then runs while the process tears
    itself down (interpreter finalisation, library destructors joining their
    worker threads), and its stop-the-world tracer can crash on a thread that
    is going away ("Tracer caught signal 11 ... LeakSanitizer has encountered
    a fatal error", with no report: one CI run of the whole suite, stop 29).
    At session end every thread is parked.  The check scans the same roots, so
    a block nothing points to is reported either way.

    malloc_context_size=2 keeps the 'leak:libpython3' suppression from
    matching frames far up every stack (which would hide rtx's own leaks too)."""
    env = asan_env(pythonpath)
    env["ASAN_OPTIONS"] = "detect_leaks=1:leak_check_at_exit=0:malloc_context_size=2:" \
        + ASAN_BASE
    supp = suppressions or os.path.join(TOOLS, "lsan.supp")
    env["LSAN_OPTIONS"] = f"suppressions={supp}:print_suppressions=0"
    env["RTX_MEMCHECK_LEAKS"] = "1"
    return env


# LeakSanitizer's own failure (its tracer crashed), not a finding: no report.
LSAN_TRACER_CRASH = r"LeakSanitizer has encountered a fatal error"


def valgrind_env(pythonpath: str) -> dict[str, str]:
    env = _base_env(pythonpath)
    env["OMP_WAIT_POLICY"] = "passive"    # idle OpenMP threads sleep instead of spinning
    return env


def valgrind_cmd(suppressions: str | None = None) -> list[str]:
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    supp = suppressions or os.path.join(TOOLS, "valgrind-python.supp")
    return [
        "valgrind", "--tool=memcheck", "--error-exitcode=99",
        "--leak-check=full", "--show-leak-kinds=definite",
        "--errors-for-leak-kinds=definite", f"--suppressions={supp}",
        "--num-callers=40", "--child-silent-after-fork=yes",
        # No __libc_freeres at exit.  Valgrind runs it before the leak scan, and
        # in some runs it unmapped the dlopen'd libraries (numpy, no rtx, with a
        # 300,007-element array: OpenBLAS, libgfortran, libgcc_s, libz, libffi,
        # ...; not with 1,000), so what only their static data pointed to became
        # "definitely lost": the loader's dependency lists, libgomp's start-up
        # state, GNU readline's (pytest >= 9 imports readline): 48 B to 41 KB
        # from run to run, none of it rtx's.  Without it those blocks stay
        # reachable; a block nothing points to is still reported.
        "--run-libc-freeres=no",
    ]


def stage_package(dest: str) -> str:
    """Copy the build inputs (setup.py, pyproject.toml, README.md, rtx/) to ``dest``,
    without any built extension or generated C file, and return ``dest``."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    for name in ("setup.py", "pyproject.toml", "README.md", "setup.cfg", "MANIFEST.in"):
        src = os.path.join(ROOT, name)
        if os.path.exists(src):
            shutil.copy2(src, dest)
    shutil.copytree(
        os.path.join(ROOT, "rtx"), os.path.join(dest, "rtx"),
        ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "*.o", "__pycache__",
                                      "_compiled.json"),
    )
    return dest


def build_extension(src: str, cflags: str, ldflags: str = "", log: str | None = None) -> float:
    """Build rtx's extension in place inside the staged copy ``src`` (fresh
    objects: ``--force`` and a private build-temp).  Returns seconds taken."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["CFLAGS"] = cflags
    env["LDFLAGS"] = ldflags
    env["RTX_OPENMP"] = "1"            # these builds must have OpenMP: a serial build hides races
    t0 = time.perf_counter()
    cmd = [real_python(), "setup.py", "-q", "build_ext", "--inplace", "--force",
           "--build-temp", os.path.join(src, "build-temp")]
    p = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True)
    if log:
        with open(log, "w") as fh:
            fh.write(p.stdout + p.stderr)
    if p.returncode != 0:
        print(p.stdout[-4000:] + p.stderr[-8000:])
        sys.exit(f"building the instrumented extension failed (exit {p.returncode})")
    return time.perf_counter() - t0


def pytest_cmd(pkg_dir: str, extra: list[str]) -> list[str]:
    """``python -m pytest`` over the project's tests/ with the project's config,
    loading the plugin that checks which rtx is imported."""
    return [
        real_python(), "-m", "pytest",
        "-c", os.path.join(ROOT, "pyproject.toml"), "--rootdir", ROOT,
        "-p", "pytest_memcheck", "-p", "no:cacheprovider",
        "--capture=sys",     # fd capture would swallow the sanitizer's report
        *extra,
    ]


def test_paths(extra: list[str], paths: list[str] | None = None) -> list[str]:
    """pytest arguments: options in ``extra`` pass through; test paths (in
    ``extra`` or ``paths``) are made absolute against the repository root,
    since pytest runs from an empty directory.  No path given: ``tests/``."""
    out, found = [], False
    for a in list(extra) + list(paths or []):
        p = os.path.join(ROOT, a.split("::")[0])
        if not a.startswith("-") and os.path.exists(p):
            out.append(os.path.join(ROOT, a))
            found = True
        else:
            out.append(a)
    if not found:
        out.append(os.path.join(ROOT, "tests"))
    return out


def pythonpath_for(pkg_dir: str) -> str:
    return os.pathsep.join([pkg_dir, TOOLS])


def memcheck_vars(pkg_dir: str, cflag: str, job: str) -> dict[str, str]:
    """What the plugin asserts: rtx imported from ``pkg_dir/rtx``, built with ``cflag``."""
    return {"RTX_MEMCHECK_PKG": os.path.join(pkg_dir, "rtx"), "RTX_MEMCHECK_CFLAG": cflag,
            "RTX_MEMCHECK_JOB": job}


def run_logged(cmd: list[str], env: dict[str, str], cwd: str, log: str,
               timeout: float | None = None) -> tuple[int, float]:
    """Run ``cmd``, streaming its output to the console and to ``log``."""
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace")
        assert p.stdout is not None
        for line in p.stdout:
            sys.stdout.write(line)
            fh.write(line)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = -9
    sys.stdout.flush()
    return rc, time.perf_counter() - t0


def run_selftest(py: str, base: str, src: str, tools: tuple[str, ...],
                 build_args: list[str]) -> list[str]:
    """Build the deliberate-bug module and run its cases under each tool.

    Returns the failures (empty when every bug was caught and every clean
    control stayed clean)."""
    st = os.path.join(base, "selftest")
    b = subprocess.run([py, os.path.join(TOOLS, "selftest", "build.py"), st, *build_args],
                       capture_output=True, text=True)
    if b.returncode != 0:
        print(b.stdout + b.stderr)
        return ["self-test build failed"]
    failures = []
    for tool in tools:
        r = subprocess.run([py, os.path.join(TOOLS, "selftest", "run.py"), tool, st, src])
        if r.returncode != 0:
            failures.append(f"self-test ({tool}): a deliberate bug went unreported")
    return failures


def finish(job: str, times: dict[str, float], failures: list[str], ok: str) -> int:
    """Print the job's wall times and verdict; the job's exit status."""
    print(f"=== {job}: wall times " + ", ".join(f"{k} {v:.0f}s" for k, v in times.items()))
    if failures:
        print(f"=== {job}: FAILED\n  " + "\n  ".join(failures))
        return 1
    print(f"=== {job}: OK ({ok})")
    return 0


def split_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """``job options -- pytest args`` -> (job options, pytest args)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def job_dirs(job: str) -> tuple[str, str, str]:
    """(base, src, run_dir) of a job under ``build/<job>``; ``base`` is created."""
    base = os.path.join(ROOT, "build", job)
    os.makedirs(base, exist_ok=True)
    return base, os.path.join(base, "src"), os.path.join(base, "run")
