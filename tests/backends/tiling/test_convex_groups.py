"""Fusion groups that are convex but not consecutive in the file's node order (issue 21, item 3).

The cache-aware partition also searches the branch order (solar_io.backends.tiling.schedule), so two
independent chains the capture interleaves can each run as one kernel. Checked against hand counts,
against the consecutive-only search, against networkx's view of the graph (every group is convex,
the order is topological) and, for the inverse roofline, against a brute force over schedules.
"""

from __future__ import annotations

import math
import random
from functools import cache

import networkx as nx
import pytest

from solar_io.affine import parse_access
from solar_io.backends.roofline import bound, inverse_roofline
from solar_io.backends.tiling import partition
from solar_io.backends.tiling.schedule import branch_order, cuts, regions
from solar_io.backends.tiling.sol import note
from solar_io.graph import Graph, Node, Tensor
from solar_io.graphs.dag import dag, is_convex
from solar_io.hardware import load_spec

pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")
H100 = load_spec("h100-sxm")
M = N = 1 << 16  # elements; fp32 tensors of 256 KiB
S = 64 * 1024  # on-chip bytes: less than one tensor, so nothing fits whole


def ew(name: str, op: str, reads: list[str], out: str, rank: str) -> Node:
    return Node(name, "einsum", f"aten.{op}", tuple(parse_access(f"{t}[{rank}]") for t in reads),
                (parse_access(f"{out}[{rank}]"),), space=(rank,), map=op if len(reads) == 1 else "add",
                reduce="none")


def graph(nodes: list[Node], roles: dict[str, tuple[str, str]]) -> Graph:
    tensors = tuple(Tensor(t, (rank,), "fp32", role) for t, (rank, role) in roles.items())
    return Graph((("M", M), ("N", N)), tensors, tuple(nodes))


def interleaved() -> Graph:
    """Two independent chains over different ranks, interleaved: A1 (M), B1 (N), A2 (M), B2 (N).
    No run of the file's order holds a shared rank, so none fuses; A1+A2 and B1+B2 do."""
    return graph([ew("A1", "relu", ["x"], "a1", "M"), ew("B1", "relu", ["y"], "b1", "N"),
                  ew("A2", "exp", ["a1"], "a2", "M"), ew("B2", "exp", ["b1"], "b2", "N")],
                 {"x": ("M", "input"), "y": ("N", "input"), "a1": ("M", "intermediate"),
                  "b1": ("N", "intermediate"), "a2": ("M", "output"), "b2": ("N", "output")})


def consecutive_only(monkeypatch: pytest.MonkeyPatch, g: Graph, **kw):  # noqa: ANN201
    """The bound as it was: groups are runs of the file's order only."""
    with monkeypatch.context() as m:
        m.setattr(partition, "_alternative", lambda *a, **k: None)
        return bound(g, H100, cache_aware=True, **kw)


def test_interleaved_branches_fuse_to_the_hand_count(monkeypatch: pytest.MonkeyPatch) -> None:
    g = interleaved()
    assert branch_order(g) == (0, 2, 1, 3)  # A1, A2, B1, B2
    r = bound(g, H100, cache_aware=True, capacity=S, residency=False)
    bw = r.dram_bandwidth
    tensor = 4 * M
    for nd in r.nodes:  # two nodes' compute is below one tensor's transfer: the hand count is bytes / bandwidth
        assert max(nd.matrix_time, nd.vector_time, nd.special_time) < tensor / bw / 2
    groups = {gr.nodes: gr for gr in r.cache.groups}
    assert set(groups) == {("A1", "A2"), ("B1", "B2")}
    for gr in groups.values():  # x (or y) read, a2 (or b2) written; a1 (b1) stays on chip, tiled along M (N)
        assert not gr.consecutive and gr.kind == "fused"
        assert gr.traffic == 2 * tensor and gr.avoided == 2 * tensor
    hand = 2 * (2 * tensor / bw)
    assert r.cache_aware.time == pytest.approx(hand, rel=1e-12)
    old = consecutive_only(monkeypatch, g, capacity=S, residency=False)
    assert all(len(gr.nodes) == 1 for gr in old.cache.groups)  # no run of the file's order shares a rank
    assert old.cache_aware.time == pytest.approx(4 * (2 * tensor / bw), rel=1e-12)
    assert old.cache_aware.time > r.cache_aware.time
    text = note(r.cache)
    assert "2 group(s) are convex node sets that are not consecutive" in text and "{A1, A2}" in text


def test_the_report_names_groups_that_are_not_consecutive() -> None:
    import json

    import jsonschema

    from solar_io.backends.roofline.report import report_dict, to_json
    from solar_io.resources import data_file

    r = bound(interleaved(), H100, cache_aware=True, capacity=S, residency=False)
    groups = report_dict(r)["cache_aware"]["groups"]
    assert [(gr["nodes"], gr["consecutive"]) for gr in groups] == [(["A1", "A2"], False), (["B1", "B2"], False)]
    schema = json.loads(data_file("schema", "sol-report-v1.schema.json").read_text())
    jsonschema.validate(json.loads(to_json([r])), schema)


