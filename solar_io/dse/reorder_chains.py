"""Multi-operand contraction chains of a graph, expressed as one einsum over their leaf operands.

A *contraction node* is an einsum with map ``mul`` and reduce ``add`` over at least two inputs
whose every access is a plain rank per dimension (no affine window, no indirect index, no rank
twice in one access, no padding), each rank covering its tensor dimension in full, and whose
space holds exactly the ranks its accesses use. Two contraction nodes are *joined* when the
output of one is an intermediate tensor (dense, role ``intermediate``) that the graph reads
exactly once, by the other. A *chain* is a maximal tree of joined contraction nodes; the tensors
its nodes read that no chain node writes are its *operands* (leaves, in written left-to-right
order), the tensor its last node writes is its *output*. By associativity and commutativity of
the sums, the chain computes the single einsum ``output = sum over other ranks of prod operands``.

Rank names are node-local in the file (``q[B, S, F]`` written by one node may be read as
``q[B, T, F]`` by the next), so the ranks of the chain's nodes are unified through the tensors
that join them; each resulting *label* gets one rank name (a rank of the graph with the same
size, or a new one such as ``E_2`` when two labels would otherwise share a name).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ..affine import Access, AffineExpr
from ..graph import Graph, Node

#: A contraction tree: a leaf (operand index) or a tuple of at least two subtrees.
Tree = int | tuple["Tree", ...]


@dataclass(frozen=True, slots=True)
class Operand:
    """A tensor of a chain and the labels (merged rank names) of its dimensions, in order."""

    tensor: str
    ranks: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.tensor}[{', '.join(self.ranks)}]"


@dataclass(frozen=True, slots=True)
class Chain:
    """One contraction chain of a graph (see the module docstring).

    ``nodes``: the graph's nodes that form it, in graph order; ``root``: the one writing
    ``output``; ``written``: the contraction tree as captured, over operand indices (a node with
    k inputs is a k-ary tuple); ``sizes``: every label's size; ``new_ranks``: labels that are not
    ranks of the graph (a rewrite declares them); ``intermediates``: the tensors joining the
    nodes; ``dtype``: the element type a rewrite gives its new intermediates.
    """

    nodes: tuple[str, ...]
    root: str
    operands: tuple[Operand, ...]
    output: Operand
    written: Tree
    sizes: tuple[tuple[str, int], ...]
    new_ranks: tuple[tuple[str, int], ...]
    intermediates: tuple[str, ...]
    dtype: str

    @property
    def size_of(self) -> dict[str, int]:
        """{label: size}."""
        return dict(self.sizes)

    def equation(self) -> str:
        """``out[B, S] = a[B, K] * b[K, S]``: the chain as one einsum (sum over the other ranks)."""
        return f"{self.output} = {' * '.join(str(o) for o in self.operands)}"


def _plain_ranks(g: Graph, a: Access) -> tuple[str, ...] | None:
    """The ranks of an access whose every index is a distinct plain rank spanning its dimension."""
    if a.index is None:
        return None
    ranks = []
    shape = g.shape(a.tensor)
    sizes = g.rank_sizes
    for e, extent in zip(a.index, shape, strict=True):
        if not (isinstance(e, AffineExpr) and e.is_rank()) or sizes[e.terms[0][0]] != extent:
            return None
        ranks.append(e.terms[0][0])
    return tuple(ranks) if len(set(ranks)) == len(ranks) else None


def is_contraction(g: Graph, n: Node) -> bool:
    """True for an einsum node that a chain may hold (see the module docstring)."""
    if n.kind != "einsum" or n.map != "mul" or n.reduce != "add" or len(n.inputs) < 2 or len(n.outputs) != 1:
        return False
    if n.pad or n.fill is not None or getattr(n, "scan", None) is not None or getattr(n, "init", None) is not None:
        return False  # padded borders, scans (cumulative reductions) and initial values are not plain sums
    used: set[str] = set()
    for a in (*n.inputs, *n.outputs):
        ranks = _plain_ranks(g, a)
        if ranks is None:
            return False
        used.update(ranks)
    return used == set(n.space) and len(n.space) == len(used)


class _Labels:
    """Union-find over (node name, rank) variables, joined through the chain's tensors."""

    def __init__(self) -> None:
        self.parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(self, v: tuple[str, str]) -> tuple[str, str]:
        self.parent.setdefault(v, v)
        while self.parent[v] != v:
            self.parent[v] = self.parent[self.parent[v]]
            v = self.parent[v]
        return v

    def union(self, a: tuple[str, str], b: tuple[str, str]) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def find_chains(g: Graph, min_operands: int = 3) -> list[Chain]:
    """Every contraction chain of ``g`` with at least ``min_operands`` operands, by root order."""
    producer = {a.tensor: n for n in g.nodes for a in n.outputs}
    reads = Counter(a.tensor for n in g.nodes for a in n.inputs)
    candidates = {n.name for n in g.nodes if is_contraction(g, n)}
    tmap = g.tensor_map

    def joined(tensor: str) -> Node | None:
        """The contraction node writing ``tensor`` when it joins a chain."""
        p = producer.get(tensor)
        t = tmap[tensor]
        if p is None or p.name not in candidates or t.role != "intermediate" or t.density is not None:
            return None
        return p if reads[tensor] == 1 else None

    absorbed = {a.tensor for n in g.nodes if n.name in candidates for a in n.inputs if joined(a.tensor)}
    chains = []
    for n in g.nodes:
        if n.name in candidates and n.outputs[0].tensor not in absorbed:
            chain = _build(g, n, joined)
            if chain is not None and len(chain.operands) >= min_operands:
                chains.append(chain)
    return chains


