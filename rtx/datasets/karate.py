"""Zachary's karate club (1977): 34 members, 78 friendships, two factions.

The edge list and the faction labels ("Mr. Hi" = 0, "Officer" = 1) are the
standard ones (as in networkx's ``karate_club_graph``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EDGES = [
    (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7), (0, 8), (0, 10), (0, 11), (0, 12),
    (0, 13), (0, 17), (0, 19), (0, 21), (0, 31), (1, 2), (1, 3), (1, 7), (1, 13), (1, 17),
    (1, 19), (1, 21), (1, 30), (2, 3), (2, 7), (2, 8), (2, 9), (2, 13), (2, 27), (2, 28), (2, 32),
    (3, 7), (3, 12), (3, 13), (4, 6), (4, 10), (5, 6), (5, 10), (5, 16), (6, 16), (8, 30),
    (8, 32), (8, 33), (9, 33), (13, 33), (14, 32), (14, 33), (15, 32), (15, 33), (18, 32),
    (18, 33), (19, 33), (20, 32), (20, 33), (22, 32), (22, 33), (23, 25), (23, 27), (23, 29),
    (23, 32), (23, 33), (24, 25), (24, 27), (24, 31), (25, 31), (26, 29), (26, 33), (27, 33),
    (28, 31), (28, 33), (29, 32), (29, 33), (30, 32), (30, 33), (31, 32), (31, 33), (32, 33),
]
_LABELS = [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1,
           1, 1, 1, 1, 1, 1]


@dataclass(frozen=True)
class GraphData:
    """A homogeneous graph in PyTorch Geometric's layout.

    ``edge_index``: int64 ``[2, E]``, row 0 = source, row 1 = destination.
    """

    num_nodes: int
    edge_index: np.ndarray
    y: np.ndarray
    train_mask: np.ndarray


def karate_club() -> GraphData:
    """The karate club as a directed graph (both directions of each friendship).

    The training mask holds one member per faction (the two leaders, 0 and
    33), as in the classic semi-supervised setting.
    """
    e = np.array(_EDGES, dtype=np.int64).T
    edge_index = np.concatenate([e, e[::-1]], axis=1)
    y = np.array(_LABELS, dtype=np.int64)
    mask = np.zeros(len(_LABELS), dtype=bool)
    mask[[0, 33]] = True
    return GraphData(len(_LABELS), edge_index, y, mask)
