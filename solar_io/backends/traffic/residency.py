"""DRAM bytes of each node when on-chip memory keeps its contents between kernels.

The unfused bound runs every node as its own kernel. A real chip's last-level caches (a GPU's
L2, a CPU's L2 + L3) are not emptied between kernels, so a tensor one kernel writes or reads can
still be on chip when the next kernel reads it: charging every intermediate a DRAM round trip
gives a time that a real kernel-by-kernel run can beat. A lower bound must instead charge only
the traffic no cache of ``capacity`` bytes can avoid. For node v, in graph order:

- *first-touch reads*: bytes of inputs, weights and constants beyond what earlier nodes touched
  of them. The SOL assumes operands start in DRAM (measurements flush the caches), so these bytes
  are compulsory; over the graph they add up to at least the fused bound's source bytes.
- *re-reads*: tensors an earlier node wrote or read. At most ``capacity`` bytes of them can be
  on chip when v starts, so at least ``max(0, re-read bytes - capacity)`` come from DRAM.
- *intermediate writes*: at most ``capacity`` bytes of what v writes can stay on chip when it
  ends, so at least ``max(0, written bytes - capacity)`` go to DRAM.
- *graph outputs* are delivered to DRAM in full (the fused bound counts them the same way).

With ``capacity = 0`` this is the classical per-kernel byte count (every tensor a node touches
crosses DRAM once); with an unlimited capacity only first touches and outputs remain. The
capacity is every on-chip level of the spec summed: more capacity only lowers the bound, so
the sum keeps it a lower bound whatever the levels' inclusion policy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from solar_io.graph import Graph
from solar_io.metrics import GraphMetrics, tensor_bytes
from solar_io.node_lists import in_place_bases, made_outputs
from solar_io.views import ViewChains


@dataclass(frozen=True)
class NodeTraffic:
    """What one node reads and writes, by alias root (a read through a view counts the bytes of
    the root it certainly reads, :meth:`ViewChains.root_bytes`); view nodes move nothing."""

    reads: dict[str, float]
    writes: dict[str, float]

    @property
    def bytes(self) -> float:
        return sum(self.reads.values()) + sum(self.writes.values())


def node_traffic(g: Graph, gm: GraphMetrics, chains: ViewChains | None = None) -> list[NodeTraffic]:
    """Per node of ``g``: its reads and writes by alias root (a broadcast view read in full is
    the root's bytes, not the view's: counting the view would charge bytes no kernel moves). A scatter
    writes only what it selects, the rest of its result *is* its ``init`` (:mod:`solar_io.metrics`), so a
    later read of the result beyond what the chain of scatters wrote is a read of the init's root (as the
    fused boundary counts it, :func:`solar_io.views.boundary_reads`): every fidelity sees that read."""
    chains = ViewChains(g) if chains is None else chains
    root = chains.root
    alias: dict[str, tuple[str, float]] = {}  # scatter result root -> (its chain's init root, bytes the chain wrote)
    bases = in_place_bases(g)  # scatters' inits and masked writes' x (x[mask] = v in place)
    made = made_outputs(g)  # masked writes leaving a graph output in memory the graph made
    producer = {a.tensor: i for i, n in enumerate(g.nodes) for a in n.outputs} if made else {}
    tmap = g.tensor_map
    out = []
    for n, m in zip(g.nodes, gm.nodes, strict=True):
        rd: dict[str, float] = {}
        wr: dict[str, float] = {}
        if not (n.kind == "data_movement" and n.view):
            for t, b in m.bytes_read.items():
                r = root[t]
                b = b if r == t else chains.root_bytes(t, b)
                if r in alias and t != n.init:
                    # A read of a scatter's result beyond what its chain wrote reads the init's memory.
                    base, written = alias[r]
                    if tmap[base].stored:  # an immediate init (zeros) or a generated one is made, not read
                        rd[base] = max(rd.get(base, 0.0), b - written)
                    b = min(b, written)
                rd[r] = max(rd.get(r, 0.0), b)
            for t, b in m.bytes_written.items():
                r = root[t]
                wr[r] = max(wr.get(r, 0.0), b if r == t else chains.root_bytes(t, b))
            if n.name in bases:
                base, done = alias.get(root[bases[n.name]], (root[bases[n.name]], 0.0))
                alias[root[n.outputs[0].tensor]] = (base, done + sum(wr.values()))
            if n.name in made:  # that memory is the output's: its write moves here, delivered
                mem = made[n.name]
                if producer.get(mem, len(out)) < len(out):
                    out[producer[mem]].writes.pop(root[mem], None)
                o = root[n.outputs[0].tensor]
                wr[o] = max(wr.get(o, 0.0), tensor_bytes(g, g.tensor_map[o]))
        out.append(NodeTraffic(rd, wr))
    return out


def on_chip_capacity(spec: object, capacity: float | None = None) -> tuple[float, str]:
    """Bytes of on-chip memory S and where the figure comes from: ``capacity`` if given, else the
    sum of every on-chip level's total capacity (the levels after DRAM; data may live in any of
    them, and more S only lowers a bound), ``inf`` when the spec lists none. Register files are not
    in the specs and are not counted."""
    if capacity is not None:
        if not (capacity > 0):
            raise ValueError(f"--capacity: must be positive, got {capacity!r}")
        return float(capacity), "--capacity"
    levels = [m for m in spec.memory[1:] if m.total_capacity]  # type: ignore[attr-defined]
    if not levels:
        return math.inf, "unlimited (the spec lists no on-chip level)"
    return float(sum(m.total_capacity for m in levels)), "+".join(m.level for m in levels) + " (spec)"


def dram_bytes(g: Graph, traffic: Sequence[NodeTraffic], capacity: float,
               chains: ViewChains | None = None) -> list[float]:
    """Per node of ``g`` (in order, with its :func:`node_traffic`): the DRAM bytes it must move as its
    own kernel on a chip with ``capacity`` bytes on chip (see the module docstring). A computed
    tensor that graph outputs view is delivered in the part they expose."""
    return at_capacity(dram_parts(g, traffic, chains), capacity)


def dram_parts(g: Graph, traffic: Sequence[NodeTraffic],
               chains: ViewChains | None = None) -> list[tuple[float, float, float, float]]:
    """Per node: (first-touch bytes, re-read bytes, intermediate bytes written, bytes delivered), the parts
    of :func:`dram_bytes` that do not depend on the capacity (kept per graph, one pass for every chip)."""
    chains = ViewChains(g) if chains is None else chains
    role = {t.name: t.role for t in g.tensors}
    exposed = chains.exposed()
    seen: dict[str, float] = {}  # bytes of each root some earlier node already touched
    out = []
    for tr in traffic:
        first = reread = written = delivered = 0.0
        for t, b in tr.reads.items():
            known = min(b, seen.get(t, 0.0))
            reread += known
            first += b - known  # a read beyond what was touched before is a first touch
        for t, b in tr.writes.items():
            d = b if role.get(t) == "output" else min(b, exposed.get(t, 0.0))
            delivered += d
            written += b - d
        out.append((first, reread, written, delivered))
        for t, b in (*tr.reads.items(), *tr.writes.items()):
            seen[t] = max(seen.get(t, 0.0), b)
    return out


def at_capacity(parts: Sequence[tuple[float, float, float, float]], capacity: float) -> list[float]:
    """:func:`dram_bytes` from its :func:`dram_parts` at ``capacity`` bytes on chip.

    >>> at_capacity([(10.0, 30.0, 5.0, 2.0)], 20.0)  # 10 first + (30 - 20) re-read + 0 written + 2 out
    [22.0]
    """
    return [first + max(0.0, reread - capacity) + max(0.0, written - capacity) + delivered
            for first, reread, written, delivered in parts]
