"""The DRAM traffic of one candidate group (a segment ``i..j`` of the topological order) at capacity S.

- one node: a view moves nothing; a node the tiling model cannot represent (gather, scatter,
  opaque, copy, a field it does not model) is charged its unfused bytes; an einsum gets its
  tiling ILP optimum (:mod:`.ilp`), never below its provable floor (:mod:`.floors`), or its
  external bytes when everything it touches fits in S; its detail names the tiling found (the bytes
  it moves are at least Q) and the gap refinement left;
- several nodes: their external bytes when every tensor they touch fits in S (no ILP), else the
  chain ILP (:mod:`.fusion`); a segment that no chain tiling covers is not a group;
- ``bound='floor'`` uses the provable floors instead (inside a group only over operands that
  come from DRAM); with S unlimited a node's traffic is its unfused bytes.

Work is shared three ways: per node key (the single-node analysis, einsums and floors,
:func:`.structure.node_key`), per segment context (segments of identical layers,
:mod:`.structure`), and per chain-option structure and capacity (chain ILPs, across calls).
``reuse=False`` turns the first two off (the tests compare both ways).

Time limits: an ILP that reaches its limit (:data:`.ilp.TIME_LIMIT`) is replaced by the floor
of the node or group, which is at most its optimum, so the bound stays a lower bound; such
groups are marked ``fallback`` and reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from solar_io.graph import Graph
from solar_io.metrics import GraphMetrics
from solar_io.units import format_si

from ..traffic.graph import GraphTraffic
from .einsum import Einsum, einsum_of
from .floors import floor
from .fusion import (
    ChainFront,
    avoided_bytes,
    chain_front,
    chain_options,
    chain_tiling,
    external_bytes,
    live_bytes,
    solve_chain,
    touched_bytes,
)
from .ilp import Tiling, TimeLimitReached, solve
from .structure import structure

_CHAINS: dict[tuple[_Shape, float], tuple[int, tuple[int, ...]] | None | str] = {}  # chain ILP answers by structure
_FRONTS: dict[_Shape, ChainFront | None] = {}  # the same answers at every capacity, by structure (chain_front)
CHAIN_STATS = {"solved": 0, "hits": 0, "timeouts": 0}
TIMED_OUT = "time limit"


_MISS = object()
GENERATION = [0]  # bumped by clear_chain_cache: segment tables kept on a graph's traffic are then not reused


def clear_chain_cache() -> None:
    """Forget every solved chain ILP and every segment table kept for a graph (tests and benchmarks)."""
    _CHAINS.clear()
    _FRONTS.clear()
    CHAIN_STATS.update(solved=0, hits=0, timeouts=0)
    GENERATION[0] += 1


class _Shape:
    """The shape of a segment's chain options (what a chain answer depends on) as a dict key of the chain
    caches: the tuple, hashed once (a key is looked up at every capacity, and a shape holds a tuple per
    option, hundreds for a long chain); equal to another shape with an equal tuple."""

    __slots__ = ("key", "_hash")

    def __init__(self, key: tuple) -> None:
        self.key, self._hash = key, hash(key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, _Shape) and self._hash == other._hash and self.key == other.key)


@dataclass(frozen=True, slots=True)
class Span:
    """The traffic of one candidate group. ``detail`` is text, or for a fused chain
    ``(rank, tile, resident, streamed)`` with tensors as ``(node offset, root position)`` so that a
    cached answer names the tensors of the segment it is used for (:meth:`Segments.detail`)."""

    traffic: float
    floor: float
    kind: str
    detail: str | tuple
    avoided: float = 0.0
    fallback: bool = False
    achieved: float | None = None  # bytes the reported tiling moves (tiled einsums; at least traffic)


def tiling_detail(t: Tiling, fl: float) -> str:
    """What a tiled einsum's Q rests on: the bound (relaxation or floor), the tiling found and the
    bytes it moves, and why refinement stopped when it left a gap."""
    q = max(t.traffic or 0.0, fl)
    src = "provable floor (above the tiling relaxation)" if fl > (t.traffic or 0.0) else "tiling relaxation"
    text = f"Q from the {src}"
    if t.tiles:
        text += ("; best tiling found: tiles " + " ".join(f"{r}={v}" for r, v in t.tiles) + ", order "
                 + (",".join(t.order) or "-") + f", moves {format_si(t.achieved, 'B')} ({t.achieved / q:.3g}x Q)"
                 if t.achieved and q > 0 else "")
    if t.stopped:
        why = {"rounds": "after its last round", "size": "at its table size", "time limit": "at its time limit"}
        text += f"; refinement stopped {why.get(t.stopped, t.stopped)} with a {t.gap:.1%} gap"
    return text


class Segments:
    """Traffic of the segments of one graph at one capacity (see the module docstring)."""

    def __init__(self, g: Graph, gm: GraphMetrics, view: GraphTraffic, capacity: float, bound: str, window: int,
                 time_limit: float | None, reuse: bool = True) -> None:
        self.g, self.gm, self.view, self.capacity, self.bound = g, gm, view, capacity, bound
        self.time_limit, self.reuse, self.window = time_limit, reuse, window
        self.structure = view.memo(("structure", window), lambda: structure(g, gm.nodes, view, window))
        self._single: dict[int, Span] = {}
        self._spans: dict[tuple[int, ...], Span | None] = {}
        self._long: dict[tuple[int, int], Span | None] = {}
        self._at: dict[tuple[int, int], Span | None] = {}  # by position: what :meth:`span` answered there
        # Capacity-independent facts, shared by every capacity (chip) of this graph when reusing:
        # node key -> (einsum, exemplar node); segment -> its external, avoided and live bytes.
        gen = GENERATION[0]
        self._einsums: dict[int, tuple[Einsum | None, int]] = view.memo(("einsums", window, gen), dict) if reuse else {}
        self._static: dict[tuple, tuple[float, ...]] = view.memo(("static", window, gen), dict) if reuse else {}
        self._fkeys: dict[tuple[int, int], tuple] = view.memo(("floor keys", window, gen), dict) if reuse else {}
        self._wheres: dict[tuple[int, int], dict] = view.memo(("where", window, gen), dict) if reuse else {}
        self._floors: dict[tuple, float] = {}
        self.chain_ilps = 0
        self.span_hits = 0

    # ------------------------------------------------------------------ nodes
    def einsum(self, k: int) -> Einsum | None:
        """The tiling problem of node k (the exemplar of its node key when reusing); None also when
        it accesses a view whose bytes are not its root's (a broadcast, another density): the
        model would charge the view's tiles, not the memory behind them."""
        nk = self.structure.node[k]
        got = self._einsums.get(nk) if self.reuse else None
        if got is None:
            node = self.g.nodes[k]
            chains = self.view.chains
            ok = chains is None or all(chains.faithful(a.tensor) for a in (*node.inputs, *node.outputs))
            got = (einsum_of(self.g, node) if ok else None, k)
            if self.reuse:
                self._einsums[nk] = got
        return got[0]

    def _exemplar_names(self, k: int, e: Einsum, names: set[str]) -> frozenset[str]:
        """``names`` (tensors of node k) as the operand names of ``e`` (which may be another node's)."""
        nk = self.structure.node[k]
        k0 = self._einsums[nk][1] if self.reuse else k
        if k0 == k:
            return frozenset(names)
        mine = _local(self.g.nodes[k])
        theirs = {i: t for t, i in _local(self.g.nodes[k0]).items()}
        return frozenset(theirs[mine[t]] for t in names)

    def single(self, k: int) -> Span:
        """Node k alone, without the everything-on-chip shortcut (that needs its context)."""
        nk = self.structure.node[k]
        if self.reuse and nk in self._single:
            return self._single[nk]
        got = self._single_fresh(k)
        if self.reuse:
            self._single[nk] = got
        return got

    def _single_fresh(self, k: int) -> Span:
        node, nbytes = self.g.nodes[k], self.view.node_bytes(k)
        if node.kind == "data_movement" and node.view:
            return Span(0.0, 0.0, "view", "")
        e = self.einsum(k)
        if e is None:
            return Span(nbytes, nbytes, "untiled", "bytes as unfused (the tiling model cannot represent it)")
        fl = floor(e, self.capacity, compulsory=nbytes).value  # exact or a lower bound
        if self.bound == "floor":
            return Span(fl, fl, "floor", "")
        if math.isinf(self.capacity):
            return Span(nbytes, fl, "resident", "")
        t = solve(e, self.capacity, self.time_limit)
        if t.timed_out:
            return Span(fl, fl, "floor", "tiling ILP reached its time limit: the provable floor is used",
                        fallback=True)
        if t.traffic is None:
            return Span(fl, fl, "floor", "S below the smallest working set: floor used")
        return Span(max(t.traffic, fl), fl, "tiled", tiling_detail(t, fl), achieved=t.achieved)

    # ------------------------------------------------------------------ segments
    def span(self, i: int, j: int) -> Span | None:
        """Segment ``i..j`` as one group (None when it cannot be one)."""
        if not self.reuse:
            return self._span_fresh(i, j)
        if j - i >= self.window:  # a long kernel or the whole graph: by position (not counted as distinct)
            if (i, j) not in self._long:
                self._long[(i, j)] = self._span_fresh(i, j)
            return self._long[(i, j)]
        at = self._at.get((i, j), _MISS)  # asked before at this position: the same answer, a hit as before
        if at is not _MISS:
            self.span_hits += 1
            return at  # type: ignore[return-value]
        key = self.structure.context[i:j + 1]
        if key in self._spans:
            self.span_hits += 1
            got = self._spans[key]
        else:
            got = self._spans[key] = self._span_fresh(i, j)
        self._at[(i, j)] = got
        return got

    def _bytes(self, i: int, j: int) -> tuple[float, ...]:
        """Segment ``i..j``'s capacity-independent bytes: (touched, external) for one node, (external,
        avoided, live) for several; shared by segments with one context when reusing."""
        key = self.structure.context[i:j + 1] if self.reuse and j - i < self.window else (i, j)
        got = self._static.get(key)
        if got is None:
            v = self.view
            got = (touched_bytes(v, i, i), external_bytes(v, i, i)) if i == j else \
                (external_bytes(v, i, j), avoided_bytes(v, i, j), live_bytes(v, i, j))
            if self.reuse:
                self._static[key] = got
        return got

    def _chain_options(self, i: int, j: int) -> tuple[list, _Shape]:
        """:func:`.fusion.chain_options` of segment ``i..j`` and their shape (what the answer depends on:
        the key of the chain caches); capacity-independent: kept for every capacity of this graph when
        reusing, by position, since the options name its tensors."""
        def build() -> tuple[list, _Shape]:
            opts = chain_options(self.g, self.view, i, j)
            sizes: dict[int, tuple[float, ...]] = {}  # the options of one class share one ``others``
            for o in opts:
                if id(o.others) not in sizes:
                    sizes[id(o.others)] = tuple(b for _, b in o.others)
            return opts, _Shape(tuple((o.tile, o.tiles, o.base, o.tile_ws, sizes[id(o.others)]) for o in opts))

        if not self.reuse:
            return build()
        return self.view.memo(("chain options", i, j, GENERATION[0]), build)

    def _span_fresh(self, i: int, j: int) -> Span | None:
        cap = self.capacity
        if i == j:
            s = self.single(i)
            if s.kind not in ("view", "floor"):
                touched, ext = self._bytes(i, i)
                if touched <= cap and ext < s.traffic:  # one node with everything on chip
                    return Span(ext, min(s.floor, ext), "resident", "every tensor on chip")
            return s
        ext, avoided, live = self._bytes(i, j)
        fl = ext
        for k, e, ex in self._floor_keys(i, j):
            fl = max(fl, self._floor(k, e, ex))
        if self.bound == "floor":
            return Span(fl, fl, "floor", "", avoided)
        if live <= cap:
            return Span(max(ext, fl), fl, "resident", "every live tensor on chip", avoided)
        opts, shape = self._chain_options(i, j)
        if not opts:
            return None
        key = (shape, cap)
        if key not in _CHAINS:
            if shape not in _FRONTS:  # capacity-independent: every later capacity (chip) is one bisection
                _FRONTS[shape] = chain_front(opts)
            front = _FRONTS[shape]
            try:
                ct = solve_chain(opts, cap, self.time_limit) if front is None else front.at(cap)
                _CHAINS[key] = None if ct is None else (ct.option, ct.resident_idx)
            except TimeLimitReached:
                _CHAINS[key] = TIMED_OUT
                CHAIN_STATS["timeouts"] += 1
            CHAIN_STATS["solved"] += 1
            self.chain_ilps += 1
        else:
            CHAIN_STATS["hits"] += 1
        got = _CHAINS[key]
        if got is None:
            return None
        if got == TIMED_OUT:
            return Span(fl, fl, "floor", "chain ILP reached its time limit: the provable floor is used", avoided,
                        fallback=True)
        o = opts[got[0]]  # type: ignore[index]
        ct = chain_tiling(o, tuple(o.others[p][0] for p in got[1]))  # type: ignore[index]
        where = self._where(i, j)
        return Span(max(ct.traffic, fl), fl, "fused",
                    (ct.rank, ct.tile, tuple(where[t] for t in ct.resident), tuple(where[t] for t in ct.streamed)),
                    avoided)

    def _floor_keys(self, i: int, j: int) -> tuple[tuple[int, Einsum, frozenset[str]], ...]:
        """(node, its einsum, the operands that come from inside group ``i..j`` as the einsum names them)
        per einsum of the group: capacity-independent, kept for every capacity of this graph when reusing."""
        got = self._fkeys.get((i, j)) if self.reuse else None
        if got is None:
            v = self.view
            internal = {t for k in range(i, j + 1) for t in v.writes[k] if i <= v.producer.get(t, -1) <= j}
            out = []
            for k in range(i, j + 1):
                e = self.einsum(k)
                if e is not None:
                    node = self.g.nodes[k]
                    mine = {a.tensor for a in (*node.inputs, *node.outputs) if v.root[a.tensor] in internal}
                    out.append((k, e, self._exemplar_names(k, e, mine)))
            got = tuple(out)
            if self.reuse:
                self._fkeys[(i, j)] = got
        return got

    def _floor(self, k: int, e: Einsum, ex: frozenset[str]) -> float:
        """Node k's floor inside a group, over the operands ``ex`` that do not come from DRAM
        (:meth:`_floor_keys`)."""
        key = (self.structure.node[k], ex)
        if not self.reuse or key not in self._floors:
            self._floors[key] = floor(e, self.capacity, exclude=ex, compulsory=0.0).value
        return self._floors[key]

    def _where(self, i: int, j: int) -> dict[str, tuple[int, int]]:
        """Each root of segment ``i..j`` -> (node offset, position) of its first occurrence (kept for every
        capacity when reusing)."""
        out = self._wheres.get((i, j)) if self.reuse else None
        if out is None:
            out = {}
            for k in range(i, j + 1):
                for p, r in enumerate(self.structure.roots[k]):
                    out.setdefault(r, (k - i, p))
            if self.reuse:
                self._wheres[(i, j)] = out
        return out

    def detail(self, i: int, s: Span) -> str:
        """The text of ``s`` used for the segment starting at node i."""
        if isinstance(s.detail, str):
            return s.detail
        rank, tile, resident, streamed = s.detail
        roots = self.structure.roots

        def names(refs: tuple[tuple[int, int], ...]) -> str:
            return ",".join(roots[i + d][p] for d, p in refs) or "-"

        return f"tile {rank}={tile}; resident {names(resident)}; streamed {names(streamed)}"

    @property
    def distinct(self) -> int:
        """Distinct segments analysed through the context cache."""
        return len(self._spans)


def _local(node) -> dict[str, int]:  # noqa: ANN001
    """Tensor -> its first position among the node's accesses (as in :func:`.structure.node_key`)."""
    out: dict[str, int] = {}
    for a in (*node.inputs, *node.outputs):
        out.setdefault(a.tensor, len(out))
    return out


__all__ = ["CHAIN_STATS", "Segments", "Span", "clear_chain_cache", "tiling_detail"]
