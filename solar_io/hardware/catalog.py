"""The catalog of shipped hardware specs and name/alias/path resolution."""

from __future__ import annotations

import os
from functools import cache, lru_cache
from pathlib import Path

from solar_io.errors import SolarIOError
from solar_io.format import yamltext
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
def _documents() -> tuple[tuple[str, str], ...]:
    """(origin, text) of every shipped spec file, sorted by file name: read once, parsed on demand."""
    folder = data_dir("hardware")
    out: list[tuple[str, str]] = []
    for entry in sorted(folder.iterdir(), key=lambda t: t.name):
        if entry.name.endswith((".yaml", ".yml")) and entry.is_file():
            origin = str(entry) if isinstance(entry, Path) else f"hardware/{entry.name}"
            out.append((origin, entry.read_text(encoding="utf-8")))
    return tuple(out)


@cache
def _shipped(origin: str) -> HardwareSpec:
    """The validated spec of one shipped file (one object per file, whichever way it was found)."""
    text = dict(_documents())[origin]
    return load_spec_file(origin, text=text)


def _owners(keys: list[tuple[str, tuple[str, ...], str]]) -> dict[str, str]:
    """name or alias -> the spec name that owns it; HardwareSpecError when two specs claim one."""
    owner: dict[str, str] = {}
    for name, aliases, origin in keys:
        for key in (name, *aliases):
            if key in owner:
                raise HardwareSpecError(f"{origin}: name or alias {key!r} is already used by spec {owner[key]!r}")
            owner[key] = name
    return owner


@lru_cache(maxsize=1)
def _catalog() -> tuple[HardwareSpec, ...]:
    """All shipped specs, sorted by name; checks that names and aliases are unique."""
    specs = [_shipped(origin) for origin, _ in _documents()]
    _owners([(s.name, s.aliases, s.path or "") for s in specs])
    return tuple(sorted(specs, key=lambda s: s.name))


@lru_cache(maxsize=1)
def _index() -> dict[str, str] | None:
    """name or alias -> origin of its shipped file, from the parsed files without validating them
    (:func:`load_spec` then validates only the spec asked for); None when a file's name or aliases
    are not plain strings, so that :func:`_catalog` reports the file as it always did."""
    keys: list[tuple[str, tuple[str, ...], str]] = []
    for origin, text in _documents():
        try:
            doc = yamltext.parse(text)
        except yamltext.YamlError:
            return None
        name = doc.get("name") if isinstance(doc, dict) else None
        aliases = doc.get("aliases", []) if isinstance(doc, dict) else None
        if not isinstance(name, str) or not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            return None
        keys.append((name, tuple(aliases), origin))
    try:
        _owners(keys)
    except HardwareSpecError:
        return None  # _catalog raises it, naming the spec file as a full load does
    return {key: origin for name, aliases, origin in keys for key in (name, *aliases)}


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
    index = _index()
    if index is not None:  # only the spec asked for is validated
        if key in index:
            return _shipped(index[key])
        raise UnknownHardwareError(str(name_or_path), known_names())
    for spec in _catalog():
        if spec.matches(key):
            return spec
    raise UnknownHardwareError(str(name_or_path), known_names())
