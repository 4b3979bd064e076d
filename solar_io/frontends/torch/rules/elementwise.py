"""Elementwise ops and activations: one broadcasting einsum each, or a short chain of them.

Activations that are not map operators of the format are written exactly in terms of those
that are (``leaky_relu = max(x, a*x)``, ``hardswish = x * min(max(x/6 + 1/2, 0), 1)``,
``softplus`` with its threshold, ...), so every FLOP they need is counted.
"""

from __future__ import annotations

import math

from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule
from .shape import concat, slice_dim

_UNARY = {
    "aten.abs": "abs", "aten.neg": "neg", "aten.exp": "exp", "aten.log": "log", "aten.sqrt": "sqrt",
    "aten.rsqrt": "rsqrt", "aten.reciprocal": "reciprocal", "aten.tanh": "tanh", "aten.sin": "sin",
    "aten.cos": "cos", "aten.erf": "erf", "aten.sigmoid": "sigmoid", "aten.silu": "silu", "aten.relu": "relu",
    "aten.sign": "sign", "aten.floor": "floor", "aten.ceil": "ceil", "aten.round": "round",
    "aten.logical_not": "not", "aten.square": "square",
    # format 1.1
    "aten.tan": "tan", "aten.asin": "asin", "aten.acos": "acos", "aten.atan": "atan", "aten.sinh": "sinh",
    "aten.cosh": "cosh", "aten.asinh": "asinh", "aten.acosh": "acosh", "aten.atanh": "atanh",
    "aten.erfc": "erfc", "aten.erfinv": "erfinv",
    "aten.log1p": "log1p", "aten.expm1": "expm1", "aten.log2": "log2",
    "aten.log10": "log10", "aten.exp2": "exp2", "aten.trunc": "trunc",
    # aten's alias names (torch.absolute, torch.arccos, torch.fix, torch.special.expit, ...), which
    # export keeps as they are written
    "aten.absolute": "abs", "aten.negative": "neg", "aten.arcsin": "asin", "aten.arccos": "acos",
    "aten.arctan": "atan", "aten.arcsinh": "asinh", "aten.arccosh": "acosh", "aten.arctanh": "atanh",
    "aten.fix": "trunc", "aten.special_expit": "sigmoid", "aten.special_exp2": "exp2", "aten.special_erf": "erf",
}


@rule(*_UNARY)
def unary(ctx: LowerCtx, a: Args) -> T:
    return ctx.ew(_UNARY[ctx.op], a.self, dtype=ctx.out_dtype())


@rule("aten.bitwise_not")
def bitwise_not(ctx: LowerCtx, a: Args) -> T:
    if ctx.dtype(a.self) == "bool":
        return ctx.ew("not", a.self, dtype="bool")
    n = ctx.ew("neg", a.self, suffix="neg")  # ~x == -x - 1 for two's complement integers
    return ctx.ew("sub", n, 1, dtype=ctx.out_dtype())


@rule("aten.gelu")
def gelu(ctx: LowerCtx, a: Args) -> T:
    return ctx.ew("gelu_tanh" if a.approximate == "tanh" else "gelu", a.self, dtype=ctx.out_dtype())


_BINARY = {
    "aten.mul": "mul", "aten.maximum": "max", "aten.minimum": "min", "aten.eq": "eq", "aten.ne": "ne",
    "aten.lt": "lt", "aten.le": "le", "aten.gt": "gt", "aten.ge": "ge", "aten.logical_and": "and",
    "aten.logical_or": "or", "aten.bitwise_and": "and", "aten.bitwise_or": "or",
    "aten.__and__": "and", "aten.__or__": "or",  # Python's & and | (transformers' mask functions)
    "aten.atan2": "atan2", "aten.fmod": "fmod", "aten.remainder": "remainder",
    # aten's alias names (torch.greater, torch.multiply, ...): export keeps them, and one left unlowered
    # sends the whole program through the decomposition (82 s of a 512-expert MoE's capture)
    "aten.greater": "gt", "aten.greater_equal": "ge", "aten.less": "lt", "aten.less_equal": "le",
    "aten.not_equal": "ne", "aten.multiply": "mul",
}


