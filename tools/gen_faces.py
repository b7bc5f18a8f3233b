"""Write rtx's generated type stubs: the op faces' and the compiled module's.

    python tools/gen_faces.py [--check]

``rtx/_faces.pyi`` (``Tensor``'s declared methods and the ``rtx.<name>``
functions) and ``rtx/nn/_faces.pyi`` (the ``rtx.nn.functional`` ones) are what
type checkers read for the faces ``rtx/_faces.py`` generates at import, written
from the op declarations (``rtx/_autodiff/ops/*.py``).  ``rtx/_kernels.pyi`` (the
compiled ``rtx._kernels``) is written from the Cython sources ``rtx/*.pxi`` read
as text (``tools/kernel_stubs.py``, which says how types the Cython signature
cannot express are stated in ``#:`` comments); it needs neither the built
extension nor an importable rtx, and is written first.  Run this after adding
or changing a declaration or a kernel; ``--check`` exits 1 when a stub is stale
(``tests/autograd/test_faces.py`` does the same).
The files are written atomically (temp file in the same directory, fsync, rename).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tools")]

import kernel_stubs  # noqa: E402 - after the path of the checkout


def _faces_stub(which: str) -> Callable[[], str]:
    def make() -> str:
        from rtx import _faces  # imports rtx (and its compiled extension): only here

        return getattr(_faces, which)()
    return make


def stubs(root: str) -> dict[str, Callable[[], str]]:
    """Each stub file of the tree at ``root`` and what makes its text (the kernel
    stub first: it needs no importable rtx)."""
    return {
        os.path.join(root, "rtx", "_kernels.pyi"): lambda: kernel_stubs.stub_text(root),
        os.path.join(root, "rtx", "_faces.pyi"): _faces_stub("stub_text"),
        os.path.join(root, "rtx", "nn", "_faces.pyi"): _faces_stub("nn_stub_text"),
    }


def _write_atomic(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".gen_faces.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gen_faces", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a stub is stale")
    args = ap.parse_args(argv)
    stale = []
    for path, make in stubs(ROOT).items():
        try:
            text = make()
        except kernel_stubs.StubError as e:
            print(f"gen_faces: error: {e}", file=sys.stderr)
            return 2
        except ImportError as e:
            print(f"gen_faces: error: cannot import rtx to write {os.path.relpath(path, ROOT)}: "
                  f"{e}", file=sys.stderr)
            return 2
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != text:
            stale.append(os.path.relpath(path, ROOT))
            if not args.check:
                _write_atomic(path, text)
                print(f"wrote {stale[-1]}")
    if args.check and stale:
        print(f"gen_faces: error: stale: {', '.join(stale)} (run python tools/gen_faces.py)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
