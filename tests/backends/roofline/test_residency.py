"""DRAM bytes per node when on-chip memory persists between kernels (the unfused byte model)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import graphs

from solar_io.backends.traffic.residency import dram_bytes, node_traffic, on_chip_capacity
from solar_io.format.files import loads
from solar_io.hardware import load_spec
from solar_io.metrics import graph_metrics

MB = 4 * 1024 * 1024  # bytes of one 1024 x 1024 fp32 tensor

CHAIN = """\
format: solar-io.einsum-graph
version: "1.0"
name: chain
producer: {tool: solar-io, tool_version: 0.1.0, frontend: hand-written}
ranks: {M: 1024, N: 1024}
tensors:
- {name: x, ranks: [M, N], dtype: fp32, role: input}
- {name: a, ranks: [M, N], dtype: fp32, role: intermediate}
- {name: b, ranks: [M, N], dtype: fp32, role: intermediate}
- {name: y, ranks: [M, N], dtype: fp32, role: output}
nodes:
- {name: relu, kind: einsum, op: aten.relu, space: [M, N], inputs: ["x[M, N]"], output: "a[M, N]", map: relu,
   reduce: none}
- {name: twice, kind: einsum, op: aten.mul, space: [M, N], inputs: ["a[M, N]"], output: "b[M, N]", map: relu,
   reduce: none}
- {name: add, kind: einsum, op: aten.add, space: [M, N], inputs: ["a[M, N]", "b[M, N]"], output: "y[M, N]",
   map: add, reduce: none}
