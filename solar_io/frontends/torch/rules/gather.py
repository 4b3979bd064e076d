"""Gathers: embedding, index, index_select, gather, diagonal; constant creation (full, arange).

A gather is a copy whose index reads the integer index tensor (``table[@ids, D]``);
constants that are one value are immediates, ``arange`` is stored data.
"""

from __future__ import annotations

from ....affine import Access, Indirect
from ...common.builder import access, expr, family
from ..ctx import Args, LowerCtx, T, file_dtype
from ..registry import NoLowering, rule


@rule("aten.embedding")
def embedding(ctx: LowerCtx, a: Args) -> T:
    w, ids = a.weight, a.indices
    ir = ctx.ranks(ids)
    ctx.b.bind(w.name, ["V", "D"])
    wr = ctx.ranks(w)
    (d,) = ctx.b.distinct([wr[1]], ir)
    out_ranks = list(ir) + [d]
    out = ctx.tensor(out_ranks, ctx.dtype(w))
    ctx.b.copy(out.name, ctx.op, out_ranks, [Access(w.name, (Indirect(ids.name), expr(d))), access(ids.name, ir)],
               access(out.name, out_ranks), location=ctx.location)
    return out


def gather_dim(ctx: LowerCtx, x: T, dim: int, idx: T) -> T:
    """``x`` with dim ``dim`` indexed by integer tensor ``idx`` (index_select / index)."""
    xs, xr = ctx.shape(x), ctx.ranks(x)
    dim %= len(xs)
    ir = ctx.ranks(idx)
    before, after = list(xr[:dim]), list(xr[dim + 1:])
    names = ctx.b.distinct(before + list(ir) + after)
    nb, ni = len(before), len(ir)
    out_ranks = list(names)
    x_idx = [expr(r) for r in names[:nb]] + [Indirect(idx.name)] + [expr(r) for r in names[nb + ni:]]
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out.name, ctx.op, out_ranks, [Access(x.name, tuple(x_idx)), access(idx.name, names[nb:nb + ni])],
               access(out.name, out_ranks), location=ctx.location)
    return out


@rule("aten.index_select")
def index_select(ctx: LowerCtx, a: Args) -> T:
    return gather_dim(ctx, a.self, a.dim, a.index)


def advanced_index(ctx: LowerCtx, x: T, indices: list) -> tuple[tuple, list[Access], list[str]]:
    """``x[i0, :, i2]``-style advanced indexing: the index of ``x`` (``@i`` per indexed dim, a rank
    elsewhere), the accesses of the index tensors, and the ranks of the result (also the space).

    Index tensors broadcast together; their dims replace the indexed dims in place when those are
    adjacent, and come first otherwise (numpy's rule).
    """
    import torch

    idx = list(indices) + [None] * (len(ctx.shape(x)) - len(indices))
    used = [i for i, v in enumerate(idx) if v is not None]
    if any(ctx.dtype(idx[i]) == "bool" for i in used):
        raise NoLowering("boolean mask indexing (data-dependent shape)")
    xr = ctx.ranks(x)
    shapes = [ctx.shape(idx[i]) for i in used]
    bshape = tuple(torch.broadcast_shapes(*shapes))
    nb = len(bshape)
    picked = []
    for j in range(nb):
        r = None
        for i, s in zip(used, shapes, strict=True):
            k = j - (nb - len(s))
            if k >= 0 and s[k] == bshape[j]:
                r = ctx.ranks(idx[i])[k]
                break
        picked.append(r or ctx.b.rank("I", bshape[j]))
    rest = [r for i, r in enumerate(xr) if i not in used]
    names = ctx.b.distinct(picked + rest)
    bnames, rnames = list(names[:nb]), list(names[nb:])
    adjacent = used == list(range(used[0], used[-1] + 1))
    lead = used[0] if adjacent else 0
    out_ranks = rnames[:lead] + bnames + rnames[lead:]
    x_idx, k = [], 0
    for i in range(len(xr)):
        if i in used:
            x_idx.append(Indirect(idx[i].name))
        else:
            x_idx.append(expr(rnames[k]))
            k += 1
    index_inputs = []
    for i, s in zip(used, shapes, strict=True):
        off = nb - len(s)
        index_inputs.append(access(idx[i].name, [bnames[off + d] if s[d] == bshape[off + d] else 0
                                                 for d in range(len(s))]))
    return tuple(x_idx), index_inputs, out_ranks


