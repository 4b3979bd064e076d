"""Scatters: scatter, scatter_add, scatter_reduce, index_add, index_copy, index_put (format 1.1).

Each op is one einsum whose output is indexed through the index tensor (``out[.., @index, ..]``)
and starts from ``self`` (``init``): the points, over the index tensor's (or the source's)
shape, combine their source values into the elements they select with ``add``, ``mul``,
``max`` or ``min`` (``scatter_add``, ``index_add``, ``index_put(accumulate=True)``,
``scatter_reduce``), or overwrite them (reduce ``none``: ``scatter``, ``index_copy``,
``index_put``). The elements no point selects keep ``self``'s values, so the node is charged
for the selected elements only, like a gather, and never for a copy of ``self``, wherever the result
may share ``self``'s memory: an intermediate, or an output that is ``self`` (a user input) updated in
place and returned (``updates``, format 1.5, set by ``lower._outputs``). A result returned as a new
tensor is written whole and copies the unselected elements from ``self`` (:mod:`solar_io.metrics`).

Overwrites with repeated indexes are not deterministic in torch (nor in the format); the
reference executor keeps the last point, so validation of such a program may differ where
indexes repeat. ``scatter_reduce`` with ``include_self=False`` or ``reduce="mean"`` has no such
form and stays opaque.

``x[mask] = v`` with one boolean mask and one value (a mask the capture cannot see the values of) is
lowered as ``where(mask, v, x)``, an elementwise einsum with the same values. Eager PyTorch runs it as
``index_put_``, which overwrites in ``x``'s memory only the elements the mask selects, a data-dependent
count from none to all: the graph's ``masked_fill`` assumption lists these nodes under
``masked_writes``, which charges each the least any count costs (the mask and the value read; no
element of ``x`` read or written; :mod:`solar_io.metrics`). An index specialised to
select nothing (a ``nonzero`` no element passed) writes nothing: ``x`` itself.
"""

from __future__ import annotations

import numpy as np

from ....affine import Access, Indirect
from ....graph import Assumption
from ....node_lists import MASKED_WRITES
from ...common.builder import access, expr
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule
from .gather import advanced_index

_SCATTER_REDUCE = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}
_SCATTER_MODE = {None: "none", "add": "add", "multiply": "mul"}


def scatter_into(ctx: LowerCtx, x: T, out_index: tuple, space: list[str], data: list[Access],
                 index_inputs: list[Access], reduce: str, map: str = "identity") -> T:
    """Emit ``out[out_index] (reduce)= map(data)`` over ``space``, ``out`` starting as ``x``."""
    out = ctx.tensor(ctx.ranks(x), ctx.dtype(x))
    ctx.b.einsum(out.name, ctx.op, space, [Access(x.name, out_index), *data, *index_inputs],
                 Access(out.name, out_index), map, reduce, location=ctx.location, init=x.name)
    return out


def scatter_positions(ctx: LowerCtx, x: T, src: T, placed: dict[int, tuple[int, int]]) -> T:
    """``x`` with ``src`` (of x's rank count) written where each dim ``d`` of ``placed`` puts ``src``'s
    point ``j`` at ``start + step*j`` (``placed[d] = (start, step)``), every other dim one to one: one
    scatter starting from ``x`` (init), each placed dim indexed through a generated table of its
    positions (a function of its index: no bytes), charged for the written elements like every scatter.
    E.g. ``x[:, t] = h`` (``{1: (t, 1)}``, ``h`` unsqueezed), MRoPE's ``f[..., 1:60:3] = g``."""
    src = ctx.cast(src, ctx.dtype(x), suffix="src") if ctx.dtype(src) != ctx.dtype(x) else src
    sr = list(ctx.ranks(src))
    out_index, tables = [], []
    for d, r in enumerate(sr):
        if d not in placed:
            out_index.append(expr(r))
            continue
        start, step = placed[d]
        m = ctx.shape(src)[d]
        idx = ctx.index_table(np.arange(start, start + step * m, step, dtype=np.int64), [r], "int64",
                              suffix="positions")
        out_index.append(Indirect(idx.name))
        tables.append(access(idx.name, [r]))
    return scatter_into(ctx, x, tuple(out_index), sr, [access(src.name, sr)], tables, "none")


