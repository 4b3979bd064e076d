"""Reading and writing einsum-graph files: text <-> validated Graph."""

from __future__ import annotations

from pathlib import Path

from .._gc import gc_paused as _gc_paused
from ..errors import GraphError, Issue
from ..graph import Graph
from .codec import decode, encode
from .validate import validate
from .yamltext import YamlError, emit, line_of, parse, read_text, write_atomic


def _with_lines(issues: list[Issue], text: str) -> list[Issue]:
    return [Issue(i.path, i.message, i.severity, i.line if i.line is not None else line_of(text, i.path))
            for i in issues]


def check_text(text: str, file: str | None = None) -> tuple[Graph | None, list[Issue]]:
    """Parse, decode and validate ``text``; the graph (None if invalid) and every issue."""
    with _gc_paused():
        return _check_text(text, file)


def _check_text(text: str, file: str | None) -> tuple[Graph | None, list[Issue]]:
    try:
        doc = parse(text)
    except YamlError as e:
        return None, [Issue((), str(e), line=e.line)]
    try:
        g, warnings = decode(doc, file)
    except GraphError as e:
        return None, _with_lines(e.issues + e.warnings, text)
    issues = warnings + validate(g)
    if issues:
        issues = _with_lines(issues, text)
    errors = [i for i in issues if i.severity == "error"]
    return (None if errors else g), issues


def loads(text: str, file: str | None = None) -> Graph:
    """The validated Graph in ``text``; GraphError (one line per problem) otherwise."""
    g, issues = check_text(text, file)
    if g is None:
        raise GraphError(issues, file)
    return g


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


def dump(g: Graph, path: str | Path) -> None:
    """Write ``g`` canonically to ``path`` (atomically: a reader never sees half a file)."""
    write_atomic(path, dumps(g))
