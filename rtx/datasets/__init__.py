"""Built-in graphs shipped with rtx (no downloads)."""

from .karate import GraphData, karate_club

__all__ = ["GraphData", "karate_club"]
