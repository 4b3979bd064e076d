"""Interconnect in the hardware specs, system specs, and ``solar-io bound --parallel`` on the command line
(issue 22, items 3-4)."""

from __future__ import annotations

import json

import pytest
import yaml
from inprocess import run_main
from jsonschema import Draft202012Validator
from paths import ROOT
from typer.testing import CliRunner

from solar_io.backends.parallel import ParallelError, load_system, system_names
from solar_io.cli.hardware import app as hw_app
from solar_io.hardware import list_specs, load_spec

MLP = ROOT / "examples" / "graphs" / "mlp.yaml"
WIDE = {"COLUMNS": "250"}


@pytest.mark.parametrize("chip, up, domain", [
    ("h100-sxm", 4.5e11, 8), ("h200-sxm", 4.5e11, 8), ("b200", 9.0e11, 8), ("a100-sxm-80gb", 3.0e11, 8),
    ("h100-pcie", 3.0e11, 2), ("mi300x", 4.48e11, 8), ("tpu-v5e", 1.8e11, 256),
])
def test_scale_up_links_are_half_the_bidirectional_datasheet_figure(chip, up, domain):
    # datasheets: H100/H200 SXM 900 GB/s, B200 1.8 TB/s, A100 600 GB/s, H100 PCIe bridge 600 GB/s, both ways
    link = load_spec(chip).link("scale_up")
    assert (link.bandwidth, link.domain) == (up, domain)
    assert "each way" in link.note


def test_every_link_is_sourced_and_round_trips():
    for spec in list_specs():
        for key, link in spec.interconnect.items():
            assert link.sources and all(0 <= i < len(spec.sources) for i in link.sources), f"{spec.name}/{key}"
            assert link.bandwidth > 0 and link.note, f"{spec.name}/{key}"
        if spec.interconnect:
            assert spec.version == "1.1", spec.name  # the field is new in hardware format 1.1
    assert load_spec("h100-sxm").link("scale_out").bandwidth == 400e9 / 8  # 400 Gb/s ConnectX-7 per GPU


def test_hw_show_prints_the_interconnect():
    out = CliRunner().invoke(hw_app, ["show", "b200"], env=WIDE).output
    assert "interconnect" in out and "NVLink 5" in out and "900 GB/s" in out and "8 chips" in out
    out = CliRunner().invoke(hw_app, ["show", "jetson-agx-thor"], env=WIDE).output
    assert "interconnect: none given" in out
    out = CliRunner().invoke(hw_app, ["show", "dgx-h100x4"], env=WIDE).output
    assert "4 node(s) x 8 chips = 32 chips" in out and "InfiniBand NDR" in out and "50 GB/s per chip each way" in out
    out = CliRunner().invoke(hw_app, ["list"], env=WIDE).output
    assert "gb200-nvl72" in out and "1 x 72" in out


