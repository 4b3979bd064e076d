"""HTML reports: one self-contained file (CSS and JavaScript inline, nothing fetched from a network).

:func:`sol_report_html` renders a ``solar-io.sol-report`` document (``bound --format html``): the
fidelity table per chip, headroom when a measured time is given, the inverse roofline, an
interactive roofline per chip (one point per node; hover shows the node, click filters the table
to it), a sortable and filterable per-node table, and the graph picture when one is given.
:func:`corpus_report_html` renders a folder report (``report DIR --html``): one row and one
point per model.

>>> from solar_io.reports.html import roofline_svg, Point
>>> svg = roofline_svg([Point("mm", "mm: 1 ms", 2e12, 1e9, 1e-3, "matrix")], [("matrix/bf16", 1e15)], 3e12)
>>> svg.count("<circle")
1
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from ..units import format_si, format_time

#: Colour of each bottleneck (the CSS classes b-NAME use the same).
COLOURS = {"matrix": "#1f6feb", "vector": "#1a7f37", "special": "#8250df", "memory": "#cf222e", "none": "#6e7781"}
FIDELITIES = (("unfused", "unfused"), ("fused", "fused"), ("cache_aware", "cache-aware"))


def _asset(name: str) -> str:
    return files("solar_io.reports").joinpath("html_assets", name).read_text(encoding="utf-8")


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


@dataclass(frozen=True)
class Point:
    """One roofline point: ``flops`` over ``bytes`` (x) at ``flops / seconds`` (y)."""

    name: str
    label: str
    flops: float
    bytes: float
    seconds: float
    bottleneck: str = "none"
    row: str | None = None  # id of the table row it belongs to


@dataclass(frozen=True)
class Column:
    title: str
    numeric: bool = True


def _fmt(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    if unit == "s":
        return format_time(x)
    return format_si(x, unit) if unit else (f"{x:.3g}" if abs(x) < 1000 else format_si(x, "").strip())


def _cell(value: Any, text: str | None = None, cls: str = "") -> str:
    numeric = value is not None and not isinstance(value, (bool, str)) and hasattr(value, "__float__")
    sort = f' data-v="{float(value)!r}"' if numeric else ""  # numpy scalars too
    c = f' class="{cls}"' if cls else ""
    return f"<td{c}{sort}>{esc(value if text is None else text)}</td>"


def table(table_id: str, columns: Sequence[Column], rows: Sequence[Sequence[str]], row_ids: Sequence[str] = (),
          filterable: bool = True, scroll: bool = True) -> str:
    """A sortable table (click a header); with ``filterable`` a box that keeps rows holding every word typed.
    ``rows`` hold ready ``<td>`` strings (see :func:`_cell`)."""
    head = "".join(f'<th class="{"" if c.numeric else "text"}">{esc(c.title)}</th>' for c in columns)
    trs = []
    for i, r in enumerate(rows):
        rid = f' id="{esc(row_ids[i])}"' if row_ids else ""
        trs.append(f"<tr{rid}>{''.join(r)}</tr>")
    body = "\n".join(trs)
    out = []
    if filterable:
        out.append(f'<div class="filter"><input type="search" placeholder="filter rows (words: name, op, '
                   f'bottleneck...)" data-filter-for="{esc(table_id)}"><span class="count" '
                   f'data-count-for="{esc(table_id)}"></span></div>')
    tab = (f'<table class="sortable" id="{esc(table_id)}"><thead><tr>{head}</tr></thead>'
           f"<tbody>\n{body}\n</tbody></table>")
    out.append(f'<div class="scroll">{tab}</div>' if scroll else tab)
    return "\n".join(out)


def _ticks(lo: float, hi: float) -> list[float]:
    return [10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]


def roofline_svg(points: Sequence[Point], roofs: Sequence[tuple[str, float]], bandwidth: float, title: str = "",
                 width: int = 760, height: int = 440) -> str:
    """The roofline as inline SVG: x = FLOP/byte, y = FLOP/s, log-log; each roof ``min(rate, bandwidth x)``.
    Every point is drawn: one with no FLOPs or no bytes sits on the axis it cannot leave (class ``edge``)."""
    ml, mr, mt, mb = 64, 16, 24, 40
    pw, ph = width - ml - mr, height - mt - mb
    xs = [p.flops / p.bytes for p in points if p.flops > 0 and p.bytes > 0]
    ys = [p.flops / p.seconds for p in points if p.flops > 0 and p.seconds > 0]
    rates = [r for _, r in roofs if r > 0] or [bandwidth]
    ridge = [r / bandwidth for r in rates]
    x_lo = min(xs + ridge) / 4
    x_hi = max(xs + ridge) * 4
    y_lo = min(ys + [min(rates) / 1e3]) / 4
    y_hi = max(ys + rates) * 2

    def X(x: float) -> float:
        return ml + pw * (math.log10(max(x, x_lo)) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo))

    def Y(y: float) -> float:
        return mt + ph * (1 - (math.log10(max(y, y_lo)) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)))

    out = [f'<svg class="roofline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title or "roofline")}">']
    for t in _ticks(x_lo, x_hi):
        if x_lo <= t <= x_hi:
            out.append(f'<line class="grid" x1="{X(t):.1f}" y1="{mt}" x2="{X(t):.1f}" y2="{mt + ph}"/>'
                       f'<text x="{X(t):.1f}" y="{height - mb + 14}" text-anchor="middle">{t:g}</text>')
    for t in _ticks(y_lo, y_hi):
        if y_lo <= t <= y_hi:
            out.append(f'<line class="grid" x1="{ml}" y1="{Y(t):.1f}" x2="{ml + pw}" y2="{Y(t):.1f}"/>'
                       f'<text x="{ml - 4}" y="{Y(t) + 4:.1f}" text-anchor="end">{esc(format_si(t, ""))}</text>')
    out.append(f'<text x="{ml + pw / 2}" y="{height - 6}" text-anchor="middle">arithmetic intensity (FLOP/byte)</text>'
               f'<text x="12" y="{mt + ph / 2}" transform="rotate(-90 12 {mt + ph / 2})" '
               f'text-anchor="middle">FLOP/s</text>')
    for name, rate in roofs:
        knee = rate / bandwidth
        pts = f"{X(x_lo):.1f},{Y(bandwidth * x_lo):.1f} {X(knee):.1f},{Y(rate):.1f} {X(x_hi):.1f},{Y(rate):.1f}"
        out.append(f'<polyline class="roof" points="{pts}"/>'
                   f'<text x="{X(x_hi) - 4:.1f}" y="{Y(rate) - 4:.1f}" text-anchor="end">{esc(name)} '
                   f'{esc(format_si(rate, "FLOP/s"))}</text>')
    for p in points:
        x = p.flops / p.bytes if p.bytes > 0 else (x_hi if p.flops > 0 else x_lo)
        y = p.flops / p.seconds if p.seconds > 0 and p.flops > 0 else y_lo
        edge = ' class="edge"' if not (p.flops > 0 and p.bytes > 0 and p.seconds > 0) else ""
        row = f' data-row="{esc(p.row)}"' if p.row else ""
        out.append(f'<circle{edge} cx="{X(x):.1f}" cy="{Y(y):.1f}" r="4" fill="{COLOURS.get(p.bottleneck, "#6e7781")}" '
                   f'data-name="{esc(p.name)}" data-label="{esc(p.label)}"{row}><title>{esc(p.label)}</title></circle>')
    out.append("</svg>")
    return "".join(out)


def legend() -> str:
    return '<p class="legend">' + "".join(f'<span class="b-{k}">&#9679; {k}</span>' for k in COLOURS) + \
        "(bound by; x: FLOPs per DRAM byte; a point on an edge has no FLOPs, or no DRAM bytes: all on chip)</p>"


def page(title: str, subtitle: str, sections: Sequence[str]) -> str:
    """The whole document: inline CSS and JavaScript, no external reference."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{esc(title)}</title>"
            f"<style>{_asset('report.css')}</style></head><body>\n<h1>{esc(title)}</h1>\n"
            f"<p class=\"sub\">{esc(subtitle)}</p>\n" + "\n".join(sections) +
            f"\n<div id=\"tip\"></div>\n<script>{_asset('report.js')}</script>\n</body></html>\n")


