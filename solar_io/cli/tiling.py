"""``solar-io tiling GRAPH [--node NAME] --hw CHIP [--capacity B] [--plot curve.png]``.

Prints the best tiling of one einsum at the chip's on-chip capacity (or ``--capacity``), the
provable floors there, and the Q(S) curve. Registered by ``solar_io.cli`` as
``app.command("tiling")(tiling_command)``; user errors raise :class:`SolarIOError` (one line, exit 1).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from solar_io.backends.bound import resolve_graph, resolve_hardware
from solar_io.backends.roofline.model import BoundError
from solar_io.units import format_si

from ..backends.tiling.curve import capacities, curve, plot
from ..backends.tiling.einsum import einsum_of
from ..backends.tiling.floors import floor
from ..backends.tiling.ilp import solve
from ..backends.tiling.partition import capacity_of
from ..units import SIZE_RULES, parse_bytes
from .options import Json


def tiling_command(
    graph: Path = typer.Argument(..., metavar="GRAPH", help="An einsum-graph file."),
    node: str | None = typer.Option(None, "--node", help="The einsum node to tile; may be left out when the graph "
                                                         "has one einsum that can be tiled (otherwise they are "
                                                         "listed)."),
    hw: str | None = typer.Option(None, "--hw", help="Chip name, alias or spec path (its on-chip capacity)."),
    capacity: str | None = typer.Option(None, "--capacity", help="On-chip bytes (50MiB, 4e6); default: the "
                                                                 f"spec's on-chip levels summed; {SIZE_RULES}."),
    points: int = typer.Option(16, "--points", min=2, max=64, help="Capacities on the Q(S) curve."),
    plot_path: Path | None = typer.Option(None, "--plot", help="Write the Q(S) curve as an image (needs "
                                                               "matplotlib, the 'plot' extra)."),
    as_json: Json = False,
) -> None:
    """Lower bound on the DRAM traffic of one einsum with finite on-chip memory, Q(S) (at most every grid
    tiling of any tile sizes and loop order), the provable floors and Q/floor, the best tiling found
    (tile sizes, loop order, stationary tensors, the bytes it moves), and the Q(S) curve."""
    g = resolve_graph(graph)
    if node is None:
        node = pick_node(g, graph)
    n = g.node_map.get(node)
    if n is None:
        raise BoundError(f"{graph}: no node {node!r}")
    e = einsum_of(g, n)
    if e is None:
        raise BoundError(f"{graph}: node {node!r} ({n.kind}) cannot be tiled: only einsums with affine indices")
    cap_bytes = parse_bytes(capacity)
    if hw is None and cap_bytes is None:
        raise BoundError("give --hw (its on-chip capacity) or --capacity")
    if cap_bytes is not None:
        cap, source = cap_bytes, "--capacity"
    else:
        cap, source = capacity_of(resolve_hardware(hw), None)  # type: ignore[arg-type]
    if math.isinf(cap):
        cap = max(capacities(e, 2))
        source += "; the whole working set used"
    t = solve(e, cap)
    fl = floor(e, cap)
    pts = curve(e, sorted(set(capacities(e, points)) | {cap}))
    if plot_path is not None:
        try:
            plot(e, pts, str(plot_path))
        except RuntimeError as err:
            raise BoundError(str(err)) from None
    bound_q = fl.value if t.traffic is None else max(t.traffic, fl.value)
    doc = {
        "node": node, "capacity": cap, "capacity_source": source,
        "traffic": t.traffic, "timed_out": t.timed_out, "bound": bound_q,
        "floor_ratio": bound_q / fl.value if fl.value > 0 else None,
        "achieved": t.achieved, "gap": t.gap, "rounds": t.rounds, "stopped": t.stopped or None,
        "tiles": dict(t.tiles), "order": list(t.order), "stationary": list(t.stationary),
        "per_operand": dict(t.per_operand), "working_set": t.working_set,
        "floor": {"compulsory": fl.compulsory, "matmul": fl.matmul, "hbl": fl.hbl, "value": fl.value,
                  "binding": fl.binding},
        "curve": [{"capacity": p.capacity, "traffic": p.traffic, "floor": p.floor.value} for p in pts],
    }
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    typer.echo(f"{node}: space {' '.join(f'{r}={s}' for r, s in zip(e.space, e.sizes, strict=True))}; "
               f"S = {format_si(cap, 'B')} ({source})")
    if t.timed_out:
        typer.echo("  the tiling ILP reached its time limit before proving its optimum: Q(S) is the floor below")
    elif t.traffic is None:
        typer.echo("  no tiling fits: S is below the smallest working set (every tile 1)")
    else:
        src = "the provable floor, above the tiling relaxation" if fl.value > t.traffic else \
            "the tiling relaxation: at most every grid tiling of any integer tile sizes and loop order"
        ratio = f"{bound_q / fl.value:.3g}" if fl.value > 0 else "-"
        typer.echo(f"  Q(S) = {format_si(bound_q, 'B')} ({src}); Q/floor = {ratio}")
        if t.stopped:
            typer.echo(f"  refinement stopped ({t.stopped}) after {t.rounds} round(s): a tile inside the chosen "
                       f"intervals reaches {t.gap:.1%} above the relaxation")
        if t.tiles and t.achieved is not None:
            typer.echo(f"  best tiling found: {format_si(t.achieved, 'B')} ({t.achieved / bound_q:.3g}x Q), working "
                       f"set {format_si(t.working_set, 'B')}")
            typer.echo("  tiles: " + " ".join(f"{r}={v}" for r, v in t.tiles) + "; loop order (outer first): "
                       + (", ".join(t.order) or "one tile") + "; stationary: " + (", ".join(t.stationary) or "-"))
            typer.echo("  per operand: " + ", ".join(f"{k} {format_si(v, 'B')}" for k, v in t.per_operand))
        else:
            typer.echo("  no tiling fits as the model counts footprints (the relaxation's are smaller)")
    typer.echo(f"  floor: {format_si(fl.value, 'B')} ({fl.binding}; compulsory {format_si(fl.compulsory, 'B')}"
               + (f", matmul {format_si(fl.matmul, 'B')}" if fl.matmul is not None else "")
               + (f", HBL {format_si(fl.hbl, 'B')}" if fl.hbl is not None else "") + ")")
    typer.echo(f"  {'S':>12} {'relaxation':>12} {'floor':>12}")
    for p in pts:
        typer.echo(f"  {format_si(p.capacity, 'B'):>12} {format_si(p.traffic, 'B'):>12} "
                   f"{format_si(p.floor.value, 'B'):>12}")
    if plot_path is not None:
        typer.echo(f"  curve written to {plot_path}")


def pick_node(g, graph: Path, shown: int = 12) -> str:  # noqa: ANN001 - a solar_io.Graph
    """The one einsum of ``g`` that can be tiled; a BoundError listing them (most MACs first) when there are
    none or several."""
    from ..metrics import node_metrics

    tileable = [n for n in g.nodes if n.kind == "einsum" and einsum_of(g, n) is not None]
    names = [n.name for n in sorted(tileable, key=lambda n: -node_metrics(g, n).macs)]
    if len(names) == 1:
        return names[0]
    if not names:
        raise BoundError(f"{graph}: no einsum node with affine indices to tile")
    listed = ", ".join(names[:shown]) + (f", ... ({len(names) - shown} more)" if len(names) > shown else "")
    raise BoundError(f"{graph}: {len(names)} einsum nodes can be tiled; choose one with --node (most MACs first): "
                     f"{listed}")


__all__ = ["pick_node", "tiling_command"]
