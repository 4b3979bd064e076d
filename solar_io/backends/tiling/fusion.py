"""Fused groups: contiguous runs of nodes executed as one kernel, tiled on a shared rank.

A *segment* is a run ``nodes[i..j]`` of the graph's topological order. View-only data movement
aliases tensors (a view's output is its input's memory), so tensors are identified by their *root*
(the tensor a chain of views starts from).

- **External bytes** of a segment: every root it reads that is produced outside it (or is a graph
  input, weight or constant), at the largest read of it (a read through a view as the root bytes
  it certainly covers), plus every root it writes that is read outside it or is a graph output,
  and the part of a root that graph outputs viewing it expose
  (:meth:`solar_io.views.ViewChains.exposed`). Intermediates produced and consumed inside never
  touch DRAM: that is the traffic a fused group avoids.
- **Everything fits**: when the bytes of every root the segment touches fit in S, its traffic is
  its external bytes.
- **Chain tiling** (:func:`solve_chain`): pick a shared rank ``sigma`` that every node of the
  segment iterates over and keeps in its outputs (so no reduction crosses tiles, and every
  intermediate is indexed by it) and any integer tile t (``n >= N_sigma / t`` tiles; options are
  intervals of tiles charged the capacity of their smallest and the fractional count ``N_sigma /
  t`` of their largest, a lower bound for every tile inside, as in :mod:`.relax`). Shared
  ranks that index exactly the same tensors (batch and sequence, say) are also tiled together as
  one rank ``B*S`` of their product's size (a tile is then a box of both). A tensor is indexed by
  the ranks its accesses name (``k[B, T2, D]`` is not indexed by ``T`` even if declared so). Tensors
  indexed by sigma move one tile per step; the others (weights) are either *resident* (held on chip
  for the whole run) or *streamed* (re-read once per sigma tile). Capacity, as the issue defines it:
  ``sum(resident tensors not indexed by sigma) + max_v(sigma-indexed tile bytes of node v) <= S``,
  where an intermediate (produced and consumed inside, never written out) counts one row per sigma
  point: it streams through in sub-tiles along its other ranks, as flash attention's scores and a
  fused MLP's hidden layer do, or is recomputed (compute, not traffic);
  traffic: ``external sigma-indexed bytes + sum(resident) + n * sum(streamed)``. A streamed tensor is
  charged no capacity (it passes through in sub-tiles the model does not track), which can only
  lower Q; inner tiling of each node within a sigma tile is not modelled. Solved as a small
  ILP over (sigma, t) and residency (PuLP); brute-force enumeration agrees in the tests.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from solar_io.affine import AffineExpr
from solar_io.graph import Graph, Node
from solar_io.metrics import GraphMetrics

from ..traffic.graph import GraphTraffic, traffic_of
from .einsum import tileable
from .ilp import TIME_LIMIT
from .relax import breakpoints, intervals
from .solver import solve_exactly

CHAIN_BREAKPOINTS = 64  # breakpoints of a chain's shared rank (every integer up to 64; ratio <= 1.1 up to 512)


def graph_view(g: Graph, gm: GraphMetrics | None = None) -> GraphTraffic:
    """The alias structure of ``g`` for segment accounting (``gm``: its metrics): its traffic model,
    built once per graph (:func:`solar_io.backends.traffic.traffic_of`)."""
    return traffic_of(g, gm)


def external_bytes(v: GraphTraffic, i: int, j: int) -> float:
    """DRAM bytes of segment ``i..j`` run as one kernel with everything it needs on chip."""
    rd: dict[str, float] = {}
    wr: dict[str, float] = {}
    for k in range(i, j + 1):
        for t, b in v.reads[k].items():
            p = v.producer.get(t, -1)
            if not (i <= p <= j):
                rd[t] = max(rd.get(t, 0.0), b)
        for t, b in v.writes[k].items():
            w = v.written(t, b, i, j)
            if w > 0:
                wr[t] = max(wr.get(t, 0.0), w)
    return sum(rd.values()) + sum(wr.values())


def avoided_bytes(v: GraphTraffic, i: int, j: int) -> float:
    """DRAM bytes segment ``i..j`` saves by keeping its intermediates on chip: the writes and reads
    of every root produced and consumed only inside it (and not a graph output)."""
    total = 0.0
    for k in range(i, j + 1):
        for t, b in v.writes[k].items():
            if t not in v.output and t not in v.exposed and all(i <= c <= j for c in v.consumers.get(t, ())) \
                    and v.consumers.get(t):
                total += b + sum(v.reads[c].get(t, 0.0) for c in set(v.consumers[t]))
    return total


def touched_bytes(v: GraphTraffic, i: int, j: int) -> float:
    """Bytes of every root segment ``i..j`` reads or writes (each once)."""
    roots = {t for k in range(i, j + 1) for t in (*v.reads[k], *v.writes[k])}
    return sum(v.size[t] for t in roots)


def live_bytes(v: GraphTraffic, i: int, j: int) -> float:
    """The most bytes segment ``i..j`` holds at once when it runs its nodes in order and keeps each
    root on chip from its first to its last touch in the segment (at most :func:`touched_bytes`).
    When it fits in S, that schedule moves exactly the external bytes: a long recurrence (an
    unrolled GRU) fits although all of its steps' tensors together do not."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for k in range(i, j + 1):
        for t in (*v.reads[k], *v.writes[k]):
            first.setdefault(t, k)
            last[t] = k
    delta = [0.0] * (j - i + 2)
    for t, a in first.items():
        delta[a - i] += v.size[t]
        delta[last[t] - i + 1] -= v.size[t]
    peak = cur = 0.0
    for d in delta[:-1]:
        cur += d
        peak = max(peak, cur)
    return peak


