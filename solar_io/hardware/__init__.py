"""Hardware specs: dense peaks per unit and dtype, memory hierarchy, sources.

Example::

    from solar_io.hardware import load_spec
    h100 = load_spec("h100")          # name or alias, case-insensitive, or a YAML path
    h100.peak("matrix", "bf16")       # dense FLOP/s: 9.894e14
    h100.dram_bandwidth               # bytes/s: 3.35e12

Shipped specs live in ``hardware/*.yaml`` (``solar_io/_data/hardware`` in a wheel) and follow
``schema/hardware-v1.schema.json``. :mod:`solar_io.hardware.probe` builds a spec for the local
CPU; :mod:`solar_io.hardware.cli` is the ``solar-io hw`` command group.
"""

from solar_io.hardware import spec
from solar_io.hardware.catalog import UnknownHardwareError, known_names, list_specs, load_spec
from solar_io.hardware.spec import *  # noqa: F403 - the spec's public names, listed once in its modules

__all__ = [*spec.__all__, "UnknownHardwareError", "known_names", "list_specs", "load_spec"]
