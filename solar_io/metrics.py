"""Work and traffic derived from a graph: iteration points, MACs, FLOPs by unit, bytes.

Computed from the file on demand, never stored in it.

- Matrix FLOPs: contractions (map ``mul`` with reduce ``add`` over at least two inputs and
  at least one reduced rank), 2 per multiply-accumulate; the work a matrix unit can do.
- Vector FLOPs: every other map application (its registry cost per point) plus one
  combine per reduced element (``points - output points``). A scan along S (format 1.1)
  adds the combines of a sequential inclusive scan, ``n_S - 1`` per row of the output
  along S: with the reduction, ``points - output points / n_S`` in all, which is also the
  fewest any algorithm can do (the last element of a row combines every point of the row,
  one binary combine per point but one). A scatter (an ``@t`` index in the output) combines
  every point into the output (``points``) unless its reduce is ``none``; it is never a
  contraction.
- Transcendental: special-function evaluations (exp, log, tanh, rsqrt, ...).
- Bytes: per tensor, distinct elements touched (``footprint``) times the dtype's storage
  width times its density (a sparse tensor is stored compressed). Constants that are one
  repeated value are immediates: zero bytes. View-only data movement moves no bytes. An
  access through ``@t`` touches at most one element per iteration point, and per gathered
  dimension at most as many as ``t`` holds indexes (taken as distinct; an immediate ``t``, one repeated
  value, names one position): this applies to
  gathers and to scattered outputs alike, which write only the elements they select (the
  rest keep the ``init`` tensor's values in place); the ``init`` tensor is read at those
  elements when the scatter combines into them, and not at all for reduce ``none``. That holds
  where the result may live in ``init``'s memory: an intermediate (the ``init`` is dead or a
  kernel keeps it) and an output that ``updates`` the input its scatters start from (format 1.5:
  ``cache[:, :, pos] = k; return cache``, :func:`in_place_outputs`). A scatter whose result is
  a *new* graph output (``cache.index_put(...)`` returned, no ``updates``, or returned through a
  whole reshape/permute view, :func:`returned_tensors`) writes the whole output and reads ``init`` at
  every element it does not overwrite. Index values the file does not hold are taken as distinct
  positions or rows: :func:`index_assumptions` are the assumptions a frontend writes into the file.
- Opaque nodes have known bytes and *unknown* compute (``compute_known`` is False).
- Uncharged work: the nodes an assumption of the file lists under ``uncharged_work`` (e.g. a
  fused attention backward's recomputation of probabilities that the source framework's own run
  keeps instead) have their bytes counted and zero MACs and FLOPs: the file says which and why.
- Masked writes: the nodes an assumption lists under ``masked_writes`` (``x[mask] = v``, lowered as
  ``where(mask, v, x)``) overwrite, in ``x``'s memory, the elements a mask whose values the file does
  not hold selects: a count from none to all. Each is charged its boolean masks and its one-element
  values only: ``x`` is not read (its elements stay where they are), none of the output is taken as
  written, and no compute (a masked copy does no arithmetic on the elements it skips): the least any
  count of selected elements costs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from math import prod

from ._gc import gc_paused
from .affine import Access, AffineExpr, Indirect
from .dtypes import DTYPES
from .footprint import access_elements
from .fourier import floor_flops
from .graph import Assumption, Graph, Node, Tensor
from .node_lists import MASKED_WRITES, listed_nodes, makes_memory, prefilled_fills, uncharged_nodes
from .ops import MAP_OPS
from .prefill import prefilled_writes

BOUNDARY_ROLES = ("input", "weight", "constant", "output")
#: the assumption kind of scatters whose positions are counted as distinct (:func:`distinct_positions`)
DISTINCT = "scatter_indices"
#: the assumption kind of gathers whose rows are counted as distinct (:func:`distinct_rows`)
DISTINCT_READS = "gather_indices"


@dataclass(frozen=True, slots=True)
class NodeMetrics:
    """Derived counts of one node."""

    name: str
    kind: str
    points: int
    macs: int
    flops_matrix: float
    flops_vector: float
    transcendental: float
    bytes_read: dict[str, float] = field(default_factory=dict)
    bytes_written: dict[str, float] = field(default_factory=dict)
    compute_known: bool = True
    bytes_exact: bool = True

    @property
    def flops(self) -> float:
        """Matrix + vector FLOPs (transcendentals are counted separately)."""
        return self.flops_matrix + self.flops_vector

    @property
    def bytes(self) -> float:
        """All bytes read and written, each tensor once."""
        return sum(self.bytes_read.values()) + sum(self.bytes_written.values())


@dataclass(frozen=True, slots=True)
class GraphMetrics:
    """Per-node metrics and graph totals."""

    nodes: tuple[NodeMetrics, ...]
    macs: int
    flops_matrix: float
    flops_vector: float
    transcendental: float
    bytes: float
    boundary_bytes: float
    opaque: tuple[str, ...]

    @property
    def flops(self) -> float:
        return self.flops_matrix + self.flops_vector


def tensor_bytes(g: Graph, t: Tensor, elements: float | None = None) -> float:
    """Bytes of ``elements`` elements of ``t`` (default all), at its width and density."""
    if not t.stored:
        return 0.0
    n = float(prod(g.shape(t.name))) if elements is None else elements
    return n * DTYPES[t.dtype].bits / 8.0 * (1.0 if t.density is None else t.density)


def in_place_outputs(g: Graph) -> frozenset[str]:
    """Outputs that are the input they ``updates``, written in place: the chain of scatters writing
    the output (each one's ``init`` the previous one's result) starts from that input. An output
    whose writer is not such a chain gains nothing from ``updates``: it is written whole anyway, or
    its unwritten elements are another tensor's, which must be copied into the input's memory.

    >>> from solar_io.affine import parse_access
    >>> from solar_io.graph import Graph, Node, Tensor
    >>> g = Graph((("T", 8), ("S", 2), ("D", 4)), (Tensor("cache", ("T", "D"), "fp32", "input"),
    ...           Tensor("k", ("S", "D"), "fp32", "input"), Tensor("pos", ("S",), "int64", "input"),
    ...           Tensor("new", ("T", "D"), "fp32", "output", updates="cache")),
    ...           (Node("put", "einsum", "aten.index_put", (parse_access("cache[@pos, D]"),
    ...                 parse_access("k[S, D]"), parse_access("pos[S]")), (parse_access("new[@pos, D]"),),
    ...                 space=("S", "D"), map="identity", reduce="none", init="cache"),))
    >>> in_place_outputs(g)
    frozenset({'new'})
    """
    wanted = {t.name: t.updates for t in g.tensors if t.updates is not None and t.role == "output"}
    if not wanted:
        return frozenset()
    writer = {a.tensor: n for n in g.nodes for a in n.outputs}
    out = set()
    for name, source in wanted.items():
        cur, steps = name, 0
        while (n := writer.get(cur)) is not None and n.init is not None and steps <= len(g.nodes):
            cur, steps = n.init, steps + 1
        if cur == source and cur != name:
            out.add(name)
    return frozenset(out)


def returned_tensors(g: Graph) -> frozenset[str]:
    """Graph outputs and the tensors outputs are whole views of (chains of single-input reshapes and
    permutes, every element kept): what the program returns. A scatter whose result is one of them,
    unless the output updates its input in place (:func:`in_place_outputs`), makes a new tensor: written
    whole, ``init`` copied where the scatter does not write. (An output viewing only part of a scatter's
    result, a slice, is charged as the scatter writes: the part outside its writes is not added.)"""
    viewed = {a.tensor: n.inputs[0] for n in g.nodes if n.kind == "data_movement" and n.view
              and len(n.inputs) == 1 for a in n.outputs}
    out = set()
    for t in g.tensors:
        if t.role == "output":
            cur, steps, numel = t.name, 0, prod(g.shape(t.name))
            out.add(cur)
            while cur in viewed and steps <= len(g.nodes) and plain_access(viewed[cur]) and \
                    prod(g.shape(viewed[cur].tensor)) == numel:
                cur, steps = viewed[cur].tensor, steps + 1
                out.add(cur)
    return frozenset(out)


def plain_access(a: Access) -> bool:
    """An access reading each element once by its own rank (a reshape's or permute's input)."""
    return a.index is None or (all(type(e) is AffineExpr and e.const == 0 and len(e.terms) == 1 and e.terms[0][1] == 1
                                   for e in a.index) and len({e.terms[0][0] for e in a.index}) == len(a.index))


def index_assumptions(g: Graph) -> tuple[Assumption, ...]:
    """The assumptions the byte counts make for index values the file does not hold: the scatters'
    (:func:`distinct_positions`) and the gathers' (:func:`distinct_rows`), those that apply."""
    return tuple(a for a in (distinct_positions(g), distinct_rows(g)) if a is not None)


