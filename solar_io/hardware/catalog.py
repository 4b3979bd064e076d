"""The catalog of shipped hardware specs and name/alias/path resolution."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from solar_io.errors import SolarIOError
from solar_io.hardware.spec import HardwareSpec, HardwareSpecError, load_spec_file
from solar_io.resources import data_dir

__all__ = ["UnknownHardwareError", "known_names", "list_specs", "load_spec", "split_clock"]


class UnknownHardwareError(SolarIOError, ValueError):
    """No shipped spec has the requested name or alias; the message lists the known names."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(
            f"unknown hardware {name!r}; known: {', '.join(known)} "
            f"(or give the path of a spec YAML file)"
        )


@lru_cache(maxsize=1)
def _catalog() -> tuple[HardwareSpec, ...]:
    """All shipped specs, sorted by name; checks that names and aliases are unique."""
    folder = data_dir("hardware")
    specs: list[HardwareSpec] = []
    for entry in sorted(folder.iterdir(), key=lambda t: t.name):
        if entry.name.endswith((".yaml", ".yml")) and entry.is_file():
            origin = str(entry) if isinstance(entry, Path) else f"hardware/{entry.name}"
            specs.append(load_spec_file(origin, text=entry.read_text(encoding="utf-8")))
    owner: dict[str, str] = {}
    for spec in specs:
        for key in (spec.name, *spec.aliases):
            if key in owner:
                raise HardwareSpecError(
                    f"{spec.path}: name or alias {key!r} is already used by spec {owner[key]!r}"
                )
            owner[key] = spec.name
    return tuple(sorted(specs, key=lambda s: s.name))


def list_specs() -> list[HardwareSpec]:
    """All shipped hardware specs, sorted by name."""
    return list(_catalog())


def known_names(with_aliases: bool = True) -> list[str]:
    """Names of the shipped specs, each followed by its aliases in parentheses when asked."""
    out = []
    for spec in _catalog():
        out.append(f"{spec.name} ({', '.join(spec.aliases)})" if with_aliases and spec.aliases else spec.name)
    return out


def split_clock(text: str) -> tuple[str, str | None]:
    """``"b200@1500MHz"`` -> ("b200", "1500MHz"): a chip name, alias or spec path locked at a core clock
    (SOL-ExecBench locks B200 at 1500 MHz, H100 at 1410 MHz, A100 at 1065 MHz). The text after the last
    ``@`` is a clock when it ends in Hz (any case); otherwise the whole text is the name. The clock is
    applied by the bound's ``--clock`` code (compute peaks x clock / the spec's clock, DRAM unscaled)."""
    name, sep, clock = str(text).strip().rpartition("@")
    if sep and name and clock.strip().lower().endswith("hz"):
        return name.strip(), clock.strip()
    return str(text).strip(), None


def _looks_like_path(text: str) -> bool:
    if text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text:
        return True
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a name too long for a path, or holding a NUL: not a file
        return False


def load_spec(name_or_path: str | os.PathLike[str]) -> HardwareSpec:
    """Load a spec by chip name, alias (case-insensitive), or path to a YAML file.

    A :class:`os.PathLike`, or a string that ends in ``.yaml``/``.yml``, contains a path separator
    or names an existing file, is read as a file. Raises :class:`UnknownHardwareError` for an
    unknown name and :class:`HardwareSpecError` for a malformed file.
    """
    if isinstance(name_or_path, os.PathLike) or _looks_like_path(str(name_or_path)):
        return load_spec_file(name_or_path)
    key = str(name_or_path).strip().lower()
    for spec in _catalog():
        if spec.matches(key):
            return spec
    raise UnknownHardwareError(str(name_or_path), known_names())
