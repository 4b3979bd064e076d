"""The hardware spec model: frozen dataclasses for one chip and its canonical mapping.

A :class:`HardwareSpec` holds a chip's dense peak rates per execution-unit class (``matrix``,
``vector``, ``special``) and compute dtype, its memory hierarchy (DRAM first), its links to other
chips and the sources of every number. :meth:`HardwareSpec.to_dict` is the canonical mapping that
:mod:`solar_io.hardware.write` emits; :mod:`solar_io.hardware.read` builds a spec from a mapping.

All numbers are SI: FLOP/s (OP/s for integer dtypes), bytes/s, bytes, Hz.

>>> MemoryLevel("l2", 5e7, None, (0,), per="chip", count=2).total_capacity
100000000.0
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from solar_io.errors import SolarIOError

FORMAT_NAME = "solar-io.hardware"
FORMAT_VERSION = "1.1"  # 1.1 adds the optional 'interconnect' (links to other chips)
SUPPORTED_MAJOR = 1
UNIT_CLASSES: tuple[str, ...] = ("matrix", "vector", "special")
#: the dtype classes a peak is given for (fp8 covers its e4m3 and e5m2 forms; see solar_io.dtypes for the file's dtypes)
PEAK_DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4")

__all__ = ["LINK_KINDS", "PEAK_DTYPES", "UNIT_CLASSES", "Clock", "HardwareSpec", "HardwareSpecError", "Link",
           "MeasuredBandwidth", "MeasuredGemm", "MemoryLevel", "Peak", "Source"]


class HardwareSpecError(SolarIOError, ValueError):
    """A hardware spec file or mapping is malformed; the message names the file and field."""


@dataclass(frozen=True)
class Source:
    """A document (or local procedure) that numbers come from."""

    title: str
    url: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Peak:
    """Dense peak rate of one unit class for one dtype, in FLOP/s (OP/s for integers)."""

    value: float
    sources: tuple[int, ...]
    note: str | None = None


@dataclass(frozen=True)
class Clock:
    """A clock frequency in Hz used in derivations."""

    hz: float
    sources: tuple[int, ...]
    note: str | None = None


@dataclass(frozen=True)
class MemoryLevel:
    """One memory level. ``capacity`` is per instance when ``per`` is set (``count`` instances)."""

    level: str
    capacity: float | None
    bandwidth: float | None
    sources: tuple[int, ...]
    kind: str | None = None
    per: str | None = None
    count: int | None = None
    note: str | None = None

    @property
    def total_capacity(self) -> float | None:
        """Capacity of all instances together in bytes, or None when unpublished."""
        if self.capacity is None:
            return None
        return self.capacity * (self.count or 1)


#: The kinds of link a spec's ``interconnect`` may give, fastest domain first.
LINK_KINDS: tuple[str, ...] = ("scale_up", "host", "scale_out")


@dataclass(frozen=True)
class Link:
    """One kind of link of a chip (format 1.1): ``bandwidth`` bytes/s per chip and per direction, all
    links of the kind together; ``domain`` chips reachable over it (None: any, a network);
    ``latency`` seconds per collective step, None when unpublished.

    >>> Link("NVLink 4", 4.5e11, (0,), links=18, domain=8).bandwidth
    450000000000.0
    """

    kind: str
    bandwidth: float
    sources: tuple[int, ...]
    links: int | None = None
    domain: int | None = None
    latency: float | None = None
    note: str | None = None


@dataclass(frozen=True)
class MeasuredGemm:
    """Best measured GEMM rate (FLOP/s) for one dtype, at square size ``size``."""

    flops: float
    size: int
    sources: tuple[int, ...]
    runs: int | None = None
    note: str | None = None


@dataclass(frozen=True)
class MeasuredBandwidth:
    """Best measured bandwidth (bytes/s, STREAM counting) of one access pattern."""

    bandwidth: float
    buffer_bytes: int
    sources: tuple[int, ...]
    threads: int | None = None
    runs: int | None = None
    note: str | None = None


#: HardwareSpec fields held as read-only mappings (``units`` one level deeper).
_PROXIED = ("units", "measured_gemm", "measured_bandwidth", "interconnect")


def _rebuild_spec(state: dict) -> HardwareSpec:
    """The inverse of ``HardwareSpec.__reduce__``."""
    for k in _PROXIED:
        state[k] = MappingProxyType({key: MappingProxyType(v) if isinstance(v, dict) else v
                                     for key, v in state[k].items()})
    return HardwareSpec(**state)


@dataclass(frozen=True)
class HardwareSpec:
    """A chip's speed-of-light parameters (see the module docstring for the format).

    ``units`` maps unit class -> dtype -> :class:`Peak` (read-only mappings). ``memory`` is ordered
    from DRAM inwards. ``path`` is where the spec was loaded from, if anywhere.
    """

    name: str
    full_name: str
    vendor: str
    units: Mapping[str, Mapping[str, Peak]] = field(hash=False)
    memory: tuple[MemoryLevel, ...]
    sources: tuple[Source, ...]
    version: str = FORMAT_VERSION
    kind: str | None = None
    architecture: str | None = None
    aliases: tuple[str, ...] = ()
    clock: Clock | None = None
    notes: tuple[str, ...] = ()
    measured_gemm: Mapping[str, MeasuredGemm] = field(
        default_factory=lambda: MappingProxyType({}), hash=False
    )
    measured_bandwidth: Mapping[str, MeasuredBandwidth] = field(
        default_factory=lambda: MappingProxyType({}), hash=False
    )
    path: str | None = field(default=None, compare=False)
    #: {'scale_up' | 'host' | 'scale_out': Link} (format 1.1); empty when the spec gives none.
    interconnect: Mapping[str, Link] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    def __reduce__(self) -> tuple:
        """Pickling (a spec sent to worker processes): the read-only mappings travel as dicts and
        are made read-only again on arrival."""
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        for k in _PROXIED:
            state[k] = {key: dict(v) if isinstance(v, Mapping) else v for key, v in state[k].items()}
        return (_rebuild_spec, (state,))

    def link(self, kind: str) -> Link | None:
        """The chip's link of ``kind`` ('scale_up', 'host', 'scale_out'), or None."""
        return self.interconnect.get(kind)

    def peak(self, unit: str, dtype: str) -> float | None:
        """Dense peak of ``unit`` ('matrix', 'vector', 'special') for ``dtype`` in FLOP/s, or None."""
        entry = self.units.get(unit, {}).get(dtype)
        return None if entry is None else entry.value

    @property
    def dram(self) -> MemoryLevel:
        """The off-chip memory level (the first entry of ``memory``)."""
        return self.memory[0]

    @property
    def dram_bandwidth(self) -> float | None:
        """DRAM bandwidth in bytes/s (the bandwidth that bounds use)."""
        return self.dram.bandwidth

    def level(self, name: str) -> MemoryLevel | None:
        """The memory level called ``name``, or None."""
        return next((m for m in self.memory if m.level == name), None)

    def matches(self, name: str) -> bool:
        """True when ``name`` equals this spec's name or one of its aliases, case-insensitively."""
        key = name.strip().lower()
        return key == self.name or key in self.aliases

    def to_dict(self) -> dict[str, Any]:
        """The spec as a plain mapping in canonical key order (the inverse of spec_from_dict)."""
        clock = self.clock
        out: dict[str, Any] = _strip({
            "format": FORMAT_NAME, "version": self.version, "name": self.name, "full_name": self.full_name,
            "vendor": self.vendor, "kind": self.kind, "architecture": self.architecture,
            "aliases": list(self.aliases) or None,
            "clock": None if clock is None else _strip({"hz": clock.hz, "source": _ref(clock.sources),
                                                        "note": clock.note}),
        })
        out["units"] = {
            unit: {dt: _strip({"peak": p.value, "source": _ref(p.sources), "note": p.note})
                   for dt, p in peaks.items()}
            for unit, peaks in self.units.items()
        }
        out["memory"] = [
            _strip({"level": m.level, "kind": m.kind, "capacity": m.capacity, "bandwidth": m.bandwidth,
                    "per": m.per, "count": m.count, "source": _ref(m.sources), "note": m.note},
                   keep=("capacity", "bandwidth"))
            for m in self.memory
        ]
        if self.interconnect:
            out["interconnect"] = {
                k: _strip({"kind": ln.kind, "bandwidth": ln.bandwidth, "links": ln.links, "domain": ln.domain,
                           "latency": ln.latency, "source": _ref(ln.sources), "note": ln.note})
                for k, ln in self.interconnect.items()
            }
        measured: dict[str, Any] = {}
        if self.measured_gemm:
            measured["gemm"] = {dt: _strip({"flops": g.flops, "size": g.size, "runs": g.runs,
                                            "source": _ref(g.sources), "note": g.note})
                                for dt, g in self.measured_gemm.items()}
        if self.measured_bandwidth:
            measured["bandwidth"] = {
                pat: _strip({"bandwidth": b.bandwidth, "buffer_bytes": b.buffer_bytes, "threads": b.threads,
                             "runs": b.runs, "source": _ref(b.sources), "note": b.note})
                for pat, b in self.measured_bandwidth.items()
            }
        if measured:
            out["measured"] = measured
        if self.notes:
            out["notes"] = list(self.notes)
        out["sources"] = [_strip({"title": s.title, "url": s.url, "note": s.note}) for s in self.sources]
        return out


def _ref(sources: tuple[int, ...]) -> int | list[int]:
    return sources[0] if len(sources) == 1 else list(sources)


def _strip(d: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """Drop None values except for keys in ``keep`` (which the schema requires, possibly null)."""
    return {k: v for k, v in d.items() if v is not None or k in keep}
