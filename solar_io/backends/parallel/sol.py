"""The bound of a sharded graph: per-chip compute and memory (the single-chip bound of what each chip
runs), communication (the collectives the layout needs, priced per link), overlapped and serial.

Per pipeline stage ``s`` and fidelity (unfused, fused), per microbatch:

- ``T_s``: the chip's own work. Each part of the stage (TP, sequence-parallel, expert-parallel) is
  bounded by ``solar_io.bound`` on the graph that chip runs; unfused times add; fused, the parts
  are one kernel: ``max(busiest unit's total over the parts, DRAM bytes / bandwidth)``, where the
  DRAM bytes are the parts' boundary bytes less the tensors a collective hands between parts (a
  kernel may take them from the link; counting them 0 keeps the bound a lower bound); cache-aware
  (with ``cache_aware=True``), the same with each part's cache-aware DRAM bytes (its on-chip
  capacity's re-reads and spills), less one copy of each handed-over tensor: taking a tensor from
  the link spares at most its one read or write, a re-read forced by the capacity still comes from
  DRAM; never below the fused time;
- ``C_s``: the stage's collectives (:mod:`.collectives`), including the send of its output to the
  next stage;
- overlapped ``t_s = max(T_s, C_s)`` (communication hidden behind compute), serial ``t_s = T_s + C_s``.

The step (all ``m`` microbatches) is the pipeline's makespan ``sum_s t_s + (m - 1) max_s t_s``: with
equal stages ``(m + p - 1) t``, a bubble of ``(p - 1) / m`` over the ideal ``m t``. Data-parallel
gradient all-reduces (training graphs) run once per step and overlap the backward pass only: they
start when the backward does and the optimizer waits for them, so overlapped
``step = max(makespan, communication total)`` per stage, and unfused without pipeline stages (times
add up over kernels) also ``makespan - T_bwd + C_dp`` (``T_bwd``: the backward bounded on its own, so
at least its share of the step); serial, ``C_dp`` is added. A training
graph's stages hold each layer's forward, backward and optimizer nodes (:func:`.plan.plan`);
activations go forward and gradients back as send/recv. With ``m > 1`` microbatches a training step
accumulates gradients: each stage's forward and backward run per microbatch (batch / m), its optimizer
``O_s`` once per step, and every microbatch after the first reads the gradient sums so far (``A_s``,
unfused only: (m - 1) x the gradient bytes beyond on-chip capacity / DRAM bandwidth); the step is
``max_s max(sum_{s' < s} t_s' + m t_s + A_s, m t_s + A_s + O_s)`` (:func:`.accumulate.accumulating_makespan`):
``(m + p - 1) t`` for equal stages, as 1F1B and GPipe, a bubble of ``(p - 1) / (m + p - 1)`` of the step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from solar_io.footprint import access_elements
from solar_io.graph import Graph
from solar_io.hardware import HardwareSpec
from solar_io.metrics import tensor_bytes

from .accumulate import accumulating_makespan, gradient_accumulation
from .collectives import Collective, Priced, price
from .layout import Layout, ParallelError
from .plan import Plan, plan, stage_graph
from .rules import phase
from .shard import consumers, producers
from .system import System, chip_system, load_system

#: The fidelities of a many-chip bound; the cache-aware one only with ``cache_aware=True``.
FIDELITIES = ("unfused", "fused", "cache-aware")


@dataclass(frozen=True, slots=True)
class ChipTime:
    """One chip's own work in one fidelity: seconds of compute, of DRAM traffic, and the bound."""

    compute: float
    memory: float
    time: float


