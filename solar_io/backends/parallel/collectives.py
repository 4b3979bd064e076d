"""Collectives and their prices: ring formulas over the links a group crosses.

A collective runs over a group of ``n`` chips on one tensor of ``B`` bytes (the whole tensor as one
chip holds it before a reduce-scatter or after an all-gather, the per-chip buffer of an all-to-all,
the message of a send/recv). With per-chip, per-direction link bandwidth ``bw`` and ``alpha``
seconds per step (a link's latency; 0 where the spec publishes none), the standard ring costs are

============== ============================ =========== =====================================
collective     bytes each chip sends         steps       seconds
============== ============================ =========== =====================================
all-reduce     2(n-1)/n * B                  2(n-1)      2(n-1)/n * B / bw + 2(n-1) * alpha
all-gather     (n-1)/n * B                   n-1         (n-1)/n * B / bw + (n-1) * alpha
reduce-scatter (n-1)/n * B                   n-1         (n-1)/n * B / bw + (n-1) * alpha
all-to-all     (n-1)/n * B                   n-1         (n-1)/n * B / bw + (n-1) * alpha
send/recv      B                             1           B / bw + alpha
============== ============================ =========== =====================================

The ring is bandwidth-optimal for all-reduce among algorithms whose chips do the reducing; switches
that reduce (NVLink SHARP on NVSwitch 3 and later, InfiniBand SHARP) need only ``(n-1)/n * B`` per
chip each way: ``allreduce="in-network"`` (``--allreduce in-network``) prices them so.

A group that spans ``m`` scale-up domains with ``g`` of its chips in each
runs hierarchically: the ring inside each domain over ``scale_up`` on all ``B`` bytes, and a ring
across domains over ``scale_out`` on the ``B / g`` bytes each chip is responsible for (every chip
has its own network interface). The two phases work on different links and pipeline chunk by
chunk, so the slower one binds: ``max(inside, across)``. A group whose chips are all in one domain
uses ``scale_up`` only.

>>> from solar_io.hardware import Link
>>> nv = Link("NVLink 4", 4.5e11, (0,), domain=8)
>>> ring_seconds("all-reduce", 2, 1e9, nv)          # 2(n-1)/n * B / bw = 1e9 / 4.5e11
0.0022222222222222222
"""

from __future__ import annotations

from dataclasses import dataclass

from solar_io.hardware import Link

from .layout import ParallelError
from .system import System

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send/recv")


def _factor(kind: str, n: int) -> tuple[float, int]:
    """(bytes each chip sends / B, steps) of the ring ``kind`` over ``n`` chips."""
    if n <= 1:
        return 0.0, 0
    if kind == "all-reduce":
        return 2.0 * (n - 1) / n, 2 * (n - 1)
    if kind in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n, n - 1
    if kind == "send/recv":
        return 1.0, 1
    raise ParallelError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")


def ring_seconds(kind: str, n: int, nbytes: float, link: Link, in_network: bool = False) -> float:
    """Seconds of the ring ``kind`` over ``n`` chips on ``nbytes`` bytes over ``link`` (table above).

    ``in_network``: the switches reduce (NVLink SHARP, InfiniBand SHARP), so an all-reduce sends each chip's
    contribution to the other chips' parts once and receives their sums once: ``(n-1)/n * B / bw``, 2 steps
    (the least any all-reduce can send per chip)."""
    if in_network and kind == "all-reduce" and n > 1:
        return (n - 1) / n * nbytes / link.bandwidth + 2 * (link.latency or 0.0)
    f, steps = _factor(kind, n)
    return f * nbytes / link.bandwidth + steps * (link.latency or 0.0)


@dataclass(frozen=True, slots=True)
class Collective:
    """One collective the layout needs: ``kind`` over the ``dim`` group (tp, ep, dp, pp) on ``tensor``
    (``nbytes`` B as defined above), because of ``reason`` (the rule), ``count`` times per step."""

    kind: str
    dim: str
    tensor: str
    nbytes: float
    reason: str
    count: int = 1
    phase: str | None = None  # "backward" for gradient all-reduces (they overlap the backward pass)


@dataclass(frozen=True, slots=True)
class Priced:
    """A collective with its group and price: ``seconds`` per occurrence (x ``count`` per step in
    ``total``); ``links`` says which links and how many chips it crossed."""

    collective: Collective
    group: int
    seconds: float
    links: str

    @property
    def total(self) -> float:
        """Seconds per step: ``seconds x count``."""
        return self.seconds * self.collective.count


def group_span(system: System, members: list[int]) -> tuple[int, int]:
    """(most chips of the group in one scale-up domain g, domains m) of the chips ``members``."""
    if members[-1] >= system.chips:
        raise ParallelError(f"system {system.name}: the layout needs chip {members[-1] + 1}, the system has "
                            f"{system.chips}")
    domains: dict[int, int] = {}
    for c in members:
        d = system.domain_of(c)
        domains[d] = domains.get(d, 0) + 1
    return max(domains.values()), len(domains)


def _one(c: Collective, system: System, members: list[int], in_network: bool = False) -> tuple[float, str]:
    n = len(members)
    g, m = group_span(system, members)
    up, out = system.scale_up, system.scale_out
    if c.kind == "send/recv":
        link = up if m == 1 else out
        assert link is not None  # system_from_dict / chip_system refuse systems without it
        return ring_seconds(c.kind, 2, c.nbytes, link), f"{link.kind} ({'inside' if m == 1 else 'across'} nodes)"
    if m == 1:
        assert up is not None
        return ring_seconds(c.kind, n, c.nbytes, up, in_network), f"{up.kind}, {n} chips in one node"
    assert out is not None
    inside = ring_seconds(c.kind, g, c.nbytes, up, in_network) if g > 1 and up is not None else 0.0
    across = ring_seconds(c.kind, m, c.nbytes / g, out, in_network)
    return max(inside, across), f"{up.kind if up and g > 1 else '-'} x{g} in each of {m} nodes, {out.kind} across"


def price(c: Collective, system: System, groups: list[list[int]], in_network: bool = False) -> Priced:
    """Price ``c`` on ``system``: every group of ``groups`` (chip numbers) runs it at once and a step
    waits for the slowest, so the slowest group's time is the price. ``in_network``: all-reduces are
    reduced in the switches (:func:`ring_seconds`)."""
    n = len(groups[0]) if groups else 1
    if n <= 1:
        return Priced(c, n, 0.0, "none (a group of one chip)")
    seconds, links = max((_one(c, system, members, in_network) for members in groups), key=lambda t: t[0])
    return Priced(c, n, seconds, links)


__all__ = ["KINDS", "Collective", "Priced", "group_span", "price", "ring_seconds"]
