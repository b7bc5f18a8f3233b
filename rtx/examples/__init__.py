"""Runnable examples, each a module with a console script: ``rtx-hetgat``, ``rtx-karate``
(or ``python -m rtx.examples.<name>`` from outside the source tree).

- ``karate``: a two-layer GCN trained semi-supervised on the built-in karate club
  graph (gather / scale / scatter-add message passing, the tape, Adam).
- ``hetgat``: the main job: a heterogeneous graph attention network (``rtx.nn.HetGAT``)
  trained on the built-in synthetic citation graph (``rtx-hetgat``).
"""
