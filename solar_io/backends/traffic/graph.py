"""The traffic model of one graph, built once: what every fidelity reads about bytes.

:class:`GraphTraffic` holds the chip-independent facts the unfused, fused and cache-aware bounds
share: the graph's metrics, its view chains (alias roots, :mod:`solar_io.views`), each node's
reads and writes by root (:mod:`.residency`), producers and consumers of every root, the bytes
output views expose, the boundary bytes and the kernel spans (:mod:`.kernels`). Nothing here
depends on a chip: :func:`traffic_of` builds it once per graph object and every later bound of
the same graph, on any chip, reuses it.

>>> from solar_io.affine import parse_access
>>> from solar_io.graph import Graph, Node, Tensor
>>> g = Graph((("M", 4), ("N", 4)), (Tensor("x", ("M", "N"), "fp32", "input"),
...           Tensor("y", ("M", "N"), "fp32", "output")),
...           (Node("relu", "einsum", "aten.relu", (parse_access("x[M, N]"),), (parse_access("y[M, N]"),),
...                 space=("M", "N"), map="relu", reduce="none"),))
>>> gt = traffic_of(g)
>>> gt.reads[0], gt.writes[0], gt.boundary_bytes
({'x': 64.0}, {'y': 64.0}, 128.0)
>>> traffic_of(g) is gt
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from solar_io.graph import Graph
from solar_io.metrics import GraphMetrics, graph_metrics
from solar_io.views import ViewChains

from .kernels import kernels
from .residency import NodeTraffic, node_traffic


@dataclass(frozen=True, eq=False)
class GraphTraffic:
    """Alias roots, producers, consumers and per-node traffic of one graph (module docstring).

    Tensors are named by their *root* throughout: a view's bytes are the memory behind it."""

    graph: Graph
    metrics: GraphMetrics
    chains: ViewChains
    nodes: tuple[NodeTraffic, ...]            # per node: reads and writes by root
    root: dict[str, str]                      # tensor -> its alias root
    producer: dict[str, int]                  # root -> index of the non-view node writing it first
    consumers: dict[str, tuple[int, ...]]     # root -> indices of nodes reading it (any alias)
    output: frozenset[str]                    # roots that are graph outputs themselves
    reads: tuple[dict[str, float], ...]       # per node: root -> bytes read
    writes: tuple[dict[str, float], ...]      # per node: root -> bytes written
    size: dict[str, float]                    # root -> largest bytes read or written of it
    exposed: dict[str, float]                 # computed root -> bytes graph outputs viewing it expose
    spans: tuple[tuple[int, int], ...]        # the kernels as inclusive node-index ranges
    first: dict[str, int]                     # root -> index of the first node moving bytes of it
    last_reader: dict[str, int]               # root -> index of the last node reading it
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def boundary_bytes(self) -> float:
        """What a fully fused kernel must move (``GraphMetrics.boundary_bytes``, views included)."""
        return self.metrics.boundary_bytes

    def node_bytes(self, k: int) -> float:
        """DRAM bytes of node k alone, by root (reads through views as the root bytes they certainly
        are): at most its metrics' bytes when it reads no view, a lower bound in every case."""
        return self.nodes[k].bytes

    def written(self, t: str, b: float, i: int, j: int) -> float:
        """DRAM bytes segment ``i..j`` must write of root ``t`` that one of its nodes writes (``b``
        bytes): all of it when it is a graph output or read outside the segment, the part that
        outputs viewing it expose (:meth:`solar_io.views.ViewChains.exposed`), else 0."""
        if t in self.output or any(not (i <= c <= j) for c in self.consumers.get(t, ())):
            return b
        return min(b, self.exposed.get(t, 0.0))

    def memo(self, key: Any, build: Any) -> Any:  # noqa: ANN401
        """``build()`` once per ``key`` for this graph (chip-independent derived tables)."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]


def build_traffic(g: Graph, gm: GraphMetrics | None = None) -> GraphTraffic:
    """The :class:`GraphTraffic` of ``g`` (``gm``: its metrics, computed when not given)."""
    gm = graph_metrics(g) if gm is None else gm
    chains = ViewChains(g)
    root = chains.root
    per_node = tuple(node_traffic(g, gm, chains))
    producer: dict[str, int] = {}
    consumers: dict[str, list[int]] = {}
    size: dict[str, float] = {}
    first: dict[str, int] = {}
    for i, tr in enumerate(per_node):
        for t in tr.reads:
            consumers.setdefault(t, []).append(i)
        for t in tr.writes:
            producer.setdefault(t, i)
        for t, b in (*tr.reads.items(), *tr.writes.items()):
            size[t] = max(size.get(t, 0.0), b)
            if b > 0:  # a zero-byte access (an overwritten init) brings nothing on chip
                first.setdefault(t, i)
    out = frozenset(t.name for t in g.tensors if t.role == "output" and root[t.name] == t.name)
    return GraphTraffic(g, gm, chains, per_node, root, producer, {k: tuple(v) for k, v in consumers.items()}, out,
                        tuple(tr.reads for tr in per_node), tuple(tr.writes for tr in per_node), size,
                        chains.exposed(), tuple(kernels(g)), first, {t: c[-1] for t, c in consumers.items()})


def reordered(gt: GraphTraffic, order: Sequence[int]) -> GraphTraffic:
    """The traffic model of ``gt``'s graph with its nodes run in ``order`` (node indices, a topological
    order that keeps each kernel whole: :func:`solar_io.backends.tiling.schedule.branch_order`), derived
    from ``gt`` without re-reading the graph; kept on the new graph as :func:`traffic_of` keeps it. Its
    kernels are ``gt``'s, moved (``spans``; the new graph's nodes keep their declarations)."""
    g, gm = gt.graph, gt.metrics
    g2 = replace(g, nodes=tuple(g.nodes[k] for k in order), repeats=())  # repeat blocks name file positions
    gm2 = replace(gm, nodes=tuple(gm.nodes[k] for k in order))
    pos = [0] * len(order)
    for p, k in enumerate(order):
        pos[k] = p
    spans = tuple(sorted((pos[i], pos[i] + j - i) for i, j in gt.spans))
    if any(pos[j] != pos[i] + j - i for i, j in gt.spans):
        raise ValueError("reordered: the order splits a kernel")
    per_node = tuple(gt.nodes[k] for k in order)
    consumers = {t: tuple(sorted(pos[c] for c in cs)) for t, cs in gt.consumers.items()}
    producer = {t: pos[k] for t, k in gt.producer.items()}
    first: dict[str, int] = {}
    for p, tr in enumerate(per_node):
        for t, b in (*tr.reads.items(), *tr.writes.items()):
            if b > 0:
                first.setdefault(t, p)
    got = GraphTraffic(g2, gm2, gt.chains, per_node, gt.root, producer, consumers, gt.output,
                       tuple(tr.reads for tr in per_node), tuple(tr.writes for tr in per_node), gt.size, gt.exposed,
                       spans, first, {t: c[-1] for t, c in consumers.items()})
    vars(g2)[_SLOT] = got
    return got


_SLOT = "_solar_io_traffic"  # the instance attribute a graph's traffic is kept in, as cached properties are


def traffic_of(g: Graph, gm: GraphMetrics | None = None) -> GraphTraffic:
    """The :class:`GraphTraffic` of ``g``, built on the first call for this graph object and kept on
    it (graphs are immutable; it goes when the graph goes). ``gm`` is used only when it is built."""
    got = vars(g).get(_SLOT)
    if got is None:
        got = vars(g)[_SLOT] = build_traffic(g, gm)
    return got


__all__ = ["GraphTraffic", "build_traffic", "reordered", "traffic_of"]
