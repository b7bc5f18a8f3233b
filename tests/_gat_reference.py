"""A plain numpy reference of PyTorch Geometric's GATConv formula, and a
gradcheck helper for modules (tests only).

Written straight from the formula, edge by edge with numpy's unbuffered
``ufunc.at`` scatters, independent of rtx's kernels:

    x'_j = W_src x_j,  x'_i = W_dst x_i                      (per head h: [H, C])
    e_ij^h = LeakyReLU(<a_src^h, x'_j^h> + <a_dst^h, x'_i^h> (+ <a_edge^h, W_e attr_ij^h>))
    alpha_ij^h = exp(e_ij^h - max) / sum over i's incoming edges
    out_i = concat_h (or mean_h) sum_j alpha_ij^h x'_j^h  (+ W_res x_i) (+ bias)

``params`` holds numpy arrays under PyG's state_dict names.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from rtx.autograd import gradcheck


def add_self_loops_ref(edge_index, num_nodes, edge_attr=None, fill_value="mean"):
    """PyG's remove_self_loops + add_self_loops (loops appended after the edges)."""
    ei = np.asarray(edge_index, dtype=np.int64).reshape(2, -1)
    keep = ei[0] != ei[1]
    ei = ei[:, keep]
    loops = np.arange(num_nodes, dtype=np.int64)
    out_ei = np.concatenate([ei, np.stack([loops, loops])], axis=1)
    if edge_attr is None:
        return out_ei, None
    attr = np.asarray(edge_attr)
    if attr.ndim == 1:
        attr = attr[:, None]
    attr = attr[keep]
    if isinstance(fill_value, str):
        s = np.zeros((num_nodes, attr.shape[1]), dtype=attr.dtype)
        np.add.at(s, ei[1], attr)
        if fill_value == "mean":
            cnt = np.bincount(ei[1], minlength=num_nodes).astype(attr.dtype)
            s = s / np.maximum(cnt, 1)[:, None]
        elif fill_value not in ("add", "sum"):
            raise ValueError(fill_value)
        fill = s
    else:
        fill = np.full((num_nodes, attr.shape[1]), float(fill_value), dtype=attr.dtype)
    return out_ei, np.concatenate([attr, fill], axis=0)


def gat_conv_ref(x, edge_index, params, heads, out_channels, concat=True,
                 negative_slope=0.2, add_self_loops=True, edge_attr=None,
                 fill_value="mean"):
    """Returns ``(out, edge_index_used, alpha [E', H])``.  ``x`` is an array or a
    ``(x_src, x_dst)`` pair (``x_dst`` may be None)."""
    H, C = heads, out_channels
    if isinstance(x, tuple):
        x_src, x_dst = x
    else:
        x_src = x_dst = x
    if "lin.weight" in params:
        w_src = w_dst = params["lin.weight"]
    else:
        w_src, w_dst = params["lin_src.weight"], params["lin_dst.weight"]
    hs = (x_src @ w_src.T).reshape(-1, H, C)
    hd = None if x_dst is None else (x_dst @ w_dst.T).reshape(-1, H, C)
    ei = np.asarray(edge_index, dtype=np.int64).reshape(2, -1)
    n_dst = hs.shape[0] if hd is None else hd.shape[0]  # (x_src, None): N_src, as PyG
    attr = edge_attr
    if add_self_loops:
        ei, attr = add_self_loops_ref(ei, min(hs.shape[0], n_dst), attr, fill_value)
    src, dst = ei
    a_src = (hs * params["att_src"]).sum(-1)                      # [N_src, H]
    e = a_src[src]
    if hd is not None:
        e = e + (hd * params["att_dst"]).sum(-1)[dst]
    if attr is not None and "lin_edge.weight" in params:
        a = np.asarray(attr)
        if a.ndim == 1:
            a = a[:, None]
        he = (a @ params["lin_edge.weight"].T).reshape(-1, H, C)
        e = e + (he * params["att_edge"]).sum(-1)
    e = np.where(e > 0, e, negative_slope * e)
    mx = np.full((n_dst, H), -np.inf, dtype=e.dtype)
    np.maximum.at(mx, dst, e)
    p = np.exp(e - mx[dst])
    den = np.zeros((n_dst, H), dtype=e.dtype)
    np.add.at(den, dst, p)
    alpha = p / den[dst]
    out = np.zeros((n_dst, H, C), dtype=hs.dtype)
    np.add.at(out, dst, alpha[:, :, None] * hs[src])
    out = out.reshape(n_dst, H * C) if concat else out.mean(1)
    if "res.weight" in params and x_dst is not None:
        out = out + x_dst @ params["res.weight"].T
    if params.get("bias") is not None:
        out = out + params["bias"]
    return out, ei, alpha


@contextmanager
def _swapped(module, names, tensors):
    """Run ``module`` with plain tensors in place of its named parameters (so a
    gradcheck can perturb them)."""
    saved = []
    for name, t in zip(names, tensors, strict=True):
        owner = module
        *path, leaf = name.split(".")
        for p in path:
            owner = getattr(owner, p)
        saved.append((owner, leaf, owner._parameters[leaf]))
        owner._parameters[leaf] = t
    try:
        yield
    finally:
        for owner, leaf, p in saved:
            owner._parameters[leaf] = p


def gradcheck_module(module, inputs, call):
    """gradcheck of ``call(module, *inputs)`` w.r.t. the inputs and every parameter."""
    names = [n for n, _ in module.named_parameters()]
    params = [p.detach() for _, p in module.named_parameters()]
    k = len(inputs)

    def fn(*args):
        with _swapped(module, names, args[k:]):
            return call(module, *args[:k])

    leaves = [t.detach().requires_grad_() for t in (*inputs, *params)]
    return gradcheck(fn, leaves, eps=1e-6, atol=1e-6, rtol=1e-4)
