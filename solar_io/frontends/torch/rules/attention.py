"""scaled_dot_product_attention as einsums: QK^T, scale, mask, softmax, PV.

Causal attention: the nodes iterate the full S x T rectangle with the causal mask applied (so
MACs match ``FlopCounterMode`` and the math kernel), and every tensor over (S, T) (scores,
mask, softmax intermediates, probabilities) is declared with density = the kept fraction of the
rectangle (the causal triangle). Backends scale bytes and work by density, so the bound counts
the work a causal kernel must do (the triangle), never the full rectangle; the QK node records
``causal_work: triangle (tensor density)``. Grouped-query attention (fewer K/V heads) splits the query
heads into (KV head, group) ranks, so K and V are read once per KV head.

An explicit mask (``attn_mask``, boolean or additive: a chunked prefill's offset-causal mask, a
sliding window, padding) is priced the same way: the (S, T) tensors get density = the share of
positions the mask keeps (:mod:`.masks`), which a block-sparse flash kernel never undercuts (it
skips only whole masked blocks). The share comes from the mask's values where the program fixes
them (its construction from ``arange``/``tril``/``full``, evaluated on the CPU, or values the
value-specialised capture recorded); for a mask of unknown values (computed from a graph input
or weight) it is the least any mask with a defined softmax keeps, one key per query row (1/T),
unless bounds on its values show none can hide a position (an additive mask built from a boolean
input times a finite number: the full rectangle).
Either way one ``attention_mask`` assumption per mask says which, with the kept count; the QK
node records ``masked_work``. Chunk of C = 64 queries after P = 192 cached keys: query i keeps
P + 1 + i keys, 64 * 193 + 64 * 63 / 2 = 14368 of 64 * 256 = 16384 positions (0.877).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ....graph import Assumption
from ...common.builder import access
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule
from .masks import MaskFact, mask_fact
from .reduce import softmax


@rule("aten.scaled_dot_product_attention")
def sdpa(ctx: LowerCtx, a: Args) -> T:
    q, k, v = a.query, a.key, a.value
    qs, ks = ctx.shape(q), ctx.shape(k)
    if len(qs) < 3:
        raise NoLowering("attention on tensors with fewer than 3 dims")
    out_dtype = ctx.out_dtype()
    h, hk = qs[-3], ks[-3]
    grouped = h != hk
    if grouped:
        if h % hk:
            raise NoLowering("query heads not a multiple of key/value heads")
        q = ctx.reshape(q, list(qs[:-3]) + [hk, h // hk] + list(qs[-2:]), suffix="q_grouped")
    qr, kr, vr = ctx.ranks(q), ctx.ranks(k), ctx.ranks(v)
    lead_q = list(qr[:-2])  # batch..., heads (, group)
    S, E = qr[-2], qr[-1]
    names = ctx.b.distinct(lead_q + [S, kr[-2], E])
    lead, S, Tn, E = list(names[:len(lead_q)]), names[-3], names[-2], names[-1]
    Ev = ctx.b.distinct(lead + [S, Tn, vr[-1]])[-1]
    kv_lead = lead[:-2] + [lead[-2]] if grouped else lead
    scale = a.scale if a.scale is not None else 1.0 / math.sqrt(qs[-1])
    sc_ranks = lead + [S, Tn]
    start = len(ctx.b.tensors)  # the builder only adds tensors: those of this attention follow
    scores = ctx.tensor(sc_ranks, out_dtype, "scores")
    attrs = {"causal": bool(a.is_causal)}
    if a.dropout_p:
        attrs["dropout_p"] = float(a.dropout_p)  # lowered as inference: dropout is the identity
    if a.is_causal:
        attrs["causal_work"] = "triangle (tensor density)"
    if grouped and a.attn_mask is not None:
        ms = list(ctx.shape(a.attn_mask))
        if len(ms) >= 3 and ms[-3] != 1:
            raise NoLowering("per-head mask with grouped-query attention")
    fact = _mask(ctx) if a.attn_mask is not None else None
    if fact is not None:
        how = "mask values" if fact.known else "unknown values, none masked" if fact.kept == fact.total else \
            "unknown mask: one key per query row"
        attrs["masked_work"] = f"{fact.kept} of {fact.total} mask positions ({how}; tensor density)"
    ctx.b.einsum(scores.name, ctx.op, sc_ranks + [E], [access(q.name, lead + [S, E]),
                 access(k.name, _kv_idx(ctx, k, kv_lead, [Tn, E]))], access(scores.name, sc_ranks), "mul", "add",
                 attrs=attrs, location=ctx.location)
    x = ctx.ew("mul", scores, float(scale), suffix="scaled")
    if a.is_causal:
        n, m = qs[-2], ks[-2]
        mask = ctx.index_table(lambda: np.tril(np.ones((n, m), bool)), [S, Tn], "bool", suffix="causal_mask",
                               key="causal")
        x = ctx.ew("where", mask, x, float("-inf"), suffix="masked")
    if a.attn_mask is not None:
        m = a.attn_mask
        if grouped:
            ms = list(ctx.shape(m))
            if len(ms) >= 3:
                m = ctx.reshape(m, ms[:-3] + [1, 1] + ms[-2:], suffix="mask_grouped")
        x = ctx.ew("where", m, x, float("-inf"), suffix="masked") if ctx.dtype(m) == "bool" else \
            ctx.ew("add", x, m, suffix="masked")
    p = softmax(ctx, x, -1, False, ctx.dtype(x), suffix="probs")
    kept, own = None, set()
    if a.is_causal:
        n, m = qs[-2], ks[-2]
        kept, own = _tril_count(n, m) / (n * m), {mask.name}  # torch's is_causal: tril(ones(n, m))
    elif fact is not None and fact.kept < fact.total:
        kept = max(fact.kept, 1) / fact.total
    if kept is not None:  # the (S, T) tensors of this attention; a mask's ranks may name T apart from Tn
        n, m, sizes = ctx.b.sizes[S], ctx.b.sizes[Tn], ctx.b.sizes
        made = [info for _, info in itertools.islice(ctx.b.tensors.items(), start, None)]
        for info in made + [ctx.b.tensors[name] for name in own]:
            r = info.ranks
            if r and len(r) >= 2 and r[-1] not in (E, Ev) and sizes[r[-1]] == m and sizes[r[-2]] == n:
                info.density = kept
    out_ranks = lead + [S, Ev]
    o = ctx.tensor(out_ranks, out_dtype, "grouped" if grouped else None)
    ctx.b.einsum(o.name, ctx.op, out_ranks + [Tn], [access(p.name, lead + [S, Tn]),
                 access(v.name, _kv_idx(ctx, v, kv_lead, [Tn, Ev]))], access(o.name, out_ranks), "mul", "add",
                 location=ctx.location)
    if grouped:
        o = ctx.reshape(o, ctx.out_shape())
    return o


def _mask(ctx: LowerCtx) -> MaskFact:
    """What the current sdpa node's ``attn_mask`` keeps (one evaluation per mask, shared by every
    attention that uses it); its ``attention_mask`` assumption, counting the calls."""
    names = [arg.name for arg in ctx.node.target._schema.arguments]
    i = names.index("attn_mask")
    node = ctx.node.args[i] if i < len(ctx.node.args) else ctx.node.kwargs["attn_mask"]
    key = ("attention_mask", node.name)
    if key not in ctx.data_cache:
        ctx.data_cache[key] = (mask_fact(node), len(ctx.assumptions))
        ctx.assumptions.append(None)
    fact, at = ctx.data_cache[key]
    calls = 1 + (dict(ctx.assumptions[at].values)["calls"] if ctx.assumptions[at] is not None else 0)
    if fact.known:
        detail = (f"attention work counted at the {fact.kept} of {fact.total} positions the mask keeps (its "
                  "values, fixed by the program's construction of it): a flash kernel skips only masked blocks")
        if fact.unattended:
            detail += f"; {fact.unattended} key position(s) no query keeps are still read"
    elif fact.kept == fact.total:
        detail = (f"mask values unknown at capture ({fact.why}): attention work counted at every position, "
                  f"{fact.total}, since no value can hide one")
    else:
        detail = (f"mask values unknown at capture ({fact.why}): attention work counted at one key per query "
                  f"row, {fact.kept} of {fact.total} positions, the least any mask with a defined softmax keeps")
    ctx.assumptions[at] = Assumption("attention_mask", f"mask {node.name} of aten.scaled_dot_product_attention",
                                     detail, (("calls", calls), ("kept", fact.kept), ("positions", fact.total),
                                              ("known", fact.known), ("unattended_keys", fact.unattended)))
    return fact


def _tril_count(n: int, m: int) -> int:
    """Elements of ``tril(ones(n, m))``: ``sum(min(i + 1, m) for i in range(n))`` in closed form.

    >>> all(_tril_count(n, m) == sum(min(i + 1, m) for i in range(n)) for n in range(9) for m in range(1, 9))
    True
    """
    k = min(n, m)
    return k * (k + 1) // 2 + (n - k) * m


def _kv_idx(ctx: LowerCtx, t: T, lead: list[str], tail: list[str]) -> list[str | int]:
    """Index of K or V by the attention's lead ranks, broadcasting its size-1 dims."""
    ts = ctx.shape(t)
    own = ts[:-2]
    off = len(lead) - len(own)
    return [lead[off + i] if own[i] == ctx.b.sizes[lead[off + i]] else 0 for i in range(len(own))] + tail
