"""The networkx view of a graph (solar_io.graphs.dag) and repeated blocks, against brute force."""

from __future__ import annotations

import itertools
import random

import networkx as nx
import pytest
from paths import ROOT

from solar_io import loads
from solar_io.graphs.blocks import kernels, repeated_blocks
from solar_io.graphs.dag import components, critical_path, cycle, dag, dominators, is_convex, topological_order

HEADER = ('format: solar-io.einsum-graph\nversion: "1.0"\nname: {name}\nproducer:\n  tool: solar-io\n'
          "  tool_version: 0.1.0\n  frontend: hand-written\nranks:\n  N: 256\n")
FOOTER = "validation:\n  status: skipped\n  method: none\n  reason: test graph\n"


def graph_text(name: str, nodes: list[tuple[str, list[str]]], inputs: list[str], outputs: set[str]) -> str:
    """Elementwise nodes over rank N: each (name, [tensors it reads]) writes tensor 't_<name>' (fp32)."""
    lines = [HEADER.format(name=name), "tensors:\n"]
    for t in inputs:
        lines.append(f"- name: {t}\n  ranks: [N]\n  dtype: fp32\n  role: input\n")
    for n, _ in nodes:
        role = "output" if n in outputs else "intermediate"
        lines.append(f"- name: t_{n}\n  ranks: [N]\n  dtype: fp32\n  role: {role}\n")
    lines.append("nodes:\n")
    for n, reads in nodes:
        ins = "".join(f"  - {t}[N]\n" for t in reads)
        op = "add" if len(reads) == 2 else "relu"
        lines.append(f"- name: {n}\n  kind: einsum\n  op: aten.{op}\n  space: [N]\n  inputs:\n{ins}"
                     f"  output: t_{n}[N]\n  map: {'add' if len(reads) == 2 else 'relu'}\n  reduce: none\n")
    lines.append(FOOTER)
    return "".join(lines)


def random_graph(seed: int, n: int = 9):
    rng = random.Random(seed)
    nodes, made = [], ["x", "y"]
    for i in range(n):
        reads = rng.sample(made, k=min(len(made), rng.choice([1, 2])))
        nodes.append((f"v{i}", reads))
        made.append(f"t_v{i}")
    used = {t for _, r in nodes for t in r}
    outputs = {v for v, _ in nodes if f"t_{v}" not in used}
    return loads(graph_text(f"random{seed}", nodes, ["x", "y"], outputs))


def test_dag_edges_are_the_tensors_passed() -> None:
    from solar_io import load

    g = load(ROOT / "examples/graphs/mlp.yaml")
    d = dag(g)
    assert sorted(d.edges) == sorted([("fc1", "fc1_bias"), ("fc1_bias", "act"), ("act", "fc2"), ("fc2", "fc2_bias")])
    assert d.edges["fc1", "fc1_bias"]["tensors"] == ("h",)
    assert d.edges["fc1", "fc1_bias"]["bytes"] == 512 * 4096 * 2  # h: [B, H] in bf16, by hand
    assert topological_order(g) == [n.name for n in g.nodes]
    assert cycle(g) is None
    assert dag(g) is d  # built once per graph


def _paths(d: nx.DiGraph):
    for s in d.nodes:
        for t in d.nodes:
            if s == t:
                yield [s]
            else:
                yield from nx.all_simple_paths(d, s, t)


@pytest.mark.parametrize("seed", range(6))
def test_critical_path_is_the_heaviest_chain(seed: int) -> None:
    g = random_graph(seed)
    rng = random.Random(seed + 100)
    w = {n.name: rng.uniform(0.1, 5.0) for n in g.nodes}
    total, path = critical_path(g, w.__getitem__)
    brute = max(sum(w[v] for v in p) for p in _paths(dag(g)))
    assert total == pytest.approx(brute)
    assert sum(w[v] for v in path) == pytest.approx(total)
    assert all(dag(g).has_edge(a, b) for a, b in itertools.pairwise(path))


@pytest.mark.parametrize("seed", range(6))
def test_convexity_and_dominators_by_brute_force(seed: int) -> None:
    g = random_graph(seed, n=7)
    d = dag(g)
    names = [n.name for n in g.nodes]
    reach = {v: nx.descendants(d, v) for v in names}
    for k in (2, 3):
        for s in itertools.combinations(names, k):
            inside = set(s)
            leaves_and_returns = any(o not in inside and (reach[o] & inside) for v in inside for o in reach[v])
            assert is_convex(g, s) == (not leaves_and_returns), s
    idom = dominators(g)
    roots = [v for v in names if d.in_degree(v) == 0]
    for v, u in idom.items():
        if u == "\0source":
            continue
        # u dominates v: without u, no root reaches v
        cut = d.copy()
        cut.remove_node(u)
        assert not any(r in cut and (r == v or nx.has_path(cut, r, v)) for r in roots), (u, v)


def test_components_and_cycle_report() -> None:
    text = graph_text("two", [("a", ["x"]), ("b", ["t_a"]), ("c", ["y"])], ["x", "y"], {"b", "c"})
    g = loads(text)
    assert components(g) == [["a", "b"], ["c"]]
    # a cycle cannot be written in a valid file: make one from a valid graph's nodes
    from dataclasses import replace

    a, b, c = g.nodes
    loop = replace(g, nodes=(replace(a, inputs=(replace(a.inputs[0], tensor="t_b"),)), b, c))
    assert cycle(loop) is not None and set(cycle(loop)) == {"a", "b"}
    with pytest.raises(ValueError, match="cycle"):
        topological_order(loop)


def _layers(n_layers: int) -> str:
    nodes, prev = [], "x"
    for i in range(n_layers):
        nodes += [(f"add_{i}", [prev, "y"]), (f"relu_{i}", [f"t_add_{i}"])]
        prev = f"t_relu_{i}"
    nodes.append(("head", [prev]))
    return graph_text("layers", nodes, ["x", "y"], {"head"})


def test_repeated_blocks_find_the_layers() -> None:
    g = loads(_layers(5))
    b = repeated_blocks(g)
    assert b is not None and (b.start, b.period, b.repeats) == (0, 2, 5)
    assert b.block(0) == ["add_0", "relu_0"] and b.block(4) == ["add_4", "relu_4"]
    assert [k.name for k in kernels(g)][-1] == "head"
    assert repeated_blocks(loads(_layers(1))) is None
