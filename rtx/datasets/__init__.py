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
from .mag import load_ogb_mag, synthetic_mag

__all__ = [
    "GraphData", "HeteroGraph", "from_pyg", "karate_club", "load_hetgraph", "load_hgb",
    "load_ogb_mag", "random_split", "save_hetgraph", "synthetic_hetgraph", "synthetic_mag",
]
