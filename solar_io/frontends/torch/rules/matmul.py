"""Contractions: linear, mm, bmm, addmm, baddbmm, matmul, einsum.

Each is one einsum with map ``mul`` and reduce ``add`` (MACs = its iteration points, the
count ``FlopCounterMode`` gives), plus elementwise nodes for bias, ``alpha`` and ``beta``.
"""

from __future__ import annotations

import torch

from ...common.builder import access, family
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule


def _bind_operand(ctx: LowerCtx, x: T, k_pos: int, k_rank: str) -> None:
    """Bind an unbound weight so that its contracted dim shares ``k_rank``."""
    t = ctx.b.tensors[x.name]
    if t.ranks is None:
        hints: list[str | None] = [None] * len(t.shape)
        hints[k_pos % len(t.shape)] = k_rank
        for i in range(len(t.shape)):
            if hints[i] is None:
                hints[i] = family(k_rank) + "*"
        ctx.b.bind(x.name, hints)


def matmul(ctx: LowerCtx, a: T, b: T, suffix: str | None = None) -> T:
    """``torch.matmul`` semantics (1-d operands, broadcast batch dims) as one contraction."""
    ash, bsh = ctx.shape(a), ctx.shape(b)
    if not ash or not bsh:
        raise NoLowering("matmul of a 0-d tensor")
    if ctx.b.tensors[a.name].ranks is None and ctx.b.tensors[b.name].ranks is not None:
        br = ctx.ranks(b)
        _bind_operand(ctx, a, -1, br[0] if len(bsh) == 1 else br[-2])
    ar = ctx.ranks(a)
    _bind_operand(ctx, b, 0 if len(bsh) == 1 else -2, ar[-1])
    br = ctx.ranks(b)
    a1, b1 = len(ash) == 1, len(bsh) == 1
    ab, bb = (() if a1 else ash[:-2]), (() if b1 else bsh[:-2])
    batch = tuple(torch.broadcast_shapes(ab, bb))
    nb = len(batch)
    picked: list[str] = []
    for j in range(nb):
        ka, kb = j - (nb - len(ab)), j - (nb - len(bb))
        if ka >= 0 and ab[ka] == batch[j]:
            picked.append(ar[ka])
        elif kb >= 0 and bb[kb] == batch[j]:
            picked.append(br[kb])
        else:
            picked.append(ctx.b.rank("B", batch[j]))
    m = [] if a1 else [ar[-2]]
    n = [] if b1 else [br[-1]]
    names = ctx.b.distinct(picked + m + n + [ar[-1]])
    bat, M, N, K = names[:nb], names[nb:nb + len(m)], names[nb + len(m):nb + len(m) + len(n)], names[-1]

    def idx(sh: tuple[int, ...], own: tuple[int, ...], tail: list[str]) -> list[str | int]:
        off = nb - len(own)
        return [bat[off + i] if own[i] == batch[off + i] else 0 for i in range(len(own))] + tail

    ia = idx(ash, ab, list(M) + [K])
    ib = idx(bsh, bb, [K] + list(N))
    out_ranks = list(bat) + list(M) + list(N)
    out = ctx.tensor(out_ranks, ctx.out_dtype() if suffix is None else ctx.dtype(a), suffix)
    ctx.b.einsum(out.name, ctx.op, out_ranks + [K], [access(a.name, ia), access(b.name, ib)],
                 access(out.name, out_ranks), "mul", "add", location=ctx.location)
    return out


def _scaled(ctx: LowerCtx, x: T, factor: float, suffix: str) -> T:
    return x if factor == 1 else ctx.ew("mul", x, factor, suffix=suffix)


@rule("aten.mm", "aten.bmm", "aten.matmul", "aten.mv", "aten.dot")
def mm(ctx: LowerCtx, a: Args) -> T:
    other = next(v for v in (a.mat2, a.other, a.vec, a.tensor) if v is not None)  # mv's vec, dot's tensor
    return matmul(ctx, a.self, other)


