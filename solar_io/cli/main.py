"""The ``solar-io`` command line.

Every error a user can cause prints one line naming the file, field or op and exits
non-zero; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import gc
import io
import os
import re
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import NoReturn, TextIO

import typer

from ..errors import GraphError, GraphWarning, Issue, SolarIOError, cap
from ..format.codec import decode
from ..format.files import check_text, dumps, newer_minor, warn
from ..format.versioning import is_newer_minor
from ..format.versioning import migrate as migrate_doc
from ..format.yamltext import YamlError, line_of, parse, read_text, write_atomic
from ..graph import FORMAT_VERSION
from ..metrics import graph_metrics
from ..progress import is_quiet, set_quiet
from ..resources import schema_issues
from .options import AllowNewer

#: The commands that live in their own modules, in --help order: name -> (module of solar_io.cli, attribute,
#: "command" or a sub-app's help: None for its own). :func:`main` imports only the one a command line runs
#: (``solar-io bound`` never imports capture's, export's or sweep's dependencies); ``app`` has them all.
_MODULES: dict[str, tuple[str, str, str | None]] = {
    "bound": ("bound", "bound_command", "command"),
    "hw": ("hardware", "app", "Hardware specs: list, show, and probe the local CPU."),
    "export": ("export", "export_app", None),
    "import": ("export", "import_app", None),
    "capture": ("capture", "capture_command", "command"),
    "tiling": ("tiling", "tiling_command", "command"),
    "sweep": ("sweep", "sweep_command", "command"),
    "reorder": ("reorder_diff", "reorder_command", "command"),
    "diff": ("reorder_diff", "diff_command", "command"),
    "measure": ("measure", "measure_command", "command"),
    "check-bounds": ("report", "check_bounds_command", "command"),
    "report": ("report", "report_command", "command"),
    "graph": ("graph", "graph_command", "command"),
}
_HELP = ("Speed-of-light analysis of deep-learning workloads from einsum-graph files. Results go "
         "to stdout, diagnostics (warnings, notes, progress) to stderr.")


def build_app(only: str | None = None) -> typer.Typer:
    """The ``solar-io`` app with every command, or with only the command ``only`` (and the root options).

    >>> [c.callback.__name__ for c in build_app("check").registered_commands]
    ['check']
    """
    import importlib

    new = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False, help=_HELP)
    for name, (module, attr, kind) in _MODULES.items():
        if only is not None and name != only:
            continue
        obj = getattr(importlib.import_module(f"{__package__}.{module}"), attr)
        if kind == "command":
            new.command(name)(obj)
        elif kind is None:
            new.add_typer(obj, name=name)
        else:
            new.add_typer(obj, name=name, help=kind)
    for command in (check, fmt, info, migrate):
        if only is None or command.__name__ == only:
            new.command()(command)
    new.callback()(_root)
    return new


def _command_of(args: list[str]) -> str | None:
    """The command a command line runs when only the root's flags come before it, else None (then every
    command is registered: --help lists them all, and an unknown name gets the parser's own message)."""
    if "_SOLAR_IO_COMPLETE" in os.environ:  # shell completion lists every command
        return None
    for a in args:
        if a in ("--debug", "--quiet", "-q"):
            continue
        return a if a in _MODULES or a in ("check", "fmt", "info", "migrate") else None
    return None


def __getattr__(name: str):  # noqa: ANN202 - PEP 562: ``app`` (every command) is built on first use
    if name == "app":
        global app
        app = build_app()
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"solar-io {__version__} (einsum-graph format {FORMAT_VERSION})")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress, warnings or notes on stderr (errors "
                                                           "still print); results on stdout are unchanged (check "
                                                           "lists errors only)."),
) -> None:
    """solar-io: capture a workload into a graph file, then bound it on any chip."""
    if quiet:
        set_quiet(True)
        sys.stderr = _Quiet(sys.stderr)


class _Quiet(io.TextIOBase):
    """stderr under ``--quiet``: drops warning and note lines ("[FILE: ]warning: ...", "note: ...") and the
    indented lines that continue them; errors and usage messages pass through to the real stderr."""

    def __init__(self, real: TextIO):
        self.real, self.buf, self.dropping = real, "", False

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
        self.buf += s
        *lines, self.buf = self.buf.split("\n")
        for line in lines:
            if _DIAGNOSTIC.match(line) or (self.dropping and line.startswith(" ")):
                self.dropping = True
                continue
            self.dropping = False
            self.real.write(line + "\n")
        return len(s)

    def flush(self) -> None:
        if self.buf and not _DIAGNOSTIC.match(self.buf):
            self.real.write(self.buf)
        self.buf = ""
        self.real.flush()


