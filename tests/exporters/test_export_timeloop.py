"""Timeloop export: v0.4 problems checked against the parser's rules, the fused einsum list.

No Timeloop binary can be built here. The problem files are checked structurally against the
rules of Timeloop's parser (``src/workload/shape-models/problem-shape.cpp``: single-character
dimension names, at most ``MAX_DATA_SPACES`` data spaces, projections as sums of products of
dimensions and declared coefficients, one read-write data space) and against the structure
of a published example problem (the convolution layer of the Timeloop/Accelergy exercises,
restated below). The LoopTree (fused) file's ISL strings are parsed with islpy as Timeloop's
``ParseFusedWorkload`` does, when ``.venv-accelforge`` (which has islpy) is present.
"""

from __future__ import annotations

import hashlib
from math import prod
from pathlib import Path

import pytest
import yaml
from test_export_support import GRAPHS, ROOT, run_checks
from typer.testing import CliRunner

from solar_io import __version__, graph_metrics, load, loads
from solar_io.cli.main import app
from solar_io.exporters.common import ExportError, write_exports
from solar_io.exporters.forms import Unexpressible, affine_form
from solar_io.exporters.timeloop import MAX_DATA_SPACES, dimension_letters, export_timeloop

# The published example's structure (Timeloop/Accelergy exercises, problem of a CNN layer,
# v0.4 keys), restated: keys, dimension names, coefficients and sum-of-products projections.
PUBLISHED_CONV = {
    "problem": {
        "version": 0.4,
        "shape": {
            "name": "CNN_Layer",
            "dimensions": ["C", "M", "R", "S", "N", "P", "Q"],
            "coefficients": [{"name": "Wstride", "default": 1}, {"name": "Hstride", "default": 1},
                             {"name": "Wdilation", "default": 1}, {"name": "Hdilation", "default": 1}],
            "data_spaces": [
                {"name": "Weights", "projection": [[["C"]], [["M"]], [["R"]], [["S"]]]},
                {"name": "Inputs", "projection": [[["N"]], [["C"]], [["R", "Wdilation"], ["P", "Wstride"]],
                                                  [["S", "Hdilation"], ["Q", "Hstride"]]]},
                {"name": "Outputs", "projection": [[["N"]], [["M"]], [["Q"]], [["P"]]], "read_write": True},
            ],
        },
        "instance": {"C": 3, "M": 96, "R": 11, "S": 11, "N": 1, "P": 55, "Q": 55, "Wstride": 4, "Hstride": 4},
    }
}


def check_problem(doc: dict) -> list[str]:
    """Problems a Timeloop v0.4 parser would have with ``doc`` (empty: none)."""
    errs: list[str] = []
    p = doc.get("problem")
    if not isinstance(p, dict) or set(p) - {"version", "shape", "instance"}:
        return ["top level must be problem: {version, shape, instance}"]
    shape, inst = p.get("shape", {}), p.get("instance", {})
    if set(shape) - {"name", "dimensions", "coefficients", "data_spaces"}:
        errs.append(f"unknown shape keys {set(shape)}")
    dims = shape.get("dimensions", [])
    if any(not isinstance(d, str) or len(d) != 1 for d in dims) or len(set(dims)) != len(dims):
        errs.append(f"dimension names must be distinct single characters: {dims}")
    coeffs = {}
    for c in shape.get("coefficients", []):
        if set(c) != {"name", "default"} or not isinstance(c["default"], int):
            errs.append(f"coefficient needs a name and an integer default: {c}")
        coeffs[c.get("name")] = c.get("default")
    spaces = shape.get("data_spaces", [])
    if not 1 <= len(spaces) <= MAX_DATA_SPACES:
        errs.append(f"{len(spaces)} data spaces (1..{MAX_DATA_SPACES})")
    if sum(1 for s in spaces if s.get("read_write")) != 1:
        errs.append("exactly one read_write data space")
    names = [s.get("name") for s in spaces]
    if len(set(names)) != len(names):
        errs.append("data space names must be distinct")
    for s in spaces:
        if set(s) - {"name", "projection", "read_write"}:
            errs.append(f"unknown data space keys {set(s)}")
        for expr in s.get("projection", []):
            terms = [expr] if isinstance(expr, str) else expr
            for t in terms:
                t = [t] if isinstance(t, str) else t
                if not (1 <= len(t) <= 2 and t[0] in dims and (len(t) == 1 or t[1] in coeffs)):
                    errs.append(f"{s.get('name')}: bad term {t}")
    if set(inst) - set(dims) - set(coeffs) or any(not isinstance(v, int) or v < 1 for v in inst.values()):
        errs.append(f"instance must size dimensions/coefficients with positive integers: {inst}")
    if set(dims) - set(inst):
        errs.append(f"dimensions without a size: {set(dims) - set(inst)}")
    return errs


def _shape_of(doc: dict) -> tuple:
    """The structure of a problem without its names: keys, and terms per projected dimension."""
    s = doc["problem"]["shape"]
    return (sorted(doc["problem"]), sorted(s), [
        (sorted(ds), [len(e) for e in ds["projection"]]) for ds in s["data_spaces"]])


