"""Plain numpy references of PyG's SAGEConv and GATv2Conv and of the fused
``gatv2_scores`` op (tests only), written from the formulas edge by edge with
numpy's unbuffered ``ufunc.at`` scatters, independent of rtx's kernels.

``params`` holds numpy arrays under PyG's state_dict names.
"""

from __future__ import annotations

import numpy as np
from _gat_reference import add_self_loops_ref


def lrelu(z, slope):
    return np.where(z > 0, z, z * slope)


def gatv2_scores_ref(xl, xr, att, edge_index, slope=0.2, xe=None):
    """``[E, H]``: sum_c att[h, c] * lrelu(xl[src, h, c] + xr[dst, h, c] (+ xe))."""
    src, dst = np.asarray(edge_index, dtype=np.int64)
    z = xl[src] + xr[dst]
    if xe is not None:
        z = z + xe
    return (lrelu(z, slope) * att).sum(-1)


def _scatter(rows, index, n, reduce):
    """PyG's scatter over dim 0: sum / mean / max / min, 0 for an empty target."""
    out = np.zeros((n,) + rows.shape[1:], dtype=rows.dtype)
    if reduce in ("sum", "add", "mean"):
        np.add.at(out, index, rows)
        if reduce == "mean":
            cnt = np.bincount(index, minlength=n).astype(rows.dtype)
            out = out / np.maximum(cnt, 1).reshape((-1,) + (1,) * (rows.ndim - 1))
        return out
    fill = -np.inf if reduce == "max" else np.inf
    acc = np.full((n,) + rows.shape[1:], fill, dtype=rows.dtype)
    (np.maximum if reduce == "max" else np.minimum).at(acc, index, rows)
    return np.where(np.isinf(acc), 0, acc).astype(rows.dtype)


def sage_ref(x, edge_index, params, aggr="mean", normalize=False, n_dst=None):
    """PyG's SAGEConv: ``lin_l(aggr x_j) (+ lin_r(x_i))``, then L2-normalised.
    ``x`` is an array or a ``(x_src, x_dst)`` pair (``x_dst`` may be None)."""
    x_src, x_dst = x if isinstance(x, tuple) else (x, x)
    src, dst = np.asarray(edge_index, dtype=np.int64)
    if n_dst is None:
        n_dst = x_src.shape[0] if x_dst is None else x_dst.shape[0]
    if "lin.weight" in params:
        x_src = np.maximum(x_src @ params["lin.weight"].T + params["lin.bias"], 0)
    agg = _scatter(x_src[src], dst, n_dst, aggr)
    out = agg @ params["lin_l.weight"].T
    if params.get("lin_l.bias") is not None:
        out = out + params["lin_l.bias"]
    if "lin_r.weight" in params and x_dst is not None:
        out = out + x_dst @ params["lin_r.weight"].T
    if normalize:
        out = out / np.maximum(np.sqrt((out * out).sum(-1, keepdims=True)), 1e-12)
    return out


def gatv2_ref(x, edge_index, params, heads, out_channels, concat=True, negative_slope=0.2,
              add_self_loops=True, edge_attr=None, fill_value="mean", share_weights=False):
    """PyG's GATv2Conv.  Returns ``(out, edge_index_used, alpha [E', H])``."""
    H, C = heads, out_channels
    x_src, x_dst = x if isinstance(x, tuple) else (x, x)
    wl, bl = params["lin_l.weight"], params.get("lin_l.bias")
    wr, br = ((wl, bl) if share_weights else (params["lin_r.weight"], params.get("lin_r.bias")))
    xl = x_src @ wl.T + (0 if bl is None else bl)
    xr = x_dst @ wr.T + (0 if br is None else br)
    xl3, xr3 = xl.reshape(-1, H, C), xr.reshape(-1, H, C)
    ei = np.asarray(edge_index, dtype=np.int64).reshape(2, -1)
    n_dst = xr3.shape[0]
    attr = edge_attr
    if add_self_loops:
        ei, attr = _loops(ei, min(xl3.shape[0], n_dst), attr, fill_value)
    xe = None
    if attr is not None and "lin_edge.weight" in params:
        a = np.asarray(attr)
        a = a[:, None] if a.ndim == 1 else a
        xe = (a @ params["lin_edge.weight"].T).reshape(-1, H, C)
    e = gatv2_scores_ref(xl3, xr3, params["att"].reshape(H, C), ei, negative_slope, xe)
    src, dst = ei
    mx = np.full((n_dst, H), -np.inf, dtype=e.dtype)
    np.maximum.at(mx, dst, e)
    p = np.exp(e - mx[dst])
    den = np.zeros((n_dst, H), dtype=e.dtype)
    np.add.at(den, dst, p)
    alpha = p / den[dst]
    out = np.zeros((n_dst, H, C), dtype=xl.dtype)
    np.add.at(out, dst, alpha[:, :, None] * xl3[src])
    out = out.reshape(n_dst, H * C) if concat else out.mean(1)
    if "res.weight" in params:
        out = out + x_dst @ params["res.weight"].T
    if params.get("bias") is not None:
        out = out + params["bias"]
    return out, ei, alpha


def _loops(ei, num_nodes, attr, fill_value):
    """PyG's remove + add self-loops, with every fill_value GATv2Conv takes."""
    if attr is None or (isinstance(fill_value, str) and fill_value in ("mean", "add", "sum")) \
            or not isinstance(fill_value, str) and np.ndim(fill_value) == 0:
        return add_self_loops_ref(ei, num_nodes, attr, fill_value)
    keep = ei[0] != ei[1]
    kept = ei[:, keep]
    a = np.asarray(attr)
    a = (a[:, None] if a.ndim == 1 else a)[keep]
    loops = np.arange(num_nodes)
    if isinstance(fill_value, str):
        fill = _scatter(a, kept[1], num_nodes, fill_value)
    else:
        fill = np.broadcast_to(np.asarray(fill_value, dtype=a.dtype), (num_nodes, a.shape[1]))
    return (np.concatenate([kept, np.stack([loops, loops])], axis=1),
            np.concatenate([a, fill], axis=0))
