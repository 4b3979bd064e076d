"""Canonical YAML text: a safe, limited loader and a deterministic emitter.

The emitter writes one canonical text for a document of dicts, lists and scalars: keys in
the given order, two-space block style, lists of plain scalars in flow style (``[M, K]``),
floats as shortest round-trip decimals, no anchors, no tags. It does not depend on
PyYAML's emitter, so the bytes cannot change with a PyYAML upgrade.

The loader reads canonical text with a fast line parser; any text outside the canonical
subset goes to PyYAML's libyaml-based safe loader (pure-Python PyYAML where libyaml is
absent). Both refuse aliases (a billion-laughs bomb costs nothing), duplicate keys, and
files over a size limit; the result is the same Python document either way (tested).
"""

from __future__ import annotations

import math
import os
import re
import stat
from functools import lru_cache
from pathlib import Path

import yaml

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


# ----------------------------------------------------------------------------- emitting

_PLAIN_FIRST = re.compile(r"[A-Za-z0-9_./(]")
_PLAIN_BODY = re.compile(r"[A-Za-z0-9_@.\-/+*() ,\[\]:=<>~^;!?%&$']*\Z")
_FLOW_UNSAFE = re.compile(r"[,\[\]{}]")
_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"


@lru_cache(maxsize=1 << 16)
def _plain_ok(s: str, flow: bool) -> bool:
    """True when ``s`` may be written unquoted and reads back as the same string."""
    if not s or not _PLAIN_FIRST.match(s) or not _PLAIN_BODY.match(s):
        return False
    if ": " in s or s.endswith(":") or s.endswith(" ") or "  " in s or (flow and _FLOW_UNSAFE.search(s)):
        return False
    return _RESOLVER.resolve(yaml.ScalarNode, s, (True, False)) == _STR_TAG


def _quote(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif o == 0x0A:
            out.append("\\n")
        elif o == 0x09:
            out.append("\\t")
        elif o < 0x100:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def format_float(x: float) -> str:
    """Canonical YAML text of a float: shortest round-trip digits, always with a dot."""
    if math.isnan(x):
        return ".nan"
    if math.isinf(x):
        return ".inf" if x > 0 else "-.inf"
    r = repr(float(x))
    if "e" in r:
        mant, exp = r.split("e")
        if "." not in mant:
            mant += ".0"
        return f"{mant}e{exp}"
    return r


_STR_TEXT: dict[tuple[str, bool], str] = {}


def scalar_text(v: object, flow: bool = False) -> str:
    """Canonical text of one scalar."""
    if type(v) is str:
        key = (v, flow)
        text = _STR_TEXT.get(key)
        if text is None:
            text = v if _plain_ok(v, flow) else _quote(v)
            if len(_STR_TEXT) < 1 << 18:
                _STR_TEXT[key] = text
        return text
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format_float(v)
    if isinstance(v, str):
        return v if _plain_ok(v, flow) else _quote(v)
    raise TypeError(f"cannot write {type(v).__name__} to YAML")


def _is_scalar(v: object) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _flow_list(items: list) -> str | None:
    """``[a, b]`` when every item is a number, bool, null or flow-safe plain string."""
    texts = []
    for v in items:
        if not _is_scalar(v):
            return None
        t = scalar_text(v, flow=True)
        if t[0] == '"':
            return None
        texts.append(t)
    return "[" + ", ".join(texts) + "]"


def _emit(obj: object, indent: int, out: list[str]) -> None:
    pad = " " * indent
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = scalar_text(k)
            if isinstance(v, dict) and v:
                out.append(f"{pad}{key}:")
                _emit(v, indent + 2, out)
            elif isinstance(v, list) and v:
                flow = _flow_list(v)
                if flow is not None:
                    out.append(f"{pad}{key}: {flow}")
                else:
                    out.append(f"{pad}{key}:")
                    _emit(v, indent, out)
            elif isinstance(v, dict):
                out.append(f"{pad}{key}: {{}}")
            elif isinstance(v, list):
                out.append(f"{pad}{key}: []")
            else:
                out.append(f"{pad}{key}: {scalar_text(v)}")
    elif isinstance(obj, list):
        for v in obj:
            if isinstance(v, dict) and v:
                sub: list[str] = []
                _emit(v, indent + 2, sub)
                sub[0] = f"{pad}- {sub[0][indent + 2:]}"
                out.extend(sub)
            elif isinstance(v, list):
                flow = _flow_list(v)
                if flow is None:
                    raise TypeError("nested lists of strings or collections are not part of the format")
                out.append(f"{pad}- {flow}")
            elif isinstance(v, dict):
                out.append(f"{pad}- {{}}")
            else:
                out.append(f"{pad}- {scalar_text(v)}")
    else:
        raise TypeError("a YAML document must be a mapping or a list")


def emit(doc: dict | list) -> str:
    """Canonical YAML text of ``doc`` (a dict or list of dicts, lists and scalars)."""
    out: list[str] = []
    _emit(doc, 0, out)
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- loading

class _NotCanonical(Exception):
    pass


_INT = re.compile(r"-?(?:0|[1-9][0-9]*)\Z")
_FLOAT = re.compile(r"-?[0-9]+\.[0-9]+(?:e[-+][0-9]+)?\Z")
_SPECIAL = {"null": None, "true": True, "false": False, ".inf": math.inf, "-.inf": -math.inf,
            ".nan": math.nan, "{}": None, "[]": None}
_ESC = re.compile(r'\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|["\\nt])')
_LINE = re.compile(r"( *)(.*)\Z")
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-/]*):(?: (.*))?\Z")