@rule(*_BINARY)
def binary(ctx: LowerCtx, a: Args) -> T:
    m = _BINARY[ctx.op]
    if m in ("and", "or") and ctx.out_dtype() != "bool":
        raise NoLowering("bitwise op on integers")
    return ctx.ew(m, a.self, a.other, dtype=ctx.out_dtype())


@rule("aten.logical_xor", "aten.bitwise_xor")
def xor(ctx: LowerCtx, a: Args) -> T:
    """``a != b`` of the operands' truth values (bitwise only of booleans)."""
    if ctx.op == "aten.bitwise_xor" and ctx.out_dtype() != "bool":
        raise NoLowering("bitwise xor of integers")
    x, y = (v if not isinstance(v, T) or ctx.dtype(v) == "bool" else ctx.ew("ne", v, 0, dtype="bool", suffix="truth")
            for v in (a.self, a.other))
    return ctx.ew("ne", x, y, dtype="bool")


@rule("aten.log_sigmoid", "aten.logaddexp")
def log_sigmoid(ctx: LowerCtx, a: Args) -> T:
    """``log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|))`` and ``logaddexp(a, b) = max(a, b) + log1p(exp(-|a - b|))``,
    the stable forms eager computes."""
    if ctx.op == "aten.log_sigmoid":
        edge, gap, sign = ctx.ew("min", a.self, 0.0, suffix="edge"), a.self, "sub"
    else:
        edge, sign = ctx.ew("max", a.self, a.other, suffix="edge"), "add"
        gap = ctx.ew("sub", a.self, a.other, suffix="gap")
    t = ctx.ew("neg", ctx.ew("abs", gap, suffix="abs"), suffix="negabs")
    t = ctx.ew("log1p", ctx.ew("exp", t, suffix="exp"), suffix="log1p")
    return ctx.ew(sign, edge, t, dtype=ctx.out_dtype())


@rule("aten.isfinite")
def isfinite(ctx: LowerCtx, a: Args) -> T:
    """Not NaN (``x == x``) and not infinite."""
    if ctx.dtype(a.self) == "bool" or not ctx.dtype(a.self).startswith(("fp", "bf")):
        raise NoLowering("isfinite of integers: every value")
    real = ctx.ew("eq", a.self, a.self, dtype="bool", suffix="real")
    bounded = ctx.ew("ne", ctx.ew("abs", a.self, suffix="abs"), float("inf"), dtype="bool", suffix="bounded")
    return ctx.ew("and", real, bounded, dtype="bool")


@rule("aten.sgn", "aten.deg2rad", "aten.rad2deg")
def sgn_degrees(ctx: LowerCtx, a: Args) -> T:
    """``sgn`` of a real tensor is ``sign``; degrees and radians are one product."""
    if ctx.op == "aten.sgn":
        return ctx.ew("sign", a.self, dtype=ctx.out_dtype())
    factor = math.pi / 180 if ctx.op == "aten.deg2rad" else 180 / math.pi
    return ctx.ew("mul", a.self, factor, dtype=ctx.out_dtype())


@rule("aten.hypot")
def hypot(ctx: LowerCtx, a: Args) -> T:
    sq = ctx.ew("add", ctx.ew("mul", a.self, a.self, suffix="sq"), ctx.ew("mul", a.other, a.other, suffix="sq"),
                suffix="sumsq")
    return ctx.ew("sqrt", sq, dtype=ctx.out_dtype())


