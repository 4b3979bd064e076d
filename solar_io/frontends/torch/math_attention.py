"""Attention written as math with a mask of known values: its score tensors at the fraction kept.

References often spell causal attention by hand (the Hugging Face eager path)::

    w = (q @ k.transpose(-2, -1)) * scale + torch.triu(torch.full((S, S), -inf), diagonal=1)
    o = softmax(w, dim=-1) @ v

A position the mask sets to ``-inf`` has probability exactly 0, so a kernel that skips the masked
blocks (a flash kernel with ``is_causal``, what ``torch.compile``'s attention patterns become) never
computes its score, exp or product with ``v``. The sdpa rule prices that by declaring every score
tensor at the kept fraction (tensor density, ``rules/attention.py``); :func:`masked_regions` does the
same for the math path, on the built graph:

- a *known mask* has the values ``where(c, a, b)`` of a generated bool table ``c`` the capture holds
  (``tril``/``triu`` of a constant fill, ``masked_fill`` of such a table) and two immediates, through
  casts and logical ``not`` (:func:`two_valued`); a value of ``-inf`` or ``torch.finfo(t).min``
  (:data:`MASKED`, as the sdpa rule counts) masks its position, each row keeping at least one (else
  nothing is changed);
- a *region* is ``x = add(X, mask)``, ``where(cond, X, -inf)`` or ``where(cond, -inf, X)`` over the score
  ranks ``[.., S, T]`` (the mask's two ranks), ``X``
  reached back from a contraction (``q k^T``) through elementwise nodes whose other inputs are
  immediates (the scale, casts), and every tensor ``x`` reaches over ``[.., S, T]`` up to the contractions
  that sum over ``T`` (``p v``), through elementwise nodes and the softmax's reductions over ``T``;
- a region whose tensors are read by anything else, or returned, is left as it is (those readers
  would see the masked positions).

Each tensor of a region over ``[.., S, T]`` gets ``density = kept / (S T)``; the graph's
``attention_mask`` assumption says how many regions and at which fraction.

>>> import numpy as np
>>> int(keep_of(np.triu(np.ones((4, 4), bool), 1), -np.inf, 0.0).sum())  # the triangle with the diagonal
10
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from ...affine import AffineExpr
from ...graph import Assumption, Graph, Node

#: per float dtype, the largest mask value that masks its position: ``torch.finfo(t).min`` (Hugging Face's
#: fill; ``-inf`` too), as the sdpa rule counts masks (``rules/masks.py``): the softmax gives it exactly 0
MASKED = {"fp64": float(np.finfo(np.float64).min), "fp32": float(np.finfo(np.float32).min),
          "bf16": -3.3895313892515355e38, "fp16": float(np.finfo(np.float16).min)}


def keep_of(cond: np.ndarray, a: float, b: float, floor: float = -math.inf) -> np.ndarray | None:
    """Positions ``where(cond, a, b)`` keeps (its value above ``floor``, a dtype's :data:`MASKED`), when one of
    ``a``, ``b`` is masked and the other kept; else None (every position kept, or none)."""
    if a <= floor < b:
        return ~cond
    if b <= floor < a:
        return cond
    return None


def _ranks(a) -> tuple[str, ...] | None:  # noqa: ANN001
    """The rank each dim of an access reads, when every index is one plain rank (else None)."""
    out = []
    for e in a.index or ():
        if type(e) is not AffineExpr or e.const != 0 or len(e.terms) != 1 or e.terms[0][1] != 1:
            return None
        out.append(e.terms[0][0])
    return tuple(out)


def _contraction(n: Node) -> bool:
    return n.kind == "einsum" and n.map == "mul" and n.reduce == "add" and n.init is None


def two_valued(g: Graph, const_data: Mapping[str, np.ndarray]) -> dict[str, tuple[np.ndarray, float, float, float]]:
    """Tensor -> ``(table, a, b, floor)`` for each 2-d tensor of ``g`` whose values are ``where(table, a, b)``
    (``floor``: its dtype's :data:`MASKED`, ``-inf`` for a bool): a
    generated bool table the capture holds and two immediates (``tril``/``triu`` of a fill, ``masked_fill``
    of such a table on zeros), and its casts and logical ``not`` (``~mask``, ``.bool()``)."""
    tmap = g.tensor_map
    out: dict[str, tuple[np.ndarray, float, float, float]] = {}
    for n in g.nodes:
        if n.kind != "einsum" or n.reduce != "none" or _ranks(n.outputs[0]) is None:
            continue
        o, ins = n.outputs[0], n.inputs
        if any(_ranks(a) != _ranks(o) for a in ins if tmap[a.tensor].value is None):
            continue
        if n.map == "where" and len(ins) == 3:
            c, a, b = (tmap[x.tensor] for x in ins)
            if c.generated and c.name in const_data and len(c.ranks) == 2 and a.value is not None \
                    and b.value is not None:
                out[o.tensor] = (np.asarray(const_data[c.name], dtype=bool), float(a.value), float(b.value),
                                 MASKED.get(tmap[o.tensor].dtype, -math.inf))
        elif n.map in ("identity", "not") and len(ins) == 1 and ins[0].tensor in out:
            table, a, b, floor = out[ins[0].tensor]
            if tmap[o.tensor].dtype == "bool" or n.map == "not":
                a, b = float(bool(a)), float(bool(b))
            if n.map == "not":
                a, b = 1.0 - a, 1.0 - b
            out[o.tensor] = (table, a, b, MASKED.get(tmap[o.tensor].dtype, floor))  # the cast's dtype decides
    return out


def _entry(n: Node, known: Mapping, tmap: Mapping) -> tuple[str, np.ndarray, tuple[str, ...]] | None:
    """``(scores, keep, (S, T))`` when node ``n`` masks a score tensor with a known mask: ``scores + mask``,
    ``where(cond, scores, v)`` or ``where(cond, v, scores)`` with ``v`` masked (module docstring)."""
    if n.kind != "einsum" or n.reduce != "none" or _ranks(n.outputs[0]) is None:
        return None
    ins = n.inputs
    if n.map == "add" and len(ins) == 2:
        at = [i for i, a in enumerate(ins) if a.tensor in known]
        if len(at) != 1:
            return None
        keep, st, scores = keep_of(*known[ins[at[0]].tensor]), _ranks(ins[at[0]]), ins[1 - at[0]].tensor
    elif n.map == "where" and len(ins) == 3 and ins[0].tensor in known:
        table, ca, cb, _ = known[ins[0].tensor]
        values = [tmap[a.tensor].value for a in ins[1:]]
        floor = MASKED.get(tmap[n.outputs[0].tensor].dtype, -math.inf)
        if values[1] is not None and values[1] <= floor and values[0] is None:  # where(c, scores, -inf)
            keep, scores = keep_of(table, 0.0 if ca else -math.inf, 0.0 if cb else -math.inf), ins[1].tensor
        elif values[0] is not None and values[0] <= floor and values[1] is None:  # where(c, -inf, scores)
            keep, scores = keep_of(table, -math.inf if ca else 0.0, -math.inf if cb else 0.0), ins[2].tensor
        else:
            return None
        st = _ranks(ins[0])
    else:
        return None
    if keep is None or st is None or len(st) != 2 or _ranks(n.outputs[0])[-2:] != st or not keep.any(axis=1).all():
        return None
    return scores, keep, st


def masked_regions(g: Graph, const_data: Mapping[str, np.ndarray]) -> Graph:
    """``g`` with the score tensors of each masked math-path attention at the kept fraction (module
    docstring), and an ``attention_mask`` assumption when there is one."""
    known = two_valued(g, const_data)
    if not known:
        return g
    tmap, producer, consumers = g.tensor_map, {}, {}
    for n in g.nodes:
        for a in n.outputs:
            producer[a.tensor] = n
        for a in n.inputs:
            consumers.setdefault(a.tensor, []).append(n)
    outputs = {t.name for t in g.tensors if t.role == "output"}
    dense: dict[str, float] = {}
    fractions: list[float] = []
    for n in g.nodes:
        entry = _entry(n, known, tmap)
        if entry is None:
            continue
        scores, keep, st = entry
        region = _region(n, scores, st, tmap, producer, consumers, outputs)
        if region is None or any(t in dense or tmap[t].density is not None for t in region):
            continue
        fraction = int(keep.sum()) / keep.size
        dense.update((t, fraction) for t in region)
        fractions.append(fraction)
    if not dense:
        return g
    tensors = tuple(replace(t, density=dense[t.name]) if t.name in dense else t for t in g.tensors)
    said = Assumption("attention_mask", "math-path attention",
                      f"{len(fractions)} attention(s) written as softmax(q k^T + mask) v with a mask of known "
                      "values (a triu/tril of -inf or of torch.finfo's min, a masked_fill of a generated table): a "
                      "kernel that skips the masked blocks computes only the kept positions, so every score tensor "
                      "is declared at the fraction kept (tensor density), each row keeping at least one key",
                      (("regions", len(fractions)), ("kept_fraction", tuple(fractions))))
    return replace(g, tensors=tensors, assumptions=g.assumptions + (said,))


def _region(entry: Node, scores: str, st: tuple[str, ...], tmap: Mapping, producer: Mapping, consumers: Mapping,
            outputs: set[str]) -> list[str] | None:
    """The tensors over the score ranks of the attention whose mask ``entry`` applies (module docstring),
    or None."""
    region = [entry.outputs[0].tensor]
    cur = scores
    while True:  # back to the scores' contraction through elementwise nodes with immediates
        p = producer.get(cur)
        if p is None or cur in outputs or len(consumers.get(cur, ())) != 1:
            return None
        region.append(cur)
        if _contraction(p):
            break
        others = [a.tensor for a in p.inputs[1:]]
        if p.kind != "einsum" or p.reduce != "none" or any(tmap[t].value is None for t in others):
            return None
        cur = p.inputs[0].tensor
    frontier, seen, ends = [entry.outputs[0].tensor], set(region), 0
    while frontier:  # forward to the contractions over T
        t = frontier.pop()
        if t in outputs:
            return None
        for c in consumers.get(t, ()):
            o = c.outputs[0]
            ranks = _ranks(o)
            if _contraction(c) and ranks is not None and st[-1] not in ranks:
                ends += 1
                continue
            if c.kind != "einsum" or ranks is None:
                return None
            if ranks[-2:] == st and c.reduce == "none":
                if o.tensor not in seen:
                    seen.add(o.tensor)
                    region.append(o.tensor)
                    frontier.append(o.tensor)
            elif st[-1] not in ranks and c.reduce in ("max", "add"):  # the softmax's row statistics
                frontier.append(o.tensor)
            else:
                return None
    return region if ends else None


__all__ = ["MASKED", "keep_of", "masked_regions", "two_valued"]