def _build(g: Graph, root: Node, joined: Callable[[str], Node | None]) -> Chain | None:
    labels = _Labels()
    operands: list[tuple[str, str, tuple[str, ...]]] = []  # (node, tensor, node-local ranks)
    members: list[str] = []
    inter: list[str] = []

    def walk(n: Node) -> Tree:
        members.append(n.name)
        children: list[Tree] = []
        for a in n.inputs:
            ranks = _plain_ranks(g, a)
            p = joined(a.tensor)
            if p is None:
                operands.append((n.name, a.tensor, ranks))  # type: ignore[arg-type]
                children.append(len(operands) - 1)
                continue
            inter.append(a.tensor)
            for mine, theirs in zip(ranks, _plain_ranks(g, p.outputs[0]), strict=True):  # type: ignore[arg-type]
                labels.union((n.name, mine), (p.name, theirs))
            children.append(walk(p))
        return tuple(children)

    written = walk(root)
    out_ranks = _plain_ranks(g, root.outputs[0])
    assert out_ranks is not None
    sizes = g.rank_sizes
    # Name each label: preferred names first (the output's, then the operands' in order).
    prefs: dict[tuple[str, str], list[str]] = {}
    for node, ranks in [(root.name, out_ranks)] + [(nd, rs) for nd, _, rs in operands]:
        for r in ranks:
            prefs.setdefault(labels.find((node, r)), []).append(r)
    for name in members:  # every other rank of the chain's nodes
        for r in g.node_map[name].space:
            prefs.setdefault(labels.find((name, r)), []).append(r)
    taken: set[str] = set()
    label_of: dict[tuple[str, str], str] = {}
    new_ranks: list[tuple[str, int]] = []
    for root_var, names in prefs.items():
        free = [r for r in names if r not in taken]
        if free:
            label = free[0]
        else:
            k = 2
            while f"{names[0]}_{k}" in taken or f"{names[0]}_{k}" in sizes:
                k += 1
            label = f"{names[0]}_{k}"
            new_ranks.append((label, sizes[names[0]]))
        taken.add(label)
        label_of[root_var] = label
    size_of = {**sizes, **dict(new_ranks)}

    def lab(node: str, ranks: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(label_of[labels.find((node, r))] for r in ranks)

    ops = tuple(Operand(t, lab(nd, rs)) for nd, t, rs in operands)
    output = Operand(root.outputs[0].tensor, lab(root.name, out_ranks))
    if {r for o in ops for r in o.ranks} != set(label_of.values()):
        return None  # a rank no operand carries (a broadcast or repeated sum): not one einsum
    used = sorted({r for o in (*ops, output) for r in o.ranks}, key=list(label_of.values()).index)
    dtypes = Counter(g.tensor_map[t].dtype for t in inter)
    dtype = dtypes.most_common(1)[0][0] if dtypes else g.tensor_map[output.tensor].dtype
    order = {n.name: i for i, n in enumerate(g.nodes)}
    return Chain(tuple(sorted(members, key=order.__getitem__)), root.name, ops, output,
                 written, tuple((r, size_of[r]) for r in used),
                 tuple(new_ranks), tuple(inter), dtype)


__all__ = ["Chain", "Operand", "Tree", "find_chains", "is_contraction"]
