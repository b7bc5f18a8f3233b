"""``rtx.transforms``: PyTorch Geometric's transforms on ``rtx.data.HeteroData``.

Each transform is a callable ``transform(data) -> data`` working on a shallow copy
(the input graph and its arrays are never changed); ``Compose([...])`` chains them
and ``RandomLinkSplit`` returns ``(train_data, val_data, test_data)``::

    import rtx.transforms as T
    data = T.Compose([T.ToUndirected(), T.AddSelfLoops(), T.NormalizeFeatures()])(data)
    data = T.RandomNodeSplit(num_val=0.1, num_test=0.2, seed=0)(data)

The random ones take ``seed=`` (the same result on every call) or ``generator=``
(an ``rtx.Generator``); without either they draw from rtx's default generator
(``rtx.manual_seed``).  See docs/data.md.
"""

from .add_self_loops import AddSelfLoops
from .base import BaseTransform, Compose
from .normalize_features import NormalizeFeatures
from .random_link_split import RandomLinkSplit
from .random_node_split import RandomNodeSplit
from .to_undirected import ToUndirected

__all__ = ["AddSelfLoops", "BaseTransform", "Compose", "NormalizeFeatures", "RandomLinkSplit",
           "RandomNodeSplit", "ToUndirected"]
