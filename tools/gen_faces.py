"""Write the type stubs of the generated op faces from the op declarations.

    python tools/gen_faces.py [--check]

``rtx/_faces.pyi`` (``Tensor``'s declared methods and the ``rtx.<name>``
functions) and ``rtx/nn/_faces.pyi`` (the ``rtx.nn.functional`` ones) are what
type checkers read for the faces ``rtx/_faces.py`` generates at import.  Run it
after adding or changing a declaration (``rtx/_autodiff/ops/*.py``);
``--check`` exits 1 when a stub is stale (``tests/autograd/test_faces.py`` does the same).
The files are written atomically (temp file in the same directory, fsync, rename).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from rtx import _faces  # noqa: E402 - after the path of the checkout

STUBS = {os.path.join(ROOT, "rtx", "_faces.pyi"): _faces.stub_text,
         os.path.join(ROOT, "rtx", "nn", "_faces.pyi"): _faces.nn_stub_text}


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
    for path, make in STUBS.items():
        text = make()
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != text:
            stale.append(os.path.relpath(path, ROOT))
            if not args.check:
                _write_atomic(path, text)
    if args.check and stale:
        print(f"gen_faces: error: stale: {', '.join(stale)} (run python tools/gen_faces.py)",
              file=sys.stderr)
        return 1
    for p in stale:
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
