"""The cache-aware SOL: the fusion partition of the graph and the traffic of each group at capacity S.

Groups are contiguous runs (segments) of the topological order, at most ``max_group`` nodes, plus
each longer kernel of the unfused bound (the nodes one source op was lowered to, which the source
program runs as one kernel) and the whole graph as one group. For each candidate segment:

- ``compute`` = the busiest unit's total over its nodes (units overlap inside one kernel, as for
  the fused bound); ``Q`` = its DRAM traffic at capacity S (:mod:`.segments`: tiling ILP, chain
  ILP, everything on chip, or the provable floors; in ``ilp`` mode ``Q = max(ILP, floor)``, the
  ILP is never below the floor and the max only guards). Segments of repeated layers are solved
  once (:mod:`.structure`).
- ``time = max(compute, Q / DRAM bandwidth)``; ``avoided``: the intermediate bytes a multi-node
  group keeps on chip (their writes and reads), the traffic fusion saves.

Partition: dynamic programming over the order, ``best[j] = min_i best[i-1] + time(i..j)``. Where
the capture interleaves independent branches, the groups may also be runs of the *branch order*
(:mod:`.schedule`: a topological order that follows chains), which are convex node sets though not
consecutive in the file: the two orders share their states wherever both have run the same nodes,
so a schedule may switch between them there; the search only grows, so the bound only drops, and
every partition it finds is a schedule of real kernels. Groups that are not runs of the file's
order are reported (``consecutive: false``). The result is then ``max(partition time, fused time)``:
each group's Q is at least its external bytes, so the sum of the group traffics is at least the
graph's boundary bytes and the sum of per-group compute maxima at least the busiest unit's total;
the max is a guard that the report flags if it ever binds. With unlimited S the whole graph fits,
the one-group partition is the fused bound, and nothing beats it.
"""

from __future__ import annotations

import math
import time

import numpy as np

from solar_io.graph import Graph
from solar_io.metrics import GraphMetrics

from ..result import CacheAware, GroupResult
from ..traffic.graph import GraphTraffic, reordered, traffic_of
from ..traffic.residency import on_chip_capacity
from .ilp import STATS, TIME_LIMIT
from .schedule import Alternative, BranchGroups, branch_order, regions
from .segments import GENERATION, Segments
from .structure import structure, with_contexts
from .windows import Windows

UNIT_NAMES = ("matrix", "vector", "special")


def capacity_of(spec: object, capacity: float | None) -> tuple[float, str]:
    """The on-chip capacity S in bytes and where it comes from (:func:`on_chip_capacity`)."""
    return on_chip_capacity(spec, capacity)


