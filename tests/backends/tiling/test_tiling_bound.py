"""Q(S) is a lower bound: no grid tiling of any integer tile sizes and any loop order moves less.

Checked against exhaustive enumeration (every tile size 1..N of every rank, every order of the
tiled loops, exact ceil tile counts) on small einsums at several capacities, both as the model
counts a tiling (:func:`solar_io.backends.tiling.einsum.traffic`) and as the literal loop nest moves
data (ragged tiles at their real size, only in-range elements); against the closed form of square
output-stationary matmul schedules; and on the issue's 4096^3 bf16 matmul at 1 MiB.
"""

from __future__ import annotations

import functools
import itertools
import math

import pytest
from test_tiling import CASES, make, simulate

from solar_io.affine import parse_access
from solar_io.backends.roofline import bound
from solar_io.backends.tiling import ilp
from solar_io.backends.tiling.curve import capacities
from solar_io.backends.tiling.einsum import Einsum, einsum_of, traffic, working_set
from solar_io.backends.tiling.floors import floor
from solar_io.backends.tiling.ilp import clear_cache, solve
from solar_io.backends.tiling.relax import box_distinct, breakpoints, intervals, relaxed_traffic, relaxed_working_set
from solar_io.backends.tiling.sweep import sweep
from solar_io.graph import Graph, Node, Tensor
from solar_io.hardware import load_spec

pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")


