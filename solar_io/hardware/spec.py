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

from solar_io.hardware import model, read, write
from solar_io.hardware.model import *  # noqa: F403 - the names listed once, in model.__all__
from solar_io.hardware.model import FORMAT_NAME, FORMAT_VERSION, SUPPORTED_MAJOR  # noqa: F401
from solar_io.hardware.read import *  # noqa: F403
from solar_io.hardware.read import MAX_SPEC_BYTES  # noqa: F401
from solar_io.hardware.write import *  # noqa: F403

__all__ = [*model.__all__, *read.__all__, *write.__all__]