class Credit:
    """Per node, what :meth:`of` needs of its reads and writes, tabulated once per graph: the
    reads ``(root, bytes, producer, first touch)`` of roots an earlier node touched and the writes
    that may stay on chip for a later reader ``(root, bytes not exposed, last reader)`` (the other
    reads and writes of node k count in no group holding k: a first touch at k is not before the
    group, a last reader at or before k is not after it)."""

    def __init__(self, v: GraphTraffic, runs: tuple[range, ...] | None = None) -> None:
        """``runs``: the only positions groups will hold (all when None; the others get empty rows)."""
        first, producer, last = v.first, v.producer, v.last_reader
        n = len(v.reads)
        self.reads: list[tuple] = [()] * n
        self.writes: list[tuple] = [()] * n
        wanted = set(range(n)) if runs is None else {k for run in runs for k in run}
        seen: dict[str, float] = {}  # bytes of each root the nodes before k moved: at most that much is on chip
        for k in range(n):
            if k in wanted:
                self.reads[k] = tuple((t, min(b, seen[t]), producer.get(t, -1), first[t])
                                      for t, b in v.reads[k].items() if first.get(t, k) < k and seen.get(t, 0.0) > 0)
                self.writes[k] = tuple((t, b - min(b, v.exposed.get(t, 0.0)), last[t]) for t, b in v.writes[k].items()
                                       if t not in v.output and last.get(t, -1) > k)
            for t, b in (*v.reads[k].items(), *v.writes[k].items()):
                seen[t] = max(seen.get(t, 0.0), b)

        self._sums: dict[tuple[int, int], tuple[float, float]] = {}
        self._windows: tuple[int, list[list[float]], list[list[float]]] = (0, [], [])  # window_sums's tables

    def of(self, i: int, j: int, capacity: float) -> float:
        """Bytes of group ``i..j``'s Q that on-chip memory may save because it is not emptied between
        kernels (:mod:`solar_io.backends.traffic.residency`): up to S of the roots it reads that an
        earlier node touched (a run that starts with them on chip does at most that much less traffic
        than one that loads them first), plus up to S of the intermediates it writes for later groups
        (they may stay on chip; graph outputs and what output views expose are delivered)."""
        if capacity <= 0:
            return 0.0
        got = self.sums(i, j)
        return min(capacity, got[0]) + min(capacity, got[1])

    def sums(self, i: int, j: int) -> tuple[float, float]:
        """(bytes of the roots group ``i..j`` reads that an earlier node touched, bytes of what it writes
        for later groups): what :meth:`of` caps at S; they do not depend on S, so they are kept."""
        got = self._sums.get((i, j))
        if got is None and j - i < self._windows[0]:
            _, rd, kp = self._windows
            return rd[j - i][i], kp[j - i][i]
        if got is None:
            reread: dict[str, float] = {}
            kept: dict[str, float] = {}
            for k in range(i, j + 1):
                for t, b, p, f in self.reads[k]:
                    if not (i <= p <= j) and f < i:
                        reread[t] = max(reread.get(t, 0.0), b)
                for t, b, last in self.writes[k]:
                    if last > j:
                        kept[t] = max(kept.get(t, 0.0), b)
            got = self._sums[(i, j)] = (math.fsum(reread.values()), math.fsum(kept.values()))
        return got

    def window_sums(self, w: int) -> tuple[list[list[float]], list[list[float]]]:
        """:meth:`sums` of every window ``i..i+d`` (``d < w``) as two tables ``[d][i]`` (re-read, kept), kept
        for :meth:`of` too; the same floats, built as runs grow instead of window by window.

        A window's re-read bytes are the largest read of each root, over its reads of roots an earlier
        node touched whose producer is outside it; its kept bytes the largest write of each root read
        after it. With ``i`` fixed, the re-reads of roots produced before ``i`` only gain members as
        the window grows to the right; with ``j`` fixed, the kept writes only gain members as it grows
        to the left; each per-root maximum is then updated once per read or write, and ``math.fsum``
        of the same values is the same float in any order. A read whose producer comes after it (an
        in-place update) leaves a window once the window reaches that producer: windows starting where
        such a read lies within reach are summed by :meth:`sums`."""
        n = len(self.reads)
        w = min(w, n)
        reread = [[0.0] * (n - d) for d in range(w)]
        kept = [[0.0] * (n - d) for d in range(w)]
        fsum = math.fsum
        later = [any(p > k for _, _, p, _ in self.reads[k]) for k in range(n)]  # a read produced after it
        for i in range(n):
            if any(later[i:i + w]):
                for d in range(min(w, n - i)):
                    reread[d][i] = self.sums(i, i + d)[0]
                continue
            acc: dict[str, float] = {}
            for d in range(min(w, n - i)):
                for t, b, p, f in self.reads[i + d]:
                    if p < i and f < i:  # p <= i + d always here: outside the window is before it
                        acc[t] = max(acc.get(t, 0.0), b)
                reread[d][i] = fsum(acc.values())
        for j in range(n):
            acc = {}
            for d in range(min(w, j + 1)):
                for t, b, last in self.writes[j - d]:
                    if last > j:
                        acc[t] = max(acc.get(t, 0.0), b)
                kept[d][j - d] = fsum(acc.values())
        self._windows = (w, reread, kept)  # what sums() answers for a window it has not summed itself
        return reread, kept


