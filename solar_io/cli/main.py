"""The ``solar-io`` command line.

Every error a user can cause prints one line naming the file, field or op and exits
non-zero; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import typer

from .. import __version__
from ..errors import GraphError, Issue, SolarIOError
from ..format.codec import decode
from ..format.files import check_text, dumps, load
from ..format.versioning import migrate as migrate_doc
from ..format.yamltext import YamlError, line_of, parse, read_text, write_atomic
from ..graph import FORMAT_VERSION
from ..metrics import graph_metrics
from ..resources import schema_issues
from .bound import bound_command
from .capture import capture_command
from .export import export_app, import_app
from .hardware import app as hardware_app
from .measure import measure_command
from .reorder_diff import diff_command, reorder_command
from .report import check_bounds_command, report_command
from .sweep import sweep_command
from .tiling import tiling_command

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Speed-of-light analysis of deep-learning workloads from einsum-graph files.")


app.command("bound")(bound_command)
app.add_typer(hardware_app, name="hw", help="Hardware specs: list, show, and probe the local CPU.")
app.add_typer(export_app, name="export")
app.add_typer(import_app, name="import")
app.command("capture")(capture_command)
app.command("tiling")(tiling_command)
app.command("sweep")(sweep_command)
app.command("reorder")(reorder_command)
app.command("diff")(diff_command)
app.command("measure")(measure_command)
app.command("check-bounds")(check_bounds_command)
app.command("report")(report_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"solar-io {__version__} (einsum-graph format {FORMAT_VERSION})")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    """solar-io: capture a workload into a graph file, then bound it on any chip."""


def _read(path: Path) -> str:
    try:
        return read_text(path)
    except YamlError as e:
        raise GraphError([Issue((), str(e))], str(path)) from None
    except OSError as e:
        raise GraphError([Issue((), f"cannot read: {e.strerror or e}")], str(path)) from None


@app.command()
def check(files: list[Path] = typer.Argument(..., help="Graph files to check."),
          json_schema: bool = typer.Option(False, "--json-schema",
                                           help="Also validate against the published JSON Schema "
                                                "(slow on large files; the built-in checks enforce the same rules)."),
          ) -> None:
    """Check graph files against the format (schema and semantics); exit 1 on any problem."""
    bad = 0
    for f in files:
        try:
            text = _read(f)
            g, issues = check_text(text, str(f))
            if json_schema and g is not None:
                issues = issues + [Issue(path, f"JSON Schema: {msg}", line=line_of(text, path))
                                   for path, msg in schema_issues(parse(text))]
        except GraphError as e:
            issues = e.issues
        for i in issues:
            typer.echo(i.format(str(f)))
        if any(i.severity == "error" for i in issues):
            bad += 1
        else:
            typer.echo(f"{f}: ok")
    if bad:
        raise typer.Exit(1)


@app.command()
def fmt(files: list[Path] = typer.Argument(..., help="Graph files to rewrite canonically."),
        check_only: bool = typer.Option(False, "--check", help="Only report files that are not canonical.")
        ) -> None:
    """Rewrite graph files in canonical form (``--check``: exit 1 if any would change)."""
    changed = 0
    for f in files:
        text = _read(f)
        canonical = dumps(_loaded(text, f))
        if canonical != text:
            changed += 1
            if check_only:
                typer.echo(f"{f}: not canonical (run: solar-io fmt {f})")
            else:
                write_atomic(f, canonical)
                typer.echo(f"{f}: reformatted")
    if check_only and changed:
        raise typer.Exit(1)


def _loaded(text: str, f: Path):  # noqa: ANN202
    g, issues = check_text(text, str(f))
    if g is None:
        raise GraphError(issues, str(f))
    return g


def _si(x: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3f} {prefix}{unit}"
    return f"{x:.0f} {unit}"


@app.command()
def info(file: Path = typer.Argument(..., help="A graph file.")) -> None:
    """Summarise a graph: tensors, nodes by kind, dtypes, total MACs, FLOPs and bytes.

    MACs, FLOPs and the fused boundary bytes are the numbers ``bound`` prices (one derivation,
    ``solar_io.graph_metrics``); the byte sum over nodes ignores kernels and on-chip residency,
    so it is not the unfused bound's DRAM bytes (``bound --no-residency`` gives those per kernel).
    """
    g = load(file)
    m = graph_metrics(g)
    roles = Counter(t.role for t in g.tensors)
    kinds = Counter(n.kind for n in g.nodes)
    dts = Counter(t.dtype for t in g.tensors)
    lines = [
        f"graph:        {g.name or file.name} (format {g.version}, frontend {g.producer.frontend})",
        f"tensors:      {len(g.tensors)} ({', '.join(f'{k} {v}' for k, v in sorted(roles.items()))})",
        f"nodes:        {len(g.nodes)} ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})",
        f"dtypes:       {', '.join(f'{k} {v}' for k, v in sorted(dts.items()))}",
        f"MACs:         {m.macs} ({_si(m.macs, 'MAC')})",
        f"FLOPs:        {m.flops:.0f} ({_si(m.flops_matrix, 'FLOP')} matrix, {_si(m.flops_vector, 'FLOP')} vector)",
        f"transcend.:   {m.transcendental:.0f}",
        f"bytes:        {m.bytes:.0f} ({_si(m.bytes, 'B')} summed over nodes, each tensor once per node)",
        f"boundary:     {m.boundary_bytes:.0f} ({_si(m.boundary_bytes, 'B')} a fused kernel moves: "
        "bound's fused DRAM bytes)",
        f"validation:   {g.validation.status} ({g.validation.method})",
    ]
    if m.opaque:
        lines.append(f"opaque:       {len(m.opaque)} node(s) with unknown compute: {', '.join(m.opaque)}")
    typer.echo("\n".join(lines))
    if m.opaque:
        typer.echo(f"{file}: warning: compute of opaque nodes is unknown: {', '.join(m.opaque)}", err=True)


@app.command()
def migrate(files: list[Path] = typer.Argument(..., help="Graph files of an older format version."),
            output: Path | None = typer.Option(None, "-o", "--output", help="Write here (one file only)."),
            ) -> None:
    """Upgrade graph files to the current format version (in place unless -o)."""
    if output is not None and len(files) != 1:
        raise SolarIOError("-o takes exactly one input file")
    for f in files:
        text = _read(f)
        try:
            doc = parse(text)
        except YamlError as e:
            raise GraphError([Issue((), str(e), line=e.line)], str(f)) from None
        if not isinstance(doc, dict):
            raise GraphError([Issue((), "an einsum-graph file must be a YAML mapping")], str(f))
        try:
            new = migrate_doc(doc)
        except SolarIOError as e:
            raise GraphError([Issue(("version",), str(e))], str(f)) from None
        g, _ = decode(new, str(f))
        target = output or f
        out = dumps(_loaded(dumps(g), f))
        write_atomic(target, out)
        typer.echo(f"{f}: version {doc.get('version')} -> {FORMAT_VERSION}, written to {target}")


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI, turning user errors into one line and exit 1."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        app(args=args, prog_name="solar-io")
    except SolarIOError as e:
        if debug:
            raise
        for line in e.lines() if isinstance(e, GraphError) else [f"error: {e}"]:
            print(line, file=sys.stderr)
        sys.exit(1)
    except Exception as e:
        if debug:
            raise
        print(f"error: internal error: {type(e).__name__}: {e} (run with --debug for the traceback)",
              file=sys.stderr)
        sys.exit(3)
