"""--quiet silences the newer-minor-version warning on every command that reads a graph file (issue 20)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from paths import ROOT

from solar_io.cli.main import _Quiet, main

WARNING = "version 1.9 is newer than this solar-io reads"


def run(args: list[str]) -> int:
    try:
        main(args)
    except SystemExit as e:
        return int(e.code or 0)
    return 0


@pytest.fixture
def newer(tmp_path: Path) -> Path:
    text = (ROOT / "examples/graphs/mlp.yaml").read_text()
    assert '\nversion: "1.0"\n' in text
    f = tmp_path / "mlp19.yaml"
    f.write_text(text.replace('\nversion: "1.0"\n', '\nversion: "1.9"\n', 1))
    return f


COMMANDS = {
    "check": ["check", "{f}"],
    "info": ["info", "{f}"],
    "fmt": ["fmt", "--check", "{f}"],
    "bound": ["bound", "{f}", "--hw", "h100-sxm", "--no-cache-aware", "--format", "json"],
    "tiling": ["tiling", "{f}", "--node", "fc1", "--capacity", "1MiB", "--points", "2", "--json"],
    "export": ["export", "timeloop", "{f}", "-o", "{tmp}/tl"],
    "graph": ["graph", "{f}", "-o", "{tmp}/g.mmd"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_quiet_hides_the_newer_version_warning(command: str, newer: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    args = [a.format(f=newer, tmp=tmp_path / "loud") for a in COMMANDS[command]]
    code = run(args)
    loud = capsys.readouterr()
    assert WARNING in loud.out + loud.err  # the warning is there to hide
    args = [a.format(f=newer, tmp=tmp_path / "quiet") for a in COMMANDS[command]]
    assert run(["--quiet", *args]) == code
    quiet = capsys.readouterr()
    assert WARNING not in quiet.out + quiet.err and "warning:" not in quiet.err
    if command == "check":  # check's report lists errors only under --quiet
        assert quiet.out == "".join(line + "\n" for line in loud.out.splitlines() if "warning:" not in line)
    else:  # results are unchanged (paths named in them differ by the output folder only)
        assert quiet.out == loud.out.replace(str(tmp_path / "loud"), str(tmp_path / "quiet"))


def test_quiet_stderr_drops_file_line_field_warnings() -> None:
    real = io.StringIO()
    q = _Quiet(real)
    q.write("g.yaml:2: version: warning: version 1.9 is newer\n  continued\n")
    q.write("g.yaml: note: something\nerror: g.yaml: node x: bad\n")
    q.write("error: a: b: warning: an error that quotes a warning stays\n")
    q.flush()
    assert real.getvalue() == "error: g.yaml: node x: bad\nerror: a: b: warning: an error that quotes a warning stays\n"