def test_checker_accepts_the_published_example() -> None:
    assert check_problem(PUBLISHED_CONV) == []
    bad = yaml.safe_load(yaml.safe_dump(PUBLISHED_CONV))
    bad["problem"]["shape"]["dimensions"][0] = "CC"
    assert check_problem(bad)


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
def test_problems_follow_the_parser_rules(path: Path, tmp_path: Path) -> None:
    g = load(path)
    sha = hashlib.sha256(path.read_text().encode()).hexdigest()
    r = export_timeloop(g, path.stem, sha)
    assert r == export_timeloop(load(path), path.stem, sha)  # deterministic
    metrics = {m.name: m for m in graph_metrics(g).nodes}
    problems = [f for f in r.files if f.name.endswith(".problem.yaml")]
    skipped = {s.node for s in r.skipped}
    assert len(problems) == sum(1 for n in g.nodes if n.name not in skipped)
    for f, node in zip(problems, [n for n in g.nodes if n.name not in skipped], strict=True):
        assert f.text.startswith(f"# Timeloop v0.4 problem written by solar-io {__version__}\n")
        assert f"sha256 {sha}" in f.text
        doc = yaml.safe_load(f.text)
        assert check_problem(doc) == [], f.name
        inst = doc["problem"]["instance"]
        dims = doc["problem"]["shape"]["dimensions"]
        assert prod(inst[d] for d in dims) == metrics[node.name].points
        assert "# dimensions: " in f.text  # the single-character renaming, as a comment


def test_conv_problem_has_the_published_structure() -> None:
    r = export_timeloop(load(ROOT / "examples/graphs/conv2d.yaml"), "conv2d")
    doc = yaml.safe_load(r.files[0].text)
    ours, ref = _shape_of(doc), _shape_of(PUBLISHED_CONV)
    assert ours[0] == ref[0] and set(ours[1]) == set(ref[1])
    assert sorted(ours[2]) == sorted(ref[2])  # same data spaces, same sum-of-products shapes
    shape = doc["problem"]["shape"]
    assert shape["coefficients"] == [{"name": "Coef2", "default": 2}]  # stride 2
    assert shape["data_spaces"][0]["projection"][2] == [["P", "Coef2"], ["R"]]
    assert "constant offsets dropped" in r.files[0].text


def test_single_character_names_and_data_space_limit() -> None:
    assert dimension_letters(("Dh", "D", "S2", "S", "_x")) == {"Dh": "D", "D": "A", "S2": "S", "S": "B", "_x": "C"}
    ranks = "".join(f"  R{i}: 2\n" for i in range(30))
    tensors = "".join(f"- name: t{i}\n  ranks: [R0]\n  dtype: fp32\n  role: input\n" for i in range(6))
    text = (f'format: solar-io.einsum-graph\nversion: "1.0"\nproducer:\n  tool: solar-io\n  tool_version: 0.1.0\n'
            f"  frontend: hand-written\nranks:\n{ranks}tensors:\n{tensors}- name: y\n  ranks: [R0]\n  dtype: fp32\n"
            "  role: output\nnodes:\n- name: add6\n  kind: einsum\n  op: aten.add\n  space: [R0]\n  inputs:\n"
            + "".join(f"  - t{i}[R0]\n" for i in range(6)) + "  output: y[R0]\n  map: add\n  reduce: none\n"
            "validation:\n  status: skipped\n  method: none\n")
    g = loads(text)
    r = export_timeloop(g, "wide")
    assert [s.node for s in r.skipped] == ["add6"] and "data spaces" in r.skipped[0].reason
    assert [f.name for f in r.files] == ["wide.fused.yaml"]  # the einsum list has no such limit
    with pytest.raises(ExportError):
        export_timeloop(g, "wide", strict=True)


def test_fused_workload_structure() -> None:
    g = load(ROOT / "examples/graphs/attention.yaml")
    fused = yaml.safe_load(export_timeloop(g, "a").files[-1].text)
    names: list[str] = []
    for prob in fused["problem"]:
        names += prob["shape"]["dimensions"]
        for ds in prob["shape"]["data_spaces"]:
            names += ds.get("dimensions", [])
            assert ds["projection"].startswith("[ ") and ds["projection"].endswith(" ]")
        assert set(prob) == {"shape", "instance"}
    assert len(names) == len(set(names))  # Timeloop's fused parser needs unique dimension names
    assert [p["shape"]["name"] for p in fused["problem"]] == [n.name for n in g.nodes]


def test_cli_export_timeloop(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["export", "timeloop", str(ROOT / "tests/golden/v1.0/opaque_sparse.yaml"),
                                 "-o", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "sort (opaque" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["opaque_sparse.01-proj.problem.yaml",
                                                          "opaque_sparse.fused.yaml"]


def _formed(g) -> list:  # type: ignore[no-untyped-def]
    """The nodes of ``g`` that have an affine form (those in the fused einsum list), in order."""
    out = []
    for n in g.nodes:
        try:
            affine_form(g, n)
        except Unexpressible:
            continue
        out.append(n)
    return out


def test_fused_isl_strings_parse_with_isl(tmp_path: Path) -> None:
    """islpy (in .venv-accelforge) parses every fused file as Timeloop does; points match."""
    tasks, want = [], []
    for path in GRAPHS:
        g = load(path)
        r = export_timeloop(g, path.stem)
        write_exports(r, tmp_path)
        tasks.append({"kind": "isl", "fused": str(tmp_path / f"{path.stem}.fused.yaml")})
        fused = yaml.safe_load(r.files[-1].text)
        pts = {m.name: m.points for m in graph_metrics(g).nodes}
        want.append({p["shape"]["name"]: pts[n.name] for p, n in zip(fused["problem"], _formed(g), strict=True)})
    for res, w in zip(run_checks(tasks, tmp_path), want, strict=True):
        assert res["ok"], res.get("traceback", res.get("error"))
        assert res["points"] == w
