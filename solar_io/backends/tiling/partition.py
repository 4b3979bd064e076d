"""The cache-aware SOL: the fusion partition of the graph and the traffic of each group at capacity S.

Groups are contiguous runs (segments) of the topological order, at most ``max_group`` nodes, plus
the whole graph as one group. For each candidate segment:

- ``compute`` = the busiest unit's total over its nodes (units overlap inside one kernel, as for
  the fused bound); ``Q`` = its DRAM traffic at capacity S:
  * one einsum node: the per-einsum tiling ILP (:mod:`.ilp`); a node it cannot tile (gather,
    opaque, copy): its unfused bytes; a view: 0;
  * several nodes: external bytes when every tensor it touches fits in S, else the chain ILP
    (:mod:`.fusion`); a segment neither can handle is not a group;
  * ``bound='floor'`` uses the provable floors instead (:mod:`.floors`: compulsory, Smith's
    matmul bound, HBL; inside a group only over operands that come from DRAM).
  In ``ilp`` mode ``Q = max(ILP, floor)`` (the ILP is never below the floor; the max only guards).
- ``time = max(compute, Q / DRAM bandwidth)``; ``avoided``: the intermediate bytes a multi-node
  group keeps on chip (their writes and reads), the traffic fusion saves.

Partition: dynamic programming over the order, ``best[j] = min_i best[i-1] + time(i..j)``. The
result is then ``max(partition time, fused time)``: each group's Q is at least its external bytes,
so the sum of the group traffics is at least the graph's boundary bytes and the sum of per-group
compute maxima at least the busiest unit's total; the max is a guard that the report flags if it
ever binds. With unlimited S the whole graph fits, the one-group partition is the fused bound, and
nothing beats it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from solar_io.graph import Graph
from solar_io.metrics import GraphMetrics

from .einsum import einsum_of
from .floors import floor
from .fusion import avoided_bytes, chain_options, chain_tiling, external_bytes, graph_view, solve_chain, touched_bytes
from .ilp import solve

UNIT_NAMES = ("matrix", "vector", "special")


@dataclass(frozen=True, slots=True)
class GroupResult:
    """One group of the chosen partition."""

    nodes: tuple[str, ...]
    kind: str            # 'tiled' (one einsum, tiling ILP), 'fused' (chain tiling), 'resident'
    #                      (everything on chip), 'untiled' (bytes as unfused), 'view', 'floor'
    traffic: float
    floor: float
    compute: float
    time: float
    detail: str = ""
    avoided: float = 0.0  # intermediate bytes kept on chip (written and read inside the group)


@dataclass(frozen=True, slots=True)
class CacheAware:
    """The cache-aware bound of one graph on one chip."""

    capacity: float
    capacity_source: str
    bound: str                   # 'ilp' or 'floor'
    time: float
    compute: float
    memory: float
    traffic: float
    unit_times: tuple[tuple[str, float], ...]
    groups: tuple[GroupResult, ...]
    raised_to_fused: bool
    vs_unfused: str              # 'above', 'below' or 'equal'
    ilps_solved: int = 0         # distinct per-einsum ILPs solved for this graph (the rest were cached)
    chain_ilps: int = 0          # distinct fused-chain ILPs solved
    phases: dict[str, float] = field(default_factory=dict)


def capacity_of(spec: object, capacity: float | None) -> tuple[float, str]:
    """The on-chip capacity S in bytes and where it comes from: ``capacity`` if given, else the
    sum of every on-chip level's total capacity (data may live in any of them; more S can only
    lower Q). Register files are not in the specs and are not counted."""
    if capacity is not None:
        if not (capacity > 0):
            raise ValueError(f"--capacity: must be positive, got {capacity!r}")
        return float(capacity), "--capacity"
    levels = [m for m in spec.memory[1:] if m.total_capacity]  # type: ignore[attr-defined]
    if not levels:
        return math.inf, "unlimited (the spec lists no on-chip level)"
    return float(sum(m.total_capacity for m in levels)), "+".join(m.level for m in levels) + " (spec)"


def cache_aware(g: Graph, gm: GraphMetrics, unit_times: list[dict[str, float]], bw: float, capacity: float,
                fused_time: float, unfused_time: float, *, bound: str = "ilp", max_group: int = 8,
                capacity_source: str = "") -> CacheAware:
    """The cache-aware SOL (see the module docstring). ``unit_times[k]``: node k's seconds per unit."""
    if bound not in ("ilp", "floor"):
        raise ValueError(f"--cache-bound: use ilp or floor, not {bound!r}")
    t0 = time.perf_counter()
    phases: dict[str, float] = {}
    view = graph_view(g, gm)
    n = len(g.nodes)
    einsums = [einsum_of(g, node) for node in g.nodes]
    single: list[tuple[float, float, str, str]] = []  # (Q, floor, kind, detail)
    from .ilp import STATS
    solved0 = STATS["solved"]
    for k, (node, e) in enumerate(zip(g.nodes, einsums, strict=True)):
        if node.kind == "data_movement" and node.view:
            single.append((0.0, 0.0, "view", ""))
            continue
        if e is None:
            b = gm.nodes[k].bytes
            single.append((b, b, "untiled", "bytes as unfused (not tileable)"))
            continue
        fl = floor(e, capacity, compulsory=gm.nodes[k].bytes).value  # metrics' bytes: exact or a lower bound
        if bound == "floor" or math.isinf(capacity):
            single.append((fl if bound == "floor" else gm.nodes[k].bytes, fl, "floor" if bound == "floor"
                           else "resident", ""))
            continue
        t = solve(e, capacity)
        if t.traffic is None:
            single.append((fl, fl, "floor", "S below the smallest working set: floor used"))
            continue
        detail = "tiles " + " ".join(f"{r}={v}" for r, v in t.tiles) + "; order " + (",".join(t.order) or "-")
        single.append((max(t.traffic, fl), fl, "tiled", detail))
    phases["einsum ILPs"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    units = [tuple(u.get(x, 0.0) for x in UNIT_NAMES) for u in unit_times]
    best = [0.0] + [math.inf] * n
    choice: list[tuple[int, GroupResult] | None] = [None] * (n + 1)
    chain_cache: dict[tuple, tuple[float, str] | None] = {}
    spans = [(i, j) for j in range(n) for i in range(max(0, j - max_group + 1), j + 1)]
    if n > max_group:
        spans.append((0, n - 1))
    spans.sort(key=lambda s: (s[1], s[0]))
    for i, j in spans:
        if math.isinf(best[i]):
            continue
        comp_units = [sum(units[k][u] for k in range(i, j + 1)) for u in range(3)]
        compute = max(comp_units)
        if i == j:
            q, fl, kind, detail = single[i]
            if kind not in ("view", "floor") and touched_bytes(view, i, i) <= capacity:
                ext = external_bytes(view, i, i)  # one node with everything on chip
                if ext < q:
                    q, fl, kind, detail = ext, min(fl, ext), "resident", "every tensor on chip"
        else:
            got = _segment(g, view, einsums, i, j, capacity, bound, chain_cache)
            if got is None:
                continue
            q, fl, kind, detail = got
        t = max(compute, q / bw)
        if best[i] + t < best[j + 1]:
            best[j + 1] = best[i] + t
            choice[j + 1] = (i, GroupResult(tuple(x.name for x in g.nodes[i:j + 1]), kind, q, fl, compute, t,
                                            detail, avoided_bytes(view, i, j) if i < j else 0.0))
    phases["partition"] = time.perf_counter() - t1
    groups: list[GroupResult] = []
    j = n
    while j > 0:
        i, gr = choice[j]  # type: ignore[misc]
        groups.append(gr)
        j = i
    groups.reverse()
    total = math.fsum(gr.time for gr in groups)
    raised = total < fused_time * (1 - 1e-12)
    t_final = max(total, fused_time)
    traffic = math.fsum(gr.traffic for gr in groups)
    ut = tuple((u, math.fsum(units[k][x] for k in range(n))) for x, u in enumerate(UNIT_NAMES))
    rel = t_final / unfused_time if unfused_time > 0 else 1.0
    vs = "equal" if abs(rel - 1.0) < 1e-9 else ("above" if rel > 1 else "below")
    return CacheAware(capacity, capacity_source, bound, t_final, math.fsum(gr.compute for gr in groups),
                      traffic / bw, traffic, ut, tuple(groups), raised, vs, STATS["solved"] - solved0,
                      len(chain_cache), phases)


def _segment(g: Graph, view, einsums, i: int, j: int, capacity: float, bound: str,  # noqa: ANN001
             cache: dict) -> tuple[float, float, str, str] | None:
    ext = external_bytes(view, i, j)
    internal = frozenset(t for t, p in view.producer.items() if i <= p <= j)
    fl = ext
    for k in range(i, j + 1):
        e = einsums[k]
        if e is not None:
            ex = frozenset(op.tensor for op in e.operands if view.root[op.tensor] in internal)
            fl = max(fl, floor(e, capacity, exclude=ex, compulsory=0.0).value)
    if bound == "floor":
        return fl, fl, "floor", ""
    if touched_bytes(view, i, j) <= capacity:
        return max(ext, fl), fl, "resident", "every tensor on chip"
    opts = chain_options(g, view, i, j)
    if not opts:
        return None
    key = (tuple((o.tile, o.tiles, o.base, o.tile_ws, tuple(b for _, b in o.others)) for o in opts), capacity)
    if key not in cache:
        ct = solve_chain(opts, capacity)
        cache[key] = None if ct is None else (ct.option, ct.resident_idx)
    got = cache[key]
    if got is None:
        return None
    o = opts[got[0]]
    ct = chain_tiling(o, tuple(o.others[p][0] for p in got[1]))
    detail = (f"tile {ct.rank}={ct.tile}; resident {','.join(ct.resident) or '-'}; "
              f"streamed {','.join(ct.streamed) or '-'}")
    return max(ct.traffic, fl), fl, "fused", detail


__all__ = ["CacheAware", "GroupResult", "cache_aware", "capacity_of"]
