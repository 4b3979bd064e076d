"""``solar-io check-bounds`` and ``solar-io report``: violations, failures, tables, plots, and the
zero-violation check over the PyTorch corpus on this machine's probed spec."""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import pytest
import yaml
from inprocess import run_main
from paths import ROOT

from solar_io.reports.corpus import CaseResult, Violation
from solar_io.reports.tables import folder_summary, geomean, to_csv

MODELS = ROOT / "tests" / "models_measure"

# check-bounds and report run their cases in the calling process (--jobs 1): these tests check exit
# status, output and files, so they run the CLI in this process (a fresh interpreter costs seconds of
# CPU importing torch); the zero-violation test below keeps a real process (the `cli` fixture).


pytestmark = pytest.mark.xdist_group("probe")  # uses the fast probe: one per run, shared by workers (conftest)


@pytest.fixture(scope="module")
def cpu_spec(fast_probe) -> Path:
    return fast_probe[1]  # one fast probe for the session (tests/conftest.py)


@pytest.fixture(scope="module")
def slow_chip(cpu_spec, tmp_path_factory) -> Path:
    """The probed spec with DRAM at 1 kB/s and every peak at 1 kFLOP/s: any real run beats its SOL."""
    doc = yaml.safe_load(cpu_spec.read_text())
    doc["name"] = "slow-chip"
    for level in doc["memory"]:
        if level.get("bandwidth"):
            level["bandwidth"] = 1e3
    for unit in doc["units"].values():
        for peak in unit.values():
            peak["peak"] = 1e3
    path = tmp_path_factory.mktemp("hw") / "slow.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_violation_is_reported_with_nodes(slow_chip, tmp_path):
    out = tmp_path / "cases.yaml"
    res = run_main("check-bounds", str(MODELS / "small_matmul.py"), "--hw", str(slow_chip), "--repeats", "2",
              "--min-time", "0", "-o", str(out))
    assert res.returncode == 1, res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("VIOLATION")]
    assert {ln.split(": ")[1].split(" SOL")[0] for ln in lines} == {"unfused", "fused", "cache-aware"}
    assert "(aten.matmul)" in res.stdout and "on slow-chip" in res.stdout  # names the op and chip
    assert "1 models: 0 within every bound, 1 violations, 0 failed, 0 skipped" in res.stdout
    (case,) = yaml.safe_load(out.read_text())["cases"]
    # hand derivation: 2*256^3 FLOPs at 1e3 FLOP/s; the matmul reads 2 and writes 1 fp32 256x256 at 1e3 B/s
    assert case["sol_fused_s"] == pytest.approx(max(2 * 256**3, 3 * 4 * 256**2) / 1e3)
    assert case["status"] == "violation" and len(case["violations"]) == 3


# Plumbing, not the bound: the shipped H100 spec (any run on this CPU is far slower than its SOL), so
# no probe and no quiet machine; the zero-violation test below holds runs to this machine's probe.
FAST_CHIP = "h100-sxm"