def test_shipped_systems_validate_and_load():
    schema = json.loads((ROOT / "schema" / "system-v1.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    names = system_names()
    assert {"dgx-h100", "dgx-h100x4", "dgx-b200", "gb200-nvl72"} <= set(names)
    for name in names:
        data = yaml.safe_load((ROOT / "hardware" / "systems" / f"{name}.yaml").read_text())
        assert not list(Draft202012Validator(schema).iter_errors(data)), name
        s = load_system(name)
        assert s.name == name and s.chips == data["chips_per_node"] * data["nodes"]
        assert all(src.split("<")[1].startswith("https://") for src in s.sources)
    nvl = load_system("gb200-nvl72")
    assert (nvl.chips, nvl.domain, nvl.scale_up.bandwidth) == (72, 72, 9.0e11)  # 130 TB/s / 72 / 2


def test_system_errors_are_one_line(tmp_path):
    with pytest.raises(ParallelError, match="unknown system 'dgx-z'.*known: dgx-b200"):
        load_system("dgx-z")
    bad = tmp_path / "s.yaml"
    bad.write_text("format: solar-io.system\nversion: '1.0'\nname: s\nfull_name: s\nchip: h100-sxm\n"
                   "chips_per_node: 8\nnodes: 2\nsources: [{title: t, url: 'https://example.org'}]\n"
                   "links: {scale_out: {kind: IB, bandwidth: 0, source: 0}}\n")
    with pytest.raises(ParallelError, match=r"s.yaml: field links/scale_out/bandwidth"):
        load_system(bad)
    bad.write_text(bad.read_text().replace("bandwidth: 0", "bandwidth: 1.0e+10").replace("chip: h100-sxm", "chip: x"))
    with pytest.raises(ParallelError, match="field chip: unknown hardware 'x'"):
        load_system(bad)


def test_bound_cli_parallel(tmp_path):
    r = run_main("bound", str(MLP), "--hw", "h100-sxm", "--parallel", "tp=2")
    assert r.returncode == 0, r.stderr
    assert "all-reduce" in r.stdout and "SOL overlapped" in r.stdout and "assumptions:" in r.stdout
    out = tmp_path / "r.yaml"
    r = run_main("bound", str(MLP), "--system", "dgx-h100x4", "--parallel", "tp=8,dp=4", "--format", "yaml",
                 "-o", str(out), "--measured", "1ms")
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load(out.read_text())
    assert doc["system"] == "dgx-h100x4" and doc["chips"] == 32 and doc["tp_split_ranks"] == {"H": 8}
    schema = json.loads((ROOT / "schema" / "parallel-report-v1.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    assert not [e.message for e in Draft202012Validator(schema).iter_errors(doc)]
    step = doc["step"]["fused"]
    assert doc["measured_s"] == 1e-3 and step["headroom"] == pytest.approx(1e-3 / step["overlapped_s"], rel=1e-12)
    r = run_main("bound", str(MLP), "--hw", "h100-sxm", "--parallel", "tp=2", "--dtype", "fp8_e4m3", "-f", "json")
    (c,) = json.loads(r.stdout)["stages"][0]["collectives"]
    assert r.returncode == 0 and c["bytes"] == 512 * 1024 * 1  # the cast graph's activation, 1 byte per element
    r = run_main("bound", str(MLP), "--hw", "h100-sxm", "--parallel", "tp=2", "--target-rate", "10Hz")
    assert r.returncode == 1 and "--target-rate: not available with --parallel" in r.stderr
    r = run_main("bound", str(MLP), "--hw", "h100-sxm", "--parallel", "tp=2,bogus")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cannot read 'bogus'" in r.stderr


def test_layout_sweep_finds_the_fastest_layout(tmp_path):
    from parallel_graphs import stack

    from solar_io import dump
    from solar_io.backends.parallel import parallel_bound, parse_layout
    from solar_io.dse.layouts import best_layouts, is_layout_sweep, run_layout_sweep
    from solar_io.dse.sweep import SweepError

    path = tmp_path / "stack.yaml"
    dump(stack(4), path)
    varies = ["tp=1,2,4", "pp=1,2"]
    assert is_layout_sweep(varies) and not is_layout_sweep(["dram_bw=1x,2x"])
    with pytest.raises(SweepError, match="cannot be mixed"):
        is_layout_sweep(["tp=2", "dram_bw=2x"])
    res = run_layout_sweep(path, ["b200"], varies, progress=False)
    assert not res.failures and len(res.rows) == 3 * 2 * 2  # points x fidelities
    for row in res.rows:  # each row is the direct bound of that layout
        ref = parallel_bound(stack(4), "b200", parse_layout(f"tp={row['tp']},pp={row['pp']}"))
        assert row["sol_s"] == pytest.approx(ref.overlapped[row["fidelity"]], rel=1e-12)
    fastest = min((r for r in res.rows if r["fidelity"] == "fused"), key=lambda r: r["sol_s"])
    line = next(x for x in best_layouts(res) if "(fused)" in x)
    assert f"tp={fastest['tp']},pp={fastest['pp']} on {fastest['chips']} chips" in line
