"""Hardware what-ifs: the ``--vary`` grammar, the vectorised bounds against the roofline backend on a
scaled spec (to float rounding), a route that flips between units, closed-form checks, and the CLI."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from paths import ROOT

import solar_io
from solar_io.backends.roofline import bound
from solar_io.cli.main import main
from solar_io.dse import whatif
from solar_io.dse.sweep import SweepError
from solar_io.dse.whatif import (
    binding_names,
    evaluate,
    hardware_grid,
    parse_vary,
    prepare,
    run_whatif,
    scaled_spec,
)
from solar_io.hardware import load_spec, spec_from_dict

GRAPHS = ROOT / "examples" / "graphs"

# A bf16 x fp16 matmul: its compute dtype mixes two classes, so its matrix work runs at the faster of
# the classes' routes.
MIXED = """format: solar-io.einsum-graph
version: "1.0"
name: mixed
producer:
  tool: solar-io
  tool_version: 0.1.0
  frontend: hand-written
ranks:
  M: 512
  N: 1024
  K: 2048
tensors:
- name: A
  ranks: [M, K]
  dtype: bf16
  role: input
- name: B
  ranks: [K, N]
  dtype: fp16
  role: weight
- name: C
  ranks: [M, N]
  dtype: bf16
  role: output
nodes:
- name: mm
  kind: einsum
  op: aten.mm
  space: [M, N, K]
  inputs:
  - A[M, K]
  - B[K, N]
  output: C[M, N]
  map: mul
  reduce: add
validation:
  status: skipped
  method: none
