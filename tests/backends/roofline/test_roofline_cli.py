"""``solar-io bound``: output formats against the report schema, options, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from inprocess import run_main
from jsonschema import Draft202012Validator
from paths import ROOT
from test_roofline import build, einsum, mlp_graph

import solar_io
from solar_io import dumps
from solar_io.backends.roofline import document, parse_rate, parse_time, to_json, to_yaml
from solar_io.backends.roofline.table import render

SCHEMA = json.loads((ROOT / "schema" / "sol-report-v1.schema.json").read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)
MLP = ROOT / "examples" / "graphs" / "mlp.yaml"


@pytest.fixture
def cli():
    """``solar-io bound`` in this process (tests/inprocess.py; a fresh interpreter costs seconds of CPU):
    these tests check exit status, output and files. The default table keeps a real interpreter."""
    return run_main


def _valid(doc: object) -> None:
    errors = sorted(VALIDATOR.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]


def _opaque_graph_file(tmp_path: Path) -> Path:
    g = build({"B": 8, "N": 1024},
              [("x", ["B", "N"], "fp32", "input"), ("s", ["B", "N"], "fp32", "intermediate"),
               ("y", ["B", "N"], "fp32", "output")],
              [{"name": "sort", "kind": "opaque", "op": "aten.sort", "inputs": ["x"], "outputs": ["s"],
                "reason": "data-dependent"},
               einsum("e", "B N", ["s[B, N]"], "y[B, N]", "exp", "none")], name="opq")
    path = tmp_path / "opq.yaml"
    path.write_text(dumps(g), encoding="utf-8")
    return path


def test_schema_is_valid_and_every_property_is_described():
    Draft202012Validator.check_schema(SCHEMA)

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                assert isinstance(sub, dict) and sub.get("description") or "$ref" in sub, f"{where}.{name}"
            for key, sub in node.items():
                walk(sub, f"{where}.{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{where}[{i}]")

    walk(SCHEMA, "schema")


def test_api_documents_validate_for_every_option():
    reports = solar_io.backends.bound_many(mlp_graph(), ["h100", "b200", "thor", "tpu-v5e"], measured="1ms",
                                           target_rate="500Hz", allow_tf32=True, compute_dtype="fp32=bf16")
    doc = json.loads(to_json(reports))
    _valid(doc)
    assert len(doc["reports"]) == 4 and len(doc["comparison"]) == 4
    assert yaml.safe_load(to_yaml(reports)) == doc
    single = document([solar_io.bound(mlp_graph(), "h100", cache_aware=False)], top=1)
    _valid(json.loads(json.dumps(single)))
    assert "comparison" not in single and single["reports"][0]["nodes_shown"] == 1
    assert single["reports"][0]["fidelities"]["cache_aware"]["status"] == "not computed"
    assert single["reports"][0]["fidelities"]["cache_aware"]["time_s"] is None


def test_bound_yaml_validates_and_reports_opaque_nodes(cli, tmp_path):
    path = _opaque_graph_file(tmp_path)
    out = tmp_path / "report.yaml"
    res = cli("bound", str(path), "--hw", "h100", "--format", "yaml", "-o", str(out), "--measured", "2.5e-3")
    assert res.returncode == 0, res.stderr
    assert "warning" in res.stderr and "opaque" in res.stderr and "sort" in res.stderr
    doc = yaml.safe_load(out.read_text(encoding="utf-8"))
    _valid(doc)
    rep = doc["reports"][0]
    assert rep["opaque_nodes"] == ["sort"] and rep["compute_complete"] is False
    sort = next(n for n in rep["nodes"] if n["name"] == "sort")
    assert sort["compute_known"] is False and sort["bytes"] == 2 * 8 * 1024 * 4
    assert rep["measured_s"] == 2.5e-3
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically: no temporary left behind


def test_bound_json_several_chips_and_top(cli):
    res = cli("bound", str(MLP), "--hw", "b200,h100-pcie,a6000,thor", "--format", "json", "--top", "2",
              "--target-latency", "50us")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    _valid(doc)
    assert [r["hardware"]["name"] for r in doc["reports"]] == ["b200", "h100-pcie", "rtx-a6000", "jetson-agx-thor"]
    assert all(len(r["nodes"]) == 2 for r in doc["reports"])
    assert [row["hardware"] for row in doc["comparison"]] == ["b200", "h100-pcie", "rtx-a6000", "jetson-agx-thor"]
    inv = doc["reports"][0]["inverse"]
    assert inv["target_latency_s"] == 50e-6 and inv["fidelities"]["cache_aware"]["chip_time_s"] == \
        doc["reports"][0]["fidelities"]["cache_aware"]["time_s"]  # cache-aware is on by default


def test_bound_table_default(cli):
    res = run_cli("bound", str(MLP), "--hw", "h100,thor", "--measured", "1ms", "--target-rate", "1kHz")
    assert res.returncode == 0, res.stderr
    for text in ("Speed of light", "unfused", "fused", "cache-aware", "Cache-aware groups", "fusion gain", "fc1",
                 "Inverse roofline", "Comparison", "matrix/bf16", "dram"):
        assert text in res.stdout, text
    assert "not computed" not in res.stdout  # cache-aware is the default
    assert "not computed" in cli("bound", str(MLP), "--hw", "h100", "--no-cache-aware").stdout
    assert "not computed" not in cli("bound", str(MLP), "--hw", "h100", "--cache-aware").stdout


def test_table_render_to_text_lists_opaque_prominently(tmp_path):
    r = solar_io.bound(_opaque_graph_file(tmp_path), "h100")
    text = render([r])
    assert "warning: compute of 1 opaque node(s) is UNKNOWN" in text and "compute unknown" in text


@pytest.mark.parametrize("args, message", [
    (["--hw", "no-such-chip"], "unknown hardware 'no-such-chip'"),
    (["--hw", "h100", "--measured", "soon"], "--measured: cannot read 'soon'"),
    (["--hw", "h100", "--target-rate", "-5Hz"], "--target-rate"),
    (["--hw", "a100", "--dtype", "fp8"], "node 'fc1'"),
    (["--hw", "h100", "--format", "xml"], "--format"),
    (["--hw", "h100", "--compute-dtype", "fp9"], "--compute-dtype"),
])
def test_user_errors_are_one_line(cli, args, message):
    res = cli("bound", str(MLP), *args)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("error: ")


def test_missing_graph_is_one_line(cli, tmp_path):
    res = cli("bound", str(tmp_path / "nope.yaml"), "--hw", "h100")
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1


def test_parse_time_and_rate():
    assert parse_time("3.1ms") == pytest.approx(3.1e-3) and parse_time("500us") == pytest.approx(5e-4)
    assert parse_time("2.5e-3") == 2.5e-3 and parse_time("500 µs") == pytest.approx(5e-4)
    assert parse_time("1.5s") == 1.5 and parse_time("20ns") == pytest.approx(2e-8)
    assert parse_rate("500Hz") == 500 and parse_rate("2kHz") == 2000 and parse_rate("60") == 60
    for bad in ("", "ms", "-1ms", "0", "1 parsec", "nan", "inf"):
        with pytest.raises(solar_io.SolarIOError):
            parse_time(bad)
    for bad in ("", "0Hz", "fast", "1e400Hz"):
        with pytest.raises(solar_io.SolarIOError):
            parse_rate(bad)


def test_python_api_takes_paths_names_and_specs():
    from solar_io.hardware import load_spec

    a = solar_io.bound(MLP, "h100")
    b = solar_io.bound(solar_io.load(MLP), load_spec("h100-sxm"))
    c = solar_io.bound(str(MLP), ROOT / "hardware" / "h100-sxm.yaml")
    assert a.unfused.time == b.unfused.time == c.unfused.time and isinstance(a, solar_io.Report)


def test_table_to_file_and_what_if_options(cli, tmp_path):
    out = tmp_path / "report.txt"
    res = cli("bound", str(MLP), "--hw", "a100", "--dtype", "fp8", "--compute-dtype", "fp8=fp16", "--top", "0",
              "-o", str(out))
    assert res.returncode == 0, res.stderr
    text = out.read_text(encoding="utf-8")
    assert "options: --dtype fp8_e4m3 --compute-dtype fp8=fp16" in text
    assert "Top 5 of 5 nodes" in text and "matrix/fp16" in text and res.stdout == ""
