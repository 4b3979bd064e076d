"""Hardware specs (format ``solar-io.hardware``, major version 1): the public names in one place.

A hardware spec describes one chip by its dense peak rates per execution-unit class (``matrix``,
``vector``, ``special``) and compute dtype, its memory hierarchy (DRAM first), and the sources of
every number. The JSON Schema ``schema/hardware-v1.schema.json`` is the contract.

The work is split by job: :mod:`~solar_io.hardware.model` (the frozen dataclasses and their
canonical mapping), :mod:`~solar_io.hardware.read` (schema check, the rules a schema cannot
express, files) and :mod:`~solar_io.hardware.write` (canonical YAML, atomic write). This module
re-exports them so that ``from solar_io.hardware.spec import HardwareSpec`` keeps working.

All numbers are SI: FLOP/s (OP/s for integer dtypes), bytes/s, bytes, Hz.
"""

from __future__ import annotations

from solar_io.hardware.model import (
    FORMAT_NAME,
    FORMAT_VERSION,
    LINK_KINDS,
    PEAK_DTYPES,
    SUPPORTED_MAJOR,
    UNIT_CLASSES,
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
from solar_io.hardware.read import MAX_SPEC_BYTES, load_spec_file, schema, spec_from_dict
from solar_io.hardware.write import dump_spec_yaml, write_spec

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MAX_SPEC_BYTES",
    "PEAK_DTYPES",
    "SUPPORTED_MAJOR",
    "UNIT_CLASSES",
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
