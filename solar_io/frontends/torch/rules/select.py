"""Selections and sampling: topk, sort, argsort, nonzero and mask indexing (specialised), bincount,
histc, multinomial, bernoulli, each with a lower-bound cost instead of an opaque node.

A selection's *result* (which elements: the top-k indices, a sort permutation, the rows of a
``nonzero``, the draws of a sampler) depends on the data, and has no einsum form. It becomes a
``constant`` int64 tensor, the *choice*, whose values are specialised: those the source program
computes on the example inputs (validation takes them from the eager run, the router choices of
the routing model included) or, for ``solar_io::specialised_index`` (``nonzero``, boolean-mask
indexing, ``repeat_interleave``; see ``specialise.py``), those the values pass computed. The choice is
``generated`` (format 1.2): the kernel computes it where it is used, so it moves no bytes of its own
(its computation is charged to the nodes below, its values are supplied to the executor). The
work around the choice is einsums, so every count is derived from the file:

- **topk** of ``k`` over ``n`` (per row): ``c = max_n x`` (``min`` for ``largest=False``), ``n - 1``
  comparisons, the fewest any algorithm can do (the result depends on all ``n`` keys, and a binary
  operation combines two values: ``n - 1`` of them to reach one result from ``n``); the indices
  ``where(c, choice, choice)`` (one operation per index written, which ties them to ``c``; its value
  is the choice whatever ``c`` is); the values ``x[.., @indices, ..]`` (a gather: bytes, no
  operations). Bytes: ``x`` read once, ``k`` values and ``k`` indices written per row, as the
  source op moves them. Per row ``n - 1 + k`` vector operations: within ``k`` of
  the floor, and below one operation per byte moved, so on every chip these nodes are memory-bound
  and their count never sets a bound.
- **sort / argsort** along ``n``: the same with ``k = n`` (the permutation is the choice).
- **nonzero, x[mask], masked_select, torch.where(cond), repeat_interleave(tensor)**: ``c`` reduces
  the source tensor (``n - 1`` operations), the index is ``where(c, choice, choice)``, then the
  existing gather rules read the selected elements only.
- **bincount** (length specialised): a scatter-add of ones (or the weights) into ``length`` bins,
  one combine per element, the floor.
- **histc**: the bin of each element (``(x - min) * bins / (max - min)``, floored, the last edge in
  the last bin, out-of-range elements to a spare bin) and a scatter-add of ones: 9 vector
  operations per element, the arithmetic of a straightforward kernel (not a proven floor; the
  count stays below 3 operations per byte moved, under every chip's vector operations per byte).
- **multinomial** of ``s`` draws from ``n`` weights: ``c = sum_n w`` (``n - 1`` additions; the total
  that normalises the weights: every sampler needs it or the prefix sums it ends with) and
  ``where(c, choice, choice)``, one operation per draw (the floor: each draw is at least one
  random number).
- **bernoulli**: ``u < p`` per element, ``u`` a generated uniform (a counter-based generator computes
  it where it is used: no bytes); one comparison per element, the floor of one random number each.
  Validation reads ``u`` as ``1 - result`` of the eager run, which gives the same result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....affine import Access, Indirect
from ...common.builder import access, expr
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule
from .scatter import scatter_into


def choice(ctx: LowerCtx, ranks: list[str] | tuple[str, ...], op: str, result: int,
           data: np.ndarray | None = None, suffix: str = "choice") -> T:
    """A specialised int64 choice tensor over ``ranks``: ``data`` now, or the ``result``-th result of
    the matching eager call of ``op`` at validation (``ctx.selections``)."""
    t = T(ctx.b.tensor(f"{ctx.name}.{suffix}", ranks, "int64", "constant", generated=True))
    if data is not None:
        ctx.const_data[t.name] = np.ascontiguousarray(data.astype(np.int64))
    else:
        ctx.selections.append((t.name, op, result))
    return t


def tied(ctx: LowerCtx, c: T, table: T, suffix: str = "indices") -> T:
    """``where(c, table, table)``: the table's values, one operation per element, read after ``c``."""
    return ctx.ew("where", c, table, table, dtype="int64", suffix=suffix)


def _take(ctx: LowerCtx, x: T, dim: int, idx: T, suffix: str | None = None) -> T:
    """``torch.gather(x, dim, idx)``: the values at ``idx`` along ``dim``."""
    ir = ctx.ranks(idx)
    x_idx = [expr(r) if i != dim else Indirect(idx.name) for i, r in enumerate(ir)]
    out = ctx.tensor(ir, ctx.dtype(x), suffix)
    ctx.b.copy(out.name, ctx.op, ir, [Access(x.name, tuple(x_idx)), access(idx.name, ir)],
               access(out.name, ir), location=ctx.location)
    return out


