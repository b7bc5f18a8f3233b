"""index_select / index_add against numpy, scipy and torch (when installed).

Runs ``python -m rtx.bench index`` with the same options::

    python benchmarks/bench_index.py            # full: N=100,000, E=1,000,000, F=1,16,64,256
    python benchmarks/bench_index.py --quick    # small smoke run
    python benchmarks/bench_index.py --threshold  # serial/parallel cut-over of the kernels
"""

from __future__ import annotations

import sys

from rtx.bench import main

if __name__ == "__main__":
    sys.exit(main(["index", *sys.argv[1:]]))