@dataclass(frozen=True)
class StageResult:
    """One pipeline stage (one chip of it) per microbatch."""

    index: int
    nodes: int
    parts: tuple[str, ...]  # the segments' labels
    work: dict[str, ChipTime]  # per fidelity
    collectives: tuple[Priced, ...]
    weight_bytes: float
    notes: tuple[str, ...] = ()  # the single-chip bound's notes (precision policy, clock, residency)
    #: a training step with microbatches > 1: the optimizer's work, once per step (``work`` is then the
    #: forward and backward of one microbatch), and per fidelity the seconds of gradient accumulation per step
    step_work: dict[str, ChipTime] | None = None
    accumulation: dict[str, float] = field(default_factory=dict)

    @property
    def comm(self) -> float:
        """Seconds of communication per microbatch (gradient all-reduces, once per step, excluded)."""
        return math.fsum(p.total for p in self.collectives if p.collective.dim not in ("dp", "edp"))

    @property
    def dp_comm(self) -> float:
        """Seconds of the gradient all-reduces of this stage's weights (once per step)."""
        return math.fsum(p.total for p in self.collectives if p.collective.dim in ("dp", "edp"))


@dataclass(frozen=True)
class ParallelReport:
    """The bound of a graph sharded by ``layout`` on ``system`` (see the module docstring)."""

    graph: str | None
    system: System
    layout: Layout
    microbatches: int
    plan: Plan
    stages: tuple[StageResult, ...]
    overlapped: dict[str, float]  # per fidelity: step seconds, communication overlapped
    serial: dict[str, float]  # per fidelity: step seconds, communication after compute
    assumptions: tuple[str, ...]
    allreduce: str = "ring"
    measured: float | None = None  # a measured step time (seconds), for the headroom
    fidelities: tuple[str, ...] = FIDELITIES[:2]  # those computed (cache-aware with cache_aware=True)

    def headroom(self, fidelity: str) -> float | None:
        """measured / the overlapped SOL of ``fidelity`` (None without a measurement)."""
        t = self.overlapped[fidelity]
        return self.measured / t if self.measured is not None and t > 0 else None

    @property
    def bubble(self) -> float:
        """The pipeline bubble of equal stages, (stages - 1) / microbatches."""
        return (self.layout.pp - 1) / self.microbatches

    def collective_seconds(self, kind: str) -> float:
        """Seconds per step of every ``kind`` collective (e.g. 'all-reduce') on the busiest stage's chip."""
        m = self.microbatches
        return max((math.fsum(p.total * (1 if p.collective.dim in ("dp", "edp") else m) for p in s.collectives
                              if p.collective.kind == kind) for s in self.stages), default=0.0)


def _bytes(g: Graph, t: str) -> float:
    return tensor_bytes(g, g.tensor_map[t])


def _read_bytes(g: Graph, n, t: str) -> float:  # noqa: ANN001 - a Node
    """Bytes of ``t`` that node ``n`` touches (the largest of its accesses; all of it when unknown)."""
    tensor = g.tensor_map[t]
    touched = [access_elements(a, tensor.ranks, g.rank_sizes)[0] for a in n.inputs if a.tensor == t]
    return tensor_bytes(g, tensor, max(touched)) if touched else _bytes(g, t)


def _compose(graphs: list[Graph], whole: Graph, hw: HardwareSpec, bound_options: dict,
             notes: list[str] | None = None) -> dict[str, ChipTime]:
    """The parts' single-chip bounds joined as one chip's work (module docstring); their notes are
    appended to ``notes``."""
    import solar_io

    reports = [solar_io.bound(sg, hw, **bound_options) for sg in graphs]
    if notes is not None:
        for r in reports:
            policy = getattr(getattr(r, "precision", None), "policy", None)
            for line in ([f"precision policy: {policy}"] if policy else []) + list(r.notes):
                if line not in notes:
                    notes.append(line)
    u = [r.unfused for r in reports]
    unfused = ChipTime(math.fsum(f.compute_time or 0.0 for f in u), math.fsum(f.memory_time or 0.0 for f in u),
                       math.fsum(f.time or 0.0 for f in u))
    units: dict[str, float] = {}
    boundary = cached = 0.0
    for sg, r in zip(graphs, reports, strict=True):
        for unit, t in r.fused.unit_times:
            units[unit] = units.get(unit, 0.0) + t
        cut = math.fsum(_bytes(sg, t.name) for t in sg.tensors if t.role in ("input", "output")
                        and whole.tensor_map[t.name].role == "intermediate")
        boundary += max(0.0, (r.fused.bytes or 0.0) - cut)
        cached += max(0.0, (r.cache_aware.bytes or 0.0) - cut) if r.cache_aware.computed else 0.0
    bw = float(hw.dram_bandwidth or 0.0)
    f_compute = max(units.values(), default=0.0)
    f_memory = boundary / bw if bw else 0.0
    fused = ChipTime(f_compute, f_memory, max(f_compute, f_memory))
    out = {"unfused": unfused, "fused": fused}
    if bound_options.get("cache_aware"):
        missing = [sg.name for sg, r in zip(graphs, reports, strict=True) if not r.cache_aware.computed]
        if missing and notes is not None:
            notes.append(f"cache-aware: not computed for {', '.join(map(str, missing))}; the fused bound stands for it")
        c_memory = f_memory if missing else max(f_memory, cached / bw if bw else 0.0)
        out["cache-aware"] = ChipTime(f_compute, c_memory, max(f_compute, c_memory))
    return out


