"""Fused chains, the fusion partition and the cache-aware fidelity of ``solar_io.bound``."""

from __future__ import annotations

import itertools
import json
import math

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import graphs
from typer.testing import CliRunner

from solar_io import load
from solar_io.affine import parse_access
from solar_io.backends.roofline import bound
from solar_io.backends.tiling import einsum_of, solve
from solar_io.backends.tiling.fusion import chain_options, chain_tiling, graph_view, solve_chain
from solar_io.cli.main import app
from solar_io.graph import Graph, Node, Tensor
from solar_io.hardware import load_spec
from solar_io.metrics import graph_metrics
from solar_io.resources import data_file

pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")
B200 = load_spec("b200")
H100 = load_spec("h100-pcie")


def chain2(m: int = 8, k: int = 4, n: int = 6, p: int = 4) -> Graph:
    """x[M,K] @ w1[K,N] -> h[M,N]; h @ w2[N,P] -> y[M,P]."""
    t = (Tensor("x", ("M", "K"), "fp32", "input"), Tensor("w1", ("K", "N"), "fp32", "weight"),
         Tensor("h", ("M", "N"), "fp32", "intermediate"), Tensor("w2", ("N", "P"), "fp32", "weight"),
         Tensor("y", ("M", "P"), "fp32", "output"))
    nodes = (Node("mm1", "einsum", "mm", (parse_access("x[M, K]"), parse_access("w1[K, N]")),
                  (parse_access("h[M, N]"),), space=("M", "N", "K"), map="mul", reduce="add"),
             Node("mm2", "einsum", "mm", (parse_access("h[M, N]"), parse_access("w2[N, P]")),
                  (parse_access("y[M, P]"),), space=("M", "P", "N"), map="mul", reduce="add"))
    return Graph(ranks=(("M", m), ("K", k), ("N", n), ("P", p)), tensors=t, nodes=nodes, name="chain2")


def test_chain_ilp_matches_brute_force() -> None:
    g = chain2()
    view = graph_view(g, graph_metrics(g))
    opts = chain_options(g, view, 0, 1)
    assert {o.rank for o in opts} == {"M"}  # the only rank both nodes iterate and keep
    for cap in (16, 64, 100, 200, 300, 400, 1000):
        best = None
        for o in opts:
            names = [t for t, _ in o.others]
            for keep in itertools.product((False, True), repeat=len(names)):
                ct = chain_tiling(o, tuple(t for t, f in zip(names, keep, strict=True) if f))
                if ct.working_set <= cap and (best is None or ct.traffic < best):
                    best = ct.traffic
        got = solve_chain(opts, cap)
        assert (got.traffic if got else None) == best, cap
        if got:
            assert got.working_set <= cap


def test_partition_is_the_best_of_both_partitions() -> None:
    g = chain2(m=16, k=8, n=8, p=8)
    view = graph_view(g, graph_metrics(g))
    for cap in (256, 512, 1024, 2048):
        r = bound(g, H100, cache_aware=True, capacity=cap, residency=False)
        units = [max(n.matrix_time, n.vector_time, n.special_time) for n in r.nodes]
        bw = r.dram_bandwidth
        singles = sum(max(u, solve(einsum_of(g, nd), cap).traffic / bw) for u, nd in zip(units, g.nodes, strict=True))
        ct = solve_chain(chain_options(g, view, 0, 1), cap)
        fused = math.inf if ct is None else max(sum(units), ct.traffic / bw)
        assert r.cache_aware.time == pytest.approx(max(min(singles, fused), r.fused.time), rel=1e-12), cap


def test_chain_avoids_intermediate_traffic() -> None:
    g = chain2(m=64, k=32, n=32, p=32)
    r = bound(g, H100, cache_aware=True, capacity=64 * 1024, residency=False)  # no residency between kernels
    kept = bound(g, H100, cache_aware=True, capacity=64 * 1024)  # h may also stay on chip between two kernels
    assert r.fused.time <= kept.cache_aware.time <= r.cache_aware.time
    c = r.cache
    assert c is not None and len(c.groups) == 1 and c.groups[0].kind in ("fused", "resident")
    assert c.groups[0].traffic == pytest.approx(r.totals.boundary_bytes)  # h never reaches DRAM
    assert c.groups[0].avoided == 2 * 64 * 32 * 4  # h's write and read are the traffic fusion saves


