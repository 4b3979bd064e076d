"""Fused attention of a training step: the flash and memory-efficient kernels and their backwards.

A training capture (``frontends/torch/train.py``) routes ``scaled_dot_product_attention`` without a
mask to ``_scaled_dot_product_flash_attention`` and with one (``attn_mask``, boolean or additive)
to ``_scaled_dot_product_efficient_attention`` (the kernel PyTorch has for masks; with grouped-query
heads, which it lacks, to ``solar_io::masked_attention`` of ``frontends/torch/gqa_attention.py``,
lowered the same way), so the joint
graph keeps attention as two fused ops instead of the math path's materialised ``S x T``
probabilities, which no fused kernel writes. Forward (one kernel)::

    scores = Q K^T * scale (causal: masked; boolean mask M: where(M, scores, -inf);
             additive mask B: scores + B), lse = max + log(sum(exp(scores - max))),
    P = exp(scores - lse), O = P V                                  # MACs: S*T*E + S*T*Ev

The mask is an input of each kernel, so its bytes (at its own shape: a mask broadcast over batch
or heads is read once, not per head) are read once by the forward and once by the backward; its
``S x T`` expansion is never materialised. An additive mask that needs a gradient (a learned
bias) gets ``dB = P * (dP - D)`` summed over the dims it broadcasts, as the kernel writes it.

Backward (one kernel; scores are recomputed from Q, K and the saved ``lse``, as flash attention
does)::

    P = exp(Q K^T * scale - lse), dV = P^T dO, dP = dO V^T, D = rowsum(dO * O),
    dS = P * (dP - D) * scale, dQ = dS K, dK = dS^T Q            # MACs: 3*S*T*E + 2*S*T*Ev

These are the counts ``FlopCounterMode`` gives the flash and memory-efficient kernels (forward
two ``bmm``, backward five, the recomputation included). ``D`` is an elementwise product and a
row sum (not a contraction), as in the kernel. Scores and their statistics are fp32 (the kernel's
accumulators); P and dS are in the operands' dtype, so every contraction is priced at that
precision. Grouped-query attention (fewer K/V heads) splits
the query heads into (KV head, group) ranks; dK and dV sum over the group. Causal masking
iterates the rectangle with every ``S x T`` tensor declared at the triangle's density, as the
forward ``attention`` rule does.

>>> from solar_io.frontends.torch.registry import RULES
>>> "aten._scaled_dot_product_flash_attention_backward" in RULES
True
"""

from __future__ import annotations

import math

import numpy as np

from ...common.builder import access
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule


