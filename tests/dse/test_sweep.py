"""``solar-io sweep`` on model files: grid grammar, source binding, re-capture per point, hand-derived
bounds and regime shifts, failed points, identical tables from the local and Ray executors."""

from __future__ import annotations

import ast
import csv
from pathlib import Path

import pytest

from solar_io.cli.main import main
from solar_io.dse.sweep import (
    SweepError,
    bind_source,
    grid,
    parse_assignments,
    parse_values,
    regime_shifts,
    run_sweep,
    sweepable_params,
)
from solar_io.hardware import load_spec

pytest.importorskip("torch")

# A single fp32 matmul y = x @ W^T: x is (batch, d), W is (d, d); batch 3 makes get_inputs raise.
LINEAR = '''import torch
import torch.nn as nn

SWEEPABLE = {"d": 256}
D = SWEEPABLE["d"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, D, bias=False)

    def forward(self, x):
        return self.fc(x)


def get_inputs(batch=4):
    if batch == 3:
        raise ValueError("batch 3 is not supported")
    return [torch.randn(batch, D)]
'''

CHIP = "h100-sxm"


@pytest.fixture
def linear_file(tmp_path: Path) -> Path:
    path = tmp_path / "lin.py"
    path.write_text(LINEAR, encoding="utf-8")
    return path


def hand_bound(batch: int, d: int) -> tuple[float, str]:
    """(SOL seconds, regime) of the fp32 matmul on the H100 SXM under --strict-fp32, derived by hand:
    2*B*d^2 FLOPs; the chip lists no fp32 matrix peak, so they run at the fp32 vector peak; each of x,
    W, y moves once at 4 bytes per element."""
    spec = load_spec(CHIP)
    compute = 2 * batch * d * d / spec.peak("vector", "fp32")
    memory = 4 * (batch * d + d * d + batch * d) / spec.dram_bandwidth
    return max(compute, memory), "compute" if compute > memory else "memory"


# ---------------------------------------------------------------------------- grid values


@pytest.mark.parametrize("text, expected", [
    ("1,2,4,...,64", [1, 2, 4, 8, 16, 32, 64]),
    ("512,1024,...,8192", [512, 1024, 2048, 4096, 8192]),  # two terms: geometric wins
    ("8,16,24,...,64", [8, 16, 24, 32, 40, 48, 56, 64]),  # three terms with one difference
    ("0,8,...,32", [0, 8, 16, 24, 32]),  # starts at zero: no ratio, arithmetic
    ("64,32,...,4", [64, 32, 16, 8, 4]),
    ("10,7,...,1", [10, 7, 4, 1]),
    ("0.5,1,...,4", [0.5, 1.0, 2.0, 4.0]),
    ("3, 5 ,9", [3, 5, 9]),
    ("bf16,fp16", ["bf16", "fp16"]),
])
def test_parse_values(text: str, expected: list) -> None:
    values = parse_values(text)
    assert values == expected
    assert [type(v) for v in values] == [type(v) for v in expected]


@pytest.mark.parametrize("text, message", [
    ("1,2,4,...,50", "geometric progression with ratio 2 does not reach 50"),
    ("1,...,8", "needs two terms before '...'"),
    ("1,2,...", "'...' must come just before the last value"),
    ("1,2,5,...,20", "neither a geometric nor an arithmetic"),
    ("a,b,...,z", "needs numbers"),
    ("1,,2", "empty value"),
])
def test_parse_values_errors(text: str, message: str) -> None:
    with pytest.raises(SweepError, match=message):
        parse_values(text)


def test_assignments_and_grid_order() -> None:
    params = parse_assignments(["batch=1,2", "seq=8,16,...,32"])
    assert params == {"batch": [1, 2], "seq": [8, 16, 32]}
    assert grid(params) == [{"batch": b, "seq": s} for b in (1, 2) for s in (8, 16, 32)]
    with pytest.raises(SweepError, match="expected NAME=VALUES"):
        parse_assignments(["batch"])
    with pytest.raises(SweepError, match="batch is given twice"):
        parse_assignments(["batch=1", "batch=2"])


# ---------------------------------------------------------------------------- binding a model file


def test_bind_source_rewrites_only_the_declared_defaults() -> None:
    text = ('SWEEPABLE = {"d_model": 1024, "heads": 16}  # comment kept\n'
            "WIDTH = SWEEPABLE['d_model'] * 2\n"
            "def get_inputs(batch=8, *, seq=1024):\n    return batch, seq, WIDTH\n"
            "def get_init_inputs(layers=2):\n    return layers\n")
    assert sweepable_params(text, "m.py") == {"batch": "8", "seq": "1024", "layers": "2", "d_model": "1024",
                                              "heads": "16"}
    out = bind_source(text, "m.py", {"d_model": 64, "seq": 4096, "layers": 3})
    assert out == text.replace("1024,", "64,").replace("seq=1024", "seq=4096").replace("layers=2", "layers=3")
    ns: dict = {}
    exec(compile(ast.parse(out), "m.py", "exec"), ns)  # the bound text runs with the new values
    assert ns["WIDTH"] == 128 and ns["get_inputs"]() == (8, 4096, 128) and ns["get_init_inputs"]() == 3
    with pytest.raises(SweepError, match=r"m.py: no sweepable parameter 'depth' \(declared: batch, d_model, heads"):
        bind_source(text, "m.py", {"depth": 2})


# ---------------------------------------------------------------------------- sweeping a model