def test_examples_cache_aware_between_fused_and_capacity_limits() -> None:
    for name in ("mlp", "conv2d", "attention"):
        g = load(f"examples/graphs/{name}.yaml")
        unlimited = bound(g, H100, cache_aware=True, capacity=1e30)
        assert unlimited.cache_aware.time == pytest.approx(unlimited.fused.time, rel=1e-12)
        prev = None
        for cap in ("64KiB", "1MiB", "16MiB"):
            r = bound(g, H100, cache_aware=True, capacity=cap)
            c = r.cache
            assert r.cache_aware.computed and not c.raised_to_fused
            assert r.cache_aware.time >= r.fused.time * (1 - 1e-12)
            assert c.vs_unfused in ("above", "below", "equal")
            assert [n for gr in c.groups for n in gr.nodes] == [n.name for n in g.nodes]
            if prev is not None:
                assert r.cache_aware.time <= prev * (1 + 1e-12)  # more on-chip memory never costs
            prev = r.cache_aware.time
            floor_r = bound(g, H100, cache_aware=True, capacity=cap, cache_bound="floor")
            assert floor_r.fused.time * (1 - 1e-12) <= floor_r.cache_aware.time <= r.cache_aware.time * (1 + 1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_nodes=4, max_size=4), st.sampled_from([64.0, 1024.0, 1e30]))
def test_cache_aware_at_least_fused_and_fused_when_unlimited(g, cap):
    r = bound(g, B200, cache_aware=True, capacity=cap)
    c = r.cache
    assert not c.raised_to_fused
    assert r.cache_aware.time >= r.fused.time * (1 - 1e-12) - 1e-300
    assert c.traffic >= r.totals.boundary_bytes * (1 - 1e-12)
    # With S unlimited they agree, views included: both count an output that views a computed tensor
    # and an input read through a view by alias root (solar_io.backends.roofline.aliases).
    if cap == 1e30:
        assert r.cache_aware.time == pytest.approx(r.fused.time, rel=1e-12, abs=1e-300)


