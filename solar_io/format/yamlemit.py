r"""Canonical YAML text out: a deterministic emitter of dicts, lists and scalars.

The emitter writes one canonical text for a document: keys in the given order, two-space block
style, lists of plain scalars in flow style (``[M, K]``), floats as shortest round-trip decimals,
no anchors, no tags. It does not depend on PyYAML's emitter, so the bytes cannot change with a
PyYAML upgrade (only PyYAML's resolver is asked whether a plain word reads back as a string).

>>> emit({"shape": [4, 8], "dtype": "fp32", "scale": 0.5})
'shape: [4, 8]\ndtype: fp32\nscale: 0.5\n'
>>> scalar_text("no")  # a YAML 1.1 boolean word: quoted
'"no"'
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

import yaml

_PLAIN_FIRST = re.compile(r"[A-Za-z0-9_./(]")
_PLAIN_BODY = re.compile(r"[A-Za-z0-9_@.\-/+*() ,\[\]:=<>~^;!?%&$']*\Z")
_FLOW_UNSAFE = re.compile(r"[,\[\]{}]")
_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"
#: The first characters PyYAML's resolver knows an implicit type (bool, int, null, ...) for; it looks a
#: plain word up by its first character only (and tries its wildcard resolvers, none by default)
_RESOLVED_FIRST = frozenset(k for k in yaml.resolver.Resolver.yaml_implicit_resolvers if k)
_WILDCARD = None in yaml.resolver.Resolver.yaml_implicit_resolvers


@lru_cache(maxsize=1 << 16)
def _plain_ok(s: str, flow: bool) -> bool:
    """True when ``s`` may be written unquoted and reads back as the same string."""
    if not s or not _PLAIN_FIRST.match(s) or not _PLAIN_BODY.match(s):
        return False
    if ": " in s or s.endswith(":") or s.endswith(" ") or "  " in s or (flow and _FLOW_UNSAFE.search(s)):
        return False
    if s[0] not in _RESOLVED_FIRST and not _WILDCARD:  # no implicit type starts so: a string (most names)
        return True
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


#: The text of each string written before, in block context and in a flow list (a file repeats most)
_STR_TEXT: tuple[dict[str, str], dict[str, str]] = ({}, {})


def scalar_text(v: object, flow: bool = False) -> str:
    """Canonical text of one scalar."""
    if type(v) is str:
        texts = _STR_TEXT[flow]
        text = texts.get(v)
        if text is None:
            text = v if _plain_ok(v, flow) else _quote(v)
            if len(texts) < 1 << 18:
                texts[v] = text
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
    known = _STR_TEXT[True]
    for v in items:
        if type(v) is str:
            t = known.get(v)
            if t is None:
                if not _plain_ok(v, True):  # it would be quoted: no flow list (an access such as x[B, S])
                    return None
                t = v
        elif _is_scalar(v):
            t = scalar_text(v, flow=True)
        else:
            return None
        if t[0] == '"':
            return None
        texts.append(t)
    return "[" + ", ".join(texts) + "]"


def _emit(obj: object, indent: int, out: list[str]) -> None:
    pad = " " * indent
    if isinstance(obj, dict):
        block = _STR_TEXT[False]
        for k, v in obj.items():
            key = block.get(k) if type(k) is str else None
            if key is None:
                key = scalar_text(k)
            if type(v) is str:  # the common case first: a plain string written before
                text = block.get(v)
                out.append(f"{pad}{key}: {text if text is not None else scalar_text(v)}")
            elif isinstance(v, dict) and v:
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
