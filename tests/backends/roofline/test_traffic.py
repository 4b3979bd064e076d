"""The traffic model built once per graph, and what sharing it across chips must not change.

- :func:`traffic_of` is built once per graph object and agrees with the per-node derivation it
  replaces (:func:`node_traffic` over fresh view chains);
- bounding one graph object on several chips (sharing its traffic model, its capacity-independent
  segment tables and, at equal capacity, its segment table) gives every figure a fresh graph object
  gets on each chip alone, with every cache emptied;
- kernels: declared ``kernel`` ids (format 1.3) when the graph declares any, else the name-prefix
  rule; a declared kernel never changes what the tiling model sees (same cache-aware bound);
- the HBL floor's fractional cover number, solved exactly, against CBC and hand values.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random

import pulp
import pytest

from solar_io.affine import parse_access
from solar_io.backends.bound import bound, bound_many
from solar_io.backends.roofline import to_json
from solar_io.backends.tiling import clear_cache, clear_chain_cache
from solar_io.backends.tiling.floors import cover_number
from solar_io.backends.traffic import build_traffic, kernels, node_traffic, traffic_of
from solar_io.graph import Graph, Node, Tensor
from solar_io.metrics import graph_metrics
from solar_io.views import ViewChains

pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")


def layers(n: int, declare: bool = False) -> Graph:
    """``n`` MLP layers (matmul, gelu, row sum, divide, matmul, a view), bf16, small; with ``declare``
    the gelu and sum of each layer declare one kernel (as a frontend lowering one op to two would)."""
    acc = parse_access
    tensors = [Tensor("x0", ("B", "S", "D"), "bf16", "input")]
    nodes: list[Node] = []
    cur = "x0"
    for i in range(n):
        out = "output" if i == n - 1 else "intermediate"
        tensors += [Tensor(f"w{i}", ("D", "F"), "bf16", "weight"), Tensor(f"v{i}", ("F", "D"), "bf16", "weight"),
                    *(Tensor(f"{p}{i}", ("B", "S", "F"), "bf16", "intermediate") for p in "ham"),
                    Tensor(f"r{i}", ("B", "S"), "bf16", "intermediate"),
                    Tensor(f"y{i}", ("B", "S", "D"), "bf16", "intermediate"),
                    Tensor(f"z{i}", ("B", "S", "D"), "bf16", out)]
        k = f"act{i}" if declare else None
        nodes += [
            Node(f"fc1_{i}", "einsum", "mm", (acc(f"{cur}[B, S, D]"), acc(f"w{i}[D, F]")), (acc(f"h{i}[B, S, F]"),),
                 space=("B", "S", "F", "D"), map="mul", reduce="add"),
            Node(f"act_{i}", "einsum", "gelu", (acc(f"h{i}[B, S, F]"),), (acc(f"a{i}[B, S, F]"),),
                 space=("B", "S", "F"), map="gelu", reduce="none", kernel=k),
            Node(f"sum_{i}", "einsum", "sum", (acc(f"a{i}[B, S, F]"),), (acc(f"r{i}[B, S]"),),
                 space=("B", "S", "F"), map="identity", reduce="add", kernel=k),
            Node(f"div_{i}", "einsum", "div", (acc(f"a{i}[B, S, F]"), acc(f"r{i}[B, S]")), (acc(f"m{i}[B, S, F]"),),
                 space=("B", "S", "F"), map="div", reduce="none"),
            Node(f"fc2_{i}", "einsum", "mm", (acc(f"m{i}[B, S, F]"), acc(f"v{i}[F, D]")), (acc(f"y{i}[B, S, D]"),),
                 space=("B", "S", "D", "F"), map="mul", reduce="add"),
            Node(f"view_{i}", "data_movement", "view", (acc(f"y{i}"),), (acc(f"z{i}"),), movement="reshape",
                 view=True),
        ]
        cur = f"z{i}"
    return Graph(ranks=(("B", 2), ("S", 64), ("D", 64), ("F", 256)), tensors=tuple(tensors), nodes=tuple(nodes),
                 name=f"layers{n}")


def test_traffic_is_built_once_per_graph_and_agrees_with_node_traffic() -> None:
    g = layers(2)
    gt = traffic_of(g)
    assert traffic_of(g) is gt and traffic_of(dataclasses.replace(g, name="other")) is not gt
    gm = graph_metrics(g)
    fresh = node_traffic(g, gm, ViewChains(g))
    assert list(gt.nodes) == fresh and build_traffic(g).reads == gt.reads
    # The view (last node of each layer) moves nothing; y0 is the root of z0 and x0 is read by fc1_0 only.
    assert gt.nodes[5].bytes == 0 and gt.root["z0"] == "y0" and gt.consumers["x0"] == (0,)
    assert gt.producer["y0"] == 4 and gt.last_reader["y0"] == 6  # fc2_0 writes y0; fc1_1 reads it via z0
    assert gt.boundary_bytes == gm.boundary_bytes


def _doc(r) -> dict:  # noqa: ANN001
    d = json.loads(to_json([r]))["reports"][0]
    for key in ("distinct_einsum_ilps", "distinct_chain_ilps"):
        d["cache_aware"].pop(key)  # how much was solved afresh in this call: what sharing changes by design
    return d


def test_several_chips_on_one_graph_object_equal_fresh_bounds() -> None:
    chips = ["h100-sxm", "h200-sxm", "h100-pcie", "jetson-agx-orin-64gb"]  # h200-sxm: the same S as h100-sxm
    g = layers(3)
    clear_cache()
    clear_chain_cache()
    shared = bound_many(g, chips, cache_aware=True, target_latency="1ms")
    again = [bound(g, c, cache_aware=True, target_latency="1ms") for c in chips]  # every table reused
    for chip, a, b in zip(chips, shared, again, strict=True):
        clear_cache()
        clear_chain_cache()
        alone = bound(layers(3), chip, cache_aware=True, target_latency="1ms")
        assert _doc(a) == _doc(alone) == _doc(b), chip
    assert again[1].cache.segments_solved == 0  # the second bound at one S analyses no segment again


def test_kernels_read_declared_ids_else_the_name_prefix() -> None:
    plain, declared = layers(2), layers(2, declare=True)
    assert kernels(plain) == [(i, i) for i in range(12)]  # no shared prefix: one kernel per node
    assert kernels(declared) == [(0, 0), (1, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 8), (9, 9), (10, 10), (11, 11)]
    prefixed = dataclasses.replace(plain, nodes=tuple(dataclasses.replace(n, name=f"call.{n.name}")
                                                      if n.op == "gelu" or n.op == "sum" else n for n in plain.nodes))
    assert kernels(prefixed) == [(i, i) for i in range(12)]  # gelu and sum differ in op: no prefix kernel
    # A declared kernel is grouping, not work: the tiling model sees the same einsums.
    a = bound(plain, "h100-sxm", cache_aware=True, capacity="64KiB")
    b = bound(declared, "h100-sxm", cache_aware=True, capacity="64KiB")
    assert a.cache_aware.time == b.cache_aware.time and a.cache.traffic == b.cache.traffic
    assert len(b.kernels) == len(a.kernels) - 2  # gelu + sum run as one kernel per layer


def _cbc(rows: tuple[frozenset[int], ...]) -> float:
    n = 1 + max(max(r) for r in rows)
    prob = pulp.LpProblem("cover", pulp.LpMinimize)
    s = [pulp.LpVariable(f"s{i}", 0) for i in range(n)]
    prob += pulp.lpSum(s)
    for r in rows:
        prob += pulp.lpSum(s[i] for i in r) >= 1
    prob.solve(pulp.PULP_CBC_CMD(msg=0))
    return sum(v.value() or 0.0 for v in s)


def test_cover_number_is_exact() -> None:
    f = frozenset
    assert cover_number((f({0, 2}), f({1, 2}), f({0, 1}))) == 1.5  # matmul A[m,k] B[k,n] C[m,n]
    assert cover_number((f({0, 1}),)) == 1.0  # elementwise x[i] -> y[i]
    assert cover_number((f({0}), f({1}), f({2}))) == 3.0  # three ranks, one operand each
    assert cover_number((f({0, 1}), f()) ) is None  # a rank no operand indexes
    # A triangle plus a pendant: 5/3 exactly, where CBC answers within its tolerance.
    tri = (f({1, 2, 3}), f({0, 2, 3}), f({1, 3}), f({0, 1}), f({1, 2}))
    assert cover_number(tri) == 5 / 3 and _cbc(tri) == pytest.approx(5 / 3, rel=1e-6)
    rnd = random.Random(7)
    for _ in range(40):
        n = rnd.randint(1, 4)
        rows = tuple(f(i for i in range(n) if rnd.random() < 0.5) or f({rnd.randrange(n)})
                     for _ in range(rnd.randint(1, 5)))
        assert cover_number(rows) == pytest.approx(_cbc(rows), rel=1e-6, abs=1e-9)
        # Brute force on a grid of halves and thirds: no feasible point below the optimum.
        grid = sorted({a / b for a in range(4) for b in (1, 2, 3)})
        best = min(sum(x) for x in itertools.product(grid, repeat=n) if all(sum(x[i] for i in r) >= 1 for r in rows))
        assert cover_number(rows) <= best + 1e-12
