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
from dataclasses import dataclass
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


def _match(jaxpr: Any, prod: dict, users: dict, outs: set, j: int) -> Region | None:  # noqa: ANN401, C901
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
        made = set()  # extras computed from indices alone (a causal mask): the kernel makes them itself
        for e in list(extras):
            anc = _generated(jaxpr, prod, e)
            if anc is not None:
                made |= anc
                extras.remove(e)
        return Region(qk, pv, side, [jaxpr.eqns[i] for i in sorted(chain | made)], x, axes, extras, region)
    return None


def _generated(jaxpr: Any, prod: dict, v: Any) -> set[int] | None:  # noqa: ANN401
    """The equations computing ``v`` when they read only literals and ``iota`` (pointwise or moving
    data), else None."""
    found: set[int] = set()
    todo = [v]
    while todo:
        u = todo.pop()
        if isinstance(u, jcore.Literal):
            continue
        if u not in prod:
            return None  # an input or a constant of the program
        i = prod[u]
        if i in found:
            continue
        if not _pointwise(jaxpr.eqns[i], POINTWISE | {"iota"}):
            return None
        found.add(i)
        todo.extend(jaxpr.eqns[i].invars)
    return found


def _between(jaxpr: Any, prod: dict, v: Any, stop: Any) -> set[int]:  # noqa: ANN401
    """Indices of the one-operand equations from ``v`` up to (not including) equation ``stop``."""
    out = set()
    while isinstance(v, jcore.Var) and v in prod and jaxpr.eqns[prod[v]] is not stop:
        out.add(prod[v])
        v = jaxpr.eqns[prod[v]].invars[0]
    return out


def find_regions(jaxpr: Any) -> dict[int, Region]:  # noqa: ANN401
    """{index of the ``p v`` equation: its region} of every attention in ``jaxpr`` (no nesting)."""
    prod, users = _producers(jaxpr), _users(jaxpr)
    outs = {v for v in jaxpr.outvars if isinstance(v, jcore.Var)}
    found: dict[int, Region] = {}
    taken: set[int] = set()
    for j, e in enumerate(jaxpr.eqns):
        if e.primitive.name != "dot_general":
            continue
        r = _match(jaxpr, prod, users, outs, j)
        if r is not None and not r.eqns & taken:
            found[j] = r
            taken |= r.eqns
    return found


__all__ = ["JITS", "POINTWISE", "Region", "find_regions"]
