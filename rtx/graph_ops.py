"""Graph-learning primitives, importable from here as before.

The segment ops and message passing are declared with their rules
(``rtx/_autodiff/ops/segment.py``, ``message.py``) and their faces generated
as ``rtx.<name>`` / ``rtx.nn.functional.<name>`` (``rtx/_faces.py``): new graph
ops appear there, not here.  ``index`` / ``edge_index`` arguments take raw
int32/int64 indices (checked once per call) or an ``IndexPlan`` /
``EdgeIndex`` built once and reused (no re-check; the CSR grouping is computed
once).  A raw ``edge_index`` is cached: passing the same array again costs a
comparison with the plan's private copy, not a check (see
``rtx.backend.index_plan.as_edge_index``).
"""

from ._faces import message_passing, segment_max, segment_mean, segment_softmax, segment_sum
from .backend.index_plan import EdgeIndex, IndexPlan

__all__ = ["EdgeIndex", "IndexPlan", "message_passing", "segment_max", "segment_mean",
           "segment_softmax", "segment_sum"]
