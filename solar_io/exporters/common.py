"""Shared pieces of the exporters: name allocation, stamps, skips and YAML scalars.

Exporters read only a validated :class:`~solar_io.graph.Graph` (loaded from a graph file)
and return text; the same graph always gives the same bytes. Nodes that a target format
cannot express are *skipped* with a reason, never dropped silently: the reasons are
written into the output as comments, returned to the caller (the CLI prints them on
stderr) and, under ``strict``, raised as :class:`ExportError`.
"""

from __future__ import annotations

import hashlib
import json
import keyword
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import SolarIOError
from ..format.files import dumps
from ..graph import Graph

_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_ +*<=-]*\Z")
_NUMBERISH = re.compile(r"[-+]?[0-9._]+([eE][-+]?[0-9]+)?\Z")
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})


class ExportError(SolarIOError):
    """A graph cannot be exported as asked (under ``--strict``, or nothing left to export)."""


@dataclass(frozen=True)
class Skip:
    """A node left out of an export and why."""

    node: str
    reason: str

    def __str__(self) -> str:
        return f"{self.node} ({self.reason})"


@dataclass(frozen=True)
class Export:
    """One exported file: its name (relative to the output folder) and text."""

    name: str
    text: str


@dataclass(frozen=True)
class ExportResult:
    """Everything an exporter produced for one graph."""

    files: tuple[Export, ...]
    skipped: tuple[Skip, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()

    def warnings(self, target: str) -> list[str]:
        """One line per skipped node, for stderr."""
        if not self.skipped:
            return []
        listed = ", ".join(str(s) for s in self.skipped)
        return [f"warning: {len(self.skipped)} node(s) not exported to {target}: {listed}"]


def graph_sha256(g: Graph, source_text: str | None = None) -> str:
    """SHA-256 of the graph file's text (of its canonical text when none is given)."""
    text = dumps(g) if source_text is None else source_text
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stamp_lines(target: str, g: Graph, sha256: str) -> list[str]:
    """The comment lines that open every exported file: tool, version, source hash."""
    from .. import __version__

    name = comment_text(g.name or "unnamed")
    return [f"# {target} written by solar-io {__version__}",
            f"# source graph: {name}, sha256 {sha256}"]


def comment_text(s: str) -> str:
    """``s`` made safe inside a one-line comment (no newlines, no template braces)."""
    return " ".join(s.replace("{", "(").replace("}", ")").replace("%", " percent").split())


def skip_lines(skipped: tuple[Skip, ...] | list[Skip]) -> list[str]:
    """Comment lines naming every skipped node."""
    return [f"# skipped: {comment_text(str(s))}" for s in skipped]


def check_strict(skipped: list[Skip], target: str, strict: bool) -> None:
    """Raise under ``strict`` when a node had to be skipped."""
    if strict and skipped:
        listed = ", ".join(str(s) for s in skipped)
        raise ExportError(f"--strict: {len(skipped)} node(s) cannot be exported to {target}: {listed}")


class Names:
    """Deterministic allocation of target-format names in one namespace.

    ``take(wanted)`` returns ``wanted`` when it is free, else ``wanted_2``, ``wanted_3``...;
    the order of calls fixes the result, so the same graph always gets the same names.
    """

    def __init__(self, reserved: frozenset[str] | set[str] = frozenset()):
        self.taken: set[str] = set(reserved)

    def take(self, wanted: str) -> str:
        name, n = wanted, 1
        while name in self.taken:
            n += 1
            name = f"{wanted}_{n}"
        self.taken.add(name)
        return name


def identifier(s: str, prefix: str = "T") -> str:
    """``s`` as an identifier ``[A-Za-z][A-Za-z0-9_]*``: other characters become ``_``."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", s)
    if not out or not out[0].isalpha():
        out = prefix + out
    return out


def yaml_scalar(s: str | int | float | bool) -> str:
    """A YAML scalar that every YAML 1.1/1.2 loader reads back as the same value."""
    if isinstance(s, bool):
        return "true" if s else "false"
    if isinstance(s, int | float):
        return repr(s)
    if (_PLAIN.match(s) and s.lower() not in _YAML_WORDS and not _NUMBERISH.match(s)
            and not s.endswith(" ")):
        return s
    return json.dumps(s)


def flow_list(items: list[str]) -> str:
    """``[a, b, c]`` with each item a safe scalar."""
    return "[" + ", ".join(yaml_scalar(i) for i in items) + "]"


def flow_map(items: list[tuple[str, str | int]]) -> str:
    """``{K: v, ...}`` with each key and value a safe scalar."""
    return "{" + ", ".join(f"{yaml_scalar(k)}: {yaml_scalar(v)}" for k, v in items) + "}"


def write_exports(result: ExportResult, out_dir: str | Path) -> list[Path]:
    """Write every file of ``result`` into ``out_dir`` (created if needed), atomically."""
    from ..format.yamltext import write_atomic

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in result.files:
        p = d / f.name
        p.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(p, f.text)
        paths.append(p)
    return paths


ISL_WORDS = frozenset({"and", "or", "not", "mod", "floor", "ceil", "min", "max", "exists", "true",
                       "false", "infty", "implies", "xor", "NaN", "EQ", "NE", "LT", "GT", "LE", "GE",
                       "NG", "NL", "AND", "OR"})
"""Words an ISL expression or AccelForge's set expressions reserve."""

PY_WORDS = frozenset(keyword.kwlist) | {"len", "sum", "abs", "int", "float", "str", "set", "list"}
"""Python keywords and builtins that AccelForge's expression evaluator may see."""


def is_identifier(s: str) -> bool:
    """True for ``[A-Za-z][A-Za-z0-9_]*``."""
    return bool(_IDENT.match(s))


__all__ = ["Export", "ExportError", "ExportResult", "ISL_WORDS", "Names", "PY_WORDS", "Skip",
           "check_strict", "comment_text", "flow_list", "flow_map", "graph_sha256", "identifier",
           "is_identifier", "skip_lines", "stamp_lines", "write_exports", "yaml_scalar"]
