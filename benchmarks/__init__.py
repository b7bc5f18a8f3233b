"""rtx's benchmarks: the only home for them (not shipped in the wheel).

Run from a checkout, against an in-place build or an installed rtx::

    python benchmarks/run.py index|tape [options]   # in-place build if there is one, else installed
    python -m benchmarks index|tape [options]       # from the repository root (in-place/editable)

``bench.py`` holds the subcommand registry and the shared timing helpers;
each ``bench_*.py`` module registers its subcommand(s).
"""
