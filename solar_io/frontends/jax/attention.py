"""Fused attention of a JAX training step: the math path rewritten to a flash-style kernel pair.

A JAX program spells attention as math (``jax.nn.dot_product_attention``'s XLA path, Flax's
``dot_product_attention``, or ``softmax(q @ k.T) @ v`` by hand): ``jax.grad`` of it saves the
``S x T`` probabilities and its backward reads them, which no fused kernel does. Before the step is
differentiated (``frontends/jax/train.py``), :func:`fuse_attention` finds, in the forward jaxpr,
every region

    s0 = dot_general(q, k);  x = mod(s0, extras);  p = softmax over axes A of x;  o = dot_general(p, v)

where ``mod`` is pointwise or moves data (a scale, a boolean mask through ``select_n``, an additive
bias, casts, transposes; its other operands, the *extras*, are computed outside the region), ``p``
is ``exp(x - c) / sum_A exp(x - c)`` with ``c`` constant along ``A`` (the max-shifted softmax),
``o`` contracts exactly ``A`` of ``p``, and no value inside the region is used outside it. An extra
computed from ``iota`` and literals alone (a causal mask) is recomputed inside the kernel, its index
tables declared ``generated`` (format 1.2: no bytes), as a fused kernel masks from its indices. Each is
replaced by a ``jax.custom_vjp`` function with the same value:

- forward (the jitted function ``solar_io_fused_attention_forward``): ``x``, the log-sum-exp rows
  ``lse = max + log(sum exp(x - max))`` (in fp32 at least, as a kernel's accumulators),
  ``p = exp(x - lse)``, ``o``; it saves q, k, v, the extras and ``lse``, never ``p``.
- backward (``solar_io_fused_attention_backward``): ``x`` recomputed from q and k, ``p = exp(x - lse)``,
  ``dp, dv`` (the transpose of ``o = p v``), ``dx = p * (dp - sum_A p * dp)``, then ``dq, dk`` and the
  floating extras' gradients (a learned bias) through the transpose of ``mod`` and ``q k^T``.

MACs per call: forward those of the two contractions (``S T E + S T Ev`` per head); backward those
of ``dp``, ``dv``, ``dq`` and ``dk``: ``2 S T E + 2 S T Ev`` per head. The backward's recomputation
of ``p`` (``q k^T``, ``mod``, the exp: every node ``d_o`` does not reach) is lowered but listed under
the assumption's ``uncharged_work`` (:func:`fused_assumption`, ``solar_io.metrics``): JAX's own run of
the math path keeps ``p`` instead, so a lower bound of both ways takes the fused kernels' bytes and
the math path's work. A kernel with a mask (:func:`kept_positions`: causal, a window, a user's mask, a
bias) declares its score tensors at the fraction the mask keeps (tensor density, the torch frontend's
rule, ``frontends/common/masks.py``). The lowerer
(``lower.py``) marks the nodes of each of the two jitted calls as one ``kernel`` (format 1.3), so
their inner ``S x T`` tensors never cross memory in the unfused bound, as with the torch frontend's
flash rules. The matching itself is :mod:`.attention_match`. A region that does not match is left
on the math path. The top-level jaxpr, jitted sub-calls, ``jax.checkpoint`` and ``lax.scan`` bodies
are searched (not ``while`` bodies).

>>> import jax, jax.numpy as jnp
>>> def f(q, k, v):
...     return jax.nn.softmax(q @ k.T / 4.0, axis=-1) @ v
>>> x = jnp.ones((8, 16))
>>> g, n = fuse_attention(f, (x, x, x))
>>> n, bool(jnp.allclose(g(x, x, x), f(x, x, x)))
(1, True)
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from ...graph import Assumption
from ...node_lists import UNCHARGED
from ..common.masks import MaskFact, fact_of_keep, one_key_per_row
from .attention_match import JITS, Region, find_regions, indexed

FORWARD = "solar_io_fused_attention_forward"
BACKWARD = "solar_io_fused_attention_backward"

_KEPT = re.compile(r"_kept_(\d+)_of_(\d+)(_unknown)?$")


def kernel_of(eqn: Any) -> str | None:  # noqa: ANN401
    """``forward``/``backward`` for a call of one of the two fused functions, else None."""
    if eqn.primitive.name not in JITS:
        return None
    name = _KEPT.sub("", str(eqn.params.get("name", "")))
    return {FORWARD: "forward", BACKWARD: "backward"}.get(name)


def forward_calls_in(eqn: Any) -> int:  # noqa: ANN401
    """How many fused forward calls ``eqn`` runs inside its sub-jaxprs (a scan's body once per step)."""
    total = 0
    steps = int(eqn.params["length"]) if eqn.primitive.name == "scan" else 1
    for p in eqn.params.values():
        for sub in p if isinstance(p, (tuple, list)) else (p,):
            inner = getattr(sub, "jaxpr", sub)
            for e in getattr(inner, "eqns", ()):
                total += steps * (1 if kernel_of(e) == "forward" else forward_calls_in(e))
    return total


def kept_of(eqn: Any) -> tuple[int, int, bool] | None:  # noqa: ANN401
    """``(kept, all, known)`` score positions of a fused call with a mask (the call's name carries
    them, :func:`kept_positions`; ``known``: from the mask's values, not the least a mask of unknown
    values keeps), else None (every position is computed)."""
    m = _KEPT.search(str(eqn.params.get("name", "")))
    return (int(m.group(1)), int(m.group(2)), m.group(3) is None) if m else None


#: the most combinations of the unknown extras' extreme values tried per region (else one key per row)
MAX_FILLS = 64
#: the most score positions whose mask :func:`kept_positions` evaluates (~40 bytes and ~0.15 us each on
#: this project's 2-core machine: 2**26 is ~2.7 GB and ~10 s); a larger one is priced at the least kept
MAX_EVALUATED = 2**26


def _fills(v: Any, lo: float, hi: float) -> list[Any]:  # noqa: ANN401
    """The values an unknown extra ``v`` is tried at: its bounds (and 0 between them), as constant arrays."""
    dt = np.dtype(v.aval.dtype)
    vals = [lo, hi] + ([0.0] if lo < 0.0 < hi else [])
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        vals = [min(max(x, info.min), info.max) for x in vals]
    return [np.full(v.aval.shape, x, dt) for x in dict.fromkeys(vals)]


def kept_positions(r: Region) -> MaskFact | None:
    """What the mask of ``r``'s ``mod`` keeps of the scores ``x``
    (:class:`~solar_io.frontends.common.masks.MaskFact`), or None when it keeps every position.

    A position is skipped when ``x`` there does not depend on the scores (two random score draws
    agree) and lies at least 200 below the largest score-dependent ``x`` of its softmax row (its
    probability is below ``e^-200``: zero in fp32), or its row has no score-dependent position. A
    flash kernel skips such positions (a causal one skips the blocks above the diagonal), so the
    rest is the work no real run avoids. The mask's part made from indices and the program's
    constants (``iota``, ``jnp.array(range(T))``: causal, a sliding window, a numpy mask) is
    evaluated; an extra of unknown values (a user's mask, a learned bias) is tried at its bounds
    (``value_ranges``: [False, True] for a boolean, unbounded for a float) in every combination: a
    position is kept when every combination keeps it, and a row that some combination keeps
    keeps at least one key (``fact_of_keep``), so an unknown boolean mask is priced at one key
    per query row, and a bias proven finite (``m * -2.0``) at every position.

    >>> import jax, jax.numpy as jnp
    >>> x = jnp.ones((1, 4, 1, 8))
    >>> f = lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True)
    >>> [(m.kept, m.total, m.known) for r in find_regions(jax.make_jaxpr(f)(x, x, x).jaxpr).values()
    ...  for m in [kept_positions(r)]]
    [(10, 16, True)]
    """
    if not (r.extras or r.consts or indexed(r.chain)):
        return None
    s_aval, shape = r.qk.outvars[0].aval, tuple(r.x.aval.shape)
    rng = np.random.default_rng(0)
    draws = [rng.uniform(-1.0, 1.0, s_aval.shape).astype(s_aval.dtype) for _ in range(2)]
    choices = [_fills(v, lo, hi) for v, (lo, hi) in zip(r.extras, r.ranges, strict=True)]
    keys = int(np.prod([shape[a] for a in r.axes]))
    why = ", ".join(sorted({str(v.aval) for v in r.extras}))
    if int(np.prod([len(c) for c in choices])) > MAX_FILLS:
        return one_key_per_row(int(np.prod(shape)), keys, f"{len(r.extras)} extras of unknown values ({why})")
    if int(np.prod(shape)) > MAX_EVALUATED:  # the evaluation below holds ~40 bytes per score position
        return one_key_per_row(int(np.prod(shape)), keys, f"{int(np.prod(shape)):,} score positions: more than the "
                               f"{MAX_EVALUATED:,} whose mask is evaluated, so the least any mask keeps")
    combos = [list(c) for c in itertools.product(*choices)]

    def keep(s_a: Any, s_b: Any, combos: list[list[Any]]) -> Any:  # noqa: ANN401
        must, can = jnp.ones(shape, bool), jnp.zeros(shape, bool)
        for ex in combos:
            xa = _replay(r, s_a, ex).astype(jnp.float32)
            dep = xa != _replay(r, s_b, ex).astype(jnp.float32)
            top = jnp.max(jnp.where(dep, xa, -jnp.inf), axis=r.axes, keepdims=True)
            k = dep | (jnp.any(dep, axis=r.axes, keepdims=True) & (xa > top - 200.0))
            must, can = must & k, can | k
        return must, can

    with jax.ensure_compile_time_eval():
        must, can = (np.asarray(a) for a in jax.jit(keep)(*draws, combos))
    rows = [i for i in range(len(shape)) if i not in r.axes]
    order = rows + list(r.axes)
    must, can = (np.transpose(a, order).reshape(-1, keys) for a in (must, can))
    fact = fact_of_keep(must, can if r.extras else None, why=f"extras of unknown values: {why}" if r.extras else "")
    return fact if fact.kept < fact.total else None


def _bind(eqn: Any, args: Sequence[Any]) -> list[Any]:  # noqa: ANN401
    from jax._src import source_info_util

    params = eqn.primitive.get_bind_params(eqn.params)
    with source_info_util.user_context(eqn.source_info.traceback), eqn.ctx.manager:
        out = eqn.primitive.bind(*args, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def _replay(r: Region, s0: Any, extras: Sequence[Any], pinned: bool = False) -> Any:  # noqa: ANN401
    """``mod(s0, extras)``: the region's chain evaluated on new values.

    ``pinned`` (the fused forward): every part of the mask is computed from values tied to the scores,
    so that partial evaluation cannot move it out of the kernel. A scan's linearization hoists what
    its body computes from loop constants alone (``lax.scan``'s loop-invariant residuals): a causal
    mask made from ``iota`` would be computed once outside the loop and read by every step's kernel
    as an ``[B, H, S, T]`` tensor. So the extras and constants pass through one
    ``optimization_barrier`` with the scores, an ``iota`` is a broadcast of a 1-d ``iota`` plus a
    zero from that barrier, and an equation of literals alone reads them through the same zero:
    what can still be hoisted is a 1-d index vector and scalars."""
    consts = list(r.consts.items())
    env: dict[Any, Any] = {}
    zero = None
    if pinned:
        zero, s0, *pins = jax.lax.optimization_barrier((np.int32(0), s0, *extras, *[c for _, c in consts]))
        extras, values = pins[:len(extras)], pins[len(extras):]
        env.update(zip([v for v, _ in consts], values, strict=True))
    else:
        env.update(consts)
    env.update(zip(r.extras, extras, strict=True))
    env[r.qk.outvars[0]] = s0
    _evaluate(r.chain, env, zero)
    return env[r.x]


def _evaluate(eqns: Sequence[Any], env: dict[Any, Any], zero: Any) -> None:  # noqa: ANN401
    """Bind ``eqns`` on ``env`` (updated with their results); with ``zero`` (a traced 0), jitted calls
    are inlined and equations of indices, literals and constants alone are tied to it (:func:`_replay`)."""
    for e in eqns:
        args = [v.val if isinstance(v, jcore.Literal) else env[v] for v in e.invars]
        name = e.primitive.name
        if zero is None:
            outs = _bind(e, args)
        elif name in JITS:
            sub = e.params["jaxpr"]
            inner = dict(zip(sub.jaxpr.constvars, sub.consts, strict=True))
            inner.update(zip(sub.jaxpr.invars, args, strict=True))
            _evaluate(sub.jaxpr.eqns, inner, zero)
            outs = [v.val if isinstance(v, jcore.Literal) else inner[v] for v in sub.jaxpr.outvars]
        elif name == "iota":
            shape, dim, dt = e.params["shape"], e.params["dimension"], e.params["dtype"]
            line = jax.lax.iota(dt, shape[dim]) + zero.astype(dt)
            outs = [jax.lax.broadcast_in_dim(line, shape, (dim,))]
        elif not any(isinstance(a, jax.core.Tracer) for a in args):  # literals and constants alone
            outs = _bind(e, [jnp.where(zero == 0, a, a) for a in args])
        else:
            outs = _bind(e, args)
        env.update(zip(e.outvars, outs, strict=True))


def _named(fn: Callable, name: str) -> Callable:
    fn.__name__ = fn.__qualname__ = name
    return jax.jit(fn)


def fused(r: Region) -> Callable[..., Any]:
    """The custom-VJP function ``(q, k, v, *extras) -> o`` of region ``r`` (module docstring)."""
    axes, side = r.axes, r.p_side
    p_dtype = r.pv.invars[side].aval.dtype
    floating = [i for i, v in enumerate(r.extras) if jnp.issubdtype(v.aval.dtype, jnp.inexact)]
    stats = jnp.promote_types(r.x.aval.dtype, jnp.float32)  # the softmax statistics: fp32 at least (kernels' own)

    def scores(q: Any, k: Any, extras: Sequence[Any]) -> Any:  # noqa: ANN401
        return _replay(r, _bind(r.qk, [q, k])[0], extras)

    def attend(p: Any, v: Any) -> Any:  # noqa: ANN401
        return _bind(r.pv, [p, v] if side == 0 else [v, p])[0]

    def forward(q: Any, k: Any, v: Any, *extras: Any) -> Any:  # noqa: ANN401
        x = _replay(r, _bind(r.qk, [q, k])[0], extras, pinned=True).astype(stats)
        mx = jnp.max(x, axis=axes, keepdims=True)
        lse = mx + jnp.log(jnp.sum(jnp.exp(x - mx), axis=axes, keepdims=True))
        return attend(jnp.exp(x - lse).astype(p_dtype), v), lse

    def backward(q: Any, k: Any, v: Any, lse: Any, d_o: Any, *extras: Any) -> Any:  # noqa: ANN401
        def of(q: Any, k: Any, *fl: Any) -> Any:  # noqa: ANN401
            ex = list(extras)
            for i, e in zip(floating, fl, strict=True):
                ex[i] = e
            return scores(q, k, ex)

        x, vjp_scores = jax.vjp(of, q, k, *[extras[i] for i in floating])
        p = jnp.exp(x.astype(stats) - lse)
        dp, dv = jax.vjp(attend, p.astype(p_dtype), v)[1](d_o)
        dp = dp.astype(stats)
        dx = p * (dp - jnp.sum(p * dp, axis=axes, keepdims=True))
        dq, dk, *d_extras = vjp_scores(dx.astype(x.dtype))
        return dq, dk, dv, tuple(d_extras)

    kept = kept_positions(r)
    tag = "" if kept is None else f"_kept_{kept.kept}_of_{kept.total}" + ("" if kept.known else "_unknown")
    fwd_call, bwd_call = _named(forward, FORWARD + tag), _named(backward, BACKWARD + tag)

    @jax.custom_vjp
    def attention(q: Any, k: Any, v: Any, *extras: Any) -> Any:  # noqa: ANN401
        return fwd_call(q, k, v, *extras)[0]

    def attention_fwd(q: Any, k: Any, v: Any, *extras: Any) -> Any:  # noqa: ANN401
        o, lse = fwd_call(q, k, v, *extras)
        return o, (q, k, v, lse, extras)

    def attention_bwd(res: Any, d_o: Any) -> Any:  # noqa: ANN401
        q, k, v, lse, extras = res
        dq, dk, dv, d_fl = bwd_call(q, k, v, lse, d_o, *extras)
        d_ex: list[Any] = [None] * len(extras)
        for i, d in zip(floating, d_fl, strict=True):
            d_ex[i] = d
        return (dq, dk, dv, *d_ex)

    attention.defvjp(attention_fwd, attention_bwd)
    return attention


def fused_assumption(n: int, masked: Sequence[tuple[str, tuple[int, int, bool]]] = (),
                     uncharged: Sequence[str] = (), in_opaque: int = 0) -> Assumption:
    """The ``training`` assumption recording that ``n`` attention calls were fused (module docstring);
    ``masked``: (kernel, (kept, all score positions, known)) of the kernels with a mask (:func:`kept_of`);
    ``uncharged``: the fused backwards' nodes that recompute the probabilities (charged no compute);
    ``in_opaque``: calls of the program that lie inside opaque nodes instead (a scan not unrolled)."""
    detail = ("attention call(s) on the math path run as a fused forward (writes the output and the "
              "log-sum-exp rows, never the S x T probabilities) and a fused backward that recomputes the "
              "probabilities from the scores (flash-attention style)")
    values: list[tuple[str, Any]] = [("fused_attention_calls", n)]
    if in_opaque:
        detail += (f"; {in_opaque} more call(s) lie inside opaque nodes (a scan longer than the steps the "
                   "frontend unrolls), whose compute is unknown and reported as such")
        values.append(("calls_in_opaque_nodes", in_opaque))
    if uncharged:
        detail += ("; JAX's own run of the math path keeps the probabilities instead of recomputing them, so the "
                   "recomputation (the nodes in uncharged_work: the score contraction, mask, exp) is charged no "
                   "compute, its bytes still counted: the bound takes the fused kernels' bytes and the math "
                   "path's work, which neither way of running beats")
        values.append((UNCHARGED, tuple(uncharged)))
    if masked:
        detail += ("; a kernel with a mask skips the positions it masks, so its score tensors are declared at the "
                   "fraction of positions kept (tensor density): a mask made from indices and the program's "
                   "constants (causal, a sliding window) is computed in the kernel and counted from its values; "
                   "where part of the mask has values unknown at capture (a user's mask, a learned bias), a "
                   "position counts only if every value within that part's bounds keeps it, and a query row at "
                   "least one key (the least any mask with a defined softmax keeps)")
        values += [("masked_kernels", tuple(k for k, _ in masked)),
                   ("kept_fraction", tuple(m[0] / m[1] for _, m in masked)),
                   ("mask_values", tuple("known" if m[2] else "unknown: least kept" for _, m in masked))]
    return Assumption("training", "attention", f"{n} {detail}", tuple(values))


def _run(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], count: list[int],  # noqa: ANN401
         times: int = 1) -> list[Any]:
    """Evaluate ``jaxpr`` with every matched attention replaced by :func:`fused` (needed values only);
    ``times``: how often the caller runs ``jaxpr`` (a scan body's steps), for the count of calls."""
    concrete = {v: a for v, a in zip(jaxpr.invars, args, strict=True) if not isinstance(a, jax.core.Tracer)}
    regions = find_regions(jaxpr, consts, concrete)
    skip = {i for r in regions.values() for i in r.eqns} - set(regions)
    count[0] += len(regions) * times
    env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))

    def read(v: Any) -> Any:  # noqa: ANN401
        return v.val if isinstance(v, jcore.Literal) else env[v]

    for i, e in enumerate(jaxpr.eqns):
        if i in skip:
            continue
        if i in regions:
            r = regions[i]
            q, k = (read(v) for v in r.qk.invars)
            vv = read(r.pv.invars[1 - r.p_side])
            env[e.outvars[0]] = fused(r)(q, k, vv, *[read(v) for v in r.extras])
            continue
        ins = [read(v) for v in e.invars]
        name = e.primitive.name
        if name in JITS:
            sub = e.params["jaxpr"]
            outs = _run(sub.jaxpr, sub.consts, ins, count, times)
        elif name in ("checkpoint", "remat", "remat2"):
            sub = e.params["jaxpr"]
            fn = jax.checkpoint(lambda *a, sub=sub: _run(sub, (), a, count, times), prevent_cse=e.params["prevent_cse"],
                                policy=e.params["policy"])
            outs = fn(*ins)
        elif name == "scan" and _holds_match(e.params["jaxpr"].jaxpr):
            outs = _scan(e, ins, count, times)
        else:
            outs = _bind(e, ins)
        env.update(zip(e.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def fuse_attention(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[Callable[..., Any], int]:
    """``(fn', n)``: ``fn`` with its ``n`` attention regions fused (``fn`` itself when ``n`` is 0);
    ``args`` are example (abstract) arguments to trace ``fn`` with; ``fn'`` takes and returns the same trees."""
    closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    out_tree = jax.tree_util.tree_structure(shape)
    count = [0]
    if not find_regions(closed.jaxpr) and not _nested(closed.jaxpr):
        return fn, 0

    def rewritten(*xs: Any) -> Any:  # noqa: ANN401
        count[0] = 0
        flat = jax.tree_util.tree_leaves(xs)
        return jax.tree_util.tree_unflatten(out_tree, _run(closed.jaxpr, closed.consts, flat, count))

    jax.eval_shape(rewritten, *args)
    if not count[0]:
        return fn, 0
    return rewritten, count[0]


def _scan(e: Any, ins: Sequence[Any], count: list[int], times: int) -> list[Any]:  # noqa: ANN401
    """The ``scan`` equation ``e`` run on ``ins`` with the attention in its body fused (a scanned layer
    stack, Flax ``nn.scan``): the same scan, its body rewritten by :func:`_run`."""
    p = e.params
    body, nc, nk = p["jaxpr"], p["num_consts"], p["num_carry"]
    consts, carry, xs = list(ins[:nc]), list(ins[nc:nc + nk]), list(ins[nc + nk:])

    def step(c: list[Any], x: list[Any]) -> tuple[list[Any], list[Any]]:  # noqa: ANN401
        outs = _run(body.jaxpr, body.consts, [*consts, *c, *x], count, times * int(p["length"]))
        return outs[:nk], outs[nk:]

    c, ys = jax.lax.scan(step, carry, xs, length=int(p["length"]), reverse=p["reverse"], unroll=p["unroll"])
    return [*c, *ys]


def _holds_match(jaxpr: Any) -> bool:  # noqa: ANN401
    """Whether ``jaxpr`` or one of its sub-jaxprs holds a match."""
    return bool(find_regions(jaxpr)) or _nested(jaxpr)


def _nested(jaxpr: Any) -> bool:  # noqa: ANN401
    """Whether a jitted, checkpointed or scanned sub-jaxpr holds a match."""
    for e in jaxpr.eqns:
        if e.primitive.name in JITS or e.primitive.name in ("checkpoint", "remat", "remat2", "scan"):
            sub = e.params["jaxpr"]
            inner = sub.jaxpr if hasattr(sub, "jaxpr") else sub
            if find_regions(inner) or _nested(inner):
                return True
    return False


__all__ = ["BACKWARD", "FORWARD", "forward_calls_in", "fuse_attention", "fused", "fused_assumption", "kept_of",
           "kept_positions", "kernel_of"]
