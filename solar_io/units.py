"""Quantities on the command line: sizes in bytes, times, rates and frequencies; SI formatting.

Sizes (every size option uses :func:`parse_size`) follow these rules

The rules (:data:`SIZE_RULES`, quoted in each option's ``--help``):

- ``kB`` or ``KB``, ``MB``, ``GB``, ``TB`` are powers of 1000 (SI): ``40MB`` is 40 000 000 bytes;
- ``KiB``, ``MiB``, ``GiB``, ``TiB`` are powers of 1024 (IEC): ``4MiB`` is 4 194 304 bytes;
- ``B`` or no unit is bytes: ``1e6`` and ``1000000B`` are one million bytes.

Units are case-sensitive, except that the kilo prefix may be written ``k`` or ``K``: ``b`` (bits),
``mb`` (millibits) and ``gib`` are refused rather than guessed, and so is a bare prefix (``2G``),
which one tool reads as 2 GB and another as 2 GiB. Space between the number and the unit is
allowed. The number is read exactly (``0.3MB`` is 300 000 bytes, not 300 000.00000000006).

Times (``3.1ms``, ``500us``, a bare number is seconds), rates (``500Hz``, ``30/s``) and frequencies
(``1500MHz``) are read by :func:`parse_time`, :func:`parse_rate`, :func:`parse_frequency` (errors
are :class:`~solar_io.errors.BoundError`, naming the option); :func:`format_si`,
:func:`format_time` and :func:`format_ratio` write figures for tables.

>>> parse_size("4MiB", "--capacity"), parse_time("500us"), format_si(9.894e14, "FLOP/s")
(4194304.0, 0.0005, '989.4 TFLOP/s')
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from .errors import BoundError, SolarIOError

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


_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+\.)"
_TIME = re.compile(rf"\s*{_NUMBER}\s*(s|ms|us|µs|μs|ns|sec|secs|seconds?)?\s*\Z")
_RATE = re.compile(rf"\s*{_NUMBER}\s*(hz|khz|mhz|ghz|/s)?\s*\Z", re.IGNORECASE)
_TIME_DIV = {None: 1.0, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0, "ms": 1e3,
             "us": 1e6, "µs": 1e6, "μs": 1e6, "ns": 1e9}  # divisors: 50 / 1e6 is exactly 5e-05
_RATE_SCALE = {None: 1.0, "hz": 1.0, "/s": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


def parse_time(text: str, what: str = "time") -> float:
    """Seconds from ``'3.1ms'``, ``'500us'``, ``'2.5e-3'`` (seconds) or ``'1.2 s'``; > 0."""
    m = _TIME.match(text)
    value = float(m.group(1)) / _TIME_DIV[m.group(2)] if m else math.nan
    if not (value > 0 and math.isfinite(value)):
        raise BoundError(f"{what}: cannot read {text!r} as a positive time; write e.g. 3.1ms, 500us, 2ns "
                         "or 2.5e-3 (seconds)")
    return value


def parse_rate(text: str, what: str = "rate") -> float:
    """Hz from ``'500Hz'``, ``'2kHz'``, ``'60'`` (Hz) or ``'30/s'``; > 0."""
    m = _RATE.match(text)
    value = float(m.group(1)) * _RATE_SCALE[(m.group(2) or "").lower() or None] if m else math.nan
    if not (value > 0 and math.isfinite(value)):
        raise BoundError(f"{what}: cannot read {text!r} as a positive rate; write e.g. 500Hz, 2kHz or 60 (Hz)")
    return value


_FREQUENCY = re.compile(rf"\s*{_NUMBER}\s*(hz|khz|mhz|ghz)?\s*\Z", re.IGNORECASE)


def parse_frequency(text: str | float, what: str = "--clock") -> float:
    """Hz from ``'1500MHz'``, ``'1.5 GHz'``, ``'1.5e9'`` (Hz) or a number; > 0."""
    if isinstance(text, int | float):
        value = float(text)
    else:
        m = _FREQUENCY.match(text)
        value = float(m.group(1)) * _RATE_SCALE[(m.group(2) or "").lower() or None] if m else math.nan
    if not (value > 0 and math.isfinite(value)):
        raise BoundError(f"{what}: cannot read {text!r} as a positive frequency; write e.g. 1500MHz, 1.5GHz "
                         "or 1.5e9 (Hz)")
    return value


_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_si(value: float | None, unit: str) -> str:
    """``9.894e14, 'FLOP/s'`` -> ``'989.4 TFLOP/s'``; None -> ``'-'``."""
    if value is None:
        return "-"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def format_time(seconds: float | None) -> str:
    """``0.0031`` -> ``'3.1 ms'``; None -> ``'-'``."""
    if seconds is None:
        return "-"
    if seconds == 0:
        return "0 s"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-12:.4g} ps"


def format_ratio(x: float | None) -> str:
    """``1.234`` -> ``'1.23x'``; None -> ``'-'``."""
    return "-" if x is None else f"{x:.3g}x"


def parse_bytes(text: float | str | None, what: str = "--capacity") -> float | None:
    """:func:`parse_size` of an optional value (None stays None); ``what`` names the option."""
    return None if text is None else parse_size(text, what)


__all__ = ["SIZE_RULES", "SizeError", "format_ratio", "format_si", "format_time", "parse_bytes", "parse_frequency",
           "parse_rate", "parse_size", "parse_size_int", "parse_time", "size_fraction"]
