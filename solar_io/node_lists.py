"""Assumption values the counts and bounds read: lists of graph nodes, the memory a node's result
shares, and the precision a file admits for its fp32 contractions (:func:`fp32_at_half`).

A frontend's assumption can list nodes whose counts it changes (:mod:`solar_io.metrics`):
``uncharged_work`` (their compute is not charged) and ``masked_writes`` (``x[mask] = v`` through a mask
whose values the file does not hold: charged the least any selection costs). The format checks
that each listed name is a node of the graph; a builder that drops dead nodes keeps the lists to
the nodes it has (:func:`with_listed_nodes`).

>>> from solar_io.graph import Assumption, Graph
>>> g = Graph((), (), (), assumptions=(Assumption("training", "attention", "d", ((UNCHARGED, ("a", "b")),)),))
>>> sorted(listed_nodes(g, UNCHARGED))
['a', 'b']
"""

from __future__ import annotations

from dataclasses import replace

from .graph import Graph, Node

#: the assumption value naming the nodes whose compute is not charged (module docstring)
UNCHARGED = "uncharged_work"
#: the assumption value naming the masked in-place writes (module docstring)
MASKED_WRITES = "masked_writes"
#: the assumption values that name graph nodes (kept to the nodes a graph has: :func:`with_listed_nodes`)
NODE_LISTS = (UNCHARGED, MASKED_WRITES)


def listed_nodes(g: Graph, key: str) -> frozenset[str]:
    """Names of the nodes ``g``'s assumptions list under the value ``key`` (one of :data:`NODE_LISTS`)."""
    return frozenset(str(n) for a in g.assumptions for k, v in a.values if k == key
                     for n in (v if isinstance(v, tuple) else (v,)))


def uncharged_nodes(g: Graph) -> frozenset[str]:
    """Names of the nodes ``g``'s assumptions list under ``uncharged_work``."""
    return listed_nodes(g, UNCHARGED)


def in_place_bases(g: Graph) -> dict[str, str]:
    """Node name -> the tensor whose memory its result is, the rest of it kept: a scatter's ``init``, and a
    ``masked_writes`` node's operand of the result's shape and dtype that is not its mask (``x`` of
    ``where(mask, v, x)``; none for ``where(mask, v, 0)``, whose zeros are made). A later read of the result
    beyond what was written reads that tensor's memory (:mod:`solar_io.views`, traffic residency).

    >>> from solar_io.affine import parse_access
    >>> from solar_io.graph import Assumption, Node, Tensor
    >>> g = Graph((("N", 4),), (Tensor("m", ("N",), "bool", "input"), Tensor("x", ("N",), "fp32", "input"),
    ...           Tensor("v", (), "fp32", "constant", value=1.0), Tensor("y", ("N",), "fp32", "output")),
    ...           (Node("fill", "einsum", "aten.index_put", (parse_access("m[N]"), parse_access("v[]"),
    ...                 parse_access("x[N]")), (parse_access("y[N]"),), space=("N",), map="where", reduce="none"),),
    ...           assumptions=(Assumption("masked_fill", "s", "d", ((MASKED_WRITES, ("fill",)),)),))
    >>> in_place_bases(g)
    {'fill': 'x'}
    """
    masked = listed_nodes(g, MASKED_WRITES)
    out: dict[str, str] = {}
    for n in g.nodes:
        if n.init is not None and n.outputs:
            out[n.name] = n.init
        elif n.name in masked and n.outputs:
            base = masked_base(g, n)
            if base is not None:
                out[n.name] = base
    return out


def made_outputs(g: Graph) -> dict[str, str]:
    """Masked-write node whose result is a graph output -> the tensor whose memory that output is, where
    the graph makes that memory (a fill a masked write made, or an intermediate) rather than an input's:
    ``q = zeros_like(x); q[m1] = 1; q[m2] = 2; return q``. The output leaves the kernel, so that memory is
    written whole once (:mod:`solar_io.views`, the traffic residency model), however little the masked
    writes themselves write; unless the caller hands the output in already holding the fill
    (:func:`prefilled_fills`)."""
    skip = prefilled_fills(g)
    return {n: cur for n, cur in _made_chains(g).items() if cur not in skip}


