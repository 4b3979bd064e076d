"""Give every distinct dimension of a graph its own rank name, so that ranks can be split by name.

A frontend may reuse one rank name for dimensions that only happen to have the same size (the
torch frontend names a Llama block's residual stream ``D`` in one place and ``D2`` in another, and
calls the attention output ``D`` too). Sharding splits *dimensions*, so :func:`canonical` first
renames ranks by what the graph says about them: a tensor dim and the space rank that indexes it
plainly (``t[..., R, ...]``, same size) are one dimension; each node's space ranks are its own;
a reshape joins a dim of its input and of its output when a group of dims maps one to one. The
result computes exactly what the original does (same sizes, counts and bytes; only names change).

>>> from solar_io import load
>>> g = canonical(load("examples/graphs/mlp.yaml"))
>>> [t.ranks for t in g.tensors][:3]
[('B', 'D'), ('D', 'H'), ('H',)]
"""

from __future__ import annotations

from dataclasses import replace

from solar_io.affine import Access, AffineExpr, Indirect
from solar_io.graph import WHOLE_TENSOR_KINDS, Graph, Node

Var = tuple[str, str, object]  # ("t", tensor, dim index) or ("n", node, space rank)


class _UF:
    """Union-find over dims; a class never holds two space ranks of one node (attention's query and
    key positions are one dimension of the data but two ranks of its score einsum)."""

    def __init__(self) -> None:
        self.parent: dict[Var, Var] = {}
        self.spaces: dict[Var, set[str]] = {}  # root -> the nodes with a space rank in the class

    def find(self, v: Var) -> Var:
        p = self.parent
        p.setdefault(v, v)
        while p[v] != v:
            p[v] = p[p[v]]
            v = p[v]
        return v

    def union(self, a: Var, b: Var) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        sa, sb = self.spaces.get(ra, set()), self.spaces.get(rb, set())
        small, large = (sa, sb) if len(sa) <= len(sb) else (sb, sa)
        if any(n in large for n in small):
            return  # would merge two ranks of one node's space: keep them apart
        if len(sa) < len(sb):
            ra, rb = rb, ra
        self.parent[rb] = ra
        large |= small
        self.spaces[ra] = large
        self.spaces.pop(rb, None)

    def space(self, node: str, rank: str) -> None:
        v = ("n", node, rank)
        self.spaces.setdefault(self.find(v), set()).add(node)


def _reshape_pairs(a: list[int], b: list[int]) -> list[tuple[int, int]]:
    """(input dim, output dim) pairs of a row-major reshape that map one dim to one dim."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            out.append((i, j))
            i += 1
            j += 1
            continue
        pa, pb = a[i], b[j]
        i += 1
        j += 1
        while pa != pb and (i < len(a) or j < len(b)):
            if pa < pb and i < len(a):
                pa *= a[i]
                i += 1
            elif j < len(b):
                pb *= b[j]
                j += 1
            else:
                break
    return out


def canonical(g: Graph) -> Graph:
    """``g`` with one rank name per distinct dimension (see the module docstring)."""
    sizes = g.rank_sizes
    tmap = g.tensor_map
    uf = _UF()
    for t in g.tensors:
        for i in range(len(t.ranks)):
            uf.find(("t", t.name, i))
    for n in g.nodes:
        for r in n.space:
            uf.space(n.name, r)
        if n.kind == "data_movement" and n.movement == "reshape":
            src, dst = tmap[n.inputs[0].tensor], tmap[n.outputs[0].tensor]
            for i, j in _reshape_pairs([sizes[r] for r in src.ranks], [sizes[r] for r in dst.ranks]):
                uf.union(("t", src.name, i), ("t", dst.name, j))
            continue
        if n.kind == "data_movement" and n.movement == "concat":
            dst = tmap[n.outputs[0].tensor]
            for a in n.inputs:
                for i, r in enumerate(tmap[a.tensor].ranks):
                    if i < len(dst.ranks) and dst.ranks[i] != n.axis and sizes[r] == sizes[dst.ranks[i]]:
                        uf.union(("t", a.tensor, i), ("t", dst.name, i))
            continue
        if n.kind in WHOLE_TENSOR_KINDS:
            continue
        for a in (*n.inputs, *n.outputs):
            for i, (d, e) in enumerate(zip(tmap[a.tensor].ranks, a.index or (), strict=False)):
                if isinstance(e, AffineExpr) and e.is_rank() and sizes[e.terms[0][0]] == sizes[d]:
                    uf.union(("t", a.tensor, i), ("n", n.name, e.terms[0][0]))
    # name each class after the original rank of its first member, made unique
    names: dict[Var, str] = {}
    used: set[str] = set()
    ranks: list[tuple[str, int]] = []

    def name_of(v: Var, original: str) -> str:
        root = uf.find(v)
        if root not in names:
            new, k = original, 0
            while new in used:
                k += 1
                new = f"{original}_{k}"
            used.add(new)
            names[root] = new
            ranks.append((new, sizes[original]))
        return names[root]

    tensors = []
    dims: dict[str, tuple[str, ...]] = {}
    for t in g.tensors:
        dims[t.name] = tuple(name_of(("t", t.name, i), r) for i, r in enumerate(t.ranks))
        tensors.append(replace(t, ranks=dims[t.name]))
    nodes = []
    for n in g.nodes:
        space = {r: name_of(("n", n.name, r), r) for r in n.space}
        nodes.append(_rename_node(n, space, dims, tmap))
    return replace(g, ranks=tuple(ranks), tensors=tuple(tensors), nodes=tuple(nodes))


def _rename_expr(e, space: dict[str, str]):
    if type(e) is Indirect:
        return e
    return AffineExpr(tuple(sorted((space.get(r, r), c) for r, c in e.terms)), e.const)


def _rename_node(n: Node, space: dict[str, str], dims: dict[str, tuple[str, ...]], tmap) -> Node:
    def acc(a: Access) -> Access:
        return a if a.index is None else Access(a.tensor, tuple(_rename_expr(e, space) for e in a.index))

    axis = n.axis
    if axis is not None and n.outputs:
        old = tmap[n.outputs[0].tensor].ranks
        if axis in old:
            axis = dims[n.outputs[0].tensor][old.index(axis)]
    pad = tuple((t, tuple((dims[t][tmap[t].ranks.index(r)] if r in tmap[t].ranks else r, lo, hi)
                          for r, lo, hi in per)) for t, per in n.pad)
    return replace(n, space=tuple(space[r] for r in n.space), inputs=tuple(acc(a) for a in n.inputs),
                   outputs=tuple(acc(a) for a in n.outputs), axis=axis, pad=pad,
                   scan=space.get(n.scan, n.scan) if n.scan is not None else None)


__all__ = ["canonical"]
