"""A broadcast product summed over ranks is one contraction: the graph rewrite that says so.

Source programs often write a matrix product as an elementwise product of broadcast operands and a
sum, ``(a[:, :, None] * b[None]).sum(1)`` (PyTorch or JAX) or ``(C[:, :, :, None] * B[:, :, None])
.sum(-1)``. Lowered op by op, that is an einsum ``mul`` (map ``mul``, reduce ``none``) writing the
whole broadcast product, then an einsum ``sum`` (map ``identity``, reduce ``add``) reading it: vector
work, and in the unfused bound a product tensor that crosses memory. A kernel computes the same
value as one matrix product and never stores the product, so pricing the two nodes as written is
not a lower bound (SOL-ExecBench L1/070, a Mamba2 chunk: the measured baseline ran faster).

:func:`contract_products` merges each such pair into one einsum with the product's iteration space,
its two operand accesses, map ``mul``, reduce ``add`` and the sum's output (its reduced ranks become
the contracted ranks): ``solar_io.metrics`` counts it as a contraction, MACs = the product's
iteration points, priced under the precision policy like any einsum (fp32 at the tf32 peak where the
policy allows it). The product tensor disappears. A pair is merged only where the pattern is whole:

- the product is an einsum ``mul`` of exactly two accesses (views, broadcasts and size-1 ranks
  live in their index expressions, or in the copies that wrote the operands: ``expand``, a
  ``contiguous()`` of one), none through an ``@index``, no scan, no scatter, that writes every point of its
  space once (plain distinct ranks), and neither operand is a 0-d tensor or an immediate
  (``x * 2.0`` summed is a scaled sum, not a contraction);
- its tensor is an intermediate, not a graph output, read by exactly one access of one node, the
  sum: map ``identity``, reduce ``add``, no scan or scatter, reading it at plain distinct ranks; the
  sum's own iteration space is those ranks plus size-1 ranks of its output only (``keepdim``);
- it is a matrix product: at least one rank the sum reduces is read by both operands, every reduced
  rank by at least one (a sum over a rank neither operand has would count each product once per
  element of that rank), and *each* operand is broadcast (does not read some rank, of size above 1,
  that the other reads), so every element of each meets many of the other, as the rows and columns
  of a matrix product do. A product where one operand reads every rank stays vector work, as written:
  an elementwise product of like tensors summed (``(dy * xhat).sum(0)`` in a norm's backward, a
  loss, a row-wise dot) or a matrix-vector product spelled that way (a group norm's backward): one
  operand's elements are each used once, so it is memory-bound wherever that operand comes from
  memory, and PyTorch's ``FlopCounterMode`` counts none of them as a matrix product either.

A mean is a sum then a scale (two nodes): its sum is merged and the scale stays. A product or sum
in another dtype keeps its operands' dtypes and the sum's output dtype (``bf16 * bf16`` summed into
``fp32`` is a bf16 contraction accumulating in fp32, as a matrix unit does). The merged node keeps
the sum's name, takes the op ``<product op>+<sum op>`` (the op once when both are the same) and the
attribute ``contracted_product: <product node>``, so the file says what was rewritten. It runs where
a frontend finishes its graph: ``GraphBuilder.build`` (PyTorch, JAX) and the loop-IR tracer, before
validation, so the executor runs the merged einsum against the source program.

>>> from solar_io.affine import parse_access as pa
>>> mul = Node("mul", "einsum", "aten.mul", (pa("a[I, K]"), pa("b[K, J]")), (pa("p[I, J, K]"),),
...            ("I", "J", "K"), map="mul", reduce="none")
>>> s = Node("sum", "einsum", "aten.sum", (pa("p[I, J, K]"),), (pa("c[I, J]"),), ("I", "J", "K"),
...          map="identity", reduce="add")
>>> contraction_nodes(contract_products([mul, s], {"c"}, {"I": 2, "J": 3, "K": 4}))
['sum: c[I, J] = sum(mul a[I, K] b[K, J]) over I, J, K']
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from ...affine import Access, AffineExpr, Indirect
from ...graph import Node

__all__ = ["contract_products", "contraction_nodes", "CONTRACTION_ATTR"]

#: the attribute a merged node carries: the name of the product node it absorbed
CONTRACTION_ATTR = "contracted_product"


def contract_products(nodes: Sequence[Node], keep: Collection[str], sizes: Mapping[str, int],
                      immediates: Collection[str] = ()) -> list[Node]:
    """``nodes`` (topological order) with each whole product-then-sum pair merged into one contraction
    (module docstring); ``keep`` names tensors that must stay (graph outputs), ``sizes`` the ranks'
    sizes, ``immediates`` the constants that are one repeated value (a product with one is a scale)."""
    readers: dict[str, int] = {}
    writer: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for t in _read_tensors(n):
            readers[t] = readers.get(t, 0) + 1
        for a in n.outputs:
            writer.setdefault(a.tensor, i)
    reader_of: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for a in n.inputs:
            reader_of.setdefault(a.tensor, i)
    out = list(nodes)
    dropped: set[int] = set()
    for i, p in enumerate(nodes):
        if not _is_product(p, sizes, immediates):
            continue
        t = p.outputs[0].tensor
        j = reader_of.get(t)
        if t in keep or readers.get(t) != 1 or writer.get(t) != i or j is None or j <= i:
            continue
        merged = _merge(p, nodes[j], sizes, [_stored_ranks(a, nodes, writer) for a in p.inputs])
        if merged is not None:
            out[j] = merged
            dropped.add(i)
    return [n for k, n in enumerate(out) if k not in dropped]


def contraction_nodes(nodes: Sequence[Node]) -> list[str]:
    """One line per merged node of ``nodes`` (for docs and debugging):
    ``name: out[...] = sum(mul x[...] y[...]) over SPACE``."""
    return [f"{n.name}: {n.outputs[0]} = sum(mul {n.inputs[0]} {n.inputs[1]}) over {', '.join(n.space)}"
            for n in nodes if dict(n.attrs).get(CONTRACTION_ATTR)]


def _read_tensors(n: Node) -> list[str]:
    """Every tensor ``n`` reads, once per access (indexes through ``@t`` and a scatter's ``init`` too)."""
    names = [a.tensor for a in n.inputs]
    for a in n.inputs + n.outputs:
        names.extend(e.tensor for e in a.index or () if isinstance(e, Indirect))
    if n.init is not None and n.init not in names:
        names.append(n.init)
    return names


def _plain(a: Access) -> tuple[str, ...] | None:
    """The ranks of an access whose every index is a distinct plain rank, else None."""
    if a.index is None or any(not (isinstance(e, AffineExpr) and e.is_rank()) for e in a.index):
        return None
    ranks = tuple(e.terms[0][0] for e in a.index)  # type: ignore[union-attr]
    return ranks if len(set(ranks)) == len(ranks) else None


def _is_product(n: Node, sizes: Mapping[str, int], immediates: Collection[str]) -> bool:
    if n.kind != "einsum" or n.map != "mul" or n.reduce != "none" or n.scan is not None or n.init is not None:
        return False
    if len(n.inputs) != 2 or len(n.outputs) != 1:
        return False
    for a in n.inputs:
        if a.index is None or any(isinstance(e, Indirect) for e in a.index) or a.tensor in immediates:
            return False
        if all(sizes.get(r) == 1 for e in a.index for r in e.ranks):  # type: ignore[union-attr]
            return False  # one element per point of the space (a 0-d or size-1 operand): a scaled sum
    ranks = _plain(n.outputs[0])
    return ranks is not None and set(ranks) == set(n.space) and len(ranks) == len(n.space)


def _stored_ranks(a: Access, nodes: Sequence[Node], writer: Mapping[str, int]) -> set[str]:
    """The ranks of a node's space that index the data behind access ``a``: through the copies that
    wrote its tensor (views such as ``expand``, ``permute`` and slices, or a ``contiguous()`` of one),
    a rank a copy broadcasts (an index ``0`` of its source) indexes nothing. Stops at any other
    writer (a reshape included: a ``repeat``, lowered through one, is not seen through)."""
    dims = [set(e.ranks) for e in a.index or ()]
    tensor = a.tensor
    for _ in range(64):
        i = writer.get(tensor)
        w = nodes[i] if i is not None else None
        if w is None or w.kind != "data_movement" or w.movement != "copy" or len(w.inputs) != 1 or w.pad:
            break
        src, out = w.inputs[0], _plain(w.outputs[0])
        if out is None or len(out) != len(dims) or src.index is None \
                or any(isinstance(e, Indirect) for e in src.index):
            break
        by_rank = dict(zip(out, dims, strict=True))
        if any(r not in by_rank for e in src.index for r in e.ranks):  # type: ignore[union-attr]
            break
        dims = [set().union(*(by_rank[r] for r in e.ranks)) for e in src.index]  # type: ignore[union-attr]
        tensor = src.tensor
    return set().union(*dims)


def _merge(p: Node, s: Node, sizes: Mapping[str, int], reads: list[set[str]]) -> Node | None:
    """The contraction of product ``p`` summed by ``s``, or None if ``s`` is not a whole sum of it
    (``reads``: the ranks each operand's memory is indexed by, :func:`_stored_ranks`)."""
    if s.kind != "einsum" or s.map != "identity" or s.reduce != "add" or s.scan is not None \
            or s.init is not None or len(s.inputs) != 1 or len(s.outputs) != 1 or s.pad:
        return None
    read = _plain(s.inputs[0])
    written = _plain(p.outputs[0])
    if read is None or written is None or len(read) != len(written):
        return None
    rename = dict(zip(read, written, strict=True))  # the sum's ranks -> the product's ranks
    extra = [r for r in s.space if r not in rename]
    if len(set(s.space)) != len(s.space) or any(sizes.get(r) != 1 or r in p.space for r in extra):
        return None
    out = s.outputs[0]
    if out.index is None or any(isinstance(e, Indirect) for e in out.index):
        return None
    index = tuple(_renamed(e, rename) for e in out.index)  # type: ignore[arg-type]
    kept = {r for e in index for r in e.ranks}
    reduced = [r for r in p.space if r not in kept]
    if any(r not in reads[0] | reads[1] for r in reduced):
        return None  # a reduced rank neither operand reads
    if not any(r in reads[0] & reads[1] for r in reduced):
        return None  # no rank summed over both factors: a scaled sum, not a contraction
    if not all({r for r in reads[1 - k] - reads[k] if sizes.get(r, 0) > 1} for k in (0, 1)):
        return None  # an operand not broadcast: a dot of like tensors, or a matrix-vector product
    op = p.op if p.op == s.op else f"{p.op}+{s.op}"
    attrs = tuple(sorted((dict(p.attrs) | dict(s.attrs) | {CONTRACTION_ATTR: p.name}).items()))
    return replace(s, op=op, space=tuple(p.space) + tuple(extra), inputs=p.inputs, outputs=(Access(out.tensor, index),),
                   map="mul", reduce="add", pad=p.pad, fill=p.fill, attrs=attrs,
                   location=s.location or p.location)


def _renamed(e: AffineExpr, rename: Mapping[str, str]) -> AffineExpr:
    terms = tuple(sorted((rename.get(r, r), c) for r, c in e.terms))
    return AffineExpr(terms, e.const)
