"""The ``assumptions`` record (since 1.3): what a capture assumed that changes a number.

Each entry is ``{kind, subject, detail, values}``: ``kind`` and ``subject`` are required strings,
``detail`` one sentence, ``values`` a mapping of names to scalars or lists of scalars (e.g. the
tokens each expert receives under the routing model). :mod:`.codec` calls these.

>>> entry = {"kind": "routing", "subject": "moe", "values": {"tokens_per_expert": [3, 1]}}
>>> encode_assumptions(decode_assumptions([entry], _Collect()))
[{'kind': 'routing', 'subject': 'moe', 'values': {'tokens_per_expert': [3, 1]}}]
"""

from __future__ import annotations

from typing import Any

from ..graph import Assumption

ASSUMPTION_KEYS = ("kind", "subject", "detail", "values")


class _Collect:
    """A stand-in error sink for the doctest: ``err(path, message)`` collects."""

    def __init__(self) -> None:
        self.errors: list[tuple[tuple, str]] = []

    def err(self, path: tuple, msg: str) -> None:
        self.errors.append((path, msg))


def _scalar(x: Any) -> bool:
    return isinstance(x, (str, bool, int)) or (isinstance(x, float) and x == x and abs(x) != float("inf"))


def decode_assumptions(items: Any, dec: Any, path: tuple = ("assumptions",)) -> tuple[Assumption, ...]:
    """Decode the list; every problem is reported through ``dec.err(path, message)``."""
    if not isinstance(items, list):
        dec.err(path, "assumptions must be a list of {kind, subject, detail, values}")
        return ()
    out = []
    for i, item in enumerate(items):
        where = path + (i,)
        if not isinstance(item, dict):
            dec.err(where, "an assumption must be a mapping {kind, subject, detail, values}")
            continue
        unknown = [k for k in item if k not in ASSUMPTION_KEYS]
        if unknown:
            dec.err(where + (str(unknown[0]),), f"unknown field {unknown[0]!r} in an assumption; allowed: "
                    f"{', '.join(ASSUMPTION_KEYS)}")
            continue
        fields = {}
        for k in ("kind", "subject", "detail"):
            v = item.get(k, "" if k == "detail" else None)
            if not isinstance(v, str) or (k != "detail" and not v):
                dec.err(where + (k,), f"an assumption's {k} must be a{' non-empty' if k != 'detail' else ''} string")
                break
            fields[k] = v
        else:
            values = item.get("values", {})
            if not isinstance(values, dict) or not all(isinstance(k, str) for k in values):
                dec.err(where + ("values",), "an assumption's values must map names to scalars or lists of scalars")
                continue
            vals = []
            for k, v in values.items():
                if isinstance(v, list) and all(_scalar(x) for x in v):
                    vals.append((k, tuple(v)))
                elif _scalar(v):
                    vals.append((k, v))
                else:
                    dec.err(where + ("values", k), f"value {k!r} must be a finite scalar or a list of them")
                    break
            else:
                out.append(Assumption(fields["kind"], fields["subject"], fields["detail"], tuple(vals)))
    return tuple(out)


def encode_assumptions(assumptions: tuple[Assumption, ...]) -> list[dict]:
    """The canonical list: fields in order, ``detail`` and ``values`` omitted when empty."""
    out = []
    for a in assumptions:
        d: dict[str, Any] = {"kind": a.kind, "subject": a.subject}
        if a.detail:
            d["detail"] = a.detail
        if a.values:
            d["values"] = {k: list(v) if isinstance(v, tuple) else v for k, v in a.values}
        out.append(d)
    return out
