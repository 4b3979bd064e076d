"""The format as a table: every record's fields in canonical order, the version that added each, and
per node kind the fields it requires and allows.

:mod:`.codec` decodes and encodes by it, :mod:`.versioning` derives ``SINCE`` from it, :mod:`.validate`
checks a graph's version against it (:func:`fields_too_new`), and ``tests/format/test_schema.py`` holds the JSON
Schema to it. A new optional field is one line here (with its ``since``) plus its codec and meaning.

>>> keys("tensor")
('name', 'ranks', 'dtype', 'role', 'density', 'value', 'generated', 'updates', 'prefilled')
>>> KIND_RULES["opaque"].required
frozenset({'inputs', 'outputs', 'reason'})
>>> SINCE[("node", "kernel")]
(1, 3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Issue


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a record: its name in the file and the format version that added it."""

    name: str
    since: tuple[int, int] = (1, 0)


def _fields(*spec: str | tuple[str, tuple[int, int]]) -> tuple[Field, ...]:
    return tuple(Field(s) if isinstance(s, str) else Field(*s) for s in spec)


#: Every record's fields, in the canonical order the encoder writes them.
RECORDS: dict[str, tuple[Field, ...]] = {
    "document": _fields("format", "version", "name", "producer", ("assumptions", (1, 3)), "ranks", "tensors",
                        "nodes", "validation"),
    "producer": _fields("tool", "tool_version", "frontend", "frontend_version", "source", "source_sha256",
                        ("workload", (1, 2))),
    "workload": _fields("definition", "uuid", "index", "axes", "tolerance"),
    "tensor": _fields("name", "ranks", "dtype", "role", "density", "value", ("generated", (1, 2)),
                      ("updates", (1, 5)), ("prefilled", (1, 8))),
    "node": _fields("name", "kind", "op", "location", "movement", "view", "space", "inputs", "output", "outputs",
                    ("init", (1, 1)), "map", "reduce", ("scan", (1, 1)), "axis", "pad", "fill", "reason",
                    ("kernel", (1, 3)), ("phase", (1, 3)), ("live", (1, 6)), ("fft", (1, 7)), "attrs"),
    "validation": _fields("status", "method", "reference", ("model", (1, 1)), ("attempts", (1, 1)), "seed", "rtol",
                          "atol", "max_abs_error", "max_rel_error", "reduced_ranks", ("unchecked", (1, 2)), "reason"),
    "unchecked": _fields("node", "op", "reason"),
    "fft": _fields("type", "dims", "inverse", "norm"),
    "assumption": _fields("kind", "subject", "detail", "values"),
}


def keys(record: str) -> tuple[str, ...]:
    """The field names of ``record`` in canonical order."""
    return tuple(f.name for f in RECORDS[record])


#: {(record, field): the version that added it}, for every field added after 1.0.
SINCE: dict[tuple[str, str], tuple[int, int]] = {
    (record, f.name): f.since for record, fields in RECORDS.items() for f in fields if f.since > (1, 0)}
#: An entry of the ``nodes`` or ``tensors`` list may be a repeat block (``{repeat: ...}``, :mod:`.repeat`) since 1.4.
SINCE[("node", "repeat")] = SINCE[("tensor", "repeat")] = (1, 4)
#: Fields the reader fills in when it reads a file older than the field (a migration), so a graph of
#: that version may hold them; the encoder leaves them out of such a file.
MIGRATED: frozenset[tuple[str, str]] = frozenset({("node", "kernel")})


@dataclass(frozen=True, slots=True)
class KindRule:
    """What a node kind requires and allows besides the fields every node may have."""

    required: frozenset[str]
    allowed: frozenset[str]


#: The version that added repeat blocks (``{repeat: ...}`` entries of ``nodes``/``tensors``; :mod:`.repeat`).
REPEAT_SINCE: tuple[int, int] = SINCE[("node", "repeat")]
#: Fields any node may have.
COMMON_NODE: frozenset[str] = frozenset({"name", "kind", "op", "location", "kernel", "phase", "attrs"})
KIND_RULES: dict[str, KindRule] = {
    "einsum": KindRule(frozenset({"space", "inputs", "output", "map", "reduce"}),
                       frozenset({"pad", "fill", "scan", "init", "live"})),
    "data_movement": KindRule(frozenset({"movement", "inputs", "output"}),
                              frozenset({"space", "view", "axis", "pad", "fill", "live"})),
    "opaque": KindRule(frozenset({"inputs", "outputs", "reason"}), frozenset()),
    "fft": KindRule(frozenset({"inputs", "output", "fft"}), frozenset()),
}


def _used(value: Any) -> bool:
    return value not in (None, (), False, "")


def fields_too_new(g: Any, version: tuple[int, int]) -> list[Issue]:
    """An error for every field ``g`` (a Graph) uses that its ``version`` does not have yet."""
    from .versioning import too_new  # versioning reads SINCE from this module

    records: list[tuple[str, tuple, Any]] = [("document", (), g), ("producer", ("producer",), g.producer),
                                             ("validation", ("validation",), g.validation)]
    records += [("tensor", ("tensors", i), t) for i, t in enumerate(g.tensors)]
    records += [("node", ("nodes", i), n) for i, n in enumerate(g.nodes)]
    out = []
    if g.repeats and (msg := too_new("field 'repeat'", REPEAT_SINCE, version)):  # blocks: 1.4
        out.append(Issue(("repeats",), msg))
    for record, path, obj in records:
        for f in RECORDS[record]:
            if f.since <= version or (record, f.name) in MIGRATED or not _used(getattr(obj, f.name, None)):
                continue
            msg = too_new(f"field {f.name!r}", f.since, version)
            who = f"node {obj.name}: " if record == "node" else ""
            out.append(Issue(path + (f.name,), who + msg))
    return out
