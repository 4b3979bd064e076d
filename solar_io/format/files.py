"""Reading and writing einsum-graph files: text <-> validated Graph."""

from __future__ import annotations

import warnings
from pathlib import Path

from .._gc import gc_paused as _gc_paused
from ..errors import GraphError, GraphWarning, Issue
from ..graph import FORMAT_VERSION, Graph
from .codec import decode
from .encode import encode
from .validate import validate
from .versioning import is_newer_minor
from .yamltext import YamlError, emit, line_of, parse, read_text, write_atomic


def _with_lines(issues: list[Issue], text: str) -> list[Issue]:
    return [Issue(i.path, i.message, i.severity, i.line if i.line is not None else line_of(text, i.path))
            for i in issues]


def _newer_minor(doc: object) -> Issue | None:
    """The warning for a file of a newer minor version than this reader writes, else None."""
    v = doc.get("version") if isinstance(doc, dict) else None
    if not is_newer_minor(v):
        return None
    return Issue(("version",), f"version {v} is newer than this solar-io reads in full ({FORMAT_VERSION}): fields "
                 f"it added are ignored; fmt and migrate refuse to rewrite the file (--allow-newer rewrites it "
                 f"as {FORMAT_VERSION}, dropping them)", "warning")


def newer_minor(issues: list[Issue]) -> Issue | None:
    """The newer-minor-version warning among ``issues`` (from :func:`check_text`), else None."""
    return next((i for i in issues if i.path == ("version",) and i.severity == "warning"), None)


def check_text(text: str, file: str | None = None) -> tuple[Graph | None, list[Issue]]:
    """Parse, decode and validate ``text``; the graph (None if invalid) and every issue (a file of a
    newer minor version gets a warning at ``version`` first)."""
    with _gc_paused():
        return _check_text(text, file)


def _check_text(text: str, file: str | None) -> tuple[Graph | None, list[Issue]]:
    try:
        doc = parse(text)
    except YamlError as e:
        return None, [Issue((), str(e), line=e.line)]
    return _check_doc(doc, text, file)


def _check_doc(doc: object, text: str, file: str | None) -> tuple[Graph | None, list[Issue]]:
    """Decode and validate ``doc``, the parsed ``text`` (issues get their line in ``text``)."""
    newer = _newer_minor(doc)
    first = [newer] if newer is not None else []
    try:
        g, ignored = decode(doc, file)
    except GraphError as e:
        return None, _with_lines(first + e.issues + e.warnings, text)
    issues = first + ignored + validate(g)
    if issues:
        issues = _with_lines(issues, text)
    errors = [i for i in issues if i.severity == "error"]
    return (None if errors else g), issues


def loads(text: str, file: str | None = None) -> Graph:
    """The validated Graph in ``text``; GraphError (one line per problem) otherwise.

    A newer minor version, and the fields of it that are ignored, are warned about as
    :class:`~solar_io.errors.GraphWarning` lines (the CLI prints them on stderr)."""
    g, issues = check_text(text, file)
    if g is None:
        raise GraphError(issues, file)
    warn(issues, file)
    return g


def warn(issues: list[Issue], file: str | None = None) -> None:
    """Issue the newer-minor-version warning among ``issues`` as a :class:`~solar_io.errors.GraphWarning`,
    with the fields of that version that were ignored (at most a few named); ``solar-io check`` lists
    every warning, including validation's."""
    newer = newer_minor(issues)
    if newer is None:
        return
    warnings.warn(GraphWarning(newer.format(file)), stacklevel=3)
    ignored = [i.where() for i in issues if i.severity == "warning" and i is not newer and "newer minor" in i.message]
    if ignored:
        more = f" and {len(ignored) - _MAX_WARNINGS} more" if len(ignored) > _MAX_WARNINGS else ""
        warnings.warn(GraphWarning(f"{file or '<graph>'}: warning: {len(ignored)} field(s) of the newer version "
                                   f"ignored: {', '.join(ignored[:_MAX_WARNINGS])}{more}"), stacklevel=3)


_MAX_WARNINGS = 5  # ignored fields named: an old reader of a big newer file would list one per node


def load(path: str | Path) -> Graph:
    """The validated Graph in the file at ``path``."""
    try:
        text = read_text(path)
    except YamlError as e:
        raise GraphError([Issue((), str(e))], str(path)) from None
    except OSError as e:
        raise GraphError([Issue((), f"cannot read: {e.strerror or e}")], str(path)) from None
    return loads(text, str(path))


def dumps(g: Graph) -> str:
    """The canonical YAML text of ``g``."""
    with _gc_paused():
        return emit(encode(g))


def checked_dumps(g: Graph, file: str | None = None) -> str:
    """The canonical text of ``g`` after checking it as ``solar-io check`` would: GraphError (naming
    ``file``, "not written") for a graph no reader would accept, such as a rank of size 0.

    The document the text is emitted from is decoded and validated, not the text parsed again: the
    canonical text parses back to that document (``parse(emit(doc)) == doc``, tested on every golden
    file and capture of the test models), and the parse was a quarter of the check's time."""
    with _gc_paused():
        doc = encode(g)
        text = emit(doc)
        _, issues = _check_doc(doc, text, file)
    errors = [i for i in issues if i.severity == "error"]
    if errors:
        first = errors[0]
        note = Issue(first.path, f"{first.message} (graph not written: solar-io check would refuse it)",
                     line=first.line)
        raise GraphError([note] + errors[1:], file)
    return text


def dump(g: Graph, path: str | Path) -> None:
    """Write ``g`` canonically to ``path`` (atomically: a reader never sees half a file); a graph
    that ``solar-io check`` would refuse is not written (GraphError)."""
    write_atomic(path, checked_dumps(g, str(path)))
