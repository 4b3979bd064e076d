"""Grid values of a sweep: ``--set NAME=VALUES`` text, progressions, and the Cartesian grid.

Values (:func:`parse_values`)
    A comma-separated list (``1,2,4``; integers, floats or names such as ``bf16``), or a
    progression written with an ellipsis ``a,b,...,z``: the terms before ``...`` fix the rule and
    ``z`` must be reached exactly. When every ratio between consecutive leading terms is the same
    (and not 1) the progression is *geometric* (``1,2,4,...,64``; ``512,1024,...,8192``), otherwise
    when every difference is the same it is *arithmetic*. Two leading terms fit both rules: the
    geometric reading is taken when it reaches ``z`` exactly (powers of two are the usual case),
    else the arithmetic one (``10,7,...,1``); write three terms for an arithmetic progression that
    a geometric one would also reach (``8,16,24,...,64``). The grid is the Cartesian product of
    all ``--set`` lists, the first one varying slowest.

>>> parse_values("512,1024,...,8192")
[512, 1024, 2048, 4096, 8192]
>>> grid(parse_assignments(["batch=1,2", "dtype=bf16,fp16"]))[1]
{'batch': 1, 'dtype': 'fp16'}
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from solar_io.errors import SolarIOError


class SweepError(SolarIOError):
    """A sweep that cannot run as asked: bad ``--set``/``--vary`` text, an unknown parameter."""


def _number(text: str) -> int | float | str:
    t = text.strip()
    for kind in (int, float):
        try:
            return kind(t)
        except ValueError:
            pass
    return t


def _extend(lead: list[Fraction], last: Fraction, step: Any) -> list[Fraction] | None:
    """``lead`` continued by ``step`` (a function of the last term) until it reaches ``last``, or None
    when it passes ``last`` without hitting it."""
    out = list(lead)
    up = lead[-1] > lead[0]
    while (out[-1] < last) if up else (out[-1] > last):
        out.append(step(out[-1]))
    return out if out[-1] == last else None


def _progression(lead: list[Fraction], last: Fraction, what: str) -> list[Fraction]:
    if len(lead) < 2:
        raise SweepError(f"{what}: a progression needs two terms before '...' (e.g. 1,2,...,64)")
    ratios = {b / a for a, b in zip(lead, lead[1:], strict=False)} if all(t > 0 for t in lead) else set()
    diffs = {b - a for a, b in zip(lead, lead[1:], strict=False)}
    geometric = len(ratios) == 1 and next(iter(ratios)) != 1
    arithmetic = len(diffs) == 1 and next(iter(diffs)) != 0
    if geometric:
        r = next(iter(ratios))
        out = _extend(lead, last, lambda t: t * r)
        if out is not None:
            return out
        if not arithmetic:
            raise SweepError(f"{what}: the geometric progression with ratio {r} does not reach {last}")
    if arithmetic:
        d = next(iter(diffs))
        out = _extend(lead, last, lambda t: t + d)
        if out is None:
            raise SweepError(f"{what}: the arithmetic progression with step {d} does not reach {last}")
        return out
    raise SweepError(f"{what}: the terms before '...' are neither a geometric nor an arithmetic progression")


def parse_values(text: str, what: str = "--set") -> list[Any]:
    """The values of ``a,b,c`` or of a progression ``a,b,...,z`` (see the module docstring)."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise SweepError(f"{what}: empty value in {text!r}; write e.g. 1,2,4 or 1,2,...,64")
    if "..." not in parts:
        return [_number(p) for p in parts]
    k = parts.index("...")
    if k != len(parts) - 2:
        raise SweepError(f"{what}: '...' must come just before the last value, as in 1,2,...,64")
    values = [_number(p) for p in parts[:k] + parts[-1:]]
    if not all(isinstance(v, int | float) for v in values):
        raise SweepError(f"{what}: a progression with '...' needs numbers, got {text!r}")
    terms = _progression([Fraction(p) for p in parts[:k]], Fraction(parts[-1]), what)
    if len(terms) > 100_000:
        raise SweepError(f"{what}: {text!r} has more than 100000 values")
    ints = all(isinstance(v, int) for v in values)
    return [int(t) if ints and t.denominator == 1 else float(t) for t in terms]


def parse_assignments(specs: Sequence[str], what: str = "--set") -> dict[str, list[Any]]:
    """``["batch=1,2,4", "seq=512,...,8192"]`` -> ``{"batch": [1, 2, 4], "seq": [...]}``."""
    out: dict[str, list[Any]] = {}
    for spec in specs:
        name, eq, values = spec.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise SweepError(f"{what}: expected NAME=VALUES, got {spec!r} (e.g. {what} batch=1,2,...,64)")
        if name in out:
            raise SweepError(f"{what}: {name} is given twice")
        out[name] = parse_values(values, f"{what} {name}")
    return out


def grid(params: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the values, the first parameter varying slowest."""
    names = list(params)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*params.values())]
