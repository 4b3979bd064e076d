"""Structural keys: nodes and segments that pose the same tiling problem get the same key.

Transformer layers repeat, so the fusion partition meets the same segment problems again and
again under different tensor names. The keys here let :mod:`.partition` solve each distinct
problem once.

- :func:`node_key`: everything the per-node analysis reads from one node: its form
  (:mod:`solar_io.node_form`: kind, view flag, iteration space (rank names kept, so a cached
  tiling's rank names are right), map/reduce, padding, every other field of what it computes, and
  per access the index expressions, with tensor names replaced by their first position in the
  node; not its op or source attributes), each named
  tensor's ranks, dtype, density and whether it is stored; plus the node's bytes read and written
  (metrics). :func:`structure` adds whether each access is faithful to its
  view root (:meth:`solar_io.views.ViewChains.faithful`) and the node's bytes
  by root.
- :func:`contexts`: per node k, an id of ``(node key, its roots)`` where each root (the tensor a
  chain of views starts from, :class:`solar_io.backends.traffic.GraphTraffic`) it touches is described by: a
  reference ``(d, p)`` to its latest earlier occurrence within the window (``p``-th root of node
  ``k - d``) or None, the root's ranks and largest bytes, the offset of its producer and the
  offsets of its consumers when within the window (``None`` for farther ones; a farther node is
  outside every segment of at most ``window`` nodes that holds k), whether it is a graph output
  (and the bytes outputs viewing it expose), and the bytes the node reads and writes of it; and
  which root each access reaches.

Two segments ``i..j`` and ``i'..j'`` of at most ``window`` nodes with equal context sequences pose
the same problem: inside the segment, the references identify which accesses share a root, the
offsets say which roots are produced inside and which are read outside or are outputs, and the
node keys give the einsums, so external bytes, resident bytes, floors, chain options and avoided
bytes agree (tested against fresh solves in ``tests/backends/tiling/test_tiling_scale.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from solar_io.graph import Graph
from solar_io.metrics import NodeMetrics

from ..traffic.graph import GraphTraffic


def node_key(g: Graph, k: int, m: NodeMetrics) -> tuple:
    """The structural key of node ``k`` (see the module docstring); tensor names are not in it: its form
    (``Graph.node_forms``: what it computes, with tensor names as positions), then per tensor it names the
    ranks, dtype, density and storage, and the bytes it reads and writes of each."""
    form, names = g.node_forms[k]
    tmap = g.tensor_map
    local = {t: p for p, t in enumerate(names)}
    return (form, tuple(None if (t := tmap.get(name)) is None else (t.ranks, t.dtype, t.density, t.stored)
                        for name in names),
            tuple((local[t], b) for t, b in m.bytes_read.items()),
            tuple((local[t], b) for t, b in m.bytes_written.items()))


@dataclass(frozen=True, slots=True)
class Structure:
    """Per node: the id of its node key, the id of its context, and the roots it touches (in the
    order its context describes them)."""

    node: tuple[int, ...]
    context: tuple[int, ...]
    roots: tuple[tuple[str, ...], ...]
    window: int


def structure(g: Graph, metrics: tuple[NodeMetrics, ...], v: GraphTraffic, window: int) -> Structure:
    """Node and context ids of every node of ``g`` for segments of at most ``window`` nodes."""
    node_ids: dict[tuple, int] = {}
    nodes: list[int] = []
    for k, (node, m) in enumerate(zip(g.nodes, metrics, strict=True)):
        accesses = (*node.inputs, *node.outputs)
        faithful = tuple(v.chains.faithful(a.tensor) for a in accesses) if v.chains is not None else ()
        key = (node_key(g, k, m), faithful, tuple(sorted(v.reads[k].values())), tuple(sorted(v.writes[k].values())))
        nodes.append(node_ids.setdefault(key, len(node_ids)))
    return with_contexts(g, v, tuple(nodes), window, (range(len(g.nodes)),))


def with_contexts(g: Graph, v: GraphTraffic, nodes: tuple[int, ...], window: int,
                  runs: tuple[range, ...], roots: tuple[tuple[str, ...], ...] | None = None) -> Structure:
    """The :class:`Structure` of ``g`` with node ids ``nodes`` and the contexts of the nodes in ``runs``
    (ranges of positions; a reference never reaches back before its run's start, so only segments
    inside one run may share a context). A node outside every run gets a context of its own. ``roots``:
    each node's roots in access order, when known (another structure's, permuted)."""
    ctx_ids: dict[tuple, int] = {}
    ctxs = [-1 - k for k in range(len(g.nodes))]
    roots_of = list(roots) if roots is not None else [  # then roots the traffic adds (a scatter's init read)
        tuple(dict.fromkeys([*(v.root[a.tensor] for a in (*n.inputs, *n.outputs)), *v.reads[k], *v.writes[k]]))
        for k, n in enumerate(g.nodes)]
    tmap, consumers, producer = g.tensor_map, v.consumers, v.producer

    def near(d: int) -> int | None:
        return d if -window < d < window else None

    def offsets(cs: tuple[int, ...], k: int) -> tuple[int | None, ...]:
        """The distinct offsets of consumers ``cs`` (ascending node positions) from ``k`` within the
        window, ascending, then None once when some consumer is farther."""
        out: list[int | None] = []
        far = False
        for c in cs:
            d = c - k
            if -window < d < window:
                if not out or out[-1] != d:
                    out.append(d)
            else:
                far = True
        if far:
            out.append(None)
        return tuple(out)

    for run in runs:
        last: dict[str, tuple[int, int]] = {}
        for k in run:
            node, nk, roots = g.nodes[k], nodes[k], roots_of[k]
            reads, writes = v.reads[k], v.writes[k]
            desc = []
            for p, r in enumerate(roots):
                prev = last.get(r)
                ref = (k - prev[0], prev[1]) if prev is not None and k - prev[0] < window else None
                last[r] = (k, p)
                prod = producer.get(r)
                desc.append((ref, tmap[r].ranks, v.size.get(r, 0.0), None if prod is None else ("p", near(prod - k)),
                             offsets(consumers.get(r, ()), k), r in v.output, v.exposed.get(r), reads.get(r),
                             writes.get(r)))
            where = tuple(roots.index(v.root[a.tensor]) for a in (*node.inputs, *node.outputs))
            ctxs[k] = ctx_ids.setdefault((nk, tuple(desc), where), len(ctx_ids))
    return Structure(nodes, tuple(ctxs), tuple(roots_of), window)


__all__ = ["Structure", "node_key", "structure", "with_contexts"]