@rule("aten.linear")
def linear(ctx: LowerCtx, a: Args) -> T:
    x, w = a.input, a.weight
    xr = ctx.ranks(x)
    ctx.b.bind(w.name, [family(xr[-1]) + "*", xr[-1]])
    if a.bias is None:
        return matmul_t(ctx, x, w, None)
    y = matmul_t(ctx, x, w, "mm")
    ctx.b.bind(a.bias.name, [ctx.ranks(y)[-1]])
    return ctx.ew("add", y, a.bias)


def matmul_t(ctx: LowerCtx, x: T, w: T, suffix: str | None) -> T:
    """``x @ w.T`` without materialising the transpose: w is indexed [N, K]."""
    xs, xr, wr = ctx.shape(x), ctx.ranks(x), ctx.ranks(w)
    lead = list(xr[:-1])
    names = ctx.b.distinct(lead + [wr[0], xr[-1]])
    N, K = names[-2], names[-1]
    lead = list(names[:-2])
    out_ranks = lead + [N]
    out = ctx.tensor(out_ranks, ctx.dtype(x), suffix)
    ctx.b.einsum(out.name, ctx.op, out_ranks + [K], [access(x.name, lead + [K]), access(w.name, [N, K])],
                 access(out.name, out_ranks), "mul", "add", location=ctx.location)
    del xs
    return out


@rule("aten.addmm", "aten.baddbmm", "aten.addmv")
def addmm(ctx: LowerCtx, a: Args) -> T:
    first = next(v for v in (a.mat1, a.batch1, a.mat) if v is not None)
    second = next(v for v in (a.mat2, a.batch2, a.vec) if v is not None)
    prod_ = matmul(ctx, first, second, "mm")
    prod_ = _scaled(ctx, prod_, float(a.alpha), "alpha")
    bias = a.self
    if ctx.b.tensors[bias.name].ranks is None:
        pr = ctx.ranks(prod_)
        ctx.b.bind(bias.name, list(pr[len(pr) - len(ctx.shape(bias)):]))
    if float(a.beta) == 0:
        return ctx.copy(prod_)
    bias = _scaled(ctx, bias, float(a.beta), "beta")
    return ctx.ew("add", prod_, bias, dtype=ctx.out_dtype())


@rule("aten.einsum")
def einsum(ctx: LowerCtx, a: Args) -> T:
    eq = a.equation.replace(" ", "")
    ops = list(a.tensors)
    if "->" not in eq:
        raise NoLowering("implicit-output einsum")
    lhs, out = eq.split("->")
    terms = lhs.split(",")
    if "." in eq or len(terms) != len(ops) or not 1 <= len(ops) <= 2:
        raise NoLowering("einsum with ellipsis or more than two operands")
    letter: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for t, x in zip(terms, ops, strict=True):
        xr = ctx.ranks(x)
        for ch, r, s in zip(t, xr, ctx.shape(x), strict=True):
            if len(set(t)) != len(t):
                raise NoLowering("einsum with a repeated index in one operand")
            if ch not in letter:
                letter[ch] = r
                sizes[ch] = s
    chars = list(letter)
    names = dict(zip(chars, ctx.b.distinct([letter[c] for c in chars]), strict=True))
    out_ranks = [names[c] for c in out]
    reduced = [c for c in chars if c not in out]
    map_ = "mul" if len(ops) == 2 else "identity"
    red = "add" if reduced else "none"
    if len(ops) == 2 and not reduced:
        red = "none"
    y = ctx.tensor(out_ranks, ctx.out_dtype())
    ctx.b.einsum(y.name, ctx.op, out_ranks + [names[c] for c in reduced],
                 [access(x.name, [names[c] for c in t]) for t, x in zip(terms, ops, strict=True)],
                 access(y.name, out_ranks), map_, red, attrs={"equation": a.equation}, location=ctx.location)
    return y
