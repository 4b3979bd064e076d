"""Schedules other than the file's node order: fusion groups that are not consecutive in the file.

The partition of :mod:`.partition` forms groups that are contiguous runs of one node order. A run
of *any* topological order is a convex node set (no path leaves it and comes back: a node on such
a path would stand between two of its members, so inside the run), and a convex set can run as one
kernel: everything it needs from outside is ready before it starts. So the partition may search
another topological order as well, and the least of the two partitions is still the time of a
schedule real kernels can run; searching more schedules can only lower the bound.

The file's order is the capture's, which often interleaves independent branches (``q``, ``k`` and
``v`` projections, then their reshapes, then their rotations): no run of it holds one branch's
chain. :func:`branch_order` is the order that follows chains: after a kernel it runs next, of the
kernels that are ready, one that reads what that kernel wrote (the earliest in the file), else the
earliest ready kernel. The kernels of the unfused bound (:mod:`solar_io.backends.traffic.kernels`)
stay whole. Dependencies are every hazard on memory, by alias root (:mod:`solar_io.views`): a
reader after the writer it reads, a writer after every earlier reader and writer of its root, and
a node after the producer of every tensor it names (views included); so the order is a valid run
of the program whatever aliases the graph has.

>>> from solar_io.affine import parse_access as a
>>> from solar_io.graph import Graph, Node, Tensor
>>> def relu(name, x, y): return Node(name, "einsum", "aten.relu", (a(x + "[N]"),), (a(y + "[N]"),),
...                                   space=("N",), map="relu", reduce="none")
>>> g = Graph((("N", 8),), tuple(Tensor(t, ("N",), "fp32", r) for t, r in
...           [("x", "input"), ("y", "input"), ("a1", "intermediate"), ("b1", "intermediate"),
...            ("a2", "output"), ("b2", "output")]),
...           (relu("A1", "x", "a1"), relu("B1", "y", "b1"), relu("A2", "a1", "a2"), relu("B2", "b1", "b2")))
>>> branch_order(g)   # A1, A2, B1, B2 as node indices
(0, 2, 1, 3)
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from solar_io.affine import Indirect
from solar_io.graph import Graph, Node
from solar_io.views import ViewChains

from ..traffic.kernels import kernels


def _reads(n: Node) -> list[str]:
    """Tensors ``n`` names as read: its inputs and the index tensors of its indirect accesses."""
    out = [a.tensor for a in n.inputs]
    for accesses in (n.inputs, n.outputs):
        for a in accesses:
            for e in a.index or ():
                if type(e) is Indirect:
                    out.append(e.tensor)
    return out


def block_dependencies(g: Graph, blocks: Sequence[tuple[int, int]],
                       root: dict[str, str] | None = None) -> list[set[int]]:
    """Per block (an inclusive node-index range), the earlier blocks it must run after (module docstring)."""
    root = ViewChains(g).root if root is None else root
    block_of = [0] * len(g.nodes)
    for b, (i, j) in enumerate(blocks):
        block_of[i:j + 1] = [b] * (j - i + 1)
    made: dict[str, int] = {}  # tensor name -> block of its producer (views included)
    last_write: dict[str, int] = {}  # root -> block of its latest writer
    readers: dict[str, list[int]] = {}  # root -> blocks reading it since its latest write
    deps: list[set[int]] = [set() for _ in blocks]
    for k, n in enumerate(g.nodes):
        b = block_of[k]
        d = deps[b]
        view = n.kind == "data_movement" and n.view
        for t in _reads(n):
            if t in made:
                d.add(made[t])
            r = root.get(t, t)
            if r in last_write:
                d.add(last_write[r])
            if not view:
                readers.setdefault(r, []).append(b)
        for a in n.outputs:
            made.setdefault(a.tensor, b)
            if view:
                continue
            r = root.get(a.tensor, a.tensor)
            if r in last_write:
                d.add(last_write[r])
            d.update(readers.pop(r, ()))
            last_write[r] = b
        d.discard(b)
    return deps


def branch_order(g: Graph, root: dict[str, str] | None = None,
                 spans: Sequence[tuple[int, int]] | None = None) -> tuple[int, ...] | None:
    """The chain-following topological order of ``g``'s nodes (module docstring) as node indices, or
    None when it is the file's order (``root``: alias roots, ``spans``: the kernels, when known).
    Linear in nodes and dependencies, up to a heap's log."""
    blocks = kernels(g) if spans is None else spans
    deps = block_dependencies(g, blocks, root)
    succ: list[list[int]] = [[] for _ in blocks]
    waiting = [len(d) for d in deps]
    for b, d in enumerate(deps):
        for p in d:
            succ[p].append(b)
    ready = [b for b, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    done = [False] * len(blocks)
    order: list[int] = []
    last: int | None = None
    while ready:
        nxt = None
        if last is not None:  # a ready reader of the block just run, the earliest in the file
            follow = [s for s in succ[last] if waiting[s] == 0 and not done[s]]
            if follow:
                nxt = min(follow)
        if nxt is None:
            while done[ready[0]]:
                heapq.heappop(ready)
            nxt = heapq.heappop(ready)
        done[nxt] = True
        order.append(nxt)
        last = nxt
        for s in succ[nxt]:
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(ready, s)
        while ready and done[ready[0]]:
            heapq.heappop(ready)
    if len(order) != len(blocks):
        return None  # a dependency cycle (validation refuses it): keep the file's order
    if order == sorted(order):
        return None
    return tuple(k for b in order for k in range(blocks[b][0], blocks[b][1] + 1))


def regions(order: Sequence[int], pad: int = 0) -> tuple[tuple[int, int], ...]:
    """The stretches ``[c0, c1)`` of positions where ``order`` differs from the file's order, each
    between two common cuts (positions where both orders have run the same set of nodes), widened by
    ``pad`` positions on each side (where both orders agree, every position is a cut) so that a group
    of the new order may reach across its ends; stretches that meet are merged. A schedule may follow
    either order in each stretch and the file's order elsewhere.

    >>> regions((0, 2, 1, 3, 4, 6, 5))
    ((1, 3), (5, 7))
    >>> regions((0, 2, 1, 3, 4, 6, 5), pad=1)
    ((0, 7),)
    """
    out: list[tuple[int, int]] = []
    c0, top = 0, -1
    for p, k in enumerate(order):
        top = max(top, k)
        if top == p:  # positions 0..p hold nodes 0..p: a common cut after p
            if any(order[q] != q for q in range(c0, p + 1)):
                lo, hi = max(0, c0 - pad), min(len(order), p + 1 + pad)
                if out and out[-1][1] >= lo:
                    lo = out.pop()[0]
                out.append((lo, hi))
            c0 = p + 1
    return tuple(out)


def cuts(order: Sequence[int]) -> list[bool]:
    """Per position 0..n: True where ``order`` and the file's order have run the same set of nodes.

    >>> cuts((0, 2, 1, 3))
    [True, True, False, True, True]
    """
    out = [True]
    top = -1
    for p, k in enumerate(order):
        top = max(top, k)
        out.append(top == p)
    return out


@dataclass(frozen=True)
class BranchPlan:
    """The capacity-independent part of :class:`BranchGroups`: the common cuts, the first group of each
    distinct analysis (context and credit signature) in the search's order, and every group weighed
    ``(first, last, analysis)``."""

    cut: list[bool]
    first: tuple[tuple[int, int], ...]
    groups: tuple[tuple[int, int, int], ...]


class BranchGroups:
    """The branch order's candidate groups at one capacity, for the partition (:mod:`.partition`);
    chip-independent, so kept per graph and capacity.

    States of the partition's dynamic programming are positions. At a common cut (:func:`cuts`) both
    orders have run the same nodes, so the file's state and the branch order's are one: a schedule
    may switch order there. Between cuts the branch order has states of its own. Only the branch
    order's groups that start or end between cuts are searched (every group from a cut to a cut holds
    the same nodes as one of the file's); of those of several nodes, only the ones that join a chain
    the file's order splits: a node next to the node it reads, the two apart in the file (single
    nodes keep every state reachable; a smaller search only keeps the bound a bound). ``seg``: the
    :class:`.segments.Segments` of the reordered graph, whose structure describes the stretches
    around those positions (:func:`.structure.with_contexts`); ``credit``: its residency credit
    (:class:`.partition.Credit`); ``held``: what on-chip memory may keep between groups."""

    def __init__(self, seg, credit, order: Sequence[int], spans: Sequence[tuple[int, int]],  # noqa: ANN001
                 max_group: int, held: float, runs: tuple[range, ...], plan: BranchPlan | None = None) -> None:
        """``plan``: :meth:`plan` of the same graph, order and runs (capacity-independent; built when None)."""
        self.seg, self.credit, self.order, self.held = seg, credit, order, held
        if plan is None:
            plan = self.plan(seg, credit, order, spans, max_group, runs)
        self.cut = plan.cut
        self.by_end: dict[int, list[tuple[int, float, object]]] = {}  # last position -> [(first, Q, span)]
        self.candidates: list[tuple[int, int, float]] = []  # (first, last position, Q): the inverse's
        answers: list[tuple[float, object] | None] = []  # groups of repeated layers: one analysis
        for i, j in plan.first:
            s = seg.span(i, j)
            answers.append(None if s is None else (s.traffic - credit.of(i, j, held), s))
        for i, j, k in plan.groups:
            got = answers[k]
            if got is None:
                continue
            self.by_end.setdefault(j, []).append((i, got[0], got[1]))
            self.candidates.append((i, j, got[0]))

    @classmethod
    def plan(cls, seg, credit, order: Sequence[int], spans: Sequence[tuple[int, int]], max_group: int,  # noqa: ANN001
             runs: tuple[range, ...]) -> BranchPlan:
        """Which groups the search weighs and which of them are one analysis, at every capacity."""
        cut = cuts(order)
        # prefix counts of the positions p whose node reads what the node at p - 1 writes, the two not
        # neighbours in the file: the chains the branch order joins
        nodes = seg.g.nodes
        joined = [0, 0]
        for p in range(1, len(order)):
            ok = order[p] != order[p - 1] + 1 and not {a.tensor for a in nodes[p - 1].outputs}.isdisjoint(
                _reads(nodes[p]))  # (evaluated only where the two orders part)
            joined.append(joined[-1] + ok)
        long: dict[int, list[int]] = {}  # last position -> first positions of kernels longer than max_group
        for i, j in spans:
            if j - i + 1 > max_group and any(i in r and j in r for r in runs):
                long.setdefault(j, []).append(i)
        ctx, sig = seg.structure.context, cls._signatures(seg, credit, runs, max_group)
        keys: dict[tuple, int] = {}
        first: list[tuple[int, int]] = []
        groups: list[tuple[int, int, int]] = []
        for run in runs:
            for j in run:
                lo = max(run.start, j - max_group + 1)
                longs = [i for i in long.get(j, ()) if joined[j + 1] > joined[i + 1]]
                if cut[j + 1] and cut[j] and joined[j + 1] == joined[lo + 1] and not longs:
                    continue
                for i in (*range(j, lo - 1, -1), *longs):
                    if (cut[i] and cut[j + 1]) or (i < j and joined[j + 1] == joined[i + 1]):
                        continue  # the file's group of the same nodes, or a group joining no chain
                    key = (ctx[i:j + 1], tuple(sig[i:j + 1])) if j - i < max_group else (i, j)
                    k = keys.get(key)
                    if k is None:
                        k = keys[key] = len(first)
                        first.append((i, j))
                    groups.append((i, j, k))
        return BranchPlan(cut, tuple(first), tuple(groups))

    @staticmethod
    def _signatures(seg, credit, runs: tuple[range, ...], window: int) -> list:  # noqa: ANN001
        """Per position in ``runs``: what the residency credit of a group holding it reads of it, with
        roots as their place among the node's and positions as offsets (``None`` past a group's
        reach): groups with equal contexts (:mod:`.structure`) and equal signatures get the same credit."""
        def off(d: int) -> int | None:
            return d if -window < d < window else None

        roots = seg.structure.roots
        out: list = [None] * len(roots)
        for run in runs:
            for k in run:
                where = {r: x for x, r in enumerate(roots[k])}
                reads = tuple((where[t], b, None if p < 0 else off(p - k), off(f - k))
                              for t, b, p, f in credit.reads[k])
                out[k] = (reads, tuple((where[t], b, off(last - k)) for t, b, last in credit.writes[k]))
        return out


class Alternative:
    """The branch order's side of one partition (one chip): its :class:`BranchGroups` and, per
    position, the node's matrix, vector and special seconds (``units``, in the branch order)."""

    def __init__(self, groups: BranchGroups, units: Sequence[tuple[float, ...]]) -> None:
        self.groups, self.order, self.cut, self.candidates = groups, groups.order, groups.cut, groups.candidates
        self.seg, self.credit = groups.seg, groups.credit
        self.pre = [[0.0] for _ in range(3)]
        for u in units:
            for x in range(3):
                self.pre[x].append(self.pre[x][-1] + u[x])
        self.best: dict[int, float] = {}  # the branch order's own states (positions that are not cuts)
        self.back: dict[int, tuple[int, int, float, float, object]] = {}  # state -> its last group

    def step(self, j: int, best: list[float], choice: list, bw: float) -> None:
        """The branch order's groups ending at position ``j`` (after the file's): a group ending at a cut
        that beats ``best[j + 1]`` replaces it, marked ``(first, None, time)`` in ``choice``."""
        got = self.groups.by_end.get(j)
        if not got:
            return
        cut, pm, pv, ps = self.cut, *self.pre
        for i, q, s in got:
            start = best[i] if cut[i] else self.best.get(i, math.inf)
            if math.isinf(start):
                continue
            compute = max(pm[j + 1] - pm[i], pv[j + 1] - pv[i], ps[j + 1] - ps[i])
            t = max(compute, q / bw)
            if cut[j + 1]:
                if start + t < best[j + 1] * (1 - 1e-12):
                    best[j + 1] = start + t
                    choice[j + 1] = (i, None, t)
                    self.back[j + 1] = (i, j, compute, t, s)
            elif start + t < self.best.get(j + 1, math.inf):
                self.best[j + 1] = start + t
                self.back[j + 1] = (i, j, compute, t, s)


__all__ = ["Alternative", "BranchGroups", "BranchPlan", "block_dependencies", "branch_order", "cuts", "regions"]
