"""Unfused and fused speed-of-light bounds of a graph on a chip (``solar_io.bound``).

All times are lower bounds in seconds: a real run of the workload on the chip cannot be faster.

Per node v, each kind of work runs on one unit at one peak (:mod:`.model`); the *load* of v on a
resource (``matrix/bf16``, ``vector/fp32``, ``special/fp32``, ``dram``) is its work there (FLOPs,
special-function results or bytes) and takes ``work / rate`` seconds. Loads on the same unit add
up (an fp32 matmul routed to the vector unit shares it with the node's vector work); units and
DRAM run concurrently, so

- ``compute(v) = max over units u of time_u(v)``; ``memory(v) = DRAM bytes(v) / DRAM bandwidth``;
- **unfused**: every source op is its own kernel k (the nodes a frontend lowered from one op run
  as one, :mod:`.kernels`): ``T = sum_k max(busiest unit's total over k, DRAM bytes(k) / bandwidth)``;
  a hand-written graph has one kernel per node. DRAM bytes are what crosses the kernel's boundary
  less what on-chip memory (S bytes, the spec's on-chip levels) may keep between kernels
  (:mod:`.residency`); ``residency=False`` charges every operand (the classical count, which a chip
  with caches can beat);
- **fused**: the graph is one kernel with unlimited on-chip memory; only graph inputs, weights,
  stored constants and outputs cross DRAM (``GraphMetrics.boundary_bytes``, views included:
  the part of a computed tensor that an output viewing it exposes, and inputs read only through
  views, :mod:`solar_io.views`):
  ``T = max(max_u sum_v time_u(v), boundary_bytes / bandwidth)``. Work on different units overlaps
  across nodes as well inside one kernel (a fused attention kernel runs its softmax on the vector
  and special units while the tensor cores run the next matmul), so the compute term is the busiest
  unit's total, which is at most ``sum_v compute(v)``; ``fused <= unfused`` always holds.
- **cache-aware** (finite on-chip memory) is a later fidelity: its slot is reported "not computed".

Sparse tensors (``density`` d < 1). Bytes already scale with d (``solar_io.metrics``). For compute
there are two models of a node with a sparse operand: a dense kernel executes every multiply at
the dense peak (``2·MACs / P``); a sparse kernel skips the zeros and executes only the effectual
``d·MACs``. Hardware structured sparsity (2:4, d = 0.5) runs at twice the dense peak, i.e. it
executes the ``d·MACs`` effectual multiplies at the dense rate: ``2·MACs/(2P) = 2·d·MACs/P``; at
d < 0.5 a 2:4 engine cannot exploit more than half, so it is slower than ``2·d·MACs/P``. Since
d <= 1, the lower bound over both models (and over any sparse engine whose speed-up does not exceed
1/d) is the effectual one: **the node's work is scaled by d at the dense peaks**. Specs list dense
peaks only; a chip with a speed-up beyond 1/d would need a sparse peak, which no spec gives. With
several sparse tensors the factor is the product of the densities of every tensor the node reads
or writes (each once): the effectual fraction when the non-zeros are placed independently, which
is below every single density. The factor applies to matrix, vector and transcendental work alike
and is reported per node (``effectual_fraction``).

Opaque nodes have unknown compute: the bound uses their bytes only and the report lists them
(``opaque``); work the chip has no peak for at all is likewise listed (``unpriced``).
"""

from __future__ import annotations

import gc
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from solar_io.dtypes import ALIASES, DTYPES
from solar_io.graph import Graph
from solar_io.hardware import HardwareSpec, load_spec
from solar_io.hardware.catalog import split_clock
from solar_io.metrics import GraphMetrics, graph_metrics

from ...format.files import load
from .aliases import ViewChains
from .clock import at_clock
from .inverse import inverse_roofline
from .kernels import kernel_groups, kernel_traffic, merge
from .model import MATRIX, SPECIAL, VECTOR, WORK_KINDS, BoundError, PeakModel, Plan, Route, parse_compute_dtype
from .precision import Policy, PrecisionPlan, analyse, record
from .residency import NodeTraffic, dram_bytes, node_traffic, on_chip_capacity
from .result import UNITS, Fidelity, Load, NodeBound, Options, Report, Resource, Totals
from .units import format_time, parse_bytes, parse_frequency, parse_rate, parse_time

