"""One size parser for every option (``solar_io.units``): kB/KB, MB, GB, TB are powers of 1000,
KiB, MiB, GiB, TiB powers of 1024, a bare number is bytes, units are case-sensitive.

Each option is read through the command line and its value observed where the command reports
it: the cache-aware capacity in ``bound``'s report and ``tiling``'s JSON, whether ``capture``
validates a loop-IR program whose validation needs a hand-computed number of bytes, the budget
in ``check-bounds``'s skip reason, and the bandwidth array of ``hw probe`` (its probe replaced by
a recorder: a real probe takes seconds). Expected values are written as powers (10**3, 2**10).
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml
from paths import ROOT
from typer.testing import CliRunner

from solar_io.backends.roofline import bound
from solar_io.cli.main import app, main
from solar_io.units import SIZE_RULES, SizeError, parse_size, parse_size_int

MLP = ROOT / "examples" / "graphs" / "mlp.yaml"
CONV = ROOT / "examples" / "graphs" / "conv2d.yaml"
pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")


def run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(("text", "want"), [
    ("1", 1), ("1B", 1), ("1e6", 10**6), ("2.5e3", 2500), ("1kB", 10**3), ("1KB", 10**3), ("40MB", 40 * 10**6),
    ("3GB", 3 * 10**9), ("2TB", 2 * 10**12), ("1KiB", 2**10), ("4 MiB", 4 * 2**20), ("2GiB", 2 * 2**30),
    ("1TiB", 2**40), ("1.5KiB", 1536), ("0.3MB", 300_000), (" 7 kB ", 7000)])
def test_units(text: str, want: int) -> None:
    assert parse_size(text, "--x") == want
    assert parse_size_int(text, "--x") == want


@pytest.mark.parametrize(("text", "why"), [
    ("1kb", "case-sensitive"), ("1mb", "case-sensitive"), ("1gib", "case-sensitive"), ("8b", "case-sensitive"),
    ("2G", "ambiguous"), ("4k", "ambiguous"), ("lots", "powers of 1024"), ("0", "positive"), ("-1MB", "positive"),
    ("1e999999", "finite"), ("1PB", "powers of 1000")])
def test_refused_sizes_name_the_option(text: str, why: str) -> None:
    with pytest.raises(SizeError, match=r"^--opt: ") as e:
        parse_size(text, "--opt")
    assert why in str(e.value) and "\n" not in str(e.value)


def test_whole_bytes_where_an_option_counts_bytes() -> None:
    with pytest.raises(SizeError, match="not a whole number of bytes"):
        parse_size_int("0.5", "--budget")
    assert parse_size("0.5", "--capacity") == 0.5


@pytest.mark.parametrize(("text", "want"), [("1KB", 10**3), ("1kB", 10**3), ("1KiB", 2**10), ("1e6", 10**6),
                                            ("2MiB", 2 * 2**20)])
def test_bound_capacity(capsys: pytest.CaptureFixture, text: str, want: int) -> None:
    code, out, err = run(capsys, "bound", str(MLP), "--hw", "h100-pcie", "--capacity", text, "--cache-bound", "floor",
                         "-f", "yaml")
    assert code == 0, err
    assert yaml.safe_load(out)["reports"][0]["cache_aware"]["capacity"] == want
    assert bound(MLP, "h100-pcie", cache_aware=True, cache_bound="floor", capacity=text).cache.capacity == want


def test_tiling_capacity(capsys: pytest.CaptureFixture) -> None:
    for text, want in (("256KB", 256 * 10**3), ("256KiB", 256 * 2**10)):
        code, out, err = run(capsys, "tiling", str(CONV), "--node", "conv", "--capacity", text, "--points", "2",
                             "--json")
        assert code == 0, err
        assert json.loads(out)["capacity"] == want


# A loop-IR matmul whose validation holds x, w and y twice (program and reference executor) at
# fp32: 2 * 4 * 3 * 32 * 32 = 24576 B = 24 KiB exactly, more than 24 kB.
PROGRAM = """\
from solar_io.frontends.loopir import *  # noqa: F403
B = Dim("B", 32)
N = Dim("N", 32)
M = Dim("M", 32)


@kernel
def mm(a: Tensor("B,N"), w: Tensor("N,M"), c: Out("B,M")):
    for b in B:
        for m in M:
            for n in N:
                c[b, m] += a[b, n] * w[n, m]


def model(x: Tensor("B,N"), w: Tensor("N,M", role="weight")):
    return {"y": mm(x, w)}
"""
VALIDATION_BYTES = 2 * 4 * (32 * 32 + 32 * 32 + 32 * 32)


def test_capture_validate_budget(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    src = tmp_path / "prog.py"
    src.write_text(textwrap.dedent(PROGRAM))
    assert VALIDATION_BYTES == 24 * 2**10
    for text, validated in (("24KiB", True), ("24KB", False), ("24kB", False), ("25kB", True),
                            (str(VALIDATION_BYTES), True), (str(VALIDATION_BYTES - 1), False), ("1MB", True)):
        code, _, err = run(capsys, "capture", str(src), "--no-jit", "--validate-budget", text, "-o",
                           str(tmp_path / "g.yaml"))
        assert code == 0, err
        assert f"validation {'passed' if validated else 'skipped'}" in err, (text, err)
    code, _, err = run(capsys, "capture", str(src), "--validate-budget", "2G", "-o", str(tmp_path / "g.yaml"))
    assert code == 1 and err.startswith("error: --validate-budget: ") and err.count("\n") == 1


def test_check_bounds_budget(capsys: pytest.CaptureFixture) -> None:
    model = ROOT / "tests" / "models_measure" / "small_matmul.py"
    for text, want in (("1KB", 10**3), ("1KiB", 2**10)):
        code, out, err = run(capsys, "check-bounds", str(model), "--hw", "h100-pcie", "--budget", text)
        assert code == 0, err
        assert re.search(rf"needs \d+ B to run, over the budget of {want} B", err), err
    code, _, err = run(capsys, "check-bounds", str(model), "--hw", "h100-pcie", "--budget", "1kb")
    assert code == 1 and err.startswith("error: --budget: ") and err.count("\n") == 1


def test_hw_probe_buffer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import solar_io.hardware.probe as probe

    seen = []

    def record(output: Path, config: probe.ProbeConfig) -> None:
        seen.append(config.buffer_bytes)
        raise probe.ProbeError("recorded")

    monkeypatch.setattr(probe, "probe_to_file", record)
    runner = CliRunner()
    for text in ("64MB", "64MiB"):
        res = runner.invoke(app, ["hw", "probe", "-o", str(tmp_path / "cpu.yaml"), "--buffer", text])
        assert res.exit_code == 1 and "recorded" in res.output
    assert seen == [64 * 10**6, 64 * 2**20]
    res = runner.invoke(app, ["hw", "probe", "-o", str(tmp_path / "cpu.yaml"), "--buffer", "64mb"])
    assert res.exit_code == 1 and "--buffer" in res.output and seen == [64 * 10**6, 64 * 2**20]


@pytest.mark.parametrize("command", [["bound"], ["tiling"], ["capture"], ["check-bounds"], ["hw", "probe"]])
def test_help_states_the_rules(command: list[str]) -> None:
    res = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    assert res.exit_code == 0
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", res.output).split())
    assert SIZE_RULES in text, text