class ChainOption(NamedTuple):
    """One (sigma, tile) choice of a segment: traffic and capacity parts in bytes (a named tuple: a graph
    builds tens of thousands, 19k for a 32-layer Llama, and a frozen dataclass takes three times as long
    to build)."""

    rank: str
    tile: int
    tiles: float                         # tiles along sigma, fractional (size / the option's largest tile)
    base: float                          # external sigma-indexed bytes
    tile_ws: float                       # max over nodes of their sigma-indexed tile bytes
    others: tuple[tuple[str, float], ...]  # external tensors not indexed by sigma: (root, bytes)


@dataclass(frozen=True, slots=True)
class ChainTiling:
    """The best chain tiling of a segment: traffic bytes, rank, tile, resident tensors."""

    traffic: float
    rank: str
    tile: int
    resident: tuple[str, ...]
    streamed: tuple[str, ...]
    working_set: float
    option: int = -1                       # index of the chosen option in the list solved
    resident_idx: tuple[int, ...] = ()     # positions of the resident tensors in its ``others``


def chain_options(g: Graph, v: GraphTraffic, i: int, j: int) -> list[ChainOption]:
    """Every (sigma, tile) of segment ``i..j`` (none when a node is not an einsum or a view)."""
    nodes: list[Node] = list(g.nodes[i:j + 1])
    tmap = g.tensor_map
    work = [n for n in nodes if not (n.kind == "data_movement" and n.view)]
    if not work or any(not tileable(n) for n in work):
        return []
    common = set(work[0].space)
    for n in work:
        common &= set(n.space)
        for a in n.outputs:
            common &= _access_ranks(a, tmap)
    for n in nodes:
        if n.kind == "data_movement" and n.view:
            for a in (*n.inputs, *n.outputs):
                common &= set(tmap[a.tensor].ranks)
    sizes = g.rank_sizes
    if all(sizes[r] <= 1 for r in common):  # no rank to tile along (a whole graph, as a rule): no option
        return []
    roots_ranks: dict[str, set[str]] = {}  # root -> the ranks every access of it in the segment indexes
    for n in nodes:
        for a in (*n.inputs, *n.outputs):
            r = v.root[a.tensor]
            ranks = _access_ranks(a, tmap) if a.tensor == r else \
                _access_ranks(a, tmap) & set(tmap[r].ranks)  # through a view: the names both share
            roots_ranks.setdefault(r, ranks).intersection_update(ranks)
    opts = []
    ext_rd: dict[str, float] = {}
    ext_wr: dict[str, float] = {}
    for k in range(i, j + 1):
        for t, b in v.reads[k].items():
            if not (i <= v.producer.get(t, -1) <= j):
                ext_rd[t] = max(ext_rd.get(t, 0.0), b)
        for t, b in v.writes[k].items():
            w = v.written(t, b, i, j)
            if w > 0:
                ext_wr[t] = max(ext_wr.get(t, 0.0), w)
    classes: dict[frozenset[str], list[str]] = {}  # tensors indexed -> the shared ranks indexing exactly them
    for sigma in sorted(common):
        if sizes[sigma] <= 1:
            continue
        indexed = frozenset(t for t, rs in roots_ranks.items() if sigma in rs)
        if any(t not in indexed for t in ext_wr):
            continue
        classes.setdefault(indexed, []).append(sigma)
    for indexed, ranks in classes.items():
        others = tuple(sorted((t, b) for t, b in ext_rd.items() if t not in indexed and b > 0))
        base = sum(b for t, b in ext_rd.items() if t in indexed) + sum(ext_wr.values())
        # An intermediate (produced and consumed inside, never written out) needs no more than one
        # sigma point's row of it on chip at a time: it streams through in sub-tiles along its other
        # ranks (flash attention's scores, a fused MLP's hidden layer) or is recomputed, which costs
        # compute, not traffic.
        row = {t: math.prod(sizes[r] for r in roots_ranks[t] if r not in ranks) for t in indexed
               if t not in ext_rd and t not in ext_wr}
        whole = max(sum(b / row.get(t2, 1) for t2, b in (*v.reads[k].items(), *v.writes[k].items())
                        if t2 in indexed) for k in range(i, j + 1))
        # Ranks that index the same tensors tile together: a tile of d points of their product is a
        # box of them (every divisor of a product of sizes splits into divisors of each), and every
        # tensor they index holds a fraction d / (product) of itself per tile.
        groups = [(r,) for r in ranks] + ([tuple(ranks)] if len(ranks) > 1 else [])
        for group in groups:
            size = math.prod(sizes[r] for r in group)
            # Every integer tile, by intervals (:mod:`.relax`): an option charges the capacity of its
            # smallest tile and the fractional tile count of its largest, so no tile does better.
            for iv in intervals(breakpoints(size, CHAIN_BREAKPOINTS)):
                opts.append(ChainOption("*".join(group), iv.lo, size / iv.hi, base, whole * iv.lo / size, others))
    return opts