def _select(ctx: LowerCtx, x: T, dim: int, k: int, extreme: str, op: str, values: bool = True) -> tuple[T, T]:
    """(values, indices) of a selection of ``k`` along ``dim`` (see the module docstring)."""
    xs, xr = ctx.shape(x), list(ctx.ranks(x))
    if not xs:
        raise NoLowering("selection of a 0-d tensor")
    dim %= len(xs)
    c = ctx.reduce(x, [dim], True, extreme, suffix="extreme")
    kr = xr[dim] if k == xs[dim] else ctx.b.rank("K", k, xr)
    ranks = xr[:dim] + [kr] + xr[dim + 1:]
    table = choice(ctx, ranks, op, 1)
    idx = tied(ctx, c, table)
    return (_take(ctx, x, dim, idx, "values") if values else x), idx


@rule("aten.topk")
def topk(ctx: LowerCtx, a: Args) -> tuple[T, T]:
    x = a.self
    return _select(ctx, x, a.dim if a.dim is not None else -1, int(a.k), "max" if a.largest else "min", "aten.topk")


@rule("aten.sort")
def sort(ctx: LowerCtx, a: Args) -> tuple[T, T]:
    x = a.self
    if not ctx.shape(x):
        raise NoLowering("sort of a 0-d tensor")
    dim = a.dim if a.dim is not None else -1
    return _select(ctx, x, dim, ctx.shape(x)[dim], "max" if a.descending else "min", "aten.sort")


@rule("aten.argsort")
def argsort(ctx: LowerCtx, a: Args) -> T:
    x = a.self
    if not ctx.shape(x):
        raise NoLowering("argsort of a 0-d tensor")
    dim = a.dim if a.dim is not None else -1
    return _select(ctx, x, dim, ctx.shape(x)[dim], "max" if a.descending else "min", "aten.argsort", False)[1]


@rule("solar_io.specialised_index")
def specialised_index(ctx: LowerCtx, a: Args) -> T:
    """The specialised rows of a ``nonzero`` (or indices of a ``repeat_interleave``) of ``src``."""
    from ..tables import TABLES

    src = a.src
    data = TABLES[int(a.key)]
    if tuple(int(s) for s in a.shape) != data.shape:
        raise NoLowering("specialised index of another shape than its values")
    if 0 in data.shape:
        raise NoLowering("a specialised index that selects nothing (a rank of size 0)")
    c = ctx.reduce(src, None, False, "max", suffix="extreme") if ctx.shape(src) else src
    ranks = ctx.b.new_ranks(["N", "A"][:len(data.shape)] if len(data.shape) <= 2 else ["A"] * len(data.shape),
                            data.shape)
    table = choice(ctx, ranks, "solar_io.specialised_index", 0, data)
    return tied(ctx, c, table)


def _bins(ctx: LowerCtx, x: T, idx: T, length: int, weights: T | None, dtype: str) -> T:
    """``out[idx[p]] += weights[p]`` (or 1) over the points of ``idx``, ``out`` starting at zeros."""
    bins = ctx.b.rank("K", length)
    zeros = T(ctx.b.tensor(f"{ctx.name}.zeros", [bins], dtype, "constant", 0.0))
    ir = list(ctx.ranks(idx))
    src = access(weights.name, ir) if weights is not None else access(ctx.scalar(1, dtype).name, [])
    return scatter_into(ctx, zeros, (Indirect(idx.name),), ir, [src], [access(idx.name, ir)], "add")


@rule("solar_io.bincount")
def bincount(ctx: LowerCtx, a: Args) -> T:
    x, w = a.self, a.weights
    if len(ctx.shape(x)) != 1:
        raise NoLowering("bincount of a tensor that is not 1-d")
    return _bins(ctx, x, x, int(a.length), w, ctx.out_dtype())


@rule("aten.histc")
def histc(ctx: LowerCtx, a: Args) -> T:
    x = a.self
    bins = int(a.bins)
    lo, hi = float(a.min), float(a.max)
    if lo == hi:
        raise NoLowering("histc with min == max (the range of the data)")
    if not ctx.shape(x):
        raise NoLowering("histc of a 0-d tensor")
    flat = ctx.reshape(x, [int(np.prod(ctx.shape(x)))], suffix="flat") if len(ctx.shape(x)) != 1 else x
    if ctx.dtype(flat).startswith(("int", "uint", "bool")):  # integer ids (a GPU kernel counts them as is)
        flat = ctx.cast(flat, "fp32", suffix="float")
    dt = ctx.dtype(flat)
    pos = ctx.ew("mul", ctx.ew("sub", flat, lo, suffix="shift"), bins / (hi - lo), suffix="scaled")
    b = ctx.ew("min", ctx.ew("floor", pos, suffix="floor"), float(bins - 1), suffix="bin")
    inside = ctx.ew("and", ctx.ew("ge", flat, lo, suffix="ge"), ctx.ew("le", flat, hi, suffix="le"), suffix="inside")
    where = ctx.ew("where", inside, b, float(bins), dtype=dt, suffix="slot")
    idx = ctx.cast(where, "int64", suffix="index")
    counts = _bins(ctx, flat, idx, bins + 1, None, ctx.out_dtype())
    from .shape import slice_dim

    return slice_dim(ctx, counts, 0, 0, bins, 1, None)


