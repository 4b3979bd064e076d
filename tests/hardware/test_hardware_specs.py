"""Shipped hardware specs: schema validity, internal consistency, pinned datasheet values, loading."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from jsonschema import Draft202012Validator
from paths import ROOT

from solar_io.hardware import (
    PEAK_DTYPES,
    HardwareSpecError,
    UnknownHardwareError,
    dump_spec_yaml,
    list_specs,
    load_spec,
    load_spec_file,
    spec_from_dict,
)
from solar_io.resources import data_dir, data_file

REPO = ROOT
SPEC_FILES = sorted((REPO / "hardware").glob("*.yaml"))
REQUIRED_CHIPS = {
    "b200", "h200-sxm", "h100-sxm", "h100-pcie", "a100-sxm-80gb", "rtx-a6000", "l4",
    "jetson-agx-thor", "jetson-agx-orin-64gb", "mi300x", "tpu-v5e",
}


def _schema() -> dict:
    return json.loads(data_file("schema", "hardware-v1.schema.json").read_text(encoding="utf-8"))


SPECS = {s.name: s for s in list_specs()}


# --- schema ------------------------------------------------------------------------------------

def test_schema_is_valid_draft_2020_12():
    schema = _schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


def _walk(node, path="#"):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}/{i}")


def test_every_schema_field_has_a_description():
    missing = []
    for path, node in _walk(_schema()):
        for name, sub in node.get("properties", {}).items():
            if "description" not in sub:
                missing.append(f"{path}/properties/{name}")
        if path.count("/") == 2 and path.startswith("#/$defs/") and "description" not in node:
            missing.append(path)
    assert not missing, missing


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_shipped_file_validates_and_loads(path):
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    errors = list(Draft202012Validator(_schema()).iter_errors(data))
    assert not errors, [e.message for e in errors]
    spec = load_spec_file(path)
    assert path.stem == spec.name, "file name must be <name>.yaml"
    assert spec.dram.level == "dram"


def test_all_required_chips_are_shipped():
    assert REQUIRED_CHIPS <= set(SPECS)
    assert len(SPEC_FILES) == len(SPECS)


def test_names_and_aliases_are_unique_and_lowercase():
    seen: dict[str, str] = {}
    for spec in SPECS.values():
        for key in (spec.name, *spec.aliases):
            assert key == key.lower()
            assert key not in seen, f"{key} used by {seen.get(key)} and {spec.name}"
            seen[key] = spec.name
    assert seen["thor"] == "jetson-agx-thor"
    assert seen["h100"] == "h100-sxm"


def test_data_dir_finds_the_source_checkout():
    assert {t.name for t in data_dir("hardware").iterdir()} >= {p.name for p in SPEC_FILES}


# --- internal consistency ----------------------------------------------------------------------

def _all_numbers(spec):
    for unit, peaks in spec.units.items():
        for dtype, p in peaks.items():
            yield f"units/{unit}/{dtype}", p.value, p.sources
    for m in spec.memory:
        yield f"memory/{m.level}/capacity", m.capacity, m.sources
        yield f"memory/{m.level}/bandwidth", m.bandwidth, m.sources
    if spec.clock is not None:
        yield "clock", spec.clock.hz, spec.clock.sources


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_number_is_positive_and_sourced(name):
    spec = SPECS[name]
    for where, value, sources in _all_numbers(spec):
        assert value is None or (math.isfinite(value) and value > 0), where
        assert sources and all(0 <= i < len(spec.sources) for i in sources), where
    for source in spec.sources:
        assert source.url and source.url.startswith("https://"), f"{name}: source without URL"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_dtype_ordering_of_matrix_peaks(name):
    m = {dt: p.value for dt, p in SPECS[name].units.get("matrix", {}).items()}
    chain = [dt for dt in ("fp4", "fp8", "bf16", "tf32") if dt in m]
    for hi, lo in zip(chain, chain[1:], strict=False):
        assert m[hi] >= m[lo], f"{name}: matrix {hi} < {lo}"
    if "fp16" in m and "bf16" in m:  # every shipped chip's vendor gives FP16 and BF16 the same tensor rate
        assert m["fp16"] == m["bf16"]
    if "fp6" in m:
        assert m["fp4"] >= m["fp6"] >= m.get("bf16", 0)
    if "int8" in m and "bf16" in m:
        assert m["int8"] >= m["bf16"]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_matrix_is_at_least_vector(name):
    spec = SPECS[name]
    vec32 = spec.peak("vector", "fp32")
    mat32 = max(filter(None, (spec.peak("matrix", "fp32"), spec.peak("matrix", "tf32"))), default=None)
    if vec32 and mat32:
        assert mat32 >= vec32
    for dtype in ("fp64", "fp16", "bf16"):
        v, mx = spec.peak("vector", dtype), spec.peak("matrix", dtype)
        if v and mx:
            assert mx >= v, f"{name}: matrix {dtype} < vector {dtype}"
    if spec.peak("vector", "fp64") and vec32:
        assert spec.peak("vector", "fp64") <= vec32
    special = spec.peak("special", "fp32")
    if special and vec32:
        assert special < vec32  # SFUs are a fraction of the FMA lanes


@pytest.mark.parametrize("name", sorted(SPECS))
def test_memory_is_plausible(name):
    spec = SPECS[name]
    dram = spec.dram
    assert 1e10 <= dram.bandwidth <= 1e13, "DRAM bandwidth outside 10 GB/s .. 10 TB/s"
    assert 8e9 <= dram.capacity <= 1e12
    on_chip = spec.memory[1:]
    for level in on_chip:
        if level.capacity is not None:
            assert 1024 <= level.capacity <= 1 << 30, level.level
            assert level.total_capacity < dram.capacity
        if level.bandwidth is not None:
            assert level.bandwidth > dram.bandwidth, f"{level.level} slower than DRAM"
    for level in spec.memory:
        if level.capacity is not None and level.level != "dram":
            assert float(level.capacity).is_integer(), f"{level.level}: capacity must be whole bytes"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_ridge_point_is_sane(name):
    spec = SPECS[name]
    peak = spec.peak("matrix", "bf16") or spec.peak("matrix", "fp16")
    assert peak, f"{name}: no bf16/fp16 matrix peak"
    ridge = peak / spec.dram_bandwidth
    assert 10 <= ridge <= 2000, f"{name}: bf16 ridge point {ridge:.0f} FLOP/B"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_only_known_dtypes(name):
    for peaks in SPECS[name].units.values():
        assert set(peaks) <= set(PEAK_DTYPES)


# --- hand-checked values -----------------------------------------------------------------------

PINNED = [
    # NVIDIA H100 datasheet, SXM column: "GPU memory bandwidth 3.35TB/s" (not 3.0 or 3.4).
    ("h100-sxm", lambda s: s.dram_bandwidth, 3.35e12),
    # Hopper whitepaper, H100 SXM5: Peak BF16 Tensor TFLOPS 989.4 dense / 1978.9 sparse.
    ("h100-sxm", lambda s: s.peak("matrix", "bf16"), 9.894e14),
    # Hopper whitepaper, H100 SXM5: Peak FP8 Tensor TFLOPS 1978.9 dense / 3957.8 sparse.
    ("h100-sxm", lambda s: s.peak("matrix", "fp8"), 1.9789e15),
    # Hopper whitepaper: 50 MB L2 = 50 MiB as cudaDeviceProp.l2CacheSize reports (52428800).
    ("h100-sxm", lambda s: s.level("l2").capacity, 52428800),
    # NVIDIA H100 datasheet, PCIe column: BFLOAT16 Tensor Core 1,513 TFLOPS (with sparsity); 2TB/s.
    ("h100-pcie", lambda s: s.peak("matrix", "bf16"), 7.565e14),
    ("h100-pcie", lambda s: s.dram_bandwidth, 2.0e12),
    # NVIDIA H200 page, SXM: 141GB HBM3e at 4.8TB/s.
    ("h200-sxm", lambda s: s.dram_bandwidth, 4.8e12),
    ("h200-sxm", lambda s: s.dram.capacity, 1.41e11),
    # NVIDIA A100 datasheet, 80GB SXM: 2,039 GB/s; BFLOAT16 Tensor Core 312 TFLOPS (624 sparse).
    ("a100-sxm-80gb", lambda s: s.dram_bandwidth, 2.039e12),
    ("a100-sxm-80gb", lambda s: s.peak("matrix", "bf16"), 3.12e14),
    # HGX B200 per GPU: FP8/FP6 Tensor Core 9 PFLOPS (with sparsity), 7.7TB/s HBM3E.
    ("b200", lambda s: s.peak("matrix", "fp8"), 4.5e15),
    ("b200", lambda s: s.dram_bandwidth, 7.7e12),
    # Jetson AGX Thor: 2070 FP4 TFLOPS (sparse) -> 1035 dense; 273 GB/s LPDDR5X.
    ("jetson-agx-thor", lambda s: s.peak("matrix", "fp4"), 1.035e15),
    ("jetson-agx-thor", lambda s: s.dram_bandwidth, 2.73e11),
    # Jetson AGX Orin 64GB: 204.8 GB/s; GPU 170 sparse INT8 TOPS -> 85 dense.
    ("jetson-agx-orin-64gb", lambda s: s.dram_bandwidth, 2.048e11),
    ("jetson-agx-orin-64gb", lambda s: s.peak("matrix", "int8"), 8.5e13),
    # NVIDIA L4 datasheet: BF16 Tensor Core 242 TFLOPS (with sparsity); 300GB/s.
    ("l4", lambda s: s.peak("matrix", "bf16"), 1.21e14),
    ("l4", lambda s: s.dram_bandwidth, 3.0e11),
    # RTX A6000 datasheet: 768 GB/s; GA102 whitepaper: FP16 tensor 154.8 dense / 309.7 sparse.
    ("rtx-a6000", lambda s: s.dram_bandwidth, 7.68e11),
    ("rtx-a6000", lambda s: s.peak("matrix", "fp16"), 1.548e14),
    # AMD MI300X data sheet: Peak bfloat16 1307.4 TFLOPs (dense), 5.3 TB/s HBM3.
    ("mi300x", lambda s: s.peak("matrix", "bf16"), 1.3074e15),
    ("mi300x", lambda s: s.dram_bandwidth, 5.3e12),
    # Cloud TPU v5e docs: 197 TFLOPs bf16 per chip, 16 GB HBM2 at 819 GBps.
    ("tpu-v5e", lambda s: s.peak("matrix", "bf16"), 1.97e14),
    ("tpu-v5e", lambda s: s.dram_bandwidth, 8.19e11),
]


@pytest.mark.parametrize(("name", "get", "expected"), PINNED, ids=[f"{n}-{i}" for i, (n, _, _) in
                                                                    enumerate(PINNED)])
def test_pinned_datasheet_values(name, get, expected):
    assert get(load_spec(name)) == pytest.approx(expected, rel=1e-9)


# --- loading -----------------------------------------------------------------------------------

def test_load_by_name_alias_any_case_and_path(tmp_path):
    assert load_spec("h100-sxm") is load_spec("H100") is load_spec("  h100  ")
    assert load_spec("THOR").name == "jetson-agx-thor"
    by_path = load_spec(REPO / "hardware" / "l4.yaml")
    assert by_path == load_spec("l4")
    copy = tmp_path / "my-chip.yaml"
    copy.write_text((REPO / "hardware" / "l4.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    assert load_spec(str(copy)).name == "l4"


def test_unknown_name_lists_known_names():
    with pytest.raises(UnknownHardwareError) as info:
        load_spec("h900")
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "'h900'" in message
    for name in REQUIRED_CHIPS:
        assert name in message
    assert "thor" in message


def test_round_trip_through_yaml():
    for spec in list_specs():
        again = spec_from_dict(yaml.safe_load(dump_spec_yaml(spec)))
        assert again == spec


def _base() -> dict:
    return yaml.safe_load((REPO / "hardware" / "h100-sxm.yaml").read_text(encoding="utf-8"))


def test_errors_name_the_field():
    bad = _base()
    bad["units"]["matrix"]["bf16"]["peak"] = -1
    with pytest.raises(HardwareSpecError, match=r"x\.yaml: field units/matrix/bf16/peak"):
        spec_from_dict(bad, "x.yaml")
    bad = _base()
    bad["units"]["matrix"]["bf16"]["source"] = 7
    with pytest.raises(HardwareSpecError, match="units/matrix/bf16/source: index 7 out of range"):
        spec_from_dict(bad)
    bad = _base()
    bad["memory"].reverse()
    with pytest.raises(HardwareSpecError, match="first memory level must be 'dram'"):
        spec_from_dict(bad)
    bad = _base()
    bad["units"]["matrix"]["fp5"] = {"peak": 1.0, "source": 0}
    with pytest.raises(HardwareSpecError, match="units/matrix"):
        spec_from_dict(bad)


def test_newer_major_version_is_refused():
    bad = _base()
    bad["version"] = "2.0"
    with pytest.raises(HardwareSpecError, match="version 2.0 is not supported.*1.x"):
        spec_from_dict(bad)


def test_yaml_aliases_duplicates_and_garbage_are_refused(tmp_path):
    lines = (REPO / "hardware" / "h100-sxm.yaml").read_text(encoding="utf-8").splitlines()
    bf16 = next(i for i, line in enumerate(lines) if line.strip().startswith("bf16:"))
    fp16 = next(i for i, line in enumerate(lines) if line.strip().startswith("fp16:"))
    aliased = list(lines)
    aliased[bf16] = aliased[bf16].replace("bf16: {", "bf16: &x {", 1)
    aliased[fp16] = aliased[fp16].split("fp16:")[0] + "fp16: *x"
    path = tmp_path / "aliased.yaml"
    path.write_text("\n".join(aliased) + "\n", encoding="utf-8")
    with pytest.raises(HardwareSpecError, match="aliased.yaml:.*aliases and anchors are not allowed"):
        load_spec(path)
    duplicated = list(lines)
    duplicated.insert(bf16, lines[bf16])
    path.write_text("\n".join(duplicated) + "\n", encoding="utf-8")
    with pytest.raises(HardwareSpecError, match="duplicate key 'bf16'"):
        load_spec(path)
    path.write_text("format: [unclosed", encoding="utf-8")
    with pytest.raises(HardwareSpecError, match="not valid YAML"):
        load_spec(path)
    with pytest.raises(HardwareSpecError, match="cannot read"):
        load_spec(tmp_path / "missing.yaml")


def test_every_spec_pickles_for_worker_processes():
    """Specs travel to worker processes (check-bounds --jobs, sweeps): a pickle round trip gives an
    equal spec whose mappings are read-only again (the clock-scaled form included)."""
    import pickle
    from types import MappingProxyType

    from solar_io.backends.roofline.clock import at_clock
    from solar_io.hardware.catalog import load_spec as by_name

    for spec in (by_name("h100-sxm"), at_clock(by_name("b200"), "1500MHz")[0], by_name("thor")):
        back = pickle.loads(pickle.dumps(spec))
        assert back == spec and back.peak("matrix", "bf16") == spec.peak("matrix", "bf16")
        assert isinstance(back.units, MappingProxyType)
        assert all(isinstance(v, MappingProxyType) for v in back.units.values())
        assert back.interconnect == spec.interconnect