@rule("aten.diff")
def diff(ctx: LowerCtx, a: Args) -> T:
    """``x[1:] - x[:-1]`` along ``dim`` (``!=`` of booleans: torch's logical xor), two slice views and one
    elementwise node, after joining ``prepend``, ``x`` and ``append`` along ``dim`` as eager does
    (transformers' packed-sequence check prepends a column); higher orders are left to the
    decomposition."""
    if (a.n if a.n is not None else 1) != 1:
        raise NoLowering("diff with n > 1")
    x = a.self
    dim = (a.dim if a.dim is not None else -1) % len(ctx.shape(x))
    parts = [p for p in (a.prepend, x, a.append) if p is not None]
    if len(parts) > 1:  # joined at torch's promotion of the parts, which is also diff's result dtype
        x = concat(ctx, parts, dim, suffix="joined", dtype=ctx.out_dtype())
    size = ctx.shape(x)[dim]
    later, earlier = slice_dim(ctx, x, dim, 1, size, 1), slice_dim(ctx, x, dim, 0, size - 1, 1)
    return ctx.ew("ne" if ctx.dtype(x) == "bool" else "sub", later, earlier, dtype=ctx.out_dtype())


@rule("aten.add", "aten.sub", "aten.subtract")
def add_sub(ctx: LowerCtx, a: Args) -> T:
    other = a.other
    alpha = a.alpha if a.alpha is not None else 1
    if alpha != 1:
        other = ctx.ew("mul", other, alpha, suffix="alpha") if isinstance(other, T) else other * alpha
    return ctx.ew("add" if ctx.op == "aten.add" else "sub", a.self, other, dtype=ctx.out_dtype())


@rule("aten.rsub")
def rsub(ctx: LowerCtx, a: Args) -> T:
    x = a.self
    alpha = a.alpha if a.alpha is not None else 1
    if alpha != 1:
        x = ctx.ew("mul", x, alpha, suffix="alpha")
    return ctx.ew("sub", a.other, x, dtype=ctx.out_dtype())


@rule("aten.div", "aten.divide", "aten.true_divide")
def div(ctx: LowerCtx, a: Args) -> T:
    mode = a.rounding_mode
    if mode is None:
        return ctx.ew("div", a.self, a.other, dtype=ctx.out_dtype())
    if mode == "floor":
        q = ctx.ew("div", a.self, a.other, dtype="fp32", suffix="q")
        return ctx.ew("floor", q, dtype=ctx.out_dtype())
    raise NoLowering(f"div rounding_mode={mode}")


@rule("aten.pow")
def pow_(ctx: LowerCtx, a: Args) -> T:
    base, e = a.self, a.exponent
    dt = ctx.out_dtype()
    if isinstance(base, T) and not isinstance(e, T):
        special = {2: "square", 0.5: "sqrt", -1: "reciprocal", -0.5: "rsqrt"}
        if e == 1:
            return ctx.copy(base)
        if e in special:
            return ctx.ew(special[e], base, dtype=dt)
    return ctx.ew("pow", base, e, dtype=dt)


@rule("aten.where")
def where(ctx: LowerCtx, a: Args) -> T:
    if a.other is None and a.self is None:
        raise NoLowering("where(condition) (nonzero)")
    return ctx.ew("where", a.condition, a.self, a.other, dtype=ctx.out_dtype())


@rule("aten.masked_fill")
def masked_fill(ctx: LowerCtx, a: Args) -> T:
    return ctx.ew("where", a.mask, a.value, a.self, dtype=ctx.out_dtype())


def _clamp(ctx: LowerCtx, x: T, lo: float | T | None, hi: float | T | None) -> T:
    dt = ctx.out_dtype()
    if lo is not None and hi is not None:
        x = ctx.ew("max", x, lo, suffix="lo")
        return ctx.ew("min", x, hi, dtype=dt)
    if lo is not None:
        return ctx.ew("max", x, lo, dtype=dt)
    if hi is not None:
        return ctx.ew("min", x, hi, dtype=dt)
    return ctx.copy(x)


@rule("aten.clamp", "aten.clip")
def clamp(ctx: LowerCtx, a: Args) -> T:
    return _clamp(ctx, a.self, a.min, a.max)


@rule("aten.clamp_min")
def clamp_min(ctx: LowerCtx, a: Args) -> T:
    return _clamp(ctx, a.self, a.min, None)


