"""The local-CPU probe: fact parsing on fake /proc and /sys trees, the SIMD model, a real fast probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from solar_io.hardware import MeasuredGemm, load_spec, spec_from_dict
from solar_io.hardware.probe import (
    MAX_PLAUSIBLE_CLOCK_HZ,
    ProbeConfig,
    ProbeError,
    choose_clock,
    probe_to_file,
    read_cpu_facts,
    simd_of,
    theoretical_peaks,
)
from solar_io.resources import data_file

X86_FLAGS = "fpu sse sse2 avx avx2 fma avx512f avx512bw avx512_vnni"


def _fake_root(tmp_path: Path, *, cpus: int = 4, smt: int = 2, vendor: str = "GenuineIntel", family: int = 6,
               model: int = 106, flags: str = X86_FLAGS, max_khz: int | None = 3_500_000,
               cpu_mhz: float = 2000.0, model_name: str = "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz") -> Path:
    """A /proc + /sys tree: ``cpus`` logical CPUs, ``smt`` per core, private L1d/L2, shared L3."""
    blocks = []
    for c in range(cpus):
        blocks.append("\n".join([
            f"processor\t: {c}", f"vendor_id\t: {vendor}", f"cpu family\t: {family}", f"model\t\t: {model}",
            f"model name\t: {model_name}", f"cpu MHz\t\t: {cpu_mhz}", "physical id\t: 0",
            f"core id\t\t: {c // smt}", f"flags\t\t: {flags}",
        ]))
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    (tmp_path / "proc/meminfo").write_text("MemTotal:       16384000 kB\nMemAvailable:   8192000 kB\n",
                                           encoding="utf-8")
    base = tmp_path / "sys/devices/system/cpu"
    base.mkdir(parents=True)
    (base / "online").write_text(f"0-{cpus - 1}\n", encoding="utf-8")
    for c in range(cpus):
        cpu = base / f"cpu{c}"
        (cpu / "topology").mkdir(parents=True)
        (cpu / "topology/physical_package_id").write_text("0\n", encoding="utf-8")
        (cpu / "topology/core_id").write_text(f"{c // smt}\n", encoding="utf-8")
        if max_khz:
            (cpu / "cpufreq").mkdir()
            (cpu / "cpufreq/cpuinfo_max_freq").write_text(f"{max_khz}\n", encoding="utf-8")
        core_sibs = f"{c // smt * smt}-{c // smt * smt + smt - 1}"
        for i, (level, ctype, size, shared) in enumerate([
            (1, "Data", "48K", core_sibs), (1, "Instruction", "32K", core_sibs),
            (2, "Unified", "1280K", core_sibs), (3, "Unified", "54M", f"0-{cpus - 1}"),
        ]):
            index = cpu / f"cache/index{i}"
            index.mkdir(parents=True)
            for key, value in (("level", level), ("type", ctype), ("size", size), ("shared_cpu_list", shared)):
                (index / key).write_text(f"{value}\n", encoding="utf-8")
    return tmp_path


def test_facts_from_a_fake_intel_tree(tmp_path):
    facts = read_cpu_facts(_fake_root(tmp_path))
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
    facts = read_cpu_facts(_fake_root(tmp_path, max_khz=None, cpu_mhz=2000.0))
    assert facts.clock_hz == pytest.approx(2.9e9)  # model name's nominal beats 'cpu MHz'
    assert "turbo may run faster" in facts.clock_note


def test_zen4_avx512_runs_on_256_bit_datapaths(tmp_path):
    facts = read_cpu_facts(_fake_root(tmp_path, vendor="AuthenticAMD", family=25, model=17, smt=1,
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
    facts = read_cpu_facts(_fake_root(tmp_path, flags=flags, family=family, model=model, vendor=vendor))
    simd = simd_of(facts)
    assert (simd.width_bits, simd.pipes) == (width, pipes)


def test_amx_adds_matrix_peaks(tmp_path):
    facts = read_cpu_facts(_fake_root(tmp_path, flags=X86_FLAGS + " amx_tile amx_bf16 amx_int8"))
    peaks = theoretical_peaks(facts, simd_of(facts), 2.0e9)
    assert peaks["matrix"]["bf16"].value == pytest.approx(2 * 1024 * 2.0e9)
    assert peaks["matrix"]["int8"].value == pytest.approx(2 * 2048 * 2.0e9)
    assert "bf16" not in peaks["vector"]


def test_clock_is_raised_to_what_the_gemm_proves(tmp_path):
    facts = read_cpu_facts(_fake_root(tmp_path, max_khz=None, cpu_mhz=2000.0, model_name="Some CPU"))
    simd = simd_of(facts)  # 2 cores x 2 pipes x 16 lanes x 2 = 128 FLOP/cycle
    slow = {"fp32": MeasuredGemm(100e9, 512, (1,))}
    assert choose_clock(facts, simd, slow) == (2.0e9, facts.clock_note)
    fast = {"fp32": MeasuredGemm(384e9, 512, (1,)), "fp64": MeasuredGemm(160e9, 512, (1,))}
    clock, note = choose_clock(facts, simd, fast)
    assert clock == pytest.approx(3.0e9) and "implied by the measured GEMM" in note
    absurd = {"fp32": MeasuredGemm(128 * MAX_PLAUSIBLE_CLOCK_HZ * 1.1, 512, (1,))}
    with pytest.raises(ProbeError, match="SIMD model"):
        choose_clock(facts, simd, absurd)


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe") / "cpu.yaml"
    spec = probe_to_file(out, ProbeConfig.fast())
    return spec, out


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