def cache_aware(g: Graph, gm: GraphMetrics, unit_times: list[dict[str, float]], bw: float, capacity: float,
                fused_time: float, unfused_time: float, *, bound: str = "ilp", max_group: int = 8,
                capacity_source: str = "", time_limit: float | None = TIME_LIMIT, reuse: bool = True,
                residency: bool = True) -> CacheAware:
    """The cache-aware SOL (see the module docstring). ``unit_times[k]``: node k's seconds per unit;
    ``time_limit``: seconds per ILP (None: none); ``reuse``: share the work of identical nodes and
    segments (False only to check that sharing changes nothing)."""
    if bound not in ("ilp", "floor"):
        raise ValueError(f"--cache-bound: use ilp or floor, not {bound!r}")
    t0 = time.perf_counter()
    phases: dict[str, float] = {}
    solved0 = STATS["solved"]
    n = len(g.nodes)
    view = traffic_of(g, gm)
    if reuse:  # one table per capacity and graph: a later bound at the same S (another chip, other options) reuses it
        seg = view.memo(("segments", capacity, bound, max_group, time_limit, GENERATION[0]),
                        lambda: Segments(g, gm, view, capacity, bound, max_group, time_limit, reuse))
    else:
        seg = Segments(g, gm, view, capacity, bound, max_group, time_limit, reuse)
    distinct0, hits0, chains0 = seg.distinct, seg.span_hits, seg.chain_ilps
    credit: Credit = view.memo("credit", lambda: Credit(view))
    held = capacity if residency else 0.0  # what on-chip memory may keep between groups
    units = [tuple(u.get(x, 0.0) for x in UNIT_NAMES) for u in unit_times]
    alt = _alternative(view, units, capacity, bound, max_group, time_limit, held, reuse)
    phases["structure"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    # the windows (groups of at most max_group nodes) as arrays, one per offset (:mod:`.windows`)
    win: Windows = view.memo(("windows", max_group, reuse), lambda: Windows(n, max_group, seg.structure.context,
                                                                           credit, reuse))
    if reuse:
        at = view.memo(("window spans", capacity, bound, max_group, time_limit, GENERATION[0]), lambda: win.at(seg))
        seg.span_hits += win.pairs - (seg.distinct - distinct0)  # every window not analysed afresh here is a hit
    else:
        at = win.at(seg)
    win_spans, win_ids = at[0], win.ids
    qs, comps, ts = win.times(at[1], np.array(units, dtype=float).reshape(n, 3), held, bw)
    t_end, c_end = win.by_end(ts), win.by_end(comps)
    best = [0.0] + [math.inf] * n
    choice: list[tuple[int, float, float] | None] = [None] * (n + 1)  # (start, compute, time) of the last group
    spans: dict[tuple[int, int], object] = {}  # the longer groups' spans (a window's: win_spans)
    long_candidates: list[tuple[int, int, float]] = []
    long: dict[int, list[int]] = {}  # last node -> first nodes of kernels longer than max_group
    for i, j in view.spans:
        if j - i + 1 > max_group and (i, j) != (0, n - 1):
            long.setdefault(j, []).append(i)
    w = win.w
    for j in range(n):
        tj = t_end[j]
        b, pick = best[j + 1], -1
        for d in range(min(j + 1, w)):  # the window j - d..j (NaN: no group)
            t = tj[d]
            if t == t and best[j - d] + t < b:
                b, pick = best[j - d] + t, d
        if pick >= 0:
            best[j + 1] = b
            choice[j + 1] = (j - pick, c_end[j][pick], tj[pick])
        for i in long.get(j, ()):  # a kernel longer than max_group
            m, v, sp = (math.fsum(units[k][x] for k in range(i, j + 1)) for x in range(3))
            if math.isinf(best[i]):
                continue
            s = seg.span(i, j)
            if s is None:
                continue
            q = s.traffic - credit.of(i, j, held)
            long_candidates.append((i, j, q))
            compute = max(m, v, sp)
            t = max(compute, q / bw)
            if best[i] + t < best[j + 1]:
                best[j + 1] = best[i] + t
                choice[j + 1] = (i, compute, t)
                spans[(i, j)] = s
        if alt is not None:  # the branch order's groups ending here (:mod:`.schedule`)
            alt.step(j, best, choice, bw)
    candidates = _candidates(win, qs, best, long_candidates)
    if n > max_group:  # the whole graph as one group
        s = seg.span(0, n - 1)
        if s is not None:
            candidates.append((0, n - 1, s.traffic))
            compute = max(math.fsum(u[x] for u in units) for x in range(3))
            t = max(compute, s.traffic / bw)
            if t < best[n]:
                best[n] = t
                choice[n] = (0, compute, t)
                spans[(0, n - 1)] = s
    phases["partition"] = time.perf_counter() - t1
    groups: list[GroupResult] = []
    chosen: list[tuple[int, int]] = []
    in_branch: list[tuple[int, int]] = []
    j, branch = n, False  # branch: j is a state of the branch order's own (not a cut)
    while j > 0:
        if branch or choice[j][1] is None:  # type: ignore[index]  # a group of the branch order (alt is set)
            a, b, comp, tt, s = alt.back[j]  # type: ignore[union-attr]
            in_branch.append((a, b))
            kept = alt.credit.of(a, b, held)  # type: ignore[union-attr]
            members = [alt.order[k] for k in range(a, b + 1)]  # type: ignore[union-attr]
            groups.append(GroupResult(nodes=tuple(g.nodes[k].name for k in members), kind=s.kind,
                                      traffic=s.traffic - kept, floor=s.floor, compute=comp, time=tt,
                                      detail=alt.seg.detail(a, s), avoided=s.avoided,  # type: ignore[union-attr]
                                      fallback=s.fallback, resident=kept, achieved=s.achieved,
                                      consecutive=max(members) - min(members) == b - a))
            j, branch = a, not alt.cut[a]  # type: ignore[union-attr]
            continue
        i, compute, t = choice[j]  # type: ignore[misc]
        chosen.append((i, j - 1))
        s = win_spans[win_ids[j - 1 - i][i]] if j - 1 - i < w else spans[(i, j - 1)]
        kept = credit.of(i, j - 1, held)
        groups.append(GroupResult(nodes=tuple(x.name for x in g.nodes[i:j]), kind=s.kind, traffic=s.traffic - kept,
                                  floor=s.floor, compute=compute, time=t, detail=seg.detail(i, s), avoided=s.avoided,
                                  fallback=s.fallback, resident=kept, achieved=s.achieved))
        j = i
    groups.reverse()
    total = math.fsum(gr.time for gr in groups)
    raised = total < fused_time * (1 - 1e-12)
    t_final = max(total, fused_time)
    traffic = math.fsum(gr.traffic for gr in groups)
    ut = tuple((u, math.fsum(units[k][x] for k in range(n))) for x, u in enumerate(UNIT_NAMES))
    rel = t_final / unfused_time if unfused_time > 0 else 1.0
    vs = "equal" if abs(rel - 1.0) < 1e-9 else ("above" if rel > 1 else "below")
    return CacheAware(capacity=capacity, capacity_source=capacity_source, bound=bound, time=t_final,
                      compute=math.fsum(gr.compute for gr in groups), memory=traffic / bw, traffic=traffic,
                      unit_times=ut, groups=tuple(groups), raised_to_fused=raised, vs_unfused=vs,
                      ilps_solved=STATS["solved"] - solved0, chain_ilps=seg.chain_ilps - chains0, phases=phases,
                      segments_solved=seg.distinct - distinct0, segments_reused=seg.span_hits - hits0,
                      fallbacks=tuple(gr.nodes[0] for gr in groups if gr.fallback), candidates=tuple(candidates),
                      spans=tuple(reversed(chosen)),
                      branch_order=() if alt is None else tuple(alt.order),
                      branch_candidates=() if alt is None else tuple(alt.candidates),
                      branch_spans=tuple(reversed(in_branch)))


def _candidates(win: Windows, qs: list, best: list[float],
                long_candidates: list[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
    """Every group the partition weighed, ``(first, last, Q)``, in its order: by last node, the windows by
    offset, then the longer kernels; a window is one where it is a group and its first node is reachable."""
    n, w = win.n, win.w
    q_end = np.full((n, w), np.nan)
    for d, q in enumerate(qs):
        q_end[d:, d] = q
    last, off = np.nonzero(~np.isnan(q_end))  # row-major: by last node, then offset
    first = last - off
    if any(math.isinf(b) for b in best[:n]):  # a node no group reaches (never with single-node groups)
        keep = np.array([not math.isinf(best[i]) for i in first.tolist()], dtype=bool)
        last, off, first = last[keep], off[keep], first[keep]
    out = list(zip(first.tolist(), last.tolist(), q_end[last, off].tolist(), strict=True))
    if long_candidates:  # each after the windows ending where it ends
        ends = last
        for c in reversed(long_candidates):
            out.insert(int(np.searchsorted(ends, c[1], side="right")), c)
    return out


def _alternative(view: GraphTraffic, units: list[tuple[float, ...]], capacity: float, bound: str, max_group: int,
                 time_limit: float | None, held: float, reuse: bool) -> Alternative | None:
    """The search of the branch order's groups (:mod:`.schedule`), or None when that order is the file's.
    Its reordered traffic model and segment tables are kept on ``view`` for every later capacity and chip;
    its structure reuses the node keys of the file's order and describes only the stretches where the two
    orders differ, widened by a group's length."""
    got = view.memo("branch order", lambda: _reorder(view))
    if got is None:
        return None
    order, v2 = got
    runs = tuple(range(c0, c1) for c0, c1 in regions(order, max_group - 1))
    units2 = [units[k] for k in order]
    if not reuse:
        seg = Segments(v2.graph, v2.metrics, v2, capacity, bound, max_group, time_limit, False)
        return Alternative(BranchGroups(seg, Credit(v2), order, v2.spans, max_group, held, runs), units2)
    s0 = view.memo(("structure", max_group), lambda: structure(view.graph, view.metrics.nodes, view, max_group))
    v2.memo(("structure", max_group),
            lambda: with_contexts(v2.graph, v2, tuple(s0.node[k] for k in order), max_group, runs,
                                  tuple(s0.roots[k] for k in order)))

    def build() -> BranchGroups:
        seg = v2.memo(("segments", capacity, bound, max_group, time_limit, GENERATION[0]),
                      lambda: Segments(v2.graph, v2.metrics, v2, capacity, bound, max_group, time_limit, True))
        credit = v2.memo(("credit", runs), lambda: Credit(v2, runs))
        plan = v2.memo(("branch plan", max_group, runs),  # which groups, and which are one analysis: any S
                       lambda: BranchGroups.plan(seg, credit, order, v2.spans, max_group, runs))
        return BranchGroups(seg, credit, order, v2.spans, max_group, held, runs, plan)

    groups = v2.memo(("branch groups", capacity, bound, max_group, time_limit, held, GENERATION[0]), build)
    return Alternative(groups, units2)


def _reorder(view: GraphTraffic) -> tuple[tuple[int, ...], GraphTraffic] | None:
    """The branch order of ``view``'s graph and the traffic model in that order (None: the file's order)."""
    order = branch_order(view.graph, view.root, view.spans)
    return None if order is None else (order, reordered(view, order))


__all__ = ["CacheAware", "GroupResult", "cache_aware", "capacity_of"]
