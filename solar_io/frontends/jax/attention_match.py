"""Finding attention in a jaxpr (for :mod:`.attention`): ``dot_general -> pointwise mod -> softmax ->
dot_general`` regions whose inner values nothing else reads.

:func:`find_regions` returns, per matched ``p v`` equation, its :class:`Region`: the two contractions,
the ``mod`` chain (pointwise maps and data movement from ``q k``'s output to the softmax input ``x``),
the softmax axes, the *extras* ``mod`` reads (a mask, a bias) and every equation the region replaces.
``p`` must be ``exp(x - c) / sum_A exp(x - c)`` with ``c`` constant along ``A`` (the max-shifted
softmax, whatever computes ``c``), and ``p v`` must contract exactly ``A``; an extra computed from
``iota`` and literals alone (a causal mask) joins the chain, so the kernel makes it itself.

>>> import jax, jax.numpy as jnp
>>> x = jnp.ones((8, 16))
>>> closed = jax.make_jaxpr(lambda q, k, v: jax.nn.softmax(q @ k.T, axis=-1) @ v)(x, x, x)
>>> [(r.axes, len(r.extras)) for r in find_regions(closed.jaxpr).values()]
[((1,), 0)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from jax.extend import core as jcore

#: primitives ``mod`` may hold: pointwise maps and data movement (a fused kernel applies them per tile)
POINTWISE = frozenset({
    "mul", "div", "add", "sub", "neg", "max", "min", "select_n", "convert_element_type", "exp", "log", "tanh",
    "logistic", "transpose", "reshape", "broadcast_in_dim", "squeeze", "expand_dims", "and", "or", "not",
    "ge", "gt", "le", "lt", "eq", "ne", "integer_pow", "abs", "sign", "erf", "copy", "copy_p", "clamp",
    "square", "sqrt", "rsqrt", "pow", "stop_gradient"})
#: what the softmax's shift ``c`` may be computed with besides those
_SHIFT = POINTWISE | {"reduce_max"}
JITS = ("pjit", "jit")


@dataclass
class Region:
    """One matched attention: its contractions, the ``mod`` chain, softmax axes and operands."""

    qk: Any                 # the dot_general equation q k
    pv: Any                 # the dot_general equation p v
    p_side: int             # operand index of p in ``pv``
    chain: list[Any]        # equations of ``mod``, in order, from ``qk``'s output to ``x``
    x: Any                  # the softmax's input variable
    axes: tuple[int, ...]   # softmax axes of ``x``
    extras: list[Any]       # variables ``mod`` reads that the region does not compute
    eqns: set[int]          # indices of every equation the region replaces (``pv`` included)
    consts: dict[Any, Any] = field(default_factory=dict)  # constants of the program ``chain`` reads
    ranges: list[tuple[float, float]] = field(default_factory=list)  # bounds on each extra's values
    mask_eqns: set[int] = field(default_factory=set)  # indices of the equations computing the mask's known part


def _pointwise(eqn: Any, allowed: frozenset[str]) -> bool:  # noqa: ANN401
    name = eqn.primitive.name
    if name in JITS:
        return all(_pointwise(e, allowed) for e in eqn.params["jaxpr"].jaxpr.eqns)
    return name in allowed


def _producers(jaxpr: Any) -> dict[Any, int]:  # noqa: ANN401
    return {v: i for i, e in enumerate(jaxpr.eqns) for v in e.outvars}


def _users(jaxpr: Any) -> dict[Any, set[int]]:  # noqa: ANN401
    users: dict[Any, set[int]] = {}
    for i, e in enumerate(jaxpr.eqns):
        for v in e.invars:
            if isinstance(v, jcore.Var):
                users.setdefault(v, set()).add(i)
    return users


def _through(jaxpr: Any, prod: dict, v: Any, names: Sequence[str]) -> Any:  # noqa: ANN401
    """The variable ``v`` comes from after skipping equations of ``names`` (one operand each)."""
    while isinstance(v, jcore.Var) and v in prod and jaxpr.eqns[prod[v]].primitive.name in names:
        v = jaxpr.eqns[prod[v]].invars[0]
    return v


def _eqn(jaxpr: Any, prod: dict, v: Any, name: str) -> Any:  # noqa: ANN401
    if isinstance(v, jcore.Var) and v in prod and jaxpr.eqns[prod[v]].primitive.name == name:
        return jaxpr.eqns[prod[v]]
    return None


def _closure_up(jaxpr: Any, prod: dict, start: Any, allowed: frozenset[str]) -> tuple[set[int], set[int]]:  # noqa: ANN401
    """(equations reached from ``start`` upwards through ``allowed`` ones, dot_generals at the edge)."""
    seen, edge, todo = set(), set(), [start]
    while todo:
        v = todo.pop()
        if not isinstance(v, jcore.Var) or v not in prod:
            continue
        i = prod[v]
        e = jaxpr.eqns[i]
        if e.primitive.name == "dot_general":
            edge.add(i)
        elif i not in seen and _pointwise(e, allowed):
            seen.add(i)
            todo.extend(e.invars)
    return seen, edge


def _descendants(jaxpr: Any, i: int, within: set[int]) -> set[int]:  # noqa: ANN401
    """Equations of ``within`` that depend on equation ``i``'s outputs."""
    live = set(jaxpr.eqns[i].outvars)
    out = set()
    for j in sorted(within):
        e = jaxpr.eqns[j]
        if j > i and any(isinstance(v, jcore.Var) and v in live for v in e.invars):
            out.add(j)
            live.update(e.outvars)
    return out


