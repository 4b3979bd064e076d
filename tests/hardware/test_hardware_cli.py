"""``solar-io hw`` command group, driven through Typer's CliRunner."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from solar_io.cli.hardware import app, format_si
from solar_io.hardware import load_spec

runner = CliRunner()
WIDE = {"COLUMNS": "250"}


def test_list_shows_every_chip():
    result = runner.invoke(app, ["list"], env=WIDE)
    assert result.exit_code == 0, result.output
    for name in ("h100-sxm", "b200", "jetson-agx-thor", "mi300x", "tpu-v5e"):
        assert name in result.output
    assert "3.35 TB/s" in result.output  # H100 SXM DRAM
    assert "989.4 TFLOP/s" in result.output  # H100 SXM dense bf16


def test_show_by_alias_prints_peaks_memory_and_sources():
    result = runner.invoke(app, ["show", "H100"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "h100-sxm" in result.output
    assert "989.4 TFLOP/s" in result.output
    assert "50 MiB" in result.output
    assert "https://resources.nvidia.com/" in result.output


def test_show_yaml_round_trips():
    result = runner.invoke(app, ["show", "thor", "--yaml"], env=WIDE)
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(result.output)
    assert data["name"] == "jetson-agx-thor"
    assert data["units"]["matrix"]["fp4"]["peak"] == load_spec("thor").peak("matrix", "fp4")


def test_show_unknown_fails_cleanly():
    result = runner.invoke(app, ["show", "h900"], env=WIDE)
    assert result.exit_code == 1
    assert "unknown hardware 'h900'" in result.output
    assert "h100-sxm" in result.output
    assert "Traceback" not in result.output


def test_show_bad_file_fails_cleanly(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: solar-io.hardware\nversion: '1.0'\nname: Bad Name\n", encoding="utf-8")
    result = runner.invoke(app, ["show", str(bad)], env=WIDE)
    assert result.exit_code == 1
    assert "bad.yaml" in result.output


def test_probe_writes_a_loadable_spec(tmp_path):
    out = tmp_path / "cpu.yaml"
    # 16 MiB bandwidth arrays (the default, 8x the last-level cache, is what tests/hardware/test_hardware_probe.py
    # checks): the command's options reach the probe, in a fifth of the CPU time
    result = runner.invoke(app, ["probe", "-o", str(out), "--fast", "--name", "my-box",
                                 "--gemm-sizes", "128,256", "--buffer", "16MiB"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output.replace("\n", "")
    spec = load_spec(out)
    assert spec.name == "my-box" and spec.kind == "cpu"
    assert spec.measured_gemm["fp32"].size in (128, 256)
    assert {b.buffer_bytes for b in spec.measured_bandwidth.values()} == {16 << 20}
    shown = runner.invoke(app, ["show", str(out)], env=WIDE)
    assert shown.exit_code == 0 and "measured" in shown.output


def test_probe_rejects_bad_sizes(tmp_path):
    result = runner.invoke(app, ["probe", "-o", str(tmp_path / "x.yaml"), "--gemm-sizes", "big"], env=WIDE)
    assert result.exit_code == 1
    assert "--gemm-sizes" in result.output
    assert not (tmp_path / "x.yaml").exists()


def test_format_si():
    assert format_si(9.894e14, "FLOP/s") == "989.4 TFLOP/s"
    assert format_si(3.35e12, "B/s") == "3.35 TB/s"
    assert format_si(52428800, "B", binary=True) == "50 MiB"
    assert format_si(None, "B") == "-"