@rule("aten.clamp_max")
def clamp_max(ctx: LowerCtx, a: Args) -> T:
    return _clamp(ctx, a.self, None, a.max)


@rule("aten.hardtanh")
def hardtanh(ctx: LowerCtx, a: Args) -> T:
    return _clamp(ctx, a.self, a.min_val, a.max_val)


@rule("aten.relu6")
def relu6(ctx: LowerCtx, a: Args) -> T:
    return _clamp(ctx, a.self, 0.0, 6.0)


@rule("aten.leaky_relu")
def leaky_relu(ctx: LowerCtx, a: Args) -> T:
    slope = float(a.negative_slope)
    ax = ctx.ew("mul", a.self, slope, suffix="scaled")
    return ctx.ew("max" if slope <= 1 else "min", a.self, ax, dtype=ctx.out_dtype())


@rule("aten.hardsigmoid")
def hardsigmoid(ctx: LowerCtx, a: Args) -> T:
    return _hardsigmoid(ctx, a.self, ctx.out_dtype())


def _hardsigmoid(ctx: LowerCtx, x: T, dt: str, suffix: str | None = None) -> T:
    t = ctx.ew("mul", x, 1.0 / 6.0, suffix="div6")
    t = ctx.ew("add", t, 0.5, suffix="shift")
    t = ctx.ew("max", t, 0.0, suffix="lo")
    return ctx.ew("min", t, 1.0, dtype=dt, suffix=suffix)


@rule("aten.hardswish")
def hardswish(ctx: LowerCtx, a: Args) -> T:
    hs = _hardsigmoid(ctx, a.self, ctx.dtype(a.self), suffix="hardsigmoid")
    return ctx.ew("mul", a.self, hs, dtype=ctx.out_dtype())


def _elu(ctx: LowerCtx, x: T, alpha: float, scale: float, input_scale: float) -> T:
    dt = ctx.out_dtype()
    xi = ctx.ew("mul", x, input_scale, suffix="in") if input_scale != 1 else x
    e = ctx.ew("exp", xi, suffix="exp")
    em1 = ctx.ew("sub", e, 1.0, suffix="expm1")
    neg = ctx.ew("mul", em1, alpha * scale, suffix="neg")
    pos = ctx.ew("mul", x, scale, suffix="pos") if scale != 1 else x
    c = ctx.ew("gt", x, 0.0, suffix="cond")
    return ctx.ew("where", c, pos, neg, dtype=dt)


@rule("aten.elu")
def elu(ctx: LowerCtx, a: Args) -> T:
    return _elu(ctx, a.self, float(a.alpha), float(a.scale), float(a.input_scale))


@rule("aten.selu")
def selu(ctx: LowerCtx, a: Args) -> T:
    return _elu(ctx, a.self, 1.6732632423543772, 1.0507009873554805, 1.0)


@rule("aten.celu")
def celu(ctx: LowerCtx, a: Args) -> T:
    alpha = float(a.alpha)
    return _elu(ctx, a.self, alpha, 1.0, 1.0 / alpha)


def _softplus(ctx: LowerCtx, x: T, beta: float, threshold: float, dt: str, suffix: str | None = None) -> T:
    bx = ctx.ew("mul", x, beta, suffix="bx") if beta != 1 else x
    e = ctx.ew("exp", bx, suffix="exp")
    p = ctx.ew("add", e, 1.0, suffix="1p")
    lg = ctx.ew("log", p, suffix="log")
    sp = ctx.ew("mul", lg, 1.0 / beta, suffix="div") if beta != 1 else lg
    c = ctx.ew("gt", bx, threshold, suffix="cond")
    return ctx.ew("where", c, x, sp, dtype=dt, suffix=suffix)


@rule("aten.softplus")
def softplus(ctx: LowerCtx, a: Args) -> T:
    return _softplus(ctx, a.self, float(a.beta), float(a.threshold), ctx.out_dtype())