def literal(e: Einsum, tile: dict[str, int], order: tuple[str, ...]) -> tuple[float, float]:
    """(bytes moved, largest working set) of the literal loop nest: each tile position of an operand's
    relevant ranks holds the in-range elements of its (possibly ragged) box, fetched as often as the
    loops outside it change it (the output written each time and read back on revisits)."""
    size = e.size
    n = {r: -(-size[r] // tile[r]) for r in e.space}
    live = [r for r in order if n[r] > 1]
    total, ws = 0.0, 0.0
    for op in e.operands:
        rel = set(op.ranks)
        inner = max((i for i, r in enumerate(live) if r in rel), default=-1)
        m = math.prod(n[r] for r in live[:inner + 1] if r not in rel)
        cover, largest = op.bpe, op.bpe
        for g in op.groups:
            moved, big = 0, 0
            for pos in itertools.product(*(range(n[r]) for r in g.ranks)):
                boxes = [range(p * tile[r], min((p + 1) * tile[r], size[r])) for r, p in zip(g.ranks, pos, strict=True)]
                seen = set()
                for pt in itertools.product(*boxes):
                    env = dict(zip(g.ranks, pt, strict=True))
                    v = tuple(sum(c * env[r] for r, c in x.terms) + x.const for x in g.exprs)
                    if all(0 <= a < b for a, b in zip(v, g.extents, strict=True)):
                        seen.add(v)
                moved += len(seen)
                big = max(big, len(seen))
            cover *= moved
            largest *= big
        total += cover * (2 * m - 1) if op.output else cover * m
        ws += largest
    return total, ws


@functools.cache
def _table(name: str) -> list[tuple[float, float, float, list[tuple[float, float, float]]]]:
    """Every integer tiling of ``SMALL[name]``: (model, literal and relaxed working sets, and per
    loop order of its tiled ranks the model, literal and relaxed traffic)."""
    e = SMALL[name]
    size = e.size
    rows = []
    for tiles in itertools.product(*(range(1, n + 1) for n in e.sizes)):
        tile = dict(zip(e.space, tiles, strict=True))
        live = [r for r in e.space if tile[r] < size[r]]
        per = []
        ws = 0.0
        for order in itertools.permutations(live):
            q, ws = literal(e, tile, order)
            per.append((math.fsum(traffic(e, tile, order)), q, math.fsum(relaxed_traffic(e, tile, tile, order))))
        if not live:
            ws = literal(e, tile, ())[1]
        rows.append((working_set(e, tile), ws, relaxed_working_set(e, tile), per))
    return rows


def exhaustive(name: str, cap: float) -> tuple[float, float, float]:
    """Over every integer tiling and loop order of ``SMALL[name]``: (least model traffic among those
    that fit as the model counts, least literal traffic among those that literally fit, least
    relaxed traffic among those the relaxation lets fit)."""
    best = [math.inf, math.inf, math.inf]
    for row in _table(name):
        for k in range(3):
            if row[k] <= cap:
                best[k] = min(best[k], min(p[k] for p in row[3]))
    return best[0], best[1], best[2]


def conv1d(pad: bool) -> Einsum:
    """y[K, P] = sum_{C, R} x[C, P + R] w[K, C, R]; with ``pad`` strided and padded:
    x[C, 2*P + R - 1] over a 9-row input (one row of padding on each side)."""
    if pad:
        ranks = {"K": 2, "C": 2, "P": 5, "R": 3, "H": 9}
        xi = "x[C, 2*P + R - 1]"
    else:
        ranks = {"K": 3, "C": 2, "P": 6, "R": 3, "H": 8}
        xi = "x[C, P + R]"
    g = Graph(ranks=tuple(ranks.items()),
              tensors=(Tensor("x", ("C", "H"), "fp32", "input"), Tensor("w", ("K", "C", "R"), "fp32", "weight"),
                       Tensor("y", ("K", "P"), "fp32", "output")),
              nodes=(Node("conv", "einsum", "conv", (parse_access(xi), parse_access("w[K, C, R]")),
                          (parse_access("y[K, P]"),), space=("K", "P", "C", "R"), map="mul", reduce="add",
                          pad=(("x", (("H", 1, 1),)),) if pad else ()),))
    e = einsum_of(g, g.nodes[0])
    assert e is not None
    return e


MM = {"M": 7, "N": 13, "K": 11}
SMALL = {
    "matmul-7x13x11": make(MM, [("A", "MK", "input"), ("B", "KN", "input"), ("C", "MN", "output")], "MNK",
                           ["A[M, K]", "B[K, N]"], "C[M, N]"),
    "bmm": make({"B": 3, "M": 5, "N": 4, "K": 6}, [("A", "BMK", "input"), ("W", "BKN", "input"),
                                                  ("C", "BMN", "output")], "BMNK", ["A[B, M, K]", "W[B, K, N]"],
                "C[B, M, N]"),
    "conv1d-window": conv1d(False),
    "conv1d-strided-padded": conv1d(True),
    "offset": make({"P": 6, "H": 6}, [("x", "H", "input"), ("y", "P", "output")], "P", ["x[P + 1]"], "y[P]"),
    "elementwise-bias": make({"M": 9, "N": 13}, [("x", "MN", "input"), ("b", "N", "input"), ("z", "MN", "output")],
                             "MN", ["x[M, N]", "b[N]"], "z[M, N]"),
}
# The best real schedule (least of model and literal traffic over every integer tiling) is within
# this factor of Q. Measured on the capacities tested: 1.00-1.31 (fractional tile counts on ranks of
# 4-13: 13/3 tiles charged where 5 run); the strided padded window up to 1.61, where the padding
# term |O| x tiles is also subtracted from every tile (see relax.py).
CLOSE = {"conv1d-strided-padded": 1.65}


@pytest.mark.parametrize("name", sorted(set(SMALL) - {"offset"}))
def test_bound_below_every_integer_tiling(name: str) -> None:
    e = SMALL[name]
    clear_cache()
    for cap in capacities(e, 5):
        t = solve(e, cap)
        model, lit, relaxed = exhaustive(name, cap)
        assert t.traffic is not None and not t.timed_out
        assert t.traffic <= min(model, lit) * (1 + 1e-9), (name, cap)
        assert t.traffic == pytest.approx(relaxed, rel=1e-9)  # small ranks: every option one exact tile
        assert min(model, lit) <= CLOSE.get(name, 1.35) * t.traffic, (name, cap, min(model, lit) / t.traffic)
        if model < math.inf:  # some tiling fits as the model counts: the search reports one
            assert t.achieved is not None and t.working_set <= cap
            assert t.achieved == pytest.approx(math.fsum(traffic(e, dict(t.tiles), t.order)))
            assert t.achieved >= model * (1 - 1e-9)  # a tiling of the family: not below its best


def test_today_misses_ragged_tiles() -> None:
    # 7, 13, 11 are prime: divisor tiles are 1 or the whole rank, so a divisor-only search (what
    # the code did for ranks up to 64) ends far above the best integer tiling.
    e = SMALL["matmul-7x13x11"]
    cap = 4 * 60.0
    divisor_best = min(math.fsum(traffic(e, t, o)) for tiles in itertools.product(*((1, n) for n in e.sizes))
                       if working_set(e, t := dict(zip(e.space, tiles, strict=True))) <= cap
                       for o in itertools.permutations(r for r in e.space if t[r] < e.size[r]))
    model, _, _ = exhaustive("matmul-7x13x11", cap)
    assert model < divisor_best
    assert solve(e, cap).traffic <= model


def test_literal_agrees_with_simulation() -> None:
    # The literal count used above equals the loop-nest simulation of test_tiling on ragged tiles.
    for e in (SMALL["conv1d-window"], SMALL["conv1d-strided-padded"], CASES["conv2d"]):
        size = e.size
        for tiles in itertools.islice(itertools.product(*(range(1, n + 1) for n in e.sizes)), 0, None, 7):
            tile = dict(zip(e.space, tiles, strict=True))
            order = tuple(r for r in e.space if tile[r] < size[r])
            assert literal(e, tile, order)[0] == simulate(e, tile, order)


def test_window_density_lemma() -> None:
    # relax.py's lemma, by brute force: D(l) / vol(l) never grows with a box length, for the
    # windows frontends write (unit, strided, dilated, both, negative steps, coupled dims).
    for index in ("x[P + R]", "x[2*P + R]", "x[P + 2*R]", "x[3*P + 2*R]", "x[2*P - R]", "x[P + R + Q]",
                  "x[P + R, P]"):
        e = make({"P": 9, "R": 5, "Q": 3, "H": 64, "W": 64}, [("x", "HW"[:index.count(",") + 1], "input"),
                                                              ("y", "P", "output")],
                 "PRQ", [index], "y[P]")
        g = next(gr for gr in e.operands[0].groups if len(gr.ranks) > 1)
        for ls in itertools.product(*(range(1, e.size[r] + 1) for r in g.ranks)):
            tile = dict(zip(g.ranks, ls, strict=True))
            dens = box_distinct(g, tile) / math.prod(ls)
            for r in g.ranks:
                if tile[r] < e.size[r]:
                    bigger = dict(tile, **{r: tile[r] + 1})
                    assert box_distinct(g, bigger) / math.prod(bigger.values()) <= dens + 1e-12, (index, tile, r)


@pytest.mark.parametrize("name", sorted(CASES) + sorted(SMALL))
def test_enumeration_equals_ilp(name: str) -> None:
    # The two solvers of one relaxation agree: the vectorised sweep and the integer program, on
    # coarse options (intervals, not points) so that the interval coefficients are exercised.
    e = {**CASES, **SMALL}[name]
    opts = {r: intervals(breakpoints(n, 3)) for r, n in zip(e.space, e.sizes, strict=True)}
    for cap in capacities(e, 4)[:-1]:
        a = sweep(e, cap, opts)
        b = ilp._ilp(e, cap, opts, None)
        assert a is not None and b is not None
        qa, qb = (math.fsum(relaxed_traffic(e, {r: iv.lo for r, iv in c.items()}, {r: iv.hi for r, iv in c.items()},
                                            o)) for c, o in (a[:2], b))
        assert qa == pytest.approx(qb, rel=1e-9), (name, cap)


def test_forced_ilp_path_is_also_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ilp, "MAX_RANKS", 0)  # every round by the integer program
    e = make({"M": 20, "N": 18, "K": 12}, [("A", "MK", "input"), ("B", "KN", "input"), ("C", "MN", "output")],
             "MNK", ["A[M, K]", "B[K, N]"], "C[M, N]")
    clear_cache()
    for cap in (4 * 90.0,):
        t = solve(e, cap)
        assert t.traffic is not None and t.rounds >= 1
        assert t.traffic <= t.achieved and t.traffic >= floor(e, cap).compulsory
        best = _best_output_stationary(20, 18, 12, cap / 4) * 4
        assert t.traffic <= best
    clear_cache()


def _best_output_stationary(m: int, n: int, k: int, s: float) -> float:
    """Elements moved by the best square output-stationary schedule, by hand: output tiles t x t,
    K in slivers of 1 (t^2 + 2t elements on chip); A is read once per column of tiles
    (ceil(n / t) times), B once per row of tiles, C written once."""
    best = math.inf
    for t in range(1, max(m, n) + 1):
        if t * t + 2 * t <= s or (min(t, m) * min(t, n) + min(t, m) + min(t, n) <= s):
            tm, tn = min(t, m), min(t, n)
            best = min(best, m * k * -(-n // tn) + k * n * -(-m // tm) + m * n)
    return best


def test_matmul_closed_form() -> None:
    # floor <= Q <= the best square output-stationary schedule (closed form above), at several S.
    n = 96
    e = make({"M": n, "N": n, "K": n}, [("A", "MK", "input"), ("B", "KN", "input"), ("C", "MN", "output")],
             "MNK", ["A[M, K]", "B[K, N]"], "C[M, N]")
    clear_cache()
    for s_el in (48, 120, 300, 1000, 3000, 9000):
        cap = 4.0 * s_el
        t = solve(e, cap)
        fl = floor(e, cap)
        assert fl.matmul is not None and fl.matmul == pytest.approx(max(0.0, 2 * n**3 / math.sqrt(s_el) - 2 * s_el) * 4)
        assert fl.value <= t.traffic * (1 + 1e-12), s_el
        hand = 4 * _best_output_stationary(n, n, n, s_el)
        assert t.traffic <= hand, s_el
        assert t.achieved is not None and t.achieved <= hand * (1 + 1e-12)  # the search finds one as good
        assert t.gap <= ilp.REFINE_TOL


def test_issue_4096_matmul_on_h100_at_1mib() -> None:
    # The issue's case: a 4096^3 bf16 matmul with 1 MiB on chip. The 723 x 723 output-stationary
    # schedule (K slivers of 1, 723^2 + 2*723 elements of 2 bytes fit in 1 MiB) moves
    # 2*4096^3/723 + 4096^2 elements (fractional tile counts); the cache-aware SOL may not exceed
    # its time at the spec's DRAM bandwidth, and may not go below the Smith floor's time.
    n = 4096
    assert (723 * 723 + 2 * 723) * 2 <= 1 << 20
    g = Graph(ranks=(("M", n), ("N", n), ("K", n)),
              tensors=(Tensor("a", ("M", "K"), "bf16", "input"), Tensor("b", ("K", "N"), "bf16", "input"),
                       Tensor("c", ("M", "N"), "bf16", "output")),
              nodes=(Node("mm", "einsum", "aten.mm", (parse_access("a[M, K]"), parse_access("b[K, N]")),
                          (parse_access("c[M, N]"),), space=("M", "N", "K"), map="mul", reduce="add"),))
    clear_cache()
    spec = load_spec("h100-pcie")
    r = bound(g, spec, cache_aware=True, capacity="1MiB")
    bw = r.dram_bandwidth
    schedule = (2 * n**3 / 723 + n**2) * 2 / bw
    e = einsum_of(g, g.nodes[0])
    fl = floor(e, float(1 << 20))
    assert fl.binding == "matmul"
    assert r.cache_aware.time <= schedule
    assert r.cache_aware.time >= fl.value / bw
    gr = r.cache.groups[0]
    assert gr.kind == "tiled" and gr.floor == pytest.approx(fl.value)
    assert gr.traffic < 414e6 and not gr.fallback
    clear_cache()


def test_offset_access_is_not_counted_as_whole_rank() -> None:
    # x[P + 1] over an extent of P: one element of each sweep is out of range (the model's plain
    # count would say P); the bound stays at or below what is really read.
    clear_cache()
    for cap in capacities(SMALL["offset"], 3):
        t = solve(SMALL["offset"], cap)
        _, lit, _ = exhaustive("offset", cap)
        assert t.traffic <= lit