"""


def _no_fp16_matrix(name: str = "h100-sxm"):
    """The chip without its fp16 matrix peak: fp16 matrix work falls back to the fp16 vector unit."""
    doc = load_spec(name).to_dict()
    del doc["units"]["matrix"]["fp16"]
    return spec_from_dict(doc, "no-fp16-matrix")


# ---------------------------------------------------------------------------- grammar


def test_parse_vary_forms() -> None:
    name, v = parse_vary("dram_bw=0.5x..4x:4")
    assert name == "dram_bw" and v == pytest.approx([0.5, 1.0, 2.0, 4.0], rel=1e-15)
    assert parse_vary("peak=0.25..4")[1].size == whatif.DEFAULT_POINTS
    assert parse_vary("matrix_peak=1x,3x,2")[1].tolist() == [1.0, 3.0, 2.0]
    assert parse_vary("vector_peak=0.5x,1x,...,8x")[1].tolist() == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert parse_vary("special_peak=2x..2x:1")[1].tolist() == [2.0]
    ratios = np.diff(np.log(parse_vary("dram_bw=0.1x..10x:5")[1]))
    assert ratios == pytest.approx(np.full(4, np.log(10) / 2))  # log-spaced


@pytest.mark.parametrize("text, message", [
    ("bandwidth=2x", "NAME one of dram_bw, peak"),
    ("dram_bw=-1x..2x", "cannot read '-1x' as a positive multiplier"),
    ("peak=1x..2x:0", "number of points after ':' must be a whole number"),
    ("peak=1x..2x:1", "needs at least 2 points"),
    ("peak=fast", "cannot read 'fast'"),
])
def test_parse_vary_errors(text: str, message: str) -> None:
    with pytest.raises(SweepError, match=message):
        parse_vary(text)


def test_grid_order_and_combined_scales() -> None:
    values, scales = hardware_grid([parse_vary("peak=1x,2x"), parse_vary("matrix_peak=1x,3x,5x")])
    assert values["peak"].tolist() == [1, 1, 1, 2, 2, 2] and values["matrix_peak"].tolist() == [1, 3, 5] * 2
    assert scales["matrix"].tolist() == [1, 3, 5, 2, 6, 10]  # peak and matrix_peak multiply
    assert scales["vector"].tolist() == scales["special"].tolist() == [1, 1, 1, 2, 2, 2]
    assert scales["dram"].tolist() == [1.0] * 6
    with pytest.raises(SweepError, match="peak is given twice"):
        hardware_grid([parse_vary("peak=1x"), parse_vary("peak=2x")])


# ---------------------------------------------------------------------------- agreement with the backend


def _random_scales(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {r: np.exp(rng.uniform(np.log(0.05), np.log(20.0), n)) for r in whatif.RESOURCES}


def _check_against_backend(g, spec, scales: dict[str, np.ndarray]) -> None:
    ev = evaluate(prepare(g, spec), scales)
    ub, fb = binding_names(ev.unfused_binding), binding_names(ev.fused_binding)
    for i in range(ev.unfused.size):
        r = bound(g, scaled_spec(spec, {k: float(v[i]) for k, v in scales.items()}))
        assert ev.unfused[i] == pytest.approx(r.unfused.time, rel=1e-12, abs=0)
        assert ev.fused[i] == pytest.approx(r.fused.time, rel=1e-12, abs=0)
        assert (ub[i], fb[i]) == (r.unfused.bottleneck, r.fused.bottleneck)


@pytest.mark.parametrize("graph", ["mlp.yaml", "attention.yaml", "conv2d.yaml"])
@pytest.mark.parametrize("chip", ["h100-sxm", "thor", "tpu-v5e"])
def test_vectorised_bounds_equal_backend_on_scaled_spec(graph: str, chip: str) -> None:
    g = solar_io.load(GRAPHS / graph)
    scales = _random_scales(6, seed=len(graph) + len(chip))
    scales = {k: np.concatenate([[1.0], v]) for k, v in scales.items()}  # and the unmodified chip
    _check_against_backend(g, load_spec(chip), scales)


def test_route_between_units_flips_with_the_scales() -> None:
    g = solar_io.loads(MIXED)
    spec = _no_fp16_matrix()
    m = prepare(g, spec)
    assert len(m.variable) == 1 and m.fixed.shape[0] == 0  # the matmul's route depends on the point
    flops = 2 * 512 * 1024 * 2048
    bf16_matrix, fp16_vector = spec.peak("matrix", "bf16"), spec.peak("vector", "fp16")
    s_m = np.array([1.0, 0.5, 0.1, 0.05])  # 0.1x: 98.9 TFLOP/s matrix < 133.8 vector, the fp16 route wins
    scales = {"matrix": s_m, "dram": np.full(4, 100.0)}  # fast memory: compute binds
    ev = evaluate(m, scales)
    expected = [flops / max(bf16_matrix * s, fp16_vector) for s in s_m]
    assert ev.unfused == pytest.approx(expected, rel=1e-12)
    assert binding_names(ev.unfused_binding) == ["matrix", "matrix", "vector", "vector"]
    _check_against_backend(g, spec, {"matrix": s_m, "vector": np.ones(4), "special": np.ones(4),
                                     "dram": np.full(4, 100.0)})
    _check_against_backend(g, spec, _random_scales(8, seed=7))


def test_matmul_closed_form() -> None:
    g = solar_io.load(GRAPHS / "matmul.yaml")  # bf16, M=1024, N=2048, K=4096
    spec = load_spec("h100-sxm")
    values, scales = hardware_grid([parse_vary("dram_bw=0.01x,1x,...,100x"), parse_vary("peak=0.5x,2x")])
    ev = evaluate(prepare(g, spec), scales)
    M, N, K = 1024, 2048, 4096
    compute = 2 * M * N * K / (spec.peak("matrix", "bf16") * values["peak"])
    memory = 2 * (M * K + K * N + M * N) / (spec.dram_bandwidth * values["dram_bw"])
    assert ev.unfused == pytest.approx(np.maximum(compute, memory), rel=1e-12)
    assert ev.fused == pytest.approx(np.maximum(compute, memory), rel=1e-12)  # one node: the boundary is all
    assert binding_names(ev.fused_binding) == ["memory" if m > c else "matrix" for c, m in zip(compute, memory,
                                                                                              strict=True)]


def test_chunked_evaluation_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    g = solar_io.load(GRAPHS / "attention.yaml")
    m = prepare(g, "b200")
    scales = _random_scales(50, seed=3)
    whole = evaluate(m, scales)
    monkeypatch.setattr(whatif, "_CHUNK", 7)  # a few points per chunk
    parts = evaluate(m, scales)
    for a, b in zip((whole.unfused, whole.unfused_binding, whole.fused, whole.fused_binding),
                    (parts.unfused, parts.unfused_binding, parts.fused, parts.fused_binding), strict=True):
        assert np.array_equal(a, b)


def test_identical_nodes_are_counted_with_their_multiplicity() -> None:
    g = solar_io.load(GRAPHS / "mlp.yaml")
    m = prepare(g, "h100-sxm")
    assert m.counts.sum() == len(g.nodes)
    r = bound(g, "h100-sxm")
    assert m.bytes == r.unfused.bytes
    assert m.boundary_bytes == pytest.approx(r.fused.bytes, rel=1e-15)


# ---------------------------------------------------------------------------- table and command line


def test_run_whatif_rows() -> None:
    result = run_whatif(GRAPHS / "mlp.yaml", ["h100-sxm", "a6000"], ["dram_bw=1x,2x", "peak=1x,4x"])
    assert result.chips == ["h100-sxm", "rtx-a6000"] and result.params == {"dram_bw": [1.0, 2.0],
                                                                             "peak": [1.0, 4.0]}
    assert [(r["dram_bw"], r["peak"], r["chip"], r["fidelity"]) for r in result.rows] == [
        (d, p, c, f) for d in (1.0, 2.0) for p in (1.0, 4.0) for c in ("h100-sxm", "rtx-a6000")
        for f in ("unfused", "fused")]
    base = bound(GRAPHS / "mlp.yaml", "a6000")
    first = next(r for r in result.rows if r["chip"] == "rtx-a6000" and r["fidelity"] == "fused")
    assert first["sol_s"] == pytest.approx(base.fused.time, rel=1e-12) and first["macs"] == base.totals.macs


def _run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    try:
        main(["sweep", *args])
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_whatif_table_and_shift(tmp_path: Path, capsys) -> None:
    out = tmp_path / "w"
    code, stdout, stderr = _run(capsys, str(GRAPHS / "matmul.yaml"), "--hw", "h100-sxm", "--vary",
                                "dram_bw=0.01x,0.1x,...,100x", "-o", str(out), "--no-plot")
    assert code == 0, stderr
    with (out / "sweep.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5 * 2 and list(rows[0])[:3] == ["dram_bw", "chip", "fidelity"]
    # Ridge by hand: the bf16 matmul turns compute-bound once bandwidth exceeds bytes * peak / FLOPs.
    spec = load_spec("h100-sxm")
    M, N, K = 1024, 2048, 4096
    needed = 2 * (M * K + K * N + M * N) * spec.peak("matrix", "bf16") / (2 * M * N * K) / spec.dram_bandwidth
    lo = max(x for x in (0.01, 0.1, 1, 10, 100) if x < needed)
    hi = min(x for x in (0.01, 0.1, 1, 10, 100) if x > needed)
    assert f"h100-sxm unfused: dram_bw {lo:g} -> {hi:g}: memory -> compute" in stdout


@pytest.mark.parametrize("args, message", [
    (["--set", "batch=1,2"], "--set re-captures a model file"),
    (["--cache-aware", "--vary", "peak=2x"], "what-ifs evaluate the unfused and fused bounds"),
    (["--vary", "dram=2x"], "NAME one of dram_bw"),
])
def test_cli_whatif_errors(tmp_path: Path, capsys, args: list[str], message: str) -> None:
    code, _, stderr = _run(capsys, str(GRAPHS / "mlp.yaml"), "--hw", "h100-sxm", "-o", str(tmp_path / "o"), *args)
    assert code == 1 and len(stderr.strip().splitlines()) == 1 and message in stderr
