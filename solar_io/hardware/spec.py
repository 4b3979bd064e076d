"""Hardware spec model: frozen dataclasses, parsing, validation and YAML I/O.

A hardware spec (format ``solar-io.hardware``, major version 1) describes one chip by its dense
peak rates per execution-unit class (``matrix``, ``vector``, ``special``) and compute dtype, its
memory hierarchy (DRAM first), and the sources of every number. The JSON Schema
``schema/hardware-v1.schema.json`` is the contract; :func:`spec_from_dict` checks it and a few
rules a schema cannot express (source indices in range, DRAM first, unique level names).

All numbers are SI: FLOP/s (OP/s for integer dtypes), bytes/s, bytes, Hz.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from solar_io.errors import SolarIOError
from solar_io.format import yamltext
from solar_io.resources import data_file

FORMAT_NAME = "solar-io.hardware"
FORMAT_VERSION = "1.1"  # 1.1 adds the optional 'interconnect' (links to other chips)
SUPPORTED_MAJOR = 1
UNIT_CLASSES: tuple[str, ...] = ("matrix", "vector", "special")
#: the dtype classes a peak is given for (fp8 covers its e4m3 and e5m2 forms; see solar_io.dtypes for the file's dtypes)
PEAK_DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4")
MAX_SPEC_BYTES = 1 << 20  # a spec is a few KiB; refuse anything larger than 1 MiB

__all__ = [
    "Clock",
    "HardwareSpec",
    "HardwareSpecError",
    "LINK_KINDS",
    "Link",
    "MeasuredBandwidth",
    "MeasuredGemm",
    "MemoryLevel",
    "Peak",
    "Source",
    "dump_spec_yaml",
    "load_spec_file",
    "schema",
    "spec_from_dict",
    "write_spec",
]


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
        out: dict[str, Any] = {"format": FORMAT_NAME, "version": self.version, "name": self.name,
                               "full_name": self.full_name, "vendor": self.vendor}
        if self.kind is not None:
            out["kind"] = self.kind
        if self.architecture is not None:
            out["architecture"] = self.architecture
        if self.aliases:
            out["aliases"] = list(self.aliases)
        if self.clock is not None:
            out["clock"] = _strip({"hz": self.clock.hz, "source": _ref(self.clock.sources),
                                   "note": self.clock.note})
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


@lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    doc = json.loads(data_file("schema", "hardware-v1.schema.json").read_text(encoding="utf-8"))
    # the shipped schema itself is checked against the metaschema by tests/test_hardware_specs.py, not on every
    # run (that check costs more than validating a spec)
    return Draft202012Validator(doc)


def schema() -> dict[str, Any]:
    """The hardware-v1 JSON Schema as a mapping."""
    return _validator().schema


def _where(origin: str | None) -> str:
    return f"{origin}: " if origin else ""


def _refs(value: Any) -> tuple[int, ...]:
    """A schema-valid source reference (an index or a list of them) as a tuple of ints."""
    return (int(value),) if isinstance(value, int | float) else tuple(int(v) for v in value)


def _non_finite(data: Any, path: str = "") -> tuple[str, str] | None:
    """(path, value text) of the first number in ``data`` that is NaN, infinite, or an integer too
    large for a float (``2**1100``), else None.

    >>> _non_finite({"memory": [{"bandwidth": float("nan")}]})
    ('memory/0/bandwidth', 'nan')
    """
    if isinstance(data, bool):
        return None
    if isinstance(data, float):
        return None if math.isfinite(data) else (path, repr(data))
    if isinstance(data, int):
        return None if abs(data) < _FLOAT_LIMIT else (path, f"an integer of {data.bit_length()} bits")
    items = data.items() if isinstance(data, Mapping) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        found = _non_finite(v, f"{path}/{k}" if path else str(k))
        if found is not None:
            return found
    return None


_FLOAT_LIMIT = 2**1023  # integers from here on have no finite float


def spec_from_dict(data: Any, origin: str | None = None) -> HardwareSpec:
    """Validate ``data`` against the hardware-v1 schema and build a :class:`HardwareSpec`.

    ``origin`` (usually the file path) prefixes error messages. Raises :class:`HardwareSpecError`
    naming the offending field for schema violations, a newer major version, source indices out
    of range, a first memory level that is not 'dram', or duplicate level names.
    """
    where = _where(origin)
    if not isinstance(data, Mapping):
        raise HardwareSpecError(f"{where}a hardware spec must be a mapping, got {type(data).__name__}")
    version = data.get("version")
    if isinstance(version, str) and version.split(".")[0].isdigit():
        major = int(version.split(".")[0])
        if major != SUPPORTED_MAJOR:
            raise HardwareSpecError(
                f"{where}hardware spec version {version} is not supported; this reader reads "
                f"{SUPPORTED_MAJOR}.x"
            )
    bad = _non_finite(data)
    if bad is not None:
        path, value = bad
        raise HardwareSpecError(f"{where}field {path or '(top level)'}: {value} is not a finite number "
                                "(every peak, capacity, bandwidth and clock must be a finite number)")
    errors = list(_validator().iter_errors(data))
    if errors:
        from jsonschema.exceptions import best_match

        err = best_match(errors)
        path = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise HardwareSpecError(f"{where}field {path}: {err.message}{more}")

    n_sources = len(data["sources"])

    def refs(value: Any, field_path: str) -> tuple[int, ...]:
        out = _refs(value)
        bad = [i for i in out if i >= n_sources]
        if bad:
            raise HardwareSpecError(
                f"{where}field {field_path}/source: index {bad[0]} out of range "
                f"(the spec has {n_sources} sources)"
            )
        return out

    units = {
        unit: MappingProxyType({
            dt: Peak(float(p["peak"]), refs(p["source"], f"units/{unit}/{dt}"), p.get("note"))
            for dt, p in peaks.items()
        })
        for unit, peaks in data["units"].items()
    }
    memory: list[MemoryLevel] = []
    for i, m in enumerate(data["memory"]):
        memory.append(MemoryLevel(
            level=m["level"],
            capacity=None if m["capacity"] is None else float(m["capacity"]),
            bandwidth=None if m["bandwidth"] is None else float(m["bandwidth"]),
            sources=refs(m["source"], f"memory/{i}"),
            kind=m.get("kind"), per=m.get("per"), count=m.get("count"), note=m.get("note"),
        ))
    if memory[0].level != "dram":
        raise HardwareSpecError(f"{where}field memory/0/level: the first memory level must be 'dram', "
                                f"got {memory[0].level!r}")
    seen: set[str] = set()
    for i, m in enumerate(memory):
        if m.level in seen:
            raise HardwareSpecError(f"{where}field memory/{i}/level: duplicate level {m.level!r}")
        seen.add(m.level)
    clock = None
    if "clock" in data:
        c = data["clock"]
        clock = Clock(float(c["hz"]), refs(c["source"], "clock"), c.get("note"))
    measured = data.get("measured", {})
    gemm = {dt: MeasuredGemm(float(g["flops"]), int(g["size"]), refs(g["source"], f"measured/gemm/{dt}"),
                             g.get("runs"), g.get("note"))
            for dt, g in measured.get("gemm", {}).items()}
    bandwidth = {pat: MeasuredBandwidth(float(b["bandwidth"]), int(b["buffer_bytes"]),
                                        refs(b["source"], f"measured/bandwidth/{pat}"),
                                        b.get("threads"), b.get("runs"), b.get("note"))
                 for pat, b in measured.get("bandwidth", {}).items()}
    links = {k: Link(ln["kind"], float(ln["bandwidth"]), refs(ln["source"], f"interconnect/{k}"), ln.get("links"),
                     ln.get("domain"), None if ln.get("latency") is None else float(ln["latency"]), ln.get("note"))
             for k, ln in data.get("interconnect", {}).items()}
    aliases = tuple(data.get("aliases", ()))
    if data["name"] in aliases:
        raise HardwareSpecError(f"{where}field aliases: alias {data['name']!r} repeats the name")
    return HardwareSpec(
        name=data["name"], full_name=data["full_name"], vendor=data["vendor"],
        units=MappingProxyType(units), memory=tuple(memory),
        sources=tuple(Source(s["title"], s.get("url"), s.get("note")) for s in data["sources"]),
        version=data["version"], kind=data.get("kind"), architecture=data.get("architecture"),
        aliases=aliases, clock=clock, notes=tuple(data.get("notes", ())),
        measured_gemm=MappingProxyType(gemm), measured_bandwidth=MappingProxyType(bandwidth),
        path=origin, interconnect=MappingProxyType(links),
    )


def _safe_load(text: str, origin: str) -> Any:
    """Parse YAML with the core's strict loader: no anchors/aliases, no duplicate keys, bounded size."""
    if len(text.encode("utf-8")) > MAX_SPEC_BYTES:
        raise HardwareSpecError(f"{origin}: file is larger than {MAX_SPEC_BYTES} bytes")
    try:
        return yamltext.parse(text)
    except yamltext.YamlError as exc:
        line = f":{exc.line}" if exc.line else ""
        raise HardwareSpecError(f"{origin}{line}: {exc}") from None


