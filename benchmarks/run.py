"""Run a benchmark: ``python benchmarks/run.py <subcommand> [options]``.

The rtx measured is the checkout's in-place build when there is one
(``python setup.py build_ext --inplace``), else the installed rtx; the header of
every table says which (``rtx.__file__``).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

# Every module here that registers subcommands.
MODULES = ["benchmarks.bench", "benchmarks.bench_tape"]
# Scripts with their own main(argv) that are not named bench_<name>.py.
SCRIPTS = {"record": "benchmarks.record", "roofline": "benchmarks.roofline"}


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


def _standalone() -> dict[str, str]:
    """``bench_<name>.py`` modules with their own ``main(argv)``: run as ``<name>``."""
    here = Path(__file__).resolve().parent
    mods = {p.stem[len("bench_"):]: f"benchmarks.{p.stem}" for p in sorted(here.glob("bench_*.py"))}
    return {**{k: v for k, v in mods.items() if v not in MODULES}, **SCRIPTS}


def main(argv: list[str] | None = None) -> int:
    _import_benchmarks()
    argv = sys.argv[1:] if argv is None else list(argv)
    import rtx

    print(f"# rtx {rtx.__version__} from {Path(rtx.__file__).resolve().parent}")
    standalone = _standalone()
    if argv and argv[0] in standalone:      # fusion, graph, hetgat, ..., record, roofline
        fn = importlib.import_module(standalone[argv[0]]).main
        if inspect.signature(fn).parameters:
            rc = fn(argv[1:])
        else:                               # a main() that reads sys.argv itself
            sys.argv = [f"benchmarks/bench_{argv[0]}.py", *argv[1:]]
            rc = fn()
        return int(rc or 0)
    for m in MODULES:
        importlib.import_module(m)
    from benchmarks.bench import main as run_subcommand

    if not argv or argv[0] in ("-h", "--help"):
        print(f"# also: {', '.join(standalone)} (benchmarks/bench_<name>.py, their own options)")
    return run_subcommand(argv)


if __name__ == "__main__":
    sys.exit(main())