def test_a_non_convex_set_never_fuses() -> None:
    """A1 -> C -> A2: {A1, A2} without C is not convex (A2 waits on C, which waits on A1), so no
    partition may run it as one kernel, whatever the order searched."""
    g = graph([ew("A1", "relu", ["x"], "a1", "M"), ew("B1", "relu", ["y"], "b1", "N"),
               ew("C", "exp", ["a1"], "c", "M"), ew("B2", "exp", ["b1"], "b2", "N"),
               Node("A2", "einsum", "aten.add", (parse_access("a1[M]"), parse_access("c[M]")),
                    (parse_access("a2[M]"),), space=("M",), map="add", reduce="none")],
              {"x": ("M", "input"), "y": ("N", "input"), "a1": ("M", "intermediate"), "b1": ("N", "intermediate"),
               "c": ("M", "intermediate"), "a2": ("M", "output"), "b2": ("N", "output")})
    assert not is_convex(g, ["A1", "A2"])
    r = bound(g, H100, cache_aware=True, capacity=S, residency=False)
    sets = _candidate_sets(r)
    assert frozenset({0, 4}) not in sets and all(is_convex(g, [g.nodes[k].name for k in s]) for s in sets)
    assert all(is_convex(g, gr.nodes) for gr in r.cache.groups)
    assert ("A1", "C", "A2") in {gr.nodes for gr in r.cache.groups}  # the convex chain does fuse


def _candidate_sets(r) -> set[frozenset[int]]:  # noqa: ANN001
    ca = r.cache
    out = {frozenset(range(i, j + 1)) for i, j, _ in ca.candidates}
    out |= {frozenset(ca.branch_order[k] for k in range(i, j + 1)) for i, j, _ in ca.branch_candidates}
    return out


def random_graph(seed: int, n: int = 9) -> Graph:
    """Random DAGs of elementwise nodes over two ranks (each reads one or two earlier tensors of its rank)."""
    rng = random.Random(seed)
    made = {"M": ["x"], "N": ["y"]}
    roles = {"x": ("M", "input"), "y": ("N", "input")}
    nodes = []
    for i in range(n):
        rank = rng.choice("MN")
        reads = rng.sample(made[rank], k=min(len(made[rank]), rng.choice([1, 2])))
        nodes.append(ew(f"v{i}", "relu" if len(reads) == 1 else "add", reads, f"t{i}", rank))
        made[rank].append(f"t{i}")
        roles[f"t{i}"] = (rank, "intermediate")
    used = {a.tensor for nd in nodes for a in nd.inputs}
    for t, (rank, role) in list(roles.items()):
        if role == "intermediate" and t not in used:
            roles[t] = (rank, "output")
    return graph(nodes, roles)


