"""The cache-aware inverse roofline against brute force: every partition of the graph into
candidate groups is enumerated and timed from the node loads, with one resource scaled."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from functools import cache

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import graphs
from typer.testing import CliRunner

from solar_io.affine import parse_access
from solar_io.backends.roofline import bound, inverse_roofline
from solar_io.cli.main import app
from solar_io.graph import Graph, Node, Tensor
from solar_io.hardware import load_spec
from solar_io.resources import data_file

pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")
B200 = load_spec("b200")
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
UNITS = ("matrix", "vector", "special")


def brute_time(report, resource: str, z: float) -> float:  # noqa: ANN001
    """max(min over all partitions into candidate groups of sum_g max(units, Q / bw), fused), with
    ``resource`` running at rate / z; groups timed from the node loads."""
    ca = report.cache
    q = {(i, j): t for i, j, t in ca.candidates}
    n = len(report.nodes)
    bw = report.dram_bandwidth

    def unit_times(i: int, j: int) -> dict[str, float]:
        per = dict.fromkeys(UNITS, 0.0)
        for nd in report.nodes[i:j + 1]:
            for ld in nd.loads:
                if ld.unit != "dram":
                    per[ld.unit] += ld.time * (z if ld.resource == resource else 1.0)
        return per

    @cache
    def best(i: int) -> float:  # the best partition of nodes i..n-1
        if i == n:
            return 0.0
        out = math.inf
        for j in range(i, n):
            if (i, j) in q:
                mem = q[(i, j)] / bw * (z if resource == "dram" else 1.0)
                out = min(out, max(*unit_times(i, j).values(), mem) + best(j + 1))
        return out

    fused = max(*unit_times(0, n - 1).values(), report.totals.boundary_bytes / bw * (z if resource == "dram" else 1.0))
    return max(best(0), fused)


@SETTINGS
@given(graphs(max_nodes=5, max_size=4), st.sampled_from([64.0, 512.0, 1e30]), st.floats(0.2, 5.0))
def test_cache_aware_inverse_matches_brute_force(g, cap, factor):
    r = bound(g, B200, cache_aware=True, capacity=cap)
    t_chip = r.cache_aware.time
    if t_chip == 0:
        return
    assert math.isclose(brute_time(r, "dram", 1.0), t_chip, rel_tol=1e-9)
    target = t_chip * factor
    f = inverse_roofline(r, target).fidelity("cache-aware")
    assert f is not None and f.feasible == (t_chip <= target) and f.chip_scale == pytest.approx(factor ** -1)
    for q in f.requirements:
        if q.unit != "dram":
            assert math.isclose(q.any_chip, q.work / target, rel_tol=1e-12)
        if q.with_chip_rest is None:  # unreachable: even an unlimited resource leaves T above the target
            assert brute_time(r, q.resource, 0.0) > target * (1 - 1e-9)
        elif q.with_chip_rest == 0:
            assert brute_time(r, q.resource, 1e6) <= target * (1 + 1e-9)
        else:
            z = 1.0 / q.with_chip_rest_ratio
            assert brute_time(r, q.resource, z) <= target * (1 + 1e-9), q
            assert brute_time(r, q.resource, z * (1 + 1e-6)) > target, q  # minimal


@SETTINGS
@given(graphs(max_nodes=5, max_size=4), st.sampled_from([64.0, 1e30]))
def test_cache_aware_inverse_at_sol_binding_ratio_one(g, cap):
    r = bound(g, B200, cache_aware=True, capacity=cap)
    t = r.cache_aware.time
    if t == 0:
        return
    f = inverse_roofline(r, t).fidelity("cache-aware")
    assert f.feasible and f.chip_scale == 1.0
    for q in f.requirements:
        assert q.with_chip_rest_ratio is not None and q.with_chip_rest_ratio < 1.0 + 1e-9
        if q.binding:
            assert abs(q.with_chip_rest_ratio - 1.0) <= 1e-9, q
    # DRAM: any chip needs at least the least traffic of any partition (or the boundary) / target.
    dram = next(q for q in f.requirements if q.resource == "dram")
    assert dram.work >= r.totals.boundary_bytes * (1 - 1e-12) and dram.work <= r.cache.traffic * (1 + 1e-12)


def test_partition_changes_with_the_rate() -> None:
    """h = x @ w (bf16, matrix unit), e = exp(h) (special unit), S = 8 KiB on an H100 PCIe: the
    chip keeps the two apart (less traffic), but a target below the sum of their compute times
    can only be met fused (the units overlap), with DRAM much faster: the requirement must come
    from re-partitioning, not from the chip's partition."""
    t = (Tensor("x", ("M", "K"), "bf16", "input"), Tensor("w", ("K", "N"), "bf16", "weight"),
         Tensor("h", ("M", "N"), "bf16", "intermediate"), Tensor("e", ("M", "N"), "bf16", "output"))
    nodes = (Node("mm", "einsum", "mm", (parse_access("x[M, K]"), parse_access("w[K, N]")),
                  (parse_access("h[M, N]"),), space=("M", "N", "K"), map="mul", reduce="add"),
             Node("ex", "einsum", "exp", (parse_access("h[M, N]"),), (parse_access("e[M, N]"),), space=("M", "N"),
                  map="exp", reduce="none"))
    g = Graph(ranks=(("M", 512), ("K", 16), ("N", 512)), tensors=t, nodes=nodes)
    r = bound(g, load_spec("h100-pcie"), cache_aware=True, capacity=8192)
    assert r.cache.spans == ((0, 0), (1, 1))  # apart on the chip
    mm, ex = r.nodes
    apart = mm.compute_time + ex.compute_time  # the chip's partition with DRAM infinitely fast
    together = max(mm.compute_time, ex.compute_time)
    target = (apart + together) / 2
    dram = next(q for q in inverse_roofline(r, target).fidelity("cache-aware").requirements if q.resource == "dram")
    assert dram.with_chip_rest is not None  # reachable, fused, although the chip's partition never is
    z = 1.0 / dram.with_chip_rest_ratio
    assert brute_time(r, "dram", z) <= target * (1 + 1e-9) < brute_time(r, "dram", z * (1 + 1e-6))
    for factor in (0.5, 0.9, 1.0, 1.5, 3.0):
        target = r.cache_aware.time * factor
        for q in inverse_roofline(r, target).fidelity("cache-aware").requirements:
            if q.with_chip_rest not in (None, 0):
                z = 1.0 / q.with_chip_rest_ratio
                assert brute_time(r, q.resource, z) <= target * (1 + 1e-9) < brute_time(r, q.resource, z * (1 + 1e-6))