def test_sweep_matches_hand_bounds_and_reports_failed_point(linear_file: Path) -> None:
    params = {"batch": [1, 3, 64, 512], "d": [256, 512]}
    result = run_sweep(linear_file, params, [CHIP], progress=False, strict_fp32=True)
    ok_points = [(b, d) for b in (1, 64, 512) for d in (256, 512)]
    assert [(p["batch"], p["d"]) for p, _ in result.failures] == [(3, 256), (3, 512)]
    assert all("get_inputs() raised ValueError: batch 3 is not supported" in e for _, e in result.failures)
    assert [(r["batch"], r["d"], r["fidelity"]) for r in result.rows] == [
        (b, d, f) for b, d in ok_points for f in ("unfused", "fused")]
    for row in result.rows:
        b, d = row["batch"], row["d"]
        sol, regime = hand_bound(b, d)
        assert row["chip"] == CHIP and row["macs"] == b * d * d and row["flops"] == 2 * b * d * d
        assert row["bytes"] == 4 * (2 * b * d + d * d)  # one node: all traffic crosses the boundary
        assert row["sol_s"] == pytest.approx(sol, rel=1e-12)
        assert row["regime"] == regime and row["binding"] == ("vector" if regime == "compute" else "memory")
        assert row["opaque"] == 0 and row["validation"] == "skipped"
    # Hand-derived shift: the ridge of the fp32 vector peak over bandwidth is crossed between the
    # batch sizes whose regimes differ.
    expected = [(d, a, b) for d in (256, 512) for a, b in ((1, 64), (64, 512))
                if hand_bound(a, d)[1] != hand_bound(b, d)[1]]
    shifts = regime_shifts(result.rows, ["batch", "d"])
    assert expected and sorted({(dict(s.fixed)["d"], s.before, s.after) for s in shifts if s.parameter == "batch"}) \
        == expected
    assert all(s.regime_from == "memory" and s.regime_to == "compute" for s in shifts if s.parameter == "batch")


def test_sweep_validates_points_when_asked(linear_file: Path) -> None:
    result = run_sweep(linear_file, {"batch": [2], "d": [16]}, [CHIP], validate=True, progress=False)
    assert {r["validation"] for r in result.rows} == {"passed"}


def test_cache_aware_rows(linear_file: Path) -> None:
    result = run_sweep(linear_file, {"batch": [256], "d": [512]}, [CHIP], cache_aware=True, progress=False,
                       strict_fp32=True)
    by_fid = {r["fidelity"]: r for r in result.rows}
    assert list(by_fid) == ["unfused", "fused", "cache-aware"]
    ca, fused = by_fid["cache-aware"], by_fid["fused"]
    # Finite on-chip memory can only add traffic to the fused (unlimited memory) bound: at least the
    # compulsory bytes of x, W and y, and at least the hand-derived bound of the matmul.
    assert ca["bytes"] >= 4 * (2 * 256 * 512 + 512 * 512)
    assert ca["sol_s"] >= fused["sol_s"] * (1 - 1e-12) and ca["sol_s"] >= hand_bound(256, 512)[0] * (1 - 1e-12)


def test_unknown_parameter_fails_before_any_capture(linear_file: Path) -> None:
    with pytest.raises(SweepError, match=r"lin.py: no sweepable parameter 'seq' \(declared: batch, d\)"):
        run_sweep(linear_file, {"seq": [1]}, [CHIP], progress=False)


# ---------------------------------------------------------------------------- the command line


def _run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    try:
        main(["sweep", *args])
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_writes_table_plots_and_shifts(linear_file: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code, stdout, stderr = _run(capsys, str(linear_file), "--set", "batch=1,4,...,256", "--set", "d=512",
                                "--hw", f"{CHIP},a6000", "-o", str(out), "--strict-fp32")
    assert code == 0, stderr
    with (out / "sweep.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5 * 2 * 2
    assert list(rows[0]) == ["batch", "d", "chip", "fidelity", "sol_s", "binding", "regime", "macs", "flops",
                             "bytes", "opaque", "validation"]
    for row in rows:
        if row["chip"] == CHIP:
            assert float(row["sol_s"]) == pytest.approx(hand_bound(int(row["batch"]), 512)[0], rel=1e-12)
    a, b = next((x, y) for x, y in zip((1, 4, 16, 64), (4, 16, 64, 256), strict=True)
                if hand_bound(x, 512)[1] != hand_bound(y, 512)[1])
    assert f"{CHIP} unfused: batch {a} -> {b} (d=512): memory -> compute" in stdout
    for name in ("sol_vs_batch.png",):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "sol_vs_d.png").exists()  # one value: nothing to plot
    assert "sweep.yaml" in stdout


def test_cli_failed_point_is_reported_with_exit_1(linear_file: Path, tmp_path: Path, capsys) -> None:
    code, stdout, stderr = _run(capsys, str(linear_file), "--set", "batch=2,3", "--hw", CHIP, "-o",
                                str(tmp_path / "o"), "--no-plot")
    assert code == 1
    assert "1 point(s) x 1 chip(s), 2 rows, 1 failed point(s)" in stdout
    assert "lin.py [batch=3]: failed: lin.py: get_inputs() raised ValueError: batch 3 is not supported" in stderr


@pytest.mark.parametrize("args, message", [
    (["--vary", "dram_bw=2x"], "--vary scales the hardware of a graph file"),
    (["--set", "depth=2"], "no sweepable parameter 'depth'"),
    ([], "give at least one --set"),
    (["--set", "batch=1", "--executor", "dask"], "unknown executor 'dask'"),
])
def test_cli_errors_are_one_line(linear_file: Path, tmp_path: Path, capsys, args: list[str], message: str) -> None:
    code, _, stderr = _run(capsys, str(linear_file), "--hw", CHIP, "-o", str(tmp_path / "o"), *args)
    assert code == 1
    assert len(stderr.strip().splitlines()) == 1 and message in stderr
