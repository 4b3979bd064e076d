"""What the bound keeps across capacities (issue 19: another chip's on-chip capacity re-solves only what
depends on it), and that keeping it changes nothing:

- the enumeration's capacity-independent grid (:func:`.sweep._grid`: working sets, the least traffic over
  loop orders per option tuple) gives at every capacity, in any order of capacities, the answer a fresh
  grid gives, and the optimum of a brute force over every option tuple and loop order;
- the unfused DRAM bytes from their capacity-independent parts (:func:`dram_parts`), by hand: at S = 0
  each node's bytes (the classical count), at S unlimited its first touches and delivered outputs;
- an einsum's signature and merged form are kept per object and equal a fresh computation.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from test_tiling import CASES

from solar_io.affine import parse_access
from solar_io.backends.tiling import sweep as sweep_mod
from solar_io.backends.tiling.einsum import _merge_equivalent, merge_equivalent
from solar_io.backends.tiling.relax import breakpoints, intervals, relaxed_traffic, relaxed_working_set
from solar_io.backends.traffic import traffic_of
from solar_io.backends.traffic.residency import at_capacity, dram_bytes, dram_parts
from solar_io.graph import Graph, Node, Tensor

pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")


def _table(e, opts) -> list[tuple[float, float]]:  # noqa: ANN001
    """(relaxed working set, least relaxed traffic over every loop order) of every option tuple."""
    out = []
    ones = tuple(r for r, n in zip(e.space, e.sizes, strict=True) if n == 1)  # one tile: their place changes nothing
    orders = [p + ones for p in itertools.permutations([r for r in e.space if r not in ones])]
    for combo in itertools.product(*(opts[r] for r in e.space)):
        lo = {r: iv.lo for r, iv in zip(e.space, combo, strict=True)}
        hi = {r: iv.hi for r, iv in zip(e.space, combo, strict=True)}
        out.append((relaxed_working_set(e, lo),
                    min(math.fsum(relaxed_traffic(e, lo, hi, order)) for order in orders)))
    return out


def _same(a, b) -> bool:  # noqa: ANN001
    return a[0] == b[0] and a[1] == b[1] and a[2].keys() == b[2].keys() and \
        all(np.array_equal(a[2][r], b[2][r]) for r in a[2])


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_sweep_grid_kept_across_capacities_changes_nothing(name: str) -> None:
    e = CASES[name]
    opts = {r: intervals(breakpoints(n, 4)) for r, n in zip(e.space, e.sizes, strict=True)}
    table = _table(e, opts)  # brute force over every option tuple and loop order
    ws = [w for w, _ in table]
    caps = sorted({*ws, min(ws) / 2, max(ws) * 2})
    random.Random(19).shuffle(caps)
    sweep_mod.clear_grids()
    kept = {cap: sweep_mod.sweep(e, cap, opts) for cap in caps}  # one grid for every capacity
    assert len(sweep_mod._GRIDS) == 1 and sweep_mod._KEPT[0] == sweep_mod._GRIDS[next(iter(sweep_mod._GRIDS))].ws.size
    for cap in caps:
        sweep_mod.clear_grids()
        fresh = sweep_mod.sweep(e, cap, opts)
        got = kept[cap]
        assert got is not None and fresh is not None
        if not fresh[0]:  # nothing fits
            assert not got[0] and all(w > cap for w in ws), (name, cap)
            continue
        assert _same(got, fresh), (name, cap)
        choice, order = got[:2]
        q = math.fsum(relaxed_traffic(e, {r: iv.lo for r, iv in choice.items()}, {r: iv.hi for r, iv in choice.items()},
                                      order))
        assert q == pytest.approx(min(t for w, t in table if w <= cap), rel=1e-12), (name, cap)


def _chain() -> Graph:
    """x -> matmul (w) -> h -> gelu -> y (a graph output), bf16."""
    acc = parse_access
    tensors = (Tensor("x", ("M", "K"), "bf16", "input"), Tensor("w", ("K", "N"), "bf16", "weight"),
               Tensor("h", ("M", "N"), "bf16", "intermediate"), Tensor("y", ("M", "N"), "bf16", "output"))
    nodes = (Node("mm", "einsum", "mm", (acc("x[M, K]"), acc("w[K, N]")), (acc("h[M, N]"),), space=("M", "N", "K"),
                  map="mul", reduce="add"),
             Node("act", "einsum", "gelu", (acc("h[M, N]"),), (acc("y[M, N]"),), space=("M", "N"), map="gelu",
                  reduce="none"))
    return Graph(ranks=(("M", 64), ("N", 32), ("K", 16)), tensors=tensors, nodes=nodes, name="chain")


def test_unfused_dram_bytes_from_their_parts_by_hand() -> None:
    g = _chain()
    gt = traffic_of(g)
    parts = dram_parts(g, gt.nodes, gt.chains)
    x, w, h, y = 64 * 16 * 2, 16 * 32 * 2, 64 * 32 * 2, 64 * 32 * 2
    assert parts == [(x + w, 0.0, h, 0.0), (0.0, h, 0.0, y)]  # (first touch, re-read, written, delivered)
    assert at_capacity(parts, 0.0) == [x + w + h, h + y]  # S = 0: the classical per-kernel count
    assert at_capacity(parts, math.inf) == [x + w, y]  # S unlimited: first touches and the output
    assert at_capacity(parts, 1000.0) == [x + w + h - 1000, h - 1000 + y]
    for s in (0.0, 1000.0, 3e4, math.inf):
        assert at_capacity(parts, s) == dram_bytes(g, gt.nodes, s, gt.chains)


def test_signature_and_merge_are_kept_per_object() -> None:
    for e in CASES.values():
        assert e.signature() is e.signature() and e.signature() == e._signature()
        assert merge_equivalent(e) is merge_equivalent(e) and merge_equivalent(e) == _merge_equivalent(e)