def _source(ctx: LowerCtx, src: T | float, ranks: list[str], dtype: str) -> Access:
    """The source values at each point: a tensor over ``ranks`` or an immediate scalar."""
    if isinstance(src, T):
        return access(src.name, ranks)
    return access(ctx.scalar(src, dtype).name, [])


def _dim_scatter(ctx: LowerCtx, x: T, dim: int, idx: T, src: T | float, reduce: str) -> T:
    """``out[.., idx[p], ..] (reduce)= src[p]`` at every point ``p`` of ``idx`` (dim ``dim``)."""
    xs, ir, ishape = ctx.shape(x), list(ctx.ranks(idx)), ctx.shape(idx)
    if len(ishape) != len(xs):
        raise NoLowering("index of another rank than self")
    dim %= len(xs)
    if any(ishape[d] > xs[d] for d in range(len(xs)) if d != dim):
        raise NoLowering("index larger than self outside the scatter dim")
    out_index = tuple(Indirect(idx.name) if d == dim else expr(r) for d, r in enumerate(ir))
    return scatter_into(ctx, x, out_index, ir, [_source(ctx, src, ir, ctx.dtype(x))], [access(idx.name, ir)],
                        reduce)


@rule("aten.scatter")
def scatter(ctx: LowerCtx, a: Args) -> T:
    if a.reduce not in _SCATTER_MODE:
        raise NoLowering(f"scatter reduce={a.reduce!r}")
    src = a.src if a.src is not None else a.value
    return _dim_scatter(ctx, a.self, a.dim, a.index, src, _SCATTER_MODE[a.reduce])


@rule("aten.scatter_add")
def scatter_add(ctx: LowerCtx, a: Args) -> T:
    return _dim_scatter(ctx, a.self, a.dim, a.index, a.src, "add")


@rule("aten.scatter_reduce")
def scatter_reduce(ctx: LowerCtx, a: Args) -> T:
    if a.reduce not in _SCATTER_REDUCE:
        raise NoLowering(f"scatter_reduce reduce={a.reduce!r}")
    if a.include_self is False:
        raise NoLowering("scatter_reduce include_self=False: the selected elements do not start from self")
    return _dim_scatter(ctx, a.self, a.dim, a.index, a.src, _SCATTER_REDUCE[a.reduce])


@rule("aten.index_add", "aten.index_copy")
def index_add(ctx: LowerCtx, a: Args) -> T:
    """``out[.., idx[i], ..] += alpha * src[.., i, ..]`` (index_copy: ``=``) along ``dim``."""
    x, idx, src = a.self, a.index, a.source
    if len(ctx.shape(idx)) != 1 or len(ctx.shape(src)) != len(ctx.shape(x)):
        raise NoLowering("index_add/index_copy with a 0-d index or source")
    sr = list(ctx.ranks(src))
    dim = a.dim % len(sr)
    out_index = tuple(Indirect(idx.name) if d == dim else expr(r) for d, r in enumerate(sr))
    data = [access(src.name, sr)]
    alpha = a.alpha if a.alpha is not None else 1
    if ctx.op == "aten.index_add" and alpha != 1:
        data.append(_source(ctx, alpha, [], ctx.dtype(x)))
    reduce = "add" if ctx.op == "aten.index_add" else "none"
    return scatter_into(ctx, x, out_index, sr, data, [access(idx.name, [sr[dim]])], reduce,
                        "mul" if len(data) > 1 else "identity")