# ---------------------------------------------------------------------------- inputs


def resolve_graph(graph: Graph | str | os.PathLike[str]) -> Graph:
    """A Graph, or the validated graph in the file at a path."""
    return graph if isinstance(graph, Graph) else load(graph)


def launch_note(r: Report, overhead: float) -> str:
    """The per-kernel launch floor next to the bounds (``--launch-overhead``), never added to them: the
    unfused bound runs one kernel per source op (``r.kernels``) that moves bytes or computes (views and
    immediates launch nothing), the fused bound one kernel."""
    n = sum(1 for k in (r.kernels or r.nodes) if k.bytes or k.macs or k.flops_vector or k.transcendental
            or not k.compute_known)
    unfused, fused = (r.unfused.time or 0.0) + n * overhead, (r.fused.time or 0.0) + overhead
    t = format_time
    return (f"launch floor (--launch-overhead {t(overhead)} per kernel; reported apart, not in the bounds): "
            f"unfused {n} kernel(s) = {t(n * overhead)} (unfused SOL + floor {t(unfused)}), fused 1 kernel = "
            f"{t(overhead)} (fused SOL + floor {t(fused)})")


def resolve_hardware(hw: HardwareSpec | str | os.PathLike[str]) -> HardwareSpec:
    """A HardwareSpec, or the spec with this name, alias or path."""
    spec = hw if isinstance(hw, HardwareSpec) else load_spec(hw)
    if not spec.dram_bandwidth:
        raise BoundError(f"hardware {spec.name}: the spec gives no DRAM bandwidth; a bound needs one")
    return spec


