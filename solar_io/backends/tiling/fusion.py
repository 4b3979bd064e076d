"""Fused groups: contiguous runs of nodes executed as one kernel, tiled on a shared rank.

A *segment* is a run ``nodes[i..j]`` of the graph's topological order. View-only data movement
aliases tensors (a view's output is its input's memory), so tensors are identified by their *root*
(the tensor a chain of views starts from).

- **External bytes** of a segment: every root it reads that is produced outside it (or is a graph
  input, weight or constant), at the largest read of it, plus every root it writes that is read
  outside it or is a graph output. Intermediates produced and consumed inside never touch DRAM:
  that is the traffic a fused group avoids.
- **Everything fits**: when the bytes of every root the segment touches fit in S, its traffic is
  its external bytes.
- **Chain tiling** (:func:`solve_chain`): pick a shared rank ``sigma`` that every node of the
  segment iterates over and keeps in its outputs (so no reduction crosses tiles, and every
  intermediate is indexed by it) and a tile ``t | N_sigma`` (``n = N_sigma / t`` tiles). Tensors
  indexed by sigma move one tile per step; the others (weights) are either *resident* (held on chip
  for the whole run) or *streamed* (re-read once per sigma tile). Capacity, as the issue defines it:
  ``sum(resident tensors not indexed by sigma) + max_v(sigma-indexed tile bytes of node v) <= S``;
  traffic: ``external sigma-indexed bytes + sum(resident) + n * sum(streamed)``. A streamed tensor is
  charged no capacity (it passes through in sub-tiles the model does not track), which can only
  lower Q; inner tiling of each node within a sigma tile is not modelled. Solved as a small
  ILP over (sigma, t) and residency (PuLP); brute-force enumeration agrees in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulp

from solar_io.graph import Graph, Node
from solar_io.metrics import GraphMetrics

from .einsum import divisors


@dataclass(frozen=True, slots=True)
class GraphView:
    """Alias roots, producers and consumers of a graph, for segment accounting."""

    root: dict[str, str]
    producer: dict[str, int]                 # root -> index of the non-view node writing it
    consumers: dict[str, tuple[int, ...]]    # root -> indices of nodes reading it (any alias)
    output: frozenset[str]                   # roots that are (aliases of) graph outputs
    reads: tuple[dict[str, float], ...]      # per node: root -> bytes read
    writes: tuple[dict[str, float], ...]     # per node: root -> bytes written
    size: dict[str, float] = field(default_factory=dict)  # root -> largest bytes read or written


def graph_view(g: Graph, gm: GraphMetrics) -> GraphView:
    """The alias structure of ``g`` (``gm``: its metrics)."""
    root: dict[str, str] = {t.name: t.name for t in g.tensors}
    for n in g.nodes:
        if n.kind == "data_movement" and n.view and len(n.inputs) == 1:
            for a in n.outputs:
                root[a.tensor] = root[n.inputs[0].tensor]
    producer: dict[str, int] = {}
    consumers: dict[str, list[int]] = {}
    reads, writes = [], []
    size: dict[str, float] = {}
    for i, (n, m) in enumerate(zip(g.nodes, gm.nodes, strict=True)):
        view = n.kind == "data_movement" and n.view
        rd: dict[str, float] = {}
        wr: dict[str, float] = {}
        if not view:
            for t, b in m.bytes_read.items():
                rd[root[t]] = max(rd.get(root[t], 0.0), b)
                consumers.setdefault(root[t], []).append(i)
            for t, b in m.bytes_written.items():
                wr[root[t]] = max(wr.get(root[t], 0.0), b)
                producer.setdefault(root[t], i)
        for t, b in (*rd.items(), *wr.items()):
            size[t] = max(size.get(t, 0.0), b)
        reads.append(rd)
        writes.append(wr)
    out = frozenset(root[t.name] for t in g.tensors if t.role == "output")
    return GraphView(root, producer, {k: tuple(v) for k, v in consumers.items()}, out, tuple(reads), tuple(writes),
                     size)


def external_bytes(v: GraphView, i: int, j: int) -> float:
    """DRAM bytes of segment ``i..j`` run as one kernel with everything it needs on chip."""
    rd: dict[str, float] = {}
    wr: dict[str, float] = {}
    for k in range(i, j + 1):
        for t, b in v.reads[k].items():
            p = v.producer.get(t, -1)
            if not (i <= p <= j):
                rd[t] = max(rd.get(t, 0.0), b)
        for t, b in v.writes[k].items():
            if t in v.output or any(not (i <= c <= j) for c in v.consumers.get(t, ())):
                wr[t] = max(wr.get(t, 0.0), b)
    return sum(rd.values()) + sum(wr.values())


def avoided_bytes(v: GraphView, i: int, j: int) -> float:
    """DRAM bytes segment ``i..j`` saves by keeping its intermediates on chip: the writes and reads
    of every root produced and consumed only inside it (and not a graph output)."""
    total = 0.0
    for k in range(i, j + 1):
        for t, b in v.writes[k].items():
            if t not in v.output and all(i <= c <= j for c in v.consumers.get(t, ())) and v.consumers.get(t):
                total += b + sum(v.reads[c].get(t, 0.0) for c in set(v.consumers[t]))
    return total


def touched_bytes(v: GraphView, i: int, j: int) -> float:
    """Bytes of every root segment ``i..j`` reads or writes (each once)."""
    roots = {t for k in range(i, j + 1) for t in (*v.reads[k], *v.writes[k])}
    return sum(v.size[t] for t in roots)


@dataclass(frozen=True, slots=True)
class ChainOption:
    """One (sigma, tile) choice of a segment: traffic and capacity parts in bytes."""

    rank: str
    tile: int
    tiles: int
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


def chain_options(g: Graph, v: GraphView, i: int, j: int) -> list[ChainOption]:
    """Every (sigma, tile) of segment ``i..j`` (none when a node is not an einsum or a view)."""
    nodes: list[Node] = list(g.nodes[i:j + 1])
    tmap = g.tensor_map
    work = [n for n in nodes if not (n.kind == "data_movement" and n.view)]
    if not work or any(n.kind != "einsum" for n in work):
        return []
    common = set(work[0].space)
    for n in work:
        common &= set(n.space)
        for a in n.outputs:
            common &= set(tmap[a.tensor].ranks)
    for n in nodes:
        if n not in work:
            for a in (*n.inputs, *n.outputs):
                common &= set(tmap[a.tensor].ranks)
    sizes = g.rank_sizes
    roots_ranks: dict[str, set[str]] = {}
    for n in nodes:
        for a in (*n.inputs, *n.outputs):
            r = v.root[a.tensor]
            roots_ranks.setdefault(r, set(tmap[r].ranks)).intersection_update(tmap[a.tensor].ranks)
    opts = []
    ext_rd: dict[str, float] = {}
    ext_wr: dict[str, float] = {}
    for k in range(i, j + 1):
        for t, b in v.reads[k].items():
            if not (i <= v.producer.get(t, -1) <= j):
                ext_rd[t] = max(ext_rd.get(t, 0.0), b)
        for t, b in v.writes[k].items():
            if t in v.output or any(not (i <= c <= j) for c in v.consumers.get(t, ())):
                ext_wr[t] = max(ext_wr.get(t, 0.0), b)
    for sigma in sorted(common):
        if sizes[sigma] <= 1:
            continue
        indexed = {t for t, rs in roots_ranks.items() if sigma in rs}
        others = tuple(sorted((t, b) for t, b in ext_rd.items() if t not in indexed and b > 0))
        if any(t not in indexed for t in ext_wr):
            continue
        base = sum(b for t, b in ext_rd.items() if t in indexed) + sum(ext_wr.values())
        for t in divisors(sizes[sigma]):
            n = sizes[sigma] // t
            ws = max(sum(b / n for t2, b in (*v.reads[k].items(), *v.writes[k].items()) if t2 in indexed)
                     for k in range(i, j + 1))
            opts.append(ChainOption(sigma, t, n, base, ws, others))
    return opts


def solve_chain(opts: list[ChainOption], capacity: float) -> ChainTiling | None:
    """The minimum-traffic chain tiling among ``opts`` within ``capacity`` bytes (an ILP).

    Binaries ``u[o]`` (option o chosen, exactly one) and ``keep[o,T]`` (tensor T resident under
    option o, ``keep <= u``). Traffic: ``sum_o u[o] (base_o + n_o sum_T bytes_T)
    - sum_{o,T} keep[o,T] (n_o - 1) bytes_T``; capacity: ``sum_o u[o] tile_ws_o
    + sum_{o,T} keep[o,T] bytes_T <= S``."""
    feasible = [o for o in opts if o.tile_ws <= capacity]
    if not feasible:
        return None
    prob = pulp.LpProblem("chain", pulp.LpMinimize)
    u = [pulp.LpVariable(f"u{k}", cat="Binary") for k in range(len(feasible))]
    keep = {(k, t): pulp.LpVariable(f"k{k}_{m}", cat="Binary")
            for k, o in enumerate(feasible) for m, (t, _) in enumerate(o.others)}
    prob += pulp.lpSum(u) == 1
    scale = 1.0 / max(1.0, max(o.base + o.tiles * sum(b for _, b in o.others) for o in feasible))
    obj, cap = [], []
    for k, o in enumerate(feasible):
        obj.append(u[k] * (o.base + o.tiles * sum(b for _, b in o.others)))
        cap.append(u[k] * o.tile_ws)
        for t, b in o.others:
            prob += keep[(k, t)] <= u[k]
            obj.append(-(o.tiles - 1) * b * keep[(k, t)])
            cap.append(b * keep[(k, t)])
    prob += pulp.lpSum(obj) * scale
    prob += pulp.lpSum(cap) * (1.0 / max(1.0, capacity)) <= capacity / max(1.0, capacity)
    prob.solve(pulp.PULP_CBC_CMD(msg=0, gapRel=0, gapAbs=0))
    if pulp.LpStatus[prob.status] != "Optimal":
        return None
    k = max(range(len(feasible)), key=lambda q: u[q].value() or 0.0)
    o = feasible[k]
    res = tuple(t for t, _ in o.others if (keep[(k, t)].value() or 0.0) > 0.5)
    return chain_tiling(o, res, opts.index(o))


def chain_tiling(o: ChainOption, resident: tuple[str, ...], option: int = -1) -> ChainTiling:
    """The traffic and working set of option ``o`` with ``resident`` tensors held on chip."""
    q = o.base + sum(b if t in resident else o.tiles * b for t, b in o.others)
    ws = o.tile_ws + sum(b for t, b in o.others if t in resident)
    return ChainTiling(q, o.rank, o.tile, resident, tuple(t for t, _ in o.others if t not in resident), ws,
                       option, tuple(k for k, (t, _) in enumerate(o.others) if t in resident))


__all__ = ["ChainOption", "ChainTiling", "GraphView", "avoided_bytes", "chain_options", "chain_tiling",
           "external_bytes",
           "graph_view", "solve_chain", "touched_bytes"]
