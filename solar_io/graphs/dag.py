"""The node/tensor DAG of a graph as a networkx view, and the graph algorithms it answers.

One vertex per node; one edge producer -> consumer per tensor it passes (attribute ``tensors``,
the names, and ``bytes``, their size at their dtypes). Graph inputs, weights and constants have no
producer, so they add no edge. Built once per graph (:func:`dag`, cached by identity).

    d = dag(load("examples/graphs/mlp.yaml"))
    topological_order(g)[:2]          # producers first
    critical_path(g, sol_of_node)     # (seconds, [node, ...])

What networkx does here: topological order and cycle reports (:func:`cycle`), weakly connected
components (:func:`components`), the critical path under any node weight (:func:`critical_path`),
immediate dominators (:func:`dominators`) and convexity of a node set (:func:`is_convex`: a group
no path leaves and re-enters, the condition for fusing nodes that are not consecutive in the file).
The hot loops of the backends (bytes, residency, per-node bounds) stay in plain Python over the
node list: a networkx call per node costs microseconds that 100k-node graphs multiply
(``benchmarks/bench_graph_dag.py`` measures both).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

import networkx as nx

from .._gc import gc_paused
from ..affine import Indirect
from ..graph import Graph, Node
from ..metrics import tensor_bytes

#: The last few DAGs built, by graph identity (a Graph hashes all its nodes: too slow as a key).
_CACHE: OrderedDict[int, tuple[Graph, nx.DiGraph]] = OrderedDict()
_CACHED = 8

#: The entry vertex :func:`dominators` adds: every node without a predecessor hangs from it.
SOURCE = "\0source"


def read_tensors(n: Node) -> list[str]:
    """Tensors ``n`` reads: its inputs and the tensors its indirect indices (``@ids``) read, in order, once."""
    seen: dict[str, None] = {}
    for a in n.inputs:
        seen.setdefault(a.tensor)
        for e in a.index or ():
            if isinstance(e, Indirect):
                seen.setdefault(e.tensor)
    for a in n.outputs:  # an index tensor of a scatter is read too
        for e in a.index or ():
            if isinstance(e, Indirect):
                seen.setdefault(e.tensor)
    return list(seen)


def dag(g: Graph) -> nx.DiGraph:
    """The node DAG of ``g`` (cached per graph object; do not mutate it)."""
    hit = _CACHE.get(id(g))
    if hit is not None and hit[0] is g:
        _CACHE.move_to_end(id(g))
        return hit[1]
    with gc_paused():  # tens of thousands of small dicts and tuples: no cyclic-GC passes meanwhile
        d = _build(g)
    _CACHE[id(g)] = (g, d)
    while len(_CACHE) > _CACHED:
        _CACHE.popitem(last=False)
    return d


def _build(g: Graph) -> nx.DiGraph:
    producer: dict[str, str] = {}
    for n in g.nodes:
        for a in n.outputs:
            producer.setdefault(a.tensor, n.name)
    tmap = g.tensor_map
    sizes: dict[str, float] = {}
    edges: dict[tuple[str, str], dict] = {}
    for n in g.nodes:
        for t in read_tensors(n):
            p = producer.get(t)
            if p is None or p == n.name:
                continue
            if t not in sizes:
                sizes[t] = tensor_bytes(g, tmap[t]) if t in tmap else 0.0
            e = edges.get((p, n.name))
            if e is None:
                edges[(p, n.name)] = {"tensors": (t,), "bytes": sizes[t]}
            else:
                e["tensors"] = (*e["tensors"], t)
                e["bytes"] += sizes[t]
    d = nx.DiGraph()
    d.add_nodes_from((n.name, {"kind": n.kind, "op": n.op}) for n in g.nodes)
    d.add_edges_from((u, v, attrs) for (u, v), attrs in edges.items())
    return d


def cycle(g: Graph) -> list[str] | None:
    """The nodes of one dependency cycle (in order), or None when ``g`` is a DAG."""
    d = dag(g)
    if nx.is_directed_acyclic_graph(d):  # linear; find_cycle is ~20x slower on a 20k-node DAG
        return None
    return [u for u, _ in nx.find_cycle(d)]


def topological_order(g: Graph) -> list[str]:
    """Node names in an order where every producer precedes its consumers (ValueError naming a cycle)."""
    c = cycle(g)
    if c is not None:
        raise ValueError(f"the nodes form a cycle: {' -> '.join(c + c[:1])}")
    return list(nx.topological_sort(dag(g)))


def components(g: Graph) -> list[list[str]]:
    """Weakly connected components (independent sub-workloads), each in file order, largest first."""
    order = {n.name: i for i, n in enumerate(g.nodes)}
    comps = [sorted(c, key=order.__getitem__) for c in nx.weakly_connected_components(dag(g))]
    return sorted(comps, key=lambda c: (-len(c), order[c[0]]))


def critical_path(g: Graph, weight: Callable[[str], float]) -> tuple[float, list[str]]:
    """The heaviest chain of dependent nodes under ``weight(node name)``: (its total, its nodes in order).

    With per-node SOL times as weights this is the time no amount of parallel hardware removes.
    Linear in nodes and edges (dynamic programming over one topological order).
    """
    d = dag(g)
    best: dict[str, float] = {}
    back: dict[str, str | None] = {}
    pred = d.pred
    for v in topological_order(g):
        w = weight(v)
        prev = max(pred[v], key=best.__getitem__, default=None)
        best[v] = w + (best[prev] if prev is not None else 0.0)
        back[v] = prev
    if not best:
        return 0.0, []
    end = max(best, key=best.__getitem__)
    path = [end]
    while back[path[-1]] is not None:
        path.append(back[path[-1]])  # type: ignore[arg-type]
    return best[end], path[::-1]


def dominators(g: Graph) -> dict[str, str]:
    """Immediate dominator of every node (``SOURCE`` for nodes reached from several roots or from none):
    every path from the graph's inputs to ``v`` passes through ``idom[v]``."""
    d = dag(g).copy()
    d.add_node(SOURCE)
    d.add_edges_from((SOURCE, v) for v, k in list(d.in_degree()) if k == 0 and v != SOURCE)
    idom = nx.immediate_dominators(d, SOURCE)
    return {v: u for v, u in idom.items() if v != SOURCE}


def is_convex(g: Graph, nodes: Iterable[str]) -> bool:
    """No path leaves the set and comes back: the set can run as one kernel without waiting on an
    outside node that itself waits on the set (nodes need not be consecutive in the file)."""
    d = dag(g)
    inside = set(nodes)
    frontier = {s for v in inside for s in d.successors(v) if s not in inside}
    seen = set(frontier)
    while frontier:
        nxt = set()
        for v in frontier:
            for s in d.successors(v):
                if s in inside:
                    return False
                if s not in seen:
                    seen.add(s)
                    nxt.add(s)
        frontier = nxt
    return True


__all__ = ["SOURCE", "components", "critical_path", "cycle", "dag", "dominators", "is_convex", "read_tensors",
           "topological_order"]