def _access_ranks(a, tmap) -> set[str]:
    """The ranks an access indexes (its declared ranks when it reads the whole tensor)."""
    if a.index is None:
        return set(tmap[a.tensor].ranks)
    return {r for e in a.index if type(e) is AffineExpr for r in e.ranks}


ENUMERATE_LIMIT = 4096  # residency choices per option searched directly, without the solver, up to this many


def solve_chain(opts: list[ChainOption], capacity: float, time_limit: float | None = TIME_LIMIT,
                method: str = "auto") -> ChainTiling | None:
    """The minimum-traffic chain tiling among ``opts`` within ``capacity`` bytes (None when no option
    fits; raises :class:`.solver.TimeLimitReached` after ``time_limit`` seconds of solver time).

    For each option, how many of its non-sigma tensors of each size stay resident: tensors of equal
    size are interchangeable (each saves ``(n_o - 1) b`` traffic and costs ``b`` capacity), so the
    choice is a count per size. ``method='enumerate'`` tries every count vector of every option (exact;
    ``'auto'`` does so when an option has at most :data:`ENUMERATE_LIMIT` of them, which spares a
    solver process per chain); ``'ilp'`` solves it as an integer program: binaries ``u[o]`` (option o,
    exactly one) and integers ``keep[o,b]`` in ``[0, count_o(b)]`` with ``keep <= count * u``;
    traffic ``sum_o u[o] (base_o + n_o sum_T bytes_T) - sum_{o,b} keep[o,b] (n_o - 1) b``; capacity
    ``sum_o u[o] tile_ws_o + sum_{o,b} keep[o,b] b <= S``. The tests check that both agree."""
    feasible = [o for o in opts if o.tile_ws <= capacity]
    if not feasible:
        return None
    counts = [_counts(o) for o in feasible]
    small = all(math.prod(c + 1 for _, c in cs) <= ENUMERATE_LIMIT for cs in counts)
    if method == "enumerate" or (method == "auto" and small):
        k, keep = _enumerate(feasible, counts, capacity)
    else:
        k, keep = _chain_ilp(feasible, counts, capacity, time_limit)
        if k < 0:
            return None
    return _tiling_of(opts, feasible[k], keep)