class _Layout:
    """Ranks of one attention call: lead (batch, heads or KV heads and group), S, T, E, Ev."""

    def __init__(self, ctx: LowerCtx, q: T, k: T, v: T):
        qs, ks = ctx.shape(q), ctx.shape(k)
        if len(qs) != 4 or len(ks) != 4:
            raise NoLowering("flash attention on tensors that are not [B, H, S, E]")
        self.h, self.hk = qs[1], ks[1]
        if self.h % self.hk:
            raise NoLowering("query heads not a multiple of key/value heads")
        self.grouped = self.h != self.hk
        self.n, self.m = qs[2], ks[2]
        self.q = self.group(ctx, q, "q_grouped")
        qr, kr, vr = ctx.ranks(self.q), ctx.ranks(k), ctx.ranks(v)
        names = ctx.b.distinct(list(qr[:-2]) + [qr[-2], kr[-2], qr[-1]])
        self.lead, self.S, self.T, self.E = list(names[:-3]), names[-3], names[-2], names[-1]
        self.Ev = ctx.b.distinct(self.lead + [self.S, self.T, vr[-1]])[-1]
        self.kv_lead = self.lead[:-1] if self.grouped else self.lead  # K/V have no group rank

    def group(self, ctx: LowerCtx, x: T, suffix: str) -> T:
        """``x`` [B, H, S, ...] viewed as [B, Hk, G, S, ...] under grouped-query attention."""
        if not self.grouped:
            return x
        xs = list(ctx.shape(x))
        return ctx.reshape(x, xs[:1] + [self.hk, self.h // self.hk] + xs[2:], suffix=suffix)

    def kv(self, t: T, last: str) -> object:
        return access(t.name, self.kv_lead + [self.T, last])


def _scores(ctx: LowerCtx, lay: _Layout, k: T, scale: float, causal: bool, attrs: dict) -> T:
    """Q K^T * scale over [lead, S, T] (masked to the causal triangle when ``causal``)."""
    sc_ranks = lay.lead + [lay.S, lay.T]
    s = ctx.tensor(sc_ranks, "fp32", "scores")
    ctx.b.einsum(s.name, ctx.op, sc_ranks + [lay.E], [access(lay.q.name, lay.lead + [lay.S, lay.E]),
                 lay.kv(k, lay.E)], access(s.name, sc_ranks), "mul", "add", attrs=attrs, location=ctx.location)
    x = ctx.ew("mul", s, float(scale), suffix="scaled")
    if causal:
        mask = ctx.index_table(lambda: np.tril(np.ones((lay.n, lay.m), bool)), [lay.S, lay.T], "bool",
                               suffix="causal_mask", key="causal")
        x = ctx.ew("where", mask, x, float("-inf"), suffix="masked")
    return x


def _causal_density(ctx: LowerCtx, lay: _Layout, before: set[str]) -> None:
    """Declare every new [.., S, T] tensor (and the mask) at the causal triangle's density."""
    kept = sum(min(i + 1, lay.m) for i in range(lay.n)) / (lay.n * lay.m)  # torch's is_causal: tril(ones(n, m))
    for name, info in ctx.b.tensors.items():
        fresh = name not in before or info.generated
        if fresh and info.ranks and lay.S in info.ranks and lay.T in info.ranks:
            info.density = kept


def _contract(ctx: LowerCtx, out_ranks: list[str], reduced: list[str], a: object, b: object, dtype: str,
              suffix: str | None) -> T:
    o = ctx.tensor(out_ranks, dtype, suffix)
    ctx.b.einsum(o.name, ctx.op, out_ranks + reduced, [a, b], access(o.name, out_ranks), "mul", "add",
                 location=ctx.location)
    return o


def _check(a: Args) -> None:
    if a.dropout_p:
        raise NoLowering("flash attention with dropout")


def _masked(ctx: LowerCtx, lay: _Layout, x: T, bias: T | None) -> T:
    """The scaled scores ``x`` with the mask applied: ``where(mask, x, -inf)`` for a boolean mask,
    ``x + bias`` for an additive one (broadcast over the dims the mask lacks or has as 1)."""
    if bias is None:
        return x
    m = _group_mask(ctx, lay, bias)
    if ctx.dtype(m) == "bool":
        return ctx.ew("where", m, x, float("-inf"), suffix="masked")
    return ctx.ew("add", x, m, dtype="fp32", suffix="masked")


def _group_mask(ctx: LowerCtx, lay: _Layout, bias: T) -> T:
    """The mask viewed over the layout's lead ranks: under grouped-query attention its heads dim
    (when it has one) is split like the queries' (a view)."""
    ms = list(ctx.shape(bias))
    if not lay.grouped or len(ms) < 3:
        return bias
    if ms[-3] == lay.h:
        return ctx.reshape(bias, ms[:-3] + [lay.hk, lay.h // lay.hk] + ms[-2:], suffix="mask_grouped")
    if ms[-3] == 1:
        return ctx.reshape(bias, ms[:-3] + [1, 1] + ms[-2:], suffix="mask_grouped")
    raise NoLowering("attention mask whose heads dim is neither 1 nor the query heads")


def _masked_scores(ctx: LowerCtx, a: Args, bias: T | None, fused: str) -> tuple[_Layout, set[str], T, float]:
    """The layout, the tensors that existed before, the scaled, masked scores and the scale of one fused
    attention kernel (forward, or the backward's recomputation), its nodes marked ``fused``."""
    _check(a)
    lay = _Layout(ctx, a.query, a.key, a.value)
    scale = a.scale if a.scale is not None else 1.0 / math.sqrt(ctx.shape(a.query)[-1])
    before = set(ctx.b.tensors)
    attrs = {"causal": bool(a.is_causal), "fused": fused}
    if bias is not None:
        attrs["mask"] = "boolean" if ctx.dtype(bias) == "bool" else "additive"
    if a.is_causal:
        attrs["causal_work"] = "triangle (tensor density)"
    return lay, before, _masked(ctx, lay, _scores(ctx, lay, a.key, scale, bool(a.is_causal), attrs), bias), scale


def _forward(ctx: LowerCtx, a: Args, bias: T | None, kernel: str) -> tuple[T, T]:
    """O and the log-sum-exp rows of one fused attention forward (see the module docstring)."""
    lay, before, x, _ = _masked_scores(ctx, a, bias, f"{kernel} forward")
    q, v = a.query, a.value
    mx = ctx.reduce(x, [-1], True, "max", suffix="max")
    e = ctx.ew("exp", ctx.ew("sub", x, mx, suffix="shifted"), suffix="exp")
    sm = ctx.reduce(e, [-1], True, "add", suffix="sum")
    p = ctx.ew("div", e, sm, dtype=ctx.dtype(q), suffix="probs")  # P V runs at the operands' precision
    if a.is_causal:
        _causal_density(ctx, lay, before)
    lse = ctx.ew("add", ctx.ew("log", sm, suffix="logsum"), mx, dtype=ctx.out_dtype(1), suffix="lse_rows")
    lse = ctx.reshape(lse, list(ctx.shape(q)[:-1]), suffix="lse")
    o_ranks = lay.lead + [lay.S, lay.Ev]
    o = _contract(ctx, o_ranks, [lay.T], access(p.name, lay.lead + [lay.S, lay.T]), lay.kv(v, lay.Ev),
                  ctx.out_dtype(0), "grouped" if lay.grouped else None)
    if lay.grouped:
        o = ctx.reshape(o, ctx.out_shape(0))
    return o, lse


def _backward(ctx: LowerCtx, a: Args, grad_out: T, bias: T | None, kernel: str, bias_grad: bool = False
              ) -> tuple[T, T, T, T | None]:
    """dQ, dK, dV (and the mask's gradient when ``bias_grad``) of one fused attention backward."""
    lay, before, x, scale = _masked_scores(ctx, a, bias, f"{kernel} backward (scores recomputed)")
    q, k, v = a.query, a.key, a.value
    d_o = lay.group(ctx, grad_out, "dout_grouped")
    o = lay.group(ctx, a.out, "out_grouped")
    rows_shape = list(ctx.shape(lay.q)[:-1])
    lse = ctx.reshape(a.logsumexp, rows_shape + [1], suffix="lse_rows")
    p = ctx.ew("exp", ctx.ew("sub", x, lse, suffix="shifted"), dtype=ctx.dtype(q), suffix="probs")
    rows = lay.lead + [lay.S]
    st = rows + [lay.T]
    dv = _contract(ctx, lay.kv_lead + [lay.T, lay.Ev], ([lay.lead[-1]] if lay.grouped else []) + [lay.S],
                   access(p.name, st), access(d_o.name, rows + [lay.Ev]), ctx.out_dtype(2), "dv")
    dp = _contract(ctx, st, [lay.Ev], access(d_o.name, rows + [lay.Ev]), lay.kv(v, lay.Ev), "fp32", "dp")
    dd = ctx.reduce(ctx.ew("mul", d_o, o, dtype="fp32", suffix="dout_out"), [-1], True, "add", suffix="delta")
    du = ctx.ew("mul", p, ctx.ew("sub", dp, dd, suffix="dp_centered"), suffix="ds_unscaled")
    ds = ctx.ew("mul", du, float(scale), dtype=ctx.dtype(q), suffix="ds")
    d_bias = _bias_grad(ctx, lay, du, bias) if bias_grad and bias is not None else None
    if a.is_causal:
        _causal_density(ctx, lay, before)
    dq = _contract(ctx, rows + [lay.E], [lay.T], access(ds.name, st), lay.kv(k, lay.E), ctx.out_dtype(0),
                   "dq_grouped" if lay.grouped else "dq")
    if lay.grouped:
        dq = ctx.reshape(dq, ctx.out_shape(0), suffix="dq")
    dk = _contract(ctx, lay.kv_lead + [lay.T, lay.E], ([lay.lead[-1]] if lay.grouped else []) + [lay.S],
                   access(ds.name, st), access(lay.q.name, rows + [lay.E]), ctx.out_dtype(1), "dk")
    return dq, dk, dv, d_bias


def _bias_grad(ctx: LowerCtx, lay: _Layout, du: T, bias: T) -> T:
    """The additive mask's gradient: ``P * (dP - D)`` summed over the dims the mask broadcasts."""
    m = _group_mask(ctx, lay, bias)
    ms, xs = ctx.shape(m), ctx.shape(du)
    off = len(xs) - len(ms)
    dims = [i for i in range(len(xs)) if i < off or (ms[i - off] == 1 and xs[i] != 1)]
    g = ctx.reduce(du, dims, True, "add", dtype=ctx.out_dtype(3), suffix="dbias") if dims else \
        ctx.cast(du, ctx.out_dtype(3), suffix="dbias")
    return ctx.reshape(g, ctx.out_shape(3), suffix="dbias_shaped")


@rule("aten._scaled_dot_product_flash_attention")
def flash_forward(ctx: LowerCtx, a: Args) -> tuple:
    o, lse = _forward(ctx, a, None, "flash attention")
    n, m = ctx.shape(a.query)[2], ctx.shape(a.key)[2]
    return (o, ctx.reshape(lse, ctx.out_shape(1)), None, None, n, m, None, None, None)


@rule("aten._scaled_dot_product_flash_attention_backward")
def flash_backward(ctx: LowerCtx, a: Args) -> tuple[T, T, T]:
    dq, dk, dv, _ = _backward(ctx, a, a.grad_out, None, "flash attention")
    return dq, dk, dv


@rule("aten._scaled_dot_product_efficient_attention")
def efficient_forward(ctx: LowerCtx, a: Args) -> tuple:
    """Memory-efficient attention with an optional mask (``attn_bias``); its log-sum-exp is the
    ``S`` rows the backward reads (torch's allocation pads it to a multiple of 32)."""
    o, lse = _forward(ctx, a, a.attn_bias, "memory-efficient attention")
    return (o, lse, None, None)


@rule("aten._scaled_dot_product_efficient_attention_backward")
def efficient_backward(ctx: LowerCtx, a: Args) -> tuple:
    want = list(a.grad_input_mask)
    dq, dk, dv, db = _backward(ctx, a, a.grad_out_, a.attn_bias, "memory-efficient attention",
                               bias_grad=bool(want[3]))
    return dq, dk, dv, db


@rule("solar_io.masked_attention")
def grouped_masked_forward(ctx: LowerCtx, a: Args) -> tuple[T, T]:
    """``frontends/torch/gqa_attention.py``'s op: the memory-efficient forward with grouped-query heads."""
    return _forward(ctx, a, a.attn_bias, "grouped masked attention")


@rule("solar_io.masked_attention_backward")
def grouped_masked_backward(ctx: LowerCtx, a: Args) -> tuple:
    return _backward(ctx, a, a.grad_out, a.attn_bias, "grouped masked attention", bias_grad=bool(a.bias_grad))