#: A diagnostic --quiet drops: up to three prefixes ("PATH: ", "PATH:LINE: FIELD: ") then "warning:" or
#: "note:". Lists of opaque nodes (work whose compute is unknown) still print: a bound is never shown without
#: saying what it could not count.
_DIAGNOSTIC = re.compile(r"^(?!error:)(\S+: ){0,3}(warning|note):")


def _read(path: Path) -> str:
    try:
        return read_text(path)
    except YamlError as e:
        raise GraphError([Issue((), str(e))], str(path)) from None
    except OSError as e:
        raise GraphError([Issue((), f"cannot read: {e.strerror or e}")], str(path)) from None


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
            if not (i.severity == "warning" and is_quiet()):  # --quiet: errors only
                typer.echo(i.format(str(f)))
        if any(i.severity == "error" for i in issues):
            bad += 1
        else:
            typer.echo(f"{f}: ok")
    if bad:
        raise typer.Exit(1)


def fmt(files: list[Path] = typer.Argument(..., help="Graph files to rewrite canonically."),
        check_only: bool = typer.Option(False, "--check", help="Only report files that are not canonical."),
        allow_newer: AllowNewer = False,
        ) -> None:
    """Rewrite graph files in canonical form (``--check``: exit 1 if any would change)."""
    changed = 0
    for f in files:
        text = _read(f)
        canonical = dumps(_loaded(text, f, allow_newer or check_only, "fmt"))
        if canonical != text:
            changed += 1
            if check_only:
                typer.echo(f"{f}: not canonical (run: solar-io fmt {f})")
            else:
                write_atomic(f, canonical)
                typer.echo(f"{f}: reformatted")
    if check_only and changed:
        raise typer.Exit(1)


def _loaded(text: str, f: Path, allow_newer: bool = True, command: str = ""):  # noqa: ANN202
    """The graph in ``text`` (its warnings printed on stderr); GraphError otherwise. Without
    ``allow_newer``, a file of a newer minor version is refused: ``command`` would drop its new fields."""
    g, issues = check_text(text, str(f))
    if g is None:
        raise GraphError(issues, str(f))
    if not allow_newer and newer_minor(issues) is not None:
        raise SolarIOError(f"{f}: {command} refuses to rewrite a file of a newer minor format version than "
                           f"{FORMAT_VERSION}: it would drop the fields this solar-io does not know (--allow-newer "
                           f"rewrites it as {FORMAT_VERSION} anyway)")
    warn(issues, str(f))
    return g


def _si(x: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3f} {prefix}{unit}"
    return f"{x:.0f} {unit}"