@rule("aten.mish")
def mish(ctx: LowerCtx, a: Args) -> T:
    sp = _softplus(ctx, a.self, 1.0, 20.0, ctx.dtype(a.self), suffix="softplus")
    t = ctx.ew("tanh", sp, suffix="tanh")
    return ctx.ew("mul", a.self, t, dtype=ctx.out_dtype())


@rule("aten.threshold")
def threshold(ctx: LowerCtx, a: Args) -> T:
    c = ctx.ew("gt", a.self, float(a.threshold), suffix="cond")
    return ctx.ew("where", c, a.self, float(a.value), dtype=ctx.out_dtype())


@rule("aten.hardshrink")
def hardshrink(ctx: LowerCtx, a: Args) -> T:
    c = ctx.ew("gt", ctx.ew("abs", a.self, suffix="abs"), float(a.lambd), suffix="cond")
    return ctx.ew("where", c, a.self, 0.0, dtype=ctx.out_dtype())


@rule("aten.xlogy")
def xlogy(ctx: LowerCtx, a: Args) -> T:
    lg = ctx.ew("log", a.other, suffix="log") if isinstance(a.other, T) else math.log(a.other)
    p = ctx.ew("mul", a.self, lg, suffix="prod")
    z = ctx.ew("eq", a.self, 0.0, suffix="zero")
    return ctx.ew("where", z, 0.0, p, dtype=ctx.out_dtype())


@rule("aten.lerp")
def lerp(ctx: LowerCtx, a: Args) -> T:
    d = ctx.ew("sub", a.end, a.self, suffix="diff")
    w = ctx.ew("mul", d, a.weight, suffix="step")
    return ctx.ew("add", a.self, w, dtype=ctx.out_dtype())


@rule("aten.addcmul", "aten.addcdiv")
def addcmul(ctx: LowerCtx, a: Args) -> T:
    p = ctx.ew("mul" if ctx.op == "aten.addcmul" else "div", a.tensor1, a.tensor2, suffix="prod")
    if float(a.value) != 1:
        p = ctx.ew("mul", p, float(a.value), suffix="scaled")
    return ctx.ew("add", a.self, p, dtype=ctx.out_dtype())


@rule("aten.prelu", "aten._prelu_kernel")
def prelu(ctx: LowerCtx, a: Args) -> T:
    x, w = a.self, a.weight
    xr = ctx.ranks(x)
    ws = ctx.shape(w)
    if len(ws) == 1 and ws[0] != 1 and len(xr) >= 2:
        ctx.b.bind(w.name, [xr[1]])
        wr = ctx.ranks(w)
        w = ctx.reshape(w, list(ws) + [1] * (len(xr) - 2), suffix="w")
        del wr
    ax = ctx.ew("mul", x, w, suffix="scaled")
    c = ctx.ew("gt", x, 0.0, suffix="cond")
    return ctx.ew("where", c, x, ax, dtype=ctx.out_dtype())


@rule("aten.logit")
def logit(ctx: LowerCtx, a: Args) -> T:
    x = a.self if a.eps is None else _clamp_tmp(ctx, a.self, float(a.eps))
    d = ctx.ew("sub", 1.0, x, suffix="den")
    return ctx.ew("log", ctx.ew("div", x, d, suffix="ratio"), dtype=ctx.out_dtype())


def _clamp_tmp(ctx: LowerCtx, x: T, eps: float) -> T:
    return ctx.ew("min", ctx.ew("max", x, eps, suffix="lo"), 1.0 - eps, suffix="hi")


@rule("aten.glu")
def glu(ctx: LowerCtx, a: Args) -> T:
    from .shape import slice_dim

    x, d = a.self, a.dim
    n = ctx.shape(x)[d]
    first = slice_dim(ctx, x, d, 0, n // 2, 1, "a")
    second = slice_dim(ctx, x, d, n // 2, n, 1, "b")
    return ctx.ew("mul", first, ctx.ew("sigmoid", second, suffix="gate"), dtype=ctx.out_dtype())
