"""``solar-io bound GRAPH --hw NAME[,NAME...]``: the roofline bounds on the command line.

Registered by ``solar_io.cli`` as ``app.command("bound")(bound_command)``. User errors raise
:class:`solar_io.errors.SolarIOError`, which the entry point prints as one line (exit 1).
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from ..backends.bound import bound_many, resolve_graph
from ..backends.roofline.model import BoundError
from ..backends.roofline.report import to_json, to_yaml
from ..backends.roofline.table import DEFAULT_TOP, render, warnings
from ..metrics import with_index_assumptions
from ..progress import step
from ..units import SIZE_RULES
from .options import StrictDequant, StrictFp32
from .output import print_or_write, write_text

FORMATS = ("table", "yaml", "json", "html")


def bound_command(
    graph: Path = typer.Argument(..., metavar="GRAPH", help="An einsum-graph file."),
    hw: str | None = typer.Option(None, "--hw", help="Chip name, alias or spec path; several separated by commas "
                                             "(b200,h100-pcie,thor) for a side-by-side projection; NAME@CLOCK "
                                             "(b200@1500MHz) bounds it at that core clock, as --clock does."),
    measured: str | None = typer.Option(None, "--measured", help="Measured run time (3.1ms, 500us, or seconds "
                                                                 "such as 2.5e-3): headroom = measured / SOL."),
    target_latency: str | None = typer.Option(None, "--target-latency", help="Inverse roofline for this "
                                                                             "latency (2ms): what a chip needs."),
    target_rate: str | None = typer.Option(None, "--target-rate", help="Inverse roofline for this rate (500Hz)."),
    allow_tf32: bool = typer.Option(False, "--allow-tf32", help="Accepted for old command lines: fp32 matrix work "
                                                                "at the faster of the fp32 and tf32 peaks is now "
                                                                "the default (see --strict-fp32)."),
    strict_fp32: StrictFp32 = False,
    strict_dequant: StrictDequant = False,
    clock: str | None = typer.Option(None, "--clock", help="Scale every compute peak to this core clock (1500MHz): "
                                                           "peak x clock / the spec's clock; DRAM bandwidth is "
                                                           "not scaled."),
    launch_overhead: str | None = typer.Option(None, "--launch-overhead", help="A per-kernel launch floor "
                                                                              "(0.4us), off by default: reported "
                                                                              "in a note next to the bounds, "
                                                                              "never added to them."),
    dtype: str | None = typer.Option(None, "--dtype", help="What-if: cast every floating-point tensor to this "
                                                           "dtype (bf16, fp8_e4m3, nvfp4, ...)."),
    compute_dtype: str | None = typer.Option(None, "--compute-dtype", help="Peaks of this dtype for every node "
                                                                           "(bf16), or per dtype (fp8=fp16,fp4=fp8)."),
    fmt: str = typer.Option("table", "--format", "-f", help="table (default), yaml or json "
                                                            "(schema/sol-report-v1.schema.json), or html (one "
                                                            "self-contained page: tables, interactive roofline, "
                                                            "the graph picture)."),
    html_path: Path | None = typer.Option(None, "--html", help="Also write the HTML report here (besides the "
                                                                "--format output)."),
    top: int | None = typer.Option(None, "--top", min=0, help=f"Show the N slowest nodes (table default "
                                                              f"{DEFAULT_TOP}, yaml/json all; 0 = all)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the report here (atomically)."),
    cache_aware: bool = typer.Option(True, "--cache-aware/--no-cache-aware",
                                     help="Compute the cache-aware fidelity: finite on-chip memory, tiling and "
                                          "fusion (PuLP ILPs; on by default, --no-cache-aware skips it)."),
    cache_bound: str = typer.Option("ilp", "--cache-bound", help="Cache-aware Q(S): ilp (tiling ILP optimum, "
                                                                 "default) or floor (provable floor)."),
    capacity: str | None = typer.Option(None, "--capacity", help="On-chip bytes for --cache-aware (50MiB); "
                                                                 "default: the spec's on-chip levels summed; "
                                                                 f"{SIZE_RULES}."),
    residency: bool = typer.Option(True, "--residency/--no-residency",
                                   help="On-chip memory keeps data between kernels (default): unfused and "
                                        "cache-aware DRAM bytes drop what it may hold. --no-residency: every "
                                        "kernel's operands cross DRAM (the classical count, beatable on chips "
                                        "with caches)."),
    plot: Path | None = typer.Option(None, "--plot", help="Draw the roofline (nodes and each fidelity) as a PNG "
                                                          "here; one file per chip (NAME-CHIP.png) for several."),
    parallel: str | None = typer.Option(None, "--parallel", help="Shard over many chips: tp=8,pp=4,dp=16,ep=8,sp "
                                        "(any subset): per-chip compute, memory and communication, overlapped and "
                                        "serial (rules: solar_io.backends.parallel)."),
    system: str | None = typer.Option(None, "--system", help="With --parallel: a system of chips and links "
                                      "(dgx-h100x4, dgx-b200, gb200-nvl72, or a system YAML); default: --hw chips "
                                      "joined by the spec's own interconnect."),
    microbatches: int = typer.Option(1, "--microbatches", min=1, help="With --parallel pp: microbatches per step "
                                     "(they split the batch rank); bubble (stages-1)/microbatches."),
    allreduce: str = typer.Option("ring", "--allreduce", help="With --parallel: ring (2(n-1)/n bytes per chip, "
                                  "default) or in-network (switches reduce: NVLink SHARP, InfiniBand SHARP)."),
) -> None:
    """Speed-of-light bounds of a graph on one or more chips: unfused, fused and cache-aware (finite on-chip
    memory, tiling and fusion; --capacity, --cache-bound, --no-cache-aware), per node, with headroom
    (--measured) and the inverse roofline (--target-latency / --target-rate). Times are lower bounds. Precision
    policy (printed in every report): fp32 matrix work at the faster of the fp32/tf32 peaks and dequantised
    low-precision operands at their origin's peak, unless --strict-fp32 / --strict-dequant."""
    if fmt not in FORMATS:
        raise BoundError(f"--format: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if parallel is not None or system is not None:
        from .bound_parallel import parallel_command

        unsupported = {"--target-latency": target_latency, "--target-rate": target_rate, "--plot": plot,
                       "--launch-overhead": launch_overhead, "--capacity": capacity, "--html": html_path,
                       "--cache-bound": None if cache_bound == "ilp" else cache_bound}
        given = [k for k, v in unsupported.items() if v is not None]
        if given:
            raise BoundError(f"{given[0]}: not available with --parallel (the many-chip bound gives the unfused, "
                             "fused and cache-aware fidelities per chip at each chip's own on-chip capacity)")
        return parallel_command(graph, resolve_graph(graph), hw, parallel, system, microbatches, fmt, output,
                                measured=measured, allreduce=allreduce, dtype=dtype, strict_fp32=strict_fp32,
                                strict_dequant=strict_dequant, residency=residency, clock=clock,
                                compute_dtype=compute_dtype, cache_aware=cache_aware)
    if hw is None:
        raise BoundError("--hw: give a chip name, alias or spec path")
    chips = [h.strip() for h in hw.split(",") if h.strip()]
    if not chips:
        raise BoundError("--hw: give a chip name, alias or spec path")
    g = resolve_graph(graph)
    with step(f"bounding {graph.name} on {', '.join(chips)}" + (" (cache-aware tiling ILPs)" if cache_aware else "")):
        reports = bound_many(g, chips, measured=measured, target_latency=target_latency, target_rate=target_rate,
                             allow_tf32=True if allow_tf32 else None, strict_fp32=strict_fp32,
                             strict_dequant=strict_dequant, clock=clock, dtype=dtype, compute_dtype=compute_dtype,
                             cache_aware=cache_aware or cache_bound != "ilp" or capacity is not None,
                             cache_bound=cache_bound, capacity=capacity, residency=residency,
                             launch_overhead=launch_overhead)
    if plot is not None:
        from solar_io.reports.plot import plot_reports

        for path in plot_reports(reports, plot):
            print(f"{graph}: roofline plot written to {path}", file=sys.stderr)
    seen: set[str] = set()
    for r in reports:
        for line in warnings(r):
            if line not in seen:
                seen.add(line)
                print(f"{graph}: warning: {line}", file=sys.stderr)
    limit = None if top == 0 else top
    if html_path is not None:
        write_text(html_path, _html(g, reports, None), BoundError)
        print(f"{graph}: HTML report written to {html_path}", file=sys.stderr)
    if fmt == "html":
        text = _html(g, reports, limit)
    elif fmt == "yaml":
        text = to_yaml(reports, limit)
    elif fmt == "json":
        text = to_json(reports, limit)
    elif output is not None:
        text = assumption_text(g) + render(reports, DEFAULT_TOP if top is None else (limit or len(g.nodes) or 1))
        text += phase_text(g, reports[0])
    else:
        sys.stdout.write(assumption_text(g))
        render(reports, DEFAULT_TOP if top is None else (limit or len(g.nodes) or 1),
               console=Console(highlight=False, width=None if sys.stdout.isatty() else 200))
        sys.stdout.write(phase_text(g, reports[0]))
        return
    print_or_write(output, text, BoundError)


def phase_text(g, report) -> str:  # noqa: ANN001 - a Graph and its Report
    """The training step's per-phase lines and live-activation peak (:mod:`solar_io.training`)."""
    from ..training import phase_text as text

    return text(g, report)


def assumption_text(g) -> str:  # noqa: ANN001 - a Graph
    """The graph's assumptions (format 1.3: specialised values, routing, step, training), one line each,
    for the text report; empty when it has none.

    >>> from solar_io.graph import Assumption, Graph
    >>> g = Graph((), (), (), assumptions=(Assumption("routing", "moe", "uniform", (("k", 2), ("tokens", (3, 1)))),))
    >>> print(assumption_text(g), end="")
    assumptions (the counts hold under these):
      routing: moe: uniform [k=2, tokens=[3, 1]]
    """
    derived = with_index_assumptions(g).assumptions[len(g.assumptions):]  # a file written without them
    if not g.assumptions and not derived:
        return ""

    def value(v) -> str:  # noqa: ANN001
        if isinstance(v, tuple):
            shown = ", ".join(str(x) for x in v[:16])
            return f"[{shown}{', ...' if len(v) > 16 else ''}]"
        return str(v)

    lines = ["assumptions (the counts hold under these):"]
    for a in g.assumptions + derived:
        vals = ", ".join(f"{k}={value(v)}" for k, v in a.values)
        detail = f": {a.detail}" if a.detail else ""
        tag = " (derived from the graph, not in the file)" if a in derived else ""
        lines.append(f"  {a.kind}{tag}: {a.subject}{detail}" + (f" [{vals}]" if vals else ""))
    return "\n".join(lines) + "\n"


def _html(g, reports, limit: int | None) -> str:  # noqa: ANN001 - a Graph and its Reports
    """The HTML page of ``reports`` (every node unless ``--top N``), with the graph picture of the first chip."""
    from ..backends.roofline.report import document
    from ..graphs.picture import inline_picture
    from ..reports.html import sol_report_html

    with step("drawing the graph"):
        picture = inline_picture(g, reports[0])
    return sol_report_html(document(reports, limit), graph_picture=picture)


__all__ = ["bound_command"]