def with_index_assumptions(g: Graph) -> Graph:
    """``g`` with the :func:`index_assumptions` it does not record yet (by kind)."""
    have = {a.kind for a in g.assumptions}
    extra = tuple(a for a in index_assumptions(g) if a.kind not in have)
    return replace(g, assumptions=g.assumptions + extra) if extra else g


def distinct_rows(g: Graph) -> Assumption | None:
    """The assumption the byte counts make for gathers through index values the file does not hold:
    each index reads a distinct row of its table (up to the rows the table has), so the bytes read are
    the indexes times the row size. Repeated indices (the same token twice in an embedding lookup, the
    same code in a dequantisation table) read fewer rows from DRAM, so a frontend writes this into the
    file (``gather_indices``, the nodes and index tensors listed) and ``bound`` prints it, as for
    scatters (:func:`distinct_positions`, whose exceptions apply).

    >>> from solar_io.affine import parse_access
    >>> g = Graph((("V", 8), ("S", 2), ("D", 4)), (Tensor("w", ("V", "D"), "fp32", "weight"),
    ...           Tensor("ids", ("S",), "int64", "input"), Tensor("y", ("S", "D"), "fp32", "output")),
    ...           (Node("embed", "data_movement", "aten.embedding", (parse_access("w[@ids, D]"),
    ...                 parse_access("ids[S]")), (parse_access("y[S, D]"),), space=("S", "D"), movement="copy"),))
    >>> distinct_rows(g).values
    (('nodes', ('embed',)), ('index_tensors', ('ids',)))
    """
    def reads(n: Node) -> list[Access]:  # a scatter's init is read where it writes: its own assumption
        skip = n.kind == "opaque" or (n.kind == "data_movement" and n.view)
        return [] if skip else [a for a in n.inputs if a.tensor != n.init]

    return _held_indices(g, reads, DISTINCT_READS, "gather", "each index of a gather reads a distinct row of its "
                         "table, up to the rows it has (its bytes read are its indexes times the row size); "
                         "repeated indices would read fewer rows from DRAM")


