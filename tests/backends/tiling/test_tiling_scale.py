"""Scaling the cache-aware bound: shared answers equal fresh solves, time-limit fallbacks stay
between the floor and the ILP, and nodes the tiling model cannot represent keep their bytes."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import graphs

from solar_io.affine import parse_access
from solar_io.backends.roofline import bound
from solar_io.backends.tiling import STATS, clear_cache, einsum_of, solve
from solar_io.backends.tiling.floors import floor
from solar_io.backends.tiling.fusion import chain_options, graph_view, solve_chain
from solar_io.backends.tiling.partition import cache_aware
from solar_io.backends.tiling.segments import CHAIN_STATS, clear_chain_cache
from solar_io.backends.tiling.sol import note
from solar_io.graph import Graph, Node, Tensor
from solar_io.hardware import load_spec
from solar_io.metrics import graph_metrics

pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")
H100 = load_spec("h100-pcie")
B200 = load_spec("b200")  # has a peak for every dtype the random graphs use


def layers(n: int, b: int = 2, s: int = 8, d: int = 8, f: int = 16) -> Graph:
    """``n`` identical MLP layers: x @ w -> h; gelu(h) -> a; sum_F(a) -> r; a / r -> m; m @ v -> y,
    y viewed as y2 and fed to the next layer (the shape of benchmarks/synthetic.py, small)."""
    tensors = [Tensor("x0", ("B", "S", "D"), "fp32", "input")]
    nodes = []
    cur = "x0"
    for i in range(n):
        last = i == n - 1
        tensors += [Tensor(f"w{i}", ("D", "F"), "fp32", "weight"), Tensor(f"h{i}", ("B", "S", "F"), "fp32",
                                                                          "intermediate"),
                    Tensor(f"a{i}", ("B", "S", "F"), "fp32", "intermediate"),
                    Tensor(f"r{i}", ("B", "S"), "fp32", "intermediate"),
                    Tensor(f"m{i}", ("B", "S", "F"), "fp32", "intermediate"),
                    Tensor(f"v{i}", ("F", "D"), "fp32", "weight"),
                    Tensor(f"y{i}", ("B", "S", "D"), "fp32", "intermediate"),
                    Tensor(f"z{i}", ("B", "S", "D"), "fp32", "output" if last else "intermediate")]
        acc = parse_access
        nodes += [
            Node(f"fc1_{i}", "einsum", "mm", (acc(f"{cur}[B, S, D]"), acc(f"w{i}[D, F]")), (acc(f"h{i}[B, S, F]"),),
                 space=("B", "S", "F", "D"), map="mul", reduce="add"),
            Node(f"act_{i}", "einsum", "gelu", (acc(f"h{i}[B, S, F]"),), (acc(f"a{i}[B, S, F]"),),
                 space=("B", "S", "F"), map="gelu", reduce="none"),
            Node(f"sum_{i}", "einsum", "sum", (acc(f"a{i}[B, S, F]"),), (acc(f"r{i}[B, S]"),),
                 space=("B", "S", "F"), map="identity", reduce="add"),
            Node(f"div_{i}", "einsum", "div", (acc(f"a{i}[B, S, F]"), acc(f"r{i}[B, S]")), (acc(f"m{i}[B, S, F]"),),
                 space=("B", "S", "F"), map="div", reduce="none"),
            Node(f"fc2_{i}", "einsum", "mm", (acc(f"m{i}[B, S, F]"), acc(f"v{i}[F, D]")), (acc(f"y{i}[B, S, D]"),),
                 space=("B", "S", "D", "F"), map="mul", reduce="add"),
            Node(f"view_{i}", "data_movement", "view", (acc(f"y{i}"),), (acc(f"z{i}"),), movement="reshape",
                 view=True),
        ]
        cur = f"z{i}"
    return Graph(ranks=(("B", b), ("S", s), ("D", d), ("F", f)), tensors=tuple(tensors), nodes=tuple(nodes),
                 name=f"layers{n}")


def run(g: Graph, cap: float, hw=H100, **kw) -> object:  # noqa: ANN001
    r = bound(g, hw)
    units = [{"matrix": n.matrix_time, "vector": n.vector_time, "special": n.special_time} for n in r.nodes]
    return cache_aware(g, graph_metrics(g), units, r.dram_bandwidth, cap, r.fused.time, r.unfused.time, **kw)


def fresh(g: Graph, cap: float, **kw) -> object:
    """The cache-aware result with every cache emptied and no sharing between segments."""
    clear_cache()
    clear_chain_cache()
    return run(g, cap, reuse=False, **kw)


def same(a, b) -> None:  # noqa: ANN001
    assert a.time == b.time and a.traffic == b.traffic
    assert [(gr.nodes, gr.kind, gr.traffic, gr.floor, gr.detail, gr.avoided) for gr in a.groups] == \
        [(gr.nodes, gr.kind, gr.traffic, gr.floor, gr.detail, gr.avoided) for gr in b.groups]


@pytest.mark.parametrize("cap", [700.0, 2500.0, 6000.0, 1e9])
def test_shared_segments_equal_fresh_solves(cap: float) -> None:
    g = layers(5)
    clear_cache()
    clear_chain_cache()
    shared = run(g, cap)
    assert shared.segments_reused > shared.segments_solved  # the five layers share their segments
    same(shared, fresh(g, cap))
    # Names in the details are the segment's own, not those of the layer first solved.
    nmap = g.node_map
    for gr in shared.groups:
        if gr.kind == "fused":
            mine = {a.tensor for n in gr.nodes for a in (*nmap[n].inputs, *nmap[n].outputs)}
            named = [t for part in gr.detail.split("; ")[1:] for t in part.split(" ", 1)[1].split(",") if t != "-"]
            assert named and set(named) <= mine, (gr.nodes, gr.detail)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_nodes=6, max_size=4), st.sampled_from([48.0, 400.0, 1e30]), st.integers(0, 2))
def test_shared_equals_fresh_on_random_graphs(g, cap, repeat):
    # Repeat the random graph's nodes (renamed) so that segments recur with different names.
    nodes, tensors = list(g.nodes), list(g.tensors)
    inner = {t.name for t in g.tensors if t.role not in ("input", "weight", "constant")}
    for c in range(repeat):
        ren = {t: f"{t}_c{c}" for t in inner}
        tensors += [dataclasses.replace(t, name=ren[t.name]) for t in g.tensors if t.name in ren]
        for n in g.nodes:
            nodes.append(dataclasses.replace(
                n, name=f"{n.name}_c{c}",
                inputs=tuple(dataclasses.replace(a, tensor=ren.get(a.tensor, a.tensor)) for a in n.inputs),
                outputs=tuple(dataclasses.replace(a, tensor=ren.get(a.tensor, a.tensor)) for a in n.outputs)))
    g2 = dataclasses.replace(g, tensors=tuple(tensors), nodes=tuple(nodes))
    clear_cache()
    clear_chain_cache()
    same(run(g2, cap, B200, max_group=4), fresh(g2, cap, hw=B200, max_group=4))


def test_chain_cache_answer_equals_fresh_solve() -> None:
    g = layers(3)
    clear_cache()
    clear_chain_cache()
    run(g, 1200.0)  # below a layer's live bytes: segments are chain-tiled
    assert CHAIN_STATS["hits"] > 0 and CHAIN_STATS["solved"] > 0
    view = graph_view(g, graph_metrics(g))
    # The fc2 -> fc1 segment of two different layers: one structure, one solve.
    a = solve_chain(chain_options(g, view, 4, 6), 1200.0)
    b = solve_chain(chain_options(g, view, 10, 12), 1200.0)
    assert a is not None and b is not None and a.traffic == b.traffic and a.rank == b.rank and a.tile == b.tile


def test_time_limit_fallback_is_between_floor_and_ilp() -> None:
    g = layers(2, b=4, s=16, d=16, f=32)
    e = einsum_of(g, g.nodes[0])
    cap = 150.0  # too small for the whole layer as one chain: single einsums solve their tiling ILPs
    clear_cache()
    t0 = solve(e, cap, time_limit=0)
    assert t0.timed_out and t0.traffic is None
    t = solve(e, cap)  # a longer limit solves it again instead of reusing the timeout
    assert not t.timed_out and t.traffic is not None and t.traffic >= floor(e, cap).value
    clear_cache()
    clear_chain_cache()
    ilp = run(g, cap)
    fallback = fresh(g, cap, time_limit=0)
    floors = fresh(g, cap, bound="floor")
    assert fallback.fallbacks and any(gr.fallback for gr in fallback.groups) and not ilp.fallbacks
    for gr in fallback.groups:
        if gr.fallback:
            assert gr.kind == "floor" and gr.traffic + gr.resident == gr.floor and "time limit" in gr.detail
    assert floors.time * (1 - 1e-12) <= fallback.time <= ilp.time * (1 + 1e-12)
    assert "time limit" in note(fallback) and "time limit" not in note(ilp)
    assert fallback.time >= bound(g, H100).fused.time * (1 - 1e-12)
    clear_cache()
    clear_chain_cache()


@dataclasses.dataclass(frozen=True, slots=True)
class FutureNode(Node):
    """A node with a field that a later format version might add."""

    future: str | None = None


def test_unmodeled_nodes_keep_their_unfused_bytes() -> None:
    g = layers(1, b=2, s=16, d=8, f=16)
    act = g.nodes[1]
    plain = FutureNode(**{f.name: getattr(act, f.name) for f in dataclasses.fields(Node)})
    future = FutureNode(**{f.name: getattr(act, f.name) for f in dataclasses.fields(Node)}, future="x")
    assert einsum_of(g, plain) is not None and einsum_of(g, future) is None
    scan = dataclasses.replace(act, scan="F")  # format 1.1: an inclusive scan along F
    assert einsum_of(g, scan) is None
    gs = dataclasses.replace(g, nodes=(g.nodes[0], scan, *g.nodes[2:]))
    # A scatter: the output indexed by an index tensor read by the node.
    ids = Tensor("ids", ("S",), "int32", "input")
    table = Tensor("table", ("S", "D"), "fp32", "output")
    scat = Node("scatter", "einsum", "index_put", (parse_access("z0[B, S, D]"), parse_access("ids[S]")),
                (parse_access("table[@ids, D]"),), space=("B", "S", "D"), map="identity", reduce="add")
    gs = dataclasses.replace(gs, tensors=(*[dataclasses.replace(t, role="intermediate") if t.name == "z0" else t
                                            for t in gs.tensors], ids, table), nodes=(*gs.nodes, scat))
    assert einsum_of(gs, scat) is None
    gm = graph_metrics(gs)
    view = graph_view(gs, gm)
    assert chain_options(gs, view, 0, 1) == [] and chain_options(gs, view, 5, 6) == []
    for cap in (600.0, 1500.0):
        r = bound(gs, H100, cache_aware=True, capacity=cap)
        c = r.cache
        by_node = {gr.nodes[0]: gr for gr in c.groups if len(gr.nodes) == 1}
        for k in (1, 6):  # neither fits on chip whole (4096 B and 1600 B + S): each keeps its unfused bytes
            gr = by_node[gs.nodes[k].name]
            assert gr.kind == "untiled" and gr.traffic + gr.resident == gm.nodes[k].bytes
        assert gm.nodes[1].bytes == 2 * (2 * 16 * 16 * 4) and gm.nodes[6].bytes == 2 * 16 * 8 * 4 + 16 * 4 + 16 * 8 * 4
        for gr in c.groups:  # in a group, only when everything it touches is on chip
            if len(gr.nodes) > 1 and ({"act_0", "scatter"} & set(gr.nodes)):
                assert gr.kind in ("resident", "floor")
        assert r.cache_aware.time >= r.fused.time * (1 - 1e-12)


def test_everything_on_chip_needs_no_ilp() -> None:
    # S holds every tensor: Q = compulsory traffic = the graph's boundary, with no ILP at all.
    # Hand count (fp32, B=2, S=8, D=8, F=16): x0 512 B, three w and three v 512 B each, the output
    # z2 (a view of the computed y2) 512 B.
    g = layers(3)
    clear_cache()
    clear_chain_cache()
    c = run(g, 1e9, residency=False)
    assert STATS["cbc"] == 0 and c.chain_ilps == 0
    assert c.traffic == 512 + 6 * 512 + 512
    assert {gr.kind for gr in c.groups} <= {"resident", "view"}
