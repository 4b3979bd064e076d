"""The local-CPU probe: fact parsing on fake /proc and /sys trees, the SIMD model, a real fast probe."""

from __future__ import annotations

import json

import pytest
import yaml
from fake_cpu import X86_FLAGS, fake_root
from jsonschema import Draft202012Validator

from solar_io.hardware import MeasuredGemm, load_spec, spec_from_dict
from solar_io.hardware.probe import (
    MAX_PLAUSIBLE_CLOCK_HZ,
    ProbeConfig,
    ProbeError,
    choose_clock,
    read_cpu_facts,
    simd_of,
    theoretical_peaks,
)
from solar_io.resources import data_file

pytestmark = pytest.mark.xdist_group("probe")  # uses the fast probe: one per run, shared by workers (conftest)

def test_facts_from_a_fake_intel_tree(tmp_path):
    facts = read_cpu_facts(fake_root(tmp_path))
    assert facts.vendor == "Intel"
    assert (facts.logical_cpus, facts.physical_cores) == (4, 2)
    assert facts.clock_hz == 3.5e9 and "cpuinfo_max_freq" in facts.clock_note
    caches = {(c.level, c.type): c for c in facts.caches}
    assert (1, "Instruction") not in caches
    assert caches[(1, "Data")].size == 48 * 1024 and caches[(1, "Data")].count == 2
    assert caches[(2, "Unified")].size == 1280 * 1024
    assert caches[(3, "Unified")].size == 54 * 1024 * 1024 and caches[(3, "Unified")].count == 1
    assert facts.mem_total_bytes == 16384000 * 1024
    simd = simd_of(facts)
    assert (simd.isa, simd.width_bits, simd.pipes) == ("AVX-512", 512, 2)
    assert "int8" in simd.extra and "bf16" not in simd.extra


def test_clock_falls_back_to_the_highest_reported_figure(tmp_path):
    facts = read_cpu_facts(fake_root(tmp_path, max_khz=None, cpu_mhz=2000.0))
    assert facts.clock_hz == pytest.approx(2.9e9)  # model name's nominal beats 'cpu MHz'
    assert "turbo may run faster" in facts.clock_note


def test_zen4_avx512_runs_on_256_bit_datapaths(tmp_path):
    facts = read_cpu_facts(fake_root(tmp_path, vendor="AuthenticAMD", family=25, model=17, smt=1,
                                      flags=X86_FLAGS + " avx512_bf16", model_name="AMD EPYC"))
    simd = simd_of(facts)
    assert (simd.width_bits, simd.pipes) == (256, 2)
    peaks = theoretical_peaks(facts, simd, 3.0e9)
    # 4 cores x 2 pipes x 8 fp32 lanes x 2 x 3 GHz
    assert peaks["vector"]["fp32"].value == pytest.approx(4 * 2 * 8 * 2 * 3.0e9)
    assert peaks["vector"]["fp64"].value == pytest.approx(peaks["vector"]["fp32"].value / 2)
    assert peaks["matrix"]["bf16"].value == pytest.approx(2 * peaks["vector"]["fp32"].value)
    assert "no matrix engine" in peaks["matrix"]["fp32"].note


@pytest.mark.parametrize(("flags", "family", "model", "vendor", "width", "pipes"), [
    ("sse sse2 avx avx2 fma", 23, 1, "AuthenticAMD", 128, 2),    # Zen 1: 2 x 128-bit
    ("sse sse2 avx avx2 fma", 23, 49, "AuthenticAMD", 256, 2),   # Zen 2: 2 x 256-bit
    ("sse sse2 avx", 6, 42, "GenuineIntel", 256, 1),             # Sandy Bridge: AVX, no FMA
    ("sse sse2", 6, 15, "GenuineIntel", 128, 1),                 # Core 2: add + mul pipes
])
def test_simd_table(tmp_path, flags, family, model, vendor, width, pipes):
    facts = read_cpu_facts(fake_root(tmp_path, flags=flags, family=family, model=model, vendor=vendor))
    simd = simd_of(facts)
    assert (simd.width_bits, simd.pipes) == (width, pipes)


def test_amx_adds_matrix_peaks(tmp_path):
    facts = read_cpu_facts(fake_root(tmp_path, flags=X86_FLAGS + " amx_tile amx_bf16 amx_int8"))
    peaks = theoretical_peaks(facts, simd_of(facts), 2.0e9)
    assert peaks["matrix"]["bf16"].value == pytest.approx(2 * 1024 * 2.0e9)
    assert peaks["matrix"]["int8"].value == pytest.approx(2 * 2048 * 2.0e9)
    # no AVX512_BF16: bf16 vector work is widened to fp32 and runs at most at the fp32 SIMD rate
    assert peaks["vector"]["bf16"].value == peaks["vector"]["fp32"].value
    assert "no bf16 arithmetic in AVX-512" in peaks["vector"]["bf16"].note


