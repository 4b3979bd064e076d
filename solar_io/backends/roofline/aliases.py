"""Graph outputs that are views of computed tensors: the bytes that must still reach DRAM.

A view node (``data_movement`` with ``view: true``) aliases memory and moves no bytes, so an output
that is a view of an intermediate is counted as written by nobody (``GraphMetrics`` charges outputs
as their node writes them). Yet the program returns it, so the part of the viewed tensor that the
output exposes must be written to DRAM by the node that computes it.

How much, without ever overcounting: follow the chain of single-input views from the output back
to its *root* (the tensor the chain starts from), carrying a lower bound E on the number of
distinct elements exposed, ``numel(output)`` at the start. A view link whose output has ``p``
elements, each one element of its input (or none, outside it), and whose read touches ``c``
distinct input elements (:func:`solar_io.footprint.access_elements`, exact or a lower bound) maps
any E distinct output elements to at least ``E - (p - c)`` distinct input elements: each input
element with a fiber of k outputs loses at most k - 1, and these losses sum to ``p - c``. An
injective link (reshape, permute, slice, select) loses nothing; a broadcast of h to R copies,
exposing all of h, keeps exactly ``numel(h)``; a link whose iteration space is not its output's
ranks is charged nothing. Several views of one root are charged their largest exposure (a lower
bound on the union); the bytes are the root's (width and density).

Only roots that a node of the graph computes and that are not graph outputs themselves (those
are already counted) are charged; a view of an input, weight or constant needs no write.

Reads, likewise: ``GraphMetrics`` counts the graph inputs, weights and constants a fused kernel
reads, but not one read only through a view (the view is an intermediate tensor). A read of E
distinct elements of the view reads at least as many elements of the root as the same chain walk
gives, so the root's boundary read is at least that (:func:`boundary_bytes` adds what exceeds
the largest direct read, which metrics already counts). The bytes are the root's, at most all of
it (a view may declare another density than its root).
"""

from __future__ import annotations

import math
from math import prod

from solar_io.footprint import access_elements
from solar_io.graph import Graph, Node
from solar_io.metrics import BOUNDARY_ROLES, GraphMetrics, tensor_bytes


class ViewChains:
    """The single-input view chains of a graph: alias roots and the chain walk (module docstring)."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.root: dict[str, str] = {t.name: t.name for t in g.tensors}
        self.viewed_by: dict[str, Node] = {}  # view output tensor -> the view node writing it
        self.computed: set[str] = set()       # tensors a non-view node writes
        for n in g.nodes:
            if n.kind == "data_movement" and n.view:
                if len(n.inputs) == 1:
                    for a in n.outputs:
                        self.viewed_by[a.tensor] = n
                        self.root[a.tensor] = self.root[n.inputs[0].tensor]
            else:
                self.computed.update(o.tensor for o in n.outputs)
        self._lost: dict[str, float] = {}
        self._faithful: dict[str, bool] = {}

    def root_elements(self, tensor: str, elements: float) -> float:
        """A lower bound on the distinct elements of ``tensor``'s root that ``elements`` distinct
        elements of ``tensor`` are."""
        root, cur, e = self.root[tensor], tensor, elements
        while cur != root and e > 0:
            n = self.viewed_by[cur]
            if cur not in self._lost:
                self._lost[cur] = _lost(self.g, n, cur)
            e -= self._lost[cur]
            cur = n.inputs[0].tensor
        return max(e, 0.0)

    def root_bytes(self, tensor: str, nbytes: float) -> float:
        """``nbytes`` of ``tensor`` (read or exposed) as a lower bound on bytes of its root."""
        tmap = self.g.tensor_map
        r = self.root[tensor]
        if r == tensor:
            return nbytes
        width = tensor_bytes(self.g, tmap[tensor], 1.0)
        if width <= 0 or nbytes <= 0:
            return 0.0
        return min(tensor_bytes(self.g, tmap[r], self.root_elements(tensor, nbytes / width)),
                   tensor_bytes(self.g, tmap[r]))

    def faithful(self, tensor: str) -> bool:
        """True when ``tensor`` is its root, or a view whose every element is a distinct element of
        the root stored at the same width and density (its bytes are the root's bytes)."""
        r = self.root[tensor]
        if r == tensor:
            return True
        if tensor not in self._faithful:
            tmap, sizes = self.g.tensor_map, self.g.rank_sizes
            numel = float(prod(sizes[x] for x in tmap[tensor].ranks))
            self._faithful[tensor] = tensor_bytes(self.g, tmap[tensor], 1.0) == tensor_bytes(self.g, tmap[r], 1.0) \
                and self.root_elements(tensor, numel) == numel
        return self._faithful[tensor]

    def exposed(self) -> dict[str, float]:
        """Root -> the bytes of it that graph outputs viewing it certainly expose; only roots
        computed by a non-view node and not themselves graph outputs appear."""
        tmap = self.g.tensor_map
        out: dict[str, float] = {}
        for t in self.g.tensors:
            r = self.root[t.name]
            if t.role != "output" or r == t.name or r not in self.computed or tmap[r].role == "output":
                continue
            b = self.root_bytes(t.name, tensor_bytes(self.g, t))
            if b > 0:
                out[r] = max(out.get(r, 0.0), b)
        return out


def view_roots(g: Graph) -> dict[str, str]:
    """Tensor -> its alias root: the tensor a chain of single-input view nodes starts from."""
    return ViewChains(g).root


def exposed_bytes(g: Graph) -> dict[str, float]:
    """:meth:`ViewChains.exposed` of ``g``."""
    return ViewChains(g).exposed()


def boundary_bytes(g: Graph, gm: GraphMetrics, chains: ViewChains | None = None) -> float:
    """The fused kernel's DRAM bytes: ``gm.boundary_bytes`` plus the exposed parts of computed
    tensors that outputs view, plus the part of an input, weight or constant read through a view
    beyond its largest direct read (see the module docstring)."""
    if not any(n.kind == "data_movement" and n.view for n in g.nodes):
        return gm.boundary_bytes
    chains = ViewChains(g) if chains is None else chains
    tmap = g.tensor_map
    extra = math.fsum(chains.exposed().values())
    direct: dict[str, float] = {}
    via: dict[str, float] = {}
    for m in gm.nodes:
        for t, b in m.bytes_read.items():
            r = chains.root[t]
            if tmap[r].role not in BOUNDARY_ROLES or tmap[r].role == "output":
                continue
            if r == t:
                direct[r] = max(direct.get(r, 0.0), b)
            else:
                via[r] = max(via.get(r, 0.0), chains.root_bytes(t, b))
    extra += math.fsum(max(0.0, b - direct.get(r, 0.0)) for r, b in via.items())
    return gm.boundary_bytes + extra


def _lost(g: Graph, n: Node, tensor: str) -> float:
    """``p - c`` of view ``n`` producing ``tensor``: its output elements minus the distinct input
    elements its read touches (at least that many outputs share an input element or read none);
    every element when its iteration space is not the output's ranks."""
    tmap, sizes = g.tensor_map, g.rank_sizes
    a = n.inputs[0]
    p = float(prod(sizes[r] for r in tmap[tensor].ranks))
    if a.index is not None and sorted(n.space or tmap[tensor].ranks) != sorted(tmap[tensor].ranks):
        return p
    count, _ = access_elements(a, tmap[a.tensor].ranks, sizes)  # exact, or a lower bound
    return max(0.0, p - count)


__all__ = ["ViewChains", "boundary_bytes", "exposed_bytes", "view_roots"]
