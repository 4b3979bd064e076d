"""Systems of many chips: a chip spec, chips per node, nodes, and the links between them.

A system spec (format ``solar-io.system``, ``schema/system-v1.schema.json``) lives in
``hardware/systems/NAME.yaml`` (``dgx-h100x4``: four DGX H100 nodes) or anywhere as a path. Its
``links`` replace the chip spec's ``interconnect`` entries of the same name. Without a system
(``--hw NAME --parallel ...``) the chips of the layout are joined by the chip spec's own links:
``scale_up.domain`` chips per node, as many nodes as the layout needs.

Bandwidths are per chip and per direction (a ring step sends as much as it receives).

>>> s = load_system("dgx-h100x4")
>>> s.chips, s.domain, s.scale_up.bandwidth, s.scale_out.bandwidth
(32, 8, 450000000000.0, 50000000000.0)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from solar_io.format import yamltext
from solar_io.hardware import HardwareSpec, Link, load_spec
from solar_io.resources import data_dir, data_file

from .layout import ParallelError

FORMAT_NAME = "solar-io.system"
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class System:
    """Chips and links. ``scale_up`` joins the ``domain`` chips of one node; ``scale_out`` (None when
    the system has one node) joins nodes, one path per chip at its bandwidth."""

    name: str
    full_name: str
    chip: HardwareSpec
    chips_per_node: int
    nodes: int
    scale_up: Link | None
    scale_out: Link | None
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()  # "title <url>" of the system file's own sources

    @property
    def chips(self) -> int:
        """All chips of the system."""
        return self.chips_per_node * self.nodes

    @property
    def domain(self) -> int:
        """Chips per scale-up domain (a node)."""
        return self.chips_per_node

    def domain_of(self, chip: int) -> int:
        """The scale-up domain (node) chip number ``chip`` is in."""
        return chip // self.chips_per_node


@lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    doc = json.loads(data_file("schema", "system-v1.schema.json").read_text(encoding="utf-8"))
    return Draft202012Validator(doc)


def _link(data: dict[str, Any]) -> Link:
    src = data["source"]
    return Link(data["kind"], float(data["bandwidth"]), (src,) if isinstance(src, int) else tuple(src),
                data.get("links"), data.get("domain"), None if data.get("latency") is None else float(data["latency"]),
                data.get("note"))


def system_from_dict(data: Any, origin: str) -> System:
    """Validate a system mapping and build the :class:`System` (errors name ``origin`` and the field)."""
    if not isinstance(data, dict):
        raise ParallelError(f"{origin}: a system spec must be a mapping")
    errors = list(_validator().iter_errors(data))
    if errors:
        from jsonschema.exceptions import best_match

        err = best_match(errors)
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        raise ParallelError(f"{origin}: field {where}: {err.message}")
    if int(data["version"].split(".")[0]) != 1:
        raise ParallelError(f"{origin}: system spec version {data['version']} is not supported; this reader reads 1.x")
    n = len(data["sources"])
    links = data.get("links", {})
    for key, ln in links.items():
        refs = [ln["source"]] if isinstance(ln["source"], int) else ln["source"]
        if any(r >= n for r in refs):
            raise ParallelError(f"{origin}: field links/{key}/source: index out of range (the file has {n} sources)")
    try:
        chip = load_spec(data["chip"])
    except Exception as e:  # an unknown chip: one line naming it
        raise ParallelError(f"{origin}: field chip: {e}") from None
    up = _link(links["scale_up"]) if "scale_up" in links else chip.link("scale_up")
    out = _link(links["scale_out"]) if "scale_out" in links else chip.link("scale_out")
    per, nodes = int(data["chips_per_node"]), int(data["nodes"])
    if up is not None and up.domain is not None and up.domain < per:
        raise ParallelError(f"{origin}: chips_per_node {per} exceeds the scale-up domain of {up.domain} chips")
    if nodes > 1 and out is None:
        raise ParallelError(f"{origin}: {nodes} nodes but no scale_out link (in the file or in chip {chip.name})")
    if per > 1 and up is None and chip.link("host") is None:
        raise ParallelError(f"{origin}: {per} chips per node but no scale_up or host link")
    sources = tuple(f"{s['title']} <{s['url']}>" for s in data["sources"])
    return System(data["name"], data["full_name"], chip, per, nodes, up or chip.link("host"),
                  out if nodes > 1 else None, tuple(data.get("notes", ())), sources)


def _read(path: str | os.PathLike[str], text: str | None = None) -> System:
    origin = str(path)
    if text is None:
        try:
            if Path(path).stat().st_size > MAX_BYTES:
                raise ParallelError(f"{origin}: file is larger than {MAX_BYTES} bytes")
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise ParallelError(f"{origin}: cannot read system spec: {e.strerror or e}") from None
    try:
        data = yamltext.parse(text)
    except yamltext.YamlError as e:
        raise ParallelError(f"{origin}: {e}") from None
    return system_from_dict(data, origin)


def system_names() -> list[str]:
    """Names of the shipped system specs."""
    try:
        folder = data_dir("hardware").joinpath("systems")
        return sorted(e.name.rsplit(".", 1)[0] for e in folder.iterdir() if e.name.endswith((".yaml", ".yml")))
    except (FileNotFoundError, NotADirectoryError):
        return []


def load_system(name_or_path: str | os.PathLike[str]) -> System:
    """A shipped system by name (``dgx-h100x4``) or a system YAML file."""
    text = str(name_or_path)
    if isinstance(name_or_path, os.PathLike) or text.endswith((".yaml", ".yml")) or "/" in text:
        return _read(name_or_path)
    key = text.strip().lower()
    if key in system_names():
        entry = data_dir("hardware").joinpath("systems").joinpath(f"{key}.yaml")
        return _read(f"hardware/systems/{key}.yaml", entry.read_text(encoding="utf-8"))
    raise ParallelError(f"unknown system {text!r}; known: {', '.join(system_names()) or 'none'} "
                        "(or give the path of a system YAML file)")


def chip_system(chip: HardwareSpec, chips: int) -> System:
    """The system ``--hw CHIP --parallel ...`` implies: ``chips`` chips, ``scale_up.domain`` per node
    (all in one node when the chip gives no domain), joined by the chip spec's own links."""
    up = chip.link("scale_up") or chip.link("host")
    per = min(chips, up.domain) if up is not None and up.domain else chips
    nodes = -(-chips // per)
    out = chip.link("scale_out")
    if chips > 1 and up is None:
        raise ParallelError(f"hardware {chip.name}: the spec gives no interconnect (scale_up, host); a layout of "
                            f"{chips} chips needs one (give --system or a spec with 'interconnect')")
    if nodes > 1 and out is None:
        raise ParallelError(f"hardware {chip.name}: {chips} chips span {nodes} scale-up domains of {per}, but the "
                            "spec gives no scale_out link; give --system NAME (e.g. dgx-h100x4) or a system YAML")
    name = f"{chip.name}x{chips}"
    return System(name, f"{chips} x {chip.full_name} ({per} per scale-up domain)", chip, per, nodes, up,
                  out if nodes > 1 else None)


__all__ = ["FORMAT_NAME", "System", "chip_system", "load_system", "system_from_dict", "system_names"]
