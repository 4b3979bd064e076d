"""Canonical YAML text: a safe, limited loader and a deterministic emitter.

The emitter (:mod:`.yamlemit`) writes one canonical text for a document of dicts, lists and
scalars: keys in the given order, two-space block style, lists of plain scalars in flow style
(``[M, K]``), floats as shortest round-trip decimals, no anchors, no tags. It does not depend on
PyYAML's emitter, so the bytes cannot change with a PyYAML upgrade.

The loader (:func:`parse`, here) reads canonical text with a fast line parser (:mod:`.yamlparse`);
any text outside the canonical subset goes to PyYAML's libyaml-based safe loader (pure-Python
PyYAML where libyaml is absent). Both refuse aliases (a billion-laughs bomb costs nothing),
duplicate keys, and files over a size limit; the result is the same Python document either way
(tested). This module also holds the size-limited file reading and the atomic write.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

# re-exported: the emitter and the fast parser were parts of this module
from .yamlemit import emit as emit
from .yamlemit import format_float as format_float
from .yamlemit import scalar_text as scalar_text
from .yamlparse import _fast_parse as _fast_parse
from .yamlparse import _NotCanonical

#: The default size limit of any file solar-io reads (``SOLAR_IO_MAX_BYTES`` overrides it).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def max_bytes() -> int:
    """The size limit in bytes: ``SOLAR_IO_MAX_BYTES`` read by the common size parser (``64MiB``,
    ``100MB``, ``1e6``), else 64 MiB; a value that is not a positive whole size (``abc``, ``-1``,
    ``0.5``) is a one-line :class:`~solar_io.units.SizeError` naming the variable."""
    text = os.environ.get("SOLAR_IO_MAX_BYTES")
    if text is None:
        return DEFAULT_MAX_BYTES
    from ..units import parse_size_int  # units imports errors only; kept local so yamltext loads first

    return parse_size_int(text.strip()[:100], "SOLAR_IO_MAX_BYTES")

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlError(ValueError):
    """Text that is not acceptable YAML; ``line`` is 1-based when known."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line



class _StrictLoader(_Loader):  # type: ignore[misc, valid-type]
    """PyYAML's safe loader, refusing aliases and duplicate keys."""

    def construct_object(self, node, deep=False):  # noqa: ANN001, ANN201
        if node in self.constructed_objects or node in self.recursive_objects:
            raise YamlError("aliases and anchors are not allowed", node.start_mark.line + 1)
        return super().construct_object(node, deep)

    def construct_mapping(self, node, deep=False):  # noqa: ANN001, ANN201
        seen = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # the constructor itself refuses unhashable keys
            key = key_node.value
            if key in seen:
                raise YamlError(f"duplicate key {key!r}", key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep)


def parse(text: str) -> object:
    """Parse YAML text into Python data; YamlError with a line number on failure."""
    limit = max_bytes()
    if len(text) > limit:
        raise YamlError(f"file is larger than the {limit} byte limit (set SOLAR_IO_MAX_BYTES)")
    try:
        return _fast_parse(text)
    except (_NotCanonical, RecursionError):
        pass
    try:
        loader = _StrictLoader(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except YamlError:
        raise
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        msg = " ".join(" ".join(str(x).split()) for x in (e.context, e.problem) if x)
        raise YamlError(f"not valid YAML: {msg}", mark.line + 1 if mark else None) from None
    except yaml.YAMLError as e:
        raise YamlError("not valid YAML: " + " ".join(str(e).split())) from None
    except RecursionError:
        raise YamlError("YAML nesting is too deep") from None
    except (ValueError, TypeError, OverflowError) as e:  # e.g. a timestamp such as 2001-02-30
        raise YamlError("not valid YAML: " + " ".join(str(e).split())) from None


def read_limited(path: str | Path, limit: int) -> bytes:
    """At most ``limit`` bytes of the file at ``path``; YamlError when it holds more.

    Reads ``limit + 1`` bytes at most, whatever the file reports as its size, so a device such as
    ``/dev/zero`` or a growing pipe is refused without exhausting memory."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if stat.S_ISREG(os.fstat(fh.fileno()).st_mode) and size > limit:  # refused before reading
            raise YamlError(f"file is {size} bytes, over the {limit} byte limit (set SOLAR_IO_MAX_BYTES)")
        chunks: list[bytes] = []
        total = 0
        while total <= limit:  # in chunks: a huge limit allocates nothing up front
            chunk = fh.read(min(limit + 1 - total, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    if total > limit:
        raise YamlError(f"file is over the {limit} byte limit (set SOLAR_IO_MAX_BYTES)")
    return b"".join(chunks)


def read_text(path: str | Path) -> str:
    """Read a UTF-8 file of at most :func:`max_bytes` bytes (at most that plus one byte is read)."""
    data = read_limited(path, max_bytes())
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise YamlError(f"not UTF-8 text ({e.reason} at byte {e.start})") from None


def line_of(text: str, path: tuple) -> int | None:
    """1-based line of the YAML node at ``path`` (keys and list indices), best effort."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except Exception:  # noqa: BLE001 - only used to decorate an error already found
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for step in path:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if k.value == step:
                    line, node = k.start_mark.line + 1, v
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            node = node.value[step]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename.

    A symlink is written through (its target is replaced, the link stays), and an existing file
    keeps its permission bits (a 0600 file stays 0600); a new file gets the usual umask mode."""
    p = Path(os.path.realpath(path))
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        mode = os.stat(p).st_mode & 0o7777
    except OSError:
        mode = None
    try:
        tmp.write_text(text, encoding="utf-8")
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()