def load_spec_file(path: str | os.PathLike[str], text: str | None = None) -> HardwareSpec:
    """Load and validate the spec file at ``path`` (``text`` overrides reading it)."""
    origin = str(path)
    if text is None:
        p = Path(path)
        try:
            text = yamltext.read_limited(p, MAX_SPEC_BYTES).decode("utf-8")
        except yamltext.YamlError:
            raise HardwareSpecError(f"{origin}: file is larger than {MAX_SPEC_BYTES} bytes") from None
        except OSError as exc:
            raise HardwareSpecError(f"{origin}: cannot read hardware spec: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise HardwareSpecError(f"{origin}: hardware spec is not UTF-8 text") from None
    return spec_from_dict(_safe_load(text, origin), origin)


def dump_spec_yaml(spec: HardwareSpec) -> str:
    """Canonical YAML text of ``spec`` (the core's deterministic emitter: fixed key order, block
    style, shortest round-trip floats, no anchors)."""
    return yamltext.emit(spec.to_dict())


def write_spec(spec: HardwareSpec, path: str | os.PathLike[str]) -> Path:
    """Write ``spec`` as YAML to ``path`` atomically (temporary file in the same folder, then rename)."""
    target = Path(path)
    text = dump_spec_yaml(spec)
    spec_from_dict(yamltext.parse(text), str(target))  # never write a file we would refuse to read
    target.parent.mkdir(parents=True, exist_ok=True)
    real = Path(os.path.realpath(target))  # a symlink is written through, not replaced
    try:
        mode = real.stat().st_mode & 0o7777  # an existing file keeps its mode
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # a new file: what open() would give (mkstemp makes 0600)
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
