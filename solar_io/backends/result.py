"""What a bound returns: the :class:`Report` of one graph on one chip and its parts.

All times are seconds and lower bounds; rates are FLOP/s (results/s for special-function units,
OP/s for integer dtypes) or bytes/s. How the numbers are computed: :mod:`.bound` (the pipeline),
:mod:`.roofline.bounds` (unfused, fused), :mod:`.tiling.partition` (cache-aware),
:mod:`.inverse` (inverse roofline). Every type is built with keywords only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .roofline.precision import PrecisionRecord

UNITS = ("matrix", "vector", "special")


def time_and_bottleneck(matrix: float, vector: float, special: float, memory: float) -> tuple[float, str]:
    """``(max of the four times, which one it is)``: units and DRAM overlap, so a kernel takes its
    slowest; ties go to the first of matrix, vector, special, memory; ``'none'`` when all are 0.

    >>> time_and_bottleneck(1.0, 2.0, 0.0, 2.0)
    (2.0, 'vector')
    """
    t = max(matrix, vector, special, memory)
    return t, ("none" if t <= 0 else "matrix" if t == matrix else "vector" if t == vector
               else "special" if t == special else "memory")


@dataclass(frozen=True, slots=True, kw_only=True)
class Load:
    """Work of one node on one resource: ``work`` FLOPs (results, bytes) at ``rate`` per second."""

    resource: str  # "matrix/bf16", "vector/fp32", "special/fp32" or "dram"
    unit: str  # "matrix", "vector", "special" or "dram"
    work: float
    rate: float

    @property
    def time(self) -> float:
        """Seconds: ``work / rate``."""
        return self.work / self.rate


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeBound:
    """The unfused bound of one node and the counts it comes from.

    FLOP and MAC counts are the dense counts of ``solar_io.metrics``; the loads carry the
    effectual work (dense counts x ``effectual_fraction``). ``unpriced`` names the kinds of work
    the chip has no peak for (counted as zero time).
    """

    name: str
    kind: str
    op: str
    compute_dtype: str | None
    macs: int
    flops_matrix: float
    flops_vector: float
    transcendental: float
    bytes: float
    bytes_exact: bool
    effectual_fraction: float
    compute_known: bool
    unpriced: tuple[str, ...]
    loads: tuple[Load, ...]
    matrix_time: float
    vector_time: float
    special_time: float
    memory_time: float
    time: float
    bottleneck: str  # "matrix", "vector", "special", "memory" or "none"
    dram_bytes: float = 0.0  # the bytes memory_time charges: ``bytes`` less what stayed on chip
    # The precision rule that repriced the node (``fp32->tf32``, ``dequant fp8_e4m3``), or None.
    precision: str | None = None

    @property
    def compute_time(self) -> float:
        """Seconds: the busiest unit's time (0 when compute is unknown)."""
        return max(self.matrix_time, self.vector_time, self.special_time)

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, (matrix + vector FLOPs) / bytes; None when no bytes move."""
        return (self.flops_matrix + self.flops_vector) / self.bytes if self.bytes > 0 else None

    def unit_time(self, unit: str) -> float:
        """Seconds on ``unit`` ('matrix', 'vector', 'special', 'dram')."""
        return {"matrix": self.matrix_time, "vector": self.vector_time, "special": self.special_time,
                "dram": self.memory_time}[unit]


@dataclass(frozen=True, slots=True, kw_only=True)
class Fidelity:
    """One fidelity's bound. ``computed`` False leaves every number None (a later fidelity).

    ``unit_times`` are seconds per unit (sums over nodes); ``time_by_bottleneck`` (unfused only)
    splits the total by each node's bottleneck.
    """

    name: str
    computed: bool
    time: float | None = None
    compute_time: float | None = None
    memory_time: float | None = None
    bytes: float | None = None
    unit_times: tuple[tuple[str, float], ...] = ()
    time_by_bottleneck: tuple[tuple[str, float], ...] = ()
    bottleneck: str | None = None
    headroom: float | None = None
    note: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    """One resource of the chip the graph uses: its rate and the work it gets per fidelity."""

    key: str
    unit: str
    dtype: str | None
    rate: float
    work_unfused: float
    work_fused: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """How the bound was asked for. ``allow_tf32`` is the precision policy's fp32->tf32 rule (on
    unless ``strict_fp32``); ``clock_hz`` the core clock the peaks were scaled to, or None."""

    allow_tf32: bool = True
    dtype: str | None = None
    compute_dtype: tuple[tuple[str, str], ...] = ()
    strict_dequant: bool = False
    clock_hz: float | None = None

    @property
    def strict_fp32(self) -> bool:
        """fp32 matrix work at fp32 peaks only (``--strict-fp32``)."""
        return not self.allow_tf32


@dataclass(frozen=True, slots=True, kw_only=True)
class Totals:
    """Graph totals (dense counts as in ``solar_io.metrics``; bytes unfused and at the boundary)."""

    nodes: int
    macs: int
    flops_matrix: float
    flops_vector: float
    transcendental: float
    bytes: float
    boundary_bytes: float


# ---------------------------------------------------------------- cache-aware (tiling.partition)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupResult:
    """One group of the chosen partition."""

    nodes: tuple[str, ...]
    kind: str            # 'tiled' (one einsum, tiling ILP), 'fused' (chain tiling), 'resident'
    #                      (everything on chip), 'untiled' (bytes as unfused), 'view', 'floor'
    traffic: float
    floor: float
    compute: float
    time: float
    detail: str = ""
    avoided: float = 0.0  # intermediate bytes kept on chip (written and read inside the group)
    fallback: bool = False  # an ILP reached its time limit: Q is the provable floor
    resident: float = 0.0  # bytes of Q that on-chip memory may have kept from earlier groups (not in traffic)
    achieved: float | None = None  # bytes the tiling found moves (a tiled einsum; >= traffic + resident)
    consecutive: bool = True  # False: a convex group the branch order runs together, not a run of the file's order

    @property
    def floor_ratio(self) -> float | None:
        """Q / floor (Q before the residency credit); None when the floor is 0."""
        return (self.traffic + self.resident) / self.floor if self.floor > 0 else None


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheAware:
    """The cache-aware bound of one graph on one chip."""

    capacity: float
    capacity_source: str
    bound: str                   # 'ilp' or 'floor'
    time: float
    compute: float
    memory: float
    traffic: float
    unit_times: tuple[tuple[str, float], ...]
    groups: tuple[GroupResult, ...]
    raised_to_fused: bool
    vs_unfused: str              # 'above', 'below' or 'equal'
    ilps_solved: int = 0         # distinct per-einsum ILPs solved in this bound (the rest were cached)
    chain_ilps: int = 0          # distinct fused-chain ILPs solved
    phases: dict[str, float] = field(default_factory=dict)
    segments_solved: int = 0     # distinct candidate groups analysed in this bound (the rest repeat one, or were
    #                              analysed by an earlier bound of the same graph at the same S)
    segments_reused: int = 0     # candidate groups answered from an identical one
    fallbacks: tuple[str, ...] = ()  # first node of each chosen group whose ILP reached its time limit
    # Every candidate group (first node, last node, traffic Q): what the inverse roofline re-partitions.
    candidates: tuple[tuple[int, int, float], ...] = field(default=(), compare=False, repr=False)
    spans: tuple[tuple[int, int], ...] = ()  # (first, last) node index of each chosen group of the file's order
    # The branch order (solar_io.backends.tiling.schedule), when it is not the file's: its node indices by
    # position, its candidate groups (first, last position, Q) and (first, last position) of each chosen one.
    branch_order: tuple[int, ...] = field(default=(), compare=False, repr=False)
    branch_candidates: tuple[tuple[int, int, float], ...] = field(default=(), compare=False, repr=False)
    branch_spans: tuple[tuple[int, int], ...] = ()


# ---------------------------------------------------------------- inverse roofline (inverse)


@dataclass(frozen=True, slots=True, kw_only=True)
class Requirement:
    """What one resource must deliver for the target (see the module docstring)."""

    resource: str
    unit: str
    dtype: str | None
    chip: float
    work: float
    any_chip: float
    any_chip_ratio: float
    with_chip_rest: float | None
    with_chip_rest_ratio: float | None
    binding: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class InverseFidelity:
    """The inverse roofline of one fidelity."""

    fidelity: str
    chip_time: float
    feasible: bool
    chip_scale: float
    requirements: tuple[Requirement, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Inverse:
    """The inverse roofline for a target latency (and the rate it came from, if any)."""

    target_latency: float
    target_rate: float | None
    fidelities: tuple[InverseFidelity, ...]  # unfused, fused, and cache-aware when it was computed

    def fidelity(self, name: str) -> InverseFidelity | None:
        """The entry of fidelity ``name`` (None for a fidelity that was not computed)."""
        return next((f for f in self.fidelities if f.fidelity == name), None)


# ---------------------------------------------------------------- the report


@dataclass(frozen=True, kw_only=True)
class Report:
    """The speed-of-light report of one graph on one chip (see the module docstring)."""

    graph: str | None
    hardware: str
    hardware_full_name: str
    dram_bandwidth: float
    options: Options
    nodes: tuple[NodeBound, ...]
    totals: Totals
    unfused: Fidelity
    fused: Fidelity
    cache_aware: Fidelity
    resources: tuple[Resource, ...]
    opaque: tuple[str, ...]
    unpriced: tuple[tuple[str, str], ...]
    notes: tuple[str, ...]
    measured: float | None = None
    inverse: Inverse | None = None  # when a target latency or rate was given
    cache: CacheAware | None = None  # details of the cache-aware fidelity when it was computed
    # The unfused fidelity's kernels (nodes lowered from one source op merged, :mod:`.kernels`);
    # the unfused time is the sum of their times. Equal to ``nodes`` when no node was merged.
    kernels: tuple[NodeBound, ...] = ()
    # The precision policy in force and the nodes each rule repriced (:mod:`.precision`).
    precision: PrecisionRecord | None = None

    @property
    def fidelities(self) -> tuple[Fidelity, Fidelity, Fidelity]:
        """unfused, fused, cache-aware."""
        return self.unfused, self.fused, self.cache_aware

    @property
    def compute_complete(self) -> bool:
        """False when some compute is unknown (opaque nodes) or has no peak on the chip (unpriced):
        the bound then counts that work as zero time, so it is looser (still a lower bound)."""
        return not self.opaque and not self.unpriced

    @property
    def fusion_gain(self) -> float | None:
        """unfused / fused time (None when the fused time is 0)."""
        f, u = self.fused.time, self.unfused.time
        return u / f if f and u is not None else None

    def top(self, n: int | None = None) -> list[NodeBound]:
        """The ``n`` nodes with the largest unfused time (all when n is None), in that order."""
        order = sorted(range(len(self.nodes)), key=lambda i: (-self.nodes[i].time, i))
        return [self.nodes[i] for i in (order if n is None else order[:n])]

    def _repr_html_(self) -> str:
        """Jupyter shows a Report as the HTML report (solar_io.reports.html): fidelities, roofline, nodes."""
        from ..reports.html import report_html

        return report_html(self)


__all__ = ["UNITS", "CacheAware", "Fidelity", "GroupResult", "Inverse", "InverseFidelity", "Load", "NodeBound",
           "Options", "Report", "Requirement", "Resource", "Totals", "time_and_bottleneck"]