def test_a_cpu_without_bf16_or_fp16_units_lists_them_at_the_fp32_rate(tmp_path):
    # An AVX2 EPYC (no AVX512_BF16, no AVX512_FP16, no AMX): PyTorch still runs bf16 GEMMs there, in
    # software, never faster than fp32 FMAs; without these peaks a bf16 model could not be bounded.
    facts = read_cpu_facts(fake_root(tmp_path, vendor="AuthenticAMD", family=23, model=49, smt=1,
                                      flags="sse sse2 avx avx2 fma", model_name="AMD EPYC"))
    peaks = theoretical_peaks(facts, simd_of(facts), 3.0e9)
    fp32 = 4 * 2 * 8 * 2 * 3.0e9  # 4 cores x 2 pipes x 8 fp32 lanes x 2 x 3 GHz
    for unit in ("matrix", "vector"):
        assert {dt: p.value for dt, p in peaks[unit].items()} == {"fp64": fp32 / 2, "fp32": fp32, "bf16": fp32,
                                                                   "fp16": fp32}


def test_arm_fp16_bf16_and_int8_matrix_instructions_raise_their_peaks(tmp_path):
    facts = read_cpu_facts(fake_root(tmp_path, vendor="ARM", flags="fp asimd asimdhp bf16 i8mm"))
    simd = simd_of(facts)
    assert simd.isa == "NEON" and {k: v[0] for k, v in simd.extra.items()} == {"fp16": 2.0, "bf16": 4.0, "int8": 8.0}
    peaks = theoretical_peaks(facts, simd, 2.0e9)
    fp32 = peaks["vector"]["fp32"].value
    assert peaks["matrix"]["bf16"].value == 4 * fp32 and peaks["matrix"]["fp16"].value == 2 * fp32


def test_clock_is_raised_to_what_the_gemm_proves(tmp_path):
    facts = read_cpu_facts(fake_root(tmp_path, max_khz=None, cpu_mhz=2000.0, model_name="Some CPU"))
    simd = simd_of(facts)  # 2 cores x 2 pipes x 16 lanes x 2 = 128 FLOP/cycle
    slow = {"fp32": MeasuredGemm(100e9, 512, (1,))}
    assert choose_clock(facts, simd, slow) == (2.0e9, facts.clock_note)
    fast = {"fp32": MeasuredGemm(384e9, 512, (1,)), "fp64": MeasuredGemm(160e9, 512, (1,))}
    clock, note = choose_clock(facts, simd, fast)
    assert clock == pytest.approx(3.0e9) and "implied by the measured GEMM" in note
    absurd = {"fp32": MeasuredGemm(128 * MAX_PLAUSIBLE_CLOCK_HZ * 1.1, 512, (1,))}
    with pytest.raises(ProbeError, match="SIMD model"):
        choose_clock(facts, simd, absurd)


@pytest.fixture
def probed(fast_probe):
    return fast_probe  # one fast probe for the session (tests/conftest.py)


def test_fast_probe_writes_a_valid_spec(probed):
    spec, path = probed
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    schema = json.loads(data_file("schema", "hardware-v1.schema.json").read_text(encoding="utf-8"))
    assert not list(Draft202012Validator(schema).iter_errors(data))
    assert load_spec(path) == spec
    assert spec_from_dict(spec.to_dict()) == spec
    assert not list(path.parent.glob(".*.tmp")), "temporary file left behind"


def test_fast_probe_numbers_are_sane(probed):
    spec, _ = probed
    assert spec.kind == "cpu"
    for peaks in spec.units.values():
        assert all(p.value > 0 for p in peaks.values())
    for pattern in ("read", "copy", "triad"):
        assert spec.measured_bandwidth[pattern].bandwidth > 0
    assert spec.dram_bandwidth == max(b.bandwidth for b in spec.measured_bandwidth.values())
    llc = max((m.total_capacity for m in spec.memory[1:]), default=0)
    for b in spec.measured_bandwidth.values():
        assert b.buffer_bytes >= 8 * llc or "capped" in b.note
    assert spec.clock.hz <= MAX_PLAUSIBLE_CLOCK_HZ


def test_theoretical_peak_is_at_least_the_measured_gemm(probed):
    spec, _ = probed
    assert spec.peak("vector", "fp32") >= spec.measured_gemm["fp32"].flops
    assert spec.peak("matrix", "fp32") >= spec.measured_gemm["fp32"].flops
    assert spec.peak("vector", "fp64") >= spec.measured_gemm["fp64"].flops


class _FakeChip:
    """GEMMs that take 2 n^3 / rate(dtype, n) seconds on a fake clock: the probe's sizing rule is
    checked against hand-derived sizes and run counts without timing anything real."""

    def __init__(self, rates: dict[str, dict[int, float]]):
        self.rates, self.now, self.ran = rates, 0.0, []

    def clock(self) -> float:
        return self.now

    def maker(self, dtype: str):
        def make(a, b, c):
            n = a.shape[0]

            def run():
                self.ran.append((dtype, n))
                self.now += 2.0 * n**3 / self.rates[dtype][n]
            return run
        return make


