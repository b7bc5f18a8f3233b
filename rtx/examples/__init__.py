"""Runnable examples, each a module: ``python -m rtx.examples.<name>``.

- ``karate``: a two-layer GCN trained semi-supervised on the built-in karate club
  graph (gather / scale / scatter-add message passing, the tape, Adam).
- ``hetgat``: the main job: a heterogeneous graph attention network (``rtx.nn.HetGAT``)
  trained on the built-in synthetic citation graph (``rtx-hetgat``).
"""
