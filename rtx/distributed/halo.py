"""Per-layer halo exchange: each rank computes only the nodes it owns and,
before every layer after the first, fetches its halo rows (the current
states of the in-neighbours that other ranks own) from their owners.

``ExchangePlan`` is built once per layer (a collective): every rank tells each
owner which of its nodes it needs (one ``Alltoall`` of counts and one
``Alltoallv`` of global ids); each rank then knows which of its owned rows to
send to whom.  ``exchange(plan, owned)`` is an ``rtx.autograd.Function``:

* forward: one ``Ialltoallv`` per node type, from the packed owned rows
  (``index_select`` of the send lists) straight into the halo tensors (a
  rank's halo is sorted by owner, so each peer's rows land in one block);
* backward: the reverse ``Ialltoallv`` of the halo rows' gradients, summed
  into the owned rows (``index_add``: a row sent to several peers gets all
  their gradients).

Both start with the agreement every rtx collective makes (``_comm._agree``:
the plan, the layer, width and dtype), so ranks out of step raise instead of
exchanging the wrong rows.  ``exchange(..., pending=handle)`` returns before
the data arrive: the caller computes what does not need the halo (the owned
rows' transforms) and calls ``handle.wait()`` before reading the halo.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..autograd.function import Function, FunctionCtx
from ..backend.cpu import empty
from ..creation import from_numpy
from ..functional import index_add, index_select
from ..tensor import Tensor
from . import _comm

__all__ = ["ExchangePlan", "Pending", "exchange"]


def _displ(counts: np.ndarray) -> np.ndarray:
    d = np.zeros_like(counts)
    np.cumsum(counts[:-1], out=d[1:])
    return d


class ExchangePlan:
    """Which owned rows go to which rank, and which halo rows come from
    which, for the node types ``types`` (a collective: every rank builds its
    plans in the same order).

    Args:
        types: node types exchanged (the sources of a layer's relations).
        owned_ids: node type -> global ids of the owned nodes (local order).
        halo_ids: node type -> global ids of the halo rows this layer needs,
            sorted by owner (then id); ``halo_owner`` their owners.
        tag: a number naming the plan (the layer), agreed on every use.
    """

    def __init__(self, types: Sequence[str], owned_ids: dict[str, np.ndarray],
                 halo_ids: dict[str, np.ndarray], halo_owner: dict[str, np.ndarray],
                 tag: int) -> None:
        comm = _comm._comm()
        P = _comm._SIZE
        me = _comm._RANK
        self.types = list(types)
        self.tag = int(tag)
        self.num_owned = {t: int(owned_ids[t].size) for t in self.types}
        self.num_halo = {t: int(halo_ids[t].size) for t in self.types}
        self.recv_rows: dict[str, np.ndarray] = {}
        self.send_rows: dict[str, np.ndarray] = {}
        self.send_idx: dict[str, np.ndarray] = {}

        def check() -> None:
            for t in self.types:
                o = np.asarray(halo_owner[t], dtype=np.int64)
                if o.shape != halo_ids[t].shape:
                    raise ValueError(f"ExchangePlan: halo ids and owners of {t!r} differ in "
                                     "length")
                if o.size and (int(o.min()) < 0 or int(o.max()) >= P or (o == me).any()):
                    raise ValueError(f"ExchangePlan: a halo node of {t!r} is owned by no "
                                     "other rank")
                if o.size > 1 and (np.diff(o) < 0).any():
                    raise ValueError(f"ExchangePlan: the halo of {t!r} is not sorted by owner")

        _comm._agree("halo_setup", shape=(len(self.types),), extra=(self.tag, 0), check=check,
                     what="halo exchange plan")
        T = len(self.types)
        need = np.zeros((P, T), dtype=np.int64)  # rows I need from each rank, per type
        for j, t in enumerate(self.types):
            need[:, j] = np.bincount(np.asarray(halo_owner[t], dtype=np.int64), minlength=P)
        give = np.empty_like(need)
        what = "halo exchange plan: counts"
        _comm._wait([comm.Ialltoall(need, give)], what)
        # the global ids I need, grouped by owner (then type): what each owner must send
        req = np.concatenate([
            np.concatenate([halo_ids[t][np.asarray(halo_owner[t]) == q] for t in self.types])
            if T else np.zeros(0, np.int64) for q in range(P)]).astype(np.int64)
        got = np.empty(int(give.sum()), dtype=np.int64)
        sc, rc = need.sum(1), give.sum(1)
        _comm._wait([comm.Ialltoallv([req, (sc, _displ(sc))], [got, (rc, _displ(rc))])],
                    "halo exchange plan: ids")
        err = None
        pos = 0
        send: dict[str, list[np.ndarray]] = {t: [] for t in self.types}
        sorted_own = {}
        for t in self.types:
            order = np.argsort(owned_ids[t], kind="stable")
            sorted_own[t] = (order, owned_ids[t][order])
        for q in range(P):
            for j, t in enumerate(self.types):
                ids = got[pos:pos + give[q, j]]
                pos += int(give[q, j])
                order, so = sorted_own[t]
                k = np.searchsorted(so, ids)
                valid = k < so.size
                valid[valid] = so[k[valid]] == ids[valid]
                if not valid.all() and err is None:
                    err = (f"rank {q} asked this rank (rank {me}) for {t!r} nodes it does not "
                           "own: the shards do not fit together")
                send[t].append(order[k[valid]])
        flag = from_numpy(np.array([err is not None]))
        _comm.all_reduce(flag, op="lor")
        if err is not None:
            raise ValueError(f"halo exchange plan: {err}")
        if bool(flag.item()):
            raise ValueError("halo exchange plan: another rank found that the shards do not "
                             "fit together (its error says why)")
        for j, t in enumerate(self.types):
            self.recv_rows[t] = need[:, j].copy()
            self.send_rows[t] = give[:, j].copy()
            self.send_idx[t] = np.concatenate(send[t]).astype(np.int64)

    def stats(self) -> dict[str, Any]:
        """Rows this rank receives and sends per type (one forward)."""
        return {"recv": {t: int(v.sum()) for t, v in self.recv_rows.items()},
                "send": {t: int(v.sum()) for t, v in self.send_rows.items()}}

    # ----------------------------------------------------------- transfers
    def _post(self, sources: list[Tensor], rows_out: dict[str, np.ndarray],
              rows_in: dict[str, np.ndarray], pack: dict[str, np.ndarray] | None,
              n_out: dict[str, int], direction: str) -> tuple[list[Any], list[Tensor], list[Any]]:
        """Post one Ialltoallv per type: ``sources[j]`` (rows of type j, packed
        by ``pack`` when given) go out in ``rows_out`` blocks per rank; the
        result (``n_out`` rows) comes in ``rows_in`` blocks."""
        comm = _comm._comm()
        reqs, outs, keep = [], [], []
        for j, t in enumerate(self.types):
            x = sources[j]
            width = int(np.prod(x.shape[1:])) if x.ndim > 1 else 1
            sent = index_select(x, pack[t]) if pack is not None else x
            sbuf = np.ascontiguousarray(np.asarray(sent.numpy()))
            shape = (n_out[t], *x.shape[1:])
            if isinstance(x._value, np.ndarray):
                out = Tensor._make(empty(shape, x.dtype), x._ad)
                rbuf = out._value
            else:
                rbuf = np.empty(shape, x.dtype)
                out = from_numpy(rbuf)
            so, ro = rows_out[t] * width, rows_in[t] * width
            reqs.append(comm.Ialltoallv([sbuf.reshape(-1), (so, _displ(so))],
                                        [rbuf.reshape(-1), (ro, _displ(ro))]))
            outs.append(out)
            keep.append(sbuf)
        return reqs, outs, keep

    def _agree(self, sources: Sequence[Tensor], kind: str) -> None:
        widths = {int(np.prod(x.shape[1:])) for x in sources}
        dts = {x.dtype for x in sources}

        def check() -> None:
            if len(sources) != len(self.types):
                raise ValueError(f"halo exchange: {len(sources)} tensors for "
                                 f"{len(self.types)} node types")
            for t, x in zip(self.types, sources, strict=True):
                want = self.num_owned[t] if kind == "halo_forward" else self.num_halo[t]
                if not isinstance(x, Tensor) or x.ndim < 1 or x.shape[0] != want:
                    raise ValueError(f"halo exchange: {t!r} needs a tensor of {want} rows")
            if len(widths) > 1 or len(dts) > 1:
                raise ValueError("halo exchange: every type's rows must have one width and "
                                 "dtype")

        width = widths.pop() if len(widths) == 1 else -1
        dt = dts.pop() if len(dts) == 1 else None
        _comm._agree(kind, shape=(len(self.types), width), dtype=dt,
                     extra=(self.tag, 1 if kind == "halo_forward" else 2), check=check,
                     what=f"halo exchange (layer {self.tag})")

    def forward(self, owned: Sequence[Tensor],
                pending: Pending | None = None) -> list[Tensor]:
        """The halo rows (per type) from the owned rows (no autograd: see
        ``exchange``)."""
        self._agree(owned, "halo_forward")
        reqs, outs, keep = self._post(list(owned), self.send_rows, self.recv_rows,
                                      self.send_idx, self.num_halo, "forward")
        handle = Pending(reqs, keep, f"halo exchange (layer {self.tag})")
        if pending is None:
            handle.wait()
        else:
            pending._adopt(handle)
        return outs

    def backward(self, grads: Sequence[Tensor]) -> list[Tensor]:
        """The owned rows' gradients from the halo rows' (the reverse exchange,
        then a sum per owned row)."""
        self._agree(grads, "halo_backward")
        reqs, outs, keep = self._post(list(grads), self.recv_rows, self.send_rows, None,
                                      {t: int(v.sum()) for t, v in self.send_rows.items()},
                                      "backward")
        Pending(reqs, keep, f"halo exchange backward (layer {self.tag})").wait()
        return [index_add(g, self.send_idx[t], self.num_owned[t])
                for t, g in zip(self.types, outs, strict=True)]


class Pending:
    """Requests in flight; ``wait()`` completes them (under the watchdog)."""

    def __init__(self, reqs: list[Any] | None = None, keep: list[Any] | None = None,
                 what: str = "halo exchange") -> None:
        self._reqs = list(reqs or [])
        self._keep = list(keep or [])
        self.what = what

    def _adopt(self, other: Pending) -> None:
        self._reqs += other._reqs
        self._keep += other._keep
        self.what = other.what

    def wait(self) -> None:
        if self._reqs:
            _comm._wait(self._reqs, self.what)
        self._reqs, self._keep = [], []


class _Exchange(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, plan: ExchangePlan, pending: Pending | None,
                *owned: Tensor) -> tuple[Tensor, ...]:
        ctx.plan = plan  # type: ignore[attr-defined]
        return tuple(plan.forward(owned, pending))

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Tensor) -> tuple[Any, ...]:
        plan: ExchangePlan = ctx.plan  # type: ignore[attr-defined]
        return (None, None, *plan.backward(grads))


def exchange(plan: ExchangePlan, owned: Sequence[Tensor],
             pending: Pending | None = None) -> list[Tensor]:
    """The halo rows of ``plan.types`` (one tensor per type, ``plan.num_halo``
    rows) from every rank's owned rows ``owned`` (``plan.num_owned`` rows
    each); differentiable (the backward pass sends the gradients back).

    With ``pending`` (a ``Pending()``), returns at once: the halo tensors are
    filled when ``pending.wait()`` returns; read them only after that."""
    return list(_Exchange.apply(plan, pending, *owned))