def _fidelity_table(reports: Sequence[dict]) -> str:
    """One row per chip and fidelity: SOL, what binds it, its compute and memory times, and the headroom."""
    measured = any(r.get("measured_s") for r in reports)
    cols = [Column("chip", False), Column("fidelity", False), Column("SOL"), Column("bound by", False),
            Column("compute"), Column("memory"), Column("DRAM bytes")]
    cols += [Column("measured"), Column("headroom")] if measured else []
    rows = []
    for r in reports:
        for key, label in FIDELITIES:
            f = r["fidelities"][key]
            done = f["status"] == "computed"
            b = f["bottleneck"] or "-"
            cells = [_cell(r["hardware"]["name"], cls="text"), _cell(label, cls="text"),
                     _cell(f["time_s"] if done else None, _fmt(f["time_s"], "s") if done else "not computed"),
                     _cell(b, cls=f"text b-{b}"), _cell(f["compute_s"], _fmt(f["compute_s"], "s")),
                     _cell(f["memory_s"], _fmt(f["memory_s"], "s")), _cell(f["bytes"], _fmt(f["bytes"], "B"))]
            if measured:
                cells += [_cell(r["measured_s"], _fmt(r["measured_s"], "s")),
                          _cell(f["headroom"], f"{f['headroom']:.3g}x" if f["headroom"] else "-")]
            rows.append(cells)
    return table("fidelities", cols, rows, filterable=False, scroll=False)