def _collectives(p: Plan, stage: int, parts: list[tuple[str, frozenset[str], dict[str, Fraction]]],
                 graphs: list[Graph]) -> list[Collective]:
    """The collectives stage ``stage`` needs per microbatch (and its gradient all-reduces per step)."""
    g = p.graph
    lay = p.layout
    made_by, readers = producers(g), consumers(g)
    part_of = {n: label for label, nodes, _ in parts for n in nodes}
    sized = {t.name: (sg, t) for sg in graphs for t in sg.tensors if made_by.get(t.name) in {n.name for n in sg.nodes}}
    here = set(p.stages[stage]) - p.ep_dropped
    out: list[Collective] = []
    if p.ep_collectives and here & p.ep_nodes and not any(p.ep_nodes & set(s) for s in p.stages[:stage]):
        out.extend(p.ep_collectives)  # experts as separate modules (.experts): dispatch and combine
    for name in p.partial:
        if name not in here:
            continue
        t = g.node_map[name].outputs[0].tensor
        users = readers.get(t, [])
        to_sp = users and all(part_of.get(u) == "sequence-parallel" for u in users)
        kind = "reduce-scatter" if to_sp else "all-reduce"
        out.append(Collective(kind, "tp", t, _bytes(g, t), f"{name} sums partial products over the TP group"))
    for n in g.nodes:
        if n.name not in here:
            continue
        for t in dict.fromkeys(a.tensor for a in n.inputs):
            src = made_by.get(t)
            if part_of.get(n.name) == "expert-parallel" and (src is None or part_of.get(src) != "expert-parallel"):
                ranks = g.tensor_map[t].ranks
                if (g.tensor_map[t].role not in ("weight", "constant") and p.ep_rank not in ranks
                        and p.ep_tokens in ranks and not any(c.tensor == t for c in out)):
                    out.append(Collective("all-gather", "ep", t, lay.ep * _bytes(g, t),
                                          f"{n.name} runs its experts on the tokens of all {lay.ep} EP ranks"))
            if (src in p.sp_nodes and n.name not in p.sp_nodes  # from this stage or an earlier one
                    and not any(c.tensor == t and c.kind == "all-gather" for c in out)):
                read = _read_bytes(g, n, t)  # a slice needs only its part
                out.append(Collective("all-gather", "tp", t, min(read, _bytes(g, t)),
                                      f"{n.name} needs {'all' if read >= _bytes(g, t) else 'part'} of {t}, which "
                                      "the sequence-parallel part splits"))
            if src is None or src not in here:
                continue
            a, b = part_of.get(src), part_of.get(n.name)
            if a == b:
                continue
            if (a == "expert-parallel") != (b == "expert-parallel") and p.ep_rank in g.tensor_map[t].ranks:
                if not any(c.tensor == t and c.kind == "all-to-all" for c in out):
                    why = "dispatch to the experts' chips" if b == "expert-parallel" else "combine from the experts"
                    out.append(Collective("all-to-all", "ep", t, _bytes(g, t), f"{n.name}: {why}"))
    if len(p.stages) > 1:
        stage_of = {x: i for i, names in enumerate(p.stages) for x in names}
        for n in g.nodes:
            if n.name not in here:
                continue
            for a in n.outputs:
                to = sorted({stage_of[u] for u in readers.get(a.tensor, ()) if stage_of[u] != stage})
                if to:  # forward activations go to later stages, gradients of a training step back
                    sg, t = sized.get(a.tensor, (g, g.tensor_map[a.tensor]))
                    what = "activation" if to[0] > stage else "gradient"
                    out.append(Collective("send/recv", "pp", a.tensor, tensor_bytes(sg, t) * len(to),
                                          f"stage {stage} -> {', '.join(map(str, to))}: {what}"))
    if lay.dp > 1 and p.gradients:
        plain = [t for t in p.gradients if made_by.get(t) in here and part_of.get(made_by[t]) != "expert-parallel"]
        experts = [t for t in p.gradients if made_by.get(t) in here and part_of.get(made_by[t]) == "expert-parallel"]
        if plain:
            out.append(Collective("all-reduce", "dp", f"{len(plain)} gradients",
                                  math.fsum(_bytes(g, t) for t in plain), "data-parallel gradient sum", 1, "backward"))
        if experts and lay.dp // lay.ep > 1:
            nb = math.fsum(tensor_bytes(*sized[t]) if t in sized else _bytes(g, t) for t in experts)
            out.append(Collective("all-reduce", "edp", f"{len(experts)} expert gradients", nb,
                                  "expert gradients summed over the replicas holding the same experts", 1, "backward"))
    return out