def _unescape(m: re.Match) -> str:
    e = m.group(1)
    simple = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}.get(e)
    if simple is not None:
        return simple
    code = int(e[1:], 16)
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise _NotCanonical  # let libyaml judge (and refuse) it
    return chr(code)


#: Plain words that YAML 1.1 resolves to something other than a string.
_RESERVED = frozenset("yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF "
                      "null Null NULL y Y n N".split())
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")


def _scalar(tok: str, flow: bool = False) -> object:
    if not tok:
        raise _NotCanonical
    c = tok[0]
    if (c.isalpha() or c == "_") and tok not in _RESERVED and _IDENT.match(tok):
        return tok
    if c == "[":
        if flow or tok[-1] != "]" or any(ch in tok[1:-1] for ch in "[]{}\"'"):
            raise _NotCanonical
        inner = tok[1:-1]
        if not inner:
            return []
        return [x if (x not in _RESERVED and _IDENT.match(x)) else _scalar(x, True) for x in inner.split(", ")]
    if tok in _SPECIAL:
        if tok == "{}":
            return {}
        return _SPECIAL[tok]
    if _INT.match(tok):
        return int(tok)
    if _FLOAT.match(tok):
        return float(tok)
    if c == '"':
        if len(tok) < 2 or tok[-1] != '"' or flow:
            raise _NotCanonical
        body = tok[1:-1]
        stripped = _ESC.sub("", body)
        if '"' in stripped or "\\" in stripped or any(ord(ch) < 0x20 or ord(ch) > 0x7E for ch in stripped):
            raise _NotCanonical
        return _ESC.sub(_unescape, body)
    if _plain_ok(tok, flow):
        return tok
    raise _NotCanonical


def _fast_parse(text: str) -> object:
    if "\t" in text or "\r" in text or not text.endswith("\n"):
        raise _NotCanonical
    indents: list[int] = []
    contents: list[str] = []
    for s in text.split("\n")[:-1]:
        content = s.lstrip(" ")
        if not content or content[0] == "#" or (" #" in content and '"' not in content) or content.startswith("---"):
            raise _NotCanonical
        indents.append(len(s) - len(content))
        contents.append(content)
    if not contents or indents[0] != 0:
        raise _NotCanonical
    p = _Parser(indents, contents)
    obj, i = p.block(0, 0)
    if i != len(contents):
        raise _NotCanonical
    return obj


class _Parser:
    """Recursive descent over (indent, content) lines of canonical text."""

    def __init__(self, indents: list[int], contents: list[str]):
        self.ind = indents
        self.con = contents
        self.keys: set[str] = set()

    def key(self, content: str) -> tuple[str, str | None] | None:
        """(key, rest) when ``content`` is a canonical ``key: value`` or ``key:`` line."""
        k, sep, rest = content.partition(": ")
        if not sep:
            if not content.endswith(":"):
                return None
            k, rest = content[:-1], None
        if k not in self.keys:
            if len(k) > 2 and k[0] == k[-1] == '"' and not any(ch in k[1:-1] for ch in '"\\'):
                return k[1:-1], rest  # a key the emitter quoted (a YAML 1.1 word such as "no")
            if not _KEY.match(k + ":") or not _plain_ok(k, False):
                return None
            self.keys.add(k)
        return k, rest

    def block(self, i: int, indent: int) -> tuple[object, int]:
        c = self.con[i]
        if c == "-" or c.startswith("- "):
            return self.sequence(i, indent)
        return self.mapping(i, indent)

    def mapping(self, i: int, indent: int) -> tuple[dict, int]:
        out: dict = {}
        ind, con = self.ind, self.con
        n = len(con)
        while i < n and ind[i] == indent:
            content = con[i]
            if content.startswith("- "):
                break
            kv = self.key(content)
            if kv is None or kv[0] in out:
                raise _NotCanonical
            key, rest = kv
            i += 1
            if rest is None:
                if i >= n:
                    raise _NotCanonical
                if ind[i] > indent:
                    out[key], i = self.block(i, ind[i])
                elif ind[i] == indent and con[i].startswith("- "):
                    out[key], i = self.sequence(i, indent)
                else:
                    raise _NotCanonical
            else:
                out[key] = _scalar(rest)
        if i < n and ind[i] > indent:
            raise _NotCanonical
        return out, i

    def sequence(self, i: int, indent: int) -> tuple[list, int]:
        out: list = []
        ind, con = self.ind, self.con
        n = len(con)
        while i < n and ind[i] == indent and con[i].startswith("- "):
            rest = con[i][2:]
            if self.key(rest) is not None:
                ind[i], con[i] = indent + 2, rest
                item, i = self.mapping(i, indent + 2)
                out.append(item)
            else:
                out.append(_scalar(rest))
                i += 1
        if i < n and ind[i] > indent:
            raise _NotCanonical
        return out, i


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
