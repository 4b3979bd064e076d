"""Losses: nll (cross-entropy after log_softmax), mse, l1, smooth-l1, huber, kl-div, bce.

Each is its elementwise formula followed by the reduction (``none`` / ``mean`` / ``sum``:
0 / 1 / 2 in ATen). ``nll_loss`` gathers the target's log-probability through an indirect
index, with ``ignore_index`` targets masked out of the sum and the mean's count.
"""

from __future__ import annotations

from ....affine import Access, Indirect
from ...common.builder import access, expr
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule
from .reduce import mean


def _reduce(ctx: LowerCtx, x: T, reduction: int | str) -> T:
    r = {"none": 0, "mean": 1, "sum": 2}.get(reduction, reduction) if isinstance(reduction, str) else reduction
    dt = ctx.out_dtype() if not isinstance(ctx.node.meta["val"], tuple) else ctx.out_dtype(0)
    if r == 0:
        return ctx.cast(x, dt, suffix="cast")
    if r == 2:
        return ctx.reduce(x, None, False, "add", dtype=dt)
    return mean(ctx, x, list(range(len(ctx.shape(x)))), False, dtype=dt)


@rule("aten.mse_loss")
def mse(ctx: LowerCtx, a: Args) -> T:
    d = ctx.ew("sub", a.self, a.target, suffix="diff")
    return _reduce(ctx, ctx.ew("square", d, suffix="sq"), a.reduction)


@rule("aten.l1_loss")
def l1(ctx: LowerCtx, a: Args) -> T:
    d = ctx.ew("sub", a.self, a.target, suffix="diff")
    return _reduce(ctx, ctx.ew("abs", d, suffix="abs"), a.reduction)


@rule("aten.smooth_l1_loss", "aten.huber_loss")
def smooth_l1(ctx: LowerCtx, a: Args) -> T:
    huber = ctx.op == "aten.huber_loss"
    beta = float(a.delta if huber else a.beta)
    d = ctx.ew("abs", ctx.ew("sub", a.self, a.target, suffix="diff"), suffix="absdiff")
    sq = ctx.ew("mul", ctx.ew("square", d, suffix="sq"), 0.5 if huber else 0.5 / beta if beta else 0.0,
                suffix="quad")
    lin = ctx.ew("sub", d, 0.5 * beta, suffix="lin")
    if huber:
        lin = ctx.ew("mul", lin, beta, suffix="lin_scaled")
    small = ctx.ew("lt", d, beta, suffix="small")
    return _reduce(ctx, ctx.ew("where", small, sq, lin, suffix="elem"), a.reduction)


@rule("aten.kl_div")
def kl_div(ctx: LowerCtx, a: Args) -> T:
    x, t = a.self, a.target
    if a.log_target:
        e = ctx.ew("exp", t, suffix="p")
        elem = ctx.ew("mul", e, ctx.ew("sub", t, x, suffix="d"), suffix="elem")
    else:
        lg = ctx.ew("log", t, suffix="logt")
        tl = ctx.ew("mul", t, lg, suffix="tlogt")
        tl = ctx.ew("where", ctx.ew("eq", t, 0.0, suffix="zero"), 0.0, tl, suffix="xlogy")
        elem = ctx.ew("sub", tl, ctx.ew("mul", t, x, suffix="tx"), suffix="elem")
    return _reduce(ctx, elem, a.reduction)


@rule("aten.binary_cross_entropy")
def bce(ctx: LowerCtx, a: Args) -> T:
    x, y = a.self, a.target
    lx = ctx.ew("max", ctx.ew("log", x, suffix="logx"), -100.0, suffix="logx_c")
    l1x = ctx.ew("max", ctx.ew("log", ctx.ew("sub", 1.0, x, suffix="1mx"), suffix="log1mx"), -100.0,
                 suffix="log1mx_c")
    t1 = ctx.ew("mul", y, lx, suffix="t1")
    t2 = ctx.ew("mul", ctx.ew("sub", 1.0, y, suffix="1my"), l1x, suffix="t2")
    elem = ctx.ew("neg", ctx.ew("add", t1, t2, suffix="sum"), suffix="elem")
    if a.weight is not None:
        elem = ctx.ew("mul", elem, a.weight, suffix="weighted")
    return _reduce(ctx, elem, a.reduction)