def cast_graph(g: Graph, dtype: str) -> Graph:
    """``g`` with every floating-point tensor stored as ``dtype`` (integer and bool tensors,
    indices and masks, keep theirs): a what-if of the same workload in another precision."""
    name = ALIASES.get(dtype.strip().lower(), dtype.strip().lower())
    if name not in DTYPES:
        raise BoundError(f"--dtype: unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    tensors = tuple(replace(t, dtype=name) if DTYPES[t.dtype].family == "float" else t for t in g.tensors)
    return replace(g, tensors=tensors)


def _seconds(value: float | str | None, what: str) -> float | None:
    if value is None or isinstance(value, str):
        return parse_time(value, what) if value is not None else None
    if not (value > 0 and math.isfinite(value)):
        raise BoundError(f"{what}: must be a positive number of seconds, got {value!r}")
    return float(value)


def target_seconds(target_latency: float | str | None, target_rate: float | str | None) -> tuple[
        float | None, float | None]:
    """(target latency s, target rate Hz) from the options; at most one may be given."""
    if target_latency is not None and target_rate is not None:
        raise BoundError("give --target-latency or --target-rate, not both")
    if target_rate is not None:
        hz = parse_rate(target_rate, "--target-rate") if isinstance(target_rate, str) else float(target_rate)
        if not (hz > 0 and math.isfinite(hz)):
            raise BoundError(f"--target-rate: must be a positive rate in Hz, got {target_rate!r}")
        return 1.0 / hz, hz
    return _seconds(target_latency, "--target-latency"), None


# ---------------------------------------------------------------------------- the bound


def bound(graph: Graph | str | os.PathLike[str], hw: HardwareSpec | str | os.PathLike[str], *,
          measured: float | str | None = None, target_latency: float | str | None = None,
          target_rate: float | str | None = None, allow_tf32: bool | None = None, dtype: str | None = None,
          compute_dtype: str | dict[str, str] | None = None, cache_aware: bool = False,
          cache_bound: str = "ilp", capacity: float | str | None = None, residency: bool = True,
          strict_fp32: bool = False, strict_dequant: bool = False, clock: float | str | None = None,
          launch_overhead: float | str | None = None) -> Report:
    """The SOL report of ``graph`` (a Graph or a path) on ``hw`` (a HardwareSpec, name, alias or path).

    ``measured``: a measured run time (seconds, or text such as ``'3.1ms'``) for the headroom.
    ``target_latency`` (seconds or ``'2ms'``) or ``target_rate`` (Hz or ``'500Hz'``): the inverse
    roofline. Precision policy (:mod:`.precision`, both rules on by default): ``strict_fp32`` prices fp32
    matrix work at fp32 peaks only (``allow_tf32=False`` is the old spelling of it; ``True`` is the
    default), ``strict_dequant`` prices dequantised operands as written. ``clock``: scale every compute
    peak to this core clock (Hz or ``'1500MHz'``, :mod:`.clock`). ``dtype``: cast every float tensor
    first. ``compute_dtype``: override the dtype class of the peaks (``'bf16'`` or ``'fp8=fp16'``).
    ``cache_aware``: also compute the cache-aware fidelity (finite on-chip memory, :mod:`solar_io.backends.tiling`)
    with ``capacity`` bytes on chip (default: the spec's on-chip levels) and Q(S) from the tiling ILP
    (``cache_bound='ilp'``) or the provable floor (``'floor'``). ``residency``: on-chip memory keeps
    data between kernels (the unfused bytes and the cache-aware group traffic drop what it may hold,
    :mod:`.residency`); False gives the classical per-kernel counts, which a chip with caches can beat.
    ``hw`` may be ``NAME@CLOCK`` (``'b200@1500MHz'``); ``launch_overhead`` adds a note with the per-kernel
    launch floor, apart from the bounds (see :func:`bound_many`).
    """
    return bound_many(graph, [hw], measured=measured, target_latency=target_latency, target_rate=target_rate,
                      allow_tf32=allow_tf32, dtype=dtype, compute_dtype=compute_dtype, cache_aware=cache_aware,
                      cache_bound=cache_bound, capacity=capacity, residency=residency, strict_fp32=strict_fp32,
                      strict_dequant=strict_dequant, clock=clock, launch_overhead=launch_overhead)[0]


def bound_many(graph: Graph | str | os.PathLike[str], hws: Sequence[HardwareSpec | str | os.PathLike[str]], *,
               measured: float | str | None = None, target_latency: float | str | None = None,
               target_rate: float | str | None = None, allow_tf32: bool | None = None, dtype: str | None = None,
               compute_dtype: str | dict[str, str] | None = None, cache_aware: bool = False,
               cache_bound: str = "ilp", capacity: float | str | None = None, residency: bool = True,
               strict_fp32: bool = False, strict_dequant: bool = False,
               clock: float | str | None = None, launch_overhead: float | str | None = None) -> list[Report]:
    """One report per chip of ``hws`` (metrics are computed once); see :func:`bound`.

    A chip written ``NAME@CLOCK`` (``b200@1500MHz``) is bounded at that core clock, as ``clock`` does
    for every chip (giving both for one chip is an error unless they agree). ``launch_overhead``
    (seconds or ``'0.4us'``): a per-kernel launch floor reported in a note next to the bounds, never
    added to them (off by default)."""
    if allow_tf32 and strict_fp32:
        raise BoundError("give --allow-tf32 (the default) or --strict-fp32, not both")
    tf32 = not strict_fp32 if allow_tf32 is None else allow_tf32
    policy = Policy(tf32, not strict_dequant)
    measured_s = _seconds(measured, "--measured")
    latency, rate = target_seconds(target_latency, target_rate)
    override = parse_compute_dtype(compute_dtype)
    clocked, clocks = [], []
    for h in hws:
        name, at = split_clock(h) if isinstance(h, str) else (h, None)
        if at is not None and clock is not None and parse_frequency(at, "--hw") != parse_frequency(clock):
            raise BoundError(f"--hw {h}: the clock after @ disagrees with --clock {clock}; give one")
        chip_clock = at if at is not None else clock
        hz = parse_frequency(chip_clock, f"--hw {h}" if at is not None else "--clock") \
            if chip_clock is not None else None
        sp = resolve_hardware(name)
        clocked.append(at_clock(sp, hz) if hz is not None else (sp, None))
        clocks.append(hz)
    launch_s = _seconds(launch_overhead, "--launch-overhead")
    g = resolve_graph(graph)
    if dtype is not None:
        g = cast_graph(g, dtype)
    cast = None if dtype is None else cast_graph_name(dtype)
    reports = []
    cap_bytes = parse_bytes(capacity)
    with _gc_paused():
        gm = graph_metrics(g)
        chains = ViewChains(g)
        traffic = node_traffic(g, gm, chains)
        pplan = analyse(g, gm, policy)
        spans = kernel_groups(g, pplan.absorbed)
        ktraffic = kernel_traffic(g, traffic, spans, chains.exposed())
        for (spec, clock_note), clock_hz in zip(clocked, clocks, strict=True):
            options = Options(tf32, cast, tuple(sorted(override.items())), strict_dequant, clock_hz)
            s, s_source = on_chip_capacity(spec, cap_bytes) if residency else (0.0, "--no-residency")
            dram = dram_bytes(g, traffic, s, chains)
            kdram = dram_bytes(g, ktraffic, s, chains)
            r = _bound_one(g, gm, spec, PeakModel(spec, tf32, override), options, measured_s,
                           traffic, dram, s, s_source, pplan, clock_note)
            r = with_kernels(r, g, spans, ktraffic, kdram)
            if cache_aware:
                from solar_io.backends.tiling.sol import with_cache_aware
                r = with_cache_aware(r, g, gm, spec, capacity, cache_bound, residency)
            if latency is not None:
                r = replace(r, inverse=inverse_roofline(r, latency, rate))
            if launch_s is not None:
                r = replace(r, notes=(*r.notes, launch_note(r, launch_s)))
            reports.append(r)
    return reports


def cast_graph_name(dtype: str) -> str:
    """The canonical name of a ``--dtype`` value."""
    return ALIASES.get(dtype.strip().lower(), dtype.strip().lower())


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while ~10 objects per node are built (its full passes
    otherwise cost a third of the time on large graphs); the objects are acyclic."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _bound_one(g: Graph, gm: GraphMetrics, spec: HardwareSpec, model: PeakModel, options: Options,
               measured: float | None, traffic: Sequence[NodeTraffic] | None = None,
               dram: Sequence[float] | None = None, capacity: float = 0.0, capacity_source: str = "",
               pplan: PrecisionPlan | None = None, clock_note: str | None = None) -> Report:
    bw = float(spec.dram_bandwidth)  # type: ignore[arg-type]
    nodes: list[NodeBound] = []
    notes: dict[str, None] = {}
    unpriced: list[tuple[str, str]] = []
    dtype_of = {t.name: t.dtype for t in g.tensors}
    sparse = {t.name: t.density for t in g.tensors if t.density is not None and t.density < 1.0}
    if traffic is None:
        traffic = node_traffic(g, gm)
    if dram is None:  # no on-chip memory: the classical per-kernel bytes
        dram = [tr.bytes for tr in traffic]
    if pplan is None:
        pplan = PrecisionPlan(Policy(model.allow_tf32, False))
    repriced: list[tuple[int, str, bool]] = []  # (node index, compute class, fp32 matrix work at tf32)
    for idx, (node, m, tr, dbytes) in enumerate(zip(g.nodes, gm.nodes, traffic, dram, strict=True)):
        nbytes = tr.bytes
        mem = dbytes / bw
        dram_load = (Load("dram", "dram", dbytes, bw),) if dbytes > 0 else ()
        work = (m.flops_matrix, m.flops_vector, m.transcendental)
        if not m.compute_known or not (work[0] or work[1] or work[2]):
            nodes.append(NodeBound(node.name, node.kind, node.op, None, m.macs, *work, nbytes, m.bytes_exact,
                                   1.0, m.compute_known, (), dram_load, 0.0, 0.0, 0.0, mem, mem,
                                   "memory" if mem > 0 else "none", dbytes))
            continue
        dtypes = pplan.operand_dtypes.get(idx) or tuple(dtype_of[a.tensor] for a in (node.inputs or node.outputs))
        plan = model.plan(dtypes)
        rule = _rule(plan, work[MATRIX], pplan, idx)
        if rule:
            repriced.append((idx, plan.compute_dtype, "fp32->tf32" in rule))
        frac = 1.0
        if sparse:  # product of the densities of the distinct sparse tensors the node touches
            for name in {a.tensor for a in node.inputs} | {a.tensor for a in node.outputs}:
                frac *= sparse.get(name, 1.0)
        loads: dict[str, Load] = {}
        missing: list[str] = []
        for kind in (MATRIX, VECTOR, SPECIAL):
            w = work[kind]
            if w <= 0:
                continue
            route = plan.routes[kind]
            if isinstance(route, str):
                raise BoundError(f"node {node.name!r} ({WORK_KINDS[kind]} work in {plan.compute_dtype}): {route}")
            if route is None:
                missing.append(WORK_KINDS[kind])
                continue
            key = route.key
            prev = loads.get(key)
            loads[key] = Load(key, route.unit, w * frac + (prev.work if prev else 0.0), route.peak)
        for kind, text in plan.notes:
            if kind < 0 or work[kind] > 0:
                notes.setdefault(text)
        mt = vt = st = 0.0
        for ld in loads.values():
            if ld.unit == "matrix":
                mt += ld.work / ld.rate
            elif ld.unit == "vector":
                vt += ld.work / ld.rate
            else:
                st += ld.work / ld.rate
        t = max(mt, vt, st, mem)
        bn = "none" if t <= 0 else ("matrix" if t == mt else "vector" if t == vt else "special" if t == st
                                    else "memory")
        if missing:
            unpriced.extend((node.name, k) for k in missing)
        nodes.append(NodeBound(node.name, node.kind, node.op, plan.compute_dtype, m.macs, *work, nbytes,
                               m.bytes_exact, frac, True, tuple(missing), tuple(loads.values()) + dram_load,
                               mt, vt, st, mem, t, bn, dbytes, rule))
    if capacity > 0:
        notes.setdefault(f"unfused: a node's DRAM bytes exclude what on-chip memory kept from earlier kernels, "
                         f"at most S = {capacity:.6g} B ({capacity_source}) of re-read and of written data each")
    if clock_note:
        notes.setdefault(clock_note)
    r = _assemble(g, gm, spec, options, tuple(nodes), tuple(notes), tuple(unpriced), measured)
    return replace(r, precision=record(g, pplan, repriced))


