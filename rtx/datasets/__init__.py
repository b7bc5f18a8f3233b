"""Built-in graphs shipped with rtx (no downloads) and readers for the benchmarks' own
file formats (``load_hgb``: HGB's directory layout)."""

from .hetero import (
    HeteroGraph,
    from_pyg,
    load_hetgraph,
    random_split,
    save_hetgraph,
    synthetic_hetgraph,
)
from .hgb import load_hgb
from .karate import GraphData, karate_club

__all__ = [
    "GraphData", "HeteroGraph", "from_pyg", "karate_club", "load_hetgraph", "random_split",
    "save_hetgraph", "synthetic_hetgraph",
    "load_hgb",
]