def _groups(lay: Layout, dim: str, stage: int) -> list[list[int]]:
    per_stage = lay.tp * lay.dp
    lo, hi = stage * per_stage, (stage + 1) * per_stage
    if dim == "pp":  # a stage's chips and the next (or previous) stage's: one hop of the same kind
        return [[c, c + per_stage] if stage + 1 < lay.pp else [c - per_stage, c] for c in range(lo, hi)]
    if dim == "edp":
        n, stride = lay.dp // lay.ep, lay.tp * lay.ep
        return [[base + k * stride for k in range(n)] for base in range(lo, lo + stride)]
    return [gr for gr in lay.groups(dim) if lo <= gr[0] < hi]



def parallel_bound(graph: Graph, hw: HardwareSpec | str | None = None, layout: Layout | None = None, *,
                   system: System | str | None = None, microbatches: int = 1, allreduce: str = "ring",
                   measured: float | str | None = None, **bound_options) -> ParallelReport:
    """Bound ``graph`` (one data-parallel replica's step) sharded by ``layout`` on ``system`` (a
    :class:`System`, a shipped system name, a path) or on ``layout.chips`` chips ``hw`` joined by its own
    links. ``allreduce``: ``ring`` (default) or ``in-network`` (switches reduce, :mod:`.collectives`).
    ``measured``: a measured step time (seconds or ``'5.9ms'``) for the headroom. ``bound_options`` go to
    ``solar_io.bound`` (e.g. ``strict_fp32=True``)."""
    if allreduce not in ("ring", "in-network"):
        raise ParallelError(f"--allreduce: {allreduce!r} is neither ring nor in-network")
    in_network = allreduce == "in-network"
    if isinstance(measured, str):
        from solar_io.units import parse_time

        measured = parse_time(measured, "--measured")
    if measured is not None and not (measured > 0 and math.isfinite(measured)):
        raise ParallelError(f"--measured: must be a positive time, got {measured!r}")
    import solar_io
    from solar_io.hardware import load_spec
    from solar_io.hardware.catalog import split_clock

    layout = layout or Layout()
    if isinstance(hw, str):  # NAME@CLOCK: every chip at that core clock (solar_io.bound's clock option)
        hw, clock = split_clock(hw)
        if clock is not None and bound_options.get("clock") not in (None, clock):
            raise ParallelError(f"--hw {hw}@{clock} and --clock {bound_options['clock']}: give one clock")
        if clock is not None:
            bound_options = {**bound_options, "clock": clock}
    if system is not None:
        sysm = system if isinstance(system, System) else load_system(system)
        if hw is not None:
            spec = hw if isinstance(hw, HardwareSpec) else load_spec(hw)
            if spec.name != sysm.chip.name:
                raise ParallelError(f"--hw {spec.name} and --system {sysm.name} (chip {sysm.chip.name}) disagree; "
                                    "give one")
    else:
        if hw is None:
            raise ParallelError("give --hw CHIP or --system NAME")
        spec = hw if isinstance(hw, HardwareSpec) else load_spec(hw)
        sysm = chip_system(spec, layout.chips)
    if layout.chips > sysm.chips:
        raise ParallelError(f"--parallel {layout}: {layout.chips} chips, system {sysm.name} has {sysm.chips}")
    chip = sysm.chip
    unfused_only = {**bound_options, "cache_aware": False}  # for node times and the backward: no tiling search
    one = solar_io.bound(graph, chip, **unfused_only) if layout.pp > 1 else None
    times = {n.name: n.time for n in one.nodes} if one is not None else None
    p = plan(graph, layout, microbatches, times)
    stages = []
    accumulate = p.training and microbatches > 1
    for s in range(len(p.stages)):
        parts = p.segments(s)
        per_mb, once = parts, []
        if accumulate:  # the optimizer runs once per step, the rest once per microbatch
            opt = {n for n in p.stages[s] if phase(p.graph.node_map[n]) == "optimizer"}
            per_mb = [(label, nodes - opt, f) for label, nodes, f in parts if nodes - opt]
            once = [(label, nodes & opt, f) for label, nodes, f in parts if nodes & opt]
        name = graph.name or "graph"
        graphs = [stage_graph(p, s, f"{name}.stage{s}.{label}", nodes, f) for label, nodes, f in per_mb]
        opt_graphs = [stage_graph(p, s, f"{name}.stage{s}.optimizer.{label}", nodes, f) for label, nodes, f in once]
        notes: list[str] = []
        work = _compose(graphs, p.graph, chip, bound_options, notes)
        step_work = _compose(opt_graphs, p.graph, chip, bound_options, notes) if opt_graphs else None
        priced = tuple(price(c, sysm, _groups(layout, c.dim, s), in_network)
                       for c in _collectives(p, s, parts, graphs + opt_graphs))
        wbytes = math.fsum(tensor_bytes(sg, t) for sg in graphs + opt_graphs for t in sg.tensors
                           if t.role == "weight")
        acc = gradient_accumulation(p, s, graphs, chip, microbatches, bound_options) if accumulate else {}
        stages.append(StageResult(s, len(p.stages[s]), tuple(x[0] for x in parts), work, priced, wbytes,
                                  tuple(notes), step_work, acc))
    m = microbatches
    overlapped, serial = {}, {}
    fidelities = FIDELITIES if bound_options.get("cache_aware") else FIDELITIES[:2]
    for f in fidelities:
        t_over = [max(st.work[f].time, st.comm) for st in stages]
        t_ser = [st.work[f].time + st.comm for st in stages]
        if accumulate:
            make_over = accumulating_makespan(stages, t_over, f, m)
            make_ser = accumulating_makespan(stages, t_ser, f, m)
        else:
            make_over = math.fsum(t_over) + (m - 1) * max(t_over)
            make_ser = math.fsum(t_ser) + (m - 1) * max(t_ser)
        dp = max((st.dp_comm for st in stages), default=0.0)
        over = make_over
        for st in stages:  # a stage's gradient all-reduce starts with its backward; the optimizer waits for it
            if st.dp_comm > 0:
                over = max(over, m * st.comm + st.dp_comm)
                if f == "unfused" and len(stages) == 1:  # unfused times add up: only the backward can hide it
                    over = max(over, make_over - _backward_time(p, st, chip, bound_options, graph.name)
                               + st.dp_comm)
        overlapped[f], serial[f] = over, make_ser + dp
    return ParallelReport(graph.name, sysm, layout, m, p, tuple(stages), overlapped, serial,
                          _assumptions(p, sysm, stages, in_network, fidelities), allreduce, measured, fidelities)