@rule("aten.binary_cross_entropy_with_logits")
def bce_logits(ctx: LowerCtx, a: Args) -> T:
    x, y = a.self, a.target
    # (1 - y) * x + log(1 + exp(-|x|)) + max(-x, 0), weighted by pos_weight on the log term
    neg_abs = ctx.ew("neg", ctx.ew("abs", x, suffix="abs"), suffix="negabs")
    sp = ctx.ew("log", ctx.ew("add", ctx.ew("exp", neg_abs, suffix="e"), 1.0, suffix="1pe"), suffix="log1pe")
    relu_neg = ctx.ew("relu", ctx.ew("neg", x, suffix="negx"), suffix="reluneg")
    lt = ctx.ew("add", sp, relu_neg, suffix="logterm")
    if a.pos_weight is not None:
        lw = ctx.ew("add", ctx.ew("mul", ctx.ew("sub", a.pos_weight, 1.0, suffix="pw1"), y, suffix="pwy"), 1.0,
                    suffix="lw")
        lt = ctx.ew("mul", lt, lw, suffix="logterm_w")
    elem = ctx.ew("add", ctx.ew("mul", ctx.ew("sub", 1.0, y, suffix="1my"), x, suffix="lin"), lt, suffix="elem")
    if a.weight is not None:
        elem = ctx.ew("mul", elem, a.weight, suffix="weighted")
    return _reduce(ctx, elem, a.reduction)


@rule("aten.nll_loss", "aten.nll_loss_forward", "aten.nll_loss2d", "aten.nll_loss2d_forward", "aten.nll_loss_nd")
def nll(ctx: LowerCtx, a: Args) -> T | tuple[T, T]:
    x, tgt = a.self, a.target
    xs = ctx.shape(x)
    if len(xs) < 2:
        raise NoLowering("nll_loss of an unbatched input")
    ignore = int(a.ignore_index if a.ignore_index is not None else -100)
    valid = ctx.ew("ne", tgt, ignore, suffix="valid")
    safe = ctx.ew("where", valid, tgt, 0, dtype=ctx.dtype(tgt), suffix="safe_target")
    tr = ctx.ranks(safe)
    xr = ctx.ranks(x)
    # picked[n, d...] = x[n, target[n, d...], d...]
    idx = [expr(tr[0]), Indirect(safe.name)] + [expr(r) for r in tr[1:]]
    picked = ctx.tensor(tr, ctx.dtype(x), "picked")
    ctx.b.copy(picked.name, ctx.op, tr, [Access(x.name, tuple(idx)), access(safe.name, tr)],
               access(picked.name, tr), location=ctx.location)
    del xr
    w = None
    if a.weight is not None:
        ctx.b.bind(a.weight.name, ["C"])
        w = ctx.tensor(tr, ctx.dtype(x), "w")
        ctx.b.copy(w.name, ctx.op, tr, [Access(a.weight.name, (Indirect(safe.name),)), access(safe.name, tr)],
                   access(w.name, tr), location=ctx.location)
        picked = ctx.ew("mul", picked, w, suffix="weighted")
    neg = ctx.ew("neg", picked, suffix="neg")
    loss = ctx.ew("where", valid, neg, 0.0, suffix="masked")
    red = a.reduction if a.reduction is not None else 1
    tuple_out = isinstance(ctx.node.meta["val"], (tuple, list))
    dt = ctx.out_dtype(0) if tuple_out else ctx.out_dtype()
    if red == 0:
        out = ctx.cast(loss, dt, suffix="out")
        total = None
    else:
        s = ctx.reduce(loss, None, False, "add", dtype=dt, suffix="sum" if red == 1 else None)
        wv = ctx.cast(valid, dt, suffix="validf") if w is None else ctx.ew("where", valid, w, 0.0, suffix="wv")
        total = ctx.reduce(wv, None, False, "add", dtype=dt, suffix="total_weight")
        out = ctx.ew("div", s, total, dtype=dt) if red == 1 else s
    if tuple_out:
        if total is None:
            total = T(ctx.b.tensor(f"{ctx.name}.tw", (), dt, "constant", 0.0))
        return out, total
    return out
