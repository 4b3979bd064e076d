"""Attention written as math with a mask of known values: its score tensors at the fraction kept.

References often spell causal attention by hand (the Hugging Face eager path)::

    w = (q @ k.transpose(-2, -1)) * scale + torch.triu(torch.full((S, S), -inf), diagonal=1)
    o = softmax(w, dim=-1) @ v

A position the mask sets to ``-inf`` has probability exactly 0, so a kernel that skips the masked
blocks (a flash kernel with ``is_causal``, what ``torch.compile``'s attention patterns become) never
computes its score, exp or product with ``v``. The sdpa rule prices that by declaring every score
tensor at the kept fraction (tensor density, ``rules/attention.py``); :func:`masked_regions` does the
same for the math path, on the built graph:

- a *known mask* is the output of an elementwise ``where(c, a, b)`` whose condition ``c`` is a
  generated bool table the capture holds (``tril``/``triu`` of a constant fill, ``masked_fill`` of such
  a table) and whose values ``a``, ``b`` are immediates, one of them ``-inf``: it keeps the positions
  where it is finite, each row at least one (else the softmax is undefined and nothing is changed);
- a *region* is ``x = add(X, mask)`` over the score ranks ``[.., S, T]`` (the mask's two ranks), ``X``
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


def keep_of(cond: np.ndarray, a: float, b: float) -> np.ndarray | None:
    """Positions ``where(cond, a, b)`` is finite, when exactly one of ``a``, ``b`` is ``-inf``; else None."""
    if a == -math.inf and math.isfinite(b):
        return ~cond
    if b == -math.inf and math.isfinite(a):
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


def known_masks(g: Graph, const_data: Mapping[str, np.ndarray]) -> dict[str, tuple[int, int]]:
    """Mask tensor -> (positions kept, positions) of every known ``-inf`` mask of ``g`` (module docstring)."""
    tmap = g.tensor_map
    out: dict[str, tuple[int, int]] = {}
    for n in g.nodes:
        if n.kind != "einsum" or n.map != "where" or n.reduce != "none" or len(n.inputs) != 3:
            continue
        c, a, b = (tmap[x.tensor] for x in n.inputs)
        if not (c.generated and c.name in const_data and a.value is not None and b.value is not None):
            continue
        if _ranks(n.inputs[0]) != _ranks(n.outputs[0]) or len(c.ranks) != 2:
            continue
        keep = keep_of(np.asarray(const_data[c.name], dtype=bool), float(a.value), float(b.value))
        if keep is not None and keep.ndim == 2 and keep.any(axis=1).all():
            out[n.outputs[0].tensor] = (int(keep.sum()), int(keep.size))
    return out


def masked_regions(g: Graph, const_data: Mapping[str, np.ndarray]) -> Graph:
    """``g`` with the score tensors of each masked math-path attention at the kept fraction (module
    docstring), and an ``attention_mask`` assumption when there is one."""
    masks = known_masks(g, const_data)
    if not masks:
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
        if n.kind != "einsum" or n.map != "add" or n.reduce != "none" or len(n.inputs) != 2:
            continue
        at = [i for i, a in enumerate(n.inputs) if a.tensor in masks]
        if len(at) != 1:
            continue
        st = _ranks(n.inputs[at[0]])
        out_ranks = _ranks(n.outputs[0])
        if st is None or out_ranks is None or len(st) != 2 or out_ranks[-2:] != st:
            continue
        region = _region(n, n.inputs[1 - at[0]].tensor, st, tmap, producer, consumers, outputs)
        if region is None or any(t in dense or tmap[t].density is not None for t in region):
            continue
        kept, total = masks[n.inputs[at[0]].tensor]
        dense.update((t, kept / total) for t in region)
        fractions.append(kept / total)
    if not dense:
        return g
    tensors = tuple(replace(t, density=dense[t.name]) if t.name in dense else t for t in g.tensors)
    said = Assumption("attention_mask", "math-path attention",
                      f"{len(fractions)} attention(s) written as softmax(q k^T + mask) v with a -inf mask of known "
                      "values (a triu/tril of -inf, a masked_fill of a generated table): a kernel that skips the "
                      "masked blocks computes only the kept positions, so every score tensor is declared at the "
                      "fraction kept (tensor density), each row keeping at least one key",
                      (("regions", len(fractions)), ("kept_fraction", tuple(fractions))))
    return replace(g, tensors=tensors, assumptions=g.assumptions + (said,))


def _region(add: Node, scores: str, st: tuple[str, ...], tmap: Mapping, producer: Mapping, consumers: Mapping,
            outputs: set[str]) -> list[str] | None:
    """The tensors over the score ranks of the attention ``add`` masks (module docstring), or None."""
    region = [add.outputs[0].tensor]
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
    frontier, seen, ends = [add.outputs[0].tensor], set(region), 0
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


__all__ = ["keep_of", "known_masks", "masked_regions"]
