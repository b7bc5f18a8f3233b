"""Built-in graphs shipped with rtx (no downloads)."""

from .hetero import (
    HeteroGraph,
    from_pyg,
    load_hetgraph,
    random_split,
    save_hetgraph,
    synthetic_hetgraph,
)
from .karate import GraphData, karate_club
from .mag import load_ogb_mag, synthetic_mag

__all__ = [
    "GraphData", "HeteroGraph", "from_pyg", "karate_club", "load_hetgraph", "load_ogb_mag",
    "random_split", "save_hetgraph", "synthetic_hetgraph", "synthetic_mag",
]
