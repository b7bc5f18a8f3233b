"""Process helpers for benchmarks that run each library in its own child process.

Standard library only (and nothing of rtx): DGL's own environment (another venv:
torch 2.2, numpy < 2, no rtx) imports this module too.

- :func:`loadavg` / :func:`load_str`: the load average, printed at the start and the
  end of every benchmark of record (a figure taken above 1.0 is not of record).
- :func:`rss_kib` / :func:`reset_peak`: a phase's peak RSS (write ``5`` to
  ``/proc/self/clear_refs``, then read ``VmHWM``): ``ru_maxrss`` of a child keeps the
  parent's high-water mark and its own setup peak.
- :func:`use_checkout_build`: which rtx a benchmark measures (the checkout's in-place
  build when there is one, unless ``PYTHONPATH`` names an rtx build already).
- :func:`dgl_python`: the interpreter of DGL's environment, if there is one.
- :class:`Worker` / :func:`serve`: a persistent child answering JSON requests line by
  line, so that several libraries' processes can be timed interleaved (A B C A B C)
  without paying an interpreter start per call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The interpreter of DGL's environment: $RTX_DGL_PYTHON, else this one (the
# project machines' recipe in /work/shared/performance-notes.md).
DEFAULT_DGL_PYTHON = "/work/dglvenv/bin/python"
TAG = "@@ "     # prefix of a worker's answer lines (anything else on stdout is ignored)


def loadavg() -> tuple[float, float, float]:
    try:
        a, b, c = os.getloadavg()
        return (a, b, c)
    except OSError:
        nan = float("nan")
        return (nan, nan, nan)


def load_str() -> str:
    return " ".join(f"{v:.2f}" for v in loadavg())


def rss_kib(field: str = "VmRSS") -> int:
    """``VmRSS`` / ``VmHWM`` of this process in KiB (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reset_peak() -> bool:
    """Reset ``VmHWM`` to the current RSS (Linux >= 4.0); False when not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _has_build(d: str) -> bool:
    """Whether ``d/rtx`` holds a compiled rtx extension."""
    rtx_dir = os.path.join(d, "rtx")
    try:
        names = os.listdir(rtx_dir)
    except OSError:
        return False
    return any(f.startswith("_kernels.") and f.endswith((".so", ".pyd")) for f in names)


def use_checkout_build() -> bool:
    """Make the rtx to measure importable, for this process and (through
    ``PYTHONPATH``) its children: an rtx build that ``PYTHONPATH`` already names wins
    (an explicit choice: the ASan job's instrumented copy, another worktree); else the
    checkout's in-place build when there is one; else nothing changes (the installed
    rtx).  Returns whether the checkout's build was put first."""
    named = [d for d in os.environ.get("PYTHONPATH", "").split(os.pathsep) if d]
    if any(_has_build(d) for d in named) or not _has_build(ROOT):
        return False
    if ROOT not in sys.path[:1]:
        sys.path.insert(0, ROOT)
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *named])
    return True


def dgl_python(explicit: str | None = None) -> str | None:
    """The python of DGL's environment: ``explicit``, else ``$RTX_DGL_PYTHON``, else
    :data:`DEFAULT_DGL_PYTHON`; None when that file does not exist ("" turns DGL off)."""
    p = explicit if explicit is not None else os.environ.get("RTX_DGL_PYTHON",
                                                             DEFAULT_DGL_PYTHON)
    return p if p and os.path.isfile(p) and os.access(p, os.X_OK) else None


def child_env(threads: int, dgl: bool = False) -> dict[str, str]:
    """Environment of a library's child: its thread count in ``OMP_NUM_THREADS`` and,
    for DGL, its backend.  (The scripts make ``benchmarks`` importable themselves, after
    any installed rtx; ``PYTHONPATH`` carries the in-place build when there is one.)"""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if dgl:
        env["DGLBACKEND"] = "pytorch"
        # DGL's venv has its own numpy / torch: never let the main venv's leak in
        env.pop("PYTHONHOME", None)
    return env


class WorkerError(RuntimeError):
    pass


class Worker:
    """A child process serving JSON requests (see :func:`serve`); ``call(**msg)``
    sends one and returns its answer (a dict).  Its stderr goes to a temporary file,
    shown when it fails."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str]) -> None:
        self.name = name
        self._err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True, env=env,
                                     cwd=tempfile.gettempdir(), bufsize=1)

    def call(self, **msg: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise WorkerError(f"{self.name} worker died:\n{self.stderr()}") from None
        for line in self.proc.stdout:
            if line.startswith(TAG):
                ans: dict[str, Any] = json.loads(line[len(TAG):])
                if "error" in ans:
                    raise WorkerError(f"{self.name} worker: {ans['error']}")
                return ans
        raise WorkerError(f"{self.name} worker exited (rc {self.proc.wait()}):\n"
                          f"{self.stderr()}")

    def stderr(self) -> str:
        self._err.seek(0)
        return self._err.read()[-4000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._err.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(handle: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """A worker's loop: one JSON request per stdin line, one ``@@ {json}`` answer per
    request on stdout (``{"error": ...}`` when ``handle`` raised), until stdin closes."""
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            ans = handle(json.loads(line))
        except Exception:  # noqa: BLE001 - the parent reports it
            ans = {"error": traceback.format_exc()}
        sys.stdout.write(TAG + json.dumps(ans) + "\n")
        sys.stdout.flush()


def run_json_child(cmd: list[str], env: dict[str, str], what: str) -> dict[str, Any]:
    """Run ``cmd`` to its end; its result is the last stdout line ``@@ {json}``."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       cwd=tempfile.gettempdir())
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(TAG):
            res: dict[str, Any] = json.loads(line[len(TAG):])
            return res
    raise WorkerError(f"{what} failed (rc {p.returncode}):\n{p.stdout[-3000:]}\n"
                      f"{p.stderr[-4000:]}")


def write_json(path: str, obj: Any) -> None:
    """``obj`` as JSON at ``path``, atomically (:func:`write_text`)."""
    write_text(path, json.dumps(obj, indent=1, default=_default))


def write_text(path: str, text: str) -> None:
    """``text`` at ``path``, atomically: a temporary file in the same directory,
    flushed and fsynced, then renamed over ``path`` (removed if anything fails)."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
