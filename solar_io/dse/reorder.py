"""Contraction orders of the multi-operand chains of a graph: their work, traffic and SOL.

For each chain (:mod:`.reorder_chains`) of n operands, every *order* (a contraction tree) is a
sequence of einsum nodes; each node is costed exactly as ``solar_io.metrics`` costs a node of a
graph (MACs, matrix and vector FLOPs, bytes of every tensor it reads and writes, intermediates
included), and, given a chip, bounded as the roofline backend bounds it (unfused: the sum over the
order's nodes of max(compute, bytes / DRAM bandwidth)).

- n <= ``EXHAUSTIVE_MAX``: every pairwise tree is enumerated ((2n-3)!! of them: 3, 15, 105, 945).
- larger n: ``opt_einsum`` path search (dynamic programming minimising FLOPs and bytes written,
  and greedy); ``opt_einsum`` ships with jax and is imported only then.

An intermediate of an order keeps exactly the labels that an operand outside it or the output
still needs, in a canonical order (the output's order, then first appearance among the operands).
The *written* order is the chain as captured, costed from its own nodes (a node with k inputs is
one k-ary contraction); the *gain* is written cost / best cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache
from types import ModuleType

from ..affine import Access, AffineExpr
from ..errors import SolarIOError
from ..graph import Graph, Node, Tensor
from ..hardware import HardwareSpec
from ..metrics import node_metrics
from .reorder_chains import Chain, Tree, find_chains

#: Chains of at most this many operands are enumerated exhaustively.
EXHAUSTIVE_MAX = 6
#: How orders are ranked: the objective's key of an OrderCost (smaller is better).
OBJECTIVES = {
    "flops": lambda c: (c.flops, c.bytes),
    "bytes": lambda c: (c.bytes, c.flops),
    "sol": lambda c: (c.sol, c.flops, c.bytes),
}


class ReorderError(SolarIOError):
    """A reorder request that cannot be met (nothing to reorder, bad option, check failed)."""


@dataclass(frozen=True, slots=True)
class OrderCost:
    """One contraction order of a chain and what it costs (counts as in ``solar_io.metrics``)."""

    order: Tree
    text: str
    steps: int
    macs: int
    flops_matrix: float
    flops_vector: float
    bytes: float
    sol: float | None = None  # unfused seconds on the chip, when one was given
    written: bool = False

    @property
    def flops(self) -> float:
        return self.flops_matrix + self.flops_vector


@dataclass(frozen=True, slots=True)
class ChainReport:
    """The orders of one chain: ``orders`` sorted best first (every one when exhaustive)."""

    chain: Chain
    method: str  # "exhaustive" or "opt_einsum"
    orders: tuple[OrderCost, ...]
    written: OrderCost
    best: OrderCost
    worst: OrderCost | None  # None when the orders were not enumerated
    objective: str
    hardware: str | None

    def gain(self, what: str) -> float | None:
        """written / best for ``what`` (``flops``, ``bytes``, ``sol``, ``macs``); None if best is 0."""
        w, b = getattr(self.written, what), getattr(self.best, what)
        if w is None or b is None:
            return None
        return w / b if b else (1.0 if not w else math.inf)

    @property
    def improves(self) -> bool:
        """True when the best order is strictly better than the written one."""
        key = OBJECTIVES[self.objective]
        return key(self.best) < key(self.written)


def all_orders(n: int) -> list[Tree]:
    """Every pairwise contraction tree over operands ``0..n-1`` (children ordered by lowest leaf)."""
    if n < 1:
        return []

    @cache
    def trees(mask: int) -> tuple[Tree, ...]:
        if mask & (mask - 1) == 0:
            return (mask.bit_length() - 1,)
        low = mask & -mask
        rest = mask ^ low
        out: list[Tree] = []
        sub = rest
        while True:
            left = low | sub
            if left != mask:
                out.extend((a, b) for a in trees(left) for b in trees(mask ^ left))
            if sub == 0:
                return tuple(out)
            sub = (sub - 1) & rest

    return list(trees((1 << n) - 1))


def leaf_mask(t: Tree) -> int:
    """The bit set of the operands under ``t``."""
    return 1 << t if isinstance(t, int) else sum(leaf_mask(c) for c in t)


def canonical(t: Tree) -> Tree:
    """``t`` with every node's children ordered by their lowest operand."""
    if isinstance(t, int):
        return t
    kids = [canonical(c) for c in t]
    return tuple(sorted(kids, key=lambda c: leaf_mask(c) & -leaf_mask(c)))


def order_text(t: Tree, names: tuple[str, ...]) -> str:
    """``((q*w_uk)*c_kv)``."""
    if isinstance(t, int):
        return names[t]
    return "(" + "*".join(order_text(c, names) for c in t) + ")"


