"""The immutable in-memory model of an einsum-graph file (format v1).

A ``Graph`` is plain frozen data: ranks with sizes, tensors, nodes in topological order,
the producer header and the validation record. Everything a backend needs (iteration
points, MACs, FLOPs, bytes) is derived from it by ``solar_io.metrics``; nothing derived is
stored. Graphs compare by value, so ``load(dump(g)) == g`` is a meaningful test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from .affine import Access
from .fourier import Fourier

FORMAT_NAME = "solar-io.einsum-graph"
FORMAT_VERSION = "1.8"

ROLES = ("input", "weight", "output", "intermediate", "constant")
#: the step of a training graph a node belongs to (node field ``phase``, since 1.3).
PHASES = ("forward", "loss", "backward", "optimizer")
KINDS = ("einsum", "data_movement", "opaque", "fft")
#: Kinds whose nodes read and write whole tensors (accesses without an index).
WHOLE_TENSOR_KINDS = frozenset({"opaque", "fft"})
MOVEMENTS = ("copy", "reshape", "concat")
VALIDATION_STATUS = ("passed", "failed", "skipped")

Scalar = str | int | float | bool


@dataclass(frozen=True, slots=True)
class SourceWorkload:
    """The workload of a benchmark definition a graph was captured for (since 1.1; SOL-ExecBench and
    FlashInfer-Trace ``definition.json`` + ``workload.jsonl``): the definition's name, the workload's
    uuid and line index, every axis size, and the benchmark's correctness tolerance for solutions
    (kept as given; the capture's own check is the validation record's)."""

    definition: str
    uuid: str | None = None
    index: int | None = None
    axes: tuple[tuple[str, int], ...] = ()
    tolerance: tuple[tuple[str, float | bool], ...] = ()


@dataclass(frozen=True, slots=True)
class Producer:
    """Who wrote the file and from what: tool, version, frontend, source name and hash, and (since
    1.1) the benchmark workload it was captured for."""

    tool: str = "solar-io"
    tool_version: str = ""
    frontend: str = "hand-written"
    frontend_version: str | None = None
    source: str | None = None
    source_sha256: str | None = None
    workload: SourceWorkload | None = None


@dataclass(frozen=True, slots=True)
class Tensor:
    """A named array: its ranks (shape), element type, role, and optional density/value.

    ``density`` is the fraction of non-zero elements of a tensor stored compressed (1.0 =
    dense). ``value`` is set only on constants that are one repeated scalar (an immediate,
    materialised by the kernel and never read from memory). ``generated`` (format 1.2) marks a
    constant whose contents are a function of its indices that the source program computes where
    it uses them (a causal mask, an ``arange``, a resampling index table): it is never read from
    memory either, so it moves no bytes; its contents are supplied to the executor like a weight's.
    ``updates`` (format 1.5, outputs only) names the input whose memory the output is: the program
    updates that input in place and returns it (``cache[:, :, pos] = k; return cache``), so the
    elements no node writes stay where they are and move no bytes (:mod:`solar_io.metrics`).
    ``prefilled`` (format 1.8, outputs only) is the value every element of the output's memory already
    holds when the caller hands it in (destination-passing style: SOL-ExecBench's harness zero-fills
    each output before a timed call): elements the program provably leaves at it are not charged as
    written (:mod:`solar_io.prefill`).
    """

    name: str
    ranks: tuple[str, ...]
    dtype: str
    role: str
    density: float | None = None
    value: float | None = None
    generated: bool = False
    updates: str | None = None
    prefilled: float | None = None

    @property
    def stored(self) -> bool:
        """Whether the tensor's contents live in memory (not an immediate, not generated): only stored
        tensors move bytes."""
        return self.value is None and not self.generated


@dataclass(frozen=True, slots=True)
class Node:
    """One operation. Fields that a kind does not use are None or empty.

    - ``einsum``: ``space`` (iteration ranks), ``inputs``/``outputs`` with index
      expressions, ``map`` and ``reduce``, optional ``pad`` (per tensor, per dim rank:
      (low, high) elements of implicit border) and ``fill`` (the border's value).
    - ``data_movement``: ``movement`` is ``copy`` (affine or indirect index copy: permute,
      slice, pad, broadcast, gather), ``reshape`` (row-major) or ``concat`` (along
      ``axis``, a rank of the output); ``view`` marks aliasing views that move no bytes.
    - ``opaque``: whole-tensor ``inputs``/``outputs`` and a ``reason``; compute unknown.
    - ``fft`` (since 1.7): one whole-tensor input and output and the transform in ``fft``
      (:mod:`solar_io.fourier`: its shapes, values and compute floor).

    Any kind (since 1.3): ``kernel`` names the source-op call a node was lowered from; the
    consecutive nodes sharing it run as one kernel of the source program (their inner tensors never
    cross memory in the unfused bound). ``phase`` tells forward, loss, backward and optimizer
    nodes of a training step apart.

    ``live`` (since 1.6, einsum and copy nodes): for ranks of which no output uses every value, how
    many values the node must compute (:mod:`solar_io.liveness`); the bounds count its work and bytes
    over a space of those sizes (:func:`solar_io.metrics.node_sizes`).
    """

    name: str
    kind: str
    op: str
    inputs: tuple[Access, ...]
    outputs: tuple[Access, ...]
    space: tuple[str, ...] = ()
    map: str | None = None
    reduce: str | None = None
    movement: str | None = None
    axis: str | None = None
    view: bool = False
    pad: tuple[tuple[str, tuple[tuple[str, int, int], ...]], ...] = ()
    fill: float | None = None
    reason: str | None = None
    location: str | None = None
    attrs: tuple[tuple[str, Scalar], ...] = ()
    scan: str | None = None
    init: str | None = None
    kernel: str | None = None  # since 1.3: the source op call this node was lowered from, shared by its nodes
    phase: str | None = None  # since 1.3: forward, loss, backward or optimizer (training graphs)
    live: tuple[tuple[str, int], ...] = ()  # since 1.6: (rank, values of it computed) where no output uses the rest
    fft: Fourier | None = None  # since 1.7: the transform of an fft node

    def pad_of(self, tensor: str) -> dict[str, tuple[int, int]]:
        """The implicit border declared for ``tensor``: {dim rank: (low, high)}."""
        for name, dims in self.pad:
            if name == tensor:
                return {r: (lo, hi) for r, lo, hi in dims}
        return {}


@dataclass(frozen=True, slots=True)
class Unchecked:
    """A node whose own result the validation could not compare with the source program (since
    1.1): its op has no kernel on the validation device for these dtypes, say. ``reason`` says why
    and what the check used in its place."""

    node: str
    op: str
    reason: str


@dataclass(frozen=True, slots=True)
class Validation:
    """How the capture was checked against its source program."""

    status: str = "skipped"
    method: str = "none"
    reference: str | None = None
    seed: int | None = None
    rtol: float | None = None
    atol: float | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    reduced_ranks: tuple[tuple[str, int], ...] = ()
    reason: str | None = None
    model: str | None = None  # since 1.1: the model that wrote a translated program (LLM frontend)
    attempts: int | None = None  # since 1.1: generate-run-compare attempts it took
    unchecked: tuple[Unchecked, ...] = ()  # since 1.1: nodes the check could not compare, with why


@dataclass(frozen=True, slots=True)
class Assumption:
    """One assumption the capture made that changes a number (since 1.3), so the file says it.

    ``kind`` names what was assumed (``specialised``: values of a small input tensor fixed to decide
    shapes or branches; ``routing``: the MoE routing model; ``step``: prefill/decode and the KV
    cache; ``training``: loss, optimizer and master dtype); ``subject`` what it is about (an input,
    an op, a layer); ``detail`` one human sentence; ``values`` the figures it fixed
    (e.g. ``tokens_per_expert: [3, 1]``), each a scalar or a list of scalars.

    >>> Assumption("routing", "moe.gate", "uniform top-2 of 8", (("experts", 8), ("k", 2)))
    Assumption(kind='routing', subject='moe.gate', detail='uniform top-2 of 8', values=(('experts', 8), ('k', 2)))
    """

    kind: str
    subject: str
    detail: str = ""
    values: tuple[tuple[str, Scalar | tuple[Scalar, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Repeat:
    """``count`` instances of a block of nodes, or of tensor declarations (since 1.4), written once.

    Instance ``k`` (0-based) is the block with its variable ``var`` set to ``start + k * step``:
    names and tensor references may hold ``{var}``, ``{var+C}`` or ``{var-C}`` (replaced by the
    value plus or minus the integer ``C``), and index expressions may use ``var`` as a term (an
    integer constant in each instance). The expanded items sit in ``Graph.nodes`` (a block of
    ``nodes``) or ``Graph.tensors`` (a block of ``tensors``) from index ``at`` on, one instance
    after another, so every backend reads the same graph as the unrolled one; a file writes the
    block instead of its instances. Exactly one of ``nodes`` and ``tensors`` is non-empty.

    >>> r = Repeat("t", start=1, step=1, count=2, at=0, tensors=(Tensor("h{t}", ("B",), "fp32", "intermediate"),))
    >>> r.values
    (1, 2)
    """

    var: str
    start: int
    step: int
    count: int
    at: int
    nodes: tuple[Node, ...] = ()
    tensors: tuple[Tensor, ...] = ()

    @property
    def values(self) -> tuple[int, ...]:
        """The variable's value in each instance."""
        return tuple(self.start + k * self.step for k in range(self.count))

    @property
    def size(self) -> int:
        """Items (nodes or tensors) per instance."""
        return len(self.nodes) or len(self.tensors)


@dataclass(frozen=True)
class Graph:
    """A whole einsum graph. Build it with ``solar_io.load``/``loads`` or directly.

    ``version`` is the format version the graph is written in: a loaded file keeps its own
    (a 1.0 file dumps as 1.0), a graph built in code gets the current one.
    """

    ranks: tuple[tuple[str, int], ...]
    tensors: tuple[Tensor, ...]
    nodes: tuple[Node, ...]
    producer: Producer = field(default_factory=Producer)
    validation: Validation = field(default_factory=Validation)
    name: str | None = None
    version: str = FORMAT_VERSION
    assumptions: tuple[Assumption, ...] = ()  # since 1.3
    repeats: tuple[Repeat, ...] = ()  # since 1.4: blocks of nodes/tensors written once (see Repeat)

    @cached_property
    def rank_sizes(self) -> dict[str, int]:
        """{rank name: size}."""
        return dict(self.ranks)

    @cached_property
    def tensor_map(self) -> dict[str, Tensor]:
        """{tensor name: Tensor} (the last one wins if names repeat; validation rejects that)."""
        return {t.name: t for t in self.tensors}

    @cached_property
    def node_map(self) -> dict[str, Node]:
        """{node name: Node}."""
        return {n.name: n for n in self.nodes}

    @cached_property
    def node_forms(self) -> tuple[tuple[int, tuple[str, ...]], ...]:
        """Per node, its form id and the tensors it names (:func:`solar_io.node_form.forms`): nodes of one
        form pose the same problem over those tensors (a repeated layer)."""
        from .node_form import forms

        return forms(self.nodes)

    def shape(self, tensor: str) -> tuple[int, ...]:
        """The sizes of ``tensor``'s ranks."""
        sizes = self.rank_sizes
        return tuple(sizes[r] for r in self.tensor_map[tensor].ranks)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        return (self.version, self.name, self.producer, self.validation, self.ranks, self.tensors,
                self.nodes, self.assumptions, self.repeats) == (
            other.version, other.name, other.producer, other.validation, other.ranks, other.tensors, other.nodes,
            other.assumptions, other.repeats)

    def __hash__(self) -> int:
        return hash((self.name, self.ranks, len(self.tensors), len(self.nodes)))
