"""The per-einsum tiling bound against brute-force enumeration, Q(S) properties and the floors."""

from __future__ import annotations

import itertools
import math

import pytest

from solar_io.affine import parse_access
from solar_io.backends.tiling import ilp
from solar_io.backends.tiling.curve import capacities, curve
from solar_io.backends.tiling.einsum import Einsum, candidates, compulsory_bytes, divisors, einsum_of, working_set
from solar_io.backends.tiling.floors import floor
from solar_io.backends.tiling.ilp import STATS, clear_cache, solve
from solar_io.backends.tiling.relax import relaxed_traffic, relaxed_working_set
from solar_io.graph import Graph, Node, Tensor

pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")


def make(ranks: dict[str, int], tensors: list[tuple[str, str, str]], space: str, ins: list[str], out: str,
         dtype: str = "fp32") -> Einsum:
    g = Graph(ranks=tuple(ranks.items()),
              tensors=tuple(Tensor(n, tuple(r), dtype, role) for n, r, role in tensors),
              nodes=(Node("n", "einsum", "t", tuple(parse_access(a) for a in ins), (parse_access(out),),
                          space=tuple(space), map="mul", reduce="add"),))
    e = einsum_of(g, g.nodes[0])
    assert e is not None
    return e


def simulate(e: Einsum, tile: dict[str, int], order: tuple[str, ...]) -> float:
    """Literal loop-nest simulation: walk the tile loops in ``order``; an operand's tile is fetched
    whenever the tile indices of its ranks change; each fetch moves the distinct in-range elements
    of that tile (enumerated); the output is written at every change and read back when revisited."""
    size = e.size
    n = {r: -(-size[r] // tile[r]) for r in e.space}
    extents = {op.tensor: [ex for g in op.groups for ex in g.extents] for op in e.operands}
    exprs = {op.tensor: [x for g in op.groups for x in g.exprs] for op in e.operands}
    total = 0.0
    current: dict[str, tuple | None] = {op.tensor: None for op in e.operands}
    seen: dict[str, set] = {op.tensor: set() for op in e.operands}
    for pos in itertools.product(*(range(n[r]) for r in order)):
        at = dict.fromkeys(e.space, 0)
        at.update(zip(order, pos, strict=True))
        for op in e.operands:
            key = tuple(at[r] for r in op.ranks)
            if key == current[op.tensor]:
                continue
            current[op.tensor] = key
            elements = set()
            box = [range(at[r] * tile[r], min((at[r] + 1) * tile[r], size[r])) for r in op.ranks]
            for pt in itertools.product(*box):
                env = dict(zip(op.ranks, pt, strict=True))
                idx = tuple(sum(c * env[r] for r, c in x.terms) + x.const for x in exprs[op.tensor])
                if all(0 <= v < ex for v, ex in zip(idx, extents[op.tensor], strict=True)):
                    elements.add(idx)
            moved = len(elements) * op.bpe
            if op.output:
                total += moved * (2 if key in seen[op.tensor] else 1)
            else:
                total += moved
            seen[op.tensor].add(key)
    return total


def brute(e: Einsum, cap: float, ragged: bool = False) -> float | None:
    """The minimum simulated traffic over every divisor tiling (with ``ragged``, also the
    power-of-two tiles of ranks over 64) and loop order that fits ``cap``."""
    best = None
    for tiles in itertools.product(*(candidates(n, 1 << 30, ragged) if ragged else divisors(n) for n in e.sizes)):
        tile = dict(zip(e.space, tiles, strict=True))
        if working_set(e, tile) > cap:
            continue
        live = [r for r in e.space if tile[r] < e.size[r]]
        for order in itertools.permutations(live):
            q = simulate(e, tile, order)
            best = q if best is None else min(best, q)
    return best


MATMUL = make({"M": 4, "N": 6, "K": 4}, [("A", "MK", "input"), ("B", "KN", "input"), ("C", "MN", "output")],
              "MNK", ["A[M, K]", "B[K, N]"], "C[M, N]")
BMM = make({"B": 2, "M": 4, "N": 2, "K": 4}, [("A", "BMK", "input"), ("W", "BKN", "input"), ("C", "BMN", "output")],
           "BMNK", ["A[B, M, K]", "W[B, K, N]"], "C[B, M, N]")
CONV = make({"K": 2, "C": 1, "P": 3, "Q": 2, "R": 2, "S": 2, "H": 4, "W": 3},
            [("x", "CHW", "input"), ("w", "KCRS", "input"), ("y", "KPQ", "output")], "KPQCRS",
            ["x[C, P + R, Q + S]", "w[K, C, R, S]"], "y[K, P, Q]")
STRIDED = make({"K": 2, "P": 3, "R": 3, "H": 7}, [("x", "H", "input"), ("w", "KR", "input"), ("y", "KP", "output")],
               "KPR", ["x[2*P + R]", "w[K, R]"], "y[K, P]")
QK = make({"H": 2, "S": 4, "T": 4, "E": 2}, [("q", "SHE", "input"), ("k", "THE", "input"), ("s", "HST", "output")],
          "HSTE", ["q[S, H, E]", "k[T, H, E]"], "s[H, S, T]")
PV = make({"H": 2, "S": 4, "T": 4, "E": 2}, [("p", "HST", "input"), ("v", "THE", "input"), ("c", "SHE", "output")],
          "SHET", ["p[H, S, T]", "v[T, H, E]"], "c[S, H, E]")
CASES = {"matmul": MATMUL, "bmm": BMM, "conv2d": CONV, "strided-conv1d": STRIDED, "attention-qk": QK,
         "attention-pv": PV}


def _caps(e: Einsum, k: int = 5) -> list[float]:
    return capacities(e, k)


def relaxed_brute(e: Einsum, cap: float) -> float:
    """The least relaxed traffic (:mod:`solar_io.backends.tiling.relax`) over every integer tiling
    and loop order that the relaxation lets fit: what the search must reach on small einsums, whose
    options are all single tiles."""
    best = math.inf
    for tiles in itertools.product(*(range(1, n + 1) for n in e.sizes)):
        tile = dict(zip(e.space, tiles, strict=True))
        if relaxed_working_set(e, tile) > cap:
            continue
        for order in itertools.permutations(r for r in e.space if tile[r] < e.size[r]):
            best = min(best, math.fsum(relaxed_traffic(e, tile, tile, order)))
    return best


@pytest.mark.parametrize("path", ["sweep", "ilp"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_bound_matches_brute_force(name: str, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if path == "ilp":
        monkeypatch.setattr(ilp, "MAX_RANKS", 0)  # every solve by the integer program
    clear_cache()
    e = CASES[name]
    for cap in _caps(e):
        t = solve(e, cap)
        assert t.traffic == pytest.approx(relaxed_brute(e, cap), rel=1e-9), (name, cap)
        assert t.traffic <= brute(e, cap) * (1 + 1e-12)  # and never above a divisor tiling
        assert t.working_set <= cap
        assert simulate(e, dict(t.tiles), t.order) == t.achieved  # the tiling reported moves what it says
    clear_cache()


def test_limits_and_curve_properties() -> None:
    for e in CASES.values():
        comp = compulsory_bytes(e)
        assert solve(e, working_set(e, e.size)).traffic == comp
        assert solve(e, 1e18).traffic == comp
        assert solve(e, working_set(e, {r: 1 for r in e.space}) * 0.99).traffic is None
        pts = curve(e, _caps(e, 9))
        qs = [p.traffic for p in pts]
        assert all(a >= b for a, b in zip(qs, qs[1:], strict=False))
        assert qs[-1] == comp
        for p in pts:  # the ILP never goes below the provable floor
            assert p.traffic >= p.floor.value * (1 - 1e-12)


def test_matmul_floor_formula_and_growth() -> None:
    e = make({"M": 64, "N": 64, "K": 64}, [("A", "MK", "input"), ("B", "KN", "input"), ("C", "MN", "output")],
             "MNK", ["A[M, K]", "B[K, N]"], "C[M, N]")
    s_el = 96
    f = floor(e, s_el * 4)
    assert f.matmul == pytest.approx((2 * 64**3 / math.sqrt(s_el) - 2 * s_el) * 4)
    assert f.binding == "matmul"
    q_small, q_big = solve(e, 96 * 4).traffic, solve(e, 3 * 1024 * 4).traffic
    assert q_small >= f.value and q_small > q_big >= floor(e, 3 * 1024 * 4).value
    # Q grows like 1/sqrt(S) when S is small: a 4x smaller buffer costs at least 1.5x more traffic.
    assert solve(e, 48 * 4).traffic >= 1.5 * solve(e, 192 * 4).traffic


def test_identical_einsums_solved_once() -> None:
    clear_cache()
    a = make({"I": 8, "J": 8, "K": 8}, [("X", "IK", "input"), ("Y", "KJ", "input"), ("Z", "IJ", "output")],
             "IJK", ["X[I, K]", "Y[K, J]"], "Z[I, J]")
    b = make({"P": 8, "Q": 8, "R": 8}, [("U", "PR", "input"), ("V", "RQ", "input"), ("W", "PQ", "output")],
             "PQR", ["U[P, R]", "V[R, Q]"], "W[P, Q]")
    ta, tb = solve(a, 200), solve(b, 200)
    assert STATS["solved"] == 1 and STATS["hits"] == 1
    assert ta.traffic == tb.traffic and {r for r, _ in tb.tiles} == {"P", "Q", "R"}
    assert {n for n, _ in tb.per_operand} == {"U", "V", "W"}


def test_merged_ranks_agree_with_brute_force() -> None:
    e = make({"B": 2, "S": 3, "D": 2, "F": 4}, [("x", "BSD", "input"), ("w", "DF", "input"), ("h", "BSF", "output")],
             "BSFD", ["x[B, S, D]", "w[D, F]"], "h[B, S, F]")
    for cap in _caps(e, 6):
        assert solve(e, cap).traffic == brute(e, cap)


def test_ragged_tiles_for_a_prime_rank() -> None:
    # N = 67 is prime: with divisor tiles only, N could be tiled by 1 or 67. The bound covers every
    # tile size (ragged last tile), so it is at most the best divisor-or-power-of-two tiling, and the
    # tiling it reports is at least as good as that one.
    e = make({"M": 4, "N": 67, "K": 4}, [("A", "MK", "input"), ("B", "KN", "input"), ("C", "MN", "output")],
             "MNK", ["A[M, K]", "B[K, N]"], "C[M, N]")
    for cap in (40, 120):
        t = solve(e, cap)
        old = brute(e, cap, ragged=True)
        assert t.traffic <= old, cap
        assert simulate(e, dict(t.tiles), t.order) == t.achieved
        assert t.achieved <= old
        assert max(t.traffic, floor(e, cap).value) <= t.achieved
    assert solve(e, 40).achieved < brute(e, 40)  # better than divisor tiles alone