def _held_indices(g: Graph, accesses: Callable[[Node], list[Access]], kind: str, subject: str,
                  detail: str) -> Assumption | None:
    """The assumption ``kind`` naming the nodes whose ``accesses`` index through a stored tensor of more
    than one element (values the file does not hold), and those index tensors; None when there is none."""
    tmap = g.tensor_map
    nodes, tensors = [], []
    for n in g.nodes:
        held = [e.tensor for a in accesses(n) for e in a.index or () if type(e) is Indirect
                and tmap[e.tensor].stored and prod(g.shape(e.tensor)) > 1]
        if held:
            nodes.append(n.name)
            tensors.extend(t for t in held if t not in tensors)
    if not nodes:
        return None
    return Assumption(kind, subject, detail, (("nodes", tuple(nodes)), ("index_tensors", tuple(tensors))))


def distinct_positions(g: Graph) -> Assumption | None:
    """The assumption the byte counts make for scatters through index values the file does not hold (a
    graph input, a computed tensor, a stored constant): each index names a distinct position, so the bytes
    written are the indexes times the row size. Repeated indices write fewer positions, so a frontend
    writes this into the file (``scatter_indices``, the nodes listed) and ``bound`` prints it. Immediate
    indices (one repeated value: one position), one-element index tensors and generated position tables
    (distinct by construction) need no assumption.

    >>> from solar_io.affine import parse_access
    >>> g = Graph((("T", 8), ("S", 2)), (Tensor("x", ("T",), "fp32", "input"), Tensor("k", ("S",), "fp32", "input"),
    ...           Tensor("pos", ("S",), "int64", "input"), Tensor("y", ("T",), "fp32", "output", updates="x")),
    ...           (Node("put", "einsum", "aten.index_put", (parse_access("x[@pos]"), parse_access("k[S]"),
    ...                 parse_access("pos[S]")), (parse_access("y[@pos]"),), space=("S",), map="identity",
    ...                 reduce="none", init="x"),))
    >>> distinct_positions(g).values
    (('nodes', ('put',)), ('index_tensors', ('pos',)))
    """
    def writes(n: Node) -> list[Access]:
        return list(n.outputs[:1]) if n.init is not None and n.kind == "einsum" else []

    return _held_indices(g, writes, DISTINCT, "scatter", "each index of a scatter names a distinct position (its "
                         "bytes written are its indexes times the row size); repeated indices would write fewer")


