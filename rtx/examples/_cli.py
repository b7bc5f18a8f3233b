"""What the example command lines share.

* A user error is ONE line on stderr, ``prog: error: message``, and exit status 2
  (argparse's convention, without the usage block: ``prog --help`` shows that).
  Tracebacks are for bugs only: the examples catch the library's documented
  exception types where they hand it the user's options and files, nothing wider.
* Option types that check their range when parsed, so a bad value never reaches
  the library (``--lr -1``, ``--threads 0``, ``--epochs 0``).
* A missing optional library (tqdm, matplotlib) is reported in one line, saying
  what is lost and how to get it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

#: What to install for the examples' optional extras (pyproject's ``examples`` extra).
EXTRA_HINT = 'pip install "rtx-gnn[examples]"'

#: Exit status of a run that started but could not finish (a non-finite loss,
#: an output file that cannot be written); 2 is for user errors found up front.
EXIT_FAILED = 1


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one line: ``prog: error: msg``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")

    def fail(self, message: str, status: int = EXIT_FAILED) -> NoReturn:
        """A run that cannot finish: one line, a non-zero status."""
        self.exit(status, f"{self.prog}: error: {message}\n")

    def note(self, message: str) -> None:
        """One line on stderr that is not an error (a missing optional library)."""
        print(f"{self.prog}: note: {message}", file=sys.stderr, flush=True)


def int_at_least(lo: int) -> Callable[[str], int]:
    """An argparse type: an integer ``>= lo``."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo}, got {v}")
        return v
    parse.__name__ = f"int >= {lo}"
    return parse


def nonzero_int(text: str) -> int:
    """An argparse type for ``--threads``: ``n > 0`` threads, or ``-k`` (all cores
    but ``k - 1``, as ``rtx.set_num_threads``)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v == 0:
        raise argparse.ArgumentTypeError("must be a positive count (or -1: every core), got 0")
    return v


def finite_float_at_least(lo: float) -> Callable[[str], float]:
    """An argparse type: a finite float ``>= lo`` (``nan`` and ``inf`` refused)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo:g}, got {v:g}")
        return v
    parse.__name__ = f"float >= {lo:g}"
    return parse


def have_module(name: str) -> bool:
    """Whether ``name`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package missing, or a None spec in sys.modules
        return False


def check_output_dir(ap: ArgumentParser, option: str, path: str) -> None:
    """Create ``path`` and prove a file can be written in it, before any work is done
    (else one line naming the option, exit 2)."""
    import tempfile
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        ap.error(f"{option} {path}: cannot write there ({exc.strerror or exc})")


def run_console(main: Callable[[], Any], prog: str) -> int:
    """A console script's body: ``main()``; Ctrl-C is one line and exit 130 (a user
    error already ended ``main`` with its one line and ``SystemExit(2)``)."""
    try:
        main()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    return 0


def duration(seconds: float) -> str:
    """``4.2 s``, ``3 min 05 s``, ``2 h 03 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(int(round(seconds)), 60)
    if m < 60:
        return f"{m} min {s:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def open_bar(total: int, unit: str, mode: str, note: Any = None) -> tuple[Any, str]:
    """The examples' progress bar: ``(a tqdm bar, "tqdm")`` when ``mode`` is
    ``"auto"`` or ``"tqdm"`` and tqdm is installed, else ``(None, mode)`` with
    ``"auto"`` falling back to ``"plain"`` (said through ``note``).  ``"tqdm"``
    without tqdm raises ImportError (the examples refuse that option first)."""
    if mode not in ("auto", "tqdm"):
        return None, mode
    try:
        tqdm = importlib.import_module("tqdm.auto").tqdm
    except ImportError:
        if mode == "tqdm":
            raise
        if note is not None:
            note(f"tqdm is not installed: plain progress lines ({EXTRA_HINT} for a progress "
                 "bar)")
        return None, "plain"
    return tqdm(total=total, unit=unit, dynamic_ncols=True), "tqdm"


class EpochProgress:
    """An examples' per-epoch progress display: tqdm when available (and asked for),
    else one plain line every few epochs, with the time left (ETA) from the mean
    epoch time so far.  ``update(epoch, text)`` after each epoch, ``close()`` at
    the end.  ``mode="tqdm"`` without tqdm raises ImportError (the examples refuse
    that option first, in one line)."""

    def __init__(self, total: int, mode: str, note: Any = None) -> None:
        self.total = total
        self.t0 = time.perf_counter()
        self.bar, self.mode = open_bar(total, "epoch", mode, note)
        self.every = max(1, total // 10)

    def update(self, epoch: int, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(1)
        elif self.mode == "plain" and (epoch == 1 or epoch % self.every == 0
                                       or epoch == self.total):
            eta = (time.perf_counter() - self.t0) / epoch * (self.total - epoch)
            print(f"epoch {epoch:4d}/{self.total}  {text}  eta {duration(eta)}", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
