"""A chip at another core clock (``solar-io bound --clock 1500MHz``).

Benchmarks often lock a GPU's clocks (SOL-ExecBench locks a B200 at 1500 MHz) below the clock its
datasheet peaks hold at. A spec's ``clock`` is the clock its compute peaks hold at; at clock f
every compute peak (matrix, vector, special-function) scales by ``f / clock``: these units run one
operation per lane per core cycle. DRAM bandwidth is *not* scaled: the memory clock is separate
(a clock lock names it separately, and the spec's bandwidth is the memory's peak). On-chip
capacities do not change. A spec without a clock cannot be scaled: that is an error.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from solar_io.hardware import HardwareSpec
from solar_io.hardware.spec import Peak
from solar_io.units import format_si, parse_frequency

from .model import BoundError


def at_clock(spec: HardwareSpec, clock: float | str) -> tuple[HardwareSpec, str]:
    """``spec`` with its compute peaks scaled to core clock ``clock`` (Hz or text such as '1500MHz'),
    and the note a report carries about it."""
    hz = parse_frequency(clock)
    if spec.clock is None:
        raise BoundError(f"--clock: hardware {spec.name} gives no clock (the 'clock' field of its spec), so its "
                         "peaks cannot be scaled to another clock")
    factor = hz / spec.clock.hz
    units = MappingProxyType({
        unit: MappingProxyType({dt: Peak(p.value * factor, p.sources, p.note) for dt, p in peaks.items()})
        for unit, peaks in spec.units.items()})
    scaled = replace(spec, units=units, full_name=f"{spec.full_name} at {format_si(hz, 'Hz')}")
    note = (f"--clock {format_si(hz, 'Hz')}: every compute peak scaled by {format_si(hz, 'Hz')} / "
            f"{format_si(spec.clock.hz, 'Hz')} (the spec's clock) = {factor:.4g}; DRAM bandwidth is not scaled "
            "(the memory clock is separate)")
    return scaled, note


__all__ = ["at_clock"]