def _tiling_of(opts: list[ChainOption], o: ChainOption, keep: dict[float, int]) -> ChainTiling:
    """Option ``o`` of ``opts`` with the first ``keep[b]`` of its tensors of each size ``b`` resident."""
    left = dict(keep)
    res = []
    for t, b in o.others:  # the first ``keep`` tensors of each size
        if left.get(b, 0) > 0:
            res.append(t)
            left[b] -= 1
    return chain_tiling(o, tuple(res), opts.index(o))


def _enumerate(feasible: list[ChainOption], counts: list[tuple[tuple[float, int], ...]],
               capacity: float) -> tuple[int, dict[float, int]]:
    best: tuple[float, int, dict[float, int]] | None = None
    for k, (o, cs) in enumerate(zip(feasible, counts, strict=True)):
        total = sum(b * c for b, c in cs)
        for keep in itertools.product(*(range(c + 1) for _, c in cs)):
            resident = sum(b * x for (b, _), x in zip(cs, keep, strict=True))
            if o.tile_ws + resident > capacity:
                continue
            q = o.base + o.tiles * total - (o.tiles - 1) * resident
            if best is None or q < best[0]:
                best = (q, k, {b: x for (b, _), x in zip(cs, keep, strict=True)})
    assert best is not None  # keeping nothing resident fits every feasible option
    return best[1], best[2]


FRONT_LIMIT = 1 << 15  # residency choices of all options kept as a capacity staircase, up to this many


@dataclass(frozen=True, slots=True)
class ChainFront:
    """:func:`solve_chain` of one list of options at every capacity: each residency choice of each option
    as (working set, traffic), sorted by working set, with the running best. At capacity S the choices that
    fit are a prefix, and the best of a prefix (least traffic, the first enumerated among equals) is what the
    enumeration in :func:`solve_chain` picks, so :meth:`at` gives its answer for any S by one bisection.

    >>> o = ChainOption("S", 1, 4.0, 100.0, 10.0, (("w", 50.0),))
    >>> front = chain_front([o])
    >>> front.at(20.0).traffic, front.at(60.0).traffic, front.at(5.0)  # w streamed 4 times, resident, no fit
    (300.0, 150.0, None)
    """

    opts: tuple[ChainOption, ...]
    counts: tuple[tuple[tuple[float, int], ...], ...]  # :func:`_counts` of each option
    ws: list[float]                                    # working sets of the choices, ascending
    best: list[tuple[int, tuple[int, ...]]]            # (option, kept per size) of the best choice of each prefix

    def at(self, capacity: float) -> ChainTiling | None:
        """``solve_chain(opts, capacity)`` (the enumeration's answer)."""
        m = bisect.bisect_right(self.ws, capacity)
        if m == 0:
            return None
        k, keep = self.best[m - 1]
        return _tiling_of(list(self.opts), self.opts[k], {b: x for (b, _), x in zip(self.counts[k], keep, strict=True)})