def node_sizes(g: Graph, node: Node) -> dict[str, int]:
    """The rank sizes ``node``'s work and bytes are counted over: the graph's, with the node's ``live``
    counts (format 1.6: the values of a rank some output uses, :mod:`solar_io.liveness`) in place of the
    sizes of those ranks.

    >>> from solar_io.graph import Graph, Node
    >>> n = Node("mm", "einsum", "aten.mm", (), (), space=("M", "K"), live=(("M", 3),))
    >>> node_sizes(Graph((("M", 8), ("K", 4)), (), ()), n)
    {'M': 3, 'K': 4}
    """
    return {**g.rank_sizes, **dict(node.live)} if node.live else g.rank_sizes


def _indirect_counts(g: Graph, node: Node) -> dict[str, float]:
    """Index tensor -> how many distinct positions it can name: the elements the node reads of it, or one
    for an immediate (a constant of one repeated value: every index is that position)."""
    sizes, tmap = node_sizes(g, node), g.tensor_map
    out = {}
    for a in node.inputs:
        if a.index is not None:
            t = tmap[a.tensor]
            out[a.tensor] = 1.0 if t.value is not None else access_elements(a, t.ranks, sizes, None, g.rank_sizes)[0]
    return out


def _has_indirect(a: Access) -> bool:
    return any(type(e) is Indirect for e in a.index or ())


def scattered_elements(g: Graph, node: Node) -> float:
    """The elements scatter ``node`` (an einsum with ``init``) writes of its output, counted as its bytes are
    (module docstring): the positions its index tensors name, taken as distinct, at most its points."""
    sizes, a = node_sizes(g, node), node.outputs[0]
    if _has_indirect(a):
        return _indirect_writes(g, a, sizes, _indirect_counts(g, node), prod(sizes[r] for r in node.space))
    return access_elements(a, g.tensor_map[a.tensor].ranks, sizes, None, g.rank_sizes)[0]


def _indirect_writes(g: Graph, a: Access, sizes: dict[str, int], indirect: dict[str, float], points: int) -> float:
    """Elements an output access through ``@t`` writes: as a gather's reads, at most one per iteration point."""
    return min(access_elements(a, g.tensor_map[a.tensor].ranks, sizes, indirect, g.rank_sizes)[0], float(points))