def _rule(plan: Plan, matrix_work: float, pplan: PrecisionPlan, idx: int) -> str | None:
    """The precision rules that repriced node ``idx`` (``dequant fp8_e4m3``, ``fp32->tf32``), or None."""
    rules = []
    ds = pplan.dequants.get(idx)
    if ds:
        rules.append("dequant " + "/".join(sorted({d.origin for d in ds})))
    route = plan.routes[MATRIX]
    fp32 = "fp32" in plan.compute_dtype.split("/")
    if matrix_work > 0 and isinstance(route, Route) and route.dtype == "tf32" and fp32:
        rules.append("fp32->tf32")
    return "; ".join(rules) or None


def _sum(xs: Iterable[float]) -> float:
    return math.fsum(xs)


def _assemble(g: Graph, gm: GraphMetrics, spec: HardwareSpec, options: Options, nodes: tuple[NodeBound, ...],
              notes: tuple[str, ...], unpriced: tuple[tuple[str, str], ...], measured: float | None) -> Report:
    bw = float(spec.dram_bandwidth)  # type: ignore[arg-type]

    def headroom(t: float) -> float | None:
        return measured / t if measured is not None and t > 0 else None

    # Unfused.
    u_units = tuple((u, _sum(getattr(n, f"{u}_time") for n in nodes)) for u in UNITS)
    u_time = unfused_time(nodes)
    by_bn: dict[str, list[float]] = {}
    for n in nodes:
        by_bn.setdefault(n.bottleneck, []).append(n.time)
    split = tuple(sorted(((k, _sum(v)) for k, v in by_bn.items() if k != "none"), key=lambda kv: -kv[1]))
    u_bytes = _sum(n.dram_bytes for n in nodes)
    unfused = Fidelity("unfused", True, u_time, _sum(n.compute_time for n in nodes),
                       _sum(n.memory_time for n in nodes), u_bytes, u_units, split,
                       split[0][0] if split else None, headroom(u_time),
                       "each node is a kernel: sum over nodes of max(compute, DRAM bytes / DRAM bandwidth); "
                       "on-chip memory keeps data between kernels")
    # Fused.
    f_compute = max(t for _, t in u_units)
    boundary = gm.boundary_bytes  # the one derivation (solar_io.views), views included: info prints it too
    f_memory = boundary / bw
    f_time = max(f_compute, f_memory)
    f_terms = (*u_units, ("memory", f_memory))
    f_bn = max(f_terms, key=lambda kv: kv[1])[0] if f_time > 0 else None
    fused = Fidelity("fused", True, f_time, f_compute, f_memory, boundary, u_units, (), f_bn,
                     headroom(f_time), "one kernel, unlimited on-chip memory: max(busiest unit's total, "
                     "boundary bytes / DRAM bandwidth)")
    cache = Fidelity("cache-aware", False, note="not computed: finite on-chip memory comes in a later version")
    # Resources.
    work: dict[str, list] = {}
    for n in nodes:
        for ld in n.loads:
            if ld.unit != "dram":
                entry = work.setdefault(ld.resource, [ld.unit, ld.rate, []])
                entry[2].append(ld.work)
    resources = [Resource(k, u, k.split("/", 1)[1], rate, _sum(ws), _sum(ws))
                 for k, (u, rate, ws) in sorted(work.items(), key=lambda kv: (UNITS.index(kv[1][0]), kv[0]))]
    resources.append(Resource("dram", "dram", None, bw, u_bytes, boundary))
    totals = Totals(len(nodes), gm.macs, gm.flops_matrix, gm.flops_vector, gm.transcendental, gm.bytes, boundary)
    return Report(g.name, spec.name, spec.full_name, bw, options, nodes, totals, unfused, fused, cache,
                  tuple(resources), gm.opaque, unpriced, notes, measured)