def _expr(rank: str) -> AffineExpr:
    return AffineExpr(((rank, 1),), 0)


class ChainCosting:
    """Builds and costs the einsum nodes of any order of one chain (memoised per contraction)."""

    def __init__(self, g: Graph, chain: Chain, spec: HardwareSpec | None = None):
        self.g, self.chain, self.spec = g, chain, spec
        ops = chain.operands
        self.full = (1 << len(ops)) - 1
        self.labels = [frozenset(o.ranks) for o in ops]
        order = list(chain.output.ranks)
        for o in ops:
            order.extend(r for r in o.ranks if r not in order)
        self.rank_order = order
        self.names = tuple(o.tensor for o in ops)
        leaves = {o.tensor for o in ops} | {chain.output.tensor}
        self.scratch = replace(g, ranks=g.ranks + chain.new_ranks, nodes=(),
                               tensors=tuple(t for t in g.tensors if t.name in leaves))
        self._steps: dict[tuple[int, ...], OrderCost] = {}

    # ------------------------------------------------------------------ structure
    def kept(self, mask: int) -> tuple[str, ...]:
        """Labels of the result of contracting the operands in ``mask``."""
        if mask == self.full:
            return self.chain.output.ranks
        inside = frozenset().union(*(self.labels[i] for i in range(len(self.labels)) if mask >> i & 1))
        outside = set(self.chain.output.ranks).union(
            *(self.labels[i] for i in range(len(self.labels)) if not mask >> i & 1))
        return tuple(r for r in self.rank_order if r in inside and r in outside)

    def access(self, t: Tree, tensor_name: str | None = None) -> Access:
        """How a step reads the result of subtree ``t`` (an operand, or an intermediate)."""
        if isinstance(t, int):
            o = self.chain.operands[t]
            return Access(o.tensor, tuple(_expr(r) for r in o.ranks))
        mask = leaf_mask(t)
        name = tensor_name or (self.chain.output.tensor if mask == self.full else f"_m{mask}")
        return Access(name, tuple(_expr(r) for r in self.kept(mask)))

    def node(self, t: tuple[Tree, ...], name: str, out_name: str | None = None,
             in_names: dict[int, str] | None = None, op: str = "solar_io.reorder") -> Node:
        """The einsum node that contracts the children of ``t``."""
        in_names = in_names or {}
        inputs = tuple(self.access(c, in_names.get(leaf_mask(c))) for c in t)
        out = self.access(t, out_name)
        out_ranks = [e.terms[0][0] for e in out.index]  # type: ignore[union-attr]
        used = {e.terms[0][0] for a in inputs for e in a.index}  # type: ignore[union-attr]
        space = tuple(out_ranks) + tuple(r for r in self.rank_order if r in used and r not in out_ranks)
        return Node(name, "einsum", op, inputs, (out,), space=space, map="mul", reduce="add")

    def tensor(self, mask: int, name: str) -> Tensor:
        """An intermediate tensor holding the result of the operands in ``mask``."""
        return Tensor(name, self.kept(mask), self.chain.dtype, "intermediate")

    # ------------------------------------------------------------------ cost
    def _step(self, t: tuple[Tree, ...]) -> OrderCost:
        key = tuple(leaf_mask(c) for c in t)
        hit = self._steps.get(key)
        if hit is not None:
            return hit
        g = self.scratch
        extra = [self.tensor(m, f"_m{m}") for m in (*key, leaf_mask(t)) if m & (m - 1) and m != self.full]
        if extra:
            g = replace(g, tensors=g.tensors + tuple(x for x in extra if x.name not in g.tensor_map))
        n = self.node(t, "step")
        m = node_metrics(g, n)
        sol = None
        if self.spec is not None:
            sol = _unfused(replace(g, nodes=(n,)), self.spec)
        cost = OrderCost(t, "", 1, m.macs, m.flops_matrix, m.flops_vector, m.bytes, sol)
        self._steps[key] = cost
        return cost

    def cost(self, t: Tree) -> OrderCost:
        """The cost of order ``t``: the sum over its contractions."""
        steps = [self._step(s) for s in contractions(t)]
        sol = math.fsum(s.sol for s in steps) if self.spec is not None else None  # type: ignore[misc]
        return OrderCost(t, order_text(t, self.names), len(steps), sum(s.macs for s in steps),
                         math.fsum(s.flops_matrix for s in steps), math.fsum(s.flops_vector for s in steps),
                         math.fsum(s.bytes for s in steps), sol)

    def written_cost(self) -> OrderCost:
        """The chain as captured, costed from its own nodes."""
        nodes = tuple(self.g.node_map[n] for n in self.chain.nodes)
        ms = [node_metrics(self.g, n) for n in nodes]
        sol = _unfused(replace(self.g, nodes=nodes), self.spec) if self.spec is not None else None
        t = self.chain.written
        return OrderCost(t, order_text(t, self.names), len(nodes), sum(m.macs for m in ms),
                         math.fsum(m.flops_matrix for m in ms), math.fsum(m.flops_vector for m in ms),
                         math.fsum(m.bytes for m in ms), sol, written=True)


