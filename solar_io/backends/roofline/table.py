"""SOL reports as readable tables (rich), for a terminal or a text file."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from solar_io.units import format_ratio, format_si, format_time

from ..result import InverseFidelity, Report

DEFAULT_TOP = 15


def _unit_of(resource: str) -> str:
    return "B/s" if resource == "dram" else ("results/s" if resource.startswith("special") else "FLOP/s")


def _work_unit(resource: str) -> str:
    return "B" if resource == "dram" else ("results" if resource.startswith("special") else "FLOP")


def _fidelity_table(r: Report) -> Table:
    t = Table(title="Speed of light (lower bounds)", title_justify="left")
    for col, just in (("fidelity", "left"), ("SOL", "right"), ("compute", "right"), ("memory", "right"),
                      ("DRAM bytes", "right"), ("bound by", "left"), ("headroom", "right")):
        t.add_column(col, justify=just)
    for f in r.fidelities:
        if not f.computed:
            t.add_row(f.name, "not computed", "-", "-", "-", "-", "-", style="dim")
            continue
        t.add_row(f.name, format_time(f.time), format_time(f.compute_time), format_time(f.memory_time),
                  format_si(f.bytes, "B"), f.bottleneck or "-", format_ratio(f.headroom))
    return t


def _resources_table(r: Report) -> Table:
    t = Table(title="Resources (peaks used)", title_justify="left")
    for col in ("resource", "rate", "work unfused", "work fused", "time unfused"):
        t.add_column(col, justify="left" if col == "resource" else "right")
    per = {k: 0.0 for k in (x.key for x in r.resources)}
    for n in r.nodes:
        for ld in n.loads:
            per[ld.resource] = per.get(ld.resource, 0.0) + ld.time
    for x in r.resources:
        t.add_row(x.key, format_si(x.rate, _unit_of(x.key)), format_si(x.work_unfused, _work_unit(x.key)),
                  format_si(x.work_fused, _work_unit(x.key)), format_time(per.get(x.key, 0.0)))
    return t


def _nodes_table(r: Report, top: int) -> Table:
    shown = r.top(top)
    t = Table(title=f"Top {len(shown)} of {len(r.nodes)} nodes by unfused SOL", title_justify="left")
    for col in ("node", "op", "dtype", "MACs", "FLOPs", "bytes", "FLOP/B", "compute", "memory", "SOL", "bound by"):
        t.add_column(col, justify="left" if col in ("node", "op", "dtype", "bound by") else "right",
                     no_wrap=col in ("node", "FLOP/B"))
    for n in shown:
        flops = n.flops_matrix + n.flops_vector
        dt = n.compute_dtype or "-"
        if n.precision:
            dt += f" ({n.precision})"
        if n.effectual_fraction < 1.0:
            dt += f" (x{n.effectual_fraction:.3g})"
        compute = format_time(n.compute_time) if n.compute_known else "unknown"
        bn = n.bottleneck + (" (compute unknown)" if not n.compute_known else "")
        bn += f" (unpriced: {', '.join(n.unpriced)})" if n.unpriced else ""
        t.add_row(n.name, n.op, dt, format_si(n.macs, ""), format_si(flops, ""), format_si(n.bytes, "B"),
                  "-" if n.intensity is None else f"{n.intensity:.3g}", compute, format_time(n.memory_time),
                  format_time(n.time), bn, style=None if n.compute_known else "yellow")
    return t


def _groups_table(r: Report, top: int) -> Table:
    c = r.cache
    assert c is not None
    shown = sorted(c.groups, key=lambda gr: -gr.time)[:top]
    t = Table(title=f"Cache-aware groups: top {len(shown)} of {len(c.groups)} by time", title_justify="left")
    # Q(S) is the group's DRAM traffic after the residency credit (bytes an earlier group left on chip),
    # so it can be below the floor; Q/floor compares the floor with Q before that credit (Q(S) + resident).
    cols = ("nodes", "kind", "Q(S)", "resident", "floor", "Q/floor", "avoided", "compute", "SOL", "tiling")
    for col in cols:
        t.add_column(col, justify="left" if col in ("nodes", "kind", "tiling") else "right")
    for gr in shown:
        names = gr.nodes[0] if len(gr.nodes) == 1 else f"{gr.nodes[0]} .. {gr.nodes[-1]} ({len(gr.nodes)})"
        ratio = "-" if gr.floor_ratio is None else f"{gr.floor_ratio:.3g}"
        t.add_row(names, gr.kind, format_si(gr.traffic, "B"), format_si(gr.resident, "B"), format_si(gr.floor, "B"),
                  ratio, format_si(gr.avoided, "B"), format_time(gr.compute),
                  format_time(gr.time), gr.detail)
    return t


def _inverse_table(f: InverseFidelity, target: float) -> Table:
    verdict = "feasible" if f.feasible else "NOT feasible"
    t = Table(title=f"Inverse roofline, {f.fidelity}: target {format_time(target)}, chip SOL "
                    f"{format_time(f.chip_time)} ({verdict}); whole chip must be x{f.chip_scale:.3g}",
              title_justify="left")
    for col in ("resource", "chip", "any chip needs", "ratio", "with the chip's rest", "ratio", "binding"):
        t.add_column(col, justify="left" if col in ("resource", "binding") else "right")
    for q in f.requirements:
        unit = _unit_of(q.resource)
        rest = "unreachable" if q.with_chip_rest is None else format_si(q.with_chip_rest, unit)
        t.add_row(q.resource, format_si(q.chip, unit), format_si(q.any_chip, unit), format_ratio(q.any_chip_ratio),
                  rest, format_ratio(q.with_chip_rest_ratio), "yes" if q.binding else "")
    return t


def warnings(r: Report) -> list[str]:
    """Lines about work the bound could not price: opaque nodes and work without a peak."""
    out = []
    if r.opaque:
        out.append(f"compute of {len(r.opaque)} opaque node(s) is UNKNOWN; the bound counts only their bytes: "
                   + ", ".join(r.opaque[:10]) + (" ..." if len(r.opaque) > 10 else ""))
    if r.unpriced:
        shown = ", ".join(f"{n} ({w})" for n, w in r.unpriced[:10]) + (" ..." if len(r.unpriced) > 10 else "")
        out.append(f"chip {r.hardware} publishes no peak for some work, counted as zero time: {shown}")
    if r.fused.headroom is not None and r.fused.headroom < 1.0:
        out.append(f"the measured time {format_time(r.measured)} beats the fused SOL {format_time(r.fused.time)} on "
                   f"{r.hardware}: a lower bound cannot be beaten; check the measurement, the graph and the spec")
    return out


def report_renderables(r: Report, top: int = DEFAULT_TOP) -> list[RenderableType]:
    """Everything the table view shows for one chip."""
    head = Text(f"{r.graph or 'graph'} on {r.hardware_full_name} ({r.hardware}): DRAM "
                f"{format_si(r.dram_bandwidth, 'B/s')}", style="bold")
    parts: list[RenderableType] = [head]
    opts = [f"--dtype {r.options.dtype}"] if r.options.dtype else []
    opts += ["--strict-fp32"] if r.options.strict_fp32 else []
    opts += ["--strict-dequant"] if r.options.strict_dequant else []
    opts += [f"--clock {format_si(r.options.clock_hz, 'Hz')}"] if r.options.clock_hz else []
    if r.options.compute_dtype:
        opts.append("--compute-dtype " + ",".join(f"{k}={v}" for k, v in r.options.compute_dtype))
    if opts:
        parts.append(Text("options: " + " ".join(opts)))
    if r.precision is not None:
        parts.append(Text("precision policy: " + r.precision.policy))
        parts += [Text("  repriced " + x.describe()) for x in r.precision.repriced]
    parts.append(_fidelity_table(r))
    gain = r.fusion_gain
    parts.append(Text(f"fusion gain (unfused / fused): {format_ratio(gain)}"
                      + (f"; measured {format_time(r.measured)}" if r.measured is not None else "")))
    if r.unfused.headroom is not None and r.unfused.headroom < 1.0 <= (r.fused.headroom or 0.0):
        parts.append(Text("the measured time beats the unfused bound: the implementation must fuse nodes"))
    if r.cache is not None:
        parts.append(Text("cache-aware: " + r.cache_aware.note))
        parts.append(_groups_table(r, top))
    parts += [_resources_table(r), _nodes_table(r, top)]
    if r.inverse is not None:
        inv = r.inverse
        parts += [_inverse_table(f, inv.target_latency) for f in inv.fidelities]
    for w in warnings(r):
        parts.append(Text("warning: " + w, style="bold yellow"))
    for note in r.notes:
        parts.append(Text("note: " + note, style="dim"))
    return parts


def comparison_table(reports: Sequence[Report]) -> Table:
    """Side-by-side projection of the graph on several chips (cache-aware columns when computed)."""
    measured = any(r.measured is not None for r in reports)
    target = any(r.inverse is not None for r in reports)
    cache = any(r.cache_aware.computed for r in reports)
    fids = ("unfused", "fused") + (("cache-aware",) if cache else ())
    t = Table(title="Comparison", title_justify="left")
    cols = ["chip", "unfused", "fused"] + (["cache-aware"] if cache else []) + ["fusion gain"]
    cols += [f"bound by ({f})" for f in fids]
    cols += [f"headroom {f}" for f in fids] if measured else []
    cols += [f"chip scale {f}" for f in fids] if target else []
    for c in cols:
        t.add_column(c, justify="left" if c == "chip" or c.startswith("bound") else "right")
    for r in reports:
        by = {"unfused": r.unfused, "fused": r.fused, "cache-aware": r.cache_aware}
        row = [r.hardware, format_time(r.unfused.time), format_time(r.fused.time)]
        if cache:
            row.append(format_time(r.cache_aware.time) if r.cache_aware.computed else "-")
        row.append(format_ratio(r.fusion_gain))
        row += [by[f].bottleneck or "-" for f in fids]
        if measured:
            row += [format_ratio(by[f].headroom) for f in fids]
        if target:
            inv = r.inverse
            scales = [inv.fidelity(f) if inv else None for f in fids]
            row += [format_ratio(x.chip_scale) if x is not None else "-" for x in scales]
        t.add_row(*row)
    return t


def render(reports: Sequence[Report], top: int = DEFAULT_TOP, console: Console | None = None,
           width: int = 160) -> str:
    """Print the tables on ``console``; without one, return them as plain text."""
    parts: list[RenderableType] = []
    for r in reports:
        parts += report_renderables(r, top)
        parts.append(Text(""))
    if len(reports) > 1:
        parts.append(comparison_table(reports))
    if console is not None:
        console.print(Group(*parts))
        return ""
    buf = io.StringIO()
    Console(file=buf, width=width, highlight=False, color_system=None, force_terminal=False).print(Group(*parts))
    return buf.getvalue()


__all__ = ["DEFAULT_TOP", "comparison_table", "render", "report_renderables", "warnings"]