def info(file: Path = typer.Argument(..., help="A graph file.")) -> None:
    """Summarise a graph: tensors, nodes by kind, dtypes, total MACs, FLOPs and bytes.

    MACs, FLOPs and the fused boundary bytes are the numbers ``bound`` prices (one derivation,
    ``solar_io.graph_metrics``); the byte sum over nodes ignores kernels and on-chip residency,
    so it is not the unfused bound's DRAM bytes (``bound --no-residency`` gives those per kernel).
    """
    g, issues = check_text(_read(file), str(file))
    if g is None:
        raise GraphError(issues, str(file))
    warn(issues, str(file))
    newer = newer_minor(issues)  # "version 1.9 is newer than ...": say which version the file is
    version = g.version if newer is None else f"{newer.message.split()[1]}, read as {g.version}"
    m = graph_metrics(g)
    roles = Counter(t.role for t in g.tensors)
    kinds = Counter(n.kind for n in g.nodes)
    dts = Counter(t.dtype for t in g.tensors)
    lines = [
        f"graph:        {g.name or file.name} (format {version}, frontend {g.producer.frontend})",
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


def migrate(files: list[Path] = typer.Argument(..., help="Graph files of an older format version."),
            output: Path | None = typer.Option(None, "-o", "--output", help="Write here (one file only)."),
            allow_newer: AllowNewer = False,
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
        if is_newer_minor(doc.get("version")):
            write_atomic(output or f, dumps(_loaded(text, f, allow_newer, "migrate")))
            typer.echo(f"{f}: version {doc.get('version')} -> {FORMAT_VERSION} (newer fields dropped), written to "
                       f"{output or f}")
            continue
        try:
            new = migrate_doc(doc)
        except SolarIOError as e:
            raise GraphError([Issue(("version",), str(e))], str(f)) from None
        g, _ = decode(new, str(f))
        target = output or f
        out = dumps(_loaded(dumps(g), f))
        write_atomic(target, out)
        typer.echo(f"{f}: version {doc.get('version')} -> {FORMAT_VERSION}, written to {target}")


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    """Warnings as one line on stderr: a GraphWarning is its text (``FILE:LINE: FIELD: warning: ...``)."""
    if is_quiet():  # --quiet: no warnings (the newer-minor-version one included), on every command
        return
    text = str(message) if issubclass(category, GraphWarning) else f"warning: {category.__name__}: {message}"
    print(cap(text), file=sys.stderr)


def _is_usage_error(e: Exception) -> bool:
    """True for the command-line parser's own errors (click's ClickException, which typer vendors)."""
    return any(c.__name__ == "ClickException" for c in type(e).__mro__)


def _usage_error(e, err) -> int:  # noqa: ANN001
    """Print a usage error as one line (``error: No such option: --bogus (see 'solar-io bound --help')``);
    with no arguments at all, only the help text typer printed. The exit status."""
    if type(e).__name__ == "NoArgsIsHelpError":  # typer has printed the help already
        return e.exit_code
    ctx = getattr(e, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    print(f"error: {cap(' '.join(e.format_message().split()))}{hint}", file=err)
    return e.exit_code


#: Commands run without Python's cyclic garbage collector, and ended without the interpreter's teardown,
#: when ``main`` is the process's entry point (no ``argv``: the console script, ``python -m solar_io``).
#: Their objects (the graph, its traffic model, the reports) live until the process exits, so the
#: collector's passes free nothing: after a load it scans every object twice (~1M for a 2k-node graph:
#: 0.1-0.2 s CPU of a 1.4 s ``bound``; peak memory unchanged, 92 MB either way on the Llama-3-8B graph),
#: and the teardown frees each of them and collects once more (0.12-0.19 s). Their output is written
#: (files atomically, closed) and stdout and stderr flushed before the process ends with the command's
#: status (:func:`_exit_now`). ``main(argv)`` called in a longer process does neither.
_NO_CYCLIC_GC = frozenset({"bound", "check"})


def _exit_now(code: object) -> NoReturn:
    """End the process with the status ``sys.exit(code)`` gives, after flushing stdout and stderr, without
    the interpreter's teardown (no object is freed: the OS reclaims the memory at once); a flush that
    fails (a closed pipe) gives status 120, as the interpreter's own exit does."""
    status = 0 if code is None else code if isinstance(code, int) else 1
    if not isinstance(code, int) and code is not None:
        print(code, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120
    os._exit(status)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI, turning user errors into one line and exit 1."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    if argv is None and _command_of(args) in _NO_CYCLIC_GC:  # a process of its own: see _NO_CYCLIC_GC
        gc.disable()
        try:
            main(args)
        except SystemExit as e:
            _exit_now(e.code)
        _exit_now(0)
    err = sys.stderr  # --quiet filters sys.stderr for the command; errors go here
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            code = build_app(_command_of(args))(args=args, prog_name="solar-io", standalone_mode=False)
        sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)  # as click's own main does
    except typer.Abort:
        print("error: aborted", file=err)
        sys.exit(1)
    except SolarIOError as e:
        if debug:
            raise
        for line in e.lines() if isinstance(e, GraphError) else [f"error: {cap(str(e))}"]:
            print(line, file=err)
        sys.exit(1)
    except Exception as e:
        if _is_usage_error(e):
            sys.exit(_usage_error(e, err))
        if debug:
            raise
        print(f"error: internal error: {type(e).__name__}: {cap(str(e))} (run with --debug for the traceback)",
              file=err)
        sys.exit(3)
    finally:
        if sys.stderr is not err:
            sys.stderr.flush()
        sys.stderr = err
        set_quiet(False)