def prefilled_fills(g: Graph) -> frozenset[str]:
    """Results of masked writes that make their memory from an immediate fill (:func:`makes_memory`) where
    that memory is a graph output handed in already holding the fill's value (format 1.8 ``prefilled``,
    :mod:`solar_io.prefill`): ``q = zeros_like(x); q[m] = 1; return q`` into zeroed memory writes only what
    the masks select, a count from none to all, so nothing of the fill is charged."""
    masked = listed_nodes(g, MASKED_WRITES)
    tmap = g.tensor_map
    if not masked or not any(t.prefilled is not None for t in g.tensors):
        return frozenset()
    output_of = {cur: g.node_map[n].outputs[0].tensor for n, cur in _made_chains(g).items()}
    out = set()
    for n in g.nodes:
        if n.name in masked and n.outputs and makes_memory(g, n):
            mem = n.outputs[0].tensor
            o = tmap.get(mem if tmap[mem].role == "output" else output_of.get(mem))
            fills = {tmap[a].value for a in _operand_like_result(g, n, stored=False)}
            if o is not None and o.prefilled is not None and fills == {o.prefilled}:
                out.add(mem)
    return frozenset(out)


def _made_chains(g: Graph) -> dict[str, str]:
    """:func:`made_outputs` before the prefilled outputs are taken out."""
    masked = listed_nodes(g, MASKED_WRITES)
    if not masked:
        return {}
    tmap, bases = g.tensor_map, in_place_bases(g)
    by_result = {n.outputs[0].tensor: n.name for n in g.nodes if n.name in bases}
    out: dict[str, str] = {}
    for n in g.nodes:
        if n.name not in masked or not n.outputs or tmap[n.outputs[0].tensor].role != "output":
            continue
        cur, seen = n.outputs[0].tensor, set()
        while cur in by_result and cur not in seen:  # back along the in-place chain to its memory
            seen.add(cur)
            cur = bases[by_result[cur]]
        if cur != n.outputs[0].tensor and tmap[cur].role not in ("input", "weight"):
            out[n.name] = cur
    return out


def masked_base(g: Graph, n: Node) -> str | None:
    """The stored operand whose memory masked write ``n``'s result is (``x`` of ``where(mask, v, x)``),
    or None where there is none (see :func:`makes_memory`)."""
    got = _operand_like_result(g, n, stored=True)
    return got[0] if got else None


def makes_memory(g: Graph, n: Node) -> bool:
    """Whether masked write ``n`` writes into a fill the graph holds as a value (``x = zeros_like(y);
    x[mask] = v``): eager's fill kernel writes that memory whole, so ``n``'s result is made, every element
    written. Not so for ``where(mask, v, 0)``, the temporary of ``x[mask] += v``, which eager never makes."""
    return masked_base(g, n) is None and bool(_operand_like_result(g, n, stored=False))


def _operand_like_result(g: Graph, n: Node, stored: bool) -> list[str]:
    o = g.tensor_map[n.outputs[0].tensor]
    return [a.tensor for a in n.inputs if g.tensor_map[a.tensor].dtype == o.dtype != "bool"
            and g.shape(a.tensor) == g.shape(o.name) and g.tensor_map[a.tensor].stored == stored]


def with_listed_nodes(g: Graph) -> Graph:
    """``g`` with its assumptions' node lists (:data:`NODE_LISTS`) kept to the nodes it has (a builder
    drops dead nodes after a frontend listed them); an assumption left with an empty list keeps it empty."""
    names = g.node_map
    fixed = tuple(replace(a, values=tuple((k, tuple(n for n in v if n in names)) if k in NODE_LISTS else (k, v)
                                          for k, v in a.values)) for a in g.assumptions)
    return g if fixed == g.assumptions else replace(g, assumptions=fixed)


#: the assumption kind, and its value, by which a file says its fp32 contractions may run on 16-bit tensor cores
HALF_ASSUMPTION, HALF_VALUE = "precision", ("fp32_matrix", "bf16/fp16")


def fp32_at_half(g: Graph) -> bool:
    """Whether ``g`` says its fp32 contractions may run at 16-bit peaks (a ``precision`` assumption with
    ``fp32_matrix: bf16/fp16``): ``bound`` then prices them at the fastest of the fp32, tf32, bf16 and fp16
    matrix peaks (``--strict-fp32``: fp32 only). The trace frontend writes it (a benchmark definition
    admits solutions within its tolerances: ``frontends/trace/capture.py``)."""
    return any(a.kind == HALF_ASSUMPTION and HALF_VALUE in a.values for a in g.assumptions)