def _match(jaxpr: Any, prod: dict, users: dict, outs: set, j: int, consts: dict) -> Region | None:  # noqa: ANN401, C901
    pv = jaxpr.eqns[j]
    (lc, rc), _ = pv.params["dimension_numbers"]
    for side in (0, 1):
        p = _through(jaxpr, prod, pv.invars[side], ("convert_element_type",))
        div = _eqn(jaxpr, prod, p, "div")
        if div is None:
            continue
        num, den = div.invars
        exp = _eqn(jaxpr, prod, num, "exp")
        red = _eqn(jaxpr, prod, _through(jaxpr, prod, den, ("broadcast_in_dim", "reshape", "convert_element_type")),
                   "reduce_sum")
        sub = _eqn(jaxpr, prod, exp.invars[0], "sub") if exp is not None else None
        if sub is None or red is None or _through(jaxpr, prod, red.invars[0], ("convert_element_type",)) is not num:
            continue  # (a bf16 softmax sums its exponentials in fp32: a cast between)
        axes = tuple(sorted(int(a) for a in red.params["axes"]))
        x, c = sub.invars
        xs, cs = tuple(x.aval.shape), tuple(np.shape(c.aval) if hasattr(c, "aval") else ())
        if cs and (len(cs) != len(xs) or any(cs[a] != 1 for a in axes)):
            continue  # the shift must be constant along the softmax axes
        if tuple(pv.invars[side].aval.shape) != xs or \
                tuple(sorted(int(a) for a in (lc if side == 0 else rc))) != axes:
            continue  # p v must contract exactly the softmax axes
        up, edge = _closure_up(jaxpr, prod, x, POINTWISE)
        if len(edge) != 1:
            continue
        (q_i,) = edge
        chain = _descendants(jaxpr, q_i, up)
        if x not in set(jaxpr.eqns[q_i].outvars) and prod.get(x) not in chain:
            continue
        shift_up, _ = _closure_up(jaxpr, prod, c, _SHIFT)
        shift = _descendants(jaxpr, q_i, shift_up)
        softmax = {prod[sub.outvars[0]], prod[num], prod[red.outvars[0]], prod[p]}
        softmax |= _between(jaxpr, prod, den, red) | _between(jaxpr, prod, pv.invars[side], div)
        softmax |= _between(jaxpr, prod, red.invars[0], exp)
        region = {q_i, j} | chain | shift | softmax
        if any(jaxpr.eqns[i].primitive.name not in _SHIFT | {"dot_general", "reduce_sum", "exp", "div"}
               and not _pointwise(jaxpr.eqns[i], POINTWISE) for i in region):
            continue
        inner = {v for i in region - {j} for v in jaxpr.eqns[i].outvars}
        if inner & outs or any(users.get(v, set()) - region for v in inner):
            continue  # a value of the region is used elsewhere (attention weights returned, say)
        v_op = pv.invars[1 - side]
        qk = jaxpr.eqns[q_i]
        if v_op in inner or any(o in inner for o in qk.invars):
            continue
        extras = list(dict.fromkeys(v for i in sorted(chain) for v in jaxpr.eqns[i].invars
                                    if isinstance(v, jcore.Var) and v not in inner))
        made: set[int] = set()  # an extra's part made from indices and constants: the kernel makes it itself
        leaves: list[Any] = []
        for e in extras:
            anc, unknown = _ancestry(jaxpr, prod, e, consts)
            if not unknown or indexed([jaxpr.eqns[i] for i in anc]) or _reads(jaxpr, anc, consts):
                made |= anc
                leaves += unknown
            else:
                leaves.append(e)
        steps = [jaxpr.eqns[i] for i in sorted(chain | made)]
        used = {v: consts[v] for e in steps for v in e.invars if isinstance(v, jcore.Var) and v in consts}
        return Region(qk, pv, side, steps, x, axes, list(dict.fromkeys(leaves)), region, used, mask_eqns=made)
    return None


