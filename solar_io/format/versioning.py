"""Format versions: parsing, the reader's accepted range, and migration of old files.

A file's ``version`` is ``"MAJOR.MINOR"``. Minor versions only add optional fields, so a
reader accepts any minor of a major it knows (fields from a newer minor are ignored with a
warning); it refuses a newer major and names the versions it reads. ``migrate`` upgrades a
document of any known older version to the current one, one step at a time.

``SINCE`` (from the format table, :mod:`.kinds`) records the minor version that introduced each
optional field, so a file that says it is 1.0 cannot use a 1.1 field (the reader names the field
and the version it needs); the map operators carry their own ``since`` in ``ops.MAP_OPS``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..errors import SolarIOError
from ..graph import FORMAT_VERSION
from .kernels import declare_kernels_doc
from .kinds import SINCE

_VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\Z")
CURRENT: tuple[int, int] = tuple(int(p) for p in FORMAT_VERSION.split("."))  # type: ignore[assignment]
READS = f"{CURRENT[0]}.x; it writes {FORMAT_VERSION}"


class VersionError(SolarIOError):
    """A version this reader cannot read."""


def parse_version(value: object) -> tuple[int, int]:
    """``"1.0"`` -> (1, 0); VersionError with one clear line otherwise."""
    if not isinstance(value, str) or not _VERSION.match(value):
        raise VersionError(f"version must be a string 'MAJOR.MINOR' such as '{FORMAT_VERSION}', got {value!r}")
    major, minor = value.split(".")
    return int(major), int(minor)


def check_readable(version: tuple[int, int]) -> None:
    """Refuse versions of another major than the current one."""
    if version[0] > CURRENT[0]:
        raise VersionError(f"version {version[0]}.{version[1]} is newer than this solar-io reads ({READS}); "
                           "upgrade solar-io")
    if version[0] < CURRENT[0] and version[0] not in MIGRATIONS:
        raise VersionError(f"version {version[0]}.{version[1]} is not a released format version "
                           f"(this solar-io reads {READS})")


#: The version since which an einsum's output may be indexed through ``@t`` (a scatter).
OUTPUT_INDIRECT_SINCE: tuple[int, int] = (1, 1)


def is_newer_minor(value: object) -> bool:
    """True when ``value`` is a version of the current major with a newer minor (``"1.9"``).

    >>> is_newer_minor("1.999"), is_newer_minor("1.0"), is_newer_minor("2.0"), is_newer_minor(1.5)
    (True, False, False, False)
    """
    try:
        version = parse_version(value)
    except VersionError:
        return False
    return version[0] == CURRENT[0] and version > CURRENT


def version_text(version: tuple[int, int]) -> str:
    """(1, 1) -> ``"1.1"``."""
    return f"{version[0]}.{version[1]}"


def too_new(feature: str, since: tuple[int, int], version: tuple[int, int]) -> str | None:
    """The message for ``feature`` (new in ``since``) used in a file of ``version``, or None if allowed."""
    if version >= since:
        return None
    return (f"{feature} is new in format {version_text(since)}; this file says version {version_text(version)} "
            "(solar-io migrate upgrades it)")


#: {major: function upgrading a document of that major to major + 1}. Empty while only v1 exists.
MIGRATIONS: dict[int, Callable[[dict], dict]] = {}


def migrate(doc: dict) -> dict:
    """Upgrade a document to the current version (a new dict; the input is not modified)."""
    version = parse_version(doc.get("version"))
    check_readable(version)
    if version[0] == CURRENT[0] and version[1] > CURRENT[1]:
        raise VersionError(f"version {version[0]}.{version[1]} is newer than this solar-io writes "
                           f"({FORMAT_VERSION}); nothing to migrate")
    out = dict(doc)
    major = version[0]
    while major < CURRENT[0]:
        out = MIGRATIONS[major](out)
        major += 1
    if version < SINCE[("node", "kernel")] and isinstance(out.get("nodes"), list):  # 1.3 declares kernels
        out["nodes"] = declare_kernels_doc(out["nodes"])
    out["version"] = FORMAT_VERSION
    return out
