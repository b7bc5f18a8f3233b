"""A typical PyTorch Geometric heterogeneous training script, run on rtx.

Everything below the marker line is a PyG script (HeteroData, ``data['paper'].y``,
``x_dict`` / ``edge_index_dict``, ``ToUndirected``, ``HeteroConv(GATConv)``,
``model.to(device)``, Adam, ``loss.backward()``) with its imports renamed and
nothing else: ``torch_geometric`` -> ``rtx``, then ``torch`` -> ``rtx`` (so
``torch.nn.Module`` is ``rtx.nn.Module``, ``torch.cuda.is_available()`` is
``rtx.cuda.is_available()``, ...).  ``tests/examples/test_pyg_port.py`` rebuilds the
PyG original from it, checks that renaming it gives this file back, runs both
(the PyG one when torch_geometric is installed) and compares the results.

The layers take PyG's lazy sizes (``GATConv((-1, -1), ...)``), materialised by the
first forward under ``no_grad`` as in PyG's documentation.  Run: ``python
examples/pyg_port.py``.
"""
# ---- the PyG script, imports renamed ----
import rtx
import rtx.nn.functional as F
import rtx.transforms as T
from rtx.data import HeteroData
from rtx.nn import GATConv, HeteroConv, Linear

rtx.manual_seed(0)
data = HeteroData()
data['paper'].x = rtx.randn(200, 16)
data['paper'].y = rtx.randint(0, 4, (200,))
data['paper'].train_mask = rtx.rand(200) < 0.6
data['author'].x = rtx.randn(100, 8)
data['author', 'writes', 'paper'].edge_index = rtx.stack(
    [rtx.randint(0, 100, (600,)), rtx.randint(0, 200, (600,))])
data['paper', 'cites', 'paper'].edge_index = rtx.randint(0, 200, (2, 800))
data = T.ToUndirected()(data)


class HeteroGNN(rtx.nn.Module):
    def __init__(self, metadata, hidden_channels, out_channels, num_layers):
        super().__init__()
        self.convs = rtx.nn.ModuleList()
        for _ in range(num_layers):
            conv = HeteroConv({
                edge_type: GATConv((-1, -1), hidden_channels, add_self_loops=False)
                for edge_type in metadata[1]
            }, aggr='sum')
            self.convs.append(conv)
        self.lin = Linear(hidden_channels, out_channels)

    def forward(self, x_dict, edge_index_dict):
        for conv in self.convs:
            x_dict = conv(x_dict, edge_index_dict)
            x_dict = {key: x.relu() for key, x in x_dict.items()}
        return self.lin(x_dict['paper'])


device = rtx.device('cuda' if rtx.cuda.is_available() else 'cpu')
model = HeteroGNN(data.metadata(), 64, 4, num_layers=2).to(device)
data = data.to(device)
with rtx.no_grad():
    out = model(data.x_dict, data.edge_index_dict)
optimizer = rtx.optim.Adam(model.parameters(), lr=0.005, weight_decay=0.001)


def train():
    model.train()
    optimizer.zero_grad()
    out = model(data.x_dict, data.edge_index_dict)
    mask = data['paper'].train_mask
    loss = F.cross_entropy(out[mask], data['paper'].y[mask])
    loss.backward()
    optimizer.step()
    return float(loss)


@rtx.no_grad()
def test():
    model.eval()
    pred = model(data.x_dict, data.edge_index_dict).argmax(dim=-1)
    mask = data['paper'].train_mask
    return int((pred[mask] == data['paper'].y[mask]).sum()) / int(mask.sum())


losses = [train() for epoch in range(1, 31)]
print(f'loss {losses[0]:.4f} -> {losses[-1]:.4f}, train accuracy {test():.4f}')
print('shape', tuple(out.shape))
