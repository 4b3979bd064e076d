r"""Canonical YAML text in: a fast line parser of the subset :mod:`.yamlemit` writes.

:func:`_fast_parse` reads canonical text (block mappings and sequences, flow lists of scalars,
plain or double-quoted scalars) line by line; anything outside that subset raises
:class:`_NotCanonical`, and :func:`solar_io.format.yamltext.parse` then hands the text to
PyYAML's safe loader, which gives the same document (tested).

>>> _fast_parse("shape: [4, 8]\ndtype: fp32\n")
{'shape': [4, 8], 'dtype': 'fp32'}
"""

from __future__ import annotations

import math
import re

from .yamlemit import _plain_ok


class _NotCanonical(Exception):
    pass


_INT = re.compile(r"-?(?:0|[1-9][0-9]*)\Z")
_FLOAT = re.compile(r"-?[0-9]+\.[0-9]+(?:e[-+][0-9]+)?\Z")
_SPECIAL = {"null": None, "true": True, "false": False, ".inf": math.inf, "-.inf": -math.inf,
            ".nan": math.nan, "{}": None, "[]": None}
_ESC = re.compile(r'\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|["\\nt])')
_LINE = re.compile(r"( *)(.*)\Z")
_BAD_LINE = re.compile(r"^ *(?:$|#|---)", re.M)  # a line of canonical text is never blank, a comment or ---
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
    if _BAD_LINE.search(text, 0, len(text) - 1):  # a blank line, a comment, a document marker
        raise _NotCanonical
    lines = text.split("\n")
    lines.pop()
    contents = [s.lstrip(" ") for s in lines]
    if " #" in text and any(" #" in c and '"' not in c for c in contents):  # a trailing comment
        raise _NotCanonical
    indents = [len(s) - len(c) for s, c in zip(lines, contents, strict=True)]
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
        # ``key: value`` lines seen before -> (key, value; a list as a tuple): a file repeats most of its
        # lines (every layer's kind, op, space, map lines), so each distinct line is read once
        self.seen: dict[str, tuple[str, object]] = {}

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
        ind, con, seen = self.ind, self.con, self.seen
        n = len(con)
        while i < n and ind[i] == indent:
            content = con[i]
            hit = seen.get(content)
            if hit is not None:
                key, value = hit
                if key in out:
                    raise _NotCanonical
                out[key] = list(value) if type(value) is tuple else value
                i += 1
                continue
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
                value = out[key] = _scalar(rest)
                if type(value) is not dict:
                    seen[content] = (key, tuple(value) if type(value) is list else value)
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
