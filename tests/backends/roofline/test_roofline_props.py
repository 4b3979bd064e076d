"""Properties of the roofline bounds on random graphs (tests/strategies.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from types import MappingProxyType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import graphs

from solar_io.backends.roofline import Report, bound, inverse_roofline
from solar_io.format.validate import validate
from solar_io.hardware import Peak, load_spec

B200 = load_spec("b200")  # lists every dtype class the random graphs use (fp64 ... fp4)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ge(a: float, b: float) -> bool:
    """a >= b up to rounding of sums."""
    return a >= b * (1 - 1e-12) - 1e-300


@SETTINGS
@given(graphs())
def test_times_are_non_negative_and_fused_le_unfused(g):
    r = bound(g, B200, cache_aware=False)
    for n in r.nodes:
        for t in (n.matrix_time, n.vector_time, n.special_time, n.memory_time, n.time):
            assert t >= 0 and math.isfinite(t)
        assert n.time == max(n.compute_time, n.memory_time)
    assert r.unfused.time >= 0 and r.fused.time >= 0
    assert _ge(r.unfused.time, r.fused.time)
    assert _ge(r.unfused.compute_time, r.fused.compute_time)
    assert r.cache_aware.time is None
    assert set(r.opaque) == {n.name for n in g.nodes if n.kind == "opaque"}


@SETTINGS
@given(graphs(), st.data())
def test_scaling_rank_sizes_up_never_lowers_the_bound(g, data):
    grow = data.draw(st.lists(st.integers(0, 4), min_size=len(g.ranks), max_size=len(g.ranks)))
    bigger = _grown(g, grow)
    assert not [i for i in validate(bigger) if i.severity == "error"], "growing the ranks must keep the graph valid"
    small, large = bound(g, B200, cache_aware=False), bound(bigger, B200, cache_aware=False)
    assert _ge(large.unfused.time, small.unfused.time)
    assert _ge(large.fused.time, small.fused.time)


def _grown(g, grow: list[int]):
    """``g`` with each free rank grown by its entry of ``grow``; a reshape's flat output rank
    follows its input (its size is the input's element count), so the graph stays valid."""
    sizes = {name: size + d for (name, size), d in zip(g.ranks, grow, strict=True)}
    ranks_of = {t.name: t.ranks for t in g.tensors}
    for n in g.nodes:
        if n.kind == "data_movement" and n.movement == "reshape":
            (flat,) = ranks_of[n.outputs[0].tensor]
            sizes[flat] = math.prod(sizes[r] for r in ranks_of[n.inputs[0].tensor])
    return replace(g, ranks=tuple((name, sizes[name]) for name, _ in g.ranks))


def _time_with(report: Report, fidelity: str, resource: str, z: float) -> float:
    """The bound with ``resource``'s chip time scaled by z (rate / z), recomputed independently."""
    units = ("matrix", "vector", "special", "dram")
    if fidelity == "unfused":
        total = 0.0
        for n in report.nodes:
            per = dict.fromkeys(units, 0.0)
            for ld in n.loads:
                per[ld.unit] += ld.time * (z if ld.resource == resource else 1.0)
            total += max(per.values())
        return total
    per = dict.fromkeys(units, 0.0)
    for n in report.nodes:
        for ld in n.loads:
            if ld.unit != "dram":
                per[ld.unit] += ld.time * (z if ld.resource == resource else 1.0)
    per["dram"] = report.fused.memory_time * (z if resource == "dram" else 1.0)
    return max(per.values())


@SETTINGS
@given(graphs())
def test_inverse_at_sol_gives_ratio_one_for_the_binding_resource(g):
    r = bound(g, B200, cache_aware=False)
    for name in ("unfused", "fused"):
        t = getattr(r, name).time
        if t == 0:
            continue
        f = inverse_roofline(r, t).fidelity(name)
        assert f.feasible and f.chip_scale == 1.0
        assert any(q.binding for q in f.requirements)
        for q in f.requirements:
            assert q.with_chip_rest_ratio is not None
            if q.binding:
                assert abs(q.with_chip_rest_ratio - 1.0) <= 1e-9, (name, q)
            else:
                assert q.with_chip_rest_ratio < 1.0 + 1e-9


@SETTINGS
@given(graphs(), st.floats(0.2, 5.0))
def test_scale_one_resource_solution_reaches_the_target(g, factor):
    r = bound(g, B200, cache_aware=False)
    for name in ("unfused", "fused"):
        t_chip = getattr(r, name).time
        if t_chip == 0:
            continue
        target = t_chip * factor
        f = inverse_roofline(r, target).fidelity(name)
        assert f.feasible == (t_chip <= target)
        for q in f.requirements:
            assert math.isclose(q.any_chip, q.work / target, rel_tol=1e-12)
            if q.with_chip_rest is None:  # unreachable: even an unlimited resource leaves T >= target
                assert _ge(_time_with(r, name, q.resource, 0.0), target)
            elif q.with_chip_rest == 0:  # the resource is not needed at all
                assert _time_with(r, name, q.resource, 1e6) <= target * (1 + 1e-9)
            else:
                z = 1.0 / q.with_chip_rest_ratio
                assert math.isclose(_time_with(r, name, q.resource, z), target, rel_tol=1e-9), (name, q)
                # minimal: a little less of the resource misses the target
                assert _time_with(r, name, q.resource, z * (1 + 1e-6)) > target


def _scaled(spec, s: float):
    units = MappingProxyType({u: MappingProxyType({dt: Peak(p.value * s, p.sources) for dt, p in peaks.items()})
                              for u, peaks in spec.units.items()})
    memory = (replace(spec.memory[0], bandwidth=spec.memory[0].bandwidth * s), *spec.memory[1:])
    return replace(spec, units=units, memory=memory)


@settings(max_examples=40, deadline=None)
@given(graphs(), st.floats(0.1, 10.0))
def test_uniform_chip_scale_reaches_the_target(g, factor):
    r = bound(g, B200, cache_aware=False)
    if r.unfused.time == 0:
        return
    target = r.unfused.time * factor
    inv = inverse_roofline(r, target)
    for name in ("unfused", "fused"):
        f = inv.fidelity(name)
        if getattr(r, name).time == 0:  # nothing to scale: a zero-time fidelity meets any target
            continue
        faster = bound(g, _scaled(B200, f.chip_scale), cache_aware=False)
        assert math.isclose(getattr(faster, name).time, target, rel_tol=1e-9)