def _backward_time(p: Plan, st: StageResult, chip: HardwareSpec, opts: dict, name: str | None) -> float:
    """Unfused seconds of one microbatch's backward on the chip, bounded alone: at least what it takes
    inside the whole step (alone, it keeps nothing on chip from the forward), so ``makespan - it`` is at
    most the rest of the step."""
    graphs = []
    for label, nodes, f in p.segments(st.index):
        sel = frozenset(n for n in nodes if phase(p.graph.node_map[n]) == "backward")
        if sel:
            graphs.append(stage_graph(p, st.index, f"{name or 'graph'}.backward.{label}", sel, f))
    return _compose(graphs, p.graph, chip, {**opts, "cache_aware": False})["unfused"].time if graphs else 0.0


def _assumptions(p: Plan, s: System, stages: list[StageResult], in_network: bool = False,
                 fidelities: tuple[str, ...] = FIDELITIES[:2]) -> tuple[str, ...]:
    up, out = s.scale_up, s.scale_out
    lines = [f"system: {s.full_name}: {s.chips_per_node} chips per node, {s.nodes} node(s); layout {p.layout} on "
             f"{p.layout.chips} chips (tp innermost, then dp, then pp; ep groups inside dp)"]
    if up is not None:
        lines.append(f"links: inside a node {up.kind} at {up.bandwidth:.4g} B/s per chip each way"
                     + (f" ({up.domain}-chip domain)" if up.domain else ""))
    if out is not None:
        lines.append(f"links: across nodes {out.kind} at {out.bandwidth:.4g} B/s per chip each way "
                     "(one interface per chip, non-blocking fabric)")
    if not any(ln is not None and ln.latency for ln in (up, out)):
        lines.append("latency: link latency assumed 0 (no vendor datasheet in the specs publishes an NVLink or "
                     "InfiniBand latency): 0 s per collective step, bandwidth terms only, still a lower bound")
    ar = ("all-reduce reduced in the switches (--allreduce in-network) (n-1)/n B/bw" if in_network else
          "all-reduce 2(n-1)/n B/bw (--allreduce in-network: switches that reduce, NVLink or InfiniBand SHARP, "
          "need half)")
    lines.append(f"collectives: ring formulas ({ar}; all-gather, reduce-scatter, all-to-all (n-1)/n B/bw; send/recv "
                 "B/bw); groups spanning nodes run hierarchically, the slower level binding")
    lines.append("inputs: graph inputs over split ranks (a KV cache split by heads, token ids split by SP) are taken "
                 "as already distributed; outputs over split ranks stay distributed (no final gather)")
    lines.append("fidelities: unfused, fused and cache-aware per chip; cache-aware: each part's cache-aware DRAM bytes "
                 "less one copy of each tensor a collective hands between parts" if "cache-aware" in fidelities
                 else "fidelities: unfused and fused per chip (cache-aware not requested)")
    lines.append(f"pipeline: {len(stages)} stage(s), {p.microbatches} microbatch(es), bubble (stages-1)/microbatches "
                 f"= {(len(stages) - 1) / p.microbatches:.4g}; stages cut at layer boundaries, balanced by one chip's "
                 "unfused node times")
    if p.training and p.microbatches > 1:
        lines.append(f"gradient accumulation: forward and backward per microbatch, the optimizer once per step after "
                     f"its stage's last backward; every microbatch after the first reads the gradient sums so far "
                     f"(unfused: (m-1) x the stage's gradient bytes beyond on-chip capacity / DRAM bandwidth; fused: "
                     f"kept on chip); step = max over stages of max(sum of earlier stages' t + m t_s + A_s, "
                     f"m t_s + A_s + O_s): equal stages (m+p-1) t, bubble (p-1)/(m+p-1) = "
                     f"{(len(stages) - 1) / (p.microbatches + len(stages) - 1):.4g} of the step")
    if p.layout.dp > 1 and not p.training:
        lines.append(f"dp={p.layout.dp}: replicas of an inference graph exchange nothing; the step time is one "
                     f"replica's and throughput is {p.layout.dp} x")
    chip_notes = dict.fromkeys(n for st in stages for n in st.notes)
    return (*lines, *p.notes, *(f"single-chip bound: {n}" for n in chip_notes))


__all__ = ["FIDELITIES", "ChipTime", "ParallelReport", "StageResult", "parallel_bound"]
