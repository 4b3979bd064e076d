"""Command-line conventions: results on stdout and diagnostics on stderr, --quiet, python -m solar_io,
shell completion, tiling's node choice, progress only on a terminal, exporters' one summary line."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

import pytest
from paths import ROOT

from solar_io import progress
from solar_io.cli.main import main

GOLDEN_OPAQUE = ROOT / "tests/golden/v1.0/opaque_sparse.yaml"


def run(args: list[str]) -> int:
    try:
        main(args)
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_python_dash_m_runs_the_cli() -> None:
    r = subprocess.run([sys.executable, "-m", "solar_io", "--version"], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 0 and r.stdout.startswith("solar-io ") and "format" in r.stdout


def test_help_offers_completion_and_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--install-completion" in out and "--quiet" in out


def test_tiling_picks_the_only_einsum_and_lists_several(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["tiling", str(ROOT / "examples/graphs/matmul.yaml"), "--capacity", "1MiB", "--points", "2",
                "--json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["node"] == "mm"
    assert run(["tiling", str(ROOT / "examples/graphs/mlp.yaml"), "--capacity", "1MiB"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "choose one with --node" in err
    # most MACs first: the two matmuls (512*4096*1024 MACs each) before the bias adds and the activation
    listed = err.split(": ")[-1].split(", ")
    assert set(listed[:2]) == {"fc1", "fc2"} and set(listed) == {"fc1", "fc1_bias", "act", "fc2", "fc2_bias"}


def test_quiet_drops_warnings_keeps_results_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bound", str(GOLDEN_OPAQUE), "--hw", "h100-sxm", "--format", "json", "--no-cache-aware"]
    assert run(args) == 0
    loud = capsys.readouterr()
    assert "warning:" in loud.err
    assert run(["--quiet", *args]) == 0
    quiet = capsys.readouterr()
    assert quiet.out == loud.out and "warning:" not in quiet.err and "note:" not in quiet.err
    assert run(["-q", "bound", str(ROOT / "no-such.yaml"), "--hw", "h100-sxm"]) == 1
    err = capsys.readouterr().err
    assert "no-such.yaml" in err and len(err.strip().splitlines()) == 1
    assert type(sys.stderr).__name__ != "_Quiet" and not progress.is_quiet()  # restored after the command


def test_exporters_print_one_summary_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = str(ROOT / "examples/graphs/attention.yaml")
    assert run(["export", "timeloop", src, "-o", str(tmp_path / "tl")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    files = sorted((tmp_path / "tl").iterdir())
    assert len(out) == 1 and f"{len(files)} Timeloop file(s) written" in out[0]
    assert run(["export", "timeloop", src, "-o", str(tmp_path / "tl2"), "--verbose"]) == 0
    assert sorted(capsys.readouterr().out.split()) == sorted(str(tmp_path / "tl2" / f.name) for f in files)


def test_many_skipped_nodes_are_counted_by_reason() -> None:
    from solar_io.cli.export import LISTED_SKIPS, skip_summary
    from solar_io.exporters.common import ExportResult, Skip

    many = ExportResult(files=(), skipped=tuple(Skip(f"g{i}", "gather has no affine form") for i in range(20))
                        + (Skip("sort", "opaque: sort"),))
    (line,) = skip_summary(many, "Timeloop")
    assert line.startswith("warning: 21 node(s) not exported to Timeloop: 20 x gather has no affine form (e.g. g0, g1)")
    assert "1 x opaque: sort (e.g. sort)" in line
    few = ExportResult(files=(), skipped=tuple(Skip(f"g{i}", "r") for i in range(LISTED_SKIPS)))
    assert skip_summary(few, "Timeloop") == few.warnings("Timeloop")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_and_after_the_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    with progress.step("long step", delay=0.0):
        time.sleep(0.2)
    assert piped.getvalue() == ""
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    with progress.step("quick step", delay=5.0):
        pass
    assert tty.getvalue() == ""  # ended before its delay: nothing drawn
    with progress.step("long step", delay=0.0):
        time.sleep(0.3)
    assert "long step" in tty.getvalue()
    progress.set_quiet(True)
    try:
        quiet = _Tty()
        monkeypatch.setattr(sys, "stderr", quiet)
        with progress.step("long step", delay=0.0):
            time.sleep(0.2)
        assert quiet.getvalue() == ""
    finally:
        progress.set_quiet(False)
