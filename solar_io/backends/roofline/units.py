"""Reading and writing SI quantities on the command line: times, rates, FLOP/s, bytes."""

from __future__ import annotations

import math
import re

from ...units import parse_size
from .model import BoundError

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
    """``'50MiB'``, ``'40MB'``, ``'1e6'`` or a number -> bytes (None stays None): the one size parser,
    :func:`solar_io.units.parse_size` (kB/KB, MB, ... powers of 1000; KiB, MiB, ... powers of 1024);
    ``what`` names the option in the error."""
    return None if text is None else parse_size(text, what)