def _ancestry(jaxpr: Any, prod: dict, v: Any, consts: dict) -> tuple[set[int], list[Any]]:  # noqa: ANN401
    """(the pointwise and data-moving equations computing ``v``, ``iota`` included; the values they
    start from that are neither literals nor the program's ``consts``: inputs, or results of other
    equations)."""
    found: set[int] = set()
    leaves: list[Any] = []
    todo = [v]
    while todo:
        u = todo.pop()
        if isinstance(u, jcore.Literal) or u in consts:
            continue
        i = prod.get(u)
        if i is None or not _pointwise(jaxpr.eqns[i], POINTWISE | {"iota"}):
            if u not in leaves:
                leaves.append(u)
            continue
        if i not in found:
            found.add(i)
            todo.extend(jaxpr.eqns[i].invars)
    return found, leaves


def indexed(eqns: Sequence[Any]) -> bool:  # noqa: ANN401
    """Whether an ``iota`` is among ``eqns`` (jitted sub-calls included)."""
    return any(e.primitive.name == "iota" or (e.primitive.name in JITS and indexed(e.params["jaxpr"].jaxpr.eqns))
               for e in eqns)


def _reads(jaxpr: Any, eqns: set[int], consts: dict) -> bool:  # noqa: ANN401
    """Whether one of ``eqns`` reads a constant of the program."""
    return any(isinstance(v, jcore.Var) and v in consts for i in eqns for v in jaxpr.eqns[i].invars)


#: primitives whose result lies within the range of their first operand
_SAME_RANGE = frozenset({"convert_element_type", "broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims",
                         "copy", "copy_p", "stop_gradient", "reduce_max", "reduce_min", "rev", "slice",
                         "dynamic_slice", "optimization_barrier"})
_INF = float("inf")


