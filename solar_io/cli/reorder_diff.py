"""``solar-io reorder`` and ``solar-io diff`` on the command line.

Registered by ``solar_io.cli`` as ``app.command("reorder")(reorder_command)`` and
``app.command("diff")(diff_command)``. User errors raise :class:`solar_io.errors.SolarIOError`,
which the entry point prints as one line (exit 1).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import typer

from ..backends.bound import resolve_graph, resolve_hardware
from ..dse.diff import DiffError, GraphDiff, describe, diff_graphs, parse_threshold, to_dict
from ..dse.reorder import ChainReport, OrderCost, ReorderError, analyse
from ..dse.reorder_apply import Check, apply
from ..format.files import dump
from ..metrics import graph_metrics
from ..units import format_si, format_time
from .options import Json

# ---------------------------------------------------------------------------- reorder


def _finite(x: float | None) -> float | None:
    """``x``, or None where JSON has no number for it (a gain over a best of 0)."""
    return x if x is None or math.isfinite(x) else None


def _order_doc(o: OrderCost) -> dict:
    return {"order": o.text, "steps": o.steps, "macs": o.macs, "flops": o.flops, "flops_matrix": o.flops_matrix,
            "flops_vector": o.flops_vector, "bytes": o.bytes, "sol_unfused": o.sol, "written": o.written}


def _chain_doc(r: ChainReport) -> dict:
    c = r.chain
    return {
        "nodes": list(c.nodes), "root": c.root, "equation": c.equation(),
        "operands": [{"tensor": o.tensor, "ranks": list(o.ranks)} for o in c.operands],
        "output": {"tensor": c.output.tensor, "ranks": list(c.output.ranks)}, "sizes": dict(c.sizes),
        "method": r.method, "orders_costed": len(r.orders), "objective": r.objective,
        "written": _order_doc(r.written), "best": _order_doc(r.best),
        "worst": _order_doc(r.worst) if r.worst else None,
        "gain": {k: _finite(r.gain(k)) for k in ("macs", "flops", "bytes", "sol")},
        "orders": [_order_doc(o) for o in r.orders],
    }


def _rows(r: ChainReport, top: int) -> list[tuple[str, OrderCost]]:
    """(label, order) rows: the ``top`` best, then the worst and the written order if not among them."""
    picked = list(r.orders[:top]) if top else list(r.orders)
    for extra in (r.worst, r.written):
        if extra is not None and all(extra is not p for p in picked):
            picked.append(extra)
    rows = []
    for o in picked:
        tags = []
        if o is r.best:
            tags.append("best")
        elif o in r.orders[:top or len(r.orders)]:
            tags.append(f"#{r.orders.index(o) + 1}")
        if o is r.worst and o is not r.best:
            tags.append("worst")
        if o.written:
            tags.append("written")
        rows.append(("=".join(tags), o))
    return rows


def _chain_text(i: int, total: int, r: ChainReport, top: int) -> list[str]:
    c = r.chain
    how = (f"all {len(r.orders)} orders" if r.method == "exhaustive"
           else f"{len(r.orders)} orders from opt_einsum path search (more than 6 operands; worst not enumerated)")
    out = [f"chain {i} of {total}: nodes {', '.join(c.nodes)} ({len(c.operands)} operands; {how}; best by "
           f"{r.objective})",
           f"  {c.equation()}",
           "  sizes: " + " ".join(f"{k}={v}" for k, v in c.sizes)]
    width = max(len(o.text) for _, o in _rows(r, top))
    sol = f"  {'SOL ' + r.hardware:>12}" if r.hardware else ""
    out.append(f"  {'':13} {'order':<{width}}  {'MACs':>12}  {'FLOPs':>12}  {'bytes':>11}{sol}")
    for label, o in _rows(r, top):
        t = f"  {format_time(o.sol):>12}" if r.hardware else ""
        out.append(f"  {label:13} {o.text:<{width}}  {format_si(o.macs, 'MAC'):>12}  "
                   f"{format_si(o.flops, 'FLOP'):>12}  {format_si(o.bytes, 'B'):>11}{t}")
    gains = [f"{r.gain(k):.3g}x {k}" for k in ("flops", "bytes", "sol") if r.gain(k) is not None]
    out.append(f"  gain of the best over the written order: {', '.join(gains)}"
               + ("" if r.improves else " (the written order is already the best)"))
    return out


def reorder_command(
    graph: Path = typer.Argument(..., metavar="GRAPH", help="An einsum-graph file."),
    hw: str | None = typer.Option(None, "--hw", help="Chip name, alias or spec path: also the unfused SOL of "
                                                     "each order."),
    by: str | None = typer.Option(None, "--by", help="Rank orders by flops (default), bytes, or sol (the default "
                                                     "with --hw)."),
    do_apply: bool = typer.Option(False, "--apply", help="Rewrite the chains in their best order (needs -o); "
                                                         "checked with the reference executor first."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Where --apply writes the graph (atomically)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (every order costed) instead of tables."),
    top: int = typer.Option(5, "--top", min=0, help="Orders shown per chain besides the worst and the written "
                                                    "(0 = all)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random inputs of the --apply check."),
) -> None:
    """Contraction orders of every multi-operand einsum chain (e.g. attention with absorbed projections): MACs,
    FLOPs and bytes of each order (exhaustive up to 6 operands, opt_einsum path search beyond), the best, the
    worst and the gain over the written order; --apply writes the graph in the best order, checked against
    the original with the reference executor."""
    if do_apply != (output is not None):
        raise ReorderError("--apply and -o/--output go together: --apply -o better.yaml")
    g = resolve_graph(graph)
    spec = resolve_hardware(hw) if hw is not None else None
    objective = by or ("sol" if spec is not None else "flops")
    reports = analyse(g, spec, objective)
    applied: tuple[Path, Check, int, int, int] | None = None
    if do_apply:
        try:
            new, result = apply(g, reports, seed)
        except ReorderError as e:
            raise ReorderError(f"{graph}: {e}") from None
        dump(new, output)  # type: ignore[arg-type]
        applied = (output, result, sum(r.improves for r in reports), graph_metrics(g).macs,  # type: ignore[assignment]
                   graph_metrics(new).macs)
    if as_json:
        doc: dict = {"graph": str(graph), "objective": objective, "hardware": spec.name if spec else None,
                     "chains": [_chain_doc(r) for r in reports]}
        if applied:
            out, result, n, before, after = applied
            doc["applied"] = {"output": str(out), "chains_rewritten": n, "macs_before": before, "macs_after": after,
                              "check": {"scope": result.scope, "reduced_ranks": dict(result.reduced),
                                        "compared": list(result.compared), "status": result.validation.status,
                                        "max_abs_error": result.validation.max_abs_error,
                                        "max_rel_error": result.validation.max_rel_error,
                                        "rtol": result.validation.rtol, "atol": result.validation.atol,
                                        "seed": seed}}
        typer.echo(json.dumps(doc, indent=2))
        return
    if not reports:
        typer.echo(f"{graph}: no contraction chain of 3 or more operands")
        return
    lines: list[str] = []
    for i, r in enumerate(reports, start=1):
        lines += _chain_text(i, len(reports), r, top) + [""]
    if applied:
        out, result, n, before, after = applied
        lines.append(f"wrote {out}: {n} chain(s) rewritten in the best order; MACs {format_si(before, 'MAC')} -> "
                     f"{format_si(after, 'MAC')}")
        lines.append(f"check: {result.describe()}")
    typer.echo("\n".join(lines).rstrip("\n"))


# ---------------------------------------------------------------------------- diff


def _fmt(key: str, x: float | None) -> str:
    if x is None:
        return "-"
    if key.startswith("sol"):
        return format_time(x)
    return format_si(x, "B" if "bytes" in key else "")


def _diff_text(d: GraphDiff, old: Path, new: Path) -> list[str]:
    out = [f"old: {old} ({d.old.nodes} nodes, {d.old.tensors} tensors)",
           f"new: {new} ({d.new.nodes} nodes, {d.new.tensors} tensors)"]
    for kind in ("rank", "tensor", "node"):
        cs = d.of(kind)
        counts = ", ".join(f"{len(d.of(kind, s))} {s}" for s in ("added", "removed", "changed"))
        out.append(f"{kind}s: {counts}")
        out += [f"  {describe(c)}" for c in cs]
    chip = f" on {d.hardware}" if d.hardware else ""
    out.append(f"totals{chip}:")
    out.append(f"  {'':18} {'old':>14} {'new':>14} {'change':>14} {'%':>9}")
    for x in d.deltas:
        pct = "-" if x.percent is None else f"{x.percent:+.2f}%"
        label = x.label.replace(" (s)", "")
        out.append(f"  {label:18} {_fmt(x.key, x.old):>14} {_fmt(x.key, x.new):>14} "
                   f"{_fmt(x.key, x.change):>14} {pct:>9}")
    return out


def diff_command(
    old: Path = typer.Argument(..., metavar="OLD", help="The earlier graph file."),
    new: Path = typer.Argument(..., metavar="NEW", help="The later graph file."),
    hw: str | None = typer.Option(None, "--hw", help="Chip name, alias or spec path: compare the unfused and "
                                                     "fused SOL on it."),
    as_json: Json = False,
    fail_on_regression: str | None = typer.Option(
        None, "--fail-on-regression", help="Exit 1 when the SOL (with --hw; else the MACs) grows by more than "
                                           "this percentage (5% or 5)."),
) -> None:
    """What changed between two graph files: ranks, tensors and nodes added, removed or changed (shapes,
    dtypes, roles, ops, accesses), and the totals (MACs, FLOPs per unit, bytes, SOL on --hw) old vs new.
    Files of older format versions are read through the normal loader."""
    threshold = parse_threshold(fail_on_regression) if fail_on_regression is not None else None
    d = diff_graphs(resolve_graph(old), resolve_graph(new), hw)
    if as_json:
        typer.echo(json.dumps({"old": str(old), "new": str(new), **to_dict(d, threshold)}, indent=2))
    else:
        typer.echo("\n".join(_diff_text(d, old, new)))
    for label, t in (("old", d.old), ("new", d.new)):
        if t.opaque:
            print(f"{old if label == 'old' else new}: warning: compute of opaque nodes is unknown (not in the "
                  f"totals): {', '.join(t.opaque)}", file=sys.stderr)
    if threshold is not None:
        lines = d.regressions(threshold)
        if lines:
            raise DiffError(f"{new}: regression: {'; '.join(lines)}")


__all__ = ["diff_command", "reorder_command"]
