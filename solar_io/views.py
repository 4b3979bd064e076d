"""Views and the graph boundary: what a fully fused kernel must move, views included.

A view node (``data_movement`` with ``view: true``) aliases memory and moves no bytes. Two things
follow at the graph boundary, both counted by :func:`boundary_bytes`, the one derivation of the
boundary bytes that ``solar-io info``, ``bound``, reports, sweeps and diffs all read (through
``GraphMetrics.boundary_bytes``):

- An output that is a view of an intermediate is written by nobody, yet the program returns it,
  so the part of the viewed tensor that the output exposes must be written to DRAM by the node
  that computes it.
- An input, weight or constant read only through a view (a reshape of the input, a permute of a
  weight) is still read from DRAM.

How much, without ever overcounting: follow the chain of single-input views from the tensor back
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
are counted as their node writes them) are charged for outputs; a view of an input, weight or
constant needs no write. A read of E distinct elements of a view reads at least as many elements
of the root as the same chain walk gives, so the root's boundary read is at least that, and at
most all of it (a view may declare another density than its root); several reads of one root are
charged the largest (a lower bound on their union).

(The backends read it through their traffic model, :mod:`solar_io.backends.traffic`.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from math import prod

from .footprint import access_elements
from .graph import Graph, Node
from .metrics import BOUNDARY_ROLES, NodeMetrics, in_place_outputs, node_metrics, tensor_bytes
from .node_lists import in_place_bases, made_outputs
from .prefill import prefilled_writes


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
        self._exposed: dict[str, float] | None = None

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
        """Root -> the bytes of it that graph outputs certainly expose: through views of it, or as an
        earlier step of a chain of scatters updating an input in place (:func:`in_place_exposed`); only
        roots computed by a non-view node and not themselves graph outputs appear."""
        if self._exposed is None:
            out = self._view_exposed()
            for t, b in in_place_exposed(self.g).items():
                out[t] = max(out.get(t, 0.0), b)
            self._exposed = out
        return dict(self._exposed)

    def _view_exposed(self) -> dict[str, float]:
        tmap, prefilled = self.g.tensor_map, prefilled_writes(self.g)
        out: dict[str, float] = {}
        for t in self.g.tensors:
            r = self.root[t.name]
            if t.role != "output" or r == t.name or r not in self.computed or tmap[r].role == "output":
                continue
            b = self.root_bytes(t.name, tensor_bytes(self.g, t, prefilled.get(t.name)))
            if b > 0:
                out[r] = max(out.get(r, 0.0), b)
        return out


def view_roots(g: Graph) -> dict[str, str]:
    """Tensor -> its alias root: the tensor a chain of single-input view nodes starts from."""
    return ViewChains(g).root


def exposed_bytes(g: Graph) -> dict[str, float]:
    """:meth:`ViewChains.exposed` of ``g``."""
    return ViewChains(g).exposed()


def boundary_bytes(g: Graph, nodes: Sequence[NodeMetrics], chains: ViewChains | None = None) -> float:
    """The bytes a fully fused kernel of ``g`` must move (``nodes``: its per-node metrics): each
    output once as its node writes it, the part of a computed tensor that outputs viewing it expose,
    and each input, weight and stored constant once as far as the graph reads it, directly or
    through views (the largest single read of its root, a lower bound on the union of its reads)."""
    tmap = g.tensor_map
    has_views = any(n.kind == "data_movement" and n.view for n in g.nodes)
    if has_views and chains is None:
        chains = ViewChains(g)
    source = boundary_reads(g, nodes, chains)
    # Outputs as their node writes them: an output that is a view moves no bytes itself.
    written = math.fsum(b for m in nodes for t, b in m.bytes_written.items() if tmap[t].role == "output")
    exposed = math.fsum((chains.exposed() if chains is not None else in_place_exposed(g)).values())
    return math.fsum(source.values()) + written + exposed + _made_in_place(g, nodes)


def _made_in_place(g: Graph, nodes: Sequence[NodeMetrics]) -> float:
    """Bytes of outputs that masked writes leave in memory the graph makes (:func:`made_outputs`): each
    masked write is charged only what it reads, so the output's bytes beyond its own node's write."""
    made = made_outputs(g)
    if not made:
        return 0.0
    tmap, extra = g.tensor_map, []
    for n, m in zip(g.nodes, nodes, strict=True):
        if n.name in made:
            out = n.outputs[0].tensor
            extra.append(max(0.0, tensor_bytes(g, tmap[out]) - m.bytes_written.get(out, 0.0)))
    return math.fsum(extra)


def in_place_exposed(g: Graph) -> dict[str, float]:
    """Earlier steps of an in-place chain -> the bytes of them the output certainly exposes.

    An output updated in place by a chain of scatters (``x[p] = a; x[q] = b; return x``) is charged its
    last scatter's elements as its node writes them; every scatter of the chain changed the input's
    memory, so at least the largest of their writes (a lower bound on their union, the positions may
    overlap) reaches DRAM. The difference is exposed on the chain step that writes the most, as an
    output view exposes part of the tensor it views: every fidelity then delivers it to DRAM (the fused
    boundary, the unfused kernels' residency credit and the cache-aware segments alike), so no
    kernel-by-kernel count can credit the first scatter's rows away as an intermediate kept on chip.

    >>> from solar_io.affine import parse_access
    >>> from solar_io.graph import Graph, Node, Tensor
    >>> def put(name, src, idx, r, init, out):
    ...     return Node(name, "einsum", "aten.index_put", (parse_access(f"{init}[@{idx}, D]"),
    ...                 parse_access(f"{src}[{r}, D]"), parse_access(f"{idx}[{r}]")),
    ...                 (parse_access(f"{out}[@{idx}, D]"),),
    ...                 space=(r, "D"), map="identity", reduce="none", init=init)
    >>> g = Graph((("T", 8), ("S", 2), ("U", 1), ("D", 4)), (Tensor("x", ("T", "D"), "fp32", "input"),
    ...           Tensor("a", ("S", "D"), "fp32", "input"), Tensor("p", ("S",), "int64", "input"),
    ...           Tensor("b", ("U", "D"), "fp32", "input"), Tensor("q", ("U",), "int64", "input"),
    ...           Tensor("x1", ("T", "D"), "fp32", "intermediate"),
    ...           Tensor("y", ("T", "D"), "fp32", "output", updates="x")),
    ...           (put("p1", "a", "p", "S", "x", "x1"), put("p2", "b", "q", "U", "x1", "y")))
    >>> in_place_exposed(g)  # 2 rows of 4 fp32 (32 B), then 1 row (16 B, y's own write): 16 B more
    {'x1': 16.0}
    """
    in_place = in_place_outputs(g)
    if not in_place:
        return {}
    writer = {a.tensor: n for n in g.nodes for a in n.outputs}
    out: dict[str, float] = {}
    for name in in_place:
        steps: list[tuple[str, float]] = []
        cur = name
        while cur in writer and writer[cur].init is not None and len(steps) <= len(g.nodes):
            n = writer[cur]
            steps.append((cur, node_metrics(g, n, in_place=in_place).bytes_written.get(cur, 0.0)))
            cur = n.init  # type: ignore[assignment]
        last = steps[0][1]
        tensor, most = max(steps[1:], key=lambda s: s[1], default=(name, last))
        if most > last:
            out[tensor] = max(out.get(tensor, 0.0), most - last)
    return out


def boundary_reads(g: Graph, nodes: Sequence[NodeMetrics], chains: ViewChains | None = None) -> dict[str, float]:
    """Input, weight and stored-constant root -> the bytes a fully fused kernel reads of it (the read
    part of :func:`boundary_bytes`: the largest single read of the root, directly or through views)."""
    tmap = g.tensor_map
    if chains is None and any(n.kind == "data_movement" and n.view for n in g.nodes):
        chains = ViewChains(g)
    source: dict[str, float] = {}
    for m in nodes:
        for t, b in m.bytes_read.items():
            r = chains.root[t] if chains is not None else t
            if tmap[r].role not in BOUNDARY_ROLES or tmap[r].role == "output":
                continue
            if r != t:
                b = chains.root_bytes(t, b)  # type: ignore[union-attr]
            source[r] = max(source.get(r, 0.0), b)
    _scatter_reads(g, nodes, chains, source)
    return source


def _scatter_reads(g: Graph, nodes: Sequence[NodeMetrics], chains: ViewChains | None,
                   source: dict[str, float]) -> None:
    """Reads of a scatter's output are reads of its ``init`` where the scatter did not write.

    A scatter writes only the elements it selects; the rest of its output *is* the ``init``
    tensor, in place (a static KV cache written by ``index_copy_`` and then attended over). A
    fused kernel reading that output later reads ``init``'s memory except the written part, so
    ``init``'s root (an input) is charged ``max(0, largest later read - written)``, never less
    than its direct reads (already in ``source``). Scatters of scatters pass it on, and so do masked
    writes (``x[mask] = v`` in place: :func:`solar_io.metrics.in_place_bases`)."""
    tmap = g.tensor_map
    alias: dict[str, tuple[str, float]] = {}  # scatter output -> (init root, bytes the scatters wrote)
    bases = in_place_bases(g)
    for n, m in zip(g.nodes, nodes, strict=True):
        if n.name not in bases:
            continue
        r = chains.root[bases[n.name]] if chains is not None else bases[n.name]
        base, done = alias.get(r, (r, 0.0))
        alias[n.outputs[0].tensor] = (base, done + sum(m.bytes_written.values()))
    if not alias:
        return
    later: dict[str, float] = {}
    for m in nodes:
        for t, b in m.bytes_read.items():
            r = chains.root[t] if chains is not None else t
            if r in alias:
                later[r] = max(later.get(r, 0.0), b if r == t else chains.root_bytes(t, b))  # type: ignore[union-attr]
    for out, b in later.items():
        root, written = alias[out]
        if tmap[root].role in BOUNDARY_ROLES and tmap[root].role != "output":  # a fill reads nothing
            source[root] = max(source.get(root, 0.0), min(b - written, tensor_bytes(g, tmap[root])))


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


__all__ = ["ViewChains", "boundary_bytes", "exposed_bytes", "in_place_exposed", "view_roots"]