def _inverse_section(reports: Sequence[dict]) -> str:
    parts = []
    for r in reports:
        inv = r.get("inverse")
        if not inv:
            continue
        target = (f"latency {_fmt(inv['target_latency_s'], 's')}" if inv.get("target_latency_s")
                  else f"rate {inv['target_rate_hz']:g} Hz")
        cols = [Column("fidelity", False), Column("resource", False), Column("chip"), Column("any chip needs"),
                Column("ratio"), Column("binding", False)]
        rows = []
        for key, label in FIDELITIES:
            f = inv["fidelities"].get(key)
            if not f:
                continue
            for q in f["requirements"]:
                unit = "B/s" if q["unit"] == "dram" else ("results/s" if q["unit"] == "special" else "FLOP/s")
                rows.append([_cell(f"{label} (chip SOL {_fmt(f['chip_time_s'], 's')}, "
                                   f"{'feasible' if f['feasible'] else 'NOT feasible'}, x{f['chip_scale']:.3g})",
                                   cls="text"),
                             _cell(q["resource"], cls="text"), _cell(q["chip_rate"], _fmt(q["chip_rate"], unit)),
                             _cell(q["any_chip_rate"], _fmt(q["any_chip_rate"], unit)),
                             _cell(q["any_chip_ratio"], f"{q['any_chip_ratio']:.3g}x"
                                   if q["any_chip_ratio"] is not None else "-"),
                             _cell("yes" if q["binding"] else "", cls="text")])
        parts.append(f"<h3>{esc(r['hardware']['name'])}: target {esc(target)}</h3>" +
                     table(f"inverse-{r['hardware']['name']}", cols, rows, filterable=False, scroll=False))
    return ("<h2>Inverse roofline</h2><p class=\"note\">The compute and bandwidth any chip needs to reach the "
            "target, and the ratio to this chip.</p>" + "".join(parts)) if parts else ""