def with_kernels(r: Report, g: Graph, spans: Sequence[tuple[int, ...]], ktraffic: Sequence[NodeTraffic],
                 kdram: Sequence[float]) -> Report:
    """``r`` with its unfused fidelity over kernels (:mod:`.kernels`): the nodes one source op was
    lowered to and the dequantisation chains folded into their contraction run as one kernel, whose
    inner tensors never cross DRAM."""
    if all(len(k) == 1 for k in spans) and all(n.dram_bytes == d for n, d in zip(r.nodes, kdram, strict=True)):
        return replace(r, kernels=r.nodes)
    ks = tuple(merge(r.nodes[k[0]].name if len(k) == 1 else g.nodes[k[-1]].name.split(".", 1)[0],
                     [r.nodes[v] for v in k], tr, d, r.dram_bandwidth)
               for k, tr, d in zip(spans, ktraffic, kdram, strict=True))
    u_units = tuple((u, _sum(getattr(k, f"{u}_time") for k in ks)) for u in UNITS)
    u_time = unfused_time(ks)
    by_bn: dict[str, list[float]] = {}
    for k in ks:
        by_bn.setdefault(k.bottleneck, []).append(k.time)
    split = tuple(sorted(((b, _sum(v)) for b, v in by_bn.items() if b != "none"), key=lambda kv: -kv[1]))
    headroom = r.measured / u_time if r.measured is not None and u_time > 0 else None
    note = r.unfused.note
    merged = len(r.nodes) - len(ks)
    if merged:
        note += (f"; the {len(r.nodes)} nodes run as {len(ks)} kernels (nodes lowered from one source op are one "
                 "kernel, and so is a dequantisation chain with its contraction: inner tensors never cross DRAM)")
    unfused = replace(r.unfused, time=u_time, compute_time=_sum(k.compute_time for k in ks),
                      memory_time=_sum(k.memory_time for k in ks), bytes=_sum(k.dram_bytes for k in ks),
                      unit_times=u_units, time_by_bottleneck=split, bottleneck=split[0][0] if split else None,
                      headroom=headroom, note=note)
    resources = tuple(replace(x, work_unfused=unfused.bytes) if x.unit == "dram" else x for x in r.resources)
    return replace(r, unfused=unfused, kernels=ks, resources=resources)


def unfused_time(nodes: Sequence[NodeBound]) -> float:
    """The unfused bound: the sum of the node times (correctly rounded)."""
    return _sum(n.time for n in nodes)


__all__ = ["Fidelity", "Load", "NodeBound", "Options", "Report", "Resource", "Totals", "bound",
           "bound_many", "cast_graph", "resolve_graph", "resolve_hardware"]