def test_bound_cli_and_schema(tmp_path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["bound", "examples/graphs/mlp.yaml", "--hw", "h100-pcie", "--cache-aware",
                              "--capacity", "1MiB", "-f", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    schema = json.loads(data_file("schema", "sol-report-v1.schema.json").read_text())
    jsonschema.validate(doc, schema)
    rep = doc["reports"][0]
    assert rep["fidelities"]["cache_aware"]["status"] == "computed"
    assert rep["cache_aware"]["bound"] == "ilp" and rep["cache_aware"]["capacity"] == 1 << 20
    res = runner.invoke(app, ["bound", "examples/graphs/mlp.yaml", "--hw", "h100-pcie", "--cache-bound", "floor"])
    assert res.exit_code == 0 and "provable floor" in res.stdout
    res = runner.invoke(app, ["bound", "examples/graphs/mlp.yaml", "--hw", "h100-pcie", "--capacity", "lots"])
    assert res.exit_code != 0


def test_tiling_cli(tmp_path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["tiling", "examples/graphs/conv2d.yaml", "--node", "conv", "--capacity", "256KiB",
                              "--points", "4", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["traffic"] >= doc["floor"]["value"] and doc["working_set"] <= 256 * 1024
    qs = [p["traffic"] for p in doc["curve"] if p["traffic"] is not None]
    assert qs == sorted(qs, reverse=True)
    res = runner.invoke(app, ["tiling", "examples/graphs/conv2d.yaml", "--node", "bias", "--hw", "h100-pcie"])
    assert res.exit_code == 0 and "Q(S)" in res.stdout
    res = runner.invoke(app, ["tiling", "examples/graphs/conv2d.yaml", "--node", "nope", "--hw", "h100-pcie"])
    assert res.exit_code != 0
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        res = runner.invoke(app, ["tiling", "examples/graphs/conv2d.yaml", "--node", "bias", "--capacity", "1MiB",
                                  "--plot", str(tmp_path / "c.png")])
        assert res.exit_code != 0
    assert math.isfinite(doc["capacity"])


def test_chain_tiled_on_two_ranks_matches_pairs_of_tiles() -> None:
    """x[B,M,K] @ w1[K,N] -> h[B,M,N]; h @ w2[N,P] -> y[B,M,P]: B and M index the same tensors, so
    the chain may tile both. Brute force over tile pairs (tB in 1..B, tM in 1..M, ragged included)
    and residency of w1, w2, with the model's traffic and working set written out by hand: the
    chain bound is at most every pair with its real (ceil) tile count, and equals the relaxation's
    minimum (a box of d points of B*M, d in 1..B*M, charged B*M/d tiles: every pair is one)."""
    b, m, k, n, p = 2, 6, 4, 4, 3
    acc = parse_access
    t = (Tensor("x", ("B", "M", "K"), "fp32", "input"), Tensor("w1", ("K", "N"), "fp32", "weight"),
         Tensor("h", ("B", "M", "N"), "fp32", "intermediate"), Tensor("w2", ("N", "P"), "fp32", "weight"),
         Tensor("y", ("B", "M", "P"), "fp32", "output"))
    nodes = (Node("mm1", "einsum", "mm", (acc("x[B, M, K]"), acc("w1[K, N]")), (acc("h[B, M, N]"),),
                  space=("B", "M", "N", "K"), map="mul", reduce="add"),
             Node("mm2", "einsum", "mm", (acc("h[B, M, N]"), acc("w2[N, P]")), (acc("y[B, M, P]"),),
                  space=("B", "M", "P", "N"), map="mul", reduce="add"))
    g = Graph(ranks=(("B", b), ("M", m), ("K", k), ("N", n), ("P", p)), tensors=t, nodes=nodes)
    opts = chain_options(g, graph_view(g, graph_metrics(g)), 0, 1)
    assert {o.rank for o in opts} == {"B", "M", "B*M"}
    base = 4 * (b * m * k + b * m * p)                                   # x read, y written, once
    # the larger node's sigma-indexed bytes; h, an intermediate, streams through one element per (b, m)
    whole = 4 * max(b * m * k + b * m, b * m + b * m * p)
    weights = {"w1": 4 * k * n, "w2": 4 * n * p}

    def least(shapes: list[tuple[float, float]], cap: float) -> float | None:
        """The least traffic over (tiles, points per tile) and residency within ``cap``."""
        best = None
        for tiles, points in shapes:
            for keep in itertools.product((False, True), repeat=2):
                res = [w for w, f in zip(weights, keep, strict=True) if f]
                ws = whole * points / (b * m) + sum(weights[w] for w in res)
                q = base + sum(weights[w] if w in res else tiles * weights[w] for w in weights)
                if ws <= cap and (best is None or q < best):
                    best = q
        return best

    pairs = [(-(-b // tb) * -(-m // tm), tb * tm) for tb, tm in itertools.product(range(1, b + 1), range(1, m + 1))]
    boxes = [(b * m / d, d) for d in range(1, b * m + 1)]
    for cap in (30, 60, 100, 150, 250, 400):
        got = solve_chain(opts, cap)
        want = least(boxes, cap)
        assert (got.traffic if got else None) == pytest.approx(want), cap
        real = least(pairs, cap)
        assert real is None or got.traffic <= real * (1 + 1e-12), cap
    # Tiling both ranks reaches capacities that one rank alone cannot: a tile of 1 x 1 rows.
    single = [o for o in opts if o.rank != "B*M"]
    assert solve_chain(single, 30) is None and solve_chain(opts, 30) is not None


def test_chain_enumeration_equals_the_chain_ilp() -> None:
    from solar_io.backends.tiling.fusion import ChainOption
    g = chain2(m=16, k=8, n=8, p=8)
    opts = chain_options(g, graph_view(g, graph_metrics(g)), 0, 1)
    # And a hand-made list with three sizes of streamed tensors, several of each.
    others = tuple((f"t{i}", float(b)) for i, b in enumerate([96, 96, 96, 40, 40, 7, 7, 7, 7]))
    made = [ChainOption("R", t, 12 // t, 500.0, 240.0 / (12 // t), others) for t in (1, 2, 3, 4, 6, 12)]
    for options, caps in ((opts, (128, 300, 700, 1500)), (made, (30, 100, 150, 260, 400, 600))):
        for cap in caps:
            a = solve_chain(options, cap, method="enumerate")
            b = solve_chain(options, cap, method="ilp")
            assert (a and a.traffic) == (b and b.traffic), cap
            if a is not None:
                assert a.working_set <= cap and b.working_set <= cap * (1 + 1e-9)


def attention(c: int = 2, t: int = 64, d: int = 16) -> Graph:
    """softmax(q k^T) v per head, lowered as the frontends do: k and v are read over a second
    sequence rank T2 although they are declared over T."""
    acc = parse_access
    f = "fp32"
    tensors = (Tensor("q", ("C", "T", "D"), f, "input"), Tensor("k", ("C", "T", "D"), f, "input"),
               Tensor("v", ("C", "T", "D"), f, "input"), Tensor("s", ("C", "T", "T2"), f, "intermediate"),
               Tensor("mx", ("C", "T"), f, "intermediate"), Tensor("sh", ("C", "T", "T2"), f, "intermediate"),
               Tensor("e", ("C", "T", "T2"), f, "intermediate"), Tensor("l", ("C", "T"), f, "intermediate"),
               Tensor("p", ("C", "T", "T2"), f, "intermediate"), Tensor("o", ("C", "T", "D"), f, "output"))
    full = ("C", "T", "T2")
    nodes = (Node("scores", "einsum", "sdpa", (acc("q[C, T, D]"), acc("k[C, T2, D]")), (acc("s[C, T, T2]"),),
                  space=(*full, "D"), map="mul", reduce="add"),
             Node("max", "einsum", "sdpa", (acc("s[C, T, T2]"),), (acc("mx[C, T]"),), space=full,
                  map="identity", reduce="max"),
             Node("shift", "einsum", "sdpa", (acc("s[C, T, T2]"), acc("mx[C, T]")), (acc("sh[C, T, T2]"),),
                  space=full, map="sub", reduce="none"),
             Node("exp", "einsum", "sdpa", (acc("sh[C, T, T2]"),), (acc("e[C, T, T2]"),), space=full,
                  map="exp", reduce="none"),
             Node("sum", "einsum", "sdpa", (acc("e[C, T, T2]"),), (acc("l[C, T]"),), space=full,
                  map="identity", reduce="add"),
             Node("probs", "einsum", "sdpa", (acc("e[C, T, T2]"), acc("l[C, T]")), (acc("p[C, T, T2]"),),
                  space=full, map="div", reduce="none"),
             Node("out", "einsum", "sdpa", (acc("p[C, T, T2]"), acc("v[C, T2, D]")), (acc("o[C, T, D]"),),
                  space=(*full, "D"), map="mul", reduce="add"))
    return Graph(ranks=(("C", c), ("T", t), ("T2", t), ("D", d)), tensors=tensors, nodes=nodes, name="attention")


def test_attention_chain_streams_the_scores_like_flash_attention() -> None:
    """One head's q, k, v and o fit on chip, its score matrix does not: flash attention still reads q, k
    and v and writes o once (scores stream through in blocks of T2, softmax online), so the
    cache-aware traffic is exactly those four tensors, not the scores' round trips."""
    c, t, d = 2, 64, 16
    g = attention(c, t, d)
    opts = chain_options(g, graph_view(g, graph_metrics(g)), 0, len(g.nodes) - 1)
    by_rank = {o.rank: o for o in opts}
    assert {"C", "T"} <= set(by_rank)
    assert {name for name, _ in by_rank["T"].others} == {"k", "v"}  # read over T2, not tiled with T
    head = 4 * t * d                                   # one head of q, k, v or o, fp32
    scores = 4 * t * t                                 # one head's score matrix
    cap = 2 * head + 1024
    assert scores > cap
    ct = solve_chain(opts, cap)
    assert ct is not None and ct.traffic == 4 * c * head
    r = bound(g, H100, cache_aware=True, capacity=cap, residency=False)
    assert r.cache_aware.bytes == pytest.approx(4 * c * head)
    assert r.cache_aware.time == pytest.approx(r.fused.time)


def recurrence(steps: int, n: int = 64, head: bool = False) -> Graph:
    """h_{k+1} = tanh(h_k), each step followed by a copy (a node chain tiling cannot take), all named
    as the nodes of one source op ``rnn`` (one kernel of the unfused bound). ``head``: first a
    matrix product x[M, N] @ w[N, N] -> h0 whose operands do not fit in the capacities used."""
    acc = parse_access
    tensors = [Tensor("h0", ("N",), "fp32", "intermediate" if head else "input")]
    nodes = []
    ranks = [("N", n)]
    if head:
        ranks.append(("M", 64))
        tensors += [Tensor("x", ("M", "N"), "fp32", "input"), Tensor("w", ("N", "N2"), "fp32", "weight")]
        ranks.append(("N2", n))
        nodes.append(Node("proj", "einsum", "mm", (acc("x[M, N]"), acc("w[N, N2]")), (acc("h0[N2]"),),
                          space=("M", "N", "N2"), map="mul", reduce="add"))
    for k in range(steps):
        last = k == steps - 1
        tensors += [Tensor(f"a{k}", ("N",), "fp32", "intermediate"),
                    Tensor(f"h{k + 1}", ("N",), "fp32", "output" if last else "intermediate")]
        nodes += [Node(f"rnn.t{k}", "einsum", "aten.rnn", (acc(f"h{k}[N]"),), (acc(f"a{k}[N]"),), space=("N",),
                       map="tanh", reduce="none"),
                  Node(f"rnn.c{k}" if not last else "rnn", "data_movement", "aten.rnn", (acc(f"a{k}[N]"),),
                       (acc(f"h{k + 1}[N]"),), space=("N",), movement="copy")]
    return Graph(ranks=tuple(ranks), tensors=tuple(tensors), nodes=tuple(nodes), name="recurrence")


def test_a_recurrence_whose_live_tensors_fit_moves_only_its_boundary() -> None:
    """All 2T step tensors together exceed S, but running the steps in order holds two of them at a
    time: that schedule reads h0 and writes h_T once, the fused bound's bytes."""
    from solar_io.backends.tiling.fusion import live_bytes, touched_bytes

    steps, n = 12, 64
    g = recurrence(steps, n)
    view = graph_view(g, graph_metrics(g))
    row = 4 * n
    assert live_bytes(view, 0, len(g.nodes) - 1) == 2 * row
    assert touched_bytes(view, 0, len(g.nodes) - 1) == (2 * steps + 1) * row
    r = bound(g, H100, cache_aware=True, capacity=3 * row, residency=False)
    assert r.cache_aware.bytes == pytest.approx(2 * row)
    assert r.cache_aware.time == pytest.approx(r.fused.time)


def test_a_kernel_longer_than_max_group_is_a_candidate_group() -> None:
    """The 24 nodes of one source op run as one kernel in the source program, so the partition may
    take them as one group although it is longer than max_group (8): its intermediates stay on chip.
    The matrix product before it does not fit, so the whole graph as one group does not either."""
    g = recurrence(12, 64, head=True)
    cap = 3 * 4 * 64
    r = bound(g, H100, cache_aware=True, capacity=cap, residency=False)
    groups = [gr.nodes for gr in r.cache.groups]
    assert groups[-1] == tuple(n.name for n in g.nodes[1:])  # the rnn kernel, one group
    assert r.cache.groups[-1].traffic == pytest.approx(2 * 4 * 64)  # reads h0, writes h12
