"""The decoder's state: every structural problem of a document collected as an ``Issue`` with its path.

:class:`_Decoder` reads one field at a time (``get`` checks its type, ``mapping`` the allowed keys,
``since`` the version that added each field, ``name`` a rank or tensor name) and records what is
wrong instead of raising, so that one ``GraphError`` lists every problem of a file. A file of a
newer minor version is read leniently: its unknown fields are warnings.

>>> dec = _Decoder((1, 0))
>>> dec.get({"name": 3}, "name", (), (str,), True, "the document") is None
True
>>> [(i.path, i.message) for i in dec.issues]
[(('name',), 'name must be a string, got an integer')]
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ..affine import is_rank_name, is_tensor_name
from ..errors import Issue
from .limits import echo
from .versioning import CURRENT, SINCE, too_new


class _Decoder:
    def __init__(self, version: tuple[int, int]):
        self.issues: list[Issue] = []
        self.version = version
        self.lenient = version > CURRENT  # fields of a newer minor version are ignored with a warning
        self.rank_names: set[str] = set()  # names already found valid
        self.tensor_names: set[str] = set()

    def err(self, path: tuple, msg: str) -> None:
        self.issues.append(Issue(path, msg))

    def warn(self, path: tuple, msg: str) -> None:
        self.issues.append(Issue(path, msg, "warning"))

    def mapping(self, v: Any, path: tuple, keys: tuple[str, ...], what: str) -> dict | None:
        if not isinstance(v, dict):
            self.err(path, f"{what} must be a mapping, got {_kind(v)}")
            return None
        allowed = _keyset(keys)
        for k in v:
            if k not in allowed:
                if self.lenient:
                    self.warn(path + (str(k),), f"unknown field {k!r} (from a newer minor version) ignored")
                else:
                    self.err(path + (str(k),), f"unknown field {k!r} in {what}; allowed: {', '.join(keys)}")
        return v

    def since(self, d: dict, record: str, path: tuple) -> None:
        """Refuse fields of ``d`` that are newer than the file's version."""
        if self.version >= CURRENT:  # a current file may use every field
            return
        for k in d:
            msg = too_new(f"field {k!r}", SINCE[(record, k)], self.version) if (record, k) in SINCE else None
            if msg:
                self.err(path + (k,), msg)

    def get(self, d: dict, key: str, path: tuple, types: tuple, required: bool, what: str) -> Any:
        v = d.get(key, _ABSENT)
        if v is _ABSENT:
            if required:
                self.err(path, f"missing required field {key!r} in {what}")
            return None
        if type(v) in types:  # exactly a type asked for (the common case): what _is accepts
            return v
        if not _is(v, types):
            self.err(path + (key,), f"{key} must be {_names(types)}, got {_kind(v)}")
            return None
        return v

    def name(self, v: Any, path: tuple, rank: bool = False) -> str | None:
        if type(v) is str and v in (self.rank_names if rank else self.tensor_names):
            return v
        if not isinstance(v, str):
            self.err(path, f"must be a string name, got {_kind(v)}")
            return None
        ok = is_rank_name(v) if rank else is_tensor_name(v)
        if not ok:
            self.err(path, f"bad {'rank' if rank else ''} name {v!r}".replace("  ", " ")
                     + (": use letters, digits and _" if rank else ": use letters, digits and _ . : / -"))
            return None
        (self.rank_names if rank else self.tensor_names).add(v)
        return v

    def rank_list(self, v: Any, path: tuple) -> tuple[str, ...] | None:
        if not isinstance(v, list):
            self.err(path, f"must be a list of rank names, got {_kind(v)}")
            return None
        known = self.rank_names
        if all(type(r) is str and r in known for r in v) and len(set(v)) == len(v):
            return tuple(v)  # names found valid before, none twice
        out = [self.name(r, path + (i,), rank=True) for i, r in enumerate(v)]
        if any(r is None for r in out):
            return None
        if len(set(out)) != len(out):
            self.err(path, f"rank listed twice in {echo(v)}")
            return None
        return tuple(out)  # type: ignore[arg-type]


_keyset = cache(frozenset)  # a record's field names (a tuple, in canonical order) as a set

_ABSENT = object()  # a field missing from its mapping (None is a value: null)


def _is(v: Any, types: tuple) -> bool:
    if isinstance(v, bool):
        return bool in types
    if float in types and isinstance(v, int):
        return True
    return isinstance(v, types)


def _kind(v: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _names(types: tuple) -> str:
    return " or ".join({str: "a string", int: "an integer", float: "a number", bool: "a boolean",
                        list: "a list", dict: "a mapping"}[t] for t in types)
