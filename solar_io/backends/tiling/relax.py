"""Why Q(S) is a lower bound: the interval relaxation that the tiling ILP (:mod:`.ilp`) minimises.

**The family F** that Q(S) bounds from below: every *grid* tiling of an einsum's iteration space --
any integer tile size ``t_r`` in ``[1, N_r]`` for every rank (divisor or not: the last tile ragged,
or any split of the rank into pieces of at most ``t_r``), with any order of the tile loops -- where
the buffer holds one tile of every operand and operand T moves ``Cover_T x M_T`` bytes (the output
``Cover_T x (2 M_T - 1)``), as :mod:`.einsum` defines them. Q is at most the model's traffic of every
tiling of F (ceil tile counts, a tile counted at its interior footprint) and at most what the
literal loop nest moves (only in-range elements, ragged tiles at their real size); the tests check
both against exhaustive enumeration of every integer tile size and loop order.

Three facts make a finite integer program a lower bound over all of F:

1. **Counts.** A rank of size N split into pieces of at most t has ``n >= ceil(N/t) >= N/t``
   pieces; ``M_T`` is a product of counts, so charging the *fractional* count ``N/t`` never exceeds
   a real schedule (and covers uneven splits). For output-stationary matmul it also covers every
   non-grid partition of the output into rectangles of at most ``t^2`` elements: an ``h x w``
   rectangle costs ``K(h + w)`` reads of A and B, and ``(h + w) / (h w) >= 2 / sqrt(h w) >= 2 / t``,
   the square grid's rate with fractional counts.
2. **Covers.** A simple dimension's cover is the whole rank (exact). For a window group (``2*P + R
   - 1``) let ``D(l)`` be the distinct values of its index map over a box of lengths ``l``. *Lemma:*
   ``D(l) / vol(l)`` is non-increasing in every ``l_r``. Proof: with the other lengths fixed, let
   ``f(k) = D`` at ``l_r = k`` and ``S_k`` the values of slice k (``S_k = S_0 + k c_r``). The values
   slice k+1 adds are ``S_{k+1} minus (S_0 u .. u S_k)``, contained in ``(S_k minus (S_0 u .. u
   S_{k-1})) + c_r`` (since ``S_1 u .. u S_k = (S_0 u .. u S_{k-1}) + c_r``), so the increments of f
   do not grow: f is concave with ``f(0) = 0`` and ``f(k) / k`` is non-increasing. Capping at the
   extent E keeps this (``E / vol`` falls too). So any partition of the space into boxes of at most
   ``t`` has ``sum_B min(D(B), E) >= min(D(t), E) prod_r N_r / t_r``. A tile reads at least
   ``min(D(B), E) - |O|`` elements in range, O being the out-of-range values (padding) of the whole
   space; all tiles together lose at most P, the out-of-range *points* of the space (each lies in
   one tile), and read at least U, the in-range values of the whole space, hence
   ``cover >= max(U, min(D(t), E) prod_r N_r / t_r - min(|O| prod_r ceil(N_r / t_r), P))`` per
   group, and a product over an operand's groups. Footprints likewise: a full tile holds at least
   ``min(D(t), E) - min(|O|, P)`` elements of a window group.
3. **Intervals.** Each rank gets breakpoints ``1 = c_0 < ... < c_m = N``; option j stands for every
   integer tile in ``[c_j, c_{j+1} - 1]`` (the last option is N alone). Footprints never shrink as a
   tile grows (a larger box touches a superset), and in the bounds above every factor is taken at
   its worst end of the interval (``D`` and footprints at the smallest tile, ``N / t`` at the
   largest, ``ceil(N / t)`` at the smallest). So each tiling of F falls in an option tuple that fits
   whenever it does and is charged no more: the optimum over option tuples and loop orders is at
   most the minimum over F. Where consecutive breakpoints are adjacent integers an option is exact;
   the gap elsewhere is set by the breakpoint ratio, and :func:`.ilp.solve` refines the chosen
   intervals until the best tile inside them is within :data:`.ilp.REFINE_TOL` of the bound.

Groups of several coupled dimensions (a diagonal ``x[I, I]``) use the same bounds with the tuple
map; when its full space is too large to enumerate and some coordinate leaves the tensor, such a
group is charged nothing (a valid, weak bound). Tests: ``tests/backends/tiling/test_tiling_bound.py``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

from solar_io.affine import AffineExpr
from solar_io.footprint import _count_1term, expr_distinct

from .einsum import Einsum, Group, Operand, divisors, traffic, working_set

_BIG = 1 << 40
_MAX_POINTS = 1 << 16  # points of a coupled group enumerated directly


@dataclass(frozen=True, slots=True)
class Interval:
    """The integer tile sizes ``lo..hi`` of one rank that one ILP option stands for."""

    lo: int
    hi: int


@lru_cache(maxsize=1 << 14)
def breakpoints(n: int, limit: int, keep: frozenset[int] = frozenset()) -> tuple[int, ...]:
    """Breakpoints of a rank of size n: about ``limit`` log-spaced ones taken from its divisors,
    the powers of two below n and a geometric grid (any integers serve: they only bound intervals),
    every integer when n <= limit (each option is then one exact tile); 1, n and ``keep``
    (refinement points) always kept (cached: a pure function of its arguments)."""
    if n <= limit:
        return tuple(range(1, n + 1))
    pool = set(divisors(n)) | {1 << k for k in range(1, n.bit_length()) if (1 << k) < n}
    pool |= {round(n ** (k / (limit - 1))) for k in range(limit)} if limit > 1 else set()
    ds = sorted(pool)
    out = {1, n} | {k for k in keep if 1 <= k <= n}
    if len(ds) <= limit:
        out |= set(ds)
    else:
        logs = [math.log(d) for d in ds]
        for k in range(1, limit - 1):
            lt = math.log(n ** (k / (limit - 1)))
            out.add(ds[min(range(len(ds)), key=lambda q: abs(logs[q] - lt))])
    return tuple(sorted(out))


@lru_cache(maxsize=1 << 14)
def intervals(points: tuple[int, ...]) -> tuple[Interval, ...]:
    """The options of sorted breakpoints (first 1, last N): ``[c_j, c_{j+1} - 1]`` and ``[N, N]`` (cached:
    a pure function of its argument, and a chain's ranks ask for the same sizes again and again)."""
    return tuple(Interval(a, b - 1) for a, b in zip(points, points[1:], strict=False)) + \
        (Interval(points[-1], points[-1]),)


def _distinct(terms: tuple[tuple[str, int], ...], tile: dict[str, int]) -> int:
    """Distinct values of ``sum c_r r`` over the box ``0 <= r < tile[r]`` (a lower estimate when the
    range is too large to enumerate, see :func:`solar_io.footprint.expr_distinct`)."""
    e = AffineExpr(terms, 0)
    lo, _ = e.bounds(tile)
    return expr_distinct(AffineExpr(terms, -lo), tile, _BIG)[0]


def _outside(e: AffineExpr, size: dict[str, int], extent: int) -> int:
    """At least as many as the values of ``e`` over the whole space that fall outside [0, extent)."""
    lo, hi = e.bounds(size)
    return max(0, min(hi, -1) - lo + 1) + max(0, hi - max(lo, extent) + 1)


def _outside_points(e: AffineExpr, size: dict[str, int], extent: int) -> int | None:
    """Points of the whole space (over ``e``'s ranks) where ``e`` is out of [0, extent), counted
    along its largest rank for every value of the others; None when those are too many."""
    if not e.terms:
        return 0 if 0 <= e.const < extent else 1
    main, c = max(e.terms, key=lambda rc: size[rc[0]])
    others = [(r, k) for r, k in e.terms if r != main]
    if math.prod(size[r] for r, _ in others) > _MAX_POINTS:
        return None
    n, total = size[main], 0
    for pt in itertools.product(*(range(size[r]) for r, _ in others)):
        base = e.const + sum(k * v for (_, k), v in zip(others, pt, strict=True))
        total += n - _count_1term(base, c, n, extent)
    return total


@lru_cache(maxsize=1 << 16)
def _window_facts(g: Group, size: tuple[tuple[str, int], ...]) -> tuple[int, int, int, float]:
    """(E, U, |O|, P) of a window group: its extent, in-range values of the whole space (a lower
    bound), out-of-range values (at most; -1: not bounded, see the docstring) and out-of-range
    points of the space (at most; inf when not counted). A tile reads at most min(|O|, P) values
    it cannot have in range, and all tiles together at most P, since each point lies in one tile."""
    full = dict(size)
    if len(g.exprs) == 1:
        e, ext = g.exprs[0], g.extents[0]
        u, exact = expr_distinct(e, full, ext)
        values = _outside(e, full, ext)
        points = _outside_points(e, full, ext) if values else 0
        return ext, (u if exact else 0), values, math.inf if points is None else float(points)
    ext = math.prod(g.extents)
    if all(_outside(e, full, x) == 0 for e, x in zip(g.exprs, g.extents, strict=True)):
        return ext, max(_distinct(e.terms, full) for e in g.exprs), 0, 0.0
    if math.prod(full[r] for r in g.ranks) > _MAX_POINTS:
        return ext, 0, -1, math.inf
    seen, inside, points = set(), 0, 0
    for pt in itertools.product(*(range(full[r]) for r in g.ranks)):
        env = dict(zip(g.ranks, pt, strict=True))
        v = tuple(sum(c * env[r] for r, c in e.terms) + e.const for e in g.exprs)
        ok = all(0 <= x < n for x, n in zip(v, g.extents, strict=True))
        points += not ok
        if v not in seen:
            seen.add(v)
            inside += ok
    return ext, inside, len(seen) - inside, float(points)


def box_distinct(g: Group, tile: dict[str, int]) -> int:
    """``D(tile)``: distinct index tuples of the group over one box, unclipped (a lower estimate
    for a coupled group too large to enumerate: its largest single coordinate count)."""
    return _box_distinct(g, tuple(tile[r] for r in g.ranks))


@lru_cache(maxsize=1 << 18)
def _box_distinct(g: Group, lengths: tuple[int, ...]) -> int:
    tile = dict(zip(g.ranks, lengths, strict=True))
    if len(g.exprs) == 1:
        e = g.exprs[0]
        return _distinct(e.terms, {r: tile[r] for r, _ in e.terms})
    if math.prod(tile[r] for r in g.ranks) > _MAX_POINTS:
        return max(_distinct(e.terms, {r: tile[r] for r, _ in e.terms}) for e in g.exprs)
    seen = set()
    for pt in itertools.product(*(range(tile[r]) for r in g.ranks)):
        env = dict(zip(g.ranks, pt, strict=True))
        seen.add(tuple(sum(c * env[r] for r, c in e.terms) for e in g.exprs))
    return len(seen)


def _key(g: Group, size: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple((r, size[r]) for r in g.ranks)


def exact_plain(g: Group, size: dict[str, int]) -> bool:
    """A simple dimension with no offset: every tiling reads each of its N elements once."""
    return g.simple(size) and g.exprs[0].const == 0


def group_footprint_lb(g: Group, lo: dict[str, int], size: dict[str, int]) -> float:
    """Elements of the group that a full tile of at least ``lo`` holds, at least (fact 2)."""
    if exact_plain(g, size):
        return float(lo[g.ranks[0]])
    ext, _, values, points = _window_facts(g, _key(g, size))
    if values < 0:
        return 0.0
    return float(max(0.0, min(box_distinct(g, lo), ext) - min(values, points)))


def group_cover_lb(g: Group, lo: dict[str, int], hi: dict[str, int], size: dict[str, int]) -> float:
    """Elements of the group that all tiles together move, at least, for tiles in ``[lo, hi]``."""
    if exact_plain(g, size):
        return float(size[g.ranks[0]])
    ext, u, values, points = _window_facts(g, _key(g, size))
    if values < 0:
        return 0.0
    dens = min(box_distinct(g, lo), ext) * math.prod(size[r] / hi[r] for r in g.ranks)
    tiles = math.prod(-(-size[r] // lo[r]) for r in g.ranks)
    return max(float(u), dens - min(values * tiles, points))


def footprint_lb(op: Operand, lo: dict[str, int], size: dict[str, int]) -> float:
    """Bytes of one tile of ``op`` of at least ``lo``, at least."""
    return op.bpe * math.prod(group_footprint_lb(g, lo, size) for g in op.groups)


def cover_lb(op: Operand, lo: dict[str, int], hi: dict[str, int], size: dict[str, int]) -> float:
    """Bytes of all of ``op``'s tiles, each once, for tiles in ``[lo, hi]``, at least."""
    return op.bpe * math.prod(group_cover_lb(g, lo, hi, size) for g in op.groups)


def compulsory_lb(e: Einsum) -> float:
    """Bytes every tiling moves at least: per operand its in-range elements once (fact 2's U; a
    simple dimension its whole rank), since every count M is at least 1."""
    size = e.size
    total = 0.0
    for op in e.operands:
        el = 1.0
        for g in op.groups:
            el *= size[g.ranks[0]] if exact_plain(g, size) else max(0, _window_facts(g, _key(g, size))[1])
        total += op.bpe * el
    return total


def relaxed_working_set(e: Einsum, lo: dict[str, int]) -> float:
    """The capacity the relaxation charges tiles of at least ``lo``."""
    size = e.size
    return sum(footprint_lb(op, lo, size) for op in e.operands)


def relaxed_traffic(e: Einsum, lo: dict[str, int], hi: dict[str, int], order: tuple[str, ...]) -> tuple[float, ...]:
    """Per operand, the traffic the relaxation charges tiles in ``[lo, hi]`` under a loop order
    (outermost first): ``cover_lb x M`` with fractional counts ``N / hi`` (output ``2 M - 1``)."""
    size = e.size
    frac = {r: size[r] / hi[r] for r in e.space}
    live = [r for r in order if hi[r] < size[r] or lo[r] < size[r]]
    out = []
    for op in e.operands:
        rel = set(op.ranks)
        inner = max((i for i, r in enumerate(live) if r in rel), default=-1)
        m = math.prod(frac[r] for r in live[:inner + 1] if r not in rel)
        cov = cover_lb(op, lo, hi, size)
        out.append(cov * (2 * m - 1) if op.output else cov * m)
    return tuple(out)


def best_relaxed_inside(e: Einsum, cap: float, choice: dict[str, Interval], order: tuple[str, ...]) -> float:
    """The least relaxed traffic of sampled tiles inside the chosen intervals that the relaxation
    lets fit: a value the relaxation reaches, so Q is between the ILP optimum and it (the gap)."""
    size = e.size
    wide = [r for r in e.space if choice[r].hi > choice[r].lo]
    k = max(2, int(256 ** (1 / len(wide)))) if wide else 1
    pts = {r: points_inside(choice[r], size[r], k) for r in e.space}
    best = math.inf
    for combo in itertools.product(*(pts[r] for r in e.space)):
        tile = dict(zip(e.space, combo, strict=True))
        if relaxed_working_set(e, tile) <= cap:
            best = min(best, math.fsum(relaxed_traffic(e, tile, tile, order)))
    return best


def best_tiling_near(e: Einsum, cap: float, choice: dict[str, Interval], order: tuple[str, ...]
                     ) -> tuple[float, dict[str, int]] | None:
    """(model traffic, tile) of the best tiling found that fits as the model counts: tiles inside
    the chosen intervals and the tiles with one tile more or fewer, under ``order``."""
    size = e.size
    wide = [r for r in e.space if choice[r].hi > choice[r].lo]
    k = max(2, int(128 ** (1 / len(wide)))) if wide else 1
    pts = {r: sorted(set(points_inside(choice[r], size[r], k)) | _neighbours(choice[r], size[r])) for r in e.space}
    while math.prod(len(v) for v in pts.values()) > 1024:  # keep the search small: drop the farthest
        r = max(pts, key=lambda x: len(pts[x]))
        pts[r] = pts[r][1:-1] if len(pts[r]) > 3 else pts[r][:1]
    best = None
    ones = tuple(1 for _ in e.space)  # the model may charge more than the relaxation: unit tiles as a fallback
    for combo in itertools.chain(itertools.product(*(pts[r] for r in e.space)), (ones,)):
        tile = dict(zip(e.space, combo, strict=True))
        if working_set(e, tile) <= cap:
            live = tuple(r for r in order if tile[r] < size[r])
            q = math.fsum(traffic(e, tile, live))
            if best is None or q < best[0]:
                best = (q, tile)
    return best


def _neighbours(iv: Interval, n: int) -> set[int]:
    """The smallest tiles with one tile more and one fewer than the interval's ends have."""
    out = set()
    for c in (-(-n // iv.hi) - 1, -(-n // iv.hi), -(-n // iv.lo), -(-n // iv.lo) + 1):
        if 1 <= c <= n:
            out.add(-(-n // c))
    return out


def points_inside(iv: Interval, n: int, k: int) -> list[int]:
    """Up to about ``k`` tiles of ``[lo, hi]``, log-spaced, each snapped to the smallest tile with the
    same tile count (``ceil(n / ceil(n / t))``: same traffic, smaller footprint)."""
    if iv.hi == iv.lo:
        return [iv.lo]
    raw = {iv.lo, iv.hi} | {round(iv.lo * (iv.hi / iv.lo) ** (i / (k - 1))) for i in range(1, k - 1)}
    out = set()
    for t in raw:
        s = -(-n // -(-n // t))
        out.add(s if s >= iv.lo else t)
    return sorted(out)


__all__ = ["Interval", "best_relaxed_inside", "best_tiling_near", "box_distinct", "breakpoints", "compulsory_lb",
           "cover_lb", "exact_plain", "footprint_lb", "group_cover_lb", "group_footprint_lb", "intervals",
           "points_inside", "relaxed_traffic", "relaxed_working_set"]