def node_metrics(g: Graph, node: Node, uncharged: frozenset[str] | None = None,
                 in_place: frozenset[str] | None = None, returned: frozenset[str] | None = None,
                 masked: frozenset[str] | None = None, prefilled: dict[str, float] | None = None,
                 fills: frozenset[str] | None = None) -> NodeMetrics:
    """The derived counts of ``node`` in ``g`` (``uncharged``: :func:`uncharged_nodes` of ``g``, ``in_place``:
    :func:`in_place_outputs` of ``g``, ``returned``: :func:`returned_tensors` of ``g``, ``masked``: its
    ``masked_writes`` nodes, ``prefilled``: :func:`solar_io.prefill.prefilled_writes` of ``g``, ``fills``: its
    :func:`solar_io.node_lists.prefilled_fills`, when known)."""
    if node.name in (listed_nodes(g, MASKED_WRITES) if masked is None else masked):
        return _masked_write(g, node, prefilled_fills(g) if fills is None else fills)
    if prefilled is None:
        prefilled = prefilled_writes(g)
    sizes, whole = node_sizes(g, node), g.rank_sizes
    tmap = g.tensor_map
    reads: dict[str, float] = {}
    writes: dict[str, float] = {}
    exact = True
    points = prod(sizes[r] for r in node.space) if node.space else (
        prod(g.shape(node.outputs[0].tensor)) if node.outputs else 0)
    if not (node.kind == "data_movement" and node.view):
        gathers = node.kind != "opaque" and any(_has_indirect(a) for a in node.inputs + node.outputs[:1])
        indirect = _indirect_counts(g, node) if gathers else {}
        for a in node.inputs:
            t = tmap[a.tensor]
            if a.tensor == node.init and node.reduce == "none":
                elements, ok = 0.0, True  # overwritten in place: never read
            else:
                elements, ok = access_elements(a, t.ranks, sizes, indirect, whole)
            if gathers and _has_indirect(a):
                elements = min(elements, float(points))
            exact = exact and ok
            # Several accesses of one tensor: the largest is a lower bound on their union.
            reads[a.tensor] = max(reads.get(a.tensor, 0.0), tensor_bytes(g, t, elements))
        for a in node.outputs:
            elements = None
            if gathers and _has_indirect(a):
                elements = _indirect_writes(g, a, sizes, indirect, points)
            elif node.live:
                elements = access_elements(a, tmap[a.tensor].ranks, sizes, None, whole)[0]
            if a.tensor in prefilled:  # handed in holding what the program leaves unwritten (solar_io.prefill)
                elements = prefilled[a.tensor] if elements is None else min(elements, prefilled[a.tensor])
            elif node.init is not None and a.tensor in (returned_tensors(g) if returned is None else returned) and \
                    a.tensor not in (in_place_outputs(g) if in_place is None else in_place):
                selected = elements if elements is not None else \
                    access_elements(a, tmap[a.tensor].ranks, sizes, None, whole)[0]
                _new_output(g, node, selected, reads)  # a new tensor: written whole, the rest copied from init
                elements = None
            writes[a.tensor] = tensor_bytes(g, tmap[a.tensor], elements)
    macs, fm, fv, ft = 0, 0.0, 0.0, 0.0
    if node.kind == "einsum":
        op = MAP_OPS[node.map]  # type: ignore[index]
        index_inputs = {e.tensor for a in node.inputs + node.outputs for e in a.index or () if type(e) is Indirect}
        n_in = sum(1 for a in node.inputs if a.tensor not in index_inputs and a.tensor != node.init)
        out_ranks = {e.terms[0][0] for e in node.outputs[0].index or () if isinstance(e, AffineExpr)}
        out_points = prod(sizes[r] for r in node.space if r in out_ranks)
        reduced = len(out_ranks) < len(node.space)
        applications = max(1, n_in - 1) if op.arity is None else 1
        if node.reduce == "none":
            combines = 0
        elif node.init is not None:
            combines = points  # a scatter: every point combines into the element it selects
        else:
            combines = points - out_points
        scanned = out_points - out_points // sizes[node.scan] if node.scan is not None else 0
        if node.map == "mul" and node.reduce == "add" and n_in >= 2 and reduced and node.init is None:
            macs = points
            fm = 2.0 * points
            fv = float(points * (n_in - 2) + scanned)
        else:
            fv = float(points * op.vector * applications + combines + scanned)
            ft = float(points * op.transcendental)
    elif node.kind == "fft":  # its floor: the zero-frequency sums (solar_io.fourier)
        fv = float(floor_flops(node.fft, g.shape(node.inputs[0].tensor), g.shape(node.outputs[0].tensor)))  # type: ignore[arg-type]
    if node.name in (uncharged_nodes(g) if uncharged is None else uncharged):
        macs, fm, fv, ft = 0, 0.0, 0.0, 0.0
    return NodeMetrics(node.name, node.kind, points, macs, fm, fv, ft, reads, writes,
                       compute_known=node.kind != "opaque", bytes_exact=exact)