@pytest.mark.parametrize("seed", range(8))
def test_random_graphs_groups_are_convex_and_never_worse(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    g = random_graph(seed)
    order = branch_order(g)
    d = dag(g)
    if order is not None:  # a topological order: every edge goes forward
        pos = {g.nodes[k].name: p for p, k in enumerate(order)}
        assert sorted(order) == list(range(len(g.nodes)))
        assert all(pos[u] < pos[v] for u, v in d.edges)
        cut = cuts(order)
        assert all(cut[p] == (set(order[:p]) == set(range(p))) for p in range(len(order) + 1))
    r = bound(g, H100, cache_aware=True, capacity=S)
    assert all(is_convex(g, [g.nodes[k].name for k in s]) for s in _candidate_sets(r))
    assert all(is_convex(g, gr.nodes) for gr in r.cache.groups)
    assert sorted(n for gr in r.cache.groups for n in gr.nodes) == sorted(nd.name for nd in g.nodes)
    old = consecutive_only(monkeypatch, g, capacity=S)
    assert r.cache_aware.time <= old.cache_aware.time * (1 + 1e-12)
    assert r.cache_aware.time >= r.fused.time * (1 - 1e-12)
    if not r.cache.branch_spans:  # the file's partition kept: the same figure, the same groups
        assert r.cache_aware.time == old.cache_aware.time and r.cache.groups == old.cache.groups
    assert nx.is_directed_acyclic_graph(d)


def test_regions_widen_and_merge() -> None:
    assert regions((0, 2, 1, 3, 4, 5, 6, 8, 7)) == ((1, 3), (7, 9))
    assert regions((0, 2, 1, 3, 4, 5, 6, 8, 7), pad=2) == ((0, 9),)
    assert regions((0, 1, 2)) == ()


def schedule_time(r, resource: str, z: float) -> float:  # noqa: ANN001
    """Brute force over schedules: every sequence of candidate groups (of either order, as node
    sets) where each group's producers run before it or in it; ``resource`` at rate / z; at least
    the fused time, as the bound."""
    ca = r.cache
    g_nodes = r.nodes
    n = len(g_nodes)
    q: dict[frozenset[int], float] = {}
    for i, j, t in ca.candidates:
        s = frozenset(range(i, j + 1))
        q[s] = min(q.get(s, math.inf), t)
    for i, j, t in ca.branch_candidates:
        s = frozenset(ca.branch_order[k] for k in range(i, j + 1))
        q[s] = min(q.get(s, math.inf), t)
    bw = r.dram_bandwidth
    scale = z if resource == "dram" else 1.0
    names = {nd.name: k for k, nd in enumerate(g_nodes)}
    d = dag(GRAPH[0])
    preds = [frozenset(names[p] for p in d.predecessors(nd.name)) for nd in g_nodes]

    def units(s: frozenset[int]) -> float:
        per = {"matrix": 0.0, "vector": 0.0, "special": 0.0}
        for k in s:
            for ld in g_nodes[k].loads:
                if ld.unit != "dram":
                    per[ld.unit] += ld.time * (z if ld.resource == resource else 1.0)
        return max(per.values())

    @cache
    def best(done: frozenset[int]) -> float:
        if len(done) == n:
            return 0.0
        out = math.inf
        for s, t in q.items():
            if s & done or not all(preds[k] <= done | s for k in s):
                continue
            out = min(out, max(units(s), t / bw * scale) + best(done | s))
        return out

    fused = max(units(frozenset(range(n))), r.totals.boundary_bytes / bw * scale)
    return max(best(frozenset()), fused)


GRAPH: list[Graph] = []


def test_inverse_roofline_searches_the_branch_order_too() -> None:
    g = interleaved()
    GRAPH[:] = [g]
    r = bound(g, H100, cache_aware=True, capacity=S, residency=False)
    assert schedule_time(r, "dram", 1.0) == pytest.approx(r.cache_aware.time, rel=1e-12)
    for factor in (0.5, 1.0, 2.0):
        target = r.cache_aware.time * factor
        for req in inverse_roofline(r, target).fidelity("cache-aware").requirements:
            if req.with_chip_rest in (None, 0):
                continue
            z = 1.0 / req.with_chip_rest_ratio
            assert schedule_time(r, req.resource, z) <= target * (1 + 1e-9) < \
                schedule_time(r, req.resource, z * (1 + 1e-6)), req


def layered(layers: int) -> Graph:
    """``layers`` copies of the interleaved pair of chains, each layer reading the last one's outputs."""
    nodes, roles = [], {"a0": ("M", "input"), "b0": ("N", "input")}
    for k in range(1, layers + 1):
        a, b = f"a{k - 1}", f"b{k - 1}"
        nodes += [ew(f"A1_{k}", "relu", [a], f"p{k}", "M"), ew(f"B1_{k}", "relu", [b], f"q{k}", "N"),
                  ew(f"A2_{k}", "exp", [f"p{k}"], f"a{k}", "M"), ew(f"B2_{k}", "exp", [f"q{k}"], f"b{k}", "N")]
        last = k == layers
        roles.update({f"p{k}": ("M", "intermediate"), f"q{k}": ("N", "intermediate"),
                      f"a{k}": ("M", "output" if last else "intermediate"),
                      f"b{k}": ("N", "output" if last else "intermediate")})
    return graph(nodes, roles)


@pytest.mark.parametrize("residency", [True, False])
def test_repeated_layers_share_their_analysis_and_agree_with_a_fresh_one(residency: bool) -> None:
    """The branch order's groups of identical layers are analysed once (contexts and credit signatures);
    the partition equals the one analysing every group afresh (reuse=False)."""
    from solar_io.metrics import graph_metrics

    g = layered(5)
    r = bound(g, H100, cache_aware=True, capacity=S, residency=residency)
    units = [{"matrix": n.matrix_time, "vector": n.vector_time, "special": n.special_time} for n in r.nodes]
    args = (g, graph_metrics(g), units, r.dram_bandwidth, S, r.fused.time, r.unfused.time)
    shared = partition.cache_aware(*args, residency=residency)
    fresh = partition.cache_aware(*args, residency=residency, reuse=False)
    assert shared.time == fresh.time and shared.groups == fresh.groups
    assert sorted(shared.branch_candidates) == sorted(fresh.branch_candidates)
    # the branch order runs chain A through every layer, then chain B: groups hold one chain each
    assert all(len({n[0] for n in gr.nodes}) == 1 for gr in shared.groups)
    assert any(len(gr.nodes) > 2 and not gr.consecutive for gr in shared.groups)