validation: {status: skipped, method: none, reason: hand-written}
"""


@pytest.fixture(scope="module")
def chain():
    g = loads(CHAIN)
    return g, node_traffic(g, graph_metrics(g))


def test_chain_by_hand(chain):
    g, tr = chain
    # capacity 0: every tensor a node touches crosses DRAM (the classical per-kernel count)
    assert dram_bytes(g, tr, 0.0) == [2 * MB, 2 * MB, 3 * MB]
    # everything fits: x is read once from DRAM, y is delivered; a and b never leave the chip
    assert dram_bytes(g, tr, 32 * MB) == [MB, 0.0, MB]
    # half a tensor on chip: relu spills half of a; twice re-reads a (half of it from DRAM) and spills
    # half of b; add re-reads a and b (two tensors, half of one held on chip) and delivers y
    assert dram_bytes(g, tr, 0.5 * MB) == [1.5 * MB, 1.0 * MB, 2.5 * MB]


def test_capacity_from_spec():
    spec = load_spec("h100-sxm")
    s, source = on_chip_capacity(spec)
    assert s == sum(m.total_capacity for m in spec.memory[1:] if m.total_capacity)
    assert "(spec)" in source and s > 50e6  # at least the 50 MB L2
    assert on_chip_capacity(spec, 1e6) == (1e6, "--capacity")
    with pytest.raises(ValueError):
        on_chip_capacity(spec, 0.0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.floats(min_value=0, max_value=1e4))
def test_properties(g, capacity):
    """Between the compulsory traffic and the classical count, monotone in the capacity."""
    gm = graph_metrics(g)
    tr = node_traffic(g, gm)
    classic = [x.bytes for x in tr]
    assert all(x.bytes <= m.bytes + 1e-9 for x, m in zip(tr, gm.nodes, strict=True))  # views only lower it
    assert dram_bytes(g, tr, 0.0) == pytest.approx(classic)
    d = dram_bytes(g, tr, capacity)
    more = dram_bytes(g, tr, 2 * capacity + 1)
    unlimited = dram_bytes(g, tr, math.inf)
    for lo, mid, hi, top in zip(unlimited, more, d, classic, strict=True):
        assert lo <= mid + 1e-9 and mid <= hi + 1e-9 and hi <= top + 1e-9
    # the fused bound's boundary bytes are compulsory: no capacity removes them
    assert sum(unlimited) >= gm.boundary_bytes * (1 - 1e-12) - 1e-9


def test_mlp_unfused_with_residency_by_hand():
    """On an H100 (tens of MB on chip) the 128 KiB activations of a small MLP never leave the chip
    between kernels: fc1 reads x and w1, act touches only on-chip data, fc2 reads w2 and writes y."""
    from test_roofline import BW, H100, P_BF16, SFU, V_BF16, mlp_graph

    from solar_io.backends.roofline import bound

    b, d, h = 64, 256, 1024
    x, w, y = b * d * 2, d * h * 2, b * d * 2
    r = bound(mlp_graph(b, d, h), H100)
    fc = 2 * b * d * h
    t_fc1 = max(fc / P_BF16, (x + w) / BW)
    t_act = max(4 * b * h / V_BF16, b * h / SFU)  # 4 vector FLOPs + 1 transcendental per element
    t_fc2 = max(fc / P_BF16, (w + y) / BW)
    assert [n.dram_bytes for n in r.nodes] == [x + w, 0.0, w + y]
    assert r.unfused.time == pytest.approx(t_fc1 + t_act + t_fc2, rel=1e-12)
    assert r.unfused.bytes == x + 2 * w + y == r.fused.bytes  # everything between kernels stayed on chip
    classic = bound(mlp_graph(b, d, h), H100, residency=False)
    assert classic.unfused.time > r.unfused.time >= r.fused.time


def test_broadcast_view_is_read_at_its_root_bytes():
    """y = x + expand(bias): a kernel reads the bias vector, not an M x N copy of it."""
    from test_roofline import H100, build, einsum

    from solar_io.backends.roofline import bound

    m, n = 256, 512
    g = build({"M": m, "N": n},
              [("x", ["M", "N"], "fp32", "input"), ("bias", ["N"], "fp32", "weight"),
               ("bx", ["M", "N"], "fp32", "intermediate"), ("y", ["M", "N"], "fp32", "output")],
              [{"name": "expand", "kind": "data_movement", "op": "aten.expand", "movement": "copy", "view": True,
                "space": ["M", "N"], "inputs": ["bias[N]"], "output": "bx[M, N]"},
               einsum("add", "M N", ["x[M, N]", "bx[M, N]"], "y[M, N]", "add", "none")])
    r = bound(g, H100, residency=False)
    assert r.nodes[1].bytes == r.nodes[1].dram_bytes == 4 * (2 * m * n + n)
    assert graph_metrics(g).nodes[1].bytes == 4 * 3 * m * n  # what the view alone would charge


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_nodes=5, max_size=5, in_place=True), st.sampled_from([64.0, 512.0, 1e30]))
def test_residency_lowers_unfused_and_cache_aware_but_never_below_fused(g, cap):
    """On any graph, scatters and chains of them updating an input in place (``updates``) included."""
    from solar_io.backends.roofline import bound

    kept = bound(g, "b200", cache_aware=True, capacity=cap)
    classic = bound(g, "b200", cache_aware=True, capacity=cap, residency=False)
    for a, b in ((kept.unfused, classic.unfused), (kept.cache_aware, classic.cache_aware)):
        assert kept.fused.time * (1 - 1e-12) <= a.time <= b.time * (1 + 1e-12)


def test_nodes_of_one_source_op_run_as_one_kernel():
    """softmax lowered to max / exp / sum / divide (names ``sm.*``, one op) is one kernel of the unfused
    bound: only x is read and y written; the inner row max, exponentials and sums never cross DRAM.
    A later node with another op is a kernel of its own."""
    from test_roofline import H100, build, einsum

    from solar_io.backends.roofline import bound
    from solar_io.backends.traffic.kernels import kernels

    r_, c = 512, 4096
    op = {"op": "aten._softmax"}
    g = build({"R": r_, "C": c},
              [("x", ["R", "C"], "fp32", "input"), ("m", ["R"], "fp32", "intermediate"),
               ("e", ["R", "C"], "fp32", "intermediate"), ("s", ["R"], "fp32", "intermediate"),
               ("p", ["R", "C"], "fp32", "intermediate"), ("y", ["R", "C"], "fp32", "output")],
              [einsum("sm.max", "R C", ["x[R, C]"], "m[R]", "identity", "max", **op),
               einsum("sm.exp", "R C", ["x[R, C]", "m[R]"], "e[R, C]", "sub", "none", **op),
               einsum("sm.sum", "R C", ["e[R, C]"], "s[R]", "identity", "add", **op),
               einsum("sm", "R C", ["e[R, C]", "s[R]"], "p[R, C]", "div", "none", **op),
               einsum("relu", "R C", ["p[R, C]"], "y[R, C]", "relu", "none")])
    assert kernels(g) == [(0, 3), (4, 4)]
    r = bound(g, H100, residency=False)
    (sm, relu) = r.kernels
    assert sm.name == "sm" and sm.dram_bytes == 4 * (r_ * c + r_ * c)  # reads x, writes p for relu
    assert relu.dram_bytes == 4 * 2 * r_ * c
    assert r.unfused.time == pytest.approx(sum(k.time for k in r.kernels), rel=1e-12)
    assert r.unfused.time < sum(n.time for n in r.nodes)  # per node, e would cross DRAM twice
    assert sm.vector_time == pytest.approx(sum(n.vector_time for n in r.nodes[:4]), rel=1e-12)


def test_groups_table_shows_the_residency_credit_beside_q():
    """Q(S) in the groups table is the traffic after the residency credit, so it may sit below the
    floor; the table shows the credit in its own column, and Q/floor is (Q(S) + resident) / floor >= 1."""
    from paths import ROOT

    from solar_io.backends.bound import bound
    from solar_io.backends.roofline.table import render
    from solar_io.units import format_si

    r = bound(ROOT / "examples" / "graphs" / "attention.yaml", "h100-sxm", cache_aware=True)
    credited = [gr for gr in r.cache.groups if gr.resident > 0]
    assert credited and any(gr.traffic < gr.floor for gr in credited)  # the case the column explains
    for gr in r.cache.groups:
        assert gr.traffic + gr.resident >= gr.floor * (1 - 1e-12)
    text = render([r], top=len(r.cache.groups))
    header = next(ln for ln in text.splitlines() if "Q(S)" in ln and "┃" in ln)
    assert "resident" in header and header.index("Q(S)") < header.index("resident") < header.index("floor")
    for gr in credited:
        row = next(ln for ln in text.splitlines() if ln.lstrip("│ ").startswith(gr.nodes[0] + " "))
        cells = [c.strip() for c in row.split("│")]
        assert format_si(gr.traffic, "B") in cells and format_si(gr.resident, "B") in cells


def test_a_scatter_result_read_later_reads_its_init_where_unwritten_at_every_fidelity():
    """fp32, R = 2. t1 = init1 with row 0 set from x (an immediate index 0: one row, 4 B written); t2, a new
    output, = init2 with row 0 set from t1 (written whole, 8 B, init2's other row read, 4 B); t1 read whole
    (8 B) is its written row plus init1's other row (4 B from DRAM); y = relu(x) (x 8 B, y 8 B). By hand:
    x 8 + init1 4 + init2 4 + y 8 + t2 8 = 32 B, and no fidelity may go below it (cache-aware had 28 B: the
    residency credit took init1's 4 B as on chip, touched by the first scatter that never read it)."""
    from solar_io.affine import parse_access as acc
    from solar_io.backends.roofline import bound
    from solar_io.graph import Graph, Node, Tensor

    def put(name: str, src: str, idx: str, init: str, out: str) -> Node:
        return Node(name, "einsum", "scatter", (acc(f"{init}[@{idx}]"), acc(f"{src}[R]"), acc(f"{idx}[R]")),
                    (acc(f"{out}[@{idx}]"),), space=("R",), map="identity", reduce="none", init=init)

    f32 = [Tensor(n, ("R",), "fp32", role) for n, role in (("x", "input"), ("init1", "input"), ("init2", "input"),
                                                          ("y", "output"), ("t1", "intermediate"), ("t2", "output"))]
    idx = [Tensor(n, ("R",), "int64", "constant", value=0.0) for n in ("i1", "i2")]
    g = Graph((("R", 2),), (*f32, *idx), (Node("relu", "einsum", "aten.relu", (acc("x[R]"),), (acc("y[R]"),),
                                                space=("R",), map="relu", reduce="none"),
                                           put("p1", "x", "i1", "init1", "t1"), put("p2", "t1", "i2", "init2", "t2")))
    for cap in (64.0, 1e30):
        r = bound(g, "b200", cache_aware=True, capacity=cap)
        assert r.fused.bytes == r.unfused.bytes == r.cache.traffic == 32.0
