"""Distinct-element counts of accesses against brute-force enumeration."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from solar_io.affine import Access, AffineExpr, parse_access
from solar_io.footprint import access_elements, expr_distinct


def brute(access: Access, extents: list[int], sizes: dict[str, int]) -> int:
    ranks = sorted({r for e in access.index for r in e.ranks})
    seen = set()
    for point in itertools.product(*[range(sizes[r]) for r in ranks]):
        env = dict(zip(ranks, point, strict=True))
        coords = tuple(e.const + sum(c * env[r] for r, c in e.terms) for e in access.index)
        if all(0 <= x < n for x, n in zip(coords, extents, strict=True)):
            seen.add(coords)
    return len(seen)


RANKS = ["P", "Q", "R", "S"]
term = st.tuples(st.sampled_from(RANKS), st.integers(-3, 3).filter(bool))
expr = st.builds(lambda terms, c: AffineExpr(tuple(sorted(dict(terms).items())), c),
                 st.lists(term, max_size=3), st.integers(-4, 6))


@settings(max_examples=400, deadline=None)
@given(st.lists(expr, min_size=1, max_size=3), st.lists(st.integers(1, 9), min_size=3, max_size=3),
       st.fixed_dictionaries({r: st.integers(1, 7) for r in RANKS}))
def test_access_elements_equals_enumeration(index, extents, sizes):
    extents = extents[: len(index)]
    access = Access("x", tuple(index))
    tensor_ranks = tuple(f"D{i}" for i in range(len(index)))
    all_sizes = dict(sizes, **{f"D{i}": n for i, n in enumerate(extents)})
    count, exact = access_elements(access, tensor_ranks, all_sizes)
    assert exact
    assert count == brute(access, extents, sizes)


@settings(max_examples=200, deadline=None)
@given(expr, st.integers(1, 40), st.fixed_dictionaries({r: st.integers(1, 30) for r in RANKS}))
def test_single_expression_counts(e, extent, sizes):
    count, exact = expr_distinct(e, sizes, extent)
    assert exact and count == brute(Access("x", (e,)), [extent], sizes)


def test_hand_cases():
    sizes = {"N": 2, "C": 3, "H": 9, "W": 9, "P": 4, "Q": 4, "R": 3, "S": 3, "I": 5}
    # stride-2 3x3 window with pad 1 over 9x9: rows 2p+r-1 for p<4, r<3 -> -1..7, in range 0..7 = 8 rows
    assert access_elements(parse_access("x[N, C, 2*P + R - 1, 2*Q + S - 1]"), ("N", "C", "H", "W"), sizes)[0] \
        == 2 * 3 * 8 * 8
    # diagonal of a 5x5 matrix
    assert access_elements(parse_access("x[I, I]"), ("H", "H"), {"H": 5, "I": 5})[0] == 5
    # slice [2:6] of a 9-long vector
    assert access_elements(parse_access("x[I + 2]"), ("H",), {"H": 9, "I": 4})[0] == 4
    # stride-3 subsample: 0,3,6 of 9
    assert access_elements(parse_access("x[3*R]"), ("H",), {"H": 9, "R": 3})[0] == 3
    # whole-tensor access and a gather reading 7 distinct rows of a 1000-row table
    assert access_elements(parse_access("t"), ("H", "W"), sizes)[0] == 81
    assert access_elements(parse_access("t[@ids, W]"), ("V", "W"), {"V": 1000, "W": 9}, {"ids": 7})[0] == 63


def test_large_coupled_access_is_a_lower_bound():
    sizes = {"A": 5000, "B": 5000, "X": 10000}
    count, exact = access_elements(parse_access("x[A + B, A]"), ("X", "X"), sizes)
    assert not exact
    assert count <= 5000 * 5000  # the true count (every (a+b, a) pair is distinct)
    assert count >= 5000
