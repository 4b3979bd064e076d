"""Tables of corpus results: CSV, Markdown and YAML, and the geometric-mean headroom per folder.

Headroom is measured median / SOL (how much faster the run could get at most, per fidelity);
the zero-violation judgement uses the minimum run instead (see :mod:`.corpus`).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path

from ..units import format_ratio, format_si, format_time
from .corpus import FIDELITIES, CaseResult

COLUMNS = ("folder", "model", "frontend", "status", "nodes", "opaque", "macs", "flops", "bytes_unfused",
           "bytes_boundary", "sol_unfused_s", "sol_fused_s", "sol_cache_aware_s", "measured_median_s",
           "measured_min_s", "measured_iqr_s", "headroom_unfused", "headroom_fused", "headroom_cache_aware",
           "bottleneck", "runtime", "reason")


def _key(fidelity: str) -> str:
    return fidelity.replace("-", "_")


def bottleneck(res: CaseResult) -> str | None:
    """The binding resource of the tightest computed fidelity (cache-aware, else fused, else unfused)."""
    for f in ("cache-aware", "fused", "unfused"):
        if res.bottleneck.get(f):
            return res.bottleneck[f]
    return None


def row(res: CaseResult) -> dict:
    """One flat table row of ``res`` (numbers unformatted, seconds and bytes)."""
    m = res.measured or {}
    out = {"folder": Path(res.file).parent.name, "model": res.name, "frontend": res.frontend,
           "status": res.status, "nodes": res.nodes, "opaque": res.opaque, "macs": res.macs, "flops": res.flops,
           "bytes_unfused": res.bytes_unfused, "bytes_boundary": res.bytes_boundary,
           "measured_median_s": m.get("median"), "measured_min_s": m.get("min"), "measured_iqr_s": m.get("iqr"),
           "bottleneck": bottleneck(res), "runtime": res.runtime, "reason": res.reason}
    for f in FIDELITIES:
        out[f"sol_{_key(f)}_s"] = res.sol.get(f)
        out[f"headroom_{_key(f)}"] = res.headroom(f)
    return out


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of the positive finite ``values`` (None when there are none)."""
    xs = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in xs) / len(xs)) if xs else None


def folder_summary(results: Sequence[CaseResult]) -> list[dict]:
    """Per folder: counts by status and the geometric-mean headroom at each fidelity."""
    out = []
    for folder in sorted({Path(r.file).parent.name for r in results}):
        rs = [r for r in results if Path(r.file).parent.name == folder]
        d: dict = {"folder": folder, "models": len(rs)}
        for s in ("ok", "violation", "failed", "skipped"):
            d[s] = sum(r.status == s for r in rs)
        for f in FIDELITIES:
            d[f"geomean_headroom_{_key(f)}"] = geomean([r.headroom(f) for r in rs])
        out.append(d)
    return out


def to_csv(results: Sequence[CaseResult]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in results:
        w.writerow({k: ("" if v is None else v) for k, v in row(r).items()})
    return buf.getvalue()


def _si(x: float | None) -> str:
    return format_si(x, "").strip()


def to_markdown(results: Sequence[CaseResult], title: str, hardware: str, notes: Sequence[str] = ()) -> str:
    """The report: per-folder summary, then one row per model."""
    lines = [f"# {title}", "", f"Hardware: {hardware}. Headroom = measured median / SOL (>= 1 always; "
             "the zero-violation check compares the fastest run with each SOL).", ""]
    lines += [f"- {n}" for n in notes]
    lines += ["", "## Folders", "", "| folder | models | ok | violations | failed | skipped | "
              "geomean headroom unfused | fused | cache-aware |", "|" + "---|" * 9]
    for d in folder_summary(results):
        lines.append(f"| {d['folder']} | {d['models']} | {d['ok']} | {d['violation']} | {d['failed']} | "
                     f"{d['skipped']} | {format_ratio(d['geomean_headroom_unfused'])} | "
                     f"{format_ratio(d['geomean_headroom_fused'])} | "
                     f"{format_ratio(d['geomean_headroom_cache_aware'])} |")
    lines += ["", "## Models", "", "| model | status | MACs | bytes | SOL unfused | SOL fused | SOL cache-aware | "
              "measured (median) | headroom unfused | fused | cache-aware | bottleneck |", "|" + "---|" * 12]
    for r in results:
        m = r.measured or {}
        lines.append(
            f"| {r.name} | {r.status}{' (' + r.reason + ')' if r.reason else ''} | {_si(r.macs)} | "
            f"{_si(r.bytes_unfused)} | {format_time(r.sol.get('unfused'))} | {format_time(r.sol.get('fused'))} | "
            f"{format_time(r.sol.get('cache-aware'))} | {format_time(m.get('median'))} | "
            f"{format_ratio(r.headroom('unfused'))} | {format_ratio(r.headroom('fused'))} | "
            f"{format_ratio(r.headroom('cache-aware'))} | {bottleneck(r) or '-'} |")
    return "\n".join(lines) + "\n"


def to_records(results: Sequence[CaseResult]) -> list[dict]:
    """Plain data of every case (for YAML/JSON), violations with their node breakdown."""
    out = []
    for r in results:
        d = row(r)
        d["phases_s"] = dict(r.phases)
        d["judged"] = list(r.judged)
        d["measured"] = r.measured
        d["violations"] = [{"fidelity": v.fidelity, "sol_s": v.sol, "measured_min_s": v.measured_min,
                            "top_nodes": v.top_nodes} for v in r.violations]
        out.append(d)
    return out
