"""networkx on big graphs: building the node DAG view and the algorithms on it, against plain Python.

A synthetic graph of N elementwise nodes over one rank (layers of add + relu with a residual read),
loaded through the normal reader. Prints seconds for: building ``solar_io.graphs.dag.dag``,
topological order, weakly connected components, the critical path, one convexity check; and, for
the same questions, a plain-Python pass over the node list (the producer map and one scan), which
is what the backends' hot loops do.

    .venv/bin/python benchmarks/bench_graph_dag.py            # N = 100000
    .venv/bin/python benchmarks/bench_graph_dag.py 20000
"""

from __future__ import annotations

import sys
import time

from solar_io import loads
from solar_io.graphs.blocks import repeated_blocks
from solar_io.graphs.dag import components, critical_path, dag, is_convex, topological_order


def text(n: int) -> str:
    out = ['format: solar-io.einsum-graph\nversion: "1.0"\nname: big\nproducer:\n  tool: solar-io\n'
           "  tool_version: 0.1.0\n  frontend: hand-written\nranks:\n  N: 4096\ntensors:\n"
           "- name: x\n  ranks: [N]\n  dtype: bf16\n  role: input\n"]
    for i in range(n):
        out.append(f"- name: t{i}\n  ranks: [N]\n  dtype: bf16\n  role: {'output' if i == n - 1 else 'intermediate'}\n")
    out.append("nodes:\n")
    for i in range(n):
        a = "x" if i == 0 else f"t{i - 1}"
        if i % 2 == 0:
            b = "x" if i < 2 else f"t{i - 2}"
            out.append(f"- name: add_{i}\n  kind: einsum\n  op: aten.add\n  space: [N]\n  inputs:\n  - {a}[N]\n"
                       f"  - {b}[N]\n  output: t{i}[N]\n  map: add\n  reduce: none\n")
        else:
            out.append(f"- name: relu_{i}\n  kind: einsum\n  op: aten.relu\n  space: [N]\n  inputs:\n  - {a}[N]\n"
                       f"  output: t{i}[N]\n  map: relu\n  reduce: none\n")
    out.append("validation:\n  status: skipped\n  method: none\n  reason: benchmark\n")
    return "".join(out)


def timed(label: str, fn):  # noqa: ANN001, ANN201
    t0 = time.perf_counter()
    out = fn()
    print(f"  {label:<44} {time.perf_counter() - t0:8.3f} s")
    return out


def native_order(g) -> int:  # noqa: ANN001
    """The plain-Python check the file format allows: nodes are in topological order iff every tensor a node
    reads is produced by an earlier node (or is not produced at all)."""
    producer = {a.tensor: i for i, n in enumerate(g.nodes) for a in n.outputs}
    bad = 0
    for i, n in enumerate(g.nodes):
        for a in n.inputs:
            if producer.get(a.tensor, -1) > i:
                bad += 1
    return bad


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    print(f"synthetic graph: {n} nodes")
    g = timed("load (parse + validate)", lambda: loads(text(n)))
    d = timed("networkx DAG view (dag)", lambda: dag(g))
    print(f"    {d.number_of_nodes()} vertices, {d.number_of_edges()} edges")
    timed("topological order + cycle check (networkx)", lambda: topological_order(g))
    timed("order check, plain Python over the node list", lambda: native_order(g))
    timed("weakly connected components", lambda: components(g))
    timed("critical path (unit weights)", lambda: critical_path(g, lambda v: 1.0))
    names = [x.name for x in g.nodes[n // 2: n // 2 + 8]]
    timed("is_convex of 8 consecutive nodes", lambda: is_convex(g, names))
    timed("repeated blocks (numpy, one pass per period)", lambda: repeated_blocks(g))


if __name__ == "__main__":
    main()