def test_comparison_and_schema_have_cache_aware_columns() -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["bound", "examples/graphs/mlp.yaml", "--hw", "h100-pcie,b200", "--cache-aware",
                              "--capacity", "1MiB", "--target-latency", "1ms", "--measured", "2ms", "-f", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    jsonschema.validate(doc, json.loads(data_file("schema", "sol-report-v1.schema.json").read_text()))
    for rep, row in zip(doc["reports"], doc["comparison"], strict=True):
        ca = rep["fidelities"]["cache_aware"]
        assert row["cache_aware_s"] == ca["time_s"]
        assert row["headroom_cache_aware"] == pytest.approx(2e-3 / ca["time_s"])
        inv = rep["inverse"]["fidelities"]["cache_aware"]
        assert inv["chip_time_s"] == ca["time_s"]
        assert row["chip_scale_cache_aware"] == pytest.approx(ca["time_s"] / 1e-3)
    res = runner.invoke(app, ["bound", "examples/graphs/mlp.yaml", "--hw", "h100-pcie,b200", "--cache-aware",
                              "--target-latency", "1ms"])
    assert res.exit_code == 0
    assert "chip scale cache-aware" in res.stdout and "Inverse roofline, cache-aware" in res.stdout
    r = bound("examples/graphs/mlp.yaml", "h100-pcie", target_latency="1ms")
    assert r.inverse.fidelity("cache-aware") is None  # not computed: no entry
    assert replace(r, cache=None).inverse is r.inverse
