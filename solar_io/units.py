"""Sizes in bytes on the command line: the one parser every size option uses.

The rules (:data:`SIZE_RULES`, quoted in each option's ``--help``):

- ``kB`` or ``KB``, ``MB``, ``GB``, ``TB`` are powers of 1000 (SI): ``40MB`` is 40 000 000 bytes;
- ``KiB``, ``MiB``, ``GiB``, ``TiB`` are powers of 1024 (IEC): ``4MiB`` is 4 194 304 bytes;
- ``B`` or no unit is bytes: ``1e6`` and ``1000000B`` are one million bytes.

Units are case-sensitive, except that the kilo prefix may be written ``k`` or ``K``: ``b`` (bits),
``mb`` (millibits) and ``gib`` are refused rather than guessed, and so is a bare prefix (``2G``),
which one tool reads as 2 GB and another as 2 GiB. Space between the number and the unit is
allowed. The number is read exactly (``0.3MB`` is 300 000 bytes, not 300 000.00000000006).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from .errors import SolarIOError

#: One line for ``--help`` texts: how a size is written.
SIZE_RULES = ("sizes: kB/KB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB powers of 1024; a bare number "
              "(or B) is bytes; units are case-sensitive")

_SIZE = re.compile(r"\s*([+-]?(?:[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+\.))\s*([A-Za-z]*)\s*\Z")
_SCALE = {"": 1, "B": 1, "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


class SizeError(SolarIOError):
    """A size option that cannot be read; the message names the option."""


def _hint(unit: str) -> str:
    """Why ``unit`` is refused, when it is a known unit in the wrong case or a bare prefix."""
    fixed = {u.lower(): u for u in _SCALE if u} | {"kb": "kB or KB"}
    if unit.lower() in fixed:
        return f"{unit!r} is not a unit: units are case-sensitive (did you mean {fixed[unit.lower()]}?)"
    if unit.upper() in ("K", "M", "G", "T"):
        p = unit.upper()
        return f"{unit!r} alone is ambiguous: write {'k' if p == 'K' else p}B for powers of 1000 or {p}iB for 1024"
    return ""


def size_fraction(text: str, option: str) -> Fraction:
    """The exact number of bytes ``text`` means (> 0); :class:`SizeError` naming ``option`` otherwise."""
    m = _SIZE.match(text) if isinstance(text, str) else None
    unit = m.group(2) if m else ""
    if m is None or unit not in _SCALE:
        why = (_hint(unit) if m else "") or SIZE_RULES
        raise SizeError(f"{option}: cannot read {text!r} as a size in bytes ({why}); write e.g. 4MiB, 40MB or 1e6")
    approx = float(m.group(1)) * _SCALE[unit]  # checked first: an exponent like 1e999999 never becomes exact
    if not (approx > 0 and math.isfinite(approx)):
        raise SizeError(f"{option}: must be a positive, finite size in bytes, got {text!r}")
    return Fraction(m.group(1)) * _SCALE[unit]


def parse_size(text: str | float | int, option: str) -> float:
    """Bytes from ``'4MiB'``, ``'40MB'``, ``'1.5 kB'``, ``'1e6'`` (see the module docstring), or a positive
    finite number as is; :class:`SizeError` naming ``option`` otherwise."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise SizeError(f"{option}: expected a size in bytes, got {text!r}")
    if isinstance(text, int | float):
        if not (text > 0 and math.isfinite(text)):
            raise SizeError(f"{option}: must be a positive, finite size in bytes, got {text!r}")
        return float(text)
    return float(size_fraction(text, option))


def parse_size_int(text: str | int, option: str) -> int:
    """Whole bytes (``'1.5KiB'`` is 1536); a size that is not a whole number of bytes is refused."""
    value = size_fraction(text, option) if isinstance(text, str) else Fraction(parse_size(text, option))
    if value.denominator != 1:
        raise SizeError(f"{option}: {text!r} is {float(value):g} bytes, not a whole number of bytes")
    return int(value)


__all__ = ["SIZE_RULES", "SizeError", "parse_size", "parse_size_int", "size_fraction"]