def chain_front(opts: list[ChainOption]) -> ChainFront | None:
    """The :class:`ChainFront` of ``opts``; None when :func:`solve_chain` would not enumerate them at every
    capacity (an option with more than :data:`ENUMERATE_LIMIT` choices) or they have more than
    :data:`FRONT_LIMIT` choices in all."""
    by_others: dict[int, tuple[tuple[float, int], ...]] = {}  # the options of one class share one ``others``
    counts = []
    for o in opts:
        cs = by_others.get(id(o.others))
        if cs is None:
            cs = by_others[id(o.others)] = _counts(o)
        counts.append(cs)
    sizes = [math.prod(c + 1 for _, c in cs) for cs in counts]
    if not opts or max(sizes) > ENUMERATE_LIMIT or sum(sizes) > FRONT_LIMIT:
        return None
    choices: list[tuple[float, float, int, tuple[int, ...]]] = []  # (ws, q, option, keep), in enumeration order
    kept: dict[tuple, tuple[float, list]] = {}  # counts -> (their bytes, [(keep, resident bytes)]): options share them
    for k, (o, cs) in enumerate(zip(opts, counts, strict=True)):
        got = kept.get(cs)
        if got is None:  # the same arithmetic as _enumerate, so the same floats
            got = kept[cs] = (sum(b * c for b, c in cs), [(keep, sum(b * x for (b, _), x in zip(cs, keep, strict=True)))
                                                         for keep in itertools.product(*(range(c + 1) for _, c in cs))])
        total, each = got
        tile_ws, base, tiles = o.tile_ws, o.base, o.tiles
        choices.extend((tile_ws + resident, base + tiles * total - (tiles - 1) * resident, k, keep)
                       for keep, resident in each)
    wss = [c[0] for c in choices]
    order = sorted(range(len(choices)), key=wss.__getitem__)  # stable: equal working sets keep their order
    ws, best = [], []
    top_q, top, pick = math.inf, -1, (0, ())
    for m in order:
        w, q, k, keep = choices[m]
        if q < top_q or (q == top_q and m < top):  # the least traffic, the first enumerated among equals
            top_q, top, pick = q, m, (k, keep)
        ws.append(w)
        best.append(pick)
    return ChainFront(tuple(opts), tuple(counts), ws, best)


def _chain_ilp(feasible: list[ChainOption], counts: list[tuple[tuple[float, int], ...]], capacity: float,
               time_limit: float | None) -> tuple[int, dict[float, int]]:
    import pulp  # imported only when an ILP is solved: most bounds never need one

    prob = pulp.LpProblem("chain", pulp.LpMinimize)
    u = [pulp.LpVariable(f"u{k}", cat="Binary") for k in range(len(feasible))]
    keep = {(k, b): pulp.LpVariable(f"k{k}_{m}", 0, c, cat="Integer")
            for k, cs in enumerate(counts) for m, (b, c) in enumerate(cs)}
    prob += pulp.lpSum(u) == 1
    scale = 1.0 / max(1.0, max(o.base + o.tiles * sum(b for _, b in o.others) for o in feasible))
    obj, cap = [], []
    for k, o in enumerate(feasible):
        obj.append(u[k] * (o.base + o.tiles * sum(b for _, b in o.others)))
        cap.append(u[k] * o.tile_ws)
        for b, c in counts[k]:
            prob += keep[(k, b)] <= c * u[k]
            obj.append(-(o.tiles - 1) * b * keep[(k, b)])
            cap.append(b * keep[(k, b)])
    prob += pulp.lpSum(obj) * scale
    prob += pulp.lpSum(cap) * (1.0 / max(1.0, capacity)) <= capacity / max(1.0, capacity)
    if not solve_exactly(prob, time_limit):
        return -1, {}
    k = max(range(len(feasible)), key=lambda q: u[q].value() or 0.0)
    return k, {b: round(keep[(k, b)].value() or 0.0) for b, _ in counts[k]}


def _counts(o: ChainOption) -> tuple[tuple[float, int], ...]:
    """(bytes, how many of the option's non-sigma tensors have that size), by size."""
    return _size_counts(o.others)


@lru_cache(maxsize=1 << 12)
def _size_counts(others: tuple[tuple[str, float], ...]) -> tuple[tuple[float, int], ...]:
    out: dict[float, int] = {}
    for _, b in others:
        out[b] = out.get(b, 0) + 1
    return tuple(sorted(out.items()))


def chain_tiling(o: ChainOption, resident: tuple[str, ...], option: int = -1) -> ChainTiling:
    """The traffic and working set of option ``o`` with ``resident`` tensors held on chip."""
    q = o.base + sum(b if t in resident else o.tiles * b for t, b in o.others)
    ws = o.tile_ws + sum(b for t, b in o.others if t in resident)
    return ChainTiling(q, o.rank, o.tile, resident, tuple(t for t, _ in o.others if t not in resident), ws,
                       option, tuple(k for k, (t, _) in enumerate(o.others) if t in resident))


__all__ = ["ChainFront", "ChainOption", "ChainTiling", "chain_front", "avoided_bytes", "chain_options", "chain_tiling",
           "external_bytes",
           "graph_view", "live_bytes", "solve_chain", "touched_bytes"]
