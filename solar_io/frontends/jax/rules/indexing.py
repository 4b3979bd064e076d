"""Indexing: gathers (indirect copies), dynamic slices and updates, scatters (format 1.1)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ....affine import Access, Indirect
from ...common.builder import access, expr, family
from ..lower import Lowerer, Operand
from ..registry import NoLowering, rule
from .helpers import lin, reshape


@rule("gather")
def gather(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """An indirect copy: ``x[@i0, @i1, .., R..]`` with one index tensor per indexed dim.

    Covers ``jnp.take`` along any axis, embeddings and ``x[i, j]`` with several index arrays:
    every dim named by ``start_index_map`` must be sliced to size 1 (it reads ``@column``) or
    taken whole (its clamped start is 0); the other dims are sliced from 0. Out-of-range
    indices are an executor error, not clamped (jnp normalises negative ones before the
    gather).
    """
    x, ids = ins
    if not (isinstance(x, str) and isinstance(ids, str)):
        raise NoLowering("scalar operand")
    dn = eqn.params["dimension_numbers"]
    if getattr(dn, "operand_batching_dims", ()):
        raise NoLowering("operand batching dims")
    mode = str(eqn.params.get("mode", ""))
    if not any(m in mode for m in ("CLIP", "PROMISE", "FILL")):
        raise NoLowering(f"mode {mode}")
    xs, ids_s, sizes = ctx.shape(x), ctx.shape(ids), eqn.params["slice_sizes"]
    smap, collapsed = list(dn.start_index_map), set(dn.collapsed_slice_dims)
    if not ids_s or ids_s[-1] != len(smap):
        raise NoLowering("index vector is not the last dim")
    if any(sizes[d] not in (1, xs[d]) for d in smap):
        raise NoLowering("partial slices at an indexed dim")
    indexed = {d: k for k, d in enumerate(smap) if sizes[d] == 1 and xs[d] != 1}
    batch = ids_s[:-1]
    cols = _index_columns(ctx, ids, sorted(indexed.values()), batch)
    if len(indexed) == 1:
        ctx.b.bind(x, ["V" if d in indexed else ("D" if d == len(xs) - 1 else None) for d in range(len(xs))])
    xr = ctx.ranks(x)
    br = ctx.ranks(next(iter(cols.values()))) if cols else ctx.b.new_ranks(["B*"] * len(batch), batch)
    kept = [d for d in range(len(xs)) if d not in collapsed]
    hints = [xr[d] if sizes[d] == xs[d] else ("U*" if sizes[d] == 1 else family(xr[d]) + "*") for d in kept]
    slice_r = list(ctx.b.new_ranks(hints, [sizes[d] for d in kept], set(br)))
    shape = ctx.out_shape()
    offset = list(dn.offset_dims)
    out_ranks, si, bi = [], iter(slice_r), iter(br)
    for j in range(len(shape)):
        out_ranks.append(next(si) if j in offset else next(bi))
    idx: list[Any] = []
    for d in range(len(xs)):
        if d in indexed:
            idx.append(Indirect(cols[indexed[d]]))
        elif d in collapsed:
            idx.append(expr(0))
        else:
            idx.append(expr(slice_r[kept.index(d)]))
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, out_ranks, [Access(x, tuple(idx))] + [access(c, br) for c in cols.values()],
               access(out, out_ranks), location=ctx.location)
    return [out]


def _index_columns(ctx: Lowerer, ids: str, ks: list[int], batch: tuple[int, ...]) -> dict[int, str]:
    """Column ``k`` of the index array ``ids[..., k]`` as its own tensor (a view) per ``k``."""
    if ctx.shape(ids)[-1] == 1:
        return {k: reshape(ctx, ids, batch, suffix="ids") for k in ks}
    ir = ctx.ranks(ids)
    cols = {}
    for k in ks:
        c = ctx.tensor(ir[:-1], ctx.dtype(ids), f"ids{k}")
        ctx.b.copy(c, ctx.op, ir[:-1], [access(ids, list(ir[:-1]) + [k])], access(c, ir[:-1]), view=True,
                   location=ctx.location)
        cols[k] = c
    return cols


@rule("dynamic_slice")
def dynamic_slice(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """A box of ``x``: an affine copy for constant starts; with data-dependent starts an
    indirect copy whose index along each such dim is ``clamp(start) + arange(size)``."""
    x, *starts = ins
    xs, shape = ctx.shape(x), ctx.out_shape()
    xr = ctx.ranks(x)
    out_ranks = ctx.b.new_ranks([xr[i] if shape[i] == xs[i] else family(xr[i]) + "*" for i in range(len(xs))],
                                shape)
    dynamic = [i for i, st in enumerate(starts) if isinstance(st, str) and shape[i] != xs[i]]
    idx: list[Any] = []
    index_inputs = []
    for i, st in enumerate(starts):
        if i in dynamic:
            t = _start_index(ctx, st, xs[i], shape[i], out_ranks[i])
            idx.append(Indirect(t))
            index_inputs.append(access(t, [out_ranks[i]]))
        else:
            idx.append(lin(0 if isinstance(st, str) else min(max(int(st), 0), xs[i] - shape[i]), (1, out_ranks[i])))
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, out_ranks, [Access(x, tuple(idx))] + index_inputs, access(out, out_ranks),
               location=ctx.location)
    return [out]


def _start_index(ctx: Lowerer, start: Operand, size: int, n: int, rank: str) -> str:
    """The index tensor ``[rank]`` = ``clamp(start, 0, size - n) + arange(n)`` (JAX clamps starts
    so that the box fits); constant when ``start`` is."""
    iota = np.arange(n, dtype=np.int32)
    if not isinstance(start, str):
        t = ctx.data(iota + min(max(int(start), 0), size - n), "int32")
        ctx.b.bind(t, [rank])
        return t
    dt = ctx.dtype(start)
    lo = ctx.tensor([], dt, "start")
    ctx.b.einsum(lo, ctx.op, [], [access(start, []), access(ctx.scalar(size - n, dt), [])], access(lo, []), "min",
                 location=ctx.location)
    hi = ctx.tensor([], dt, "start")
    ctx.b.einsum(hi, ctx.op, [], [access(lo, []), access(ctx.scalar(0, dt), [])], access(hi, []), "max",
                 location=ctx.location)
    ar = ctx.data(iota, dt)
    ctx.b.bind(ar, [rank])
    t = ctx.tensor([rank], dt, "index")
    ctx.b.einsum(t, ctx.op, [rank], [access(hi, []), access(ar, [rank])], access(t, [rank]), "add",
                 location=ctx.location)
    return t


@rule("dynamic_update_slice")
def dynamic_update_slice(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """``x`` with the box at ``starts`` replaced by ``u``. Constant starts: concats of views of
    ``x`` around ``u``, one level per dim the update does not cover (data movement only, no
    FLOPs). Data-dependent starts: a scatter einsum (format 1.1) that overwrites the box."""
    x, u, *starts = ins
    if not (isinstance(x, str) and isinstance(u, str)):
        raise NoLowering("scalar operand")
    xs, us = ctx.shape(x), ctx.shape(u)
    if any(isinstance(s, str) and us[i] != xs[i] for i, s in enumerate(starts)):
        return [_update_scatter(ctx, x, u, starts)]
    starts = [0 if isinstance(s, str) else s for s in starts]
    st = [min(max(int(s), 0), xs[i] - us[i]) for i, s in enumerate(starts)]
    return [_update_box(ctx, x, u, st, 0, [0] * len(xs), list(xs))]


def _update_scatter(ctx: Lowerer, x: str, u: str, starts: list[Operand]) -> str:
    """``out[@i0, .., R..] = u[..]`` with ``init`` = ``x``: index tensors for the dims the update
    does not cover, plain ranks for the others."""
    xs, us = ctx.shape(x), ctx.shape(u)
    xr = ctx.ranks(x)
    ur = ctx.b.new_ranks([xr[i] if us[i] == xs[i] else family(xr[i]) + "*" for i in range(len(xs))], us)
    out_idx: list[Any] = []
    index_inputs = []
    for i, st in enumerate(starts):
        if us[i] == xs[i]:
            out_idx.append(expr(ur[i]))
            continue
        t = _start_index(ctx, st, xs[i], us[i], ur[i])
        out_idx.append(Indirect(t))
        index_inputs.append(access(t, [ur[i]]))
    out = ctx.tensor(xr, ctx.dtype(x))
    ctx.b.einsum(out, ctx.op, list(ur), [access(u, ur)] + index_inputs + [Access(x, tuple(out_idx))],
                 Access(out, tuple(out_idx)), "identity", "none", init=x, location=ctx.location)
    return out


def _update_box(ctx: Lowerer, x: str, u: str, st: list[int], d: int, lo: list[int], size: list[int]) -> str:
    """The updated tensor restricted to the box (``lo``, ``size``): region in dims < ``d``, whole beyond."""
    xs, us = ctx.shape(x), ctx.shape(u)
    while d < len(xs) and us[d] == xs[d]:
        d += 1
    if d == len(xs):
        return u
    parts = []
    if st[d] > 0:
        parts.append(_view(ctx, x, _at(lo, d, 0), _at(size, d, st[d])))
    parts.append(_update_box(ctx, x, u, st, d + 1, _at(lo, d, st[d]), _at(size, d, us[d])))
    end = st[d] + us[d]
    if end < xs[d]:
        parts.append(_view(ctx, x, _at(lo, d, end), _at(size, d, xs[d] - end)))
    xr = ctx.ranks(x)
    ranks = ctx.b.new_ranks([xr[i] if size[i] == xs[i] else family(xr[i]) + "*" for i in range(len(xs))], size)
    out = ctx.tensor(ranks, ctx.dtype(x), None if d == 0 or lo == [0] * len(xs) else "box")
    ctx.b.concat(out, ctx.op, parts, out, ranks[d], location=ctx.location)
    return out


def _at(v: list[int], d: int, value: int) -> list[int]:
    return v[:d] + [value] + v[d + 1:]


def _view(ctx: Lowerer, x: str, lo: list[int], size: list[int]) -> str:
    """The box (``lo``, ``size``) of ``x`` as a strided view."""
    xr, xs = ctx.ranks(x), ctx.shape(x)
    ranks = ctx.b.new_ranks([xr[i] if size[i] == xs[i] else family(xr[i]) + "*" for i in range(len(xs))], size)
    out = ctx.tensor(ranks, ctx.dtype(x), "part")
    ctx.b.copy(out, ctx.op, ranks, [access(x, [lin(o, (1, r)) for r, o in zip(ranks, lo, strict=True)])],
               access(out, ranks), view=True, location=ctx.location)
    return out


#: scatter primitives and how they combine an update into the element it selects
_SCATTER = {"scatter": "none", "scatter-add": "add", "scatter_add": "add", "scatter-mul": "mul", "scatter_mul": "mul",
            "scatter-min": "min", "scatter_min": "min", "scatter-max": "max", "scatter_max": "max"}


@rule(*_SCATTER)
def scatter(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """A scatter einsum (format 1.1): ``out[@i0, .., R..] (+)= updates[B.., R..]`` starting from
    ``init`` = the operand; dims named by ``scatter_dims_to_operand_dims`` must be inserted
    (size-1 windows, ``x.at[i]``) or taken whole. With ``scatter`` (overwrite) and repeated
    indexes, which update wins is undefined, in JAX as in the format."""
    x, ids, upd = ins
    if not all(isinstance(t, str) for t in (x, ids, upd)):
        raise NoLowering("scalar operand")
    dn = eqn.params["dimension_numbers"]
    if getattr(dn, "operand_batching_dims", ()):
        raise NoLowering("operand batching dims")
    xs, ids_s, us = ctx.shape(x), ctx.shape(ids), ctx.shape(upd)
    smap, inserted = list(dn.scatter_dims_to_operand_dims), set(dn.inserted_window_dims)
    uwin = list(dn.update_window_dims)
    if not ids_s or ids_s[-1] != len(smap):
        raise NoLowering("index vector is not the last dim")
    wdims = [d for d in range(len(xs)) if d not in inserted]
    wsize = {d: us[uwin[i]] for i, d in enumerate(wdims)}
    if any(wsize[d] != xs[d] for d in wdims if d not in smap) or any(d not in smap for d in inserted):
        raise NoLowering("partial windows")
    indexed = {}
    for k, d in enumerate(smap):
        if d in inserted:
            indexed[d] = k
        elif wsize[d] != xs[d]:
            raise NoLowering("partial window at a scattered dim")
    batch = tuple(us[i] for i in range(len(us)) if i not in uwin)
    cols = _index_columns(ctx, ids, sorted(indexed.values()), batch)
    xr = ctx.ranks(x)
    br = ctx.ranks(next(iter(cols.values()))) if cols else ctx.b.new_ranks(["B*"] * len(batch), batch)
    wr = dict(zip(wdims, ctx.b.distinct([xr[d] for d in wdims], set(br)), strict=True))
    upd_idx, bi, wi = [], iter(br), iter(wdims)
    for i in range(len(us)):
        upd_idx.append(wr[next(wi)] if i in uwin else next(bi))
    out_idx: list[Any] = [Indirect(cols[indexed[d]]) if d in indexed else expr(wr[d]) for d in range(len(xs))]
    out = ctx.tensor(xr, ctx.dtype(x))
    inputs = [access(upd, upd_idx)] + [access(c, br) for c in cols.values()] + [Access(x, tuple(out_idx))]
    ctx.b.einsum(out, ctx.op, list(br) + [wr[d] for d in wdims], inputs, Access(out, tuple(out_idx)), "identity",
                 _SCATTER[eqn.primitive.name], init=x, location=ctx.location)
    return [out]