def _dtype_range(dt: Any) -> tuple[float, float]:  # noqa: ANN401
    """Every value of dtype ``dt``: [0, 1] for bool, the integer limits, else unbounded."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return (0.0, 1.0)
    if np.issubdtype(dt, np.integer):
        return (float(np.iinfo(dt).min), float(np.iinfo(dt).max))
    return (-_INF, _INF)


def value_ranges(jaxpr: Any, consts: dict, ins: Sequence[tuple[float, float]] | None = None  # noqa: ANN401
                 ) -> dict[Any, tuple[float, float]]:
    """Bounds ``(lo, hi)`` on the values of every variable of ``jaxpr`` by interval arithmetic: exact
    for literals, known ``consts`` and ``iota``; ``ins`` (or the dtype's range: [0, 1] for a boolean
    input, unbounded for a float one) for the inputs; scales, offsets, casts, selects, max/min and
    data movement followed; any other result is bounded by its dtype only.

    >>> import jax, jax.numpy as jnp
    >>> closed = jax.make_jaxpr(lambda m: m.astype(jnp.float32) * -2.0)(jnp.ones(3, bool))
    >>> value_ranges(closed.jaxpr, {})[closed.jaxpr.outvars[0]]
    (-2.0, 0.0)
    """
    env: dict[Any, tuple[float, float]] = {}
    for v, r in zip(jaxpr.invars, ins or [_dtype_range(v.aval.dtype) for v in jaxpr.invars], strict=True):
        env[v] = r
    for v in jaxpr.constvars:
        env[v] = _array_range(consts[v]) if v in consts else _dtype_range(v.aval.dtype)

    def get(v: Any) -> tuple[float, float]:  # noqa: ANN401
        return _array_range(v.val) if isinstance(v, jcore.Literal) else env.get(v, _dtype_range(v.aval.dtype))

    for e in jaxpr.eqns:
        name = e.primitive.name
        r = [get(v) for v in e.invars]
        outs: list[tuple[float, float]] | None = None
        if name in JITS:
            sub = e.params["jaxpr"]
            inner = value_ranges(sub.jaxpr, dict(zip(sub.jaxpr.constvars, sub.consts, strict=True)), r)
            outs = [inner.get(v, _dtype_range(v.aval.dtype)) if isinstance(v, jcore.Var) else _array_range(v.val)
                    for v in sub.jaxpr.outvars]
        elif name == "iota":
            outs = [(0.0, float(e.params["shape"][e.params["dimension"]] - 1))]
        elif name in _SAME_RANGE:
            outs = [r[0]]
        elif name == "neg":
            outs = [(-r[0][1], -r[0][0])]
        elif name == "select_n":
            outs = [(min(x[0] for x in r[1:]), max(x[1] for x in r[1:]))]
        elif name in ("max", "min"):
            f = max if name == "max" else min
            outs = [(f(r[0][0], r[1][0]), f(r[0][1], r[1][1]))]
        elif name in ("add", "sub", "mul") and all(abs(x) < _INF for x in (*r[0], *r[1])):
            (a0, a1), (b0, b1) = r
            if name == "add":
                outs = [(a0 + b0, a1 + b1)]
            elif name == "sub":
                outs = [(a0 - b1, a1 - b0)]
            else:
                ps = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
                outs = [(min(ps) + 0.0, max(ps) + 0.0)]  # (+ 0.0: no -0.0)
        for i, v in enumerate(e.outvars):
            own = _dtype_range(v.aval.dtype)
            got = outs[i] if outs is not None else own
            env[v] = (max(got[0], own[0]), min(got[1], own[1]))
    return env


def _array_range(a: Any) -> tuple[float, float]:  # noqa: ANN401
    a = np.asarray(a)
    if not a.size:
        return (0.0, 0.0)
    return (float(a.min()), float(a.max()))


def _between(jaxpr: Any, prod: dict, v: Any, stop: Any) -> set[int]:  # noqa: ANN401
    """Indices of the one-operand equations from ``v`` up to (not including) equation ``stop``."""
    out = set()
    while isinstance(v, jcore.Var) and v in prod and jaxpr.eqns[prod[v]] is not stop:
        out.add(prod[v])
        v = jaxpr.eqns[prod[v]].invars[0]
    return out


def find_regions(jaxpr: Any, consts: Sequence[Any] | None = None,  # noqa: ANN401
                 inputs: dict[Any, Any] | None = None) -> dict[int, Region]:
    """{index of the ``p v`` equation: its region} of every attention in ``jaxpr`` (no nesting);
    ``consts``: the values of ``jaxpr``'s constvars where known, ``inputs``: of those invars whose
    values are known (a scan body's constants): a mask built from them is known."""
    prod, users = _producers(jaxpr), _users(jaxpr)
    known = dict(zip(jaxpr.constvars, consts, strict=True)) if consts is not None else {}
    known.update(inputs or {})
    ranges: dict[Any, tuple[float, float]] | None = None
    outs = {v for v in jaxpr.outvars if isinstance(v, jcore.Var)}
    found: dict[int, Region] = {}
    taken: set[int] = set()
    for j, e in enumerate(jaxpr.eqns):
        if e.primitive.name != "dot_general":
            continue
        r = _match(jaxpr, prod, users, outs, j, known)
        if r is not None and not r.eqns & taken:
            if r.extras and ranges is None:
                ranges = value_ranges(jaxpr, known)
            r.ranges = [ranges[v] if ranges is not None and v in ranges else _dtype_range(v.aval.dtype)
                        for v in r.extras]
            found[j] = r
            taken |= r.eqns
    return found


__all__ = ["JITS", "POINTWISE", "Region", "find_regions", "indexed", "value_ranges"]