def _masked_write(g: Graph, node: Node, fills: frozenset[str]) -> NodeMetrics:
    """A ``masked_writes`` node (module docstring): its boolean masks and one-element values read, nothing else."""
    tmap = g.tensor_map
    reads: dict[str, float] = {}
    for a in node.inputs:
        t = tmap[a.tensor]
        if t.stored and (t.dtype == "bool" or prod(g.shape(t.name)) == 1):
            b = tensor_bytes(g, t, access_elements(a, t.ranks, g.rank_sizes)[0])
            reads[t.name] = max(reads.get(t.name, 0.0), b)
    points = prod(g.rank_sizes[r] for r in node.space) if node.space else 0
    out = tmap[node.outputs[0].tensor]
    # x a fill held as a value (zeros_like): the result is made here, written whole (eager's fill), unless the
    # caller hands that memory in holding the fill already (prefilled, solar_io.prefill)
    made = makes_memory(g, node) and out.name not in fills
    written = tensor_bytes(g, out, prod(g.shape(out.name))) if made else 0.0
    return NodeMetrics(node.name, node.kind, points, 0, 0.0, 0.0, 0.0, reads, {out.name: written})


def _new_output(g: Graph, node: Node, selected: float, reads: dict[str, float]) -> None:
    """A scatter into a new graph output: its ``init`` is read at every element the scatter does not
    overwrite (reduce ``none``), or at every element (a combine also reads the selected ones)."""
    t = g.tensor_map[node.init]  # type: ignore[index]
    numel = float(prod(g.shape(t.name)))
    elements = numel if node.reduce != "none" else max(0.0, numel - selected)
    reads[t.name] = max(reads.get(t.name, 0.0), tensor_bytes(g, t, elements))


def _each_form_once(g: Graph, free: frozenset[str], in_place: frozenset[str], returned: frozenset[str],
                    masked: frozenset[str], prefilled: dict[str, float],
                    fills: frozenset[str]) -> tuple[NodeMetrics, ...]:
    """:func:`node_metrics` of every node, computed once per node form (``Graph.node_forms``) over tensors
    of the same ranks, dtype, density and storage, in the same lists: a repeated layer's nodes get the
    first layer's counts under their own names."""
    tmap, out, seen = g.tensor_map, [], {}
    for n, (form, names) in zip(g.nodes, g.node_forms, strict=True):
        if n.name in masked:  # reads the graph around it (makes_memory)
            out.append(node_metrics(g, n, free, in_place, returned, masked, prefilled, fills))
            continue
        key = (form, n.name in free, tuple(
            None if (t := tmap.get(name)) is None else
            (t.ranks, t.dtype, t.density, t.stored, t.value is None, name in returned, name in in_place,
             prefilled.get(name))
            for name in names))
        hit = seen.get(key)
        if hit is None:
            m = node_metrics(g, n, free, in_place, returned, masked, prefilled)
            local = {t: k for k, t in enumerate(names)}
            seen[key] = (m, tuple((local[t], b) for t, b in m.bytes_read.items()),
                         tuple((local[t], b) for t, b in m.bytes_written.items()))
            out.append(m)
            continue
        m, reads, writes = hit
        out.append(NodeMetrics(n.name, m.kind, m.points, m.macs, m.flops_matrix, m.flops_vector, m.transcendental,
                               {names[k]: b for k, b in reads}, {names[k]: b for k, b in writes}, m.compute_known,
                               m.bytes_exact))
    return tuple(out)


def graph_metrics(g: Graph) -> GraphMetrics:
    """Metrics of every node and the graph totals.

    ``boundary_bytes`` is what a fully fused kernel must still move (:func:`solar_io.views.boundary_bytes`,
    views included): every command that prints or prices the boundary reads it from here.
    """
    from .views import boundary_bytes  # views builds on this module's tensor_bytes

    with gc_paused():
        free, in_place, returned = uncharged_nodes(g), in_place_outputs(g), returned_tensors(g)
        masked = listed_nodes(g, MASKED_WRITES)
        nodes = _each_form_once(g, free, in_place, returned, masked, prefilled_writes(g), prefilled_fills(g))
    return GraphMetrics(
        nodes=nodes,
        macs=sum(m.macs for m in nodes),
        flops_matrix=sum(m.flops_matrix for m in nodes),
        flops_vector=sum(m.flops_vector for m in nodes),
        transcendental=sum(m.transcendental for m in nodes),
        bytes=sum(m.bytes for m in nodes),
        boundary_bytes=boundary_bytes(g, nodes),
        opaque=tuple(m.name for m in nodes if not m.compute_known),
    )
