"""The partition's windows as arrays (:mod:`solar_io.backends.tiling.windows`, issue 19) give every float a
plain loop over the groups gives.

The reference below is the partition's dynamic program written out group by group, as it was before
the arrays: each group's unit sums added node by node from its last node back, its span asked of
:meth:`Segments.span`, its credit of :meth:`Credit.of`. Both must agree exactly (``==`` on floats): the
partition's time, its groups, and every candidate group with its Q, in the same order; at two chips
of different bandwidth and on-chip capacity, with and without residency, sharing work across
identical segments or not. The graphs cover long kernels (more nodes than a window) and a branch order.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import solar_io
from solar_io.backends.tiling import clear_cache, clear_chain_cache, partition
from solar_io.backends.tiling.segments import Segments
from solar_io.backends.tiling.windows import busiest_unit
from solar_io.backends.traffic import traffic_of
from solar_io.hardware import load_spec
from solar_io.metrics import graph_metrics

pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")
ROOT = Path(__file__).resolve().parents[3]
GRAPHS = ["examples/graphs/attention.yaml", "examples/graphs/mla_decode_naive.yaml",
          "tests/golden/v1.2/generated_constants.yaml", "tests/golden/v1.0/all_ops.yaml"]


def reference(g, units, bw: float, capacity: float, held: float, max_group: int = 8):  # noqa: ANN001, ANN201
    """(best time, candidates) of the file's order by a loop over every group (no branch order), then
    the whole graph as one group."""
    view = traffic_of(g)
    seg = Segments(g, view.metrics, view, capacity, "ilp", max_group, partition.TIME_LIMIT, reuse=False)
    credit = partition.Credit(view)
    n = len(g.nodes)
    long: dict[int, list[int]] = {}
    for i, j in view.spans:
        if j - i + 1 > max_group and (i, j) != (0, n - 1):
            long.setdefault(j, []).append(i)
    best, candidates = [0.0] + [math.inf] * n, []
    for j in range(n):
        m = v = sp = 0.0
        for i in [*range(j, max(0, j - max_group + 1) - 1, -1), *long.get(j, ())]:
            if i > j - max_group:
                m, v, sp = m + units[i][0], v + units[i][1], sp + units[i][2]
            else:
                m, v, sp = (math.fsum(units[k][x] for k in range(i, j + 1)) for x in range(3))
            s = seg.span(i, j)
            if math.isinf(best[i]) or s is None:
                continue
            q = s.traffic - credit.of(i, j, held)
            candidates.append((i, j, q))
            best[j + 1] = min(best[j + 1], best[i] + max(max(m, v, sp), q / bw))
    s = seg.span(0, n - 1) if n > max_group else None  # the whole graph as one group
    if s is not None:
        candidates.append((0, n - 1, s.traffic))
        best[n] = min(best[n], max(max(math.fsum(u[x] for u in units) for x in range(3)), s.traffic / bw))
    return best[n], candidates


@pytest.mark.parametrize("path", GRAPHS)
@pytest.mark.parametrize("residency", [True, False])
def test_windows_give_the_floats_of_a_loop_over_groups(monkeypatch: pytest.MonkeyPatch, path: str,
                                                       residency: bool) -> None:
    g = solar_io.load(ROOT / path)
    gm = graph_metrics(g)
    monkeypatch.setattr(partition, "_alternative", lambda *a, **k: None)  # the file's order alone, as the loop
    for chip in ("h100-sxm", "l4"):
        clear_cache()
        clear_chain_cache()
        r = solar_io.bound(g, chip, residency=residency)
        cap = partition.capacity_of(load_spec(chip), None)[0]
        units = [(n.matrix_time, n.vector_time, n.special_time) for n in r.nodes]
        ut = [{"matrix": a, "vector": b, "special": c} for a, b, c in units]
        want_time, want_candidates = reference(g, units, r.dram_bandwidth, cap, cap if residency else 0.0)
        for reuse in (True, False):
            ca = partition.cache_aware(g, gm, ut, r.dram_bandwidth, cap, 0.0, 1.0, residency=residency, reuse=reuse)
            assert list(ca.candidates) == want_candidates, (chip, reuse)
            total = 0.0
            for gr in ca.groups:  # the dynamic program's sum: group by group from the first
                total += gr.time
            assert total == want_time, (chip, reuse)
            assert [len(gr.nodes) for gr in ca.groups] == [j - i + 1 for i, j in ca.spans]


def test_busiest_unit_sums_each_window_from_its_last_node_back() -> None:
    rng = np.random.default_rng(19)
    units = rng.random((23, 3)) * 10.0 ** rng.integers(-9, -3, (23, 3))  # magnitudes apart: rounding shows
    got = busiest_unit(units, 8)
    for d, row in enumerate(got):
        for i, value in enumerate(row.tolist()):
            sums = [0.0, 0.0, 0.0]
            for k in range(i + d, i - 1, -1):
                sums = [a + float(b) for a, b in zip(sums, units[k], strict=True)]
            assert value == max(sums), (d, i)
    assert len(got) == 8 and [len(x) for x in got] == [23 - d for d in range(8)]


@pytest.mark.parametrize("seed", range(6))
def test_window_sums_equal_the_sums_of_each_window(seed: int) -> None:
    """:meth:`Credit.window_sums` (built as runs grow) gives :meth:`Credit.sums` of every window exactly,
    on random tables that include reads whose producer comes after them (in-place updates)."""
    rng = np.random.default_rng(seed)
    n, roots = 23, [f"t{r}" for r in range(6)]

    def table() -> partition.Credit:
        c = partition.Credit.__new__(partition.Credit)
        c._sums, c._windows = {}, (0, [], [])
        c.reads, c.writes = [], []
        for k in range(n):
            c.reads.append(tuple((str(rng.choice(roots)), float(rng.integers(1, 9)) / 3, int(rng.integers(-1, n)),
                                  int(rng.integers(0, k))) for _ in range(int(rng.integers(0, 4)) if k else 0)))
            c.writes.append(tuple((str(rng.choice(roots)), float(rng.integers(0, 9)) / 7,
                                   int(rng.integers(k + 1, n + 3))) for _ in range(int(rng.integers(0, 3)))))
        return c

    c = table()
    ref = partition.Credit.__new__(partition.Credit)
    ref._sums, ref._windows, ref.reads, ref.writes = {}, (0, [], []), c.reads, c.writes
    assert any(p > k for k in range(n) for _, _, p, _ in c.reads[k])  # the in-place case is drawn
    reread, kept = c.window_sums(5)
    for d in range(5):
        for i in range(n - d):
            assert (reread[d][i], kept[d][i]) == ref.sums(i, i + d)
            assert c.of(i, i + d, 2.0) == ref.of(i, i + d, 2.0)