@rule("aten.index_put")
def index_put(ctx: LowerCtx, a: Args) -> T:
    """``x[i0, :, i2] = values`` (``+=`` with accumulate) with broadcasting index tensors."""
    x, v = a.self, a.values
    if any(isinstance(i, T) and 0 in ctx.shape(i) for i in a.indices):  # selects nothing: writes nothing
        return x
    filled = _mask_fill(ctx, x, v, list(a.indices), bool(a.accumulate))
    if filled is not None:
        return filled
    x_idx, index_inputs, out_ranks = advanced_index(ctx, x, list(a.indices))
    sizes = [ctx.b.sizes[r] for r in out_ranks]
    vs = ctx.shape(v)
    off = len(sizes) - len(vs)
    if off < 0 or any(s not in (1, sizes[off + k]) for k, s in enumerate(vs)):
        raise NoLowering("index_put values do not broadcast to the indexed shape")
    data = [access(v.name, [out_ranks[off + k] if s == sizes[off + k] else 0 for k, s in enumerate(vs)])]
    return scatter_into(ctx, x, x_idx, out_ranks, data, index_inputs, "add" if a.accumulate else "none")



def one_value_mask(x_shape: tuple[int, ...] | list[int], mask_shape: tuple[int, ...] | list[int],
                   value_elements: int) -> bool:
    """Whether ``x[mask] = v`` (a boolean ``mask``) is the form lowered as a masked write: the mask over
    x's leading dims and one value, so no shape depends on what the mask holds."""
    return tuple(mask_shape) == tuple(x_shape[:len(mask_shape)]) and value_elements == 1


def _mask_fill(ctx: LowerCtx, x: T, v: T, indices: list, accumulate: bool) -> T | None:
    """``x[mask] = v`` (``+= v``) with one boolean mask over x's leading dims and one value: an
    elementwise select, ``where(mask, v, x)`` (``x + where(mask, v, 0)``), whatever the mask holds;
    None for any other form (the selected count is data-dependent when ``v`` has one value per element)."""
    if len(indices) != 1 or not isinstance(indices[0], T) or ctx.dtype(indices[0]) != "bool":
        return None
    mask, xs = indices[0], ctx.shape(x)
    ms = ctx.shape(mask)
    if not one_value_mask(xs, ms, int(np.prod(ctx.shape(v), dtype=np.int64))):
        return None
    if len(ms) < len(xs):  # the mask covers leading dims: broadcast it over the others
        mask = ctx.reshape(mask, list(ms) + [1] * (len(xs) - len(ms)), suffix="mask")
    if ctx.shape(v):
        v = ctx.reshape(v, [], suffix="value")
    dt = ctx.dtype(x)
    start = len(ctx.b.nodes)
    if accumulate:
        out = ctx.ew("add", x, ctx.ew("where", mask, v, 0.0, dtype=dt, suffix="masked"), dtype=dt)
    else:
        out = ctx.ew("where", mask, v, x, dtype=dt)
    _masked_assumption(ctx, [n.name for n in ctx.b.nodes[start:]])
    return out


def _masked_assumption(ctx: LowerCtx, nodes: list[str]) -> None:
    """Add ``nodes`` (one ``x[mask] = v``) to the graph's one ``masked_fill`` assumption, whose
    ``masked_writes`` list makes the byte counts those of a write of an unknown selection
    (:mod:`solar_io.metrics`: the masks and the value read, none of ``x``, none of it written)."""
    key = ("masked_fill",)
    if key not in ctx.data_cache:
        ctx.data_cache[key] = len(ctx.assumptions)
        ctx.assumptions.append(None)
    at = ctx.data_cache[key]
    before = dict(ctx.assumptions[at].values) if ctx.assumptions[at] is not None else {MASKED_WRITES: ()}
    ctx.assumptions[at] = Assumption(
        "masked_fill", "aten.index_put with a boolean mask",
        "x[mask] = v lowered as where(mask, v, x); eager PyTorch's index_put_ overwrites in x's memory only "
        "the elements the mask selects, a count the capture does not know (none to all), so each such node "
        "is charged the least any count costs: its mask and value read, no element of x read or written, "
        "no compute", ((MASKED_WRITES, (*before[MASKED_WRITES], *nodes)),))
