"""Hardware specs checked against the hardware-v1 JSON Schema once, not on every run (issue 19).

Checking a spec with jsonschema costs more than the rest of reading it (importing jsonschema alone
is 0.05-0.1 s of a one-second ``solar-io bound``). The shipped specs are checked by the test suite,
so the digests of those that pass, each taken over the schema's bytes and then the spec's, are
recorded in ``hardware/schema-checked.sha256`` (:func:`main` checks every shipped spec in full and
writes it: ``python -c "from solar_io.hardware import checked; checked.main()"``;
``tests/hardware/test_schema_checked.py`` fails while it is stale). A spec whose text has a
recorded digest under the same schema (a shipped file unchanged, or a byte-identical copy of one)
skips the schema pass; every other spec (a user's, or a shipped one edited since) is checked in
full. Every spec still gets the checks the schema cannot express
(:func:`.read.spec_from_dict`: finite numbers, source indices, DRAM first, unique levels).

>>> schema_checked("version: '1.0'\\n")  # not a spec that passed: checked in full
False
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from solar_io.resources import data_dir, data_file

RECORD = "schema-checked.sha256"

__all__ = ["RECORD", "digest", "record", "schema_checked"]


@lru_cache(maxsize=1)
def _schema_bytes() -> bytes:
    return data_file("schema", "hardware-v1.schema.json").read_bytes()


@lru_cache(maxsize=1)
def _recorded() -> frozenset[str]:
    try:
        text = data_file("hardware", RECORD).read_text(encoding="utf-8")
    except OSError:  # no record (an install without it): every spec is checked in full
        return frozenset()
    return frozenset(line.split()[0] for line in text.splitlines() if line.strip() and not line.startswith("#"))


def digest(text: str) -> str:
    """SHA-256 of the hardware-v1 schema's bytes followed by the spec text's UTF-8 bytes."""
    h = hashlib.sha256(_schema_bytes())
    h.update(text.encode("utf-8"))
    return h.hexdigest()


def schema_checked(text: str) -> bool:
    """True when spec ``text`` passed the schema in full under the schema shipped now (its digest is recorded)."""
    return digest(text) in _recorded()


def record() -> str:
    """The record's text: every shipped spec checked in full (schema included; a failing one raises its
    :class:`~.model.HardwareSpecError`), one ``digest  file name`` line each."""
    from solar_io.hardware.catalog import _documents
    from solar_io.hardware.read import _safe_load, spec_from_dict

    lines = ["# sha256(schema/hardware-v1.schema.json bytes + spec bytes) of the shipped specs that pass the schema;",
             "# written by solar_io.hardware.checked.main(), which checks each first"]
    for origin, text in _documents():
        spec_from_dict(_safe_load(text, origin), origin, schema=True)
        lines.append(f"{digest(text)}  {Path(origin).name}")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Check every shipped spec and write the record next to them (a source checkout's ``hardware/``)."""
    folder = data_dir("hardware")
    if not isinstance(folder, Path):
        raise SystemExit("the hardware folder is inside an archive; run this from a source checkout")
    (folder / RECORD).write_text(record(), encoding="utf-8")
    _recorded.cache_clear()
    print(f"wrote {folder / RECORD}")
