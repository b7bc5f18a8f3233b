"""Run a benchmark: ``python benchmarks/run.py <subcommand> [options]``.

The rtx measured is the checkout's in-place build when there is one
(``python setup.py build_ext --inplace``), else the installed rtx; the header of
every table says which (``rtx.__file__``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

# Every module here that registers subcommands.
MODULES = ["benchmarks.bench", "benchmarks.bench_tape"]


def _import_benchmarks() -> None:
    if "benchmarks" in sys.modules:           # python -m benchmarks
        return
    here = Path(__file__).resolve().parent
    root = here.parent
    # run as a script: sys.path[0] is benchmarks/ itself, not the repository root
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(root))
    importlib.import_module("benchmarks")
    built = any((root / "rtx").glob("_kernels.*.so")) or any((root / "rtx").glob("_kernels*.pyd"))
    if not built:                             # an unbuilt source tree: use the installed rtx
        sys.path.remove(str(root))


def main(argv: list[str] | None = None) -> int:
    _import_benchmarks()
    for m in MODULES:
        importlib.import_module(m)
    import rtx
    from benchmarks.bench import main as run_subcommand

    print(f"# rtx {rtx.__version__} from {Path(rtx.__file__).resolve().parent}")
    return run_subcommand(argv)


if __name__ == "__main__":
    sys.exit(main())
