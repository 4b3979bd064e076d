"""The bound pipeline: graph -> traffic -> unfused and fused -> cache-aware -> report -> inverse.

``bound(graph, hw)`` returns the :class:`~solar_io.backends.result.Report` of one graph on one chip;
``bound_many(graph, chips)`` one per chip. The steps, each in its own module:

1. the traffic model of the graph (:func:`solar_io.backends.traffic.traffic_of`: metrics, view
   roots, per-node traffic, kernel spans, boundary bytes), built once per graph object and shared by
   every chip and every later call on the same graph, with the precision plan and the kernels'
   boundary traffic of each precision policy;
2. per chip: DRAM bytes with what on-chip memory keeps (:mod:`.traffic.residency`), every node
   priced at the chip's peaks (:mod:`.roofline.bounds`, :mod:`.roofline.model`), the kernels merged
   (:mod:`.roofline.kernel_bound`), the unfused and fused fidelities;
3. the cache-aware fidelity (:mod:`.tiling`, on request);
4. the report, built once; the inverse roofline (:mod:`.inverse`) reads it when a target is given.

>>> import solar_io
>>> r = bound(solar_io.load("examples/graphs/matmul.yaml"), "h100-sxm")  # doctest: +SKIP
>>> r.unfused.time >= r.fused.time  # doctest: +SKIP
True
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import replace

from solar_io._gc import gc_paused
from solar_io.dtypes import ALIASES, DTYPES
from solar_io.graph import Graph
from solar_io.hardware import HardwareSpec, load_spec
from solar_io.hardware.catalog import split_clock
from solar_io.metrics import in_place_outputs
from solar_io.prefill import prefilled_writes
from solar_io.units import format_time, parse_bytes, parse_frequency, parse_rate, parse_time

from ..format.files import load
from ..node_lists import fp32_at_half, prefilled_fills
from .result import Fidelity, NodeBound, Options, Report
from .roofline.bounds import UNFUSED_NOTE, fused_fidelity, node_facts, price_nodes, resources, totals, unfused_fidelity
from .roofline.clock import at_clock
from .roofline.kernel_bound import MERGED_NOTE, kernel_rows
from .roofline.model import BoundError, PeakModel, parse_compute_dtype
from .roofline.precision import Policy, PrecisionPlan, analyse, record
from .traffic.graph import GraphTraffic, traffic_of
from .traffic.kernels import kernel_groups, kernel_traffic
from .traffic.residency import NodeTraffic, at_capacity, dram_parts, on_chip_capacity

NOT_COMPUTED = "not computed: finite on-chip memory comes in a later version"

# ---------------------------------------------------------------------------- inputs


def resolve_graph(graph: Graph | str | os.PathLike[str]) -> Graph:
    """A Graph, or the validated graph in the file at a path."""
    return graph if isinstance(graph, Graph) else load(graph)


def launch_note(kernels: Sequence[NodeBound], unfused: float | None, fused: float | None, overhead: float) -> str:
    """The per-kernel launch floor next to the bounds (``--launch-overhead``), never added to them: the
    unfused bound runs one kernel per source op (``kernels``) that moves bytes or computes (views and
    immediates launch nothing), the fused bound one kernel."""
    n = sum(1 for k in kernels if k.bytes or k.macs or k.flops_vector or k.transcendental or not k.compute_known)
    unfused, fused = (unfused or 0.0) + n * overhead, (fused or 0.0) + overhead
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
    roofline. Precision policy (:mod:`.roofline.precision`, both rules on by default): ``strict_fp32`` prices fp32
    matrix work at fp32 peaks only (``allow_tf32=False`` is the old spelling of it; ``True`` is the
    default), ``strict_dequant`` prices dequantised operands as written. ``clock``: scale every compute
    peak to this core clock (Hz or ``'1500MHz'``, :mod:`.roofline.clock`). ``dtype``: cast every float tensor
    first. ``compute_dtype``: override the dtype class of the peaks (``'bf16'`` or ``'fp8=fp16'``).
    ``cache_aware``: also compute the cache-aware fidelity (finite on-chip memory, :mod:`.tiling`)
    with ``capacity`` bytes on chip (default: the spec's on-chip levels) and Q(S) from the tiling ILP
    (``cache_bound='ilp'``) or the provable floor (``'floor'``). ``residency``: on-chip memory keeps
    data between kernels (the unfused bytes and the cache-aware group traffic drop what it may hold,
    :mod:`.traffic.residency`); False gives the classical per-kernel counts, which a chip with caches can beat.
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
    """One report per chip of ``hws`` (the graph's traffic is built once, :func:`traffic_of`); see :func:`bound`.

    A chip written ``NAME@CLOCK`` (``b200@1500MHz``) is bounded at that core clock, as ``clock`` does
    for every chip (giving both for one chip is an error unless they agree). ``launch_overhead``
    (seconds or ``'0.4us'``): a per-kernel launch floor reported in a note next to the bounds, never
    added to them (off by default)."""
    if allow_tf32 and strict_fp32:
        raise BoundError("give --allow-tf32 (the default) or --strict-fp32, not both")
    tf32 = not strict_fp32 if allow_tf32 is None else allow_tf32
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
    cap_bytes = parse_bytes(capacity)
    policy = Policy(tf32, not strict_dequant, tf32 and fp32_at_half(g))
    with gc_paused():
        gt = traffic_of(g)  # chip-independent: built once per graph object, reused by every chip and call
        pplan = gt.memo(("precision", policy), lambda: analyse(g, gt.metrics, policy))
        groups, ktraffic = gt.memo(("kernels", policy), lambda: _kernels(gt, pplan))
        return [_report(gt, spec, clock_note, Options(allow_tf32=tf32, dtype=cast,
                                                      compute_dtype=tuple(sorted(override.items())),
                                                      strict_dequant=strict_dequant, clock_hz=clock_hz),
                        PeakModel(spec, tf32, override, policy.half), pplan, groups, ktraffic, measured=measured_s,
                        capacity=cap_bytes, residency=residency, cache_aware=cache_aware, cache_bound=cache_bound,
                        latency=latency, rate=rate, launch=launch_s)
                for (spec, clock_note), clock_hz in zip(clocked, clocks, strict=True)]


def _kernels(gt: GraphTraffic, pplan: PrecisionPlan) -> tuple[list[tuple[int, ...]], list[NodeTraffic]]:
    """The kernels (node-index tuples, dequantisation chains folded into their contraction) and what
    crosses each one's boundary."""
    groups = kernel_groups(gt.graph, pplan.absorbed, gt.spans)
    return groups, kernel_traffic(gt.graph, gt.nodes, groups, gt.exposed)


def _report(gt: GraphTraffic, spec: HardwareSpec, clock_note: str | None, options: Options, model: PeakModel,
            pplan: PrecisionPlan, groups: Sequence[tuple[int, ...]], ktraffic: Sequence[NodeTraffic], *,
            measured: float | None, capacity: float | None, residency: bool, cache_aware: bool, cache_bound: str,
            latency: float | None, rate: float | None, launch: float | None) -> Report:
    """The report of one chip: traffic -> unfused (nodes, then kernels) and fused -> cache-aware ->
    the report, built once; then the inverse roofline, which reads the finished report."""
    g = gt.graph
    bw = float(spec.dram_bandwidth)  # type: ignore[arg-type]
    s, s_source = on_chip_capacity(spec, capacity) if residency else (0.0, "--no-residency")
    # the capacity-independent parts of both byte counts are kept per graph (the kernels' per traffic list)
    dram = at_capacity(gt.memo("dram parts", lambda: dram_parts(g, gt.nodes, gt.chains)), s)
    kparts = gt.memo(("kernel dram parts", id(ktraffic)), lambda: (ktraffic, dram_parts(g, ktraffic, gt.chains)))
    kdram = at_capacity(kparts[1], s)
    facts = gt.memo("node facts", lambda: node_facts(g, gt.metrics, gt.nodes))  # what no chip changes
    priced = price_nodes(g, gt.metrics, model, bw, gt.nodes, dram, pplan, facts)
    nodes = priced.nodes
    notes = dict.fromkeys(priced.notes)
    if s > 0:
        notes.setdefault(f"unfused: a node's DRAM bytes exclude what on-chip memory kept from earlier kernels, "
                         f"at most S = {s:.6g} B ({s_source}) of re-read and of written data each")
    if clock_note:
        notes.setdefault(clock_note)
    for out in sorted(in_place_outputs(g)):
        notes.setdefault(f"in place: output {out} is input {g.tensor_map[out].updates} updated in place (the file's "
                         "'updates'): only the elements its scatters write are charged, not a copy of the input")
    for out, written in sorted(prefilled_writes(g).items()):
        t = g.tensor_map[out]
        if t.role == "output":
            notes.setdefault(f"prefilled: output {out} arrives holding {t.prefilled:g} (the file's 'prefilled'): only "
                             f"the {written:.6g} of its {math.prod(g.shape(out)):.6g} elements its scatters write "
                             "are charged")
    for mem in sorted(prefilled_fills(g)):
        notes.setdefault(f"prefilled: output memory {mem} arrives holding its fill (the file's 'prefilled'): the "
                         "masked writes into it are charged none of the fill")
    kernels = kernel_rows(g, nodes, groups, ktraffic, kdram, bw)
    merged = len(nodes) - len(kernels)
    note = UNFUSED_NOTE + (MERGED_NOTE.format(nodes=len(nodes), kernels=len(kernels)) if merged else "")
    unfused = unfused_fidelity(kernels, measured, note)
    fused = fused_fidelity(nodes, gt.boundary_bytes, bw, measured)
    cache_fid, cache = Fidelity(name="cache-aware", computed=False, note=NOT_COMPUTED), None
    if cache_aware:
        from .tiling.sol import cache_aware_fidelity  # PuLP is imported only when the fidelity is asked for
        cache_fid, cache = cache_aware_fidelity(gt, nodes, spec, capacity, cache_bound, residency,
                                                fused.time or 0.0, unfused.time or 0.0, measured)
    if launch is not None:
        notes.setdefault(launch_note(kernels, unfused.time, fused.time, launch))
    r = Report(graph=g.name, hardware=spec.name, hardware_full_name=spec.full_name, dram_bandwidth=bw,
               options=options, nodes=nodes, totals=totals(gt.metrics, len(nodes)), unfused=unfused, fused=fused,
               cache_aware=cache_fid, resources=resources(nodes, bw, unfused.bytes or 0.0, gt.boundary_bytes),
               opaque=gt.metrics.opaque, unpriced=priced.unpriced, notes=tuple(notes), measured=measured,
               cache=cache, kernels=kernels, precision=record(g, pplan, priced.repriced))
    if latency is not None:
        from .inverse import inverse_roofline  # only with a target (--target-latency / --target-rate)

        r = replace(r, inverse=inverse_roofline(r, latency, rate))
    return r


def cast_graph_name(dtype: str) -> str:
    """The canonical name of a ``--dtype`` value."""
    return ALIASES.get(dtype.strip().lower(), dtype.strip().lower())


__all__ = ["BoundError", "Report", "bound", "bound_many", "cast_graph", "launch_note", "resolve_graph",
           "resolve_hardware", "target_seconds"]