NODE_COLUMNS = (Column("node", False), Column("op", False), Column("kind", False), Column("dtype", False),
                Column("MACs"), Column("FLOPs"), Column("bytes"), Column("DRAM bytes"), Column("FLOP/B"),
                Column("compute"),
                Column("memory"), Column("SOL"), Column("bound by", False))


def _node_rows(r: dict, prefix: str) -> tuple[list[list[str]], list[str], list[Point]]:
    rows, ids, pts = [], [], []
    for i, n in enumerate(r["nodes"]):
        flops = (n["flops_matrix"] or 0) + (n["flops_vector"] or 0)
        rid = f"{prefix}-n{i}"
        b = n["bottleneck"] or "none"
        rows.append([_cell(n["name"], cls="text"), _cell(n["op"], cls="text"), _cell(n["kind"], cls="text"),
                     _cell(n["compute_dtype"] or "-", cls="text"), _cell(n["macs"], _fmt(n["macs"])),
                     _cell(flops, _fmt(flops)), _cell(n["bytes"], _fmt(n["bytes"], "B")),
                     _cell(n.get("dram_bytes"), _fmt(n.get("dram_bytes"), "B")),
                     _cell(n["intensity"], _fmt(n["intensity"])), _cell(n["compute_s"], _fmt(n["compute_s"], "s")),
                     _cell(n["memory_s"], _fmt(n["memory_s"], "s")), _cell(n["sol_s"], _fmt(n["sol_s"], "s")),
                     _cell(b, cls=f"text b-{b}")])
        ids.append(rid)
        label = (f"{n['name']} ({n['op']})\nSOL {_fmt(n['sol_s'], 's')}, bound by {b}\n"
                 f"{_fmt(flops)} FLOPs, {_fmt(n.get('dram_bytes'), 'B')} DRAM")
        # x is FLOPs per DRAM byte, the bytes memory_s charges (what on-chip memory kept is not re-read),
        # so that no point can sit above the bandwidth roof
        pts.append(Point(n["name"], label, flops, n.get("dram_bytes") or 0.0, n["sol_s"] or 0.0, b, rid))
    return rows, ids, pts


def _roofs(r: dict) -> list[tuple[str, float]]:
    return [(x["resource"], x["rate"]) for x in r["resources"] if x["unit"] in ("matrix", "vector")]


def sol_report_html(doc: dict, graph_picture: str | None = None) -> str:
    """A ``solar-io.sol-report`` document (:func:`solar_io.backends.roofline.report.document`) as one HTML page.
    ``graph_picture``: inline SVG (or Mermaid text, shown as text) of the graph."""
    reports = doc["reports"]
    name = doc["graph"]["name"] or "graph"
    chips = ", ".join(r["hardware"]["name"] for r in reports)
    first = reports[0]
    sections = ["<h2>Speed of light per fidelity</h2><p class=\"note\">Lower bounds: a real run never beats them. "
                "Unfused: each kernel alone; fused: one kernel, unlimited on-chip memory; cache-aware: finite "
                "on-chip memory, tiling and fusion." + (" Headroom = measured / SOL." if first.get("measured_s")
                                                        else "") + "</p>", _fidelity_table(reports)]
    notes = []
    if first.get("precision"):
        notes.append(f"precision policy: {first['precision']['policy']}")
    notes += first.get("notes", [])
    if first.get("opaque_nodes"):
        notes.append(f"{len(first['opaque_nodes'])} opaque node(s), compute unknown: "
                     f"{', '.join(first['opaque_nodes'][:20])}")
    if notes:
        sections.append("<ul class=\"note\">" + "".join(f"<li>{esc(x)}</li>" for x in notes) + "</ul>")
    sections.append(_inverse_section(reports))
    for k, r in enumerate(reports):
        chip = r["hardware"]["name"]
        rows, ids, pts = _node_rows(r, f"c{k}")
        shown = "" if r["nodes_shown"] == r["totals"]["nodes"] else \
            f" (the {r['nodes_shown']} slowest of {r['totals']['nodes']})"
        sections.append(f"<h2>Roofline on {esc(chip)}</h2><p class=\"note\">One point per node{esc(shown)}; "
                        f"hover for the node, click to find it in the table.</p>" + legend() +
                        roofline_svg(pts, _roofs(r), r["hardware"]["dram_bandwidth"], f"roofline on {chip}"))
        sections.append(f"<h2>Nodes on {esc(chip)}</h2>" + table(f"nodes-{k}", NODE_COLUMNS, rows, ids))
    if graph_picture:
        body = graph_picture if graph_picture.lstrip().startswith("<svg") else \
            f"<pre class=\"mermaid\">{esc(graph_picture)}</pre>"
        sections.append(f"<h2>Graph</h2><div class=\"graph\">{body}</div>")
    return page(f"solar-io: {name}", f"{doc['graph']['nodes']} nodes on {chips}", sections)


