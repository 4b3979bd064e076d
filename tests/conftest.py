"""Shared fixtures: the repository root, a CLI runner that uses real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# CI must not fail on a draw no earlier run made: property tests replay the same examples every run
# (derandomize). HYPOTHESIS_PROFILE=explore draws fresh random examples, ten times as many, to hunt
# for new counterexamples locally; add any it finds as an explicit @example.
settings.register_profile("ci", derandomize=True, database=None)  # no shared state between xdist workers
settings.register_profile("explore", derandomize=False, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``solar-io ARGS`` in a fresh interpreter and capture its output. The timeout is a hang
    guard only: the longest command (the zero-violation check-bounds) takes 90 s on a quiet machine
    and went past 300 s at a load of 15."""
    return subprocess.run([sys.executable, "-m", "solar_io", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=1200)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def matmul_text() -> str:
    return (ROOT / "examples" / "graphs" / "matmul.yaml").read_text()


@pytest.fixture(scope="session")
def fast_probe(tmp_path_factory):
    """(spec, path) of this machine from one fast probe (``ProbeConfig.fast()``), shared by the
    session (once per xdist worker that needs it; the modules that use it are also marked
    ``xdist_group("probe")`` for --dist loadgroup); ``tests/hardware/test_hardware_probe.py`` checks the file."""
    from solar_io.hardware.probe import ProbeConfig, probe_to_file

    path = tmp_path_factory.mktemp("probe") / "cpu.yaml"
    return probe_to_file(path, ProbeConfig.fast()), path