def _plan_gemms(monkeypatch, rates, plan):
    import numpy as np

    import solar_io.hardware.probe_gemm as pg

    chip = _FakeChip(rates)
    monkeypatch.setattr(pg.time, "perf_counter", chip.clock)
    dtypes = [(dt, np.float32, [(chip.maker(dt), f"lib-{dt}")]) for dt in rates]
    return pg.measure_gemm_plan(dtypes, plan), chip


def test_gemm_sizes_grow_by_time_and_a_software_dtype_stays_small(monkeypatch):
    from solar_io.hardware.probe_gemm import GemmPlan

    fp32 = {256: 60e9, 512: 80e9, 1024: 90e9, 2048: 100e9}
    # fp64 peaks at 256 (as on this VM); bf16 runs in software at 0.3 GFLOP/s (58 s at n = 2048)
    rates = {"fp32": fp32, "fp64": {256: 80e9, 512: 50e9, 1024: 45e9, 2048: 45e9},
             "bf16": {n: 0.3e9 for n in fp32}}
    out, chip = _plan_gemms(monkeypatch, rates, GemmPlan())
    # fp32 2048: 0.1718 s a run: 3 runs (0.515 s) < 0.6 s budget, so a 4th; then 0.687 s: stop
    assert (out["fp32"].flops, out["fp32"].size, out["fp32"].runs) == (pytest.approx(100e9), 2048, 4)
    assert chip.ran.count(("fp32", 2048)) == 1 + 4  # warm-up + timed
    assert chip.ran.count(("fp32", 256)) == 1 + 10  # short runs: the 10 of max_runs
    assert (out["fp64"].flops, out["fp64"].size) == (pytest.approx(80e9), 256)  # best over every size
    assert chip.ran.count(("fp64", 2048)) == 1 + 3  # 0.38 s a run: the 3 runs of min_runs
    # bf16 256: 0.112 s a run (< 0.2 s; 512 expected at 0.89 s < 1 s): grows; 512: 0.89 s: stops
    assert {n for dt, n in chip.ran if dt == "bf16"} == {256, 512}
    assert chip.ran.count(("bf16", 256)) == 1 + 6 and chip.ran.count(("bf16", 512)) == 1 + 3
    assert "runs in software" in out["bf16"].note and "runs in software" not in out["fp64"].note
    assert "up to 2048" in out["fp32"].note and "best of 3-10 runs" in out["fp32"].note


def test_gemm_growth_stops_before_a_run_expected_to_take_long(monkeypatch):
    from solar_io.hardware.probe_gemm import GemmPlan

    # 256 at 0.15 s a run: under 0.2 s, but 512 would take 1.2 s: 256 only
    rates = {"fp32": {256: 2 * 256**3 / 0.15}}
    out, chip = _plan_gemms(monkeypatch, rates, GemmPlan())
    assert set(chip.ran) == {("fp32", 256)} and out["fp32"].runs == 4  # 0.6 s budget: 4 x 0.15 s


def test_explicit_gemm_sizes_and_every_run(monkeypatch):
    from solar_io.hardware.probe_gemm import GemmPlan

    rates = {"fp32": {300: 1e9, 4096: 1e12}}  # 300: 0.054 s; 4096: 0.137 s
    out, chip = _plan_gemms(monkeypatch, rates, GemmPlan(sizes=(300, 4096), min_runs=5, max_runs=5))
    assert chip.ran.count(("fp32", 300)) == chip.ran.count(("fp32", 4096)) == 1 + 5
    assert (out["fp32"].size, out["fp32"].runs) == (4096, 5) and "sizes [300, 4096]" in out["fp32"].note


def test_probe_config_presets_and_cli_runs(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    import solar_io.hardware.probe as probe
    from solar_io.cli.hardware import app

    assert ProbeConfig().gemm_plan().cap == 2048 and ProbeConfig.thorough().gemm_plan().cap == 4096
    thorough = ProbeConfig.thorough().gemm_plan()
    assert thorough.min_runs == thorough.max_runs == 10
    assert ProbeConfig.fast().gemm_plan().cap == 512
    seen = []
    monkeypatch.setattr(probe, "probe_to_file", lambda out, config: seen.append(config) or 1 / 0)
    runner = CliRunner()
    out = str(tmp_path / "x.yaml")
    runner.invoke(app, ["probe", "-o", out, "--runs", "4"])
    runner.invoke(app, ["probe", "-o", out, "--thorough"])
    assert (seen[0].gemm_min_runs, seen[0].gemm_runs, seen[0].bandwidth_min_runs) == (4, 4, 4)
    assert seen[1].gemm_cap == 4096
    res = runner.invoke(app, ["probe", "-o", out, "--fast", "--thorough"])
    assert res.exit_code == 1 and "error: give --fast or --thorough, not both" in res.output and len(seen) == 2
