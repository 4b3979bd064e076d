"""Format versions: parsing, the reader's accepted range, and migration of old files.

A file's ``version`` is ``"MAJOR.MINOR"``. Minor versions only add optional fields, so a
reader accepts any minor of a major it knows (fields from a newer minor are ignored with a
warning); it refuses a newer major and names the versions it reads. ``migrate`` upgrades a
document of any known older version to the current one, one step at a time.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .errors import SolarIOError
from .graph import FORMAT_VERSION

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
    out["version"] = FORMAT_VERSION
    return out