def contractions(t: Tree) -> list[tuple[Tree, ...]]:
    """The internal nodes of ``t``, children before parents."""
    if isinstance(t, int):
        return []
    out: list[tuple[Tree, ...]] = []
    for c in t:
        out.extend(contractions(c))
    out.append(t)
    return out


def _unfused(g: Graph, spec: HardwareSpec) -> float:
    from ..backends.roofline import bound

    return float(bound(g, spec).unfused.time)  # type: ignore[arg-type]


def _opt_einsum() -> ModuleType:
    try:
        import opt_einsum
    except ImportError:
        raise ReorderError(f"chains of more than {EXHAUSTIVE_MAX} operands need opt_einsum for the path search: "
                           "pip install opt_einsum (it comes with the jax extra: pip install 'solar-io[jax]')"
                           ) from None
    return opt_einsum


def path_tree(path: list[tuple[int, ...]], n: int) -> Tree:
    """The tree of an ``opt_einsum`` path (positions into the shrinking operand list, results appended)."""
    items: list[Tree] = list(range(n))
    for step in path:
        picked = [items[i] for i in sorted(step)]
        for i in sorted(step, reverse=True):
            del items[i]
        items.append(picked[0] if len(picked) == 1 else tuple(picked))
    return items[0] if len(items) == 1 else tuple(items)


def searched_orders(chain: Chain) -> list[Tree]:
    """Orders found by ``opt_einsum``: dynamic programming (FLOPs; bytes written) and greedy."""
    oe = _opt_einsum()
    symbol = {r: oe.get_symbol(i) for i, (r, _) in enumerate(chain.sizes)}
    eq = ",".join("".join(symbol[r] for r in o.ranks) for o in chain.operands)
    eq += "->" + "".join(symbol[r] for r in chain.output.ranks)
    size = chain.size_of
    shapes = [tuple(size[r] for r in o.ranks) for o in chain.operands]
    out = []
    for how in (oe.DynamicProgramming(minimize="flops"), oe.DynamicProgramming(minimize="write"), "greedy"):
        path, _ = oe.contract_path(eq, *shapes, shapes=True, optimize=how)
        out.append(path_tree([tuple(s) for s in path], len(shapes)))
    return out


def analyse_chain(g: Graph, chain: Chain, spec: HardwareSpec | None = None, objective: str = "flops") -> ChainReport:
    """Cost every order of ``chain`` (or the searched ones beyond ``EXHAUSTIVE_MAX`` operands)."""
    if objective not in OBJECTIVES:
        raise ReorderError(f"--by: unknown objective {objective!r}; use one of {', '.join(OBJECTIVES)}")
    if objective == "sol" and spec is None:
        raise ReorderError("--by sol needs a chip: give --hw")
    costing = ChainCosting(g, chain, spec)
    written = costing.written_cost()
    n = len(chain.operands)
    exhaustive = n <= EXHAUSTIVE_MAX
    trees = all_orders(n) if exhaustive else searched_orders(chain)
    target = canonical(chain.written)
    seen: set = set()
    orders = []
    for t in trees:
        c = canonical(t)
        if c in seen:
            continue
        seen.add(c)
        orders.append(written if c == target else costing.cost(c))
    if target not in seen:
        orders.append(written)
    key = OBJECTIVES[objective]
    orders.sort(key=lambda c: (*key(c), not c.written, c.text))
    return ChainReport(chain, "exhaustive" if exhaustive else "opt_einsum", tuple(orders), written, orders[0],
                       orders[-1] if exhaustive else None, objective, spec.name if spec else None)


def analyse(g: Graph, spec: HardwareSpec | None = None, objective: str = "flops") -> list[ChainReport]:
    """The report of every contraction chain of ``g`` with three or more operands."""
    return [analyse_chain(g, c, spec, objective) for c in find_chains(g)]


__all__ = ["EXHAUSTIVE_MAX", "OBJECTIVES", "ChainCosting", "ChainReport", "OrderCost", "ReorderError",
           "all_orders", "analyse", "analyse_chain", "canonical", "contractions", "leaf_mask", "order_text",
           "path_tree", "searched_orders"]