def report_html(*reports: Any, graph_picture: str | None = None) -> str:
    """The page of one or more :class:`solar_io.Report` objects (every node), as ``bound --format html``."""
    from ..backends.roofline.report import document

    return sol_report_html(document(list(reports)), graph_picture)


CORPUS_COLUMNS = (("model", "model", ""), ("folder", "folder", ""), ("status", "status", ""), ("nodes", "nodes", "n"),
                  ("flops", "FLOPs", "n"), ("bytes_unfused", "bytes", "B"), ("sol_unfused_s", "SOL unfused", "s"),
                  ("sol_fused_s", "SOL fused", "s"), ("sol_cache_aware_s", "SOL cache-aware", "s"),
                  ("measured_median_s", "measured", "s"), ("headroom_unfused", "headroom unfused", "x"),
                  ("headroom_fused", "headroom fused", "x"), ("headroom_cache_aware", "headroom cache-aware", "x"),
                  ("bottleneck", "bound by", ""))


def corpus_report_html(rows: Sequence[dict], hw_name: str, notes: Sequence[str], points: Sequence[Point],
                       roofs: Sequence[tuple[str, float]], bandwidth: float) -> str:
    """A folder report: ``rows`` are :func:`solar_io.reports.tables.row` mappings (one per model)."""
    cols = [Column(t, u not in ("",)) for _, t, u in CORPUS_COLUMNS]
    body, ids = [], []
    for i, r in enumerate(rows):
        cells = []
        for key, _, unit in CORPUS_COLUMNS:
            v = r.get(key)
            if unit == "":
                tag = f" b-{v}" if key == "bottleneck" else ""
                cells.append(_cell(v if v is not None else "-", cls="text" + tag))
            elif unit == "x":
                cells.append(_cell(v, f"{v:.3g}x" if v else "-"))
            else:
                cells.append(_cell(v, _fmt(v, "" if unit == "n" else unit)))
        body.append(cells)
        ids.append(f"m{i}")
    row_of = {r["model"]: f"m{i}" for i, r in enumerate(rows)}
    pts = [Point(p.name, p.label, p.flops, p.bytes, p.seconds, p.bottleneck, row_of.get(p.name)) for p in points]
    sections = ["<h2>Models</h2>" + table("models", cols, body, ids)]
    if notes:
        sections.insert(0, "<ul class=\"note\">" + "".join(f"<li>{esc(x)}</li>" for x in notes) + "</ul>")
    if pts:
        sections.append("<h2>Roofline</h2><p class=\"note\">One point per model and fidelity (and its measured "
                        "run); hover for the model.</p>" + legend() +
                        roofline_svg(pts, roofs, bandwidth, f"models on {hw_name}"))
    return page("solar-io headroom report", f"{len(rows)} models on {hw_name}", sections)


__all__ = ["COLOURS", "Column", "Point", "corpus_report_html", "page", "report_html", "roofline_svg", "sol_report_html",
           "table"]
