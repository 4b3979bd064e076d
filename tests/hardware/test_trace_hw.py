"""``--hw NAME@CLOCK`` (one clock implementation with ``--clock``) and ``--launch-overhead`` (apart from the bounds)."""

from __future__ import annotations

import pytest
from inprocess import run_main
from paths import ROOT

import solar_io
from solar_io.backends.bound import bound, bound_many
from solar_io.backends.roofline.model import BoundError
from solar_io.hardware.catalog import split_clock

#: A 1024 x 2048 x 4096 bf16 matmul (compute bound on a B200, also at 1500 MHz).
MATMUL = (ROOT / "examples" / "graphs" / "matmul.yaml").read_text(encoding="utf-8")


def test_split_clock():
    assert split_clock("b200@1500MHz") == ("b200", "1500MHz")
    assert split_clock(" h100-sxm@1.41 GHz ") == ("h100-sxm", "1.41 GHz")
    assert split_clock("b200") == ("b200", None)
    assert split_clock("specs/me@home.yaml") == ("specs/me@home.yaml", None)  # not a clock: part of the path


def test_hw_at_clock_is_the_clock_option_and_scales_compute_only():
    g = solar_io.loads(MATMUL)
    plain, at, opt = (bound(g, "b200", cache_aware=False), bound(g, "b200@1500MHz", cache_aware=False),
                      bound(g, "b200", clock="1500MHz", cache_aware=False))
    assert at.fused.time == opt.fused.time and at.unfused.time == opt.unfused.time
    assert at.options.clock_hz == 1.5e9 and plain.options.clock_hz is None
    # compute bound on a B200: the time grows by the spec's clock (1.855 GHz) / 1.5 GHz
    assert at.fused.bottleneck == "compute" or at.fused.compute_time >= at.fused.memory_time
    assert at.fused.compute_time == pytest.approx(plain.fused.compute_time * 1.855 / 1.5, rel=1e-12)
    assert at.fused.memory_time == plain.fused.memory_time  # DRAM bandwidth is not scaled
    both = bound_many(g, ["b200@1500MHz", "h100-sxm"], cache_aware=False)
    assert both[0].options.clock_hz == 1.5e9 and both[1].options.clock_hz is None
    with pytest.raises(BoundError, match="disagrees with --clock"):
        bound(g, "b200@1500MHz", clock="1400MHz", cache_aware=False)
    assert bound(g, "b200@1500MHz", clock="1.5GHz", cache_aware=False).fused.time == at.fused.time


def test_launch_overhead_is_reported_apart_and_off_by_default():
    g = solar_io.loads(MATMUL)
    base = bound(g, "b200", cache_aware=False)
    r = bound(g, "b200", cache_aware=False, launch_overhead="0.4us")
    assert (r.unfused.time, r.fused.time) == (base.unfused.time, base.fused.time)
    assert not any("launch floor" in n for n in base.notes)
    (note,) = [n for n in r.notes if n.startswith("launch floor")]
    assert "unfused 1 kernel(s) = 400 ns" in note and "fused 1 kernel = 400 ns" in note


def test_cli_hw_at_clock_and_launch_overhead(tmp_path):
    p = tmp_path / "mm.yaml"
    p.write_text(MATMUL)
    r = run_main("bound", str(p), "--hw", "b200@1500MHz", "--launch-overhead", "0.4us", "--no-cache-aware",
                 "--format", "yaml")
    assert r.returncode == 0, r.stderr
    assert "launch floor" in r.stdout and "1.5 GHz" in r.stdout
    bad = run_main("bound", str(p), "--hw", "b200@fastHz", "--no-cache-aware")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and "--hw" in bad.stderr
