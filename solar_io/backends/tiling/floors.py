"""Provable lower bounds on the DRAM traffic of an einsum with S bytes on chip (any schedule).

- **Compulsory**: every operand's footprint once (:func:`.einsum.compulsory_bytes`).
- **Matmul** (Smith et al. 2017): ``Q >= 2 M N K / sqrt(S) - 2 S`` words, for a contraction whose
  ranks split into M (A and C), N (B and C) and K (A and B) with plain accesses and no batch rank.
- **HBL** (Christ et al. 2013, Hoelder-Brascamp-Lieb for coordinate projections): cut the run into
  segments of S words of I/O; in one segment each operand can touch at most 2S elements (S resident
  at its start + S moved; for the output: S resident at its end + S stored), so a segment executes
  at most ``prod_j (2S)^{s_j} = (2S)^sigma`` iterations whenever ``sum_{j: r in j} s_j >= 1`` for
  every rank r (sigma = sum s_j minimised by a small LP). Hence
  ``Q >= S * (V / (2S)^sigma - 1)`` with V the iteration count. A dimension with several ranks
  (``2*P + R``) is injective in its largest rank once the others are fixed, so those other ranks W
  are split off: ``V`` is replaced by ``V / prod_{r in W} N_r``.
  ``exclude`` drops operands produced on chip by a fused producer (their footprint is not bounded
  by the I/O), which keeps the bound valid inside a fused group.

Sizes are in elements: S in elements uses the narrowest operand (S / min bytes per element) and
the result is converted back at that width, both of which can only lower the bound.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from .einsum import Einsum, compulsory_bytes


@dataclass(frozen=True, slots=True)
class Floor:
    """Lower bounds (bytes) at one capacity; ``value`` is their maximum."""

    compulsory: float
    matmul: float | None
    hbl: float | None

    @property
    def value(self) -> float:
        return max(self.compulsory, self.matmul or 0.0, self.hbl or 0.0)

    @property
    def binding(self) -> str:
        """Which bound gives ``value``: 'compulsory', 'matmul' or 'hbl'."""
        v = self.value
        return "matmul" if self.matmul == v and v > self.compulsory else (
            "hbl" if self.hbl == v and v > self.compulsory else "compulsory")


def _matmul_shape(e: Einsum) -> tuple[int, int, int] | None:
    if len(e.operands) != 3 or [o.output for o in e.operands] != [False, False, True]:
        return None
    size = e.size
    if any(not g.simple(size) for o in e.operands for g in o.groups):
        return None
    a, b, c = (set(o.ranks) for o in e.operands)
    m, n, k = (a & c) - b, (b & c) - a, (a & b) - c
    live = {r for r in e.space if size[r] > 1}
    if (a & b & c) & live or (m | n | k) != live or not (m and n and k):
        return None
    return tuple(math.prod(size[r] for r in part) for part in (m, n, k))  # type: ignore[return-value]


def _sigma(e: Einsum, exclude: frozenset[str]) -> tuple[float, float] | None:
    """(sigma, iterations V / prod of the split-off ranks W) of the HBL LP, or None if infeasible."""
    size = e.size
    split: set[str] = set()
    cover: list[set[str]] = []
    ops = [o for o in e.operands if o.tensor not in exclude]
    for o in ops:
        covered: set[str] = set()
        for g in o.groups:
            if g.simple(size):
                covered |= set(g.ranks)
            else:
                main = max(g.ranks, key=lambda r: size[r])
                covered.add(main)
                split |= set(g.ranks) - {main}
        cover.append(covered)
    live = [r for r in e.space if size[r] > 1 and r not in split]
    for c in cover:
        c -= split
    if not live:
        return None
    if any(not any(r in c for c in cover) for r in live):
        return None
    sigma = cover_number(tuple(frozenset(i for i, c in enumerate(cover) if r in c) for r in live))
    if sigma is None:
        return None
    return sigma, math.prod(size[r] for r in live)


_VERTEX_LIMIT = 20_000  # vertex candidates enumerated exactly; larger covering LPs go to CBC


@lru_cache(maxsize=4096)
def cover_number(rows: tuple[frozenset[int], ...]) -> float | None:
    """The fractional cover number: ``min sum s_i`` over ``s >= 0`` with ``sum_{i in row} s_i >= 1``
    for every row (a row: the operands that index one rank), or None when infeasible (an empty row).

    Solved exactly by vertex enumeration over rationals: a row containing another is implied by it
    and dropped; an optimum of a pointed polyhedron is a vertex, where as many independent
    constraints (rows as equalities, ``s_i = 0``) as variables are tight. Bounds ``s_i <= 1`` never
    bind at the optimum of a covering LP with 0/1 rows. Too many candidates: the CBC solver.
    (CBC alone answers within its tolerance, 1.66666666 for 5/3, a hair below the optimum.)

    >>> cover_number((frozenset({0, 2}), frozenset({1, 2}), frozenset({0, 1})))  # A[m,k] B[k,n] C[m,n]
    1.5
    """
    if not rows or any(not r for r in rows):
        return None
    uniq = sorted(set(rows), key=lambda r: (len(r), sorted(r)))
    kept = [r for r in uniq if not any(o < r for o in uniq)]
    vars_ = sorted(set().union(*kept))
    m = len(vars_)
    pos = {v: k for k, v in enumerate(vars_)}
    cons = [tuple(1 if v in r else 0 for v in vars_) for r in kept]
    cands = [(c, 1) for c in cons] + [(tuple(int(k == q) for k in range(m)), 0) for q in range(m)]
    if math.comb(len(cands), m) > _VERTEX_LIMIT:
        return _cover_cbc(kept, pos)
    best: Fraction | None = None
    for pick in itertools.combinations(cands, m):
        s = _solve_square([list(map(Fraction, a)) + [Fraction(b)] for a, b in pick])
        if s is None or any(x < 0 for x in s) or any(sum(x for x, a in zip(s, c, strict=True) if a) < 1 for c in cons):
            continue
        total = sum(s, Fraction(0))
        if best is None or total < best:
            best = total
    return None if best is None else float(best)


def _solve_square(rows: list[list[Fraction]]) -> list[Fraction] | None:
    """The solution of a square linear system (augmented rows) by Gauss-Jordan elimination, or
    None when it is singular."""
    m = len(rows)
    for col in range(m):
        piv = next((r for r in range(col, m) if rows[r][col] != 0), None)
        if piv is None:
            return None
        rows[col], rows[piv] = rows[piv], rows[col]
        p = rows[col][col]
        rows[col] = [x / p for x in rows[col]]
        for r in range(m):
            if r != col and rows[r][col] != 0:
                f = rows[r][col]
                rows[r] = [x - f * y for x, y in zip(rows[r], rows[col], strict=True)]
    return [rows[r][m] for r in range(m)]


def _cover_cbc(rows: list[frozenset[int]], pos: dict[int, int]) -> float | None:
    import pulp  # imported only when an ILP is solved: most bounds never need one

    prob = pulp.LpProblem("hbl", pulp.LpMinimize)
    s = [pulp.LpVariable(f"s{i}", 0, 1) for i in range(len(pos))]
    prob += pulp.lpSum(s)
    for r in rows:
        prob += pulp.lpSum(s[pos[i]] for i in r) >= 1
    prob.solve(pulp.PULP_CBC_CMD(msg=0))
    if pulp.LpStatus[prob.status] != "Optimal":
        return None
    return sum(v.value() or 0.0 for v in s)


_SIGMA: dict[tuple, tuple[float, float] | None] = {}


def floor(e: Einsum, capacity: float, exclude: frozenset[str] = frozenset(),
          compulsory: float | None = None) -> Floor:
    """The provable traffic floor of ``e`` with ``capacity`` bytes on chip (see the module docstring).

    ``compulsory`` replaces the einsum's own compulsory bytes (a fused group passes its external
    bytes); ``exclude`` names operands produced on chip."""
    ops = [o for o in e.operands if o.tensor not in exclude]
    comp = compulsory_bytes(e) if compulsory is None else compulsory
    if not ops or capacity <= 0 or math.isinf(capacity):
        return Floor(comp, None, None)
    width = min(o.bpe for o in ops)
    s_el = capacity / width
    mm = None
    if not exclude and (shape := _matmul_shape(e)) is not None:
        m, n, k = shape
        mm = max(0.0, 2.0 * m * n * k / math.sqrt(s_el) - 2.0 * s_el) * width
    key = (e.signature(), tuple(i for i, o in enumerate(e.operands) if o.tensor in exclude))
    if key not in _SIGMA:
        _SIGMA[key] = _sigma(e, exclude)
    sv = _SIGMA[key]
    hbl = None
    if sv is not None and sv[0] > 1.0 + 1e-9:
        sigma, v = sv
        hbl = max(0.0, s_el * (v / (2.0 * s_el) ** sigma - 1.0)) * width
    return Floor(comp, mm, hbl)


__all__ = ["Floor", "floor"]