def test_failures_and_skips_never_stop_the_rest(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    shutil.copy(MODELS / "small_softmax.py", folder / "a_good.py")
    (folder / "b_raises.py").write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        raise RuntimeError('boom')\n\n\ndef get_inputs():\n    return [torch.ones(3)]\n")
    (folder / "c_syntax.py").write_text("import torch\ndef (:\n")
    shutil.copy(MODELS / "small_matmul.py", folder / "d_good.py")
    res = run_main("check-bounds", str(folder), "--hw", FAST_CHIP, "--repeats", "2", "--min-time", "0")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "4 models: 2 within every bound, 0 violations, 2 failed, 0 skipped" in res.stdout
    failed = [ln for ln in res.stderr.splitlines() if ln.startswith("FAILED")]
    assert len(failed) == 2 and "b_raises.py" in failed[0] and "c_syntax.py" in failed[1]
    res = run_main("check-bounds", str(folder / "d_good.py"), "--hw", FAST_CHIP, "--budget", "1KiB")
    assert res.returncode == 0 and "0 within every bound, 0 violations, 0 failed, 1 skipped" in res.stdout
    assert "SKIPPED" in res.stderr and "needs" in res.stderr
    res = run_main("check-bounds", str(tmp_path / "nope"), "--hw", FAST_CHIP)
    assert res.returncode == 1 and res.stderr.strip() == f"error: {tmp_path / 'nope'}: no such file or folder"


def _case(name: str, folder: str, status: str, median: float | None, sol: dict[str, float]) -> CaseResult:
    r = CaseResult(f"/x/{folder}/{name}.py", status, sol=dict(sol))
    if median is not None:
        r.measured = {"median": median, "min": median, "iqr": 0.0}
    return r


def test_tables_geomean_and_csv():
    rs = [_case("a", "f1", "ok", 8.0, {"unfused": 2.0, "fused": 1.0}),
          _case("b", "f1", "ok", 2.0, {"unfused": 1.0, "fused": 0.5}),
          _case("c", "f1", "failed", None, {}),
          _case("d", "f2", "violation", 1.0, {"unfused": 2.0, "fused": 0.5})]
    rs[3].violations = [Violation("unfused", 2.0, 1.0)]
    f1, f2 = folder_summary(rs)
    # headroom a: 4 (unfused), 8 (fused); b: 2, 4 -> geometric means sqrt(8), sqrt(32)
    assert f1["geomean_headroom_unfused"] == pytest.approx(math.sqrt(8))
    assert f1["geomean_headroom_fused"] == pytest.approx(math.sqrt(32))
    assert (f1["ok"], f1["failed"], f2["violation"]) == (2, 1, 1)
    assert f2["geomean_headroom_unfused"] == pytest.approx(0.5)
    assert geomean([]) is None and geomean([None, 0.0]) is None
    rows = list(csv.DictReader(to_csv(rs).splitlines()))
    assert [r["model"] for r in rows] == ["a", "b", "c", "d"]
    assert float(rows[0]["headroom_fused"]) == 8.0 and rows[2]["headroom_fused"] == ""


def test_report_folder(tmp_path):
    out = tmp_path / "report"
    res = run_main("report", str(MODELS), "-o", str(out), "--hw", FAST_CHIP, "--repeats", "2")
    assert res.returncode == 0, res.stderr
    md = (out / "report.md").read_text()
    rows = list(csv.DictReader((out / "report.csv").read_text().splitlines()))
    assert sorted(r["model"] for r in rows) == ["small_matmul", "small_mlp", "small_softmax"]
    for r in rows:
        assert r["status"] == "ok"
        for f in ("unfused", "fused", "cache_aware"):
            assert float(r[f"headroom_{f}"]) == pytest.approx(float(r["measured_median_s"]) / float(r[f"sol_{f}_s"]))
            assert float(r[f"headroom_{f}"]) >= 1
    want = geomean([float(r["headroom_fused"]) for r in rows])
    assert f"{want:.3g}x" in md and "| models_measure | 3 | 3 | 0 | 0 | 0 |" in md
    png = (out / "roofline.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    doc = yaml.safe_load((out / "report.yaml").read_text())
    assert {c["model"] for c in doc["cases"]} == {r["model"] for r in rows}
    assert all(set(c["phases_s"]) == {"capture", "bound", "measure"} for c in doc["cases"])


def test_report_bounds_only(cli, tmp_path):  # `report` in a real interpreter (python -m solar_io)
    out = tmp_path / "r"
    res = cli("report", str(MODELS / "small_mlp.py"), "-o", str(out), "--hw", "h100-sxm", "--no-measure",
              "--no-plot")
    assert res.returncode == 0, res.stderr
    (row,) = list(csv.DictReader((out / "report.csv").read_text().splitlines()))
    assert row["measured_median_s"] == "" and float(row["sol_fused_s"]) > 0
    assert not (out / "roofline.png").exists()


# Stress models bound by compute. The streaming ones (add, row sum, transpose, gather, pooling, ...)
# test the DRAM bandwidth, which on this VM reads 36 or 62 GB/s from one process to the next, so a
# spec that measured it cannot be asserted against here without flaking; benchmarks/bench_report.py
# runs all of them with no tolerance and prints every margin.
COMPUTE_BOUND = ("gemm_fp32", "gemm_bf16", "bmm_batched", "mlp_wide", "conv3x3", "attention_sdpa",
                 "attention_causal")


@pytest.mark.slow
@pytest.mark.serial  # make test runs it alone: a probe made beside other tests' load sets peaks too low
def test_zero_violations_on_this_machine(cli, tmp_path):
    """The PyTorch corpus at its own sizes and the compute-bound SOL stress models (sized to approach
    the chip's peaks: large GEMMs, conv, MLP, attention) never beat a bound, on the spec the full
    probe writes for this machine (GEMMs up to 2048, the stress models' size).

    The probe's clock is the one its fastest GEMM proves (a VM hides its boost clock), so that GEMM
    runs at 100% of the peak by construction, and this VM's speed drifts: three probes a minute apart
    implied 3.15, 3.35 and 3.41 GHz. Runs within 5% of such a measured peak are that drift, not a
    bound bug (the bugs this check found, now fixed, were 1.7% to 14% under)."""
    spec, out = tmp_path / "cpu.yaml", tmp_path / "cases.yaml"
    res = cli("hw", "probe", "-o", str(spec))
    assert res.returncode == 0, res.stderr
    # A CPU without bf16 units runs bf16 GEMMs in software (one 2048^3 took 58.6 s on an AVX2 VM):
    # the probe says so, and the bf16 stress GEMM, hundreds of times slower than its bound, is left out.
    gemm = yaml.safe_load(spec.read_text())["measured"]["gemm"]
    software = "bf16" in gemm and "runs in software" in gemm["bf16"]["note"]
    names = [n for n in COMPUTE_BOUND if not (software and n == "gemm_bf16")]
    stress = [str(ROOT / "benchmarks" / "sol_models" / f"{name}.py") for name in names]
    res = cli("check-bounds", str(ROOT / "tests" / "models"), *stress,
              "--hw", str(spec), "--repeats", "3", "--min-time", "0", "--tolerance", "0.05", "-o", str(out),
              "--jobs", "2")  # capture and bound on two processes; every timing still runs alone
    doc = yaml.safe_load(out.read_text())
    bad = [c for c in doc["cases"] if c["status"] in ("violation", "failed")]
    assert res.returncode == 0 and not bad, res.stdout[-3000:] + res.stderr[-2000:]
    assert sum(c["status"] == "ok" for c in doc["cases"]) >= 100
    assert all(doc["cases"][-k]["bottleneck"] == "matrix" for k in range(1, len(stress) + 1))


def test_tolerance_only_forgives_runs_within_it():
    from solar_io.reports.corpus import find_violations

    r = _case("m", "f", "ready", None, {"unfused": 1.0, "fused": 0.5})
    assert [v.fidelity for v in find_violations(r, 0.98)] == ["unfused"]
    assert find_violations(r, 0.98, tolerance=0.03) == []
    assert [v.fidelity for v in find_violations(r, 0.96, tolerance=0.03)] == ["unfused"]
    assert find_violations(r, 1.0) == []  # equal to the bound is not below it
    # a runtime that fuses ops (jax.jit, torch.compile) is held to the fused fidelities only
    assert find_violations(r, 0.9, judged=("fused", "cache-aware")) == []
    assert [v.fidelity for v in find_violations(r, 0.4, judged=("fused", "cache-aware"))] == ["fused"]
