"""Reading hardware specs: the hardware-v1 JSON Schema, the rules it cannot express, and files.

:func:`spec_from_dict` checks a mapping against ``schema/hardware-v1.schema.json`` and a few rules a
schema cannot express (finite numbers, source indices in range, DRAM first, unique level names)
and builds a :class:`~solar_io.hardware.model.HardwareSpec`; :func:`load_spec_file` reads a YAML
file with the core's strict loader (no anchors, no duplicate keys, at most ``MAX_SPEC_BYTES``).

>>> spec_from_dict({"version": "2.0"}, "chip.yaml")
Traceback (most recent call last):
...
solar_io.hardware.model.HardwareSpecError: chip.yaml: hardware spec version 2.0 is not supported; this reader reads 1.x
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from solar_io.format import yamltext
from solar_io.hardware.checked import schema_checked
from solar_io.hardware.model import (
    SUPPORTED_MAJOR,
    Clock,
    HardwareSpec,
    HardwareSpecError,
    Link,
    MeasuredBandwidth,
    MeasuredGemm,
    MemoryLevel,
    Peak,
    Source,
)
from solar_io.resources import data_file

MAX_SPEC_BYTES = 1 << 20  # a spec is a few KiB; refuse anything larger than 1 MiB

__all__ = ["load_spec_file", "schema", "spec_from_dict"]


@lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    doc = json.loads(data_file("schema", "hardware-v1.schema.json").read_text(encoding="utf-8"))
    # the shipped schema itself is checked against the metaschema by tests/hardware/test_hardware_specs.py, not on every
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


def spec_from_dict(data: Any, origin: str | None = None, *, schema: bool = True) -> HardwareSpec:
    """Validate ``data`` against the hardware-v1 schema and build a :class:`HardwareSpec`.

    ``origin`` (usually the file path) prefixes error messages. Raises :class:`HardwareSpecError`
    naming the offending field for schema violations, a newer major version, source indices out
    of range, a first memory level that is not 'dram', or duplicate level names. ``schema=False``
    skips the schema pass only (for a text that passed it: :mod:`.checked`).
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
    errors = list(_validator().iter_errors(data)) if schema else []
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
    """Load and validate the spec file at ``path`` (``text`` overrides reading it); a text that passed the
    schema already (:mod:`.checked`) skips only that pass."""
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
    return spec_from_dict(_safe_load(text, origin), origin, schema=not schema_checked(text))