@rule("aten.multinomial")
def multinomial(ctx: LowerCtx, a: Args) -> T:
    w = a.self
    ws = ctx.shape(w)
    if len(ws) not in (1, 2):
        raise NoLowering("multinomial of a tensor that is not 1-d or 2-d")
    s = int(a.num_samples)
    c = ctx.reduce(w, [len(ws) - 1], True, "add", suffix="total")
    wr = list(ctx.ranks(w))
    sr = ctx.b.rank("K", s, wr)
    table = choice(ctx, wr[:-1] + [sr], "aten.multinomial", 0)
    return tied(ctx, c, table, suffix=None)


def _bernoulli(ctx: LowerCtx, like: T, p: Any) -> T:
    ranks = list(ctx.ranks(like))
    u = T(ctx.b.tensor(f"{ctx.name}.uniform", ranks, "fp32", "constant", generated=True))
    ctx.selections.append((u.name, "aten.bernoulli", -1))
    return ctx.ew("lt", u, p, dtype=ctx.out_dtype())


@rule("aten.bernoulli")
def bernoulli(ctx: LowerCtx, a: Args) -> T:
    x = a.self
    if a.p is not None and not isinstance(a.p, T):
        return _bernoulli(ctx, x, float(a.p))
    if a.p is not None:
        raise NoLowering("bernoulli with a tensor p")
    return _bernoulli(ctx, x, x)


@rule("transformers.grouped_mm_fallback", "aten._grouped_mm")
def grouped_mm(ctx: LowerCtx, a: Args) -> T:
    """Hugging Face's grouped matmul of MoE experts (``transformers.integrations.moe``): rows of ``input``
    sorted by expert, ``offs`` the cumulative rows per expert; row ``s`` multiplies its expert's
    ``weight[e]``. One contraction ``out[s, o] = sum_d input[s, d] * weight[@eid[s], d, o]`` (``S*Din*Dout``
    MACs, the same whatever the routing), ``eid`` a choice (the expert of each row, from the eager run's
    ``offs``) tied to ``offs`` (``E - 1`` operations). The weight is read through the gather: at most
    ``min(E, S)`` experts, every pair taken to a distinct expert (the balanced count; the shapes do not
    depend on the routing, so ``--routing`` does not change this graph), recorded as a routing assumption."""
    from ....graph import Assumption

    if ctx.op == "aten._grouped_mm":
        if a.bias is not None or a.out_dtype is not None or a.offs is None:
            raise NoLowering("_grouped_mm with a bias, an out_dtype or no offsets")
        x, w, offs = a.self, a.mat2, a.offs
    else:
        x, w, offs = a.input, a.weight, a.offs
    xs, ws = ctx.shape(x), ctx.shape(w)
    if len(xs) != 2 or len(ws) != 3 or len(ctx.shape(offs)) != 1:
        raise NoLowering("grouped_mm of other ranks than (S, D) x (E, D, O)")
    xr = list(ctx.ranks(x))
    ctx.b.bind(w.name, ["E", xr[1], None])
    wr = list(ctx.ranks(w))
    c = ctx.reduce(offs, None, False, "max", suffix="extreme")
    table = choice(ctx, [xr[0]], "transformers.grouped_mm_fallback", -2)
    eid = tied(ctx, c, table, suffix="expert")
    (o,) = ctx.b.distinct([wr[2]], xr)
    out = ctx.tensor([xr[0], o], ctx.dtype(x))
    ctx.b.einsum(out.name, ctx.op, [xr[0], o, xr[1]],
                 [access(x.name, [xr[0], xr[1]]), Access(w.name, (Indirect(eid.name), expr(xr[1]), expr(o))),
                  access(eid.name, [xr[0]])], access(out.name, [xr[0], o]), "mul", "add", location=ctx.location)
    ctx.assumptions.append(Assumption(
        "routing", f"{ctx.name} ({ctx.op})",
        f"grouped expert matmul with shapes independent of the routing: {xs[0]} token-expert rows over "
        f"{ws[0]} experts; weight bytes count min(E, rows) = {min(ws[0], xs[0])} experts (each row taken to a "
        "distinct expert, the balanced count)",
        (("experts", ws[0]), ("rows", xs[0]), ("distinct_experts", min(ws[0], xs[0])))))
    return out