@rule("aten.index")
def index(ctx: LowerCtx, a: Args) -> T:
    """``x[i0, :, i2]``-style advanced indexing: one copy with an ``@index`` per indexed dim."""
    x = a.self
    used = [i for i, v in enumerate(a.indices) if v is not None]
    if len(used) == 1 and ctx.dtype(a.indices[used[0]]) != "bool":
        return gather_dim(ctx, x, used[0], a.indices[used[0]])
    x_idx, index_inputs, out_ranks = advanced_index(ctx, x, list(a.indices))
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out.name, ctx.op, out_ranks, [Access(x.name, x_idx), *index_inputs], access(out.name, out_ranks),
               location=ctx.location)
    return out


@rule("aten.diagonal")
def diagonal(ctx: LowerCtx, a: Args) -> T:
    x, off = a.self, a.offset or 0
    xs, xr = ctx.shape(x), ctx.ranks(x)
    d1, d2 = a.dim1 % len(xs), a.dim2 % len(xs)
    n = max(0, min(xs[d1] - max(-off, 0), xs[d2] - max(off, 0)))
    if n == 0:
        raise NoLowering("empty diagonal")
    keep = [r for i, r in enumerate(xr) if i not in (d1, d2)]
    k = ctx.b.rank(family(xr[d1]), n, keep)
    idx: list[str] = list(xr)
    idx[d1] = f"{k} + {max(-off, 0)}"
    idx[d2] = f"{k} + {max(off, 0)}"
    for i in range(len(xr)):
        if i not in (d1, d2):
            idx[i] = xr[i]
    out_ranks = keep + [k]
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out.name, ctx.op, out_ranks, [access(x.name, idx)], access(out.name, out_ranks), view=True,
               location=ctx.location)
    ctx.noncontig.add(out.name)
    return out


@rule("aten.gather")
def gather(ctx: LowerCtx, a: Args) -> T:
    x, dim, idx = a.self, a.dim, a.index
    xs = ctx.shape(x)
    dim %= len(xs)
    ir = ctx.ranks(idx)
    x_idx = [expr(r) if i != dim else Indirect(idx.name) for i, r in enumerate(ir)]
    out = ctx.tensor(ir, ctx.dtype(x))
    ctx.b.copy(out.name, ctx.op, ir, [Access(x.name, tuple(x_idx)), access(idx.name, ir)],
               access(out.name, ir), location=ctx.location)
    return out


# --------------------------------------------------------------------------- creation


@rule("aten.zeros", "aten.ones", "aten.full", "aten.zeros_like", "aten.ones_like", "aten.full_like",
      "aten.new_zeros", "aten.new_ones", "aten.new_full", "aten.empty", "aten.empty_like", "aten.new_empty",
      "aten.scalar_tensor", "aten.fill", "aten.empty_strided")
def full(ctx: LowerCtx, a: Args) -> T:
    op = ctx.op
    if "zeros" in op or "empty" in op:
        v = 0.0
    elif "ones" in op:
        v = 1.0
    elif op == "aten.scalar_tensor":
        v = float(a.s)
    else:
        v = a.fill_value if a.fill_value is not None else a.value
        if isinstance(v, T):
            raise NoLowering("fill with a tensor value")
        v = float(v)
    shape = ctx.out_shape()
    like = a.self if isinstance(a.self, T) and ctx.shape(a.self) == shape else None
    ranks = ctx.ranks(like) if like is not None else ctx.b.new_ranks(ctx.b.guess([None] * len(shape), shape), shape)
    return T(ctx.b.tensor(ctx.name, ranks, ctx.out_dtype(), "constant", v))


@rule("aten.arange")
def arange(ctx: LowerCtx, a: Args) -> T:
    import numpy as np

    start = a.start if a.start is not None else 0
    end = a.end
    step = a.step if a.step is not None else 1
    if any(isinstance(v, T) for v in (start, end, step)):
        raise NoLowering("arange with tensor bounds")
    val = ctx.node.meta["val"]
    arr = np.arange(start, end, step).astype(str(val.dtype).replace("torch.", ""))
    if arr.shape[0] != int(val.shape[0]):
        raise NoLowering("arange length mismatch")
    r = ctx.b.rank("S", int(val.shape[0]))
    return ctx.index_table(arr, [r], file_dtype(val.dtype), suffix="arange")


@rule("aten.one_hot")
def one_hot(ctx: LowerCtx, a: Args) -> T:
    """``one_hot(x, C)``: ``x[..., None] == arange(C)`` as int64, one comparison per output element against
    a generated table of the C classes (no bytes of its own)."""
    import numpy as np

    classes = int(ctx.node.meta["val"].shape[-1])
    x = a.self
    column = ctx.reshape(x, (*ctx.shape(x), 1), suffix="column")
    table = ctx.index_table(np.arange(classes, dtype=np.int64), [ctx.b.rank("C", classes)], "int64", suffix="classes")
    return ctx.ew("eq", column, table, dtype="int64")
